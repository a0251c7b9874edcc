package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/coordinator"
	"github.com/quorumsql/quorum/pkg/explorer"
	"github.com/quorumsql/quorum/pkg/generator"
	"github.com/quorumsql/quorum/pkg/localredis"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/voter"
)

func newRunCmd() *cobra.Command {
	var (
		cf        clusterFlags
		lf        llmFlags
		rf        runFlags
		stateDir  string
		explorers int
	)
	cmd := &cobra.Command{
		Use:   "run --dataset DIR",
		Short: "Run ReFoRCE over a dataset with every role in this process (embedded NATS, local redis-server)",
		Long: `run is the one command for a user: it starts an embedded NATS server with
JetStream and a local redis-server (or joins --nats-url / --redis-url), the
simulated LLM when no LLM is configured (said loudly), and the coordinator,
generator workers, explorer workers and voter as goroutines over real
connections. It writes <instance_id>.sql/.csv and run.json and prints the
summary. State lives in --state-dir, so an interrupted run resumes with
--run-id.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			rf.defaults()
			if err := queue.CheckToken("--run-id", rf.runID); err != nil {
				return err
			}
			if stateDir == "" {
				stateDir = filepath.Join(rf.out, ".state")
			}
			if cf.natsURL == "" {
				dir := filepath.Join(stateDir, "nats")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				srv, err := queue.StartEmbedded(dir, -1)
				if err != nil {
					return err
				}
				defer srv.Shutdown()
				cf.natsURL = srv.URL()
			}
			if cf.redisURL == "" {
				dir := filepath.Join(stateDir, "redis")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return err
				}
				srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true})
				if err != nil {
					return err
				}
				defer srv.Stop()
				cf.redisURL = srv.URL()
			}
			m, ds, err := rf.manifest("")
			if err != nil && rf.dataset != "" {
				return err
			}
			lim, err := cf.limiter(ctx)
			if err != nil {
				return err
			}
			client, label, stop, err := lf.client(ds, w, lim)
			if err != nil {
				return err
			}
			defer stop()
			env, cleanup, err := cf.env(ctx, "run", client)
			if err != nil {
				return err
			}
			defer cleanup()
			if stored, err := env.State.Manifest(ctx, rf.runID); err == nil {
				m = stored
				fmt.Fprintf(w, "Resuming run %s (%d examples).\n", m.Run, len(m.Examples))
			} else if m == nil {
				return err
			} else {
				m.LLM = label
			}
			fmt.Fprintf(w, "Run %s: %d examples x %d candidates; outputs in %s (resume with --run-id %s --out %s)\n",
				m.Run, len(m.Examples), m.Votes, rf.out, m.Run, rf.out)

			wctx, cancelWorkers := context.WithCancel(context.WithoutCancel(ctx))
			var wg sync.WaitGroup
			start := func(f func(context.Context) error) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := f(wctx); err != nil {
						env.Log.Error("role stopped")
					}
				}()
			}
			whs := cf.warehouses
			start(func(c context.Context) error { return voter.Run(c, voter.Config{Env: env, Concurrency: 4}) })
			start(func(c context.Context) error {
				return generator.Run(c, generator.Config{Env: env, Warehouses: whs, Concurrency: cf.concurrency})
			})
			start(func(c context.Context) error {
				return explorer.Run(c, explorer.Config{Env: env, Warehouses: whs, Concurrency: explorers})
			})
			rep, err := coordinator.Run(ctx, coordinator.Config{Env: env, Manifest: m, Out: rf.out, Progress: w, Terminal: coordinator.IsTerminal(os.Stdout)})
			cancelWorkers()
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(40 * time.Second):
			}
			if err != nil {
				return err
			}
			printSummary(w, rep, rf.out)
			return nil
		},
	}
	cf.register(cmd, true)
	lf.register(cmd)
	rf.register(cmd)
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "where the embedded NATS and local Redis keep their data (default <out>/.state)")
	cmd.Flags().IntVar(&explorers, "explorers", 8, "exploration tasks handled at once")
	return cmd
}
