package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/runtime/coordinator"
	"github.com/quorumsql/quorum/pkg/runtime/explorer"
	"github.com/quorumsql/quorum/pkg/runtime/generator"
	"github.com/quorumsql/quorum/pkg/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/runtime/voter"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// runFlags describe a run: the dataset, the filters and the agent options.
type runFlags struct {
	df           datasetFlags
	runID        string
	dataset      string
	ids          []string
	dialect, db  string
	limit        int
	votes        int
	seed         uint64
	out          string
	roundTimeout time.Duration
	noExplore    bool
	formatR      bool
	selfCons     bool
	cteRefine    bool
}

func (f *runFlags) register(cmd *cobra.Command) {
	f.df.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.runID, "run-id", "", "run id; an existing id resumes that run (default run-<time>)")
	fl.StringVar(&f.dataset, "dataset", "", "dataset folder (not needed to resume)")
	fl.StringSliceVar(&f.ids, "ids", nil, "only these instance ids (comma-separated)")
	fl.StringVar(&f.dialect, "only-dialect", "", "only examples of this dialect")
	fl.StringVar(&f.db, "db", "", "only examples of this database")
	fl.IntVar(&f.limit, "limit", 0, "at most this many examples")
	fl.IntVar(&f.votes, "votes", 8, "candidates per example")
	fl.Uint64Var(&f.seed, "seed", 1, "run seed: every LLM request's seed and every tie-break derive from it")
	fl.StringVar(&f.out, "out", "", "output folder (default out/<run-id>)")
	fl.DurationVar(&f.roundTimeout, "round-timeout", 30*time.Minute, "decide a round with the results in after this long")
	fl.BoolVar(&f.noExplore, "no-exploration", false, "skip column exploration for low-confidence examples")
	fl.BoolVar(&f.formatR, "format-restriction", false, "ask for the expected answer format first (v1 option)")
	fl.BoolVar(&f.selfCons, "self-consistency", false, "a candidate is the first answer seen twice (v1 option)")
	fl.BoolVar(&f.cteRefine, "cte-refine", false, "CTE-based refinement (v1 option)")
}

func (f *runFlags) defaults() {
	if f.runID == "" {
		f.runID = "run-" + time.Now().UTC().Format("20060102-150405")
	}
	if f.out == "" {
		f.out = filepath.Join("out", f.runID)
	}
}

// manifest builds a new run's manifest; the dataset is loaded to select
// its examples.
func (f *runFlags) manifest(llmLabel string) (*runstate.Manifest, *dataset.Dataset, error) {
	if f.dataset == "" {
		return nil, nil, fmt.Errorf("run %s does not exist yet: pass --dataset DIR to start it", f.runID)
	}
	ds, err := f.df.load(f.dataset)
	if err != nil {
		return nil, nil, err
	}
	filter := dataset.Filter{IDs: f.ids, Database: f.db, Limit: f.limit}
	if f.dialect != "" {
		if filter.Dialect, err = warehouse.ParseDialect(f.dialect); err != nil {
			return nil, nil, err
		}
	}
	examples, err := ds.Select(filter)
	if err != nil {
		return nil, nil, err
	}
	if len(examples) == 0 {
		return nil, nil, errors.New("the filters select no example")
	}
	abs, _ := filepath.Abs(f.dataset)
	sqliteDir := f.df.sqliteDir
	if sqliteDir != "" {
		sqliteDir, _ = filepath.Abs(sqliteDir)
	}
	m := &runstate.Manifest{Run: f.runID, Dataset: abs, TaskFile: f.df.tasks, SQLiteDir: sqliteDir, Seed: f.seed, Votes: f.votes,
		Created: time.Now().UTC(), NoExploration: f.noExplore, FormatRestriction: f.formatR, SelfConsistency: f.selfCons,
		CTERefine: f.cteRefine, RoundTimeout: f.roundTimeout, LLM: llmLabel}
	for _, e := range examples {
		m.Examples = append(m.Examples, e.ID)
	}
	return m, ds, nil
}

func newCoordinatorCmd() *cobra.Command {
	var cf clusterFlags
	var rf runFlags
	cmd := &cobra.Command{
		Use:   "coordinator",
		Short: "Start or resume a run: publish its tasks, collect final answers, write the outputs",
		Long: `The coordinator loads a dataset, prepares each database's compressed
information once, publishes generation (or schema-linking) tasks to NATS
JetStream, collects the voter's final answers and writes <instance_id>.sql,
<instance_id>.csv and run.json. Given the id of an existing run it resumes:
finished examples are skipped and only missing tasks are published again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rf.defaults()
			if err := queue.CheckToken("--run-id", rf.runID); err != nil {
				return err
			}
			env, cleanup, err := cf.env(cmd.Context(), "coordinator", nil)
			if err != nil {
				return err
			}
			defer cleanup()
			m, err := env.State.Manifest(cmd.Context(), rf.runID)
			if errors.Is(err, runstate.ErrNoRun) {
				m, _, err = rf.manifest("configured on the workers")
			}
			if err != nil {
				return err
			}
			rep, err := coordinator.Run(cmd.Context(), coordinator.Config{Env: env, Manifest: m, Out: rf.out, Progress: cmd.OutOrStdout()})
			if err != nil {
				return err
			}
			printSummary(cmd.OutOrStdout(), rep, rf.out)
			return nil
		},
	}
	cf.register(cmd, false)
	rf.register(cmd)
	return cmd
}

func newGeneratorCmd() *cobra.Command {
	return workerCmd("generator-worker", "generator",
		"Take schema-linking and generation tasks and publish one candidate result per task",
		func(ctx context.Context, env *runenv.Env, cf *clusterFlags) error {
			return generator.Run(ctx, generator.Config{Env: env, Warehouses: cf.warehouses, Concurrency: cf.concurrency})
		})
}

func newExplorerCmd() *cobra.Command {
	return workerCmd("explorer-worker", "explorer",
		"Take exploration tasks of low-confidence examples and publish their regeneration tasks",
		func(ctx context.Context, env *runenv.Env, cf *clusterFlags) error {
			return explorer.Run(ctx, explorer.Config{Env: env, Warehouses: cf.warehouses, Concurrency: cf.concurrency})
		})
}

// workerCmd is a worker role: cluster and LLM flags, the shared quota,
// then serve until the context ends.
func workerCmd(use, role, short string, serve func(context.Context, *runenv.Env, *clusterFlags) error) *cobra.Command {
	var cf clusterFlags
	var lf llmFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lim, err := cf.limiter(cmd.Context())
			if err != nil {
				return err
			}
			client, _, stop, err := lf.client(nil, cmd.OutOrStdout(), lim)
			if err != nil {
				return err
			}
			defer stop()
			env, cleanup, err := cf.env(cmd.Context(), role, client)
			if err != nil {
				return err
			}
			defer cleanup()
			return serve(cmd.Context(), env, &cf)
		},
	}
	cf.register(cmd, true)
	lf.register(cmd)
	return cmd
}

func newVoterCmd() *cobra.Command {
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "voter",
		Short: "Record candidate results in Redis, vote, and publish final answers or exploration tasks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, cleanup, err := cf.env(cmd.Context(), "voter", nil)
			if err != nil {
				return err
			}
			defer cleanup()
			return voter.Run(cmd.Context(), voter.Config{Env: env, Concurrency: cf.concurrency})
		},
	}
	cf.register(cmd, false)
	cmd.Flags().IntVar(&cf.concurrency, "concurrency", 4, "results handled at once")
	return cmd
}

// RoleCmd returns the command of a role binary, as its root.
func RoleCmd(role string) *cobra.Command {
	var cmd *cobra.Command
	switch role {
	case "coordinator":
		cmd = newCoordinatorCmd()
	case "generator-worker":
		cmd = newGeneratorCmd()
	case "explorer-worker":
		cmd = newExplorerCmd()
	case "voter":
		cmd = newVoterCmd()
	default:
		panic("unknown role " + role)
	}
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd
}
