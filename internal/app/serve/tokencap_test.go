package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// callLog forwards chat calls to llmsim one at a time, recording in the
// order they end each call's tokens (what the simulator counted while it
// served it alone) and how many calls had ended when it arrived: which
// calls were in flight when an earlier one ended.
type callLog struct {
	sim   *llmsim.Server
	serve sync.Mutex // one call at a time: its tokens are the simulator's difference
	mu    sync.Mutex
	ended []loggedCall
}

type loggedCall struct {
	tokens int64
	// endedBefore is how many calls had ended when it arrived.
	endedBefore int
}

func (l *callLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		l.sim.ServeHTTP(w, r)
		return
	}
	l.mu.Lock()
	arrived := len(l.ended)
	l.mu.Unlock()
	l.serve.Lock()
	defer l.serve.Unlock()
	before := l.sim.Stats()
	l.sim.ServeHTTP(w, r)
	after := l.sim.Stats()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = append(l.ended, loggedCall{tokens: after.PromptTokens + after.CompletionTokens - before.PromptTokens - before.CompletionTokens, endedBefore: arrived})
}

// inFlightAtCap finds the call whose end took the served tokens to cap
// (k, in the order calls ended) and returns the tokens of the calls in
// flight then: k and every later call that had arrived before k ended.
// ok is false if the calls never reached cap.
func (l *callLog) inFlightAtCap(cap int64) (k int, inFlight int64, calls []loggedCall, ok bool) {
	l.mu.Lock()
	calls = append([]loggedCall(nil), l.ended...)
	l.mu.Unlock()
	var sum int64
	for i, c := range calls {
		if sum += c.tokens; sum >= cap {
			for _, later := range calls[i:] {
				if later.endedBefore <= i {
					inFlight += later.tokens
				}
			}
			return i, inFlight, calls, true
		}
	}
	return -1, 0, calls, false
}

// TestQuestionStoppedAtItsTokenReservation: a tenant with no history and a
// daily limit well below what one question costs (with one vote the demo
// question makes six calls of about 10,500 tokens each against llmsim)
// asks one question. It reserves the whole limit; its run is stopped once
// its LLM calls reach that reservation (after about three calls), and it
// ends failed, saying so and naming the reservation and the limit. The
// tenant is charged what the LLM served it: its reservation plus at most
// the tokens of the calls in flight when the reservation was reached (one
// call with one vote), not the question's whole cost.
func TestQuestionStoppedAtItsTokenReservation(t *testing.T) {
	const limit = 25000
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, sim := demoSim(t)
	calls := &callLog{sim: sim}
	cl := startCluster(ctx, t, calls, 4, 2)
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA), "test")
	if err != nil {
		t.Fatal(err)
	}
	tenants.Limits["a"] = Limits{TokensPerDay: limit}
	s, err := New(Config{Env: cl.Env, Redis: cl.Redis, Dataset: openAPIDemo, Votes: 1, StateDir: t.TempDir(), RoundTimeout: time.Minute,
		Tenants: tenants, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	settled := make(chan string, 1)
	s.onSettle = func(id string) { settled <- id }
	h := runServer(ctx, t, s)

	w := request(t, h, "POST", "/v1/questions", keyA, `{"db":"shop","question":"How many customers does the shop have?","votes":1}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("ask: %d %s", w.Code, w.Body)
	}
	var acc accepted
	if err := json.Unmarshal(w.Body.Bytes(), &acc); err != nil {
		t.Fatal(err)
	}
	var q Question
	wait.For(t, 80*time.Second, "the question to end", func() bool {
		w := request(t, h, "GET", "/v1/questions/"+acc.ID, keyA, "")
		return json.Unmarshal(w.Body.Bytes(), &q) == nil && q.Terminal()
	})
	if q.Status == Answered {
		if q.Cost.Tokens() < limit {
			t.Fatalf("the question was answered, costing %d tokens: under the limit of %d, so this test cannot show it stopped; lower the limit", q.Cost.Tokens(), limit)
		}
		t.Fatalf("the question was answered, costing %d tokens: not stopped at its reservation of %d", q.Cost.Tokens(), limit)
	}
	if q.Status != Failed || !strings.Contains(q.Error, fmt.Sprintf("the %d tokens reserved for it", limit)) ||
		!strings.Contains(q.Error, fmt.Sprintf("daily limit of %d tokens", limit)) {
		t.Fatalf("the question ended %s (%q); want failed, naming its reservation of %d tokens and the daily limit", q.Status, q.Error, limit)
	}
	select {
	case id := <-settled:
		if id != acc.ID {
			t.Fatalf("settled %s, want %s", id, acc.ID)
		}
	case <-ctx.Done():
		t.Fatal("the stopped question's tasks never all stopped")
	}

	charged, err := cl.Redis.Get(ctx, tokensKey("a", time.Now())).Int64()
	if err != nil {
		t.Fatal(err)
	}
	st := sim.Stats()
	served := st.PromptTokens + st.CompletionTokens
	k, inFlight, log, ok := calls.inFlightAtCap(limit)
	if !ok {
		t.Fatalf("the LLM served %d tokens in %d calls, under the reservation of %d: the question was stopped before its reservation", served, len(log), limit)
	}
	// The bound: what the tenant pays beyond its reservation is what
	// the calls in flight when it was reached cost.
	if charged < limit || charged-limit > inFlight || charged > served {
		t.Errorf("tenant charged %d tokens against a reservation of %d (the LLM served %d in %d calls, %v); want at least the reservation, at most what was served, and over the reservation by at most the %d tokens of the calls in flight when it was reached (call %d and those that had started before it ended)",
			charged, limit, served, len(log), log, inFlight, k)
	}
	for i, c := range log[k+1:] {
		if c.endedBefore > k {
			t.Errorf("call %d started after call %d, which reached the reservation, had ended: %v", k+1+i, k, log)
		}
	}
	rec, err := s.store.get(ctx, acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if int64(rec.Cost.Tokens()) != charged {
		t.Errorf("the question reads %d tokens, %d charged", rec.Cost.Tokens(), charged)
	}
	// The run's count and its stop mark expire with the run's other keys.
	for _, k := range []string{rdb.RunTokensKey(acc.ID), rdb.CancelledKey(acc.ID)} {
		if ttl, err := cl.Redis.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
			t.Errorf("%s expires in %v (%v), want the stopped run's retention", k, ttl, err)
		}
	}
	t.Logf("reservation %d: stopped after %d LLM calls (%v), %d tokens served, %d charged; %q", limit, len(log), log, served, charged, q.Error)

	// The day is spent: the next question is refused until midnight.
	if w := request(t, h, "POST", "/v1/questions", keyA, `{"db":"shop","question":"How many orders are there?","votes":1}`); w.Code != http.StatusTooManyRequests {
		t.Errorf("a question after the day's limit was used: %d %s, want 429", w.Code, w.Body)
	}
}
