package llm_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/priority"
)

// TestProviderDelay: the provider's delay is read as OpenAI's SDKs read
// it: Retry-After-Ms before Retry-After (seconds or an HTTP date), and
// for a 429 only, the larger x-ratelimit-reset-* when neither is there.
func TestProviderDelay(t *testing.T) {
	t.Parallel()
	// HTTP dates have whole seconds: a whole-second now keeps them exact.
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		h           http.Header
		rateLimited bool
		want        time.Duration
		ok          bool
	}{
		{name: "retry-after-ms beats Retry-After", rateLimited: true,
			h: http.Header{"Retry-After-Ms": {"20"}, "Retry-After": {"1"}}, want: 20 * time.Millisecond, ok: true},
		{name: "retry-after-ms with a fraction",
			h: http.Header{"Retry-After-Ms": {"12.5"}}, want: 12500 * time.Microsecond, ok: true},
		{name: "retry-after-ms beats the reset headers", rateLimited: true,
			h: http.Header{"Retry-After-Ms": {"30"}, "X-Ratelimit-Reset-Tokens": {"6m0s"}}, want: 30 * time.Millisecond, ok: true},
		{name: "unreadable retry-after-ms: Retry-After",
			h: http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"3"}}, want: 3 * time.Second, ok: true},
		{name: "negative retry-after-ms: Retry-After",
			h: http.Header{"Retry-After-Ms": {"-5"}, "Retry-After": {"1"}}, want: time.Second, ok: true},
		{name: "Retry-After in seconds",
			h: http.Header{"Retry-After": {"2"}}, want: 2 * time.Second, ok: true},
		{name: "Retry-After with a fraction",
			h: http.Header{"Retry-After": {"0.5"}}, want: 500 * time.Millisecond, ok: true},
		{name: "Retry-After as an HTTP date",
			h: http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, want: 90 * time.Second, ok: true},
		{name: "Retry-After as a past HTTP date: retry now",
			h: http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, want: 0, ok: true},
		{name: "Retry-After beats the reset headers", rateLimited: true,
			h: http.Header{"Retry-After": {"2"}, "X-Ratelimit-Reset-Requests": {"6m0s"}}, want: 2 * time.Second, ok: true},
		{name: "a 429's reset headers: the larger", rateLimited: true,
			h: http.Header{"X-Ratelimit-Reset-Requests": {"20ms"}, "X-Ratelimit-Reset-Tokens": {"1.5s"}}, want: 1500 * time.Millisecond, ok: true},
		{name: "a 429's unreadable reset header is skipped", rateLimited: true,
			h: http.Header{"X-Ratelimit-Reset-Requests": {"later"}, "X-Ratelimit-Reset-Tokens": {"40ms"}}, want: 40 * time.Millisecond, ok: true},
		{name: "reset headers are not read for other statuses",
			h: http.Header{"X-Ratelimit-Reset-Requests": {"20ms"}}, want: 0, ok: false},
		{name: "a huge value is bounded",
			h: http.Header{"Retry-After-Ms": {"1e300"}}, want: 24 * time.Hour, ok: true},
		{name: "no delay", rateLimited: true, h: http.Header{"Content-Type": {"application/json"}}, want: 0, ok: false},
		{name: "no headers", rateLimited: true, h: nil, want: 0, ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := llm.ProviderDelay(tt.h, tt.rateLimited, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("providerDelay(%v, rateLimited %v) = %v, %v; want %v, %v", tt.h, tt.rateLimited, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// rateLimitedThen is an endpoint that answers its first n requests (all,
// n < 0) with a 429 carrying headers h, then streams "SELECT 1". It
// counts the requests it got in hits.
func rateLimitedThen(hits *atomic.Int64, n int64, h http.Header) http.HandlerFunc {
	return countRequests(hits, func(i int64, w http.ResponseWriter, _ *http.Request) {
		if n < 0 || i <= n {
			for k, v := range h {
				w.Header()[k] = v
			}
			http.Error(w, `{"error":{"message":"rate limited","type":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
			return
		}
		s := startSSE(w)
		s.send(chunk(`{"role":"assistant","content":"SELECT 1"}`, "stop"))
		s.raw("data: [DONE]\n\n")
	})
}

// TestRateLimitedRetriesSpendNoAttempt: more 429s than MaxAttempts, each
// naming its delay, then an answer: the call succeeds, counts every 429,
// and waits (and pauses the bucket cluster-wide) for the delay read by
// the SDKs' precedence plus a little jitter, never Retry-After's whole
// second when Retry-After-Ms is there. The waits are the ones the client
// decided (recorded, not slept), so the test holds on any machine.
func TestRateLimitedRetriesSpendNoAttempt(t *testing.T) {
	t.Parallel()
	const maxAttempts = 3
	tests := []struct {
		name string
		h    http.Header
		// want is the provider's delay; each wait must be it plus at most
		// MaxJitter(want).
		want time.Duration
	}{
		{name: "retry-after-ms beats Retry-After", h: http.Header{"Retry-After-Ms": {"20"}, "Retry-After": {"1"}}, want: 20 * time.Millisecond},
		{name: "Retry-After alone", h: http.Header{"Retry-After": {"1"}}, want: time.Second},
		{name: "reset headers alone: the larger",
			h: http.Header{"X-Ratelimit-Reset-Requests": {"20ms"}, "X-Ratelimit-Reset-Tokens": {"40ms"}}, want: 40 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const n = 3*maxAttempts + 1
			var hits atomic.Int64
			var ep scripted
			ts := ep.serve(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
				rateLimitedThen(&hits, n, tt.h)(w, r)
			})
			lim := &cooldowns{}
			c := client(t, llm.Config{BaseURL: ts.URL + "/v1", MaxAttempts: maxAttempts, Limiter: lim})
			waits := llm.RecordWaits(c)
			resp, err := ask(context.Background(), c)
			if err != nil {
				t.Fatalf("%d 429s then an answer, with %d attempts allowed: %v", n, maxAttempts, err)
			}
			if resp.Text != "SELECT 1" || resp.Usage.RateLimited != n || resp.Usage.Attempts != n+1 || hits.Load() != n+1 {
				t.Errorf("text %q, rate limited %d, attempts %d, requests %d; want SELECT 1, %d, %d, %d",
					resp.Text, resp.Usage.RateLimited, resp.Usage.Attempts, hits.Load(), n, n+1, n+1)
			}
			got := waits()
			if len(got) != n {
				t.Fatalf("%d waits %v, want one after each of the %d 429s", len(got), got, n)
			}
			hi := tt.want + llm.MaxJitter(tt.want)
			for i, d := range got {
				if d < tt.want || d > hi {
					t.Errorf("wait %d is %v, want %v to %v (the provider's delay plus jitter)", i+1, d, tt.want, hi)
				}
			}
			lim.mu.Lock()
			defer lim.mu.Unlock()
			if fmt.Sprint(lim.d) != fmt.Sprint(got) {
				t.Errorf("the bucket was paused for %v, want the waits %v", lim.d, got)
			}
		})
	}
}

// TestRateLimitedForeverEnds: a provider that answers 429 forever still
// ends the call, with an error that says it was rate limited and names
// the model and endpoint: after RateLimitWaits waits, when the waits
// would pass the call's time limit, or at once when the asked delay
// passes ctx's deadline. A 429 that names no delay spends attempts as
// any failure does. The waits are recorded, not slept.
func TestRateLimitedForeverEnds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		h           http.Header
		cfg         llm.Config
		interactive bool
		deadline    time.Duration
		// requests is how many the endpoint gets; limited whether the
		// error is ErrRateLimited, and says why in why.
		requests int64
		limited  bool
		why      string
	}{
		{name: "retry-after-ms forever: the waits run out",
			h: http.Header{"Retry-After-Ms": {"20"}, "Retry-After": {"1"}}, requests: llm.RateLimitWaits + 1, limited: true,
			why: fmt.Sprintf("answered 429 %d times", llm.RateLimitWaits+1)},
		{name: "minute-long waits: the call's limit ends them",
			// 2 waits of 60s fit the 150s, a third does not.
			h: http.Header{"Retry-After": {"60"}}, cfg: llm.Config{CallTimeout: 150 * time.Second}, requests: 3, limited: true,
			why: "past the call's 2m30s limit"},
		{name: "interactive: the 1-minute limit ends them",
			// 25s and its jitter of at most 250ms: 2 waits fit, a third not.
			h: http.Header{"Retry-After": {"25"}}, interactive: true, requests: 3, limited: true, why: "past the call's 1m0s limit"},
		{name: "a delay past ctx's deadline ends the call at once",
			h: http.Header{"Retry-After": {"45"}}, deadline: 30 * time.Second, requests: 1, limited: true, why: "past the call's deadline"},
		{name: "no delay named: the 429s spend the attempts",
			h: nil, cfg: llm.Config{MaxAttempts: 3, BaseBackoff: time.Millisecond}, requests: 3, why: "status code: 429"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int64
			var ep scripted
			ts := ep.serve(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
				rateLimitedThen(&hits, -1, tt.h)(w, r)
			})
			cfg := tt.cfg
			cfg.Endpoints = []llm.Endpoint{{Name: "gw", BaseURL: ts.URL + "/v1"}}
			cfg.Default = llm.ModelConfig{Name: "gpt-4o", Endpoint: "gw"}
			c := client(t, cfg)
			llm.RecordWaits(c)
			ctx := context.Background()
			if tt.interactive {
				ctx = priority.Interactive(ctx)
			}
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			_, err := ask(ctx, c)
			t.Logf("%d requests: %v", hits.Load(), err)
			var ce *llm.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *llm.CallError", err)
			}
			if errors.Is(err, llm.ErrRateLimited) != tt.limited || !strings.Contains(err.Error(), tt.why) {
				t.Errorf("err = %v; want ErrRateLimited %v, saying %q", err, tt.limited, tt.why)
			}
			if tt.limited && !strings.Contains(err.Error(), "rate limited: model gpt-4o at endpoint gw") {
				t.Errorf("err = %v, want it to say the model gpt-4o at endpoint gw was rate limited", err)
			}
			if hits.Load() != tt.requests || ce.Attempts != int(tt.requests) || ce.Usage.RateLimited != int(tt.requests) || ce.Status != http.StatusTooManyRequests {
				t.Errorf("requests %d, error's attempts %d, rate limited %d, status %d; want %d, %d, %d, 429",
					hits.Load(), ce.Attempts, ce.Usage.RateLimited, ce.Status, tt.requests, tt.requests, tt.requests)
			}
		})
	}
}
