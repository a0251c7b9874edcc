package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// TestTokenLimitReservedBeforeTheQuestionRuns: a tenant limited to 1,000
// tokens a day with no history, asking three questions at once, has one
// admitted (it reserves the whole limit) and two refused with 429, a
// Retry-After and the limit named; once that question is charged (more
// than the limit) the next is refused until midnight. What the LLM served
// the tenant is that one question's cost: the limit plus at most one
// question's overrun.
func TestTokenLimitReservedBeforeTheQuestionRuns(t *testing.T) {
	const limit = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, sim := demoSim(t)
	cl := startCluster(ctx, t, sim, 4, 2)
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA), "test")
	if err != nil {
		t.Fatal(err)
	}
	tenants.Limits["a"] = Limits{TokensPerDay: limit}
	s, err := New(Config{Env: cl.Env, Redis: cl.Redis, Dataset: openAPIDemo, Votes: 2, StateDir: t.TempDir(), RoundTimeout: time.Minute,
		Tenants: tenants, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := runServer(ctx, t, s)
	ask := func() *httptest.ResponseRecorder {
		return request(t, h, "POST", "/v1/questions", keyA, `{"db":"shop","question":"How many customers does the shop have?"}`)
	}

	const asks = 3
	answers := make([]*httptest.ResponseRecorder, asks)
	var wg sync.WaitGroup
	for i := range asks {
		wg.Go(func() { answers[i] = ask() })
	}
	wg.Wait()
	var admitted []string
	for _, w := range answers {
		switch w.Code {
		case http.StatusAccepted:
			var acc accepted
			_ = json.Unmarshal(w.Body.Bytes(), &acc)
			admitted = append(admitted, acc.ID)
		case http.StatusTooManyRequests:
			if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" || !strings.Contains(w.Body.String(), "daily limit of 1000 tokens") {
				t.Errorf("refused while the first runs: Retry-After %q, %s; want a wait and the limit named", ra, w.Body)
			}
		default:
			t.Errorf("ask: %d %s", w.Code, w.Body)
		}
	}
	if len(admitted) != 1 {
		t.Fatalf("%d of %d questions asked at once were admitted under a limit of %d tokens with no history: want 1 (it reserves the whole limit)", len(admitted), asks, limit)
	}
	var q Question
	wait.For(t, 80*time.Second, "the admitted question to end and be charged", func() bool {
		w := request(t, h, "GET", "/v1/questions/"+admitted[0], keyA, "")
		n, _ := cl.Redis.Get(ctx, tokensKey("a", time.Now())).Int64()
		return json.Unmarshal(w.Body.Bytes(), &q) == nil && q.Terminal() && n > 0
	})
	cost := int64(q.Cost.Tokens())
	if cost < limit {
		t.Fatalf("the question cost %d tokens: under the limit of %d, so this test cannot show a refusal after it", cost, limit)
	}
	w := ask()
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "has used") || !strings.Contains(w.Body.String(), "daily limit of 1000 tokens") {
		t.Errorf("after the limit was used: %d %s, want 429 naming the tokens used and the limit", w.Code, w.Body)
	}
	if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("after the limit was used: Retry-After %q, want the seconds until midnight UTC", ra)
	}
	st := sim.Stats()
	served := int64(st.PromptTokens + st.CompletionTokens)
	charged, _ := cl.Redis.Get(ctx, tokensKey("a", time.Now())).Int64()
	if served > limit+(cost-limit) || charged != served {
		t.Errorf("the LLM served %d tokens, %d charged; want at most the limit plus one question's overrun, %d + %d", served, charged, limit, cost-limit)
	}
	t.Logf("limit %d: one question admitted, costing %d; served %d, charged %d", limit, cost, served, charged)
}

// TestTokenReservation: what a question reserves, or why it is refused,
// from the tenant's ledger.
func TestTokenReservation(t *testing.T) {
	const limit = 1000
	cases := []struct {
		name     string
		v        rdb.TokenLedger
		asks     bool
		want     int64
		refused  bool
		midnight bool // the refusal lasts the day (else: until a question ends)
	}{
		{"no history: the rest of the limit", rdb.TokenLedger{Charged: 100}, true, 900, false, false},
		{"no history, one running: no room", rdb.TokenLedger{Charged: 100, Held: 900, Holds: 1}, true, 0, true, false},
		{"the day's mean", rdb.TokenLedger{Charged: 300, Questions: 2}, true, 150, false, false},
		{"yesterday's mean", rdb.TokenLedger{PrevCharged: 500, PrevQuestions: 2}, true, 250, false, false},
		{"the mean rounded up", rdb.TokenLedger{Charged: 301, Questions: 2}, true, 151, false, false},
		{"held by the running ones", rdb.TokenLedger{Charged: 300, Questions: 2, Held: 600, Holds: 4}, true, 0, true, false},
		{"one more at the mean passes it", rdb.TokenLedger{Charged: 800, Questions: 2}, true, 0, true, true},
		{"the day is spent", rdb.TokenLedger{Charged: 1000, Questions: 1}, true, 0, true, true},
		{"a rerun within the day", rdb.TokenLedger{Charged: 999, Questions: 1, Held: 500}, false, 0, false, false},
		{"a rerun once the day is spent", rdb.TokenLedger{Charged: 1200}, false, 0, true, true},
	}
	for _, tc := range cases {
		got, err := tokenReservation("a", limit, tc.v, tc.asks)
		var over *overTokens
		refused := errors.As(err, &over)
		if got != tc.want || refused != tc.refused || refused && over.busy == tc.midnight {
			t.Errorf("%s: reserved %d, refused %v (%v); want %d, refused %v (until midnight %v)", tc.name, got, refused, err, tc.want, tc.refused, tc.midnight)
		}
	}
}

// TestTokenReservationsAreReconciled: the ledger through a day: an
// admission reserves, a stored question takes the reservation over, its
// charge releases it in the same transaction; a cancelled question holds
// what it reserved beyond what it was charged.
func TestTokenReservationsAreReconciled(t *testing.T) {
	const limit = 1000
	s, c := feedbackServer(t, func(cfg *Config) { cfg.Tenants.Limits["a"] = Limits{TokensPerDay: limit} })
	ctx := context.Background()
	l := s.cfg.Tenants.LimitsOf("a")
	var holds []string // the admissions' reservations, oldest first
	admit := func(asks bool) error {
		hold, wait, err := s.quota.admit(ctx, "a", l, asks)
		if wait > 0 {
			t.Fatalf("admission waits %v: no per-minute quota is set", wait)
		}
		if hold != "" {
			holds = append(holds, hold)
		}
		return err
	}
	holdTokens := func(q *Question) {
		t.Helper()
		if err := s.holdTokens(ctx, q, holds[0]); err != nil {
			t.Fatalf("moving question %s's reservation to it: %v", q.ID, err)
		}
		holds = holds[1:]
	}
	ledger := func() map[string]string {
		m, err := c.HGetAll(ctx, rdb.ReservedKey("a")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	held := func() (sum int64) {
		for _, v := range ledger() {
			var tokens, charged, expires int64
			if _, err := fmt.Sscan(v, &tokens, &charged, &expires); err != nil {
				t.Fatalf("ledger value %q: %v", v, err)
			}
			sum += max(0, tokens-charged)
		}
		return sum
	}
	store := func(status string) *Question {
		q := storeAnswered(t, s, "a", "How many customers?", "SELECT 1")
		q.Status = status
		if err := s.store.put(ctx, q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	refusedFor := func(err error) time.Duration {
		var over *overTokens
		if !errors.As(err, &over) {
			t.Fatalf("admitted (%v), want refused", err)
		}
		return over.wait
	}

	// No history: the first reserves the whole limit and runs alone.
	if err := admit(true); err != nil || held() != limit {
		t.Fatalf("first question: %v, %d held; want admitted holding %d", err, held(), limit)
	}
	if w := refusedFor(admit(true)); w != reserveRetry {
		t.Errorf("second question while the first runs: refused for %v, want %v", w, reserveRetry)
	}
	if err := admit(false); err != nil || held() != limit {
		t.Errorf("a rerun: %v, %d held; want admitted, reserving nothing", err, held())
	}
	q1 := store(Running)
	holdTokens(q1)
	if m := ledger(); len(m) != 1 || m["q:"+q1.ID] == "" {
		t.Fatalf("after the question is stored the ledger is %v; want its reservation under q:%s", m, q1.ID)
	}
	q1.Status = Answered
	if err := s.store.put(ctx, q1); err != nil {
		t.Fatal(err)
	}
	s.quota.spend(ctx, "a", 300, 0)
	if n, _ := c.Get(ctx, tokensKey("a", time.Now())).Int64(); n != 300 || held() != 0 {
		t.Fatalf("after its charge: %d tokens charged, %d held; want 300, 0", n, held())
	}

	// The mean (300) now: two fit beside the 300 charged, a third does not.
	for i := range 2 {
		if err := admit(true); err != nil {
			t.Fatalf("question %d at the mean: %v", i+2, err)
		}
	}
	if w := refusedFor(admit(true)); w != reserveRetry || held() != 600 {
		t.Errorf("a third at the mean: refused for %v with %d held; want %v, 600", w, held(), reserveRetry)
	}
	q2, q3 := store(Running), store(Running)
	holdTokens(q2)
	holdTokens(q3)

	// q2 is cancelled having cost 100: it holds the 200 it may still cost.
	q2.Status = Cancelled
	if err := s.store.put(ctx, q2); err != nil {
		t.Fatal(err)
	}
	if err := s.charge(ctx, "a", q2.ID, Cost{PromptTokens: 100}); err != nil {
		t.Fatal(err)
	}
	if got := held(); got != 500 {
		t.Errorf("after q2's cancel (100 charged of 300 reserved), beside q3's 300: %d held, want 500", got)
	}
	// q3 ends costing 300: 700 charged, 2 questions counted (mean 350):
	// one more would pass the limit, for the rest of the day.
	q3.Status = Answered
	if err := s.store.put(ctx, q3); err != nil {
		t.Fatal(err)
	}
	s.quota.spend(ctx, "a", 300, 0)
	err := admit(true)
	if w := refusedFor(err); w == reserveRetry || !strings.Contains(err.Error(), "350 each on average") {
		t.Errorf("after 700 charged at a mean of 350: %v (for %v); want refused until midnight, naming the mean", err, w)
	}
	if got := held(); got != 200 {
		t.Errorf("held at the end: %d, want q2's 200", got)
	}
}

// TestLapsedReservationReservesAgain: a question stored after its
// admission's reservation lapsed (storing took longer than
// rdb.PendingHoldTTL) reserves again as admission would, so it still runs
// capped; when the tenant's tokens are taken by then, it is refused and
// holds nothing.
func TestLapsedReservationReservesAgain(t *testing.T) {
	const limit = 1000
	s, c := feedbackServer(t, func(cfg *Config) { cfg.Tenants.Limits["a"] = Limits{TokensPerDay: limit} })
	ctx := context.Background()
	hold, wait, err := s.quota.admit(ctx, "a", s.cfg.Tenants.LimitsOf("a"), true)
	if err != nil || wait > 0 || hold == "" {
		t.Fatalf("admission: %q, %v, %v; want a reservation", hold, wait, err)
	}
	// Lapsed: its expiry (Redis's clock, ms) is long past.
	if err := c.HSet(ctx, rdb.ReservedKey("a"), hold, fmt.Sprintf("%d 0 1", limit)).Err(); err != nil {
		t.Fatal(err)
	}
	q1 := storeAnswered(t, s, "a", "How many customers?", "SELECT 1")
	q1.Status = Running
	if err := s.store.put(ctx, q1); err != nil {
		t.Fatal(err)
	}
	if err := s.holdTokens(ctx, q1, hold); err != nil {
		t.Fatalf("a question whose reservation lapsed, the tenant's tokens free: %v, want it reserved again", err)
	}
	if cap, err := s.tokenCap(ctx, q1); err != nil || cap != limit {
		t.Errorf("its cap: %d (%v), want %d reserved again (no history: the whole limit), not 0 (uncapped)", cap, err, limit)
	}

	q2 := storeAnswered(t, s, "a", "How many orders?", "SELECT 2")
	q2.Status = Running
	if err := s.store.put(ctx, q2); err != nil {
		t.Fatal(err)
	}
	err = s.holdTokens(ctx, q2, "p:lapsed")
	var over *overTokens
	if !errors.As(err, &over) || !strings.Contains(err.Error(), "daily limit of 1000 tokens") {
		t.Errorf("a lapsed question while another holds the whole limit: %v, want refused naming the limit", err)
	}
	if n, err := rdb.QuestionTokenHold(ctx, c, "a", q2.ID); err != nil || n != 0 {
		t.Errorf("the refused question holds %d tokens (%v), want none", n, err)
	}
	if m := c.HGetAll(ctx, rdb.ReservedKey("a")).Val(); len(m) != 1 {
		t.Errorf("ledger %v, want only q:%s", m, q1.ID)
	}
}

// TestRefusedRequestReleasesItsReservation: a request admitted and then
// refused (a bad body) gives its reservation back at once, rather than
// holding the tenant's tokens until it lapses; with no history the
// reservation is the whole limit, so the tenant's next question would
// otherwise be refused for a minute.
func TestRefusedRequestReleasesItsReservation(t *testing.T) {
	s, c := feedbackServer(t, func(cfg *Config) { cfg.Tenants.Limits["a"] = Limits{TokensPerDay: 1000} })
	h := s.Handler()
	for _, body := range []string{`{"db":"shop"}`, `{"db":"nowhere","question":"How many?"}`, `not json`} {
		if w := request(t, h, "POST", "/v1/questions", keyA, body); w.Code != http.StatusBadRequest {
			t.Fatalf("POST %s: %d %s, want 400", body, w.Code, w.Body)
		}
		if m := c.HGetAll(context.Background(), rdb.ReservedKey("a")).Val(); len(m) != 0 {
			t.Errorf("after POST %s was refused the ledger holds %v, want nothing", body, m)
		}
	}
}
