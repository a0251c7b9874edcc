package llm_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/priority"
)

// deadHandler is an endpoint that never answers (hang) or answers every
// request with a 500; it counts the requests it got in n.
func deadHandler(n *atomic.Int64, hang bool) http.HandlerFunc {
	return countRequests(n, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if hang {
			<-r.Context().Done()
			return
		}
		http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
	})
}

// TestDeadEndpointFailsWithinTheCallLimit: a call to an endpoint that hangs
// or always fails ends within its time limit, batch or interactive, with
// a CallError; the waits between attempts after server errors are capped
// by MaxErrorBackoff, so a failing endpoint does not hold a call for the
// minutes MaxBackoff would allow. The call runs in a synctest bubble on
// an in-memory endpoint, so the time it takes is the fake clock's,
// exact whatever the machine's load.
func TestDeadEndpointFailsWithinTheCallLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		hang        bool
		interactive bool
		cfg         llm.Config
		// within is the most the call may take on the fake clock: its
		// time limit, or every capped backoff at its ceiling; timeout
		// whether it must end by its time limit (else by running out of
		// attempts).
		within  time.Duration
		timeout bool
	}{
		{name: "hang, batch: the call limit cuts the attempt", hang: true,
			cfg:    llm.Config{AttemptTimeout: time.Minute, CallTimeout: 700 * time.Millisecond},
			within: 700 * time.Millisecond, timeout: true},
		{name: "hang, batch: attempts time out, then the call", hang: true,
			cfg:    llm.Config{AttemptTimeout: 300 * time.Millisecond, CallTimeout: time.Second, BaseBackoff: 10 * time.Millisecond},
			within: time.Second, timeout: true},
		{name: "hang, interactive: the interactive limit applies", hang: true, interactive: true,
			cfg:    llm.Config{AttemptTimeout: time.Minute, CallTimeout: time.Hour, InteractiveCallTimeout: 700 * time.Millisecond},
			within: 700 * time.Millisecond, timeout: true},
		{name: "500, batch: error backoff capped, attempts run out",
			cfg: llm.Config{MaxAttempts: 8, BaseBackoff: 10 * time.Millisecond, MaxBackoff: time.Hour, MaxErrorBackoff: 40 * time.Millisecond, CallTimeout: time.Hour},
			// 7 waits: 10ms, 20ms, then 40ms five times.
			within: 230 * time.Millisecond},
		{name: "500, batch: the call limit stops the retries",
			cfg:    llm.Config{MaxAttempts: 50, BaseBackoff: 100 * time.Millisecond, MaxErrorBackoff: 200 * time.Millisecond, CallTimeout: 800 * time.Millisecond},
			within: 800 * time.Millisecond, timeout: true},
		{name: "500, interactive: 3 attempts, short waits", interactive: true,
			cfg: llm.Config{MaxAttempts: 8, BaseBackoff: 10 * time.Millisecond, MaxBackoff: time.Hour, MaxErrorBackoff: time.Hour, CallTimeout: time.Hour},
			// 2 waits: 10ms, 20ms.
			within: 30 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var hits atomic.Int64
				c := fakeClient(t, tt.cfg, deadHandler(&hits, tt.hang))
				ctx := context.Background()
				if tt.interactive {
					ctx = priority.Interactive(ctx)
				}
				start := time.Now()
				_, err := c.Chat(ctx, llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{{Role: "user", Content: "SELECT 1?"}}})
				took := time.Since(start)
				t.Logf("%d attempts in %v (fake clock): %v", hits.Load(), took, err)
				var ce *llm.CallError
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a *llm.CallError", err)
				}
				if took > tt.within {
					t.Errorf("the call took %v on the fake clock, want at most %v (err: %v)", took, tt.within, err)
				}
				if got := errors.Is(err, llm.ErrCallTimeout); got != tt.timeout {
					t.Errorf("errors.Is(err, ErrCallTimeout) = %v, want %v (err: %v)", got, tt.timeout, err)
				}
				// The last attempt may start with none of the limit left.
				if ce.Attempts < 1 || hits.Load() > int64(ce.Attempts) || hits.Load() < int64(ce.Attempts)-1 {
					t.Errorf("the error counts %d attempts, the endpoint got %d requests", ce.Attempts, hits.Load())
				}
				if tt.interactive && !tt.hang && ce.Attempts != 3 {
					t.Errorf("an interactive call made %d attempts, want 3", ce.Attempts)
				}
				if !tt.timeout && !tt.interactive && ce.Attempts != tt.cfg.MaxAttempts {
					t.Errorf("the call made %d attempts, want all %d", ce.Attempts, tt.cfg.MaxAttempts)
				}
			})
		})
	}
}

// TestDefaultsFailADeadInteractiveCallInSeconds: with the default
// configuration (only the base URL and an in-memory transport set), a
// call a user waits for, to an endpoint that takes the request and never
// answers (not a byte, not a header: a wedged server, or a proxy in front
// of one), fails within seconds: two 5s waits for headers and a backoff,
// then the interactive 12s dead-endpoint limit (DefaultHeaderTimeout's
// comment works it out). The bubble's fake clock makes the time exact.
func TestDefaultsFailADeadInteractiveCallInSeconds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var hits atomic.Int64
		c := fakeClient(t, llm.Config{}, deadHandler(&hits, true))
		start := time.Now()
		_, err := c.Chat(priority.Interactive(context.Background()), llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User("SELECT 1?")}})
		took := time.Since(start)
		var ce *llm.CallError
		if !errors.As(err, &ce) || !errors.Is(err, llm.ErrEndpointDown) || !errors.Is(err, llm.ErrHeaderTimeout) {
			t.Fatalf("err = %v, want a CallError: the endpoint is down, its attempts got no headers", err)
		}
		t.Logf("an interactive call to a silent endpoint failed after %v (fake clock), %d attempts: %v", took, ce.Attempts, err)
		if !strings.Contains(err.Error(), "no response for "+llm.InteractiveDeadTimeout.String()) || ce.Attempts > 3 {
			t.Errorf("err = %v after %d attempts, want the interactive dead-endpoint limit (%v) within 3 attempts", err, ce.Attempts, llm.InteractiveDeadTimeout)
		}
		// 12s at most by the arithmetic (TestDefaultsFailADeadEndpointInTime),
		// far short of the 45s the batch limits would give this call.
		if took > llm.InteractiveDeadTimeout || took < 10*time.Second {
			t.Errorf("the call waited %v on the endpoint, want 10s to %v (batch limits give 45s)", took, llm.InteractiveDeadTimeout)
		}
	})
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
		// attempts bounds the attempts made (from, to); within the time
		// on the fake clock of a synctest bubble, exact on any machine.
		minAttempts, maxAttempts int
		within                   time.Duration
	}{
		{name: "no headers: 3 header timeouts, not 8 attempts",
			cfg:     llm.Config{HeaderTimeout: time.Second, BaseBackoff: 20 * time.Millisecond},
			handler: func(_ int64, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			down:    true, minAttempts: 2, maxAttempts: 4, within: llm.Defaulted(llm.Config{}).DeadEndpointTimeout},
		{name: "500s for longer than the limit",
			cfg: llm.Config{DeadEndpointTimeout: 300 * time.Millisecond, BaseBackoff: 100 * time.Millisecond, MaxErrorBackoff: 100 * time.Millisecond, MaxAttempts: 50},
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
			},
			down: true, minAttempts: 2, maxAttempts: 8, within: 300 * time.Millisecond},
		{name: "a 429 in between restarts the clock",
			// Without the restart, request 3 would get only what is left
			// of 3s after request 1's 2s, and the call would end down. The
			// 429 names its delay, so it spends none of the 2 attempts.
			cfg: llm.Config{HeaderTimeout: 2 * time.Second, DeadEndpointTimeout: 3 * time.Second, BaseBackoff: 20 * time.Millisecond, MaxAttempts: 2},
			handler: func(n int64, w http.ResponseWriter, r *http.Request) {
				if n == 2 {
					w.Header().Set("Retry-After-Ms", "1")
					http.Error(w, `{"error":{"message":"slow down","type":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
					return
				}
				<-r.Context().Done()
			},
			minAttempts: 3, maxAttempts: 3, within: 4500 * time.Millisecond},
		{name: "always 500, the default schedule ten times faster",
			cfg: llm.Config{BaseBackoff: llm.Defaulted(llm.Config{}).BaseBackoff / 10, MaxErrorBackoff: llm.Defaulted(llm.Config{}).MaxErrorBackoff / 10},
			handler: func(_ int64, w http.ResponseWriter, _ *http.Request) {
				http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
			},
			minAttempts: 8, maxAttempts: 8, within: 6 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var n atomic.Int64
				c := fakeClient(t, tt.cfg, countRequests(&n, tt.handler))
				start := time.Now()
				_, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User("SELECT 1?")}})
				took := time.Since(start)
				t.Logf("%d attempts in %v (fake clock): %v", n.Load(), took, err)
				var ce *llm.CallError
				if !errors.As(err, &ce) || errors.Is(err, llm.ErrEndpointDown) != tt.down {
					t.Errorf("err = %v, want a CallError (endpoint down: %v)", err, tt.down)
				}
				// The last attempt may start with none of the limit left.
				if ce != nil && (ce.Attempts < tt.minAttempts || ce.Attempts > tt.maxAttempts || n.Load() > int64(ce.Attempts) || n.Load() < int64(ce.Attempts)-1) {
					t.Errorf("%d attempts (the endpoint got %d), want %d to %d", ce.Attempts, n.Load(), tt.minAttempts, tt.maxAttempts)
				}
				if took > tt.within {
					t.Errorf("the call took %v on the fake clock, want at most %v", took, tt.within)
				}
			})
		})
	}
}

// TestDefaultsFailADeadEndpointInTime works out, from the defaults and
// the rules Chat follows, the longest a call to a dead endpoint can take,
// every backoff at its ceiling: an endpoint that never answers (each
// attempt waits for headers) and one that answers 500 at once. Batch
// calls must fail in under a minute, interactive ones in under 15s;
// TestDefaultsFailADeadInteractiveCallInSeconds runs the interactive
// case on a synctest fake clock, TestDeadEndpointLimit the rules scaled down.
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

// fakeURL is the base URL of an endpoint served by fakeTransport.
const fakeURL = "http://llm.test/v1"

// fakeTransport serves each request with h in memory: no socket, so
// inside a testing/synctest bubble a call waiting on the endpoint is
// durably blocked and the bubble's fake clock runs its timers at once.
// The handler sees the request's context (done when the attempt ends)
// and writes into a pipe the response's body reads from.
type fakeTransport struct{ h http.Handler }

func (f fakeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	stop := context.AfterFunc(req.Context(), func() { pr.CloseWithError(req.Context().Err()) })
	go func() {
		defer func() { w.WriteHeader(http.StatusOK); pw.Close() }()
		f.h.ServeHTTP(w, req)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{StatusCode: w.status, Status: http.StatusText(w.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pipeBody{pr, stop}, ContentLength: -1, Request: req}, nil
}

// pipeResponse is the handler's side of a fakeTransport exchange.
type pipeResponse struct {
	header, sent http.Header
	pw           *io.PipeWriter
	once         sync.Once
	status       int
	ready        chan struct{}
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() { w.status, w.sent = code, w.header.Clone(); close(w.ready) })
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

func (w *pipeResponse) Flush() { w.WriteHeader(http.StatusOK) }

// pipeBody is a response body; closing it ends the handler's writes.
type pipeBody struct {
	*io.PipeReader
	stop func() bool
}

func (b pipeBody) Close() error {
	b.stop()
	return b.PipeReader.Close()
}

// fakeClient is a client of an endpoint served in memory by h, for a
// test in a synctest bubble (BaseURL and HTTPClient are set here).
func fakeClient(t *testing.T, cfg llm.Config, h http.HandlerFunc) *llm.OpenAI {
	t.Helper()
	cfg.BaseURL = fakeURL
	cfg.HTTPClient = &http.Client{Transport: fakeTransport{h}}
	return client(t, cfg)
}

// countRequests is a handler that counts its requests, numbering them from 1.
func countRequests(n *atomic.Int64, h func(i int64, w http.ResponseWriter, r *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { h(n.Add(1), w, r) }
}
