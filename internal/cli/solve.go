package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/version"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/outputs"
	agentpkg "github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

func newSolveCmd() *cobra.Command {
	f := &solveFlags{}
	cmd := &cobra.Command{
		Use:   "solve --dataset DIR",
		Short: "Run an agent (default ReFoRCE) over a dataset in this process (no cluster)",
		Long: `solve runs an agent (--agent, default ReFoRCE; quorum agents lists them and
their options, set with --agent-option NAME=VALUE) in one process: its tasks
run through the runtime's seam in memory, the same task code as on a
cluster, with goroutines for workers. It writes <instance_id>.sql and .csv in
Spider 2.0's submission layout plus run.json and report.html, and prints EX
when the dataset has gold results. With no LLM configured it uses the
simulated LLM (llmsim). For a cluster over NATS and Redis, use quorum run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	f.register(cmd)
	return cmd
}

// solveJob is what solve's flags resolve to once checked: the agent with
// its options, how much to trace, and the examples to solve.
type solveJob struct {
	def      *agentpkg.Definition
	opts     map[string]string
	level    trace.Level
	ds       *dataset.Dataset
	examples []*dataset.Example
}

// check resolves the flags into a job, refusing (exit 2) what solve
// cannot run with, in the order solve always has.
func (f *solveFlags) check(cmd *cobra.Command) (*solveJob, error) {
	def, err := agents.Builtin().Lookup(f.agentName)
	if err != nil {
		return nil, usage(fmt.Errorf("--agent: %w", err))
	}
	opts, err := checkAgentOptions(def, map[string]string{}, f.agentOpts, givenVotes(cmd, f.votes))
	if err != nil {
		return nil, usage(err)
	}
	if f.dsDir == "" {
		return nil, usage(fmt.Errorf("--dataset is required (try --dataset examples/demo)"))
	}
	if err := checkSolveFlags(f.votes, f.concurrency, f.limit, f.llmRPM, f.llmTPM, f.queryTimeout); err != nil {
		return nil, usage(err)
	}
	level, err := trace.ParseLevel(f.traceLevel)
	if err != nil {
		return nil, usage(err)
	}
	if err := writable(f.out); err != nil {
		return nil, usage(err)
	}
	ds, examples, err := f.examples()
	if err != nil {
		return nil, usage(err)
	}
	return &solveJob{def: def, opts: opts, level: level, ds: ds, examples: examples}, nil
}

// examples loads the dataset and selects the examples the flags name.
func (f *solveFlags) examples() (*dataset.Dataset, []*dataset.Example, error) {
	return selectExamples(f.df, f.dsDir, f.skipBad, f.ids, f.db, f.dialect, f.limit)
}

// selectExamples loads the dataset in dir (refusing dropped task lines
// unless skipBad) and selects the examples --ids, --db, --only-dialect
// and --limit name: solve's and run's selection are one.
func selectExamples(df datasetFlags, dir string, skipBad bool, ids []string, db, dialect string, limit int) (*dataset.Dataset, []*dataset.Example, error) {
	ds, err := df.load(dir)
	if err != nil {
		return nil, nil, err
	}
	if err := droppedLines(ds, skipBad); err != nil {
		return nil, nil, err
	}
	filter := dataset.Filter{IDs: ids, Database: db, Limit: limit}
	if dialect != "" {
		if filter.Dialect, err = warehouse.ParseDialect(dialect); err != nil {
			return nil, nil, fmt.Errorf("--only-dialect: %w", err)
		}
	}
	examples, err := ds.Select(filter)
	if err != nil {
		return nil, nil, err
	}
	return ds, examples, nil
}

// run checks the flags, sets up the LLM client and the agent, and solves
// the job's examples in this process.
func (f *solveFlags) run(cmd *cobra.Command) error {
	job, err := f.check(cmd)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	// The same quotas as quorum run's, kept in this process.
	lim := &ratelimit.Local{Budget: ratelimit.LLMBudget{Scope: "llm", Default: ratelimit.LLMQuota{RequestsPerMinute: f.llmRPM, TokensPerMinute: f.llmTPM}}}
	lcfg, label, stop, err := f.lf.config(job.ds, w)
	if err != nil {
		return usage(err)
	}
	defer stop()
	simulated, err := preflight(cmd.Context(), lcfg)
	if err != nil {
		return usage(err)
	}
	label = simulatedLabel(label, simulated, lcfg.BaseURL)
	warnings := raiseWarnings(f.agentName, job.opts, lcfg)
	warn(cmd.ErrOrStderr(), warnings)
	lcfg.Limiter = lim
	client, err := llm.New(lcfg)
	if err != nil {
		return usage(err)
	}
	writer, err := outputs.NewWriter(f.out)
	if err != nil {
		return err
	}
	rep := &outputs.Report{RunID: "solve", Dataset: f.dsDir, Agent: f.agentName, AgentOptions: job.opts, Seed: f.seed, Votes: runVotes(job.def, job.opts, f.votes), LLM: label, Started: time.Now(), Warnings: warnings,
		QuorumVersion: version.Version, Revision: version.Revision()}
	// Every call lands in its task's trace.
	ag, err := job.def.New(agentpkg.Config{Options: job.opts, LLM: trace.Client{LLM: client}})
	if err != nil {
		return err
	}
	rep.Examples = solveWithSeam(cmd.Context(), job.ds, job.examples, job.def, ag, job.opts, writer, f.seed, f.concurrency, f.queryTimeout, job.level, w)
	return f.finish(cmd, job, writer, rep)
}

// finish completes the report, writes it with the trace pages and prints
// its summary; exit 1 when some examples failed.
func (f *solveFlags) finish(cmd *cobra.Command, job *solveJob, writer *outputs.Writer, rep *outputs.Report) error {
	ids := make([]string, len(rep.Examples))
	for i, e := range rep.Examples {
		ids[i] = e.InstanceID
	}
	rep.DatasetFingerprint = job.ds.Fingerprint(ids)
	rep.Finished = time.Now()
	rep.Summarize()
	if job.level != trace.None {
		question := func(id string) string {
			if e, ok := job.ds.Example(id); ok {
				return e.Question
			}
			return ""
		}
		trace.WritePages(writer, rep, question, func(id string, err error) {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: the trace page of %s: %v\n", id, err)
		})
	}
	if err := writer.Report(rep); err != nil {
		return err
	}
	printSummary(cmd.OutOrStdout(), rep, f.out)
	return failedExamples(rep)
}

// checkSolveFlags refuses values solve cannot run with.
func checkSolveFlags(votes, atOnce, limit int, rpm, tpm float64, queryTimeout time.Duration) error {
	switch {
	case votes < 1:
		return fmt.Errorf("--votes %d: an example needs at least 1 candidate", votes)
	case atOnce < 1:
		return fmt.Errorf("--examples-at-once %d: use 1 or more", atOnce)
	case limit < 0:
		return fmt.Errorf("--examples %d: use a positive number (0 = all)", limit)
	case queryTimeout <= 0:
		return queryTimeoutError(queryTimeout)
	case rpm < 0 || tpm < 0:
		return fmt.Errorf("--llm-rpm %g / --llm-tpm %g: use a positive quota, or 0 for none", rpm, tpm)
	}
	return nil
}

// solveEach solves examples atOnce at a time, printing a line as each
// finishes and stamping when it did.
func solveEach(examples []*dataset.Example, atOnce int, w io.Writer, solve func(*dataset.Example) outputs.Example) []outputs.Example {
	started := time.Now()
	results := make([]outputs.Example, len(examples))
	sem := make(chan struct{}, max(1, atOnce))
	var wg sync.WaitGroup
	var mu sync.Mutex
	finished := 0
	for i, e := range examples {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = solve(e)
			mu.Lock()
			defer mu.Unlock()
			finished++
			results[i].FinishedSeconds = time.Since(started).Seconds()
			fmt.Fprintf(w, "[%d/%d] %s: %s %s\n", finished, len(examples), e.ID, results[i].Status, results[i].Method)
		}()
	}
	wg.Wait()
	return results
}

func printSummary(w io.Writer, rep *outputs.Report, out string) {
	t := rep.Totals
	fmt.Fprintf(w, "\nLLM: %s\n", rep.LLM)
	fmt.Fprintf(w, "Examples: %d (answered %d, no answer %d, failed %d) in %.1fs\n", t.Examples, t.Answered, t.NoAnswer, t.Failed, t.WallSeconds)
	shown := 0
	for _, e := range rep.Examples {
		if e.Status != "failed" {
			continue
		}
		if shown == 5 {
			fmt.Fprintf(w, "  … %d more failed examples: see run.json\n", t.Failed-shown)
			break
		}
		fmt.Fprintf(w, "  failed %s: %s\n", e.InstanceID, e.Error)
		shown++
	}
	// Say what the agent did with its low-confidence examples: a further
	// round (ReFoRCE's exploration), or none (no-exploration, or an agent
	// that has none).
	further := 0
	for _, e := range rep.Examples {
		if e.Confidence == "low" && e.Rounds > 1 {
			further++
		}
	}
	switch {
	case t.LowConf == 0:
		fmt.Fprintf(w, "Confidence after the first vote: %d high, 0 low\n", t.HighConf)
	case further == 0:
		fmt.Fprintf(w, "Confidence after the first vote: %d high, %d low (decided from the first round)\n", t.HighConf, t.LowConf)
	default:
		fmt.Fprintf(w, "Confidence after the first vote: %d high, %d low (%d went on to a further round)\n", t.HighConf, t.LowConf, further)
	}
	if t.EX != nil {
		fmt.Fprintf(w, "EX: %.4f (%d of %d), %s: %.4f (%s)\n", *t.EX, t.Correct, t.Scored, t.EXAtKName(rep.Votes), *t.EXAtK, t.EXAtKMeaning(rep.Votes))
		printCalibration(w, "EX by confidence", t.ByConfidence)
		printCalibration(w, "EX by method", t.ByMethod)
		if left := t.Examples - t.Scored; left > 0 {
			fmt.Fprintf(w, "  (EX counts the %d examples with gold; %d without are left out)\n", t.Scored, left)
		}
	}
	fmt.Fprintf(w, "LLM calls: %d (%.2f per example), tokens: %d prompt + %d completion; warehouse queries: %d (%.2f per example)\n",
		t.Cost.LLMCalls, t.CallsPerEx, t.Cost.LLM.PromptTokens, t.Cost.LLM.CompletionTokens, t.Cost.Queries, t.QueriesPerEx)
	if t.Cost.LLM.RateLimited > 0 {
		fmt.Fprintf(w, "LLM 429s: %d requests answered 429 and were retried (%s)\n", t.Cost.LLM.RateLimited, outputs.RateLimitNote(t.Cost))
	}
	for _, l := range rep.Limits {
		fmt.Fprintf(w, "LLM limits learned: %s\n", l.Note())
	}
	for _, c := range rep.LimitChanges {
		fmt.Fprintf(w, "LLM limit changed at %s: %s\n", c.At.Local().Format("15:04:05"), c)
	}
	fmt.Fprintf(w, "Outputs: %s (<instance_id>.sql, <instance_id>.csv, run.json, report.html)\n", out)
}

// printCalibration prints one line of how often each confidence or method
// was right ("high: 35 of 37 right (0.946)"), as run.json's totals hold it.
func printCalibration(w io.Writer, label string, cs []outputs.Calibration) {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	fmt.Fprintf(w, "%s: %s\n", label, strings.Join(parts, ", "))
}
