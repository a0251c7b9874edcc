package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/app/bench"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

func newBenchCmd() *cobra.Command {
	f := newBenchFlags()
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a run against its quota: quota ratio, 429s, latency vs one candidate chain, overhead, scaling, cost",
		Long: `bench runs a scenario on the real pieces — embedded NATS with JetStream, a
local redis-server, every role, and the SIMULATED LLM (llmsim) with a latency
model and provider limits — over a synthetic dataset of the chosen size
(default: Spider 2.0's 547 examples x 8 candidates). It reports the quota
bound (the shortest wall time the binding limit allows for the calls the run
made) and the run's ratio to it, 429s, redeliveries and failed examples,
example latency against one candidate chain, orchestration overhead per
task, cost per example and per stage next to the ReFoRCE paper's figures,
and throughput with 1-16 generator workers. It writes bench.json and an
HTML report. Flags override the scenario file.

With --scale it runs the scenario at each size given instead (no scaling
runs), each on a rig of its own, and reports per size what grows with a
run: CPU and peak memory, the time outside the run's wall (preparation and
output), the runtime's overhead per task and Redis's bytes per example.

With --mixed it measures questions' latency while a batch runs instead: on
one cluster and one LLM quota it asks --questions questions through the
question API (as quorum serve answers them, cache off) on the idle cluster,
then starts a batch run of --examples examples (default the demo's 44 x 8
candidates, 2 generator workers x 8 tasks, 600 req/min) and, once its tasks
hold every generator slot, asks the same questions again. It reports both
phases' p50/p95/max, their ratio, 429s and the batch's throughput meanwhile,
and writes mixed.json.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd) },
	}
	f.register(cmd.Flags())
	return cmd
}

// run profiles the whole bench when asked and runs the benchmark the
// flags choose: deployments, mixed, or the scenario (alone, as a series
// or compared).
func (f *benchFlags) run(cmd *cobra.Command) (err error) {
	// --ttft is a duration; the scenario keeps milliseconds.
	f.sc.FirstTokenMS = int(f.ttft.Milliseconds())
	stop, err := startProfiles(f.cpuProfile, f.memProfile)
	if err != nil {
		return err
	}
	defer func() {
		if perr := stop(); perr != nil && err == nil {
			err = perr
		}
	}()
	if f.mixed && len(f.scale) > 0 {
		return usage(fmt.Errorf("--scale and --mixed are separate benchmarks: run them one at a time"))
	}
	if f.deploy {
		f.ds.KillAfterSeconds, f.ds.KillSeconds = f.killAfter.Seconds(), f.killFor.Seconds()
		return benchDeployments(cmd, f.sc, f.ds, f.ttft, f.work, f.out, f.asJSON)
	}
	if f.mixed {
		return benchMixed(cmd, f.sc, f.ms, f.interval, f.agentOpts, f.scenarioFile, f.compare, f.work, f.out, f.asJSON)
	}
	return f.runScenario(cmd)
}

// runScenario runs the scenario the file and flags make: as one run, a
// scale series, or one of the comparisons.
func (f *benchFlags) runScenario(cmd *cobra.Command) error {
	if err := f.applyScenario(cmd); err != nil {
		return err
	}
	if f.work == "" {
		dir, err := os.MkdirTemp("", "quorum-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		f.work = dir
	}
	if err := f.checkScenario(); err != nil {
		return err
	}
	sc := f.sc
	switch {
	case len(f.policies) > 0:
		return benchSampling(cmd, sc, orDefault(f.compare, sc.Agent), f.policies, f.work, f.out, f.asJSON)
	case len(f.traceLevels) > 1:
		return benchTrace(cmd, sc, f.traceLevels, f.work, f.out, f.asJSON)
	case len(f.personas) > 0:
		return benchConform(cmd, sc, f.compare, f.personas, f.work, f.out, f.asJSON)
	case len(f.compare) > 0:
		return benchCompare(cmd, sc, f.compare, f.work, f.out, f.asJSON)
	}
	return f.runOne(cmd)
}

// applyScenario loads --scenario into sc, with the flags given explicitly
// over it, then sets the agent options and drops the scaling runs when
// asked.
func (f *benchFlags) applyScenario(cmd *cobra.Command) error {
	if f.scenarioFile != "" {
		loaded, err := bench.LoadScenario(f.scenarioFile)
		if err != nil {
			return err
		}
		// Flags given explicitly win over the file.
		flagsOver(cmd, &loaded, f.sc)
		f.sc = loaded
	}
	if len(f.agentOpts) > 0 && len(f.compare) > 0 {
		return usage(fmt.Errorf("--agent-option sets the options of --agent: --agents compares agents with their own defaults"))
	}
	if err := benchOptions(&f.sc, f.agentOpts); err != nil {
		return usage(err)
	}
	if f.noScaling {
		f.sc.Scaling = nil
	}
	return nil
}

// checkScenario sets the run's trace level and refuses a scenario that
// cannot run, or --scale with a comparison.
func (f *benchFlags) checkScenario() error {
	if len(f.traceLevels) == 1 {
		// One level is the run's (two or more compare them, a run each).
		f.sc.Trace = strings.TrimSpace(f.traceLevels[0])
	}
	if err := f.sc.Validate(); err != nil {
		return err
	}
	if len(f.scale) > 0 && (len(f.personas) > 0 || len(f.compare) > 0) {
		return usage(fmt.Errorf("--scale runs one agent (--agent) at each size: not with --agents or --personas"))
	}
	return nil
}

// runOne runs the scenario once, or at each --scale size, and writes and
// prints its report.
func (f *benchFlags) runOne(cmd *cobra.Command) error {
	sc := f.sc
	progress := io.Writer(cmd.ErrOrStderr())
	start := time.Now()
	var rep *bench.Report
	var err error
	if len(f.scale) > 0 {
		fmt.Fprintf(progress, "bench %s: scale series at %s examples x %d candidates, %d req/min, SIMULATED LLM (llmsim)\n", sc.Name, joinInts(f.scale), sc.Votes, sc.RPM)
		rep, err = bench.Series(cmd.Context(), sc, f.scale, f.work, progress)
	} else {
		fmt.Fprintf(progress, "bench %s: %d examples x %d candidates, %d req/min, SIMULATED LLM (llmsim)\n", sc.Name, sc.Examples, sc.Votes, sc.RPM)
		rep, err = bench.Run(cmd.Context(), sc, f.work, progress)
	}
	if err != nil {
		return err
	}
	if err := writeBenchFiles(f.out, rep, func(w io.Writer) error { return bench.WriteHTML(w, rep.Run, rep) }); err != nil {
		return err
	}
	if f.asJSON {
		c, _ := json.Marshal(rep)
		fmt.Fprintln(cmd.OutOrStdout(), string(c))
		return nil
	}
	printBench(cmd.OutOrStdout(), rep, f.out, time.Since(start))
	return nil
}

// benchConform runs each agent under each persona and writes the
// conformance table; exit 1 when the goal is not met.
func benchConform(cmd *cobra.Command, sc bench.Scenario, names, personas []string, work, out string, asJSON bool) error {
	if len(personas) == 1 && personas[0] == "all" {
		personas = llmsim.PersonaNames()
	}
	for _, p := range personas {
		if llmsim.PersonaDescription(strings.TrimSpace(p)) == "" {
			return usage(fmt.Errorf("--personas: unknown persona %q; the personas are %s (or all)", p, strings.Join(llmsim.PersonaNames(), ", ")))
		}
	}
	progress := cmd.ErrOrStderr()
	fmt.Fprintf(progress, "bench %s: conformance of %s under %s on %d examples x %d candidates, SIMULATED LLM (llmsim)\n",
		sc.Name, strings.Join(orDefault(names, sc.Agent), ", "), strings.Join(personas, ", "), sc.Examples, sc.Votes)
	c, err := bench.Conform(cmd.Context(), sc, names, personas, work, progress)
	if err != nil {
		return err
	}
	if err := writeBenchFiles(out, c, func(w io.Writer) error { return bench.ConformanceHTML(w, c) }); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if asJSON {
		j, _ := json.Marshal(c)
		fmt.Fprintln(w, string(j))
	} else {
		// calls and prompt are against the agent's canonical run; answered
		// (diff) counts the examples answered, then those answered on one
		// side only; answers≠ the examples whose final SQL differs,
		// results≠ those whose result table does.
		fmt.Fprintf(w, "\n%-9s %-18s %7s %7s %6s %7s %14s %8s %8s %5s %7s %6s %7s %9s %6s %9s  %-7s  (EX figures are the SIMULATED LLM's)\n",
			"agent", "persona", "EX", "delta", "calls", "prompt", "answered(diff)", "answers≠", "results≠", "lost", "re-asks", "ended", "unread", "refusals", "errors", "calls/ex", "goal")
		for _, r := range c.Rows {
			goal := "met"
			if !r.Pass {
				goal = "NOT MET"
			}
			fmt.Fprintf(w, "%-9s %-18s %7.4f %+7.1f %6.2f %7.2f %14s %8d %8d %5d %7d %6d %7d %9s %6d %9.1f  %s\n", r.Agent, r.Persona, r.EX, r.DeltaPoints,
				r.CallsRatio, r.PromptTokensRatio, fmt.Sprintf("%d(%d)", r.Answered, r.AnsweredDiffer), r.AnswersDiffer, r.ResultsDiffer, r.CandidatesLost, r.FormatReasks,
				r.EndedEarly, r.VerdictsUnread, fmt.Sprintf("%d/%d", r.Refusals, r.RefusalsSent), r.LLMErrors, r.CallsPerExample, goal)
		}
		fmt.Fprintf(w, "Wrote %s and %s\n", filepath.Join(out, "bench.json"), filepath.Join(out, "report.html"))
	}
	if !c.Pass {
		return fmt.Errorf("conformance goal not met: a candidate was lost to format, another example answered, LLM calls or prompt tokens more than %.0f%% from canonical, or an EX more than %.0f points from canonical (see the table)", 100*c.MaxCostRatioDelta, c.MaxDeltaPoints)
	}
	return nil
}

// benchOptions sets the --agent-option pairs over the scenario's agent
// options, checked against its agent.
func benchOptions(sc *bench.Scenario, kvs []string) error {
	if len(kvs) == 0 {
		return nil
	}
	def, err := agents.Builtin().Lookup(orDefault(nil, sc.Agent)[0])
	if err != nil {
		return fmt.Errorf("--agent: %w", err)
	}
	opts, err := checkAgentOptions(def, maps.Clone(sc.AgentOptions), kvs, sc.Votes)
	if err != nil {
		return err
	}
	sc.AgentOptions = opts
	return nil
}

func orDefault(names []string, agent string) []string {
	if len(names) > 0 {
		return names
	}
	if agent == "" {
		agent = agents.Default
	}
	return []string{agent}
}

// benchCompare runs each agent in turn and writes the comparison.
func benchCompare(cmd *cobra.Command, sc bench.Scenario, names []string, work, out string, asJSON bool) error {
	progress := cmd.ErrOrStderr()
	fmt.Fprintf(progress, "bench %s: comparing %s on %d examples, %d req/min, SIMULATED LLM (llmsim)\n", sc.Name, strings.Join(names, ", "), sc.Examples, sc.RPM)
	c, err := bench.Compare(cmd.Context(), sc, names, work, progress)
	if err != nil {
		return err
	}
	if err := writeBenchFiles(out, c, func(w io.Writer) error { return bench.CompareHTML(w, c) }); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if asJSON {
		j, _ := json.Marshal(c)
		fmt.Fprintln(w, string(j))
		return nil
	}
	fmt.Fprintf(w, "\n%-10s %8s %8s %10s %12s %9s %8s %7s %5s (EX figures are the SIMULATED LLM's)\n", "agent", "EX", "EX@k", "calls/ex", "tokens/ex", "queries/ex", "wall s", "quota", "429s")
	for _, a := range c.Agents {
		fmt.Fprintf(w, "%-10s %8.4f %8.4f %10.1f %12.0f %9.1f %8.1f %7.3f %5d\n", a.Agent, a.EX, a.EXAtK, a.CallsPerExample, a.TokensPerExample, a.QueriesPerEx, a.Wall, a.QuotaRatio, a.RateLimited)
	}
	fmt.Fprintf(w, "Wrote %s and %s\n", filepath.Join(out, "bench.json"), filepath.Join(out, "report.html"))
	return nil
}

func benchTrace(cmd *cobra.Command, sc bench.Scenario, levels []string, work, out string, asJSON bool) error {
	progress := cmd.ErrOrStderr()
	fmt.Fprintf(progress, "bench %s: --trace %s on %d examples x %d candidates, %d req/min, SIMULATED LLM (llmsim)\n",
		sc.Name, strings.Join(levels, ", "), sc.Examples, sc.Votes, sc.RPM)
	c, err := bench.CompareTrace(cmd.Context(), sc, levels, work, progress)
	if err != nil {
		return err
	}
	if err := writeBenchFiles(out, c, func(w io.Writer) error { return bench.WriteHTML(w, c.Runs[0].Run, c.Runs[0]) }); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if asJSON {
		j, _ := json.Marshal(c)
		fmt.Fprintln(w, string(j))
		return nil
	}
	fmt.Fprintf(w, "\n%-8s %8s %8s %7s %12s %12s %12s %14s %6s %7s\n", "trace", "EX", "wall s", "quota", "overhead ms", "p50 ms", "p95 ms", "Redis B/ex", "429s", "failed")
	for _, r := range c.Rows {
		fmt.Fprintf(w, "%-8s %8.4f %8.1f %7.3f %12.1f %12.1f %12.1f %14.0f %6d %7d\n", r.Trace, r.EX, r.Wall, r.QuotaRatio,
			r.RuntimeOverheadMS, r.RuntimeOverheadP50MS, r.RuntimeOverheadP95MS, r.RedisBytesPerExample, r.RateLimited, r.FailedExamples)
	}
	fmt.Fprintf(w, "Wrote %s and %s\n", filepath.Join(out, "bench.json"), filepath.Join(out, "report.html"))
	return nil
}

func benchSampling(cmd *cobra.Command, sc bench.Scenario, names, policies []string, work, out string, asJSON bool) error {
	progress := cmd.ErrOrStderr()
	fmt.Fprintf(progress, "bench %s: sampling %s for %s on %d examples x %d candidates, %d req/min, SIMULATED LLM (llmsim)\n",
		sc.Name, strings.Join(policies, ", "), strings.Join(names, ", "), sc.Examples, sc.Votes, sc.RPM)
	c, err := bench.CompareSampling(cmd.Context(), sc, names, policies, work, progress)
	if err != nil {
		return err
	}
	if err := writeBenchFiles(out, c, func(w io.Writer) error { return bench.WriteHTML(w, c.Runs[len(c.Runs)-1].Run, c.Runs[len(c.Runs)-1]) }); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if asJSON {
		j, _ := json.Marshal(c)
		fmt.Fprintln(w, string(j))
		return nil
	}
	fmt.Fprintf(w, "\ndifficulty %s (EX figures are the SIMULATED LLM's)\n", c.Scenario.Difficulty)
	fmt.Fprintf(w, "%-10s %-9s %8s %8s %10s %12s %8s %7s %8s %7s %8s\n", "agent", "sampling", "EX", "EX@k", "calls/ex", "tokens/ex", "wall s", "quota", "stopped", "failed", "changed")
	for _, r := range c.Rows {
		fmt.Fprintf(w, "%-10s %-9s %8.4f %8.4f %10.2f %12.0f %8.1f %7.3f %8d %7d %8d\n", r.Agent, r.Sampling, r.EX, r.EXAtK, r.CallsPerExample, r.TokensPerExample, r.Wall, r.QuotaRatio, r.StoppedEarly, r.FailedExamples, r.AnswersChanged)
	}
	for _, r := range c.Rows {
		if r.AnswersChanged > 0 {
			fmt.Fprintf(w, "%s, %s sampling: %d answers differ from %s's first policy's run: %s\n", r.Agent, r.Sampling, r.AnswersChanged, r.Agent, strings.Join(r.Changed, " "))
		}
	}
	fmt.Fprintf(w, "Wrote %s and %s\n", filepath.Join(out, "bench.json"), filepath.Join(out, "report.html"))
	return nil
}

func printBench(w io.Writer, r *bench.Report, out string, took time.Duration) {
	fmt.Fprintf(w, "\nScenario %s (SIMULATED LLM): %d examples, %d candidates, wall %.1fs\n", r.Scenario.Name, r.Examples, r.Candidates, r.Wall)
	fmt.Fprintf(w, "Quota bound %.1fs (%s) -> quota ratio %.3f\n", r.QuotaBound, r.BindingLimit, r.QuotaRatio)
	fmt.Fprintf(w, "429s %d (%.2f %% of the run's attempts), redeliveries %d, failed examples %d\n", r.RateLimited, 100*r.RateLimitedShare, r.Redeliveries, r.FailedExamples)
	if sc := r.Scenario; sc.ToldRPM != 0 || r.LearnedRPM > 0 || r.StatedRPM > 0 {
		told := "the same"
		switch {
		case sc.ToldRPM < 0:
			told = "no limit"
		case sc.ToldRPM > 0:
			told = fmt.Sprintf("%d req/min", sc.ToldRPM)
		}
		allows := fmt.Sprintf("%d req/min", sc.RPM)
		if sc.ProviderConcurrency > 0 {
			allows += fmt.Sprintf(" and %d requests at once", sc.ProviderConcurrency)
		}
		fmt.Fprintf(w, "Limits: the provider allows %s; quorum was told %s; its headers stated %s; the limiter ended at %s learned\n",
			allows, told, orNone(r.StatedRPM), orNone(r.LearnedRPM))
	}
	if st := r.Stranger; st != nil {
		fmt.Fprintf(w, "Another client on the quota: asked %d req/min, served %.0f req/min, %d x 429 (%.2f %% of its %d requests), %d failed; together %.3f of the provider's capacity\n",
			st.DemandRPM, st.ServedRPM, st.RateLimited, 100*st.RateLimitedShare, st.Requests, st.Failed, st.SharedRatio)
	}
	fmt.Fprintf(w, "Example latency p50 %.1fs p95 %.1fs (%.1fs / %.1fs once its first task started); one candidate chain p50 %.1fs p95 %.1fs; overhead %.1f ms/task\n",
		r.LatencyP50, r.LatencyP95, r.ServiceP50, r.ServiceP95, r.ChainP50, r.ChainP95, r.OverheadMS)
	if p := r.OverheadByPart; p != nil {
		fmt.Fprintf(w, "Overhead per task: runtime %.2f ms (decode %.2f, redis %.2f, blob %.2f, nats %.2f; a task's time outside the agent p50 %.2f ms, p95 %.2f ms); token counting %.2f ms; agent's own work %.2f ms\n",
			r.RuntimeOverheadMS, p["decode"], p["redis"], p["blob"], p["nats"], r.RuntimeOverheadP50MS, r.RuntimeOverheadP95MS, p["token_counting"], p["agent_other"])
	}
	fmt.Fprintf(w, "Per example: %.2f LLM calls, %.2f warehouse queries, %.0f tokens; per candidate %.2f calls, %.2f queries (paper: 3.52 / 3.89 with exploration, 1.69 without)\n",
		r.CallsPerExample, r.QueriesPerEx, r.TokensPerExample, r.CallsPerCand, r.QueriesPerCand)
	fmt.Fprintf(w, "EX %.4f, EX@k %.4f; %d high / %d low confidence\n", r.EX, r.EXAtK, r.HighConf, r.LowConf)
	if r.CachedTokens > 0 || r.MoneyPerExample > 0 {
		fmt.Fprintf(w, "Prompt cache: %.1f %% of prompt tokens cached; money per example %.4f; warm-up waits %.2f s per example\n",
			100*r.CachedShare, r.MoneyPerExample, r.WarmUpWaitPerExample)
	}
	if len(r.Series) > 0 {
		fmt.Fprintf(w, "\nScale series (the figures above are its first point's run):\n")
		fmt.Fprintf(w, "%8s %8s %6s %5s %6s %9s %9s %11s %13s %9s %15s %11s\n", "examples", "wall s", "quota", "429s", "failed", "CPU s/ex", "peak MiB", "outside s", "outside ms/ex", "prep s", "overhead ms p50/p95", "Redis B/ex")
		for _, p := range r.Series {
			prep := p.Phases["dataset"] + p.Phases["simulator"] + p.Phases["cluster"] + p.Phases["manifest"]
			fmt.Fprintf(w, "%8d %8.1f %6.3f %5d %6d %9.3f %9.0f %11.1f %13.2f %9.1f %9.2f / %6.2f %11.0f\n", p.Examples, p.Wall, p.QuotaRatio, p.RateLimited, p.FailedExamples,
				p.CPUPerExample, float64(p.PeakRSS)/(1<<20), p.OutsideWall, p.OutsideWallPerExampleMS, prep, p.RuntimeOverheadP50MS, p.RuntimeOverheadP95MS, p.RedisBytesPerExample)
		}
		fmt.Fprintln(w, "(outside s: the point's whole time less the run's wall; prep s: the dataset, simulator, cluster and manifest, the rest is the coordinator's start, scoring and outputs, measuring and shutting down; bench.json splits it by phase)")
	}
	for _, p := range r.Scaling {
		fmt.Fprintf(w, "  %2d generators: %6.0f LLM calls/min, %5.1f examples/min, CPU %3.0f%%, bound by %s\n", p.Generators, p.CallsPerMinute, p.ExamplesPerMinute, 100*p.CPUUtilization, p.Bound)
	}
	switch {
	case r.BindsAt > 0:
		fmt.Fprintf(w, "The %d req/min quota binds from %d generator workers.\n", r.Scenario.RPM, r.BindsAt)
	case r.BindsAtEstimate > 0:
		fmt.Fprintf(w, "No scaling run reached the %d req/min quota; at the largest run's rate per worker it binds from about %d generator workers (x %d tasks).\n",
			r.Scenario.RPM, r.BindsAtEstimate, r.Scenario.ScalingConcurrency)
	}
	fmt.Fprintf(w, "Wrote %s and %s (bench took %s)\n", filepath.Join(out, "bench.json"), filepath.Join(out, "report.html"), took.Round(time.Second))
}

// orNone is a limit in requests a minute, or "nothing".
func orNone(rpm float64) string {
	if rpm <= 0 {
		return "nothing"
	}
	return fmt.Sprintf("%.0f req/min", rpm)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// benchMixed runs the mixed benchmark: the mixed scenario's defaults, with
// the scenario flags given explicitly applied over them.
func benchMixed(cmd *cobra.Command, sc bench.Scenario, ms bench.MixedScenario, interval time.Duration, agentOpts []string,
	scenarioFile string, compare []string, work, out string, asJSON bool) error {
	switch {
	case scenarioFile != "":
		return usage(fmt.Errorf("--mixed takes its scenario from flags (--examples, --votes, --rpm, …), not --scenario"))
	case len(compare) > 0:
		return usage(fmt.Errorf("--mixed runs one agent: use --agent, not --agents"))
	case interval < 0:
		return usage(fmt.Errorf("--interval %s: it must not be negative", interval))
	}
	flagsOver(cmd, &ms.Scenario, sc)
	ms.IntervalMS = int(interval.Milliseconds())
	if err := benchOptions(&ms.Scenario, agentOpts); err != nil {
		return usage(err)
	}
	if err := ms.Validate(); err != nil {
		return err
	}
	if work == "" {
		dir, err := os.MkdirTemp("", "quorum-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		work = dir
	}
	progress := cmd.ErrOrStderr()
	fmt.Fprintf(progress, "bench %s: %d questions x %d candidates, idle then during a batch of %d examples x %d candidates, %d req/min, SIMULATED LLM (llmsim)\n",
		ms.Name, ms.Questions, ms.QuestionVotes, ms.Examples, ms.Votes, ms.RPM)
	start := time.Now()
	rep, err := bench.Mixed(cmd.Context(), ms, work, progress)
	if err != nil {
		return err
	}
	if err := writeJSONFile(out, "mixed.json", rep); err != nil {
		return err
	}
	if asJSON {
		c, _ := json.Marshal(rep)
		fmt.Fprintln(cmd.OutOrStdout(), string(c))
		return nil
	}
	printMixed(cmd.OutOrStdout(), rep, out, time.Since(start))
	return nil
}

func printMixed(w io.Writer, r *bench.MixedReport, out string, took time.Duration) {
	s := r.Scenario
	fmt.Fprintf(w, "\nScenario %s (SIMULATED LLM): %d req/min, first token %d ms, %.0f tokens/s; %d generator workers x %d, %d explorer x %d\n",
		s.Name, s.RPM, s.FirstTokenMS, s.TokensPerSecond, s.Generators, s.GeneratorConcurrency, s.Explorers, s.ExplorerConcurrency)
	fmt.Fprintf(w, "%d questions x %d candidates, one every %s, cache off; batch %d examples x %d candidates\n\n",
		s.Questions, s.QuestionVotes, time.Duration(s.IntervalMS)*time.Millisecond, s.Examples, s.Votes)
	fmt.Fprintf(w, "%-14s %7s %7s %7s %9s %10s %10s %6s %6s %8s\n", "phase", "p50 s", "p95 s", "max s", "chain p50", "quota wait", "unserved", "429s", "failed", "CPU")
	for _, p := range []struct {
		name string
		ph   bench.Phase
	}{{"idle", r.Idle}, {"batch running", r.Mixed}} {
		fmt.Fprintf(w, "%-14s %7.2f %7.2f %7.2f %9.2f %10.2f %10.2f %6d %6d %7.0f%%\n", p.name, p.ph.P50, p.ph.P95, p.ph.Max,
			p.ph.ChainP50, p.ph.LimiterWaitP50, p.ph.OutsideServiceP50, p.ph.ProviderRateLimited+int64(p.ph.QuestionRateLimited), p.ph.Failed, 100*p.ph.CPUUtilization)
	}
	b := r.Batch
	fmt.Fprintf(w, "\np50 ratio (batch running / idle): %.2f\n", r.RatioP50)
	fmt.Fprintf(w, "Batch: questions began %.1fs after its start with %d tasks in flight (%d generator + %d explorer slots); while they ran (%.1fs) it finished %d examples at %.0f LLM calls/min (%.0f with the questions', %.0f%% of the quota)\n",
		b.UnderWaySeconds, b.InFlightAtStart, b.GeneratorSlots, b.ExplorerSlots, b.WindowSeconds, b.ExamplesInWindow, b.CallsPerMinute, b.TotalCallsPerMinute, 100*b.QuotaShareInWindow)
	if b.Report != nil {
		fmt.Fprintf(w, "Batch overall: %d examples in %.1fs, quota ratio %.3f, %d failed, 429s %d (client %d)\n",
			b.Report.Examples, b.Wall, b.Report.QuotaRatio, b.Failed, b.ProviderRateLimited, b.ClientRateLimited)
	}
	verdict := "MET"
	if !r.Acceptance {
		verdict = "NOT MET"
	}
	fmt.Fprintf(w, "\nAcceptance %s:\n", verdict)
	for _, v := range r.Verdict {
		fmt.Fprintf(w, "  %s\n", v)
	}
	fmt.Fprintf(w, "Wrote %s (bench took %s)\n", filepath.Join(out, "mixed.json"), took.Round(time.Second))
}

// writeBenchFiles writes v as out/bench.json and html's page as
// out/report.html.
func writeBenchFiles(out string, v any, html func(io.Writer) error) error {
	if err := writeJSONFile(out, "bench.json", v); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(out, "report.html"))
	if err != nil {
		return err
	}
	if err := html(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeJSONFile writes v, indented, as out/name, making out if needed.
func writeJSONFile(out, name string, v any) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, name), append(b, '\n'), 0o644)
}

// flagsOver copies into dst the scenario fields whose flags were given
// explicitly (their values are in flags): they win over a scenario file
// and over the mixed benchmark's defaults.
func flagsOver(cmd *cobra.Command, dst *bench.Scenario, flags bench.Scenario) {
	set := func(name string, apply func()) {
		if flagChanged(cmd, name) {
			apply()
		}
	}
	set("dataset", func() { dst.Dataset = flags.Dataset })
	set("examples", func() { dst.Examples = flags.Examples })
	set("votes", func() { dst.Votes = flags.Votes })
	set("agent", func() { dst.Agent = flags.Agent })
	set("persona", func() { dst.Persona = flags.Persona })
	set("max-in-flight", func() { dst.MaxInFlight = flags.MaxInFlight })
	set("llm-rpm", func() { dst.RPM = flags.RPM })
	set("llm-tpm", func() { dst.TPM = flags.TPM })
	set("ttft", func() { dst.FirstTokenMS = flags.FirstTokenMS })
	set("tps", func() { dst.TokensPerSecond = flags.TokensPerSecond })
	set("generators", func() { dst.Generators = flags.Generators })
	set("generator-concurrency", func() { dst.GeneratorConcurrency = flags.GeneratorConcurrency })
	set("scaling-examples", func() { dst.ScalingExamples = flags.ScalingExamples })
	set("nats-url", func() { dst.NATSURL = flags.NATSURL })
	set("redis-url", func() { dst.RedisURL = flags.RedisURL })
}

// benchDeployments runs the deployments scenarios: their defaults, with
// the scenario flags given explicitly applied over them.
func benchDeployments(cmd *cobra.Command, sc bench.Scenario, ds bench.DeployScenario, ttft time.Duration, work, out string, asJSON bool) error {
	fl := cmd.Flags()
	for name, apply := range map[string]func(){
		"dataset": func() { ds.Dataset = sc.Dataset }, "examples": func() { ds.Examples = sc.Examples }, "votes": func() { ds.Votes = sc.Votes },
		"ttft": func() { ds.FirstTokenMS = int(ttft.Milliseconds()) }, "tps": func() { ds.TokensPerSecond = sc.TokensPerSecond },
		"generators": func() { ds.Generators = sc.Generators }, "generator-concurrency": func() { ds.GeneratorConcurrency = sc.GeneratorConcurrency },
	} {
		if fl.Changed(name) {
			apply()
		}
	}
	if work == "" {
		dir, err := os.MkdirTemp("", "quorum-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		work = dir
	}
	start := time.Now()
	rep, err := bench.RunDeployments(cmd.Context(), ds, work, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if err := writeJSONFile(out, "bench.json", rep); err != nil {
		return err
	}
	if asJSON {
		c, _ := json.Marshal(rep)
		fmt.Fprintln(cmd.OutOrStdout(), string(c))
		return nil
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "deployments %v req/min, %d examples x %d candidates, SIMULATED LLM (llmsim)\n", ds.RPM, ds.Examples, ds.Votes)
	fmt.Fprintf(w, "%-14s %8s %7s %6s %6s %-18s %11s\n", "run", "wall s", "failed", "429s", "ratio", "served", "down s")
	for _, r := range []struct {
		name string
		r    bench.DeployRun
	}{{"(a) all up", rep.A}, {"(b) one killed", rep.B}} {
		fmt.Fprintf(w, "%-14s %8.1f %7d %6d %6.3f %-18s %11.1f\n", r.name, r.r.Wall, r.r.Failed, r.r.RateLimited, r.r.QuotaRatio, fmt.Sprint(r.r.Served), r.r.KilledSeconds)
	}
	fmt.Fprintf(w, "(ratio: calls served over the capacity of the deployments up; answers of (b) the same as (a)'s: %v)\n", rep.SameAnswers)
	fmt.Fprintf(w, "Wrote %s (bench took %s)\n", filepath.Join(out, "bench.json"), time.Since(start).Round(time.Second))
	return nil
}

// priceFlag is --price: INPUT,CACHED_INPUT,OUTPUT per million tokens.
type priceFlag struct{ p **llm.Price }

func (f *priceFlag) String() string {
	if f.p == nil || *f.p == nil {
		return ""
	}
	p := *f.p
	return fmt.Sprintf("%g,%g,%g", p.Input, p.CachedInput, p.Output)
}

func (f *priceFlag) Set(v string) error {
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		return fmt.Errorf("want INPUT,CACHED_INPUT,OUTPUT, e.g. 2.5,1.25,10")
	}
	var x [3]float64
	for i, s := range parts {
		n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || n < 0 {
			return fmt.Errorf("price %q is not a non-negative number", s)
		}
		x[i] = n
	}
	*f.p = &llm.Price{Input: x[0], CachedInput: x[1], Output: x[2]}
	return nil
}

func (f *priceFlag) Type() string { return "prices" }
