package serve

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// TestAnswerCacheIsPerTenant: tenant a's answer, once cached, answers a's
// equal question from the cache, and never tenant b's: b's same question
// runs (its SQL and rows are its own run's, and b pays for it), then
// answers b's next from b's own cache entry.
func TestAnswerCacheIsPerTenant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, sim := demoSim(t)
	cl := startCluster(ctx, t, sim, 4, 2)
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA+"\nb:"+keyB), "test")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Env: cl.Env, Redis: cl.Redis, Dataset: openAPIDemo, Votes: 1, StateDir: t.TempDir(), RoundTimeout: time.Minute,
		Tenants: tenants, CacheTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := runServer(ctx, t, s)
	body := jsonBody(map[string]string{"db": "shop", "question": "How many customers does the shop have?"})
	// askCached asks as key and waits until its answer is in the cache
	// (written just after the question ends).
	askCached := func(key string) *Question {
		t.Helper()
		q := askAs(t, h, key, body)
		if q.Status != Answered {
			t.Fatalf("question %s: %s %s, want answered", q.ID, q.Status, q.Error)
		}
		rec, err := s.store.get(ctx, q.ID)
		if err != nil {
			t.Fatal(err)
		}
		wait.For(t, time.Minute, "the answer of "+q.ID+" cached", func() bool {
			_, ok := s.cached(ctx, &rec.Question)
			return ok
		})
		return q
	}

	qa := askCached(keyA)
	if qa.Cached {
		t.Fatalf("tenant a's first question came from the cache")
	}
	qb := askCached(keyB)
	if qb.Cached {
		t.Errorf("tenant b's question was answered from tenant a's cached answer (sql %q)", qb.SQL)
	}
	if qb.Cost.LLMCalls == 0 {
		t.Errorf("tenant b's question made no LLM call: it did not run")
	}
	again := askAs(t, h, keyA, body)
	if !again.Cached || again.SQL != qa.SQL {
		t.Errorf("tenant a's equal question: cached %v, sql %q; want a's cached answer %q", again.Cached, again.SQL, qa.SQL)
	}
	if bAgain := askAs(t, h, keyB, body); !bAgain.Cached || bAgain.SQL != qb.SQL {
		t.Errorf("tenant b's equal question: cached %v, sql %q; want b's own cached answer %q", bAgain.Cached, bAgain.SQL, qb.SQL)
	}
}
