package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/metrics"
)

// TestSoakHeapFlat asks QUORUM_SOAK_QUESTIONS (default 2,000) questions
// through the API against llmsim, cache off, and reports the live heap
// after GC, RSS, and Redis' used_memory and keys before and after. It
// fails when the heap grows by more than 16 KiB a question or /metrics
// names a question. Run with QUORUM_SOAK=1 (not in make test):
//
//	QUORUM_SOAK=1 go test -run TestSoakHeapFlat -v -timeout 30m ./internal/app/serve/
func TestSoakHeapFlat(t *testing.T) {
	if os.Getenv("QUORUM_SOAK") == "" {
		t.Skip("QUORUM_SOAK=1 runs the soak")
	}
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("QUORUM_SOAK_QUESTIONS")); err == nil && v > 0 {
		n = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	ds, sim := demoSim(t)
	cl := startCluster(ctx, t, sim, 16, 8)
	rdb := cl.Redis
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA), "test")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New("serve")
	cl.Env.Metrics = m
	s, err := New(Config{Env: cl.Env, Redis: rdb, Dataset: openAPIDemo, Votes: 1, StateDir: t.TempDir(), RoundTimeout: time.Minute,
		Tenants: tenants, CacheTTL: -1, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	h := runServer(ctx, t, s)
	questions := ds.Examples

	type snapshot struct {
		heap, rss, redisMem, keys int64
	}
	snap := func() snapshot {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		sn := snapshot{heap: int64(ms.HeapAlloc), rss: rss(t)}
		info, _ := rdb.Info(ctx, "memory").Result()
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				sn.redisMem, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		sn.keys, _ = rdb.DBSize(ctx).Result()
		return sn
	}
	ask := func(i int) error {
		q := questions[i%len(questions)]
		// A new question each time: the run is new, not a resumed one.
		body, _ := json.Marshal(map[string]any{"db": q.DB, "question": fmt.Sprintf("%s (%d)", q.Question, i), "cache": false})
		w := request(t, h, "POST", "/v1/questions", keyA, string(body))
		if w.Code != http.StatusAccepted {
			return fmt.Errorf("ask %d: %d %s", i, w.Code, w.Body)
		}
		var a accepted
		_ = json.Unmarshal(w.Body.Bytes(), &a)
		for {
			rec, err := s.store.get(ctx, a.ID)
			if err != nil {
				return err
			}
			if rec.Terminal() {
				return nil
			}
			select { // polling the record as a client would
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	run := func(from, to int) {
		var wg sync.WaitGroup
		next := make(chan int)
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if err := ask(i); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		for i := from; i < to; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	warm := min(100, n/10)
	run(0, warm) // the datasets, tokenizers and pools are loaded
	before := snap()
	start := time.Now()
	run(warm, warm+n)
	took := time.Since(start)
	after := snap()
	perQ := float64(after.heap-before.heap) / float64(n)
	t.Logf("%d questions in %s (%.1f/s)", n, took.Round(time.Second), float64(n)/took.Seconds())
	t.Logf("live heap after GC: %.1f MiB -> %.1f MiB (%+.0f B/question)", mib(before.heap), mib(after.heap), perQ)
	t.Logf("RSS: %.1f MiB -> %.1f MiB", mib(before.rss), mib(after.rss))
	t.Logf("redis used_memory: %.1f MiB -> %.1f MiB; keys %d -> %d (%+.1f/question)", mib(before.redisMem), mib(after.redisMem),
		before.keys, after.keys, float64(after.keys-before.keys)/float64(n))
	if perQ > 16<<10 {
		t.Errorf("the live heap grew %.0f bytes a question", perQ)
	}
	mw := httptest.NewRecorder()
	mux := http.NewServeMux()
	metrics.Handle(mux, m, nil)
	mux.ServeHTTP(mw, httptest.NewRequest("GET", "/metrics", nil))
	if body := mw.Body.String(); strings.Contains(body, `run="q`) {
		t.Error("/metrics names questions")
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// rss is this process's resident set size, from /proc.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
