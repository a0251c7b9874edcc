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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// hostileQueries are what a model (or an attacker steering one) could
// write to hold a worker: one huge value, a huge result, an endless
// result, and a statement that computes for hours before its first row.
var hostileQueries = []string{
	"SELECT zeroblob(1000000000)",
	"SELECT length(hex(randomblob(400000000))), length(hex(randomblob(400000000)))",
	"SELECT * FROM order_items a, order_items b, order_items c, order_items d",
	"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c",
	"SELECT count(*) FROM order_items a, order_items b, order_items c",
}

// hostileEndpoint answers every chat call with hostile queries, each in its
// own sql block (a candidate takes the first, an exploration runs them
// all), and records when each call came in and what it asked.
func hostileEndpoint(t *testing.T) (url string, calls func() []time.Time, prompts func() []string) {
	t.Helper()
	var mu sync.Mutex
	var at []time.Time
	var asked []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(at)
		at = append(at, time.Now())
		asked = append(asked, string(body))
		mu.Unlock()
		// Three queries a reply, starting one further each call: every
		// query comes first (a candidate's) in turn.
		var reply strings.Builder
		for i := range 3 {
			reply.WriteString("```sql\n" + hostileQueries[(n+i)%len(hostileQueries)] + "\n```\n")
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "hostile", "object": "chat.completion", "model": "gpt-4o",
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": reply.String()}}},
			"usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	calls = func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), at...)
	}
	prompts = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
	return ts.URL + "/v1", calls, prompts
}

// TestHostileQueriesAsCandidatesAndExploration runs a real quorum process
// whose model writes only hostile SQL, as candidates and as exploration
// queries. Each query ends by a cap the flags set, as the engine's error
// the model is shown says (the query that only --query-timeout stops ran
// "longer than 2s"), the process stays under 1 GiB, and the example is
// recorded as answered or failed with the engines' errors, never lost.
func TestHostileQueriesAsCandidatesAndExploration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the quorum binary")
	}
	t.Parallel()
	bin := quorumBinary(t)
	url, calls, prompts := hostileEndpoint(t)
	out := filepath.Join(t.TempDir(), "out")
	const timeout = 2 * time.Second
	cmd := exec.Command(bin, "solve", "--dataset", demo, "--ids", "local001", "--votes", "2", "--query-timeout", timeout.String(),
		"--llm-base-url", url, "--llm-api-key", "k", "--llm-attempts", "1", "--out", out)
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL=", "OPENAI_API_KEY=")
	start := time.Now()
	log, err := cmd.CombinedOutput()
	wall := time.Since(start) //clock:ok logged, not asserted
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("quorum solve: %v\n%s", err, log)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	at := calls()
	var gap time.Duration
	for i := 1; i < len(at); i++ {
		gap = max(gap, at[i].Sub(at[i-1]))
	}
	t.Logf("%d LLM calls in %s; longest wait between calls %s; peak RSS %d MiB; exit %d",
		len(at), wall.Round(time.Millisecond), gap.Round(time.Millisecond), rss>>10, cmd.ProcessState.ExitCode())
	if rss > 1<<20 {
		t.Errorf("peak RSS %d MiB, want under 1 GiB", rss>>10)
	}
	// The reasons the queries ended, as the model was told them.
	reasons := map[string]int{}
	for _, p := range prompts() {
		for _, r := range []string{"interrupted: the query ran longer than " + timeout.String(), "result too large", "string or blob too big"} {
			if strings.Contains(p, r) {
				reasons[r]++
			}
		}
	}
	t.Logf("prompts naming each cap: %v", reasons)
	if reasons["interrupted: the query ran longer than "+timeout.String()] == 0 {
		t.Errorf("no prompt says a query was interrupted after the %s --query-timeout (prompts naming each cap: %v): the query only the timeout stops was not ended by it", timeout, reasons)
	}
	rep, rerr := outputs.ReadReport(out)
	if rerr != nil {
		t.Fatalf("run.json: %v\n%s", rerr, log)
	}
	if len(rep.Examples) != 1 {
		t.Fatalf("run.json has %d examples, want local001", len(rep.Examples))
	}
	if len(at) < 4 {
		t.Errorf("only %d LLM calls: the candidates were not refined after their errors", len(at))
	}
	if ex := rep.Examples[0].CostByStage["explore"]; ex == nil || ex.Queries == 0 {
		t.Errorf("no exploration query ran: the hostile queries were not tried as exploration")
	}
	if !strings.Contains(string(log), "local001") {
		t.Errorf("the summary does not name the example:\n%s", log)
	}
}
