//go:build linux

package cli

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// floodEndpoint answers every chat call with an event stream that never
// ends: chunk after chunk of text as fast as the connection takes them,
// no finish reason, no [DONE]. It counts the calls, and the calls whose
// connection the client closed.
func floodEndpoint(t *testing.T) (url string, calls, closed *atomic.Int64) {
	t.Helper()
	calls, closed = new(atomic.Int64), new(atomic.Int64)
	text := strings.Repeat("SELECT name FROM customers WHERE city = 'Paris' ", 20)
	event := []byte(`data: {"id":"flood","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"` + text + `"},"finish_reason":null}]}` + "\n\n")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := w.Write(event); err != nil {
				closed.Add(1)
				return
			}
			if r.Context().Err() != nil {
				closed.Add(1)
				return
			}
		}
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/v1", calls, closed
}

// TestRunAgainstAFloodingEndpoint: quorum run against an endpoint that
// streams without end (which took a run from 317 MiB to 3.5 GB in 40 s)
// stays under 600 MB: each reply is cut at its size bound, the connection
// closed, and the example's trace records the reply as cut (finish
// "length").
func TestRunAgainstAFloodingEndpoint(t *testing.T) {
	t.Parallel()
	bin := quorumBinary(t)
	url, calls, closed := floodEndpoint(t)
	out := filepath.Join(t.TempDir(), "out")
	cmd := exec.Command(bin, "run", "--dataset", demo, "--ids", "local001", "--votes", "1",
		"--llm-base-url", url, "--llm-api-key", "k", "--llm-attempts", "1", "--out", out, "--log-level", "error")
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL=", "OPENAI_API_KEY=")
	log, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("quorum run: %v\n%s", err, log)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	t.Logf("%d LLM calls, %d connections closed by the client; peak RSS %d MiB; exit %d",
		calls.Load(), closed.Load(), rss>>10, cmd.ProcessState.ExitCode())
	if rss > 600<<10 {
		t.Errorf("peak RSS %d MiB, want under 600 MB", rss>>10)
	}
	if calls.Load() == 0 {
		t.Fatalf("the endpoint got no call:\n%s", log)
	}
	raw, err := outputs.ReadTrace(out, "local001")
	if err != nil {
		t.Fatalf("the trace of local001: %v\n%s", err, log)
	}
	var tr any
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatalf("the trace of local001: %v", err)
	}
	if cut := countFinish(tr, "length"); cut == 0 {
		t.Errorf("the trace of local001 records no reply cut (finish \"length\"):\n%.2000s", raw)
	}
}

// countFinish counts the objects of a decoded JSON document whose
// "finish" is finish.
func countFinish(v any, finish string) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		if x["finish"] == finish {
			n++
		}
		for _, e := range x {
			n += countFinish(e, finish)
		}
	case []any:
		for _, e := range x {
			n += countFinish(e, finish)
		}
	}
	return n
}
