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
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/wait"
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
		sn := snapshot{heap: liveHeap(), rss: rss(t)}
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
	took := time.Since(start) //clock:ok logged, not asserted (a soak: make slow, QUORUM_SOAK)
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

// liveHeap is the heap in use after two collections: what the process
// keeps, not what it has yet to collect.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

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

// TestSoakCancelFlat asks and cancels QUORUM_SOAK_QUESTIONS (default 2,000)
// questions through the real serve assembly (Start), with an LLM that
// never answers (each question is running at its cancel) and serve's
// --retain at 10 s, and checks that the process ends where it started
// once the questions are settled and their retention has passed: its
// goroutines, its live heap after GC (at most 16 KiB more a question; RSS
// is logged beside it), the stream's coordinator consumers and its messages on the
// questions' subjects, Redis's keys without an expiry, and Redis's keys by
// pattern (SCAN) — all but the cancelled questions' charges
// (serve:charged:<id>), which keep rdb.TokensTTL (48 h) by design. Run
// with QUORUM_SOAK=1, not with -short (about a minute):
//
//	QUORUM_SOAK=1 go test -run TestSoakCancelFlat -v -timeout 30m ./internal/app/serve/
func TestSoakCancelFlat(t *testing.T) {
	if os.Getenv("QUORUM_SOAK") == "" || testing.Short() {
		t.Skip("QUORUM_SOAK=1 (without -short) runs the soak")
	}
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("QUORUM_SOAK_QUESTIONS")); err == nil && v > 0 {
		n = v
	}
	const retain = 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	_, sim := demoSim(t)
	h := &hold{sim: sim, open: make(chan struct{})}
	r := startLeakRig(ctx, t, h, t.TempDir(), func(c *Config) { c.Retain.State = retain })
	t.Cleanup(h.release)
	charged := rdb.ChargedKey("*")
	// over waits until every question asked so far is settled and its
	// retention has passed: no record, no run key left, and the runs'
	// registry pruned (the settle loop prunes it).
	over := func() {
		r.idle()
		r.settled()
		id := "q" + strings.Repeat("0", 2*(idNonce+idTag))
		wait.For(t, 5*time.Minute, "the questions' records and runs to expire", func() bool {
			counts, _ := keyCounts(ctx, t, r)
			return counts[keyPattern(questionKey(id))] == 0 && counts[keyPattern(rdb.RunIndexKey(id))] == 0 &&
				r.cl.Redis.ZCard(ctx, rdb.RunsKey).Val() == 0
		})
	}
	r.cancels(0, 50) // warm: datasets, pools, connections
	over()
	type snapshot struct {
		goroutines, consumers, persistent int
		messages                          uint64
		heap, rss                         int64
		keys                              map[string]int
		zsets                             map[string]int64
	}
	snap := func(want int) snapshot {
		sn := snapshot{goroutines: r.goroutines(want), consumers: len(r.consumers()), messages: r.questionMessages(), zsets: map[string]int64{}}
		sn.heap, sn.rss = liveHeap(), rss(t)
		sn.keys, sn.persistent = keyCounts(ctx, t, r)
		for _, z := range []string{rdb.RunsKey, rdb.RoundsKey, rdb.SettleKey, rdb.PendingKey} {
			sn.zsets[z] = r.cl.Redis.ZCard(ctx, z).Val()
		}
		return sn
	}
	before := snap(-1)
	start := time.Now()
	r.cancels(100, n)
	r.idle()
	cycled := time.Since(start) //clock:ok logged, not asserted (a soak: make slow, QUORUM_SOAK)
	over()
	took := time.Since(start) //clock:ok logged, not asserted
	after := snap(before.goroutines)
	t.Logf("%d questions asked and cancelled in %s (%.0f/s); settled and expired after %s", n, cycled.Round(time.Second),
		float64(n)/cycled.Seconds(), took.Round(time.Second))
	t.Logf("goroutines %d -> %d; coordinator consumers %d -> %d; messages on questions' subjects %d -> %d; keys without expiry %d -> %d",
		before.goroutines, after.goroutines, before.consumers, after.consumers, before.messages, after.messages, before.persistent, after.persistent)
	perQ := float64(after.heap-before.heap) / float64(n)
	t.Logf("live heap after GC: %.1f MiB -> %.1f MiB (%+.0f B/question); RSS %.1f MiB -> %.1f MiB",
		mib(before.heap), mib(after.heap), perQ, mib(before.rss), mib(after.rss))
	t.Logf("sorted sets %v -> %v", before.zsets, after.zsets)
	if perQ > 16<<10 {
		t.Errorf("%d cancels grew the live heap %.0f bytes a question (%.1f MiB -> %.1f MiB)", n, perQ, mib(before.heap), mib(after.heap))
	}
	t.Logf("keys by pattern %v -> %v", before.keys, after.keys)
	if after.goroutines > before.goroutines+goroutineSlack {
		t.Errorf("%d cancels left %d goroutines more", n, after.goroutines-before.goroutines)
	}
	if after.consumers != before.consumers {
		t.Errorf("%d cancels left %d coordinator consumers more", n, after.consumers-before.consumers)
	}
	if after.messages != before.messages {
		t.Errorf("%d cancels left %d messages on the questions' subjects", n, int64(after.messages)-int64(before.messages))
	}
	if after.persistent != before.persistent {
		t.Errorf("%d cancels left %d keys without an expiry", n, after.persistent-before.persistent)
	}
	for z, c := range after.zsets {
		if c != before.zsets[z] {
			t.Errorf("%d cancels grew %s from %d to %d members", n, z, before.zsets[z], c)
		}
	}
	for _, g := range grown(before.keys, after.keys) {
		if !strings.HasPrefix(g, keyPattern(charged)+" ") {
			t.Errorf("%d cancels left keys behind: %s", n, g)
		}
	}
}
