package llm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
)

// routedClient serves model m from deployments at the named simulators
// (in order), with fallback model fb at the endpoint "fb" when set.
// routedClient's dead-endpoint time, dead, also caps each request's wait
// for headers: a test whose healthy routes must answer at the first
// request gives it a minute, as a loaded machine can take seconds.
func routedClient(t *testing.T, lim llm.Limiter, urls map[string]string, deployments []string, fb bool, dead time.Duration) *llm.OpenAI {
	t.Helper()
	cfg := llm.Config{BaseURL: urls["default"], Default: llm.ModelConfig{Name: "m"}, Limiter: lim,
		BaseBackoff: 10 * time.Millisecond, MaxErrorBackoff: 50 * time.Millisecond, DeadEndpointTimeout: dead,
		DeploymentFailures: 2, DeploymentCooldown: time.Minute}
	for name, u := range urls {
		if name != "default" {
			cfg.Endpoints = append(cfg.Endpoints, llm.Endpoint{Name: name, BaseURL: u})
		}
	}
	for _, d := range deployments {
		cfg.Default.Deployments = append(cfg.Default.Deployments, llm.Deployment{Endpoint: d})
	}
	if fb {
		cfg.Default.Fallbacks = []llm.ModelConfig{{Name: "m-fallback", Endpoint: "fb"}}
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRouterMovesCallsOffAFailingDeployment: a deployment answering only
// 500s is cooled down after two failures, in this process (no Router)
// and cluster-wide (LLMBudget in Redis), and every call is answered by
// the other without a fallback.
func TestRouterMovesCallsOffAFailingDeployment(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rl, err := ratelimit.New(ratelimit.Config{Client: redis.NewClient(&redis.Options{Addr: srv.Addr})})
	if err != nil {
		t.Fatal(err)
	}
	for name, lim := range map[string]llm.Limiter{"in process": nil, "redis": &ratelimit.LLMBudget{Limiter: rl, Scope: "t"}} {
		bad, badTS := sim(t, llmsim.Config{Faults: llmsim.Faults{ServerError: 1}})
		good, goodTS := sim(t, llmsim.Config{})
		c := routedClient(t, lim, map[string]string{"default": goodTS.URL + "/v1", "bad": badTS.URL + "/v1", "good": goodTS.URL + "/v1"},
			[]string{"bad", "good"}, false, time.Minute)
		for i := range 10 {
			resp, err := c.Chat(context.Background(), format("How many rows?", int64(i)))
			if err != nil {
				t.Fatalf("%s: call %d: %v", name, i, err)
			}
			if resp.Endpoint != "good" || resp.Usage.Fallbacks != 0 {
				t.Errorf("%s: call %d answered at %s with %d fallbacks; want good, 0", name, i, resp.Endpoint, resp.Usage.Fallbacks)
			}
		}
		if n := bad.Stats().Requests; n != 2 {
			t.Errorf("%s: the failing deployment got %d requests; want 2 (cooled down after 2 failures)", name, n)
		}
		if n := good.Stats().Requests; n != 10 {
			t.Errorf("%s: the healthy deployment got %d requests; want 10", name, n)
		}
	}
}

// TestRouterFallsBackAndGivesUpWhenEveryRouteIsDown: with every
// deployment of the model failing, the fallback model answers and the
// usage says so; with the fallback failing too, the call fails with
// ErrAllRoutesDown within the dead-endpoint time.
func TestRouterFallsBackAndGivesUpWhenEveryRouteIsDown(t *testing.T) {
	t.Parallel()
	_, badTS := sim(t, llmsim.Config{Faults: llmsim.Faults{ServerError: 1}})
	fb, fbTS := sim(t, llmsim.Config{})
	bad := badTS.URL + "/v1"
	c := routedClient(t, nil, map[string]string{"default": bad, "a": bad, "b": bad, "fb": fbTS.URL + "/v1"}, []string{"a", "b"}, true, time.Minute)
	for i := range 3 {
		resp, err := c.Chat(context.Background(), format("How many rows?", int64(i)))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if resp.Endpoint != "fb" || resp.Usage.Model != "m-fallback" || resp.Usage.Fallbacks != 1 {
			t.Errorf("call %d: answered at %s by %s with %d fallbacks; want fb, m-fallback, 1", i, resp.Endpoint, resp.Usage.Model, resp.Usage.Fallbacks)
		}
	}
	if n := fb.Stats().Requests; n != 3 {
		t.Errorf("the fallback got %d requests, want 3", n)
	}

	down := routedClient(t, nil, map[string]string{"default": bad, "a": bad, "fb": bad}, []string{"a"}, true, 2*time.Second)
	start := time.Now()
	_, err := down.Chat(context.Background(), format("How many rows?", 1))
	if !errors.Is(err, llm.ErrAllRoutesDown) {
		t.Fatalf("every route failing: err %v, want ErrAllRoutesDown", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("every route down: the call failed after %s, want about the 2s dead-endpoint time", took)
	}
}
