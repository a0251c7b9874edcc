package llm_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
)

// TestLimitSignalOf reads the provider's stated limits and what a 429 ran
// out of from the headers OpenAI, Anthropic and gateways send, and
// nothing from headers that hold no usable number.
func TestLimitSignalOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		headers     map[string]string
		rateLimited bool
		need        int
		want        llm.LimitSignal
	}{
		{name: "none", want: llm.LimitSignal{}},
		{name: "openai", headers: map[string]string{"x-ratelimit-limit-requests": "1500", "x-ratelimit-limit-tokens": "800000", "x-ratelimit-reset-requests": "40ms", "x-ratelimit-reset-tokens": "1.2s"},
			want: llm.LimitSignal{RequestsLimit: 1500, TokensLimit: 800000, Reset: 1200 * time.Millisecond}},
		{name: "anthropic", headers: map[string]string{"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-tokens-limit": " 40000 "},
			want: llm.LimitSignal{RequestsLimit: 50, TokensLimit: 40000}},
		{name: "a 429 out of tokens", rateLimited: true, need: 900,
			headers: map[string]string{"x-ratelimit-remaining-requests": "12", "x-ratelimit-remaining-tokens": "300"},
			want:    llm.LimitSignal{RateLimited: true, TokensShort: true}},
		{name: "a 429 out of requests and tokens", rateLimited: true, need: 900,
			headers: map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "0"},
			want:    llm.LimitSignal{RateLimited: true}},
		{name: "a 429 with tokens to spare", rateLimited: true, need: 900,
			headers: map[string]string{"x-ratelimit-remaining-tokens": "5000"},
			want:    llm.LimitSignal{RateLimited: true}},
		{name: "unusable numbers", headers: map[string]string{"x-ratelimit-limit-requests": "-3", "x-ratelimit-limit-tokens": "lots", "x-ratelimit-reset-requests": "soon"},
			want: llm.LimitSignal{}},
		{name: "an absurd limit", headers: map[string]string{"x-ratelimit-limit-requests": "1e300"}, want: llm.LimitSignal{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			if got := llm.LimitSignalOf(h, tt.rateLimited, tt.need); got != tt.want {
				t.Errorf("headers %v (429: %v, need %d): %+v, want %+v", tt.headers, tt.rateLimited, tt.need, got, tt.want)
			}
		})
	}
}

// learner is a Limiter that admits every call and records what the client
// tells it of each answer.
type learner struct {
	cooldowns
	mu      sync.Mutex
	signals []llm.LimitSignal
}

func (l *learner) Learn(_ context.Context, _ llm.Bucket, s llm.LimitSignal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.signals = append(l.signals, s)
}

// TestClientTellsTheLearner: a Limiter that learns hears every answered
// attempt, the 429 and the answer after it, with what their headers said.
func TestClientTellsTheLearner(t *testing.T) {
	t.Parallel()
	var ep scripted
	ts := ep.serve(t, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
		ep.mu.Lock()
		n := len(ep.bodies)
		ep.mu.Unlock()
		w.Header().Set("X-Ratelimit-Limit-Requests", "600")
		if n == 1 {
			w.Header().Set("Retry-After-Ms", "20")
			http.Error(w, `{"error":{"message":"rate limited","type":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
			return
		}
		s := startSSE(w)
		s.send(chunk(`{"role":"assistant","content":"SELECT 1"}`, "stop"))
		s.raw("data: [DONE]\n\n")
	})
	lim := &learner{}
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", Limiter: lim})
	if _, err := ask(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	want := []llm.LimitSignal{{RateLimited: true, RequestsLimit: 600}, {RequestsLimit: 600}}
	if len(lim.signals) != len(want) || lim.signals[0] != want[0] || lim.signals[1] != want[1] {
		t.Errorf("the learner heard %+v, want %+v", lim.signals, want)
	}
}
