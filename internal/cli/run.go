package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/agents/ensemble"
	"github.com/quorumsql/quorum/pkg/agents/raise"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// optionList is an agent's options as NAME=VALUE, sorted.
func optionList(opts map[string]string) string {
	var out []string
	for k, v := range opts {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// raiseWarnings says when a run of RAISE, alone or in an ensemble, sends
// two or three of its final roles to one model: the paper's candidates come
// from three different models (docs/agents/raise.md), so such a run's
// Best-of-N is not the paper's setup.
func raiseWarnings(agentName string, opts map[string]string, cfg llm.Config) []string {
	if !runsRAISE(agentName, opts) {
		return nil
	}
	var models []string
	roles, where := map[string][]string{}, map[string][]string{}
	for _, r := range raise.FinalRoles {
		model, ep, url := roleModel(cfg, r)
		if roles[model] == nil {
			models = append(models, model)
		}
		roles[model] = append(roles[model], string(r))
		if at := fmt.Sprintf("%s (%s)", ep, url); !slices.Contains(where[model], at) {
			where[model] = append(where[model], at)
		}
	}
	var out []string
	for _, model := range models {
		rs := roles[model]
		if len(rs) < 2 {
			continue
		}
		both, at := "both", "endpoint "+where[model][0]
		if len(rs) > 2 {
			both = "all"
		}
		if len(where[model]) > 1 {
			at = "endpoints " + strings.Join(where[model], ", ")
		}
		out = append(out, fmt.Sprintf("raise: %s and %s %s resolve to model %s at %s; the paper uses three different models (see docs/agents/raise.md)",
			strings.Join(rs[:len(rs)-1], ", "), rs[len(rs)-1], both, model, at))
	}
	return out
}

// runsRAISE reports whether the agent is RAISE or an ensemble with RAISE
// among its members.
func runsRAISE(agentName string, opts map[string]string) bool {
	name := raise.Definition().Name
	if agentName == name {
		return true
	}
	def, err := agents.Builtin().Lookup(agentName)
	if err != nil {
		return false
	}
	full, err := def.CheckOptions(opts)
	if err != nil {
		return false
	}
	members, ok := full[ensemble.OptMembers]
	return ok && slices.ContainsFunc(strings.Split(members, ","), func(m string) bool { return strings.TrimSpace(m) == name })
}

// warn writes each warning on w as a line of its own.
func warn(w io.Writer, warnings []string) {
	for _, s := range warnings {
		fmt.Fprintln(w, "warning:", s)
	}
}

func newRunCmd() *cobra.Command {
	var (
		cf        clusterFlags
		lf        llmFlags
		rf        runFlags
		stateDir  string
		explorers int
	)
	var retryFailed bool
	var maxCost float64
	cmd := &cobra.Command{
		Use:   "run --dataset DIR",
		Short: "Run an agent (default ReFoRCE) over a dataset with every role in this process (embedded NATS, local redis-server)",
		Long: `run is the one command for a user: it starts an embedded NATS server with
JetStream and a local redis-server (or joins --nats-url / --redis-url), the
simulated LLM when no LLM is configured (said loudly), and the coordinator,
generator workers, explorer workers and voter as goroutines over real
connections. It writes <instance_id>.sql/.csv, run.json and report.html and prints the
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
			if maxCost < 0 || math.IsNaN(maxCost) || math.IsInf(maxCost, 0) {
				return usage(fmt.Errorf("--max-cost %v: give the run's budget as a positive amount at the endpoints' prices (0 = none)", maxCost))
			}
			if rf.dataset == "" {
				return usage(fmt.Errorf("--dataset is required (to resume run %s, pass the dataset it started with)", rf.runID))
			}
			m, ds, err := rf.manifest(cmd, "")
			if err != nil {
				return usage(err)
			}
			if err := writable(rf.out); err != nil {
				return usage(err)
			}
			lcfg, label, stop, err := lf.config(ds, w)
			if err != nil {
				return usage(err)
			}
			defer stop()
			simulated, err := preflight(ctx, lcfg)
			if err != nil {
				return usage(err)
			}
			label = simulatedLabel(label, simulated, lcfg.BaseURL)
			cfg, err := cf.process(cluster.RoleAll)
			if err != nil {
				return usage(err)
			}
			aside := logsAside(cmd)
			if aside {
				log, closeLog, err := logToFile(cfg.Log, runLogPath(rf.out))
				if err != nil {
					return err
				}
				defer closeLog()
				cfg.Log = log
			}
			if cf.natsURL == "" || cf.redisURL == "" {
				// The embedded servers' state holds every question and row.
				if err := outputs.PrivateDir(stateDir); err != nil {
					return usage(fmt.Errorf("--state-dir: %w", err))
				}
			}
			cfg.StateDir, cfg.LLM = stateDir, lcfg
			cfg.Generators, cfg.GeneratorConcurrency, cfg.Explorers, cfg.ExplorerConcurrency = 1, cf.concurrency, 1, explorers
			cl, err := startProcess(ctx, cfg)
			if err != nil {
				return err
			}
			defer cl.Close()
			if stored, err := cl.Env.State.Manifest(ctx, rf.runID); err == nil {
				if err := rf.sameAgent(cmd, stored); err != nil {
					return err
				}
				m = stored
				fmt.Fprintf(w, "Resuming run %s (%d examples).\n", m.Run, len(m.Examples))
			} else {
				m.LLM = label
			}
			size := fmt.Sprintf("%d examples x %d candidates", len(m.Examples), m.Votes)
			if def, err := agents.Builtin().Lookup(m.Agent); err != nil || !def.TakesVotes() {
				// Its candidates are counted by its options (passes, rounds, members).
				size = fmt.Sprintf("%d examples (options: %s)", len(m.Examples), optionList(m.AgentOptions))
			}
			fmt.Fprintf(w, "Run %s: agent %s, %s; outputs in %s (resume with --run-id %s --out %s)\n",
				m.Run, m.Agent, size, rf.out, m.Run, rf.out)
			if aside {
				fmt.Fprintf(w, "Logs: %s (--log-level puts them on stderr)\n", runLogPath(rf.out))
			}
			warnings := raiseWarnings(m.Agent, m.AgentOptions, lcfg)
			warn(cmd.ErrOrStderr(), warnings)
			printed := make(chan struct{})
			notice := context.AfterFunc(ctx, func() {
				defer close(printed)
				fmt.Fprintf(w, "\nInterrupted: stopping. In-flight tasks get up to %s to finish, the rest go back to the queue; resume with: quorum run --run-id %s --out %s --dataset %s\n",
					cluster.DefaultGrace, m.Run, rf.out, rf.dataset)
			})
			rep, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: rf.out, Progress: w, Terminal: coordinator.IsTerminal(os.Stdout),
				MaxInFlight: rf.window(cf.held(), m, cf.llmRPM, cf.llmTPM), Sizing: rf.sizing(cf.held(), m, cf.llmRPM, cf.llmTPM, cachedOutsideTPM(lcfg)),
				Warnings: warnings, RetryFailed: retryFailed, Health: cl.Health.Summary, Limits: cl.Limits, LimitChanges: cl.LimitChanges,
				Retain: rf.retain.retention(), StreamReplicas: cf.streamReplicas, MaxCost: maxCost})
			if !notice() {
				<-printed // said before the command's last words
			}
			var aborted *coordinator.Aborted
			var broke *coordinator.BudgetReached
			if errors.As(err, &broke) {
				return &exitError{code: exitAborted, msg: fmt.Sprintf("%s: quorum run --run-id %s --out %s --dataset %s --max-cost AMOUNT",
					err.Error(), m.Run, rf.out, rf.dataset)}
			}
			if err != nil && (ctx.Err() != nil || errors.As(err, &aborted)) {
				return &exitError{code: exitAborted, msg: err.Error()}
			}
			if err != nil {
				return err
			}
			printSummary(w, rep, rf.out)
			return failedExamples(rep, "quorum run --retry-failed --run-id", m.Run, "--out", rf.out, "--dataset", rf.dataset)
		},
	}
	cf.register(cmd, true)
	quietLogs(cmd, &cf.logLevel)
	lf.register(cmd)
	rf.register(cmd)
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "where the embedded NATS and local Redis keep their data (default <out>/.state)")
	cmd.Flags().IntVar(&explorers, "explorers", 8, "exploration tasks handled at once")
	cmd.Flags().BoolVar(&retryFailed, "retry-failed", false, retryFailedUsage)
	cmd.Flags().Float64Var(&maxCost, "max-cost", 0, "the run's budget in money at the endpoints' prices (see --llm-price): no example starts once the next would pass it; the examples started finish and the run ends resumable (exit 3); the spend counts the whole run, earlier sessions too (0 = no budget)")
	return cmd
}

// cachedOutsideTPM reports whether an endpoint of cfg leaves cached prompt
// tokens out of its tokens/min quota.
func cachedOutsideTPM(cfg llm.Config) bool {
	if cfg.CachedOutsideTPM {
		return true
	}
	for _, e := range cfg.Endpoints {
		if e.CachedOutsideTPM {
			return true
		}
	}
	return false
}
