package llm_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

func format(question string, seed int64) llm.Request {
	return llm.Request{Role: llm.RoleFormat, Seed: &seed, Messages: []llm.Message{
		llm.User("Task: " + question + "\nPlease give the " + llmsim.MarkerFormat + "."),
	}}
}

// TestPerRoleEndpointsEachWithinItsQuota: two simulators with different
// provider limits, one client whose generate role goes to the first and
// format role to the second, each endpoint limited by its own bucket in one
// real Redis at its server's limit. Concurrent callers on both roles must
// draw no 429 at either server, each server must see only its role's calls,
// and the ledger must split the calls by endpoint and model. Both endpoints
// serve the same model name, so buckets keyed by model alone would mix
// them. QUORUM_ENDPOINT_RUN sets how long callers start calls (default 6s).
// Its zero-429, served-within-rpm and fast:slow ratio figures depend on the
// machine keeping up with the quotas: make slow runs it (QUORUM_SLOW=1);
// the routing and ledger checks run by default in
// TestPerRoleEndpointsRouteAndLedger.
func TestPerRoleEndpointsEachWithinItsQuota(t *testing.T) {
	t.Parallel()
	if os.Getenv("QUORUM_SLOW") == "" {
		t.Skip("rate experiment: make slow runs it (QUORUM_SLOW=1)")
	}
	run := 6 * time.Second
	if v := os.Getenv("QUORUM_ENDPOINT_RUN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		run = d
	}
	// The limiter admits half a second's burst, the simulators a second's:
	// the other half absorbs scheduling jitter (see ratelimit.LLMQuota).
	const fastRPM, slowRPM = 240, 120
	ds := demo(t)
	lat := llmsim.Latency{FirstToken: 20 * time.Millisecond, TokensPerSecond: 5000, Sigma: 0.3}
	fast, fastTS := sim(t, llmsim.Config{Dataset: ds, Latency: lat, Limits: llmsim.Limits{RequestsPerMinute: fastRPM}})
	slow, slowTS := sim(t, llmsim.Config{Dataset: ds, Latency: lat, Limits: llmsim.Limits{RequestsPerMinute: slowRPM}})
	// The default endpoint serves no role here: it must see nothing.
	def, defTS := sim(t, llmsim.Config{Dataset: ds})

	srv := redistest.Start(t)
	lim, err := ratelimit.New(ratelimit.Config{Client: redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, llm.Config{BaseURL: defTS.URL + "/v1",
		Endpoints: []llm.Endpoint{
			{Name: "fast", BaseURL: fastTS.URL + "/v1", APIKey: "k-fast", Quota: llm.Quota{RequestsPerMinute: fastRPM}},
			{Name: "slow", BaseURL: slowTS.URL + "/v1", APIKey: "k-slow", Quota: llm.Quota{RequestsPerMinute: slowRPM}},
		},
		Models: map[llm.Role]llm.ModelConfig{
			llm.RoleGenerate: {Name: "gpt-4o", Endpoint: "fast"},
			llm.RoleFormat:   {Endpoint: "slow"}, // the default model, on slow
		},
		// No default quota: only the endpoints' own quotas hold them back.
		Limiter:     &ratelimit.LLMBudget{Limiter: lim, Scope: "e2e"},
		BaseBackoff: 100 * time.Millisecond,
	})

	var (
		mu      sync.Mutex
		ledger  cost.Cost
		okCalls = map[string]*atomic.Int64{"fast": {}, "slow": {}}
		waited  = map[string]time.Duration{}
		wg      sync.WaitGroup
		stop    atomic.Bool
	)
	start := time.Now()
	// Twelve callers per endpoint: on a loaded machine a call takes
	// seconds, and four callers would bind the run by latency, not by the
	// quotas this test compares.
	for g := 0; g < 24; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				q := ds.Examples[(g*5+i)%len(ds.Examples)].Question
				req := generate(q, int64(g*1000+i))
				if g%2 == 1 {
					req = format(q, int64(g*1000+i))
				}
				// Calls run to completion, so the servers' counts and the
				// ledger's agree exactly.
				resp, err := c.Chat(context.Background(), req)
				mu.Lock()
				if err != nil {
					var ce *llm.CallError
					if errors.As(err, &ce) {
						ledger.Call(ce.Usage, true)
					}
					t.Errorf("caller %d: %v", g, err)
				} else {
					ledger.Call(resp.Usage, false)
					okCalls[resp.Endpoint].Add(1)
					waited[resp.Endpoint] += resp.Usage.LimiterWait
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(run) //clock:ok a rate experiment's length: make slow only (QUORUM_SLOW, skipped above)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start) //clock:ok the rate experiment's wall time: make slow only (QUORUM_SLOW)

	fs, ss := fast.Stats(), slow.Stats()
	t.Logf("%v: fast (%d/min) served %d calls, %d 429s; slow (%d/min) served %d calls, %d 429s; ledger %v",
		elapsed.Round(time.Millisecond), fastRPM, fs.Requests-fs.RateLimited, fs.RateLimited,
		slowRPM, ss.Requests-ss.RateLimited, ss.RateLimited, byModel(ledger))
	if fs.RateLimited != 0 || ss.RateLimited != 0 {
		t.Errorf("429s: fast %d, slow %d; each endpoint's quota should keep its server under its limit", fs.RateLimited, ss.RateLimited)
	}
	if def.Stats().Requests != 0 {
		t.Errorf("the default endpoint got %d requests", def.Stats().Requests)
	}
	// Each server saw only its role's calls.
	if fs.ByKind[llmsim.KindFormat] != 0 || fs.ByKind[llmsim.KindGenerate] == 0 || ss.ByKind[llmsim.KindGenerate] != 0 || ss.ByKind[llmsim.KindFormat] == 0 {
		t.Errorf("calls by kind: fast %v, slow %v", fs.ByKind, ss.ByKind)
	}
	for _, e := range []struct {
		name   string
		st     llmsim.Stats
		rpm    float64
		burst  float64 // the simulator's: a second's worth
		ledger string
	}{
		{"fast", fs, fastRPM, fastRPM / 60, "fast/gpt-4o"},
		{"slow", ss, slowRPM, slowRPM / 60, "slow/gpt-4o"},
	} {
		served := e.st.Requests - e.st.RateLimited
		if limit := e.rpm*elapsed.Minutes() + e.burst; float64(served) > limit {
			t.Errorf("%s served %d calls in %v, over its limit of %.0f", e.name, served, elapsed, limit)
		}
		m := ledger.ByModel[e.ledger]
		if m == nil || int64(m.Calls) != served || int64(m.Calls) != okCalls[e.name].Load() || m.Errors != 0 || m.PromptTokens == 0 {
			t.Errorf("ledger %s: %+v; server served %d, client answers %d", e.ledger, m, served, okCalls[e.name].Load())
		}
	}
	if len(ledger.ByModel) != 2 || ledger.LLMCalls != int(okCalls["fast"].Load()+okCalls["slow"].Load()) {
		t.Errorf("ledger %v, %d calls", byModel(ledger), ledger.LLMCalls)
	}
	// Separate buckets: the fast endpoint got about twice the slow one's
	// calls (equal callers on both), which a shared bucket would not give.
	// On a loaded machine a call can take seconds and the fast endpoint's
	// callers stay under its quota (27 calls to the slow one's 20, with
	// two make tests at once); they still wait for quota about half as
	// long per call as the slow one's (0.53 quiet), and a shared bucket
	// makes both wait alike whatever the load, hence the 3/4 bound.
	// Under the race detector calls are too slow for the quotas to bind
	// (the throughput tests run in the plain pass).
	fastN, slowN := float64(fs.Requests-fs.RateLimited), float64(ss.Requests-ss.RateLimited)
	perCall := func(name string) time.Duration {
		if n := okCalls[name].Load(); n > 0 {
			return waited[name] / time.Duration(n)
		}
		return 0
	}
	fastWait, slowWait := perCall("fast"), perCall("slow")
	t.Logf("quota waits per call: fast %v, slow %v", fastWait.Round(time.Millisecond), slowWait.Round(time.Millisecond))
	if !raceEnabled && fastN < 1.4*slowN && fastWait >= slowWait*3/4 {
		t.Errorf("fast served %.0f calls, slow %.0f (want about %d:%d), and its calls waited %v each for quota, the slow one's %v: one bucket holds both",
			fastN, slowN, fastRPM, slowRPM, fastWait, slowWait)
	}
	if !raceEnabled && slowN < 0.5*slowRPM*run.Minutes() {
		t.Errorf("slow served %.0f calls in %v, under half its quota", slowN, run)
	}
}

// TestPerRoleEndpointsRouteAndLedger is the deterministic part of
// TestPerRoleEndpointsEachWithinItsQuota, run by default: with the
// generate role on one endpoint and the format role on another (both
// serving the same model name, each with a quota of its own), each
// server sees only its role's calls, the default endpoint none, and the
// ledger splits the calls by endpoint and model, matching the servers'
// counts. The calls are sequential and far under the quotas.
func TestPerRoleEndpointsRouteAndLedger(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	fast, fastTS := sim(t, llmsim.Config{Dataset: ds})
	slow, slowTS := sim(t, llmsim.Config{Dataset: ds})
	def, defTS := sim(t, llmsim.Config{Dataset: ds})
	srv := redistest.Start(t)
	lim, err := ratelimit.New(ratelimit.Config{Client: redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true})})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, llm.Config{BaseURL: defTS.URL + "/v1",
		Endpoints: []llm.Endpoint{
			{Name: "fast", BaseURL: fastTS.URL + "/v1", APIKey: "k-fast", Quota: llm.Quota{RequestsPerMinute: 6000}},
			{Name: "slow", BaseURL: slowTS.URL + "/v1", APIKey: "k-slow", Quota: llm.Quota{RequestsPerMinute: 3000}},
		},
		Models: map[llm.Role]llm.ModelConfig{
			llm.RoleGenerate: {Name: "gpt-4o", Endpoint: "fast"},
			llm.RoleFormat:   {Endpoint: "slow"},
		},
		Limiter:     &ratelimit.LLMBudget{Limiter: lim, Scope: "e2e"},
		BaseBackoff: 100 * time.Millisecond,
	})
	var ledger cost.Cost
	okCalls := map[string]int64{}
	const perRole = 4
	for i := range 2 * perRole {
		q := ds.Examples[i%len(ds.Examples)].Question
		req := generate(q, int64(i))
		if i%2 == 1 {
			req = format(q, int64(i))
		}
		resp, err := c.Chat(context.Background(), req)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		ledger.Call(resp.Usage, false)
		okCalls[resp.Endpoint]++
	}
	fs, ss := fast.Stats(), slow.Stats()
	if def.Stats().Requests != 0 {
		t.Errorf("the default endpoint got %d requests", def.Stats().Requests)
	}
	if fs.ByKind[llmsim.KindFormat] != 0 || fs.ByKind[llmsim.KindGenerate] != perRole || ss.ByKind[llmsim.KindGenerate] != 0 || ss.ByKind[llmsim.KindFormat] != perRole {
		t.Errorf("calls by kind: fast %v, slow %v; want %d generate calls at fast, %d format calls at slow", fs.ByKind, ss.ByKind, perRole, perRole)
	}
	for _, e := range []struct {
		name, ledger string
		st           llmsim.Stats
	}{{"fast", "fast/gpt-4o", fs}, {"slow", "slow/gpt-4o", ss}} {
		served := e.st.Requests - e.st.RateLimited
		m := ledger.ByModel[e.ledger]
		if e.st.RateLimited != 0 || m == nil || int64(m.Calls) != served || int64(m.Calls) != okCalls[e.name] || m.Errors != 0 || m.PromptTokens == 0 {
			t.Errorf("ledger %s: %+v; server served %d (%d 429s), client answers %d", e.ledger, m, served, e.st.RateLimited, okCalls[e.name])
		}
	}
	if len(ledger.ByModel) != 2 || ledger.LLMCalls != 2*perRole {
		t.Errorf("ledger %v, %d calls", byModel(ledger), ledger.LLMCalls)
	}
}

func byModel(c cost.Cost) map[string]int {
	out := map[string]int{}
	for k, m := range c.ByModel {
		out[k] = m.Calls
	}
	return out
}

func TestEndpointConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  llm.Config
		want string
	}{
		{"unknown endpoint", llm.Config{Models: map[llm.Role]llm.ModelConfig{llm.RoleExplore: {Name: "o3", Endpoint: "nowhere"}}}, `role explore uses endpoint "nowhere"`},
		{"unknown default endpoint", llm.Config{Default: llm.ModelConfig{Name: "m", Endpoint: "x"}}, `default model uses endpoint "x"`},
		{"bad name", llm.Config{Endpoints: []llm.Endpoint{{Name: "a:b", BaseURL: "http://h"}}}, `endpoint name "a:b"`},
		{"reserved name", llm.Config{Endpoints: []llm.Endpoint{{Name: llm.DefaultEndpoint, BaseURL: "http://h"}}}, `endpoint name "default"`},
		{"no base URL", llm.Config{Endpoints: []llm.Endpoint{{Name: "local"}}}, "endpoint local has no base URL"},
		{"twice", llm.Config{Endpoints: []llm.Endpoint{{Name: "a", BaseURL: "http://h"}, {Name: "a", BaseURL: "http://i"}}}, "endpoint a is configured twice"},
	}
	quotas := []struct {
		cfg  llm.Config
		want bool
	}{
		{llm.Config{}, false},
		{llm.Config{Endpoints: []llm.Endpoint{{Name: "a"}}}, false},
		{llm.Config{Quota: llm.Quota{TokensPerMinute: 1}}, true},
		{llm.Config{Endpoints: []llm.Endpoint{{Name: "a"}, {Name: "b", Quota: llm.Quota{RequestsPerMinute: 1}}}}, true},
	}
	for i, q := range quotas {
		if q.cfg.HasQuota() != q.want {
			t.Errorf("HasQuota %d: want %v", i, q.want)
		}
	}
	for _, tt := range tests {
		if tt.cfg.Default.Name == "" && tt.cfg.Models == nil {
			tt.cfg.Default.Name = "gpt-4o"
		}
		if _, err := llm.New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

// TestEndpointRequestShapes: each endpoint uses its own key, organization,
// headers and API flavour, and failures name the endpoint.
func TestEndpointRequestShapes(t *testing.T) {
	t.Parallel()
	rec, ts := recordedSim(t)
	c := client(t, llm.Config{BaseURL: ts + "/v1", APIKey: "k-default", Headers: map[string]string{"X-Tenant": "acme"},
		Endpoints: []llm.Endpoint{
			{Name: "az", BaseURL: ts, APIKey: "k-azure", AzureAPIVersion: "2024-05-01-preview"},
			{Name: "gw", BaseURL: ts + "/v1", APIKey: "k-gw", Organization: "org-gw", Headers: map[string]string{"X-Route": "b"}},
		},
		Models: map[llm.Role]llm.ModelConfig{
			llm.RoleExplore: {Name: "my-deployment", Endpoint: "az"},
			llm.RoleLink:    {Name: "small", Endpoint: "gw"},
		}})
	ctx := context.Background()
	q := demo(t).Examples[0].Question
	tests := []struct {
		role     llm.Role
		endpoint string
		check    func() bool
	}{
		{llm.RoleGenerate, llm.DefaultEndpoint, func() bool {
			return rec.header.Get("Authorization") == "Bearer k-default" && rec.header.Get("X-Tenant") == "acme" && rec.body["model"] == "gpt-4o"
		}},
		{llm.RoleExplore, "az", func() bool {
			return strings.HasPrefix(rec.path, "/openai/deployments/my-deployment/chat/completions?api-version=2024-05-01-preview") &&
				rec.header.Get("Api-Key") == "k-azure" && rec.header.Get("X-Tenant") == ""
		}},
		{llm.RoleLink, "gw", func() bool {
			return rec.header.Get("Authorization") == "Bearer k-gw" && rec.header.Get("OpenAI-Organization") == "org-gw" &&
				rec.header.Get("X-Route") == "b" && rec.header.Get("X-Tenant") == "" && rec.body["model"] == "small"
		}},
	}
	for _, tt := range tests {
		req := generate(q, 1)
		req.Role = tt.role
		resp, err := c.Chat(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", tt.role, err)
		}
		rec.mu.Lock()
		ok := tt.check()
		rec.mu.Unlock()
		if !ok || resp.Endpoint != tt.endpoint || resp.Usage.Endpoint != tt.endpoint {
			t.Errorf("%s: endpoint %q; request %s %v %v", tt.role, resp.Endpoint, rec.path, rec.header, rec.body)
		}
	}
	// A failure names its endpoint, and its usage says where it went.
	req := llm.Request{Role: llm.RoleLink}
	_, err := c.Chat(ctx, req)
	var ce *llm.CallError
	if !errors.As(err, &ce) || ce.Endpoint != "gw" || ce.Usage.Endpoint != "gw" || ce.Usage.Model != "small" || !strings.Contains(err.Error(), "small at endpoint gw") {
		t.Errorf("err %v (%+v)", err, ce)
	}
}
