package cli

import (
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/quorumsql/quorum/internal/app/bench"
	"github.com/quorumsql/quorum/pkg/agents"
)

// benchFlags are bench's flag values. Most scenario flags write straight
// into sc, ms and ds, the three benchmarks' scenarios, so their defaults
// are the scenarios' own.
type benchFlags struct {
	scenarioFile, out, work string
	asJSON, noScaling       bool
	compare, personas       []string
	policies                []string
	traceLevels             []string
	scale                   []int
	agentOpts               []string
	sc                      bench.Scenario
	ttft                    time.Duration
	mixed                   bool
	ms                      bench.MixedScenario
	interval                time.Duration
	deploy                  bool
	ds                      bench.DeployScenario
	killAfter, killFor      time.Duration
	cpuProfile, memProfile  string
}

func newBenchFlags() *benchFlags {
	f := &benchFlags{sc: bench.Standard(), ms: bench.StandardMixed(), ds: bench.Deployments()}
	f.ttft = time.Duration(f.sc.FirstTokenMS) * time.Millisecond
	f.interval = time.Duration(f.ms.IntervalMS) * time.Millisecond
	return f
}

// register adds bench's flags to fs. The order is kept as it has always
// been: deprecate and optionAliases need their flag registered before them.
func (f *benchFlags) register(fs *pflag.FlagSet) {
	f.registerRun(fs)
	f.registerWorkload(fs)
	f.registerProvider(fs)
	f.registerWorkers(fs)
	f.registerAgentOptions(fs)
	f.registerMixed(fs)
	f.registerDeployments(fs)
	f.registerRig(fs)
}

// registerRun adds the scenario file, the folders and the report's form.
func (f *benchFlags) registerRun(fs *pflag.FlagSet) {
	fs.StringVar(&f.scenarioFile, "scenario", "", "YAML scenario (fields as in bench.json's scenario)")
	fs.StringVar(&f.out, "out", filepath.Join("out", "bench"), "where bench.json and report.html go")
	fs.StringVar(&f.work, "work", "", "working folder for datasets and state (default: a temporary one)")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as one JSON object")
	fs.BoolVar(&f.noScaling, "no-scaling", false, "skip the scaling runs")
}

// registerWorkload adds what runs: the dataset, the agents and what the
// comparisons vary between runs.
func (f *benchFlags) registerWorkload(fs *pflag.FlagSet) {
	sc := &f.sc
	fs.StringVar(&sc.Dataset, "dataset", sc.Dataset, "base dataset the synthetic one cycles through")
	fs.IntVar(&sc.Examples, "examples", sc.Examples, "examples in the run")
	fs.IntVar(&sc.Votes, "votes", sc.Votes, "candidates per example")
	fs.StringVar(&sc.Agent, "agent", agents.Default, "agent to run (quorum agents lists them)")
	fs.StringSliceVar(&f.compare, "agents", nil, "compare these agents, one run each on the same dataset, seed and quota (e.g. reforce,pexa,raise,ensemble); no scaling runs")
	fs.StringSliceVar(&f.personas, "personas", nil, "conformance: run each agent (--agents, else --agent) under each of the simulator's personas (all, or e.g. gpt-4o,o3,claude,deepseek-r1,deepseek-reasoner,qwen-coder,truncating,envelopes) on the same seed, canonical first; no scaling runs")
	fs.StringSliceVar(&f.traceLevels, "trace", nil, "what each example's trace keeps: full (the default), summary or none; two or more (full,none) compare what tracing costs, one run each, no scaling runs")
	fs.StringSliceVar(&f.policies, "sampling", nil, "compare candidate sampling policies (fixed,adaptive), one run each per agent (--agents, else --agent) on the same dataset, seed, difficulty mix and quota; no scaling runs")
	fs.StringVar(&sc.Difficulty, "difficulty", sc.Difficulty, "the simulator's mix of easy, medium and hard questions: easy=W,medium=W,hard=W, default, or off (--sampling uses default when unset)")
	fs.StringVar(&sc.Persona, "persona", "", "the simulator's persona for every call (canonical when unset; quorum llmsim --help lists them)")
}

// registerProvider adds the admission window and the simulated provider:
// its quota, neighbours, prompt cache, price and latency.
func (f *benchFlags) registerProvider(fs *pflag.FlagSet) {
	sc := &f.sc
	fs.IntVar(&sc.MaxInFlight, "max-in-flight", 0, "admission window (0 = derived from the quota and the agent's load, -1 = every example at once)")
	fs.IntVar(&sc.RPM, "llm-rpm", sc.RPM, "provider requests/min (the limiter is set to the same quota unless --told-rpm)")
	fs.IntVar(&sc.TPM, "llm-tpm", sc.TPM, "provider tokens/min (0 = none)")
	fs.IntVar(&sc.ToldRPM, "told-rpm", 0, "requests/min quorum's limiter is told, when not the provider's (-1 = no limit: quorum must learn it)")
	fs.IntVar(&sc.ProviderConcurrency, "provider-concurrency", 0, "concurrent requests the provider allows before 429s (0 = any)")
	fs.BoolVar(&sc.SilentLimits, "silent-limits", false, "the provider states no x-ratelimit-* headers (429s still name their retry delay)")
	fs.IntVar(&sc.StrangerRPM, "stranger-rpm", 0, "another client's steady requests/min on the same provider quota (it retries 429s as told)")
	fs.BoolVar(&sc.PromptCache, "prompt-cache", sc.PromptCache, "the simulated provider caches prompt prefixes (cached_tokens for a shared prefix of >= 1,024 tokens)")
	fs.BoolVar(&sc.CachedOutsideTPM, "cached-outside-tpm", sc.CachedOutsideTPM, "cached prompt tokens do not count toward the provider's tokens/min (nor the limiter's)")
	fs.BoolVar(&sc.PromptCacheMarkers, "prompt-cache-markers", sc.PromptCacheMarkers, "the simulated cache keeps only prefixes a request marks with cache_control, as Anthropic's does (with --prompt-cache)")
	fs.BoolVar(&sc.CacheMarkers, "cache-markers", sc.CacheMarkers, "the client marks its prompts' stable parts with cache_control (llm-config's cache_markers)")
	fs.BoolVar(&sc.WarmUp, "warm-up", sc.WarmUp, "the client sends the first call of those sharing a long prompt start ahead, the others once it has warmed the cache (llm-config's warm_up)")
	fs.Var(&priceFlag{p: &sc.Price}, "price", "price of the simulated model per million tokens, INPUT,CACHED_INPUT,OUTPUT: bench.json then gives money per example")
	deprecate(fs, "llm-rpm", "rpm")
	deprecate(fs, "llm-tpm", "tpm")
	fs.DurationVar(&f.ttft, "ttft", f.ttft, "simulated time to first token")
	fs.Float64Var(&sc.TokensPerSecond, "tps", sc.TokensPerSecond, "simulated completion tokens per second")
}

// registerWorkers adds the generator workers and the sizes runs scale to.
func (f *benchFlags) registerWorkers(fs *pflag.FlagSet) {
	sc := &f.sc
	fs.IntVar(&sc.Generators, "generators", sc.Generators, "generator worker loops")
	fs.IntVar(&sc.GeneratorConcurrency, "generator-concurrency", sc.GeneratorConcurrency, "tasks each generator worker handles at once")
	fs.IntVar(&sc.ScalingExamples, "scaling-examples", sc.ScalingExamples, "examples in each scaling run")
	fs.IntSliceVar(&f.scale, "scale", nil, "scale series: run the scenario at each of these sizes (e.g. 547,1500,4000,10000), each on a rig of its own, instead of --examples and the scaling runs; reports per size the quota ratio, 429s, failed, CPU per example, peak RSS, time outside the run's wall, runtime overhead per task and Redis bytes per example")
}

// registerAgentOptions adds --agent-option and the old option flags that
// are its aliases.
func (f *benchFlags) registerAgentOptions(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.agentOpts, "agent-option", nil, "an option of --agent, NAME=VALUE (repeatable; quorum agents lists them); over the scenario's agent_options")
	optionAliases(fs, ablationOptionFlags...)
}

// registerMixed adds --mixed and the flags only it reads.
func (f *benchFlags) registerMixed(fs *pflag.FlagSet) {
	fs.BoolVar(&f.mixed, "mixed", false, "measure questions' latency while a batch runs, against an idle cluster (its own defaults: 44 examples, 600 req/min, 2 generators x 8)")
	fs.IntVar(&f.ms.Questions, "questions", f.ms.Questions, "--mixed: questions asked in each phase")
	fs.IntVar(&f.ms.QuestionVotes, "question-votes", f.ms.QuestionVotes, "--mixed: candidates per question")
	fs.DurationVar(&f.interval, "interval", f.interval, "--mixed: time between questions")
}

// registerDeployments adds --deployments and the flags only it reads.
func (f *benchFlags) registerDeployments(fs *pflag.FlagSet) {
	fs.BoolVar(&f.deploy, "deployments", false, "issue 33's scenarios (a) and (b): one model behind llmsim deployments (--deployment-rpm), all up, then the first killed for --kill-for after --kill-after; quota ratios, 429s, failed examples, whether the answers are the same (its own defaults: 120 examples x 8, 2 generators x 24)")
	fs.IntSliceVar(&f.ds.RPM, "deployment-rpm", f.ds.RPM, "--deployments: requests/min of each deployment")
	fs.DurationVar(&f.killAfter, "kill-after", time.Duration(f.ds.KillAfterSeconds*float64(time.Second)), "--deployments: when run (b) kills the first deployment")
	fs.DurationVar(&f.killFor, "kill-for", time.Duration(f.ds.KillSeconds*float64(time.Second)), "--deployments: how long it stays down")
}

// registerRig adds the servers to use instead of the rig's own, and the
// profiles of the whole bench.
func (f *benchFlags) registerRig(fs *pflag.FlagSet) {
	fs.StringVar(&f.sc.NATSURL, "nats-url", "", "use this NATS server instead of an embedded one")
	fs.StringVar(&f.sc.RedisURL, "redis-url", "", "use this Redis instead of starting one")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a pprof CPU profile of the whole bench (every role, NATS and the simulator; not redis-server) to this file")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a pprof allocation profile (every allocation since the start, sampled) to this file at the end")
}
