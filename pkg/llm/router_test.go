package llm_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// routedClient serves model m from deployments at the named simulators
// (in order), with fallback model fb at the endpoint "fb" when set.
// routedClient's dead-endpoint time, dead, also caps each request's wait
// for headers: a test whose healthy routes must answer at the first
// request gives it a minute, as a loaded machine can take seconds.
func routedClient(t *testing.T, lim llm.Limiter, urls map[string]string, deployments []string, fb bool, dead time.Duration) *llm.OpenAI {
	t.Helper()
	c, err := llm.New(routedConfig(lim, urls, deployments, fb, dead))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// routedConfig is routedClient's configuration.
func routedConfig(lim llm.Limiter, urls map[string]string, deployments []string, fb bool, dead time.Duration) llm.Config {
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
	return cfg
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

	// Every route down, on an in-memory endpoint answering 500s in a
	// synctest bubble: the fake clock times the call exactly.
	synctest.Test(t, func(t *testing.T) {
		var hits atomic.Int64
		cfg := routedConfig(nil, map[string]string{"default": fakeURL, "a": fakeURL, "fb": fakeURL}, []string{"a"}, true, 2*time.Second)
		cfg.HTTPClient = &http.Client{Transport: fakeTransport{deadHandler(&hits, false)}}
		down, err := llm.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = down.Chat(context.Background(), format("How many rows?", 1))
		took := time.Since(start)
		t.Logf("every route down: %d requests, failed after %v (fake clock): %v", hits.Load(), took, err)
		if !errors.Is(err, llm.ErrAllRoutesDown) {
			t.Fatalf("every route failing: err %v, want ErrAllRoutesDown", err)
		}
		// The routes cool down after the first failures and their
		// backoffs (at most 50ms each, 3 before the last route cools),
		// then wait out the 2s dead-endpoint time.
		if within := 2*time.Second + 3*50*time.Millisecond; took < 2*time.Second || took > within {
			t.Errorf("every route down: the call failed after %s on the fake clock, want the 2s dead-endpoint time (2s to %v)", took, within)
		}
	})
}
