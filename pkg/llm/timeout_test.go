package llm_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/priority"
)

// deadEndpoint is an endpoint that never answers (hang) or answers every
// request with a 500; it counts the requests it got.
func deadEndpoint(t *testing.T, hang bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	stop := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if hang {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
			return
		}
		http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(func() { close(stop); ts.Close() })
	return ts, &n
}

// TestDeadEndpointFailsWithinTheCallLimit: a call to an endpoint that hangs
// or always fails ends within its time limit, batch or interactive, with
// a CallError; the waits between attempts after server errors are capped
// by MaxErrorBackoff, so a failing endpoint does not hold a call for the
// minutes MaxBackoff would allow.
func TestDeadEndpointFailsWithinTheCallLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		hang        bool
		interactive bool
		cfg         llm.Config
		// within is the most the call may take; timeout whether it must
		// end by its time limit (else by running out of attempts).
		within  time.Duration
		timeout bool
	}{
		{name: "hang, batch: the call limit cuts the attempt", hang: true,
			cfg:    llm.Config{AttemptTimeout: time.Minute, CallTimeout: 700 * time.Millisecond},
			within: 8 * time.Second, timeout: true},
		{name: "hang, batch: attempts time out, then the call", hang: true,
			cfg:    llm.Config{AttemptTimeout: 300 * time.Millisecond, CallTimeout: time.Second, BaseBackoff: 10 * time.Millisecond},
			within: 8 * time.Second, timeout: true},
		{name: "hang, interactive: the interactive limit applies", hang: true, interactive: true,
			cfg:    llm.Config{AttemptTimeout: time.Minute, CallTimeout: time.Hour, InteractiveCallTimeout: 700 * time.Millisecond},
			within: 8 * time.Second, timeout: true},
		{name: "500, batch: error backoff capped, attempts run out",
			cfg:    llm.Config{MaxAttempts: 8, BaseBackoff: 10 * time.Millisecond, MaxBackoff: time.Hour, MaxErrorBackoff: 40 * time.Millisecond, CallTimeout: time.Hour},
			within: 12 * time.Second},
		{name: "500, batch: the call limit stops the retries",
			cfg:    llm.Config{MaxAttempts: 50, BaseBackoff: 100 * time.Millisecond, MaxErrorBackoff: 200 * time.Millisecond, CallTimeout: 800 * time.Millisecond},
			within: 8 * time.Second, timeout: true},
		{name: "500, interactive: 3 attempts, short waits", interactive: true,
			cfg:    llm.Config{MaxAttempts: 8, BaseBackoff: 10 * time.Millisecond, MaxBackoff: time.Hour, MaxErrorBackoff: time.Hour, CallTimeout: time.Hour},
			within: 12 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts, hits := deadEndpoint(t, tt.hang)
			cfg := tt.cfg
			cfg.BaseURL = ts.URL + "/v1"
			c := client(t, cfg)
			ctx := context.Background()
			if tt.interactive {
				ctx = priority.Interactive(ctx)
			}
			start := time.Now()
			_, err := c.Chat(ctx, llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{{Role: "user", Content: "SELECT 1?"}}})
			took := time.Since(start)
			var ce *llm.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *llm.CallError", err)
			}
			if took > tt.within {
				t.Errorf("the call took %v, want at most %v (err: %v)", took, tt.within, err)
			}
			if got := errors.Is(err, llm.ErrCallTimeout); got != tt.timeout {
				t.Errorf("errors.Is(err, ErrCallTimeout) = %v, want %v (err: %v)", got, tt.timeout, err)
			}
			if ce.Attempts < 1 || int64(ce.Attempts) != hits.Load() {
				t.Errorf("the error counts %d attempts, the endpoint got %d requests", ce.Attempts, hits.Load())
			}
			if tt.interactive && !tt.hang && ce.Attempts != 3 {
				t.Errorf("an interactive call made %d attempts, want 3", ce.Attempts)
			}
		})
	}
}
