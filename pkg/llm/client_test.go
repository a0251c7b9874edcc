package llm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

func demo(t testing.TB) *dataset.Dataset {
	t.Helper()
	ds, err := dataset.Load("../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func sim(t testing.TB, cfg llmsim.Config) (*llmsim.Server, *httptest.Server) {
	t.Helper()
	if cfg.Dataset == nil {
		cfg.Dataset = demo(t)
	}
	s, err := llmsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

func client(t testing.TB, cfg llm.Config) *llm.OpenAI {
	t.Helper()
	if cfg.Default.Name == "" {
		cfg.Default = llm.ModelConfig{Name: "gpt-4o"}
	}
	if cfg.APIKey == "" {
		cfg.APIKey = "sk-test"
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func generate(question string, seed int64) llm.Request {
	return llm.Request{Role: llm.RoleGenerate, Seed: &seed, Messages: []llm.Message{
		llm.User("Task: " + question + "\nPlease think step by step and " + llmsim.MarkerGenerate + " in sqlite dialect."),
	}}
}

func TestChatAgainstSimulator(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := sim(t, llmsim.Config{Dataset: ds})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1"})
	resp, err := c.Chat(context.Background(), generate(ds.Examples[3].Question, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(llm.Blocks(resp.Text, "sql")) != 1 || resp.FinishReason != "stop" || !strings.Contains(resp.Model, "simulated") {
		t.Errorf("response %+v", resp)
	}
	u := resp.Usage
	if u.PromptTokens == 0 || u.CompletionTokens == 0 || u.Attempts != 1 || u.Latency <= 0 {
		t.Errorf("usage %+v", u)
	}
}

// TestRateLimitStormLosesNothing: 24 concurrent calls against a simulator
// allowing 360 requests/min, with no shared limiter: many 429s, and every
// call still ends in an answer.
func TestRateLimitStormLosesNothing(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds, Limits: llmsim.Limits{RequestsPerMinute: 360}})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", MaxAttempts: 40, BaseBackoff: 50 * time.Millisecond, MaxBackoff: 2 * time.Second})
	var wg sync.WaitGroup
	var ok, limited atomic.Int64
	errs := make(chan error, 24)
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Chat(context.Background(), generate(ds.Examples[i%len(ds.Examples)].Question, int64(i)))
			if err != nil {
				errs <- err
				return
			}
			ok.Add(1)
			limited.Add(int64(resp.Usage.RateLimited))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := s.Stats()
	if ok.Load() != 24 || st.RateLimited == 0 || limited.Load() != st.RateLimited {
		t.Errorf("answers %d of 24; simulator sent %d 429s, client counted %d", ok.Load(), st.RateLimited, limited.Load())
	}
}

// TestFaultsEndInAnswerOrRecordedError: 5xx, hangs and malformed bodies are
// retried; every call ends in an answer or a *CallError, none vanishes.
func TestFaultsEndInAnswerOrRecordedError(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds, Faults: llmsim.Faults{ServerError: 0.25, Hang: 0.05, Malformed: 0.15, HangFor: time.Minute}})
	// A hung attempt (no headers) is abandoned after HeaderTimeout and
	// retried. The limits are far above what a healthy attempt takes on a
	// loaded machine under -race, so only injected faults fail attempts
	// and the share answered does not depend on the machine's speed.
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", MaxAttempts: 3, BaseBackoff: 10 * time.Millisecond,
		HeaderTimeout: 15 * time.Second, AttemptTimeout: 30 * time.Second, DeadEndpointTimeout: time.Minute})
	const n = 60
	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Chat(context.Background(), generate(ds.Examples[i%len(ds.Examples)].Question, int64(i)))
			var ce *llm.CallError
			switch {
			case err == nil:
				answered.Add(1)
			case errors.As(err, &ce) && ce.Attempts == 3:
				failed.Add(1)
			default:
				t.Errorf("call %d: unexpected error %v", i, err)
			}
		}()
	}
	wg.Wait()
	if answered.Load()+failed.Load() != n || s.Stats().Faults == 0 || answered.Load() < n/2 {
		t.Errorf("answered %d, failed %d of %d; simulator faults %d", answered.Load(), failed.Load(), n, s.Stats().Faults)
	}
	t.Logf("%d answered, %d failed after 3 attempts, %d faults injected", answered.Load(), failed.Load(), s.Stats().Faults)
}

func TestNonRetryableAndTooLong(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", Default: llm.ModelConfig{Name: "gpt-4o", ContextWindow: 50}})
	_, err := c.Chat(context.Background(), llm.Request{Messages: []llm.Message{llm.User(strings.Repeat("long prompt ", 100))}})
	if !errors.Is(err, llm.ErrContextTooLong) || s.Stats().Requests != 0 {
		t.Errorf("err = %v, requests sent %d; want ErrContextTooLong without sending", err, s.Stats().Requests)
	}
	// The simulator answers 400 to an empty message list: not retried.
	c2 := client(t, llm.Config{BaseURL: ts.URL + "/v1"})
	_, err = c2.Chat(context.Background(), llm.Request{})
	var ce *llm.CallError
	if !errors.As(err, &ce) || ce.Status != 400 || ce.Attempts != 1 {
		t.Errorf("err = %#v, want a 400 after one attempt", err)
	}
}

// recorder is a proxy that keeps the last request it forwarded.
// recordedSim is llmsim behind a recorder of the last request, served on
// a test server (closed at cleanup); it returns the recorder and the URL.
func recordedSim(t *testing.T) (*recorder, string) {
	t.Helper()
	s, err := llmsim.New(llmsim.Config{Dataset: demo(t)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: s}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	return rec, ts.URL
}

type recorder struct {
	mu     sync.Mutex
	path   string
	header http.Header
	body   map[string]any
	next   http.Handler
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.path, r.header = req.URL.RequestURI(), req.Header.Clone()
	r.body = nil
	_ = json.Unmarshal(b, &r.body)
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(b))
	r.next.ServeHTTP(w, req)
}

func TestRequestShapes(t *testing.T) {
	t.Parallel()
	rec, url := recordedSim(t)
	zero, one := 0.0, 1.0
	c := client(t, llm.Config{BaseURL: url + "/v1", Organization: "org-1", Headers: map[string]string{"X-Tenant": "acme"},
		Models: map[llm.Role]llm.ModelConfig{
			llm.RoleGenerate: {Name: "gpt-4o", Temperature: &one},
			llm.RoleVerify:   {Name: "o3", ReasoningEffort: "high", MaxCompletionTokens: 4000, Temperature: &one},
			llm.RoleLink:     {Name: "gpt-4o-mini", Temperature: &zero},
		}})
	ctx := context.Background()
	q := demo(t).Examples[0].Question
	req := generate(q, 42)
	if _, err := c.Chat(ctx, req); err != nil {
		t.Fatal(err)
	}
	if rec.body["model"] != "gpt-4o" || rec.body["temperature"] != 1.0 || rec.body["seed"] != 42.0 ||
		rec.header.Get("X-Tenant") != "acme" || rec.header.Get("OpenAI-Organization") != "org-1" || rec.header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("generate request: %v %v", rec.body, rec.header)
	}
	req.Role = llm.RoleVerify
	if _, err := c.Chat(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, has := rec.body["temperature"]; has || rec.body["model"] != "o3" || rec.body["reasoning_effort"] != "high" || rec.body["max_completion_tokens"] != 4000.0 {
		t.Errorf("reasoning request: %v", rec.body)
	}
	req.Role = llm.RoleLink
	if _, err := c.Chat(ctx, req); err != nil {
		t.Fatal(err)
	}
	if temp, ok := rec.body["temperature"].(float64); !ok || temp > 1e-30 || rec.body["model"] != "gpt-4o-mini" {
		t.Errorf("greedy request must send a (near) zero temperature: %v", rec.body)
	}
	az := client(t, llm.Config{BaseURL: url, APIKey: "az-key", AzureAPIVersion: "2024-05-01-preview", Default: llm.ModelConfig{Name: "my-deployment"}})
	if _, err := az.Chat(ctx, generate(q, 1)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.path, "/openai/deployments/my-deployment/chat/completions?api-version=2024-05-01-preview") || rec.header.Get("Api-Key") != "az-key" {
		t.Errorf("azure request: %s %v", rec.path, rec.header)
	}
}

// matched is what a matchedRun counted.
type matched struct {
	done, failed int64
	stats        llmsim.Stats
	elapsed      time.Duration
}

// matchedRun runs callers concurrent callers against a simulator enforcing
// quota, through the Redis limiter set to the same quota, for
// QUORUM_LIMIT_RUN (default 10s); pad goes before every prompt.
func matchedRun(t *testing.T, quota ratelimit.LLMQuota, latency llmsim.Latency, callers int, pad string) matched {
	t.Helper()
	// The zero-429 figures depend on the machine keeping up with the
	// quota; the limiter's quota and admission rules are checked in
	// internal/ratelimit (quota_test.go, local_test.go).
	if os.Getenv("QUORUM_SLOW") == "" {
		t.Skip("rate experiment: make slow runs it (QUORUM_SLOW=1)")
	}
	if raceEnabled {
		t.Skip("throughput at the quota is measured without the race detector (make slow runs it in the plain pass)")
	}
	dur := 10 * time.Second
	if v := os.Getenv("QUORUM_LIMIT_RUN"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		dur = d
	}
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds, Latency: latency,
		Limits: llmsim.Limits{RequestsPerMinute: int(quota.RequestsPerMinute), TokensPerMinute: int(quota.TokensPerMinute)}})
	srv := redistest.Start(t)
	lim, err := ratelimit.New(ratelimit.Config{Client: redis.NewClient(&redis.Options{Addr: srv.Addr, ContextTimeoutEnabled: true, PoolSize: 128})})
	if err != nil {
		t.Fatal(err)
	}
	budget := &ratelimit.LLMBudget{Limiter: lim, Scope: "sim", Default: quota}
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", Limiter: budget, BaseBackoff: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				req := generate(ds.Examples[(g*7+i)%len(ds.Examples)].Question, int64(g*1000+i))
				req.Messages[0].Content = pad + req.Messages[0].Content
				_, err := c.Chat(ctx, req)
				switch {
				case err == nil:
					done.Add(1)
				case ctx.Err() == nil:
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	//clock:ok a rate experiment's wall time: make slow only (QUORUM_SLOW, skipped above)
	return matched{done: done.Load(), failed: failed.Load(), stats: s.Stats(), elapsed: time.Since(start)}
}

// matchedRuns runs matchedRun until ok accepts a run, at most twice: a
// machine loaded many times over its cores can send calls the limiter
// admitted in time so late that they bunch past the provider's one second
// of burst (docs/performance.md), which says nothing of the limiter; a
// limiter that over-admits fails both runs. Each run is logged.
func matchedRuns(t *testing.T, run func() matched, describe func(matched) string, ok func(matched) bool) matched {
	t.Helper()
	var r matched
	for i := range 2 {
		r = run()
		t.Logf("run %d: %s", i+1, describe(r))
		if ok(r) {
			break
		}
	}
	return r
}

// TestLimiterMatchedToProviderDrawsNo429s runs 32 concurrent callers
// against a simulator enforcing 600 requests/min, through the Redis limiter
// set to the same quota.
func TestLimiterMatchedToProviderDrawsNo429s(t *testing.T) {
	t.Parallel()
	const rpm = 600
	r := matchedRuns(t, func() matched {
		return matchedRun(t, ratelimit.LLMQuota{RequestsPerMinute: rpm, TokensPerMinute: 2_000_000},
			// 64 callers: the quota (10 calls/s), not the calls' latency,
			// binds even when a loaded machine makes each call take seconds.
			llmsim.Latency{FirstToken: 50 * time.Millisecond, TokensPerSecond: 2000, Sigma: 0.3}, 64, "")
	}, func(r matched) string {
		return fmt.Sprintf("%v: %d calls answered, %d failed, %d 429s from the simulator, %.1f%% of the %d requests/min limit used",
			r.elapsed.Round(time.Millisecond), r.done, r.failed, r.stats.RateLimited, 100*float64(r.done)/(rpm*r.elapsed.Minutes()), rpm)
	}, func(r matched) bool { return r.stats.RateLimited == 0 && r.failed == 0 })
	if r.stats.RateLimited != 0 || r.failed != 0 {
		t.Errorf("%d 429s and %d failures with the limiter set to the provider's quota", r.stats.RateLimited, r.failed)
	}
	// The share used is logged, not asserted: on a machine loaded many
	// times over its cores the simulator itself answers late (20 % was
	// seen beside two make test runs), which says nothing of the limiter;
	// make bench measures the quota ratio (docs/performance.md).
}

func TestHungAttemptsAreAbandoned(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds, Faults: llmsim.Faults{Hang: 1, HangFor: time.Minute}})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", MaxAttempts: 2, BaseBackoff: 10 * time.Millisecond, AttemptTimeout: 200 * time.Millisecond})
	_, err := c.Chat(context.Background(), generate(ds.Examples[0].Question, 1))
	var ce *llm.CallError
	if !errors.As(err, &ce) || ce.Attempts != 2 || ce.Status != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a CallError after 2 timed-out attempts", err)
	}
	// The simulator counts a hang as its handler starts, which on a loaded
	// machine may come after the client gave the attempt up.
	if !wait.Until(time.Minute, func() bool { return s.Stats().Faults >= 2 }) || s.Stats().Faults != 2 {
		t.Errorf("faults %d, want 2", s.Stats().Faults)
	}
}

// TestTokenLimiterMatchedToProviderDrawsNo429s: with prompts of about
// 1,500 tokens and the limiter set to the provider's tokens/min, the
// cluster draws (almost) no 429s and fails no call (the share of the quota
// it used is logged):
// reservations are the prompt plus the expected completion, reconciled
// after each call. Before the limiter admitted calls only when they fit and
// reserved completions at their mean, the same run used 69% and the
// Spider-size bench drew 429s. The bounds leave room for a loaded CI
// machine, where arrivals bunch; make bench measures the exact figures.
func TestTokenLimiterMatchedToProviderDrawsNo429s(t *testing.T) {
	t.Parallel()
	const tpm = 600_000
	// About 1,500 tokens of table information per prompt.
	pad := strings.Repeat("CREATE TABLE events_2024 (id INTEGER, user_id INTEGER, name TEXT, params TEXT);\n", 70)
	within := func(r matched) bool { return r.failed == 0 && float64(r.stats.RateLimited) <= 0.03*float64(r.done) }
	r := matchedRuns(t, func() matched {
		return matchedRun(t, ratelimit.LLMQuota{TokensPerMinute: tpm},
			llmsim.Latency{FirstToken: 100 * time.Millisecond, TokensPerSecond: 500, Sigma: 0.3}, 16, pad)
	}, func(r matched) string {
		served := r.stats.PromptTokens + r.stats.CompletionTokens
		return fmt.Sprintf("%v: %d calls answered, %d failed, %d 429s from the simulator, %d tokens served, %.1f%% of the %d tokens/min limit used",
			r.elapsed.Round(time.Millisecond), r.done, r.failed, r.stats.RateLimited, served, 100*float64(served)/(tpm*r.elapsed.Minutes()), tpm)
	}, within)
	if !within(r) {
		t.Errorf("%d 429s for %d calls and %d failures with the limiter set to the provider's token quota", r.stats.RateLimited, r.done, r.failed)
	}
	// The share used is logged, not asserted (see
	// TestLimiterMatchedToProviderDrawsNo429s).
}

// TestContinueFinalMessage: a prefix continuation carries vLLM's
// continue_final_message and add_generation_prompt, and DeepSeek's
// "prefix" on the final assistant message; other requests carry none.
func TestContinueFinalMessage(t *testing.T) {
	t.Parallel()
	rec, url := recordedSim(t)
	c := client(t, llm.Config{BaseURL: url + "/v1", Default: llm.ModelConfig{Name: "gpt-4o"}})
	ctx := context.Background()
	msgs := []llm.Message{llm.User("Question: " + demo(t).Examples[0].Question), llm.Assistant("Before thinking about the solution, ")}
	if _, err := c.Chat(ctx, llm.Request{Role: llm.RoleGenerate, Messages: msgs, ContinueFinal: true, Stop: []string{"[EXECUTE]"}}); err != nil {
		t.Fatal(err)
	}
	last, _ := rec.body["messages"].([]any)
	if rec.body["continue_final_message"] != true || rec.body["add_generation_prompt"] != false || len(last) != 2 ||
		last[1].(map[string]any)["prefix"] != true || last[1].(map[string]any)["content"] != "Before thinking about the solution, " {
		t.Errorf("continuation request: %v", rec.body)
	}
	if _, err := c.Chat(ctx, llm.Request{Role: llm.RoleGenerate, Messages: msgs[:1]}); err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.body["continue_final_message"]; ok {
		t.Errorf("a plain request carries continue_final_message: %v", rec.body)
	}
}
