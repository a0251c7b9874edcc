package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/runtime/cluster"
)

// TestAnswerCacheIsPerTenant: tenant a's answer, once cached, answers a's
// equal question from the cache, and never tenant b's: b's same question
// runs (its SQL and rows are its own run's, and b pays for it), then
// answers b's next from b's own cache entry.
func TestAnswerCacheIsPerTenant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, h, _ := cachingServer(ctx, t)
	body := jsonBody(map[string]string{"db": "shop", "question": "How many customers does the shop have?"})
	// askCached asks as key; its answer is in the cache as soon as it
	// is seen answered (written in the transaction that records it).
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
		if _, ok := s.cached(ctx, &rec.Question); !ok {
			t.Fatalf("question %s is answered and its answer is not in the cache", q.ID)
		}
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
	if qa.Gold == nil || again.Gold == nil || *again.Gold != *qa.Gold {
		t.Errorf("the gold check: %+v asked, %+v from the cache; want one, the same", qa.Gold, again.Gold)
	}
	if bAgain := askAs(t, h, keyB, body); !bAgain.Cached || bAgain.SQL != qb.SQL {
		t.Errorf("tenant b's equal question: cached %v, sql %q; want b's own cached answer %q", bAgain.Cached, bAgain.SQL, qb.SQL)
	}
}

// TestAnswerIsCachedOnceSeen: no reader ever sees a question answered
// while its answer is missing from the cache. A tight loop reads the
// record and the cache entry in one MULTI (one instant of Redis) until
// the question ends; an answer recorded before its cache entry is written
// is caught in that window.
func TestAnswerIsCachedOnceSeen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, h, cl := cachingServer(ctx, t)
	w := request(t, h, http.MethodPost, "/v1/questions", keyA, jsonBody(map[string]string{"db": "shop", "question": "How many customers does the shop have?"}))
	var acc accepted
	if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &acc) != nil {
		t.Fatalf("ask: %d %s, want 202", w.Code, w.Body)
	}
	rec, err := s.store.get(ctx, acc.ID)
	if err != nil {
		t.Fatal(err)
	}
	key := s.cacheKey(&rec.Question)
	for reads := 0; ; reads++ {
		var q, c *redis.StringCmd
		if _, err := cl.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
			q, c = p.Get(ctx, questionKey(acc.ID)), p.Get(ctx, key)
			return nil
		}); err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("after %d reads: %v", reads, err)
		}
		var r record
		if err := json.Unmarshal([]byte(q.Val()), &r); err != nil {
			t.Fatalf("question %s record %q: %v", acc.ID, q.Val(), err)
		}
		if !r.Terminal() {
			continue
		}
		if r.Status != Answered {
			t.Fatalf("question %s: %s %s, want answered", acc.ID, r.Status, r.Error)
		}
		if c.Err() != nil {
			t.Fatalf("read %d saw question %s answered with no cache entry (%v)", reads, acc.ID, c.Err())
		}
		return
	}
}

// cachingServer is serve over a cluster and llmsim with the answer cache
// on, for tenants a and b.
func cachingServer(ctx context.Context, t *testing.T) (*Server, http.Handler, *cluster.Cluster) {
	t.Helper()
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
	return s, runServer(ctx, t, s), cl
}
