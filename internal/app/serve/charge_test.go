package serve

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// gate forwards chat calls to llmsim until the first has been answered,
// then holds every later one until its client gives up: what llmsim
// served is then exactly what the question's tasks received, and no call
// is cut half-way (a cut call's usage would never reach the ledger).
type gate struct {
	sim      http.Handler
	mu       sync.Mutex
	inflight int
	closed   bool
	quiet    chan struct{} // closed once closed and nothing is in flight
	stop     chan struct{} // closed at the end of the test: held calls end
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		g.sim.ServeHTTP(w, r)
		return
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		select { // held until the worker stops the task
		case <-r.Context().Done():
		case <-g.stop:
		}
		return
	}
	g.inflight++
	g.mu.Unlock()
	g.sim.ServeHTTP(w, r)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inflight--
	if !g.closed {
		g.closed = true
	}
	if g.inflight == 0 && g.quiet != nil {
		close(g.quiet)
		g.quiet = nil
	}
}

// TestCancelChargesWhatTheLLMServed: a question asked and cancelled while
// its first tasks run is charged every token the LLM served for it,
// including the calls of tasks still running at the cancel.
func TestCancelChargesWhatTheLLMServed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	_, sim := demoSim(t)
	quiet := make(chan struct{})
	g := &gate{sim: sim, quiet: quiet, stop: make(chan struct{})}
	cl := startCluster(ctx, t, g, 4, 2)
	// Registered after the cluster's cleanup, so it runs first: held
	// calls return before the cluster stops.
	t.Cleanup(func() { close(g.stop) })
	rdb := cl.Redis
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA), "test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Env: cl.Env, Redis: rdb, Dataset: openAPIDemo, Votes: 4, StateDir: t.TempDir(), RoundTimeout: time.Minute,
		Tenants: tenants, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan string, 1)
	s.onSettle = func(id string) { settled <- id }
	h := runServer(ctx, t, s)

	w := request(t, h, "POST", "/v1/questions", keyA, `{"db":"shop","question":"How many customers does the shop have?"}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("ask: %d %s", w.Code, w.Body)
	}
	id := strings.Split(strings.Split(w.Body.String(), `"id":"`)[1], `"`)[0]
	select { // the first calls answered, the next ones held
	case <-quiet:
	case <-ctx.Done():
		t.Fatal("no LLM call was answered")
	}
	if w := request(t, h, "DELETE", "/v1/questions/"+id, keyA, ""); w.Code != http.StatusOK {
		t.Fatalf("cancel: %d %s", w.Code, w.Body)
	}
	select {
	case got := <-settled:
		if got != id {
			t.Fatalf("settled %s, want %s", got, id)
		}
	case <-ctx.Done():
		rec, _ := s.store.get(context.Background(), id)
		tasks, _ := cl.Env.State.Tasks(context.Background(), id, rec.Example, rec.Agent)
		for _, tk := range tasks {
			d, _ := cl.Env.State.Done(context.Background(), id, rec.Example, rec.Agent, tk.Task.ID)
			res, _ := cl.Env.State.Results(context.Background(), id, rec.Example, rec.Agent, tk.Task.Round)
			t.Logf("task %s slots %v done %v; round %d has %d results", tk.Task.ID, tk.Task.Slots, d, tk.Task.Round, len(res))
			for _, r := range res {
				t.Logf("  result %d %s %q cost %+v", r.Index, r.Status, r.Error, r.Cost.Total().LLM)
			}
		}
		t.Fatal("the cancelled question's tasks never all stopped")
	}
	st := sim.Stats()
	served := st.PromptTokens + st.CompletionTokens
	charged, err := rdb.Get(ctx, tokensKey("a", time.Now())).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if served == 0 || charged != int64(served) {
		t.Errorf("tenant charged %d tokens; llmsim served %d in %d requests", charged, served, st.Requests)
	}
	rec, err := s.store.get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != Cancelled || int64(rec.Cost.Tokens()) != charged {
		t.Errorf("the question reads %s costing %d tokens, want cancelled costing the %d charged", rec.Status, rec.Cost.Tokens(), charged)
	}
	t.Logf("cancelled after %d LLM requests: %d tokens served, %d charged", st.Requests, served, charged)
	// The money as the tokens, against --tenant-budget (gpt-4o's built-in
	// price): once, the question counted among the day's.
	spent, n, err := s.quota.spent(ctx, "a")
	if err != nil || rec.Cost.Money <= 0 || math.Abs(spent-rec.Cost.Money) > 1e-6 || n != 1 {
		t.Errorf("tenant charged %.6f over %d questions (%v); the question cost %.6f", spent, n, err, rec.Cost.Money)
	}
	// The run was retired at the cancel, before its running tasks stopped:
	// the keys their late results created expire like the others.
	keys, err := rdb.Keys(ctx, "quorum:run:"+id+":*").Result()
	if err != nil || len(keys) < 5 {
		t.Fatalf("the question run's keys: %v (%v)", keys, err)
	}
	for _, k := range keys {
		if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
			t.Errorf("%s expires in %v (%v): written after the cancel, it never expires", k, ttl, err)
		}
	}
}
