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
	var (
		scenarioFile, out, work string
		asJSON, noScaling       bool
		compare, personas       []string
		policies                []string
		traceLevels             []string
		scale                   []int
		agentOpts               []string
		sc                      = bench.Standard()
		ttft                    = time.Duration(sc.FirstTokenMS) * time.Millisecond
		mixed                   bool
		ms                      = bench.StandardMixed()
		interval                = time.Duration(ms.IntervalMS) * time.Millisecond
		deploy                  bool
		ds                      = bench.Deployments()
		killAfter, killFor      time.Duration
		cpuProfile, memProfile  string
	)
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
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			sc.FirstTokenMS = int(ttft.Milliseconds())
			stop, err := startProfiles(cpuProfile, memProfile)
			if err != nil {
				return err
			}
			defer func() {
				if perr := stop(); perr != nil && err == nil {
					err = perr
				}
			}()
			if mixed && len(scale) > 0 {
				return usage(fmt.Errorf("--scale and --mixed are separate benchmarks: run them one at a time"))
			}
			if deploy {
				ds.KillAfterSeconds, ds.KillSeconds = killAfter.Seconds(), killFor.Seconds()
				return benchDeployments(cmd, sc, ds, ttft, work, out, asJSON)
			}
			if mixed {
				return benchMixed(cmd, sc, ms, interval, agentOpts, scenarioFile, compare, work, out, asJSON)
			}
			if scenarioFile != "" {
				loaded, err := bench.LoadScenario(scenarioFile)
				if err != nil {
					return err
				}
				// Flags given explicitly win over the file.
				flagsOver(cmd, &loaded, sc)
				sc = loaded
			}
			if len(agentOpts) > 0 && len(compare) > 0 {
				return usage(fmt.Errorf("--agent-option sets the options of --agent: --agents compares agents with their own defaults"))
			}
			if err := benchOptions(&sc, agentOpts); err != nil {
				return usage(err)
			}
			if noScaling {
				sc.Scaling = nil
			}
			if work == "" {
				dir, err := os.MkdirTemp("", "quorum-bench")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				work = dir
			}
			progress := io.Writer(cmd.ErrOrStderr())
			if len(traceLevels) == 1 {
				// One level is the run's (two or more compare them below).
				sc.Trace = strings.TrimSpace(traceLevels[0])
			}
			if err := sc.Validate(); err != nil {
				return err
			}
			if len(scale) > 0 && (len(personas) > 0 || len(compare) > 0) {
				return usage(fmt.Errorf("--scale runs one agent (--agent) at each size: not with --agents or --personas"))
			}
			if len(policies) > 0 {
				return benchSampling(cmd, sc, orDefault(compare, sc.Agent), policies, work, out, asJSON)
			}
			if len(traceLevels) > 1 {
				return benchTrace(cmd, sc, traceLevels, work, out, asJSON)
			}
			if len(personas) > 0 {
				return benchConform(cmd, sc, compare, personas, work, out, asJSON)
			}
			if len(compare) > 0 {
				return benchCompare(cmd, sc, compare, work, out, asJSON)
			}
			start := time.Now()
			var rep *bench.Report
			if len(scale) > 0 {
				fmt.Fprintf(progress, "bench %s: scale series at %s examples x %d candidates, %d req/min, SIMULATED LLM (llmsim)\n", sc.Name, joinInts(scale), sc.Votes, sc.RPM)
				rep, err = bench.Series(cmd.Context(), sc, scale, work, progress)
			} else {
				fmt.Fprintf(progress, "bench %s: %d examples x %d candidates, %d req/min, SIMULATED LLM (llmsim)\n", sc.Name, sc.Examples, sc.Votes, sc.RPM)
				rep, err = bench.Run(cmd.Context(), sc, work, progress)
			}
			if err != nil {
				return err
			}
			if err := writeBenchFiles(out, rep, func(w io.Writer) error { return bench.WriteHTML(w, rep.Run, rep) }); err != nil {
				return err
			}
			if asJSON {
				c, _ := json.Marshal(rep)
				fmt.Fprintln(cmd.OutOrStdout(), string(c))
				return nil
			}
			printBench(cmd.OutOrStdout(), rep, out, time.Since(start))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&scenarioFile, "scenario", "", "YAML scenario (fields as in bench.json's scenario)")
	f.StringVar(&out, "out", filepath.Join("out", "bench"), "where bench.json and report.html go")
	f.StringVar(&work, "work", "", "working folder for datasets and state (default: a temporary one)")
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.BoolVar(&noScaling, "no-scaling", false, "skip the scaling runs")
	f.StringVar(&sc.Dataset, "dataset", sc.Dataset, "base dataset the synthetic one cycles through")
	f.IntVar(&sc.Examples, "examples", sc.Examples, "examples in the run")
	f.IntVar(&sc.Votes, "votes", sc.Votes, "candidates per example")
	f.StringVar(&sc.Agent, "agent", agents.Default, "agent to run (quorum agents lists them)")
	f.StringSliceVar(&compare, "agents", nil, "compare these agents, one run each on the same dataset, seed and quota (e.g. reforce,pexa,raise,ensemble); no scaling runs")
	f.StringSliceVar(&personas, "personas", nil, "conformance: run each agent (--agents, else --agent) under each of the simulator's personas (all, or e.g. gpt-4o,o3,claude,deepseek-r1,deepseek-reasoner,qwen-coder,truncating,envelopes) on the same seed, canonical first; no scaling runs")
	f.StringSliceVar(&traceLevels, "trace", nil, "what each example's trace keeps: full (the default), summary or none; two or more (full,none) compare what tracing costs, one run each, no scaling runs")
	f.StringSliceVar(&policies, "sampling", nil, "compare candidate sampling policies (fixed,adaptive), one run each per agent (--agents, else --agent) on the same dataset, seed, difficulty mix and quota; no scaling runs")
	f.StringVar(&sc.Difficulty, "difficulty", sc.Difficulty, "the simulator's mix of easy, medium and hard questions: easy=W,medium=W,hard=W, default, or off (--sampling uses default when unset)")
	f.StringVar(&sc.Persona, "persona", "", "the simulator's persona for every call (canonical when unset; quorum llmsim --help lists them)")
	f.IntVar(&sc.MaxInFlight, "max-in-flight", 0, "admission window (0 = derived from the quota and the agent's load, -1 = every example at once)")
	f.IntVar(&sc.RPM, "llm-rpm", sc.RPM, "provider requests/min (the limiter is set to the same quota unless --told-rpm)")
	f.IntVar(&sc.TPM, "llm-tpm", sc.TPM, "provider tokens/min (0 = none)")
	f.IntVar(&sc.ToldRPM, "told-rpm", 0, "requests/min quorum's limiter is told, when not the provider's (-1 = no limit: quorum must learn it)")
	f.IntVar(&sc.ProviderConcurrency, "provider-concurrency", 0, "concurrent requests the provider allows before 429s (0 = any)")
	f.BoolVar(&sc.SilentLimits, "silent-limits", false, "the provider states no x-ratelimit-* headers (429s still name their retry delay)")
	f.IntVar(&sc.StrangerRPM, "stranger-rpm", 0, "another client's steady requests/min on the same provider quota (it retries 429s as told)")
	f.BoolVar(&sc.PromptCache, "prompt-cache", sc.PromptCache, "the simulated provider caches prompt prefixes (cached_tokens for a shared prefix of >= 1,024 tokens)")
	f.BoolVar(&sc.CachedOutsideTPM, "cached-outside-tpm", sc.CachedOutsideTPM, "cached prompt tokens do not count toward the provider's tokens/min (nor the limiter's)")
	f.BoolVar(&sc.PromptCacheMarkers, "prompt-cache-markers", sc.PromptCacheMarkers, "the simulated cache keeps only prefixes a request marks with cache_control, as Anthropic's does (with --prompt-cache)")
	f.BoolVar(&sc.CacheMarkers, "cache-markers", sc.CacheMarkers, "the client marks its prompts' stable parts with cache_control (llm-config's cache_markers)")
	f.BoolVar(&sc.WarmUp, "warm-up", sc.WarmUp, "the client sends the first call of those sharing a long prompt start ahead, the others once it has warmed the cache (llm-config's warm_up)")
	f.Var(&priceFlag{p: &sc.Price}, "price", "price of the simulated model per million tokens, INPUT,CACHED_INPUT,OUTPUT: bench.json then gives money per example")
	deprecate(f, "llm-rpm", "rpm")
	deprecate(f, "llm-tpm", "tpm")
	f.DurationVar(&ttft, "ttft", ttft, "simulated time to first token")
	f.Float64Var(&sc.TokensPerSecond, "tps", sc.TokensPerSecond, "simulated completion tokens per second")
	f.IntVar(&sc.Generators, "generators", sc.Generators, "generator worker loops")
	f.IntVar(&sc.GeneratorConcurrency, "generator-concurrency", sc.GeneratorConcurrency, "tasks each generator worker handles at once")
	f.IntVar(&sc.ScalingExamples, "scaling-examples", sc.ScalingExamples, "examples in each scaling run")
	f.IntSliceVar(&scale, "scale", nil, "scale series: run the scenario at each of these sizes (e.g. 547,1500,4000,10000), each on a rig of its own, instead of --examples and the scaling runs; reports per size the quota ratio, 429s, failed, CPU per example, peak RSS, time outside the run's wall, runtime overhead per task and Redis bytes per example")
	f.StringArrayVar(&agentOpts, "agent-option", nil, "an option of --agent, NAME=VALUE (repeatable; quorum agents lists them); over the scenario's agent_options")
	optionAliases(f, ablationOptionFlags...)
	f.BoolVar(&mixed, "mixed", false, "measure questions' latency while a batch runs, against an idle cluster (its own defaults: 44 examples, 600 req/min, 2 generators x 8)")
	f.IntVar(&ms.Questions, "questions", ms.Questions, "--mixed: questions asked in each phase")
	f.IntVar(&ms.QuestionVotes, "question-votes", ms.QuestionVotes, "--mixed: candidates per question")
	f.DurationVar(&interval, "interval", interval, "--mixed: time between questions")
	f.BoolVar(&deploy, "deployments", false, "issue 33's scenarios (a) and (b): one model behind llmsim deployments (--deployment-rpm), all up, then the first killed for --kill-for after --kill-after; quota ratios, 429s, failed examples, whether the answers are the same (its own defaults: 120 examples x 8, 2 generators x 24)")
	f.IntSliceVar(&ds.RPM, "deployment-rpm", ds.RPM, "--deployments: requests/min of each deployment")
	f.DurationVar(&killAfter, "kill-after", time.Duration(ds.KillAfterSeconds*float64(time.Second)), "--deployments: when run (b) kills the first deployment")
	f.DurationVar(&killFor, "kill-for", time.Duration(ds.KillSeconds*float64(time.Second)), "--deployments: how long it stays down")
	f.StringVar(&sc.NATSURL, "nats-url", "", "use this NATS server instead of an embedded one")
	f.StringVar(&sc.RedisURL, "redis-url", "", "use this Redis instead of starting one")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a pprof CPU profile of the whole bench (every role, NATS and the simulator; not redis-server) to this file")
	f.StringVar(&memProfile, "memprofile", "", "write a pprof allocation profile (every allocation since the start, sampled) to this file at the end")
	return cmd
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
