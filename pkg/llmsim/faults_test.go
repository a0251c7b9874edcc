package llmsim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestHangAndStallFaults: a hang sends nothing, not even headers (a dead
// endpoint); a stall sends the headers and a stream's first chunks, then
// nothing, and never finishes the reply. Both count as faults. Each runs
// in a synctest bubble, straight to the handler: the silence is a minute
// of the bubble's clock, checked once the handler waits, not seconds of
// the machine's.
func TestHangAndStallFaults(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	for _, tt := range []struct {
		name   string
		faults Faults
		stream bool
		// headers: the response headers came; chunk: a stream chunk came.
		headers, chunk bool
	}{
		{"hang, streamed", Faults{Hang: 1, HangFor: time.Hour}, true, false, false},
		{"hang, plain", Faults{Hang: 1, HangFor: time.Hour}, false, false, false},
		{"stall, streamed", Faults{Stall: 1, HangFor: time.Hour}, true, true, true},
		{"stall, plain", Faults{Stall: 1, HangFor: time.Hour}, false, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				s, err := New(Config{Dataset: ds, Faults: tt.faults})
				if err != nil {
					t.Fatal(err)
				}
				body := generateBody(ds.Examples[0].Question, 1)
				if tt.stream {
					body["stream"] = true
					body["stream_options"] = map[string]any{"include_usage": true}
				}
				raw, _ := json.Marshal(body)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				w := &liveWriter{header: http.Header{}}
				served := make(chan struct{})
				go func() {
					defer close(served)
					s.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(raw)).WithContext(ctx))
				}()
				// A minute of silence: what the client has then is all it
				// gets, and the handler has not finished.
				time.Sleep(time.Minute)
				synctest.Wait()
				status, flushed, got := w.sent()
				select {
				case <-served:
					t.Fatalf("the handler finished within a minute (status %d, %q)", status, got)
				default:
				}
				if headers := flushed && status != 0; headers != tt.headers {
					t.Errorf("headers sent %v (status %d), want %v", headers, status, tt.headers)
				}
				if tt.headers && status != http.StatusOK {
					t.Errorf("status %d, want 200 and a body that never ends", status)
				}
				if chunk := strings.Contains(got, "chat.completion.chunk"); chunk != tt.chunk || strings.Contains(got, "[DONE]") || strings.Contains(got, `"finish_reason":"stop"`) {
					t.Errorf("got %q before the silence", got)
				}
				if f := s.Stats().Faults; f != 1 {
					t.Errorf("faults %d, want 1", f)
				}
				cancel() // the client gives up
				<-served
			})
		})
	}
}

// liveWriter is an http.ResponseWriter and Flusher that a test reads
// while the handler runs: what a client would have received, that is
// what was flushed.
type liveWriter struct {
	mu     sync.Mutex
	header http.Header
	status int
	body   bytes.Buffer
	// flush says the handler flushed, flushed how much of body it had
	// written then.
	flush   bool
	flushed int
}

func (w *liveWriter) Header() http.Header { return w.header }

func (w *liveWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = code
	}
}

func (w *liveWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

func (w *liveWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flush, w.flushed = true, w.body.Len()
}

// sent is what a client has received: the status once flushed, and the
// body flushed so far.
func (w *liveWriter) sent() (status int, flushed bool, body string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.flush {
		return w.status, false, ""
	}
	return w.status, true, w.body.String()[:w.flushed]
}

// TestStreamedUsageIsThePlainUsage: with include_usage, a stream ends with
// a usage chunk equal to the plain reply's usage (reasoning tokens too);
// without it, it has none.
func TestStreamedUsageIsThePlainUsage(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Personas: Personas{"*": PersonaO3}})
	body := generateBody(ds.Examples[1].Question, 3)
	body["model"] = "o3"
	_, plain := post(t, ts.URL+"/v1/chat/completions", body)
	want, _ := json.Marshal(plain["usage"])
	for _, include := range []bool{true, false} {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": include}
		raw, _ := json.Marshal(body)
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var usage []string
		for _, line := range strings.Split(string(b), "\n") {
			var chunk struct {
				Usage json.RawMessage `json:"usage"`
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &chunk) == nil && len(chunk.Usage) > 0 {
				usage = append(usage, string(chunk.Usage))
			}
		}
		switch {
		case include && (len(usage) != 1 || !strings.Contains(string(want), "reasoning_tokens") || !jsonEqual(usage[0], string(want))):
			t.Errorf("include_usage: usage chunks %v, want one equal to the plain %s", usage, want)
		case !include && len(usage) != 0:
			t.Errorf("without include_usage: usage chunks %v", usage)
		}
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
