package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestLimitSetMidRunReachesEveryWorker: a run through the role binaries
// (coordinator, two generator workers and an explorer worker, each its
// own quorum process, with a voter) calls the simulated LLM as fast as
// --llm-rpm 6000 lets it; once both generator workers have called it,
// quorum limits set lowers gpt-4o to 12 requests a minute. From 5 s after the change,
// the workers together send at most what 12 a minute allows over 20 s
// (four, and one more that an idle quota lets start at once): each worker
// reads the limit again within ratelimit.LimitsRefresh (2 s). A slow
// machine sends fewer, never more; a worker that kept its configured
// quota would send dozens, or finish the run (44 examples x 8
// candidates), which at 12 a minute cannot end in the window.
func TestLimitSetMidRunReachesEveryWorker(t *testing.T) {
	bin := quorumBinary(t)
	t.Parallel()
	ns, rs := natstest.Start(t), redistest.Start(t)
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 5, Latency: llmsim.Latency{FirstToken: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	calls := &arrivals{}
	mux := http.NewServeMux()
	workers := []string{"gen-a", "gen-b", "explorer"}
	for _, w := range workers {
		prefix := "/" + w
		mux.Handle(prefix+"/", http.StripPrefix(prefix, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			calls.add(w)
			sim.ServeHTTP(rw, r)
		})))
	}
	llm := httptest.NewServer(mux)
	t.Cleanup(llm.Close)
	out := filepath.Join(t.TempDir(), "out")
	join := []string{"--nats-url", ns.URL(), "--redis-url", rs.URL(), "--log-level", "error"}
	llmArgs := func(w string) []string {
		return []string{"--llm-base-url", llm.URL + "/" + w + "/v1", "--llm-api-key", "k", "--llm-rpm", "6000"}
	}
	runRoleBinary(t, bin, append(append([]string{"generator-worker", "--concurrency", "8"}, join...), llmArgs("gen-a")...)...)
	runRoleBinary(t, bin, append(append([]string{"generator-worker", "--concurrency", "8"}, join...), llmArgs("gen-b")...)...)
	runRoleBinary(t, bin, append(append([]string{"explorer-worker", "--concurrency", "8"}, join...), llmArgs("explorer")...)...)
	runRoleBinary(t, bin, append([]string{"voter"}, join...)...)
	runRoleBinary(t, bin, append([]string{"coordinator", "--run-id", "limits", "--dataset", demo, "--limit", "44", "--votes", "8",
		"--out", out}, join...)...)

	// The explorer calls the LLM late in an example's work: the change
	// comes once both generator workers call it, most of the run ahead.
	wait.For(t, 2*time.Minute, "the generator workers' first LLM calls", func() bool {
		for _, w := range workers[:2] {
			if calls.count(w, time.Time{}, time.Time{}) < 2 {
				return false
			}
		}
		return true
	})
	if out, err := run(t, "limits", "set", "--redis-url", rs.URL(), "--model", "gpt-4o", "--llm-rpm", "12"); err != nil {
		t.Fatalf("quorum limits set: %v\n%s", err, out)
	}
	changed := time.Now()
	from, to := changed.Add(5*time.Second), changed.Add(25*time.Second)
	time.Sleep(time.Until(to)) //clock:ok the scenario's window; the assertion counts calls, which a slow machine only lowers
	total, by := 0, map[string]int{}
	for _, w := range workers {
		by[w] = calls.count(w, from, to)
		total += by[w]
	}
	t.Logf("LLM calls from 5 s to 25 s after the limit was set to 12/min: %v (before it: %v)", by, calls.before(changed))
	if total > 5 {
		t.Errorf("the workers sent %d LLM calls from 5 s to 25 s after the limit was set to 12 a minute (%v), want at most 5", total, by)
	}
	if _, err := os.Stat(filepath.Join(out, "run.json")); err == nil {
		t.Errorf("the run finished within 25 s of the limit set to 12 a minute: its calls did not keep to it")
	}
	// Cleared, the run goes on to its end, and its report (written by a
	// coordinator that calls no LLM itself) lists the two changes.
	if out, err := run(t, "limits", "clear", "--redis-url", rs.URL(), "--model", "gpt-4o"); err != nil {
		t.Fatalf("quorum limits clear: %v\n%s", err, out)
	}
	wait.For(t, 5*time.Minute, "the run to finish once the limit was cleared", func() bool {
		_, err := os.Stat(filepath.Join(out, "run.json"))
		return err == nil
	})
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.LimitChanges) != 2 || rep.LimitChanges[0].RPM != 12 || !rep.LimitChanges[1].Cleared {
		t.Errorf("run.json's limit_changes: %+v, want the set to 12 req/min and the clear", rep.LimitChanges)
	}
}

// arrivals records when each worker's LLM calls arrived.
type arrivals struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (a *arrivals) add(w string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.at == nil {
		a.at = map[string][]time.Time{}
	}
	a.at[w] = append(a.at[w], time.Now())
}

// count is w's calls from from to to (zero times: without that bound).
func (a *arrivals) count(w string, from, to time.Time) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, t := range a.at[w] {
		if (from.IsZero() || !t.Before(from)) && (to.IsZero() || t.Before(to)) {
			n++
		}
	}
	return n
}

func (a *arrivals) before(t time.Time) map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for w, ts := range a.at {
		for _, x := range ts {
			if x.Before(t) {
				out[w]++
			}
		}
	}
	return out
}

// runRoleBinary runs the quorum binary with args until the test ends; its
// output is shown when the test fails.
func runRoleBinary(t *testing.T, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start quorum %s: %v", strings.Join(args, " "), err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			t.Logf("quorum %s:\n%s", args[0], out.String())
		}
	})
}
