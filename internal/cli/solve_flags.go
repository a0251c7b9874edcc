package cli

import (
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/trace"
)

// solveFlags are solve's flag values.
type solveFlags struct {
	df           datasetFlags
	lf           llmFlags
	dsDir, out   string
	ids          []string
	dialect, db  string
	limit        int
	seed         uint64
	concurrency  int
	llmRPM       float64
	llmTPM       float64
	queryTimeout time.Duration
	agentName    string
	agentOpts    []string
	skipBad      bool
	votes        int
	traceLevel   string
}

// register adds solve's flags to cmd. The order is kept as it has always
// been: deprecate and optionAliases need their flag registered before them.
func (f *solveFlags) register(cmd *cobra.Command) {
	f.df.register(cmd)
	f.lf.register(cmd)
	fs := cmd.Flags()
	f.registerDataset(fs)
	f.registerLimits(fs)
	f.registerAgent(fs)
}

// registerDataset adds the dataset, which of its examples to solve, and
// what to write.
func (f *solveFlags) registerDataset(fs *pflag.FlagSet) {
	fs.StringVar(&f.dsDir, "dataset", "", "dataset folder")
	fs.StringVar(&f.traceLevel, "trace", trace.NameFull, "what each example's trace keeps (quorum trace --out, report.html): full (prompts, replies, query previews), summary (timing, tokens, SQL) or none")
	fs.StringVar(&f.out, "out", filepath.Join("out", "solve"), "output folder")
	fs.StringSliceVar(&f.ids, "ids", nil, "only these instance ids (comma-separated)")
	fs.StringVar(&f.dialect, "only-dialect", "", "only examples of this dialect")
	fs.StringVar(&f.db, "db", "", "only examples of this database")
	fs.IntVar(&f.limit, "examples", 0, "at most this many examples (0 = all)")
	deprecate(fs, "examples", "limit")
}

// registerLimits adds the run's seed, how many examples run at once and
// the process's LLM quota.
func (f *solveFlags) registerLimits(fs *pflag.FlagSet) {
	fs.Uint64Var(&f.seed, "seed", 1, "run seed: every LLM request's seed derives from it")
	fs.IntVar(&f.concurrency, "examples-at-once", 4, "examples solved at once (each runs its candidates in parallel)")
	fs.IntVar(&f.concurrency, "concurrency", 4, "examples solved at once")
	_ = fs.MarkDeprecated("concurrency", "use --examples-at-once (--concurrency means tasks a worker handles at once elsewhere)")
	fs.Float64Var(&f.llmRPM, "llm-rpm", 0, "LLM requests/min for this process (0 = no limit)")
	fs.Float64Var(&f.llmTPM, "llm-tpm", 0, "LLM tokens/min for this process (0 = no limit)")
}

// registerAgent adds the agent and how it runs (options, skipped lines,
// votes, query timeout), then the old option flags, aliases of
// --agent-option.
func (f *solveFlags) registerAgent(fs *pflag.FlagSet) {
	fs.StringVar(&f.agentName, "agent", agents.Default, "agent to run in process (quorum agents lists them)")
	fs.StringArrayVar(&f.agentOpts, "agent-option", nil, "an agent option, NAME=VALUE (repeatable; quorum agents lists them)")
	fs.BoolVar(&f.skipBad, "skip-invalid", false, "run even though some task lines are malformed, duplicated or name paths (they are listed and left out)")
	fs.BoolVar(&f.skipBad, "skip-bad-lines", false, "the old name of --skip-invalid")
	_ = fs.MarkDeprecated("skip-bad-lines", "use --skip-invalid")
	fs.IntVar(&f.votes, "votes", 8, "candidates per example")
	fs.DurationVar(&f.queryTimeout, "query-timeout", defaultQueryTimeout, queryTimeoutUsage)
	optionAliases(fs, solveOptionFlags...)
}
