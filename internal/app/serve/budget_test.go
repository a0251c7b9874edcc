package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// TestTenantBudget: a tenant with a daily budget has its first question
// answered (nothing spent, no mean yet); once its spend (gpt-4o's list
// prices on the simulator's tokens) would pass the budget, its next
// question is refused with 429, a Retry-After until midnight UTC and a
// message naming the spend and the budget; another tenant without one is
// not held back.
func TestTenantBudget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, sim := demoSim(t)
	cl := startCluster(ctx, t, sim, 4, 2)
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA+"\nb:"+keyB), "test")
	if err != nil {
		t.Fatal(err)
	}
	tenants.Limits["a"] = Limits{BudgetPerDay: 0.01}
	s, err := New(Config{Env: cl.Env, Redis: cl.Redis, Dataset: openAPIDemo, Votes: 2, StateDir: t.TempDir(), RoundTimeout: time.Minute,
		Tenants: tenants, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := runServer(ctx, t, s)

	ask := func(key string) *httptest.ResponseRecorder {
		return request(t, h, "POST", "/v1/questions", key, `{"db":"shop","question":"How many customers does the shop have?"}`)
	}
	w := ask(keyA)
	if w.Code != http.StatusAccepted {
		t.Fatalf("first question: %d %s, want 202", w.Code, w.Body)
	}
	var q struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &q); err != nil {
		t.Fatal(err)
	}
	// Its spend is recorded as it ends (the question log, then the day's
	// money): the next question is judged on it.
	wait.For(t, 80*time.Second, "the first question to end and its spend to be recorded", func() bool {
		_, n, err := s.quota.spent(ctx, "a")
		return err == nil && n == 1
	})
	got := request(t, h, "GET", "/v1/questions/"+q.ID, keyA, "")
	var first struct {
		Status string `json:"status"`
		Cost   struct {
			Money float64 `json:"money"`
		} `json:"cost"`
	}
	if err := json.Unmarshal(got.Body.Bytes(), &first); err != nil || first.Cost.Money <= 0.005 {
		t.Fatalf("the first question (%s, %v) cost %v: want more than half the 0.01 budget, so that a second at its mean passes it", first.Status, err, first.Cost.Money)
	}

	w = ask(keyA)
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "daily budget of 0.0100") {
		t.Fatalf("over its budget: %d %s, want 429 naming the budget", w.Code, w.Body)
	}
	if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("over its budget: Retry-After %q, want the seconds until midnight UTC", ra)
	}
	if w := ask(keyB); w.Code != http.StatusAccepted {
		t.Errorf("a tenant without a budget: %d %s, want 202", w.Code, w.Body)
	}
}
