// Package bench measures quorum where it matters: how close a run comes to
// the shortest time its quotas allow, whether it draws 429s or loses work,
// how long an example takes against one candidate chain, what the
// orchestration costs, how throughput scales with workers, and what every
// example cost. It runs the real pieces — embedded NATS with JetStream, a
// local redis-server, the roles, and llmsim with a latency model and
// provider limits — over a synthetic dataset of the chosen size.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/yaml"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/trace"
)

// Scenario is what to run.
type Scenario struct {
	Name     string `json:"name"`
	Dataset  string `json:"dataset"`
	Examples int    `json:"examples"`
	Votes    int    `json:"votes"`
	Seed     uint64 `json:"seed"`
	// Agent runs the examples (default reforce).
	Agent string `json:"agent,omitempty"`
	// AgentOptions are the agent's options (e.g. reforce's ablations,
	// explore-all, no-vote, …), recorded in the run's manifest.
	AgentOptions map[string]string `json:"agent_options,omitempty"`
	// Persona is the simulator's persona for every call (llmsim's
	// personas write as real model families do; "" is canonical). The
	// client then names the persona's model, so an o-series persona gets
	// a reasoning model's request.
	Persona string `json:"persona,omitempty"`
	// MaxInFlight is the coordinator's admission window (0: derived from
	// the quota and the agent's load, -1: every example at once).
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// The simulated provider: limits, latency, skill.
	RPM int `json:"rpm"`
	TPM int `json:"tpm"`
	// ToldRPM is the requests a minute the limiter is told (0: RPM, the
	// provider's; -1: none, the limit unknown to quorum). The provider
	// may also allow ProviderConcurrency requests at once (0: any),
	// state no limit headers (SilentLimits), and serve StrangerRPM
	// requests a minute of another client on the same quota.
	ToldRPM             int  `json:"told_rpm,omitempty"`
	ProviderConcurrency int  `json:"provider_concurrency,omitempty"`
	SilentLimits        bool `json:"silent_limits,omitempty"`
	StrangerRPM         int  `json:"stranger_rpm,omitempty"`
	// PromptCache turns llmsim's prefix cache on; CachedOutsideTPM leaves
	// cached tokens out of its TPM limit and the limiter's (the endpoint
	// declared so). Price prices the calls (llmsim is free otherwise).
	PromptCache      bool `json:"prompt_cache,omitempty"`
	CachedOutsideTPM bool `json:"cached_outside_tpm,omitempty"`
	// PromptCacheMarkers makes llmsim's cache Anthropic's: only a prefix
	// a request marks with cache_control is cached; CacheMarkers has the
	// client mark its prompts (llm.Endpoint.CacheMarkers).
	PromptCacheMarkers bool `json:"prompt_cache_markers,omitempty"`
	CacheMarkers       bool `json:"cache_markers,omitempty"`
	// WarmUp has the client send the first call of those sharing a long
	// prompt start ahead of the others (llm.Endpoint.WarmUp).
	WarmUp          bool       `json:"warm_up,omitempty"`
	Price           *llm.Price `json:"price,omitempty"`
	FirstTokenMS    int        `json:"first_token_ms"`
	TokensPerSecond float64    `json:"tokens_per_second"`
	Jitter          float64    `json:"jitter"`
	PGold           float64    `json:"p_gold"`
	// Difficulty is the simulator's mix of easy, medium and hard
	// questions (llmsim.ParseDifficulty: "easy=W,medium=W,hard=W",
	// "default"); "" keeps its uniform skill.
	Difficulty string `json:"difficulty,omitempty"`
	// Trace is what each example's trace keeps (pkg/trace: full,
	// summary, none); "" is full, quorum run's default.
	Trace string `json:"trace,omitempty"`
	// The cluster: worker loops and tasks each takes at once.
	Generators           int `json:"generators"`
	GeneratorConcurrency int `json:"generator_concurrency"`
	Explorers            int `json:"explorers"`
	ExplorerConcurrency  int `json:"explorer_concurrency"`
	// Scaling runs ScalingExamples with each number of generator workers
	// (each taking ScalingConcurrency tasks at once), without provider
	// limits.
	Scaling            []int `json:"scaling"`
	ScalingExamples    int   `json:"scaling_examples"`
	ScalingConcurrency int   `json:"scaling_concurrency"`
	// NATSURL and RedisURL use running servers instead of starting them.
	NATSURL  string `json:"nats_url,omitempty"`
	RedisURL string `json:"redis_url,omitempty"`
}

// Standard is `make bench`'s scenario: Spider 2.0's size (547 examples x 8
// candidates) against a provider allowing 3,000 requests a minute.
func Standard() Scenario {
	return Scenario{Name: "spider2-size", Dataset: "examples/demo", Examples: 547, Votes: 8, Seed: 1,
		RPM: 3000, FirstTokenMS: 300, TokensPerSecond: 150, Jitter: 0.3, PGold: 0.5,
		Generators: 4, GeneratorConcurrency: 24, Explorers: 2, ExplorerConcurrency: 24,
		Scaling: []int{1, 2, 4, 8, 16}, ScalingExamples: 48, ScalingConcurrency: 4}
}

// LoadScenario reads a YAML scenario over the standard one.
func LoadScenario(path string) (Scenario, error) {
	sc := Standard()
	b, err := os.ReadFile(path)
	if err != nil {
		return sc, fmt.Errorf("scenario: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, &sc); err != nil {
		return sc, fmt.Errorf("scenario %s: %w (examples/bench/spider2-size.yaml lists the fields)", path, err)
	}
	return sc, nil
}

// Validate names the first field that cannot run, with the flag that sets it.
// trace is the scenario's trace level, full unless it says.
func (sc Scenario) trace() string { return cmp.Or(sc.Trace, trace.NameFull) }

func (sc Scenario) Validate() error {
	if _, err := agents.Builtin().Lookup(sc.agent()); err != nil {
		return fmt.Errorf("bench scenario %s: agent (--agent): %w", sc.Name, err)
	}
	if _, err := llmsim.ParseDifficulty(sc.Difficulty); err != nil {
		return fmt.Errorf("bench scenario %s: difficulty (--difficulty): %w", sc.Name, err)
	}
	if _, err := trace.ParseLevel(sc.trace()); err != nil {
		return fmt.Errorf("bench scenario %s: trace: %w", sc.Name, err)
	}
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{
		{"examples (--examples)", sc.Examples, 1}, {"votes (--votes)", sc.Votes, 1},
		{"generators (--generators)", sc.Generators, 1}, {"generator_concurrency (--generator-concurrency)", sc.GeneratorConcurrency, 1},
		{"explorers", sc.Explorers, 1}, {"explorer_concurrency", sc.ExplorerConcurrency, 1},
		{"rpm (--rpm)", sc.RPM, 0}, {"tpm (--tpm)", sc.TPM, 0},
		{"told_rpm (--told-rpm)", sc.ToldRPM, -1}, {"provider_concurrency (--provider-concurrency)", sc.ProviderConcurrency, 0},
		{"stranger_rpm (--stranger-rpm)", sc.StrangerRPM, 0},
	} {
		if f.v < f.min {
			return fmt.Errorf("bench scenario %s: %s is %d; it must be at least %d", sc.Name, f.name, f.v, f.min)
		}
	}
	return nil
}

// prices are the simulated endpoint's: sc.Price for every model, else
// none (a simulated call is free whatever model it names).
func (sc Scenario) prices() llm.Prices {
	if sc.Price != nil {
		return llm.Prices{llm.AnyModel: *sc.Price}
	}
	return llm.Prices{llm.AnyModel: {}}
}

// told is the requests a minute the limiter is told (0: none).
func (sc Scenario) told() int {
	switch {
	case sc.ToldRPM < 0:
		return 0
	case sc.ToldRPM > 0:
		return sc.ToldRPM
	}
	return sc.RPM
}

func (sc Scenario) agent() string {
	if sc.Agent == "" {
		return agents.Default
	}
	return sc.Agent
}

// Report is what a benchmark measured; its JSON is `quorum bench --json`.
type Report struct {
	Scenario Scenario `json:"scenario"`
	// Examples and Candidates are the run's size.
	Examples   int     `json:"examples"`
	Candidates int     `json:"candidates"`
	Wall       float64 `json:"wall_seconds"`
	// QuotaBound is the shortest wall time the binding limit allows for
	// the calls the run made; QuotaRatio is QuotaBound / Wall (1 = at the
	// quota).
	QuotaBound   float64 `json:"quota_bound_seconds"`
	BindingLimit string  `json:"binding_limit"`
	QuotaRatio   float64 `json:"quota_ratio"`

	// RateLimited is the run's 429s (the stranger's not counted),
	// RateLimitedShare their share of the run's attempts.
	RateLimited      int64   `json:"rate_limited_responses"`
	RateLimitedShare float64 `json:"rate_limited_share"`
	// LearnedRPM and StatedRPM are what the limiter learned of the
	// provider's requests a minute at the end (0: nothing, the quota it
	// was told stood) and what the provider's headers stated.
	LearnedRPM float64 `json:"learned_rpm,omitempty"`
	StatedRPM  float64 `json:"stated_rpm,omitempty"`
	// Stranger is the other client's share of the provider (StrangerRPM).
	Stranger       *StrangerFigures `json:"stranger,omitempty"`
	Redeliveries   int64            `json:"redeliveries"`
	FailedExamples int              `json:"failed_examples"`

	LLMCalls         int64 `json:"llm_calls"`
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	// CachedTokens are the prompt tokens served from the provider's
	// prompt cache, CachedShare their share of the prompt tokens;
	// MoneyPerExample is what an example cost at Scenario.Price.
	CachedTokens    int64   `json:"cached_tokens"`
	CachedShare     float64 `json:"cached_share"`
	MoneyPerExample float64 `json:"money_per_example"`
	// WarmUpWaitPerExample is the time an example's calls waited for the
	// first call of their prompt to warm the cache (Scenario.WarmUp).
	WarmUpWaitPerExample float64 `json:"warm_up_wait_per_example_seconds,omitempty"`
	WarehouseQueries     int     `json:"warehouse_queries"`
	CallsPerExample      float64 `json:"llm_calls_per_example"`
	QueriesPerEx         float64 `json:"warehouse_queries_per_example"`
	TokensPerExample     float64 `json:"tokens_per_example"`
	CallsPerCand         float64 `json:"llm_calls_per_candidate"`
	QueriesPerCand       float64 `json:"warehouse_queries_per_candidate"`
	// PerStage is LLM calls, tokens and queries per example, by stage.
	PerStage map[string]StageCost `json:"per_stage"`

	LatencyP50 float64 `json:"latency_p50_seconds"`
	LatencyP95 float64 `json:"latency_p95_seconds"`
	// ServiceP50/P95 exclude the time an example queued for its first
	// task (behind the quota, when it binds).
	ServiceP50 float64 `json:"service_latency_p50_seconds"`
	ServiceP95 float64 `json:"service_latency_p95_seconds"`
	ChainP50   float64 `json:"critical_path_p50_seconds"`
	ChainP95   float64 `json:"critical_path_p95_seconds"`
	// Overhead is the mean time per task outside LLM calls and warehouse
	// queries (waiting for the quota excluded).
	OverheadMS float64 `json:"orchestration_overhead_ms_per_task"`
	// RuntimeOverheadMS is the runtime's own share per task (decoding
	// messages, Redis round trips, blob I/O, NATS publishes);
	// OverheadByPart splits the overhead, token counting and the agent's
	// own work included.
	RuntimeOverheadMS float64            `json:"runtime_overhead_ms_per_task"`
	OverheadByPart    map[string]float64 `json:"overhead_ms_per_task_by_part,omitempty"`
	// RuntimeOverheadP50MS and P95MS are the median and p95 of each
	// executed task's time in its worker outside the agent's execute.
	RuntimeOverheadP50MS float64 `json:"runtime_overhead_ms_per_task_p50"`
	RuntimeOverheadP95MS float64 `json:"runtime_overhead_ms_per_task_p95"`

	EX       float64 `json:"ex"`
	EXAtK    float64 `json:"ex_at_k"`
	HighConf int     `json:"high_confidence"`
	LowConf  int     `json:"low_confidence"`

	Scaling []ScalingPoint `json:"scaling,omitempty"`
	// Series is the scale series (--scale): the scenario at each size.
	Series []SeriesPoint `json:"scale_series,omitempty"`
	// BindsAt is the fewest generator workers whose unlimited throughput
	// reaches the scenario's request quota.
	BindsAt int `json:"quota_binds_at_generators,omitempty"`
	// BindsAtEstimate extrapolates, when no scaling run reached the quota,
	// from the per-worker throughput of the largest one.
	BindsAtEstimate int `json:"quota_binds_at_generators_estimate,omitempty"`

	Paper PaperFigures `json:"paper"`
	// Redis is what Redis held before the run and once it ended.
	Redis *RedisFigures `json:"redis,omitempty"`
	// RefusalsSent are the replies the simulator wrote as refusals (a
	// persona's; canonical writes none).
	RefusalsSent int64 `json:"refusals_sent,omitempty"`
	// Run is the run's run.json, for the HTML report; Out the folder
	// holding its answers (<instance_id>.sql), which conformance compares.
	Run *outputs.Report `json:"-"`
	Out string          `json:"-"`
}

// RedisFigures is what Redis held before runs and once they ended. The
// ended runs' keys stay only with an expiry (their retention), so once it
// passes Redis is back at Before plus what outlives runs: blobs (14 days),
// caches, counters.
type RedisFigures struct {
	Before RedisSize `json:"before"`
	After  RedisSize `json:"after"`
	// Runs is the runs measured; RunKeys and RunBytes their keys left in
	// After, RunKeysWithoutTTL those of them without an expiry (0 when
	// retention works), RunMaxTTLSeconds the longest expiry among them.
	Runs              int     `json:"runs"`
	RunKeys           int     `json:"run_keys"`
	RunBytes          int64   `json:"run_bytes"`
	RunKeysWithoutTTL int     `json:"run_keys_without_ttl"`
	RunMaxTTLSeconds  float64 `json:"run_max_ttl_seconds"`
}

// RedisSize is Redis's size: DBSIZE and INFO memory's used_memory.
type RedisSize struct {
	Keys       int64 `json:"keys"`
	UsedMemory int64 `json:"used_memory_bytes"`
}

// redisSize reads Redis's size now.
func redisSize(ctx context.Context, rdb redis.UniversalClient) (RedisSize, error) {
	keys, err := rdb.DBSize(ctx).Result()
	if err != nil {
		return RedisSize{}, fmt.Errorf("redis DBSIZE: %w", err)
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return RedisSize{}, fmt.Errorf("redis INFO memory: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			mem, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return RedisSize{}, fmt.Errorf("redis INFO memory: used_memory %q: %w", v, err)
			}
			return RedisSize{Keys: keys, UsedMemory: mem}, nil
		}
	}
	return RedisSize{}, errors.New("redis INFO memory: no used_memory line")
}

// redisFigures measures Redis once runs ended, against before.
func redisFigures(ctx context.Context, rdb redis.UniversalClient, before RedisSize, runs ...string) (*RedisFigures, error) {
	after, err := redisSize(ctx, rdb)
	if err != nil {
		return nil, err
	}
	f := &RedisFigures{Before: before, After: after, Runs: len(runs)}
	st := runstate.New(rdb)
	for _, run := range runs {
		info, err := st.Describe(ctx, run)
		if errors.Is(err, runstate.ErrNoRun) {
			continue // no key left
		}
		if err != nil {
			return nil, err
		}
		f.RunKeys += info.Keys
		f.RunBytes += info.Bytes
		f.RunKeysWithoutTTL += info.Persistent
		f.RunMaxTTLSeconds = max(f.RunMaxTTLSeconds, info.MaxTTL.Seconds())
	}
	return f, nil
}

// StageCost is one stage's cost per example.
type StageCost struct {
	LLMCalls float64 `json:"llm_calls"`
	Tokens   float64 `json:"tokens"`
	Queries  float64 `json:"warehouse_queries"`
}

// ScalingPoint is the throughput with a number of generator workers.
type ScalingPoint struct {
	Generators        int     `json:"generators"`
	Wall              float64 `json:"wall_seconds"`
	CallsPerMinute    float64 `json:"llm_calls_per_minute"`
	ExamplesPerMinute float64 `json:"examples_per_minute"`
	// CPUUtilization is this process's CPU time over wall time and cores;
	// Bound says what limited the point.
	CPUUtilization float64 `json:"cpu_utilization"`
	Bound          string  `json:"bound"`
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PaperFigures are ReFoRCE's reported costs (paper, Table 7 and §4.2).
type PaperFigures struct {
	LLMCallsPerCandidate        float64 `json:"llm_calls_per_candidate_with_exploration"`
	DBCallsPerCandidate         float64 `json:"db_calls_per_candidate_with_exploration"`
	CallsPerCandidateNoExplore  float64 `json:"calls_per_candidate_without_exploration"`
	TokensPerCallThousands      float64 `json:"tokens_per_llm_call_thousands"`
	ObservedTokensPerCallThousa float64 `json:"observed_tokens_per_llm_call_thousands"`
}

// Run runs the scenario and, when sc.Scaling is set, the scaling runs.
func Run(ctx context.Context, sc Scenario, work string, progress io.Writer) (*Report, error) {
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	rep, err := runOnce(ctx, sc, sc.Examples, sc.Generators, true, filepath.Join(work, "main"), progress)
	if err != nil {
		return nil, err
	}
	for _, g := range sc.Scaling {
		fmt.Fprintf(progress, "scaling: %d generator workers x %d tasks, no provider limit\n", g, sc.ScalingConcurrency)
		ssc := sc
		ssc.GeneratorConcurrency, ssc.ExplorerConcurrency = max(1, sc.ScalingConcurrency), max(1, sc.ScalingConcurrency)
		cpu := cpuTime()
		r, err := runOnce(ctx, ssc, sc.ScalingExamples, g, false, filepath.Join(work, fmt.Sprintf("scale-%d", g)), io.Discard)
		if err != nil {
			return nil, err
		}
		p := ScalingPoint{Generators: g, Wall: r.Wall, CallsPerMinute: float64(r.LLMCalls) / r.Wall * 60,
			ExamplesPerMinute: float64(r.Examples) / r.Wall * 60}
		// Everything (quorum's roles, NATS, the simulator) runs in this
		// process but redis-server: its CPU share says whether the
		// machine, rather than the workers, bounded the point.
		if r.Wall > 0 {
			p.CPUUtilization = (cpuTime() - cpu).Seconds() / (r.Wall * float64(runtime.NumCPU()))
		}
		p.Bound = "generator slots"
		if p.CPUUtilization >= 0.85 {
			p.Bound = fmt.Sprintf("CPU (%d cores shared with the simulator)", runtime.NumCPU())
		}
		rep.Scaling = append(rep.Scaling, p)
		if rep.BindsAt == 0 && sc.RPM > 0 && p.CallsPerMinute >= float64(sc.RPM) {
			rep.BindsAt = g
		}
	}
	if n := len(rep.Scaling); rep.BindsAt == 0 && sc.RPM > 0 && n > 0 && rep.Scaling[n-1].CallsPerMinute > 0 {
		last := rep.Scaling[n-1]
		rep.BindsAtEstimate = int(math.Ceil(float64(sc.RPM) / (last.CallsPerMinute / float64(last.Generators))))
	}
	return rep, nil
}

// runOnce runs one scenario size with generators worker loops; limited
// turns the provider's limits (and the limiter's matching quota) on.
func runOnce(ctx context.Context, sc Scenario, examples, generators int, limited bool, dir string, progress io.Writer) (*Report, error) {
	return runTimed(ctx, sc, examples, generators, limited, dir, progress, nil)
}

// runTimed is runOnce, timing its phases on clk when it is not nil.
func runTimed(ctx context.Context, sc Scenario, examples, generators int, limited bool, dir string, progress io.Writer, clk *clock) (*Report, error) {
	r, err := startRig(ctx, sc, examples, generators, limited, dir, clk)
	if err != nil {
		return nil, err
	}
	defer func() {
		r.close()
		clk.lap("close")
	}()
	cfg, err := r.batch(fmt.Sprintf("bench-%d", time.Now().UnixNano()), filepath.Join(dir, "out"), progress)
	if err != nil {
		return nil, err
	}
	before, err := redisSize(ctx, r.cl.Redis)
	if err != nil {
		return nil, err
	}
	clk.lap("manifest")
	var str *stranger
	if limited && sc.StrangerRPM > 0 {
		str = startStranger(ctx, r.simURL, sc.StrangerRPM)
	}
	out, err := coordinator.Run(ctx, cfg)
	sf := str.stop()
	if err != nil {
		return nil, err
	}
	clk.lap("coordinator")
	st := r.sim.Stats()
	if sf != nil {
		// The provider's counts less the stranger's: what the run sent.
		st.Requests -= sf.Requests
		st.RateLimited -= sf.RateLimited
		st.PromptTokens -= sf.PromptTokens
		st.CompletionTokens -= sf.CompletionTokens
	}
	rep := measure(sc, out, st, gather(r.cl.Env.Metrics.Registry), limited)
	rep.Out = cfg.Out
	if limited {
		if err := rep.learned(ctx, r.cl.Limiter, r.model, sf); err != nil {
			return nil, err
		}
	}
	if rep.Redis, err = redisFigures(ctx, r.cl.Redis, before, cfg.Manifest.Run); err != nil {
		return nil, err
	}
	clk.lap("measure")
	return rep, nil
}

// rig is a benchmark's pieces: the synthetic dataset, llmsim serving it
// over HTTP with the provider's limits, and an in-process cluster whose
// limiter has the matching quota.
type rig struct {
	sc         Scenario
	generators int
	// held is the tasks each worker loop holds at once.
	held   int
	dsDir  string
	ds     *dataset.Dataset
	sim    *llmsim.Server
	simURL string
	// model is the model the cluster's calls name.
	model   string
	quota   ratelimit.LLMQuota
	cl      *cluster.Cluster
	closers []func()
}

// startRig brings a rig up in dir for examples examples and generators
// worker loops; limited turns the provider's limits (and the limiter's
// matching quota) on.
func startRig(ctx context.Context, sc Scenario, examples, generators int, limited bool, dir string, clk *clock) (_ *rig, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &rig{sc: sc, generators: generators}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.dsDir, err = MakeDataset(sc.Dataset, examples, filepath.Join(dir, "dataset")); err != nil {
		return nil, err
	}
	if r.ds, err = dataset.Load(r.dsDir, dataset.Options{}); err != nil {
		return nil, err
	}
	clk.lap("dataset")
	noise := llmsim.DefaultNoise()
	if sc.PGold > 0 {
		noise.Gold = sc.PGold
	}
	limits := llmsim.Limits{}
	if limited {
		limits = llmsim.Limits{RequestsPerMinute: sc.RPM, TokensPerMinute: sc.TPM, MaxConcurrency: sc.ProviderConcurrency, Silent: sc.SilentLimits}
		r.quota = ratelimit.LLMQuota{RequestsPerMinute: float64(sc.told()), TokensPerMinute: float64(sc.TPM)}
	}
	model := "gpt-4o"
	var personas llmsim.Personas
	if sc.Persona != "" && sc.Persona != llmsim.PersonaCanonical {
		personas, model = llmsim.Personas{"*": sc.Persona}, sc.Persona
	}
	r.model = model
	mix, err := llmsim.ParseDifficulty(sc.Difficulty)
	if err != nil {
		return nil, err
	}
	r.sim, err = llmsim.New(llmsim.Config{Dataset: r.ds, Seed: sc.Seed, Noise: noise, Limits: limits, Personas: personas, Difficulty: mix,
		PromptCache: llmsim.PromptCache{Enabled: sc.PromptCache, ExcludeFromTPM: sc.CachedOutsideTPM, Markers: sc.PromptCacheMarkers},
		Latency:     llmsim.Latency{FirstToken: time.Duration(sc.FirstTokenMS) * time.Millisecond, TokensPerSecond: sc.TokensPerSecond, Sigma: sc.Jitter}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	sim := &service.HTTP{Server: &http.Server{Handler: r.sim, ReadHeaderTimeout: 10 * time.Second}, Listener: ln}
	if err := sim.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, sim.Stop)
	r.simURL = "http://" + ln.Addr().String() + "/v1"
	clk.lap("simulator")

	// Waiting tasks leave their slots to others (the default), except in
	// the scaling runs, which measure what slots alone serve.
	if r.held = cluster.DefaultHeld(sc.GeneratorConcurrency, r.quota); !limited {
		r.held = sc.GeneratorConcurrency
	}
	r.cl, err = cluster.Start(ctx, cluster.Config{StateDir: filepath.Join(dir, "state"), NATSURL: sc.NATSURL, RedisURL: sc.RedisURL,
		LLM: llm.Config{BaseURL: r.simURL, APIKey: "bench", Default: llm.ModelConfig{Name: model},
			Prices: sc.prices(), CachedOutsideTPM: sc.CachedOutsideTPM, CacheMarkers: sc.CacheMarkers, WarmUp: sc.WarmUp},
		LLMQuota: r.quota, Generators: generators, GeneratorConcurrency: sc.GeneratorConcurrency, MaxHeld: r.held,
		Explorers: sc.Explorers, ExplorerConcurrency: sc.ExplorerConcurrency, Queue: queue.Config{AckWait: 2 * time.Minute},
		Agents: agents.Builtin()})
	if err != nil {
		return nil, err
	}
	r.closers = append(r.closers, r.cl.Close)
	clk.lap("cluster")
	return r, nil
}

// close stops the cluster, then the simulator.
func (r *rig) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

// batch is the coordinator's configuration of a batch run over the rig's
// whole dataset, with the scenario's agent, votes and admission window.
func (r *rig) batch(run, out string, progress io.Writer) (coordinator.Config, error) {
	sc := r.sc
	def, err := agents.Builtin().Lookup(sc.agent())
	if err != nil {
		return coordinator.Config{}, err
	}
	opts, err := def.RunOptions(sc.AgentOptions, sc.Votes)
	if err != nil {
		return coordinator.Config{}, err
	}
	m := &runstate.Manifest{Run: run, Dataset: r.dsDir, Seed: sc.Seed, Votes: sc.Votes, Created: time.Now(), RoundTimeout: time.Hour,
		Agent: def.Name, AgentOptions: opts, Trace: sc.trace(),
		LLM: "SIMULATED LLM (llmsim) — not a real model"}
	for _, e := range r.ds.Examples {
		m.Examples = append(m.Examples, e.ID)
	}
	window := sc.MaxInFlight
	var sizing *coordinator.Sizing
	switch {
	case window < 0:
		window = 0
	case window == 0:
		sizing = &coordinator.Sizing{Held: r.generators * r.held, Load: def.LoadOf(opts), RPM: r.quota.RequestsPerMinute,
			TPM: r.quota.TokensPerMinute, CachedOutsideTPM: sc.CachedOutsideTPM}
		window = coordinator.Window(sizing.Held, sizing.Load, sizing.RPM, sizing.TPM)
	}
	return coordinator.Config{Env: r.cl.Env, Manifest: m, Out: out, Progress: progress, MaxInFlight: window, Sizing: sizing, Health: r.cl.Health.Summary, Limits: r.cl.Limits, LimitChanges: r.cl.LimitChanges}, nil
}

// counters is what the cluster's workers counted.
type counters struct {
	redeliveries int64
	// tasks the workers acknowledged, and their time by part.
	tasks       float64
	partSeconds map[string]float64
	// runtime is the tasks' time outside the agent's execute.
	runtime histogram
}

func gather(reg *prometheus.Registry) counters {
	c := counters{partSeconds: map[string]float64{}}
	mfs, err := reg.Gather()
	if err != nil {
		return c
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "quorum_redeliveries_total":
				c.redeliveries += int64(m.GetCounter().GetValue())
			case "quorum_tasks_total":
				if labels["outcome"] == "ack" {
					c.tasks += m.GetCounter().GetValue()
				}
			case "quorum_task_time_seconds_total":
				c.partSeconds[labels["part"]] += m.GetCounter().GetValue()
			case "quorum_task_runtime_seconds":
				c.runtime.add(m.GetHistogram())
			}
		}
	}
	return c
}

// measure computes the report from run.json and the provider's counts.
func measure(sc Scenario, out *outputs.Report, st llmsim.Stats, cn counters, limited bool) *Report {
	t := out.Totals
	r := &Report{Scenario: sc, Examples: t.Examples, Wall: t.WallSeconds, RateLimited: st.RateLimited, Redeliveries: cn.redeliveries,
		FailedExamples: t.Failed, LLMCalls: st.Requests - st.RateLimited - st.Faults, PromptTokens: st.PromptTokens,
		CompletionTokens: st.CompletionTokens, WarehouseQueries: t.Cost.Queries, HighConf: t.HighConf, LowConf: t.LowConf,
		PerStage: map[string]StageCost{}, Run: out, RefusalsSent: st.Refusals}
	n := float64(max(1, t.Examples))
	for _, e := range out.Examples {
		r.Candidates += e.Candidates
	}
	r.CallsPerExample = float64(r.LLMCalls) / n
	r.QueriesPerEx = float64(r.WarehouseQueries) / n
	r.TokensPerExample = float64(r.PromptTokens+r.CompletionTokens) / n
	r.CachedTokens, r.CachedShare, r.MoneyPerExample = int64(t.Cost.LLM.CachedTokens), t.Cost.CachedShare(), t.Cost.Money()/n
	r.WarmUpWaitPerExample = t.Cost.LLM.WarmUpWait.Seconds() / n
	if r.Candidates > 0 {
		r.CallsPerCand = float64(r.LLMCalls) / float64(r.Candidates)
		r.QueriesPerCand = float64(r.WarehouseQueries) / float64(r.Candidates)
	}
	if t.EX != nil {
		r.EX, r.EXAtK = *t.EX, *t.EXAtK
	}
	// The quota bound: the calls and tokens the provider served, at the
	// rate its limits allow (their burst of one second's worth is free).
	if limited {
		if sc.RPM > 0 {
			b := math.Max(0, float64(r.LLMCalls)-float64(sc.RPM)/60) / float64(sc.RPM) * 60
			if b > r.QuotaBound {
				r.QuotaBound, r.BindingLimit = b, "llm requests/min"
			}
		}
		if sc.TPM > 0 {
			counted := float64(r.PromptTokens + r.CompletionTokens)
			if sc.CachedOutsideTPM {
				counted -= float64(r.CachedTokens) // the provider does not count them
			}
			b := math.Max(0, counted-float64(sc.TPM)/60) / float64(sc.TPM) * 60
			if b > r.QuotaBound {
				r.QuotaBound, r.BindingLimit = b, "llm tokens/min"
				if sc.CachedOutsideTPM {
					r.BindingLimit = "llm uncached tokens/min"
				}
			}
		}
		if r.Wall > 0 {
			r.QuotaRatio = r.QuotaBound / r.Wall
		}
	}
	var lat, service, chain []float64
	var taskSec, llmSec, tokenizeSec float64
	tasks := 0
	for _, e := range out.Examples {
		if e.Status == "failed" {
			continue
		}
		lat = append(lat, e.LatencySeconds)
		chain = append(chain, e.CriticalPathSeconds)
		service = append(service, e.ServiceSeconds)
		taskSec += e.TaskSeconds
		tasks += e.Tasks
		llmSec += (e.Cost.LLM.Latency + e.Cost.LLM.LimiterWait + e.Cost.LLM.WarmUpWait + e.Cost.QueryTime).Seconds()
		tokenizeSec += e.Cost.LLM.Tokenize.Seconds()
	}
	r.LatencyP50, r.LatencyP95 = quantile(lat, 0.5), quantile(lat, 0.95)
	r.ServiceP50, r.ServiceP95 = quantile(service, 0.5), quantile(service, 0.95)
	r.ChainP50, r.ChainP95 = quantile(chain, 0.5), quantile(chain, 0.95)
	if tasks > 0 {
		r.OverheadMS = math.Max(0, taskSec-llmSec) / float64(tasks) * 1000
	}
	if cn.tasks > 0 {
		// The runtime's parts are timed by the workers; inside the agent's
		// execute, what is not LLM calls, quota waits or queries is token
		// counting and the agent's own work (prompts, result tables).
		ms := func(sec float64) float64 { return sec / cn.tasks * 1000 }
		r.OverheadByPart = map[string]float64{}
		for _, part := range []string{"decode", "redis", "blob", "nats"} {
			r.OverheadByPart[part] = ms(cn.partSeconds[part])
			r.RuntimeOverheadMS += ms(cn.partSeconds[part])
		}
		r.OverheadByPart["token_counting"] = ms(tokenizeSec)
		r.OverheadByPart["agent_other"] = ms(math.Max(0, cn.partSeconds["execute"]-llmSec-tokenizeSec))
	}
	r.RuntimeOverheadP50MS, r.RuntimeOverheadP95MS = cn.runtime.quantile(0.5)*1000, cn.runtime.quantile(0.95)*1000
	stages := cost.Ledger{}
	for _, e := range out.Examples {
		stages.Merge(e.CostByStage)
	}
	for name, c := range stages {
		r.PerStage[name] = StageCost{LLMCalls: float64(c.LLMCalls) / n, Tokens: float64(c.Tokens()) / n, Queries: float64(c.Queries) / n}
	}
	tokensPerCall := 0.0
	if r.LLMCalls > 0 {
		tokensPerCall = float64(r.PromptTokens+r.CompletionTokens) / float64(r.LLMCalls) / 1000
	}
	r.Paper = PaperFigures{LLMCallsPerCandidate: 3.52, DBCallsPerCandidate: 3.89, CallsPerCandidateNoExplore: 1.69,
		TokensPerCallThousands: 18.73, ObservedTokensPerCallThousa: tokensPerCall}
	return r
}

func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return outputs.Quantile(s, q)
}
