package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
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
	queryTimeout time.Duration
	agent        string
	agentOpts    []string
	maxInFlight  int
	skipBad      bool
	retain       retainFlags
	trace        string
}

func (f *runFlags) register(cmd *cobra.Command) {
	f.df.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.runID, "run-id", "", "run id; an existing id resumes that run (default run-<time>)")
	fl.StringVar(&f.dataset, "dataset", "", "dataset folder (not needed to resume)")
	fl.StringSliceVar(&f.ids, "ids", nil, "only these instance ids (comma-separated)")
	fl.StringVar(&f.dialect, "only-dialect", "", "only examples of this dialect")
	fl.StringVar(&f.db, "db", "", "only examples of this database")
	fl.IntVar(&f.limit, "examples", 0, "at most this many examples (0 = all)")
	deprecate(fl, "examples", "limit")
	fl.IntVar(&f.votes, "votes", 8, "candidates per example")
	fl.StringVar(&f.trace, "trace", trace.NameFull, "what each example's trace keeps (quorum trace, report.html): full (prompts, replies, query previews), summary (timing, tokens, SQL) or none")
	fl.Uint64Var(&f.seed, "seed", 1, "run seed: every LLM request's seed and every tie-break derive from it")
	fl.StringVar(&f.out, "out", "", "output folder (default out/<run-id>)")
	fl.DurationVar(&f.roundTimeout, "round-timeout", 30*time.Minute, "decide a round with the results that are in once none of its tasks has made progress (started, beat, finished) for this long; tasks still queued behind the quota never trigger it")
	fl.DurationVar(&f.queryTimeout, "query-timeout", defaultQueryTimeout, queryTimeoutUsage)
	fl.BoolVar(&f.skipBad, "skip-invalid", false, "run even though some task lines are malformed, duplicated or name paths (they are listed, left out, and recorded in run.json)")
	fl.BoolVar(&f.skipBad, "skip-bad-lines", false, "the old name of --skip-invalid")
	_ = fl.MarkDeprecated("skip-bad-lines", "use --skip-invalid")
	fl.IntVar(&f.maxInFlight, "max-in-flight", 0, "examples started and unfinished at once, the next admitted as one finishes (0 = automatic: twice the examples that keep the LLM quota busy at 5 s a call, within what the workers hold, at least 4; 64 for quorum coordinator; -1 = all at once)")
	fl.StringVar(&f.agent, "agent", agents.Default, "agent that answers the examples (quorum agents lists them and their options)")
	fl.StringArrayVar(&f.agentOpts, "agent-option", nil, "an agent option, NAME=VALUE (repeatable; quorum agents lists them)")
	optionAliases(fl, runOptionFlags...)
	f.retain.register(fl, true)
}

// droppedLines refuses a dataset whose task file has lines that would be
// left out (malformed, without an instance id, duplicated), listing them
// with file:line, unless the user chose to skip them.
func droppedLines(ds *dataset.Dataset, skip bool) error {
	var lines []string
	for _, p := range ds.Skipped() {
		lines = append(lines, "  "+p.String())
	}
	if len(lines) == 0 {
		return nil
	}
	if skip {
		fmt.Fprintf(os.Stderr, "leaving out %d task lines (--skip-invalid):\n%s\n", len(lines), strings.Join(lines, "\n"))
		return nil
	}
	if len(lines) > 10 {
		lines = append(lines[:10], fmt.Sprintf("  … and %d more (quorum inspect lists them all)", len(lines)-10))
	}
	return fmt.Errorf("the dataset's task file has lines that would be left out:\n%s\nfix them, or pass --skip-invalid to run without them", strings.Join(lines, "\n"))
}

// validate refuses flag values that cannot run.
func (f *runFlags) validate() error {
	if _, err := trace.ParseLevel(f.trace); err != nil {
		return err
	}
	switch {
	case f.votes < 1:
		return fmt.Errorf("--votes %d: an example needs at least 1 candidate", f.votes)
	case f.roundTimeout <= 0:
		return fmt.Errorf("--round-timeout %v: give a positive duration, e.g. 30m", f.roundTimeout)
	case f.queryTimeout <= 0:
		return queryTimeoutError(f.queryTimeout)
	case f.maxInFlight < -1:
		return fmt.Errorf("--max-in-flight %d: use a positive number, 0 (automatic) or -1 (all at once)", f.maxInFlight)
	case f.limit < 0:
		return fmt.Errorf("--examples %d: use a positive number (0 = all)", f.limit)
	}
	return nil
}

// writable checks that an output folder can be written before any work
// starts, so that no computed answer is lost to it.
func writable(dir string) error {
	if err := os.MkdirAll(dir, outputs.DirMode); err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".quorum-write-check-*")
	if err != nil {
		return fmt.Errorf("--out %s is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// failedExamples is the exit status of a run that ended: exit 1 when
// examples failed, naming how many and, when again is set, the command
// that runs them again (a plain resume keeps a failure).
func failedExamples(rep *outputs.Report, again ...string) error {
	n := rep.Totals.Failed
	if n == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d of %d examples failed (their errors are above and in run.json)", n, rep.Totals.Examples)
	if len(again) > 0 {
		msg += "; run them again with: " + strings.Join(again, " ")
	}
	return &exitError{code: exitFailedExamples, msg: msg}
}

// window is the admission window for a coordinator whose generators hold
// held tasks at once in all (0 when unknown) within an LLM quota.
func (f *runFlags) window(held int, m *runstate.Manifest, rpm, tpm float64) int {
	switch {
	case f.maxInFlight < 0:
		return 0
	case f.maxInFlight > 0:
		return f.maxInFlight
	case held <= 0:
		return 64
	}
	return coordinator.Window(held, agentLoad(m), rpm, tpm)
}

// sizing is what the coordinator re-sizes an automatic window from as
// calls are measured (nil when the window is given or unbounded).
func (f *runFlags) sizing(held int, m *runstate.Manifest, rpm, tpm float64, cachedOutsideTPM bool) *coordinator.Sizing {
	if f.maxInFlight != 0 || held <= 0 || tpm <= 0 {
		return nil
	}
	return &coordinator.Sizing{Held: held, Load: agentLoad(m), RPM: rpm, TPM: tpm, CachedOutsideTPM: cachedOutsideTPM}
}

// agentLoad is the load the run's agent declares for its options.
func agentLoad(m *runstate.Manifest) agent.Load {
	if def, err := agents.Builtin().Lookup(m.Agent); err == nil {
		opts, _ := def.RunOptions(m.AgentOptions, m.Votes)
		return def.LoadOf(opts)
	}
	return agent.Load{Width: 1, Calls: 1}
}

// sameAgent refuses to resume a run with another agent than it started
// with: its manifest decides, so that every worker runs the same one.
func (f *runFlags) sameAgent(cmd *cobra.Command, m *runstate.Manifest) error {
	if cmd.Flags().Changed("agent") && f.agent != m.Agent {
		return fmt.Errorf("run %s runs agent %s: resume it without --agent (or with --agent %s), or choose another --run-id", m.Run, m.Agent, m.Agent)
	}
	return nil
}

// agentOptions resolves --agent and its options against the registry: an
// unknown agent or option fails at once, naming what there is. The run's
// votes become the agent's votes option's value when it has one.
func (f *runFlags) agentOptions(cmd *cobra.Command) (string, map[string]string, error) {
	def, err := agents.Builtin().Lookup(f.agent)
	if err != nil {
		return "", nil, fmt.Errorf("--agent: %w", err)
	}
	given := givenVotes(cmd, f.votes)
	opts, err := checkAgentOptions(def, map[string]string{}, f.agentOpts, given)
	if err != nil {
		return "", nil, err
	}
	if cmd == nil || !cmd.Flags().Changed("votes") {
		f.votes = runVotes(def, opts, f.votes)
	}
	return def.Name, opts, nil
}

// givenVotes is --votes when the command line gives a count, else 0.
func givenVotes(cmd *cobra.Command, votes int) int {
	if cmd == nil || !cmd.Flags().Changed("votes") {
		return 0
	}
	return max(0, votes)
}

// runVotes is a run's candidate count as its manifest and report record
// it: the agent's votes option when it declares one (agent.OptVotes),
// else --votes.
func runVotes(def *agent.Definition, opts map[string]string, votes int) int {
	if def.TakesVotes() {
		if v, err := strconv.Atoi(opts[agent.OptVotes]); err == nil {
			return v
		}
	}
	return votes
}

// checkAgentOptions adds the --agent-option NAME=VALUE pairs to opts and
// checks them against the agent, building it once so that a bad value
// fails now, not on a worker. votes, when positive, is the --votes given:
// it sets the agent's votes option (agent.OptVotes) unless the pairs do,
// and then they must agree.
func checkAgentOptions(def *agent.Definition, opts map[string]string, kvs []string, votes int) (map[string]string, error) {
	if opts == nil {
		opts = map[string]string{}
	}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--agent-option %q: use NAME=VALUE", kv)
		}
		opts[k] = v
	}
	if v, set := opts[agent.OptVotes]; set && votes > 0 && def.TakesVotes() && v != strconv.Itoa(votes) {
		return nil, fmt.Errorf("--votes %d and --agent-option %s=%s name two counts: give one", votes, agent.OptVotes, v)
	}
	opts, err := def.RunOptions(opts, votes)
	if err != nil {
		return nil, fmt.Errorf("--agent-option: %w", err)
	}
	if _, err := def.New(agent.Config{Options: opts}); err != nil {
		return nil, fmt.Errorf("--agent %s: %w", def.Name, err)
	}
	return opts, nil
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
func (f *runFlags) manifest(cmd *cobra.Command, llmLabel string) (*runstate.Manifest, *dataset.Dataset, error) {
	if err := f.validate(); err != nil {
		return nil, nil, err
	}
	agentName, opts, err := f.agentOptions(cmd)
	if err != nil {
		return nil, nil, err
	}
	if f.dataset == "" {
		return nil, nil, fmt.Errorf("run %s does not exist yet: pass --dataset DIR to start it", f.runID)
	}
	ds, examples, err := selectExamples(f.df, f.dataset, f.skipBad, f.ids, f.db, f.dialect, f.limit)
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
		Created: time.Now().UTC(), Agent: agentName, AgentOptions: opts, RoundTimeout: f.roundTimeout, QueryTimeout: f.queryTimeout, LLM: llmLabel,
		Trace: f.trace}
	for _, e := range examples {
		m.Examples = append(m.Examples, e.ID)
	}
	for _, p := range ds.Skipped() {
		m.Skipped = append(m.Skipped, p.String())
	}
	return m, ds, nil
}

func newCoordinatorCmd() *cobra.Command {
	var cf clusterFlags
	var rf runFlags
	var retryFailed bool
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
			if _, _, err := rf.agentOptions(cmd); err != nil {
				return usage(err)
			}
			if err := rf.validate(); err != nil {
				return usage(err)
			}
			if err := writable(rf.out); err != nil {
				return usage(err)
			}
			cfg, err := cf.role(cluster.RoleCoordinator)
			if err != nil {
				return err
			}
			cl, err := startProcess(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer func() {
				cl.Close()
				_ = cfg.Log.Sync()
			}()
			env := cl.Env
			m, err := env.State.Manifest(cmd.Context(), rf.runID)
			if errors.Is(err, runstate.ErrNoRun) {
				m, _, err = rf.manifest(cmd, "configured on the workers")
			} else if err == nil {
				err = rf.sameAgent(cmd, m)
			}
			if err != nil {
				return err
			}
			rep, err := coordinator.Run(cmd.Context(), coordinator.Config{Env: env, Manifest: m, Out: rf.out, Progress: cmd.OutOrStdout(),
				MaxInFlight: rf.window(0, m, 0, 0), Retain: rf.retain.retention(), RetryFailed: retryFailed, StreamReplicas: cf.streamReplicas,
				// The limits set while it ran are in Redis; what the
				// workers learned of the provider is in their processes.
				LimitChanges: cl.LimitChanges})
			var aborted *coordinator.Aborted
			if err != nil && (cmd.Context().Err() != nil || errors.As(err, &aborted)) {
				return &exitError{code: exitAborted, msg: err.Error()}
			}
			if err != nil {
				return err
			}
			printSummary(cmd.OutOrStdout(), rep, rf.out)
			return failedExamples(rep, "quorum coordinator --retry-failed --run-id", m.Run, "--out", rf.out)
		},
	}
	cf.register(cmd, false)
	rf.register(cmd)
	cmd.Flags().BoolVar(&retryFailed, "retry-failed", false, retryFailedUsage)
	return cmd
}

func newGeneratorCmd() *cobra.Command {
	return workerCmd("generator-worker", cluster.RoleGenerator,
		"Take the agents' LLM-bound tasks (the generate pool) and publish what they produce",
		func(cfg *cluster.Config, cf *clusterFlags) {
			cfg.Generators, cfg.GeneratorConcurrency = 1, cf.concurrency
		})
}

func newExplorerCmd() *cobra.Command {
	return workerCmd("explorer-worker", cluster.RoleExplorer,
		"Take the agents' warehouse-heavy tasks (the explore pool) and publish what they produce",
		func(cfg *cluster.Config, cf *clusterFlags) {
			cfg.Explorers, cfg.ExplorerConcurrency = 1, cf.concurrency
		})
}

// workerCmd is a worker role: cluster and LLM flags, the shared quota,
// then serve until the context ends.
func workerCmd(use, role, short string, size func(*cluster.Config, *clusterFlags)) *cobra.Command {
	var cf clusterFlags
	var lf llmFlags
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cf.role(role)
			if err != nil {
				return err
			}
			lcfg, _, stop, err := lf.config(nil, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			defer stop()
			cfg.LLM = lcfg
			size(&cfg, &cf)
			return serveRole(cmd.Context(), cfg)
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
			cfg, err := cf.role(cluster.RoleVoter)
			if err != nil {
				return err
			}
			cfg.VoterConcurrency = cf.concurrency
			return serveRole(cmd.Context(), cfg)
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

// retryFailedUsage is --retry-failed's help, the same for run and the
// coordinator.
const retryFailedUsage = "when resuming, run the examples that failed again (a plain resume keeps their failure)"
