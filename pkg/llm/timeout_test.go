package llm_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
			// The last attempt may get only the few milliseconds left of a
			// limit, too few on a loaded machine to reach the server.
			if ce.Attempts < 1 || hits.Load() > int64(ce.Attempts) || hits.Load() < int64(ce.Attempts)-1 {
				t.Errorf("the error counts %d attempts, the endpoint got %d requests", ce.Attempts, hits.Load())
			}
			if tt.interactive && !tt.hang && ce.Attempts != 3 {
				t.Errorf("an interactive call made %d attempts, want 3", ce.Attempts)
			}
		})
	}
}

// silentEndpoint accepts connections and never answers: not a byte, not
// a header (a wedged server, or a proxy in front of one).
func silentEndpoint(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go io.Copy(io.Discard, c) // read the request, answer nothing
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String() + "/v1"
}

// TestDefaultsFailADeadInteractiveCallInSeconds: with the default
// configuration (only the base URL set), a call a user waits for, to an
// endpoint that accepts connections and never answers, fails within
// seconds: two 5s waits for headers and a backoff, then the interactive
// 12s dead-endpoint limit (DefaultHeaderTimeout's comment works it out).
func TestDefaultsFailADeadInteractiveCallInSeconds(t *testing.T) {
	t.Parallel()
	c := client(t, llm.Config{BaseURL: silentEndpoint(t)})
	start := time.Now()
	_, err := c.Chat(priority.Interactive(context.Background()), llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User("SELECT 1?")}})
	took := time.Since(start)
	var ce *llm.CallError
	if !errors.As(err, &ce) || !errors.Is(err, llm.ErrEndpointDown) || !errors.Is(err, llm.ErrHeaderTimeout) {
		t.Fatalf("err = %v, want a CallError: the endpoint is down, its attempts got no headers", err)
	}
	// The endpoint's clocks start once the prompt is counted: a loaded
	// machine can take seconds over the tokenizer's first load (15.5 s in
	// all, with two make tests at once).
	waited := took - ce.Usage.Tokenize
	t.Logf("an interactive call to a silent endpoint failed after %v (%v counting the prompt): %v",
		took.Round(time.Millisecond), ce.Usage.Tokenize.Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), "no response for "+llm.InteractiveDeadTimeout.String()) || ce.Attempts > 3 {
		t.Errorf("err = %v after %d attempts, want the interactive dead-endpoint limit (%v) within 3 attempts", err, ce.Attempts, llm.InteractiveDeadTimeout)
	}
	// 12s at most by the arithmetic (TestDefaultsFailADeadEndpointInTime).
	// The bound leaves a loaded machine's late timers room and is still
	// far short of the 45s the batch limits would give this call.
	if waited > 30*time.Second || waited < 10*time.Second {
		t.Errorf("the call waited %v on the endpoint, want about 11-12s (under 30s; batch limits give 45s)", waited)
	}
}

// TestDeadEndpointLimit: the dead-endpoint clock, scaled down, ends a call
// whose attempts get no headers or only server errors before its attempts
// run out; a 429 in between shows the endpoint alive and restarts it. And
// an always-500 endpoint with the default retry schedule, scaled down ten
// times, fails in a tenth of a minute.
func TestDeadEndpointLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     llm.Config
		handler func(n int64, w http.ResponseWriter, r *http.Request)
		down    bool
		// attempts bounds the attempts made (from, to); within the time.
		minAttempts, maxAttempts int
		within                   time.Duration
	}{
		{name: "no headers: 3 header timeouts, not 8 attempts",
			// Seconds, not milliseconds: a loaded machine fires a 200ms
			// header timer a second late, and the first attempt alone
			// would spend the clock.
			cfg:     llm.Config{HeaderTimeout: time.Second, BaseBackoff: 20 * time.Millisecond},
			handler: func(_ int64, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			down:    true, minAttempts: 2, maxAttempts: 4, within: 10 * time.Second},
		{name: "500s for longer than the limit",
			cfg: llm.Config{DeadEndpointTimeout: 300 * time.Millisecond, BaseBackoff: 100 * time.Millisecond, MaxErrorBackoff: 100 * time.Millisecond, MaxAttempts: 50},
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
			},
			down: true, minAttempts: 2, maxAttempts: 8, within: 20 * time.Second},
		{name: "a 429 in between restarts the clock",
			// Without the restart, attempt 3 would get only what is left
			// of 3s after attempt 1's 2s, and the call would end down.
			cfg: llm.Config{HeaderTimeout: 2 * time.Second, DeadEndpointTimeout: 3 * time.Second, BaseBackoff: 20 * time.Millisecond, MaxAttempts: 3},
			handler: func(n int64, w http.ResponseWriter, r *http.Request) {
				if n == 2 {
					w.Header().Set("Retry-After-Ms", "1")
					http.Error(w, `{"error":{"message":"slow down","type":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
					return
				}
				<-r.Context().Done()
			},
			minAttempts: 3, maxAttempts: 3, within: 15 * time.Second},
		{name: "always 500, the default schedule ten times faster",
			cfg: llm.Config{BaseBackoff: llm.Defaulted(llm.Config{}).BaseBackoff / 10, MaxErrorBackoff: llm.Defaulted(llm.Config{}).MaxErrorBackoff / 10},
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
			},
			minAttempts: 8, maxAttempts: 8, within: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int64
			stop := make(chan struct{})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := n.Add(1)
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				go func() {
					select {
					case <-stop:
						cancel()
					case <-ctx.Done():
					}
				}()
				tt.handler(i, w, r.WithContext(ctx))
			}))
			t.Cleanup(func() { close(stop); ts.Close() })
			cfg := tt.cfg
			cfg.BaseURL = ts.URL + "/v1"
			c := client(t, cfg)
			start := time.Now()
			_, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User("SELECT 1?")}})
			took := time.Since(start)
			t.Logf("%d attempts in %v: %v", n.Load(), took.Round(time.Millisecond), err)
			var ce *llm.CallError
			if !errors.As(err, &ce) || errors.Is(err, llm.ErrEndpointDown) != tt.down {
				t.Errorf("err = %v, want a CallError (endpoint down: %v)", err, tt.down)
			}
			// The last attempt may get only the few milliseconds left of a
			// limit, too few on a loaded machine to reach the server.
			if ce != nil && (ce.Attempts < tt.minAttempts || ce.Attempts > tt.maxAttempts || n.Load() > int64(ce.Attempts) || n.Load() < int64(ce.Attempts)-1) {
				t.Errorf("%d attempts (the endpoint got %d), want %d to %d", ce.Attempts, n.Load(), tt.minAttempts, tt.maxAttempts)
			}
			if took > tt.within {
				t.Errorf("the call took %v, want under %v", took, tt.within)
			}
		})
	}
}

// TestDefaultsFailADeadEndpointInTime works out, from the defaults and
// the rules Chat follows, the longest a call to a dead endpoint can take,
// every backoff at its ceiling: an endpoint that never answers (each
// attempt waits for headers) and one that answers 500 at once. Batch
// calls must fail in under a minute, interactive ones in under 15s;
// TestDefaultsFailADeadInteractiveCallInSeconds measures the interactive
// case for real, TestDeadEndpointLimit the rules scaled down.
func TestDefaultsFailADeadEndpointInTime(t *testing.T) {
	t.Parallel()
	cfg := llm.Defaulted(llm.Config{})
	worst := func(interactive, hang bool) (time.Duration, int) {
		attempts, limit, header, dead := cfg.MaxAttempts, cfg.CallTimeout, cfg.HeaderTimeout, cfg.DeadEndpointTimeout
		if interactive {
			attempts = min(attempts, cfg.InteractiveAttempts)
			limit = min(limit, cfg.InteractiveCallTimeout)
			header = min(header, llm.InteractiveHeaderTimeout)
			dead = min(dead, llm.InteractiveDeadTimeout)
		}
		var at time.Duration
		for a := 1; ; a++ {
			if at >= limit || at >= dead {
				return at, a - 1
			}
			if hang {
				at += min(header, limit-at, dead-at)
			}
			if a == attempts {
				return at, a
			}
			ceiling := min(time.Duration(float64(cfg.BaseBackoff)*math.Pow(2, float64(a-1))), cfg.MaxBackoff)
			delay := min(ceiling, cfg.MaxErrorBackoff)
			if interactive {
				delay = min(delay, llm.InteractiveBackoff)
			}
			if delay >= limit-at || delay >= dead-at {
				return at, a
			}
			at += delay
		}
	}
	for _, tt := range []struct {
		name              string
		interactive, hang bool
		under             time.Duration
	}{
		{"batch, never answers", false, true, time.Minute},
		{"batch, always 500", false, false, time.Minute},
		{"interactive, never answers", true, true, 15 * time.Second},
		{"interactive, always 500", true, false, 15 * time.Second},
	} {
		took, attempts := worst(tt.interactive, tt.hang)
		t.Logf("%s: fails after %d attempts, by %v at worst", tt.name, attempts, took)
		if took >= tt.under {
			t.Errorf("%s: a dead endpoint holds a call up to %v, want under %v", tt.name, took, tt.under)
		}
	}
	// A live stream is cut by none of these.
	if cfg.AttemptTimeout < 5*time.Minute || cfg.StallTimeout < time.Minute || cfg.CallTimeout < cfg.AttemptTimeout {
		t.Errorf("attempt %v, stall %v, call %v: a reasoning model writing for minutes would be cut", cfg.AttemptTimeout, cfg.StallTimeout, cfg.CallTimeout)
	}
}
