package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/agents"
)

// askAs asks as the tenant of key and waits for the question to end.
func askAs(t *testing.T, h http.Handler, key, body string) *Question {
	t.Helper()
	w := request(t, h, http.MethodPost, "/v1/questions", key, body)
	var acc accepted
	if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &acc) != nil {
		t.Fatalf("ask %s: %d %s, want 202", body, w.Code, w.Body)
	}
	var q Question
	wait.For(t, 60*time.Second, "question "+acc.ID+" to end", func() bool {
		w := request(t, h, http.MethodGet, "/v1/questions/"+acc.ID, key, "")
		return json.Unmarshal(w.Body.Bytes(), &q) == nil && q.Terminal()
	})
	return &q
}

// prompts joins the messages of LLM request bodies.
func prompts(reqs []string) string {
	var b strings.Builder
	for _, body := range reqs {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if json.Unmarshal([]byte(body), &req) == nil {
			for _, m := range req.Messages {
				b.WriteString(m.Content)
				b.WriteByte('\n')
			}
		}
	}
	return b.String()
}

// TestFeedbackStaysWithItsTenant: tenant A's corrected SQL (a "down" with
// sql) reaches A's later similar question, and nothing of it reaches
// tenant B asking a similar one: not its examples, not its prompts, not
// its history nor its question's page.
func TestFeedbackStaysWithItsTenant(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := newConvRig(ctx, t)
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA+"\nb:"+keyB), "test")
	if err != nil {
		t.Fatal(err)
	}
	h := r.cl(Config{Tenants: tenants, VerifiedExamples: true, CacheTTL: -1})
	const asked = "How many customers does the shop have?"
	const similar = "How many customers in Germany does the shop have?"
	const secret = "SELECT COUNT(*) AS secret_of_tenant_a FROM customers"
	qa := askAs(t, h, keyA, jsonBody(map[string]string{"db": "shop", "question": asked}))
	if qa.Status != Answered {
		t.Fatalf("tenant a's question: %s %s", qa.Status, qa.Error)
	}
	if w := request(t, h, http.MethodPost, "/v1/questions/"+qa.ID+"/feedback", keyA, jsonBody(map[string]string{"verdict": "down", "sql": secret})); w.Code != http.StatusOK {
		t.Fatalf("tenant a's correction: %d %s", w.Code, w.Body)
	}

	_, before := r.rec.since(0)
	qb := askAs(t, h, keyB, jsonBody(map[string]string{"db": "shop", "question": similar}))
	reqs, _ := r.rec.since(before)
	leaks := []string{"secret_of_tenant_a", qa.ID, "Verified example"}
	seen := map[string]string{
		"tenant b's examples":                    jsonBody(qb.Examples),
		"tenant b's prompts":                     prompts(reqs),
		"tenant b's question":                    request(t, h, http.MethodGet, "/v1/questions/"+qb.ID, keyB, "").Body.String(),
		"tenant b's history (GET /v1/questions)": request(t, h, http.MethodGet, "/v1/questions", keyB, "").Body.String(),
	}
	if len(reqs) == 0 {
		t.Fatalf("tenant b's question made no LLM request: its prompts cannot be checked")
	}
	for where, text := range seen {
		for _, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s holds %q from tenant a's feedback", where, leak)
			}
		}
	}
	if w := request(t, h, http.MethodGet, "/v1/questions/"+qa.ID, keyB, ""); w.Code != http.StatusNotFound {
		t.Errorf("tenant b reading tenant a's question: %d, want 404", w.Code)
	}

	// The correction keeps its meaning for tenant a's own questions.
	w := request(t, h, http.MethodPost, "/v1/questions", keyA, jsonBody(map[string]string{"db": "shop", "question": similar}))
	var acc accepted
	if w.Code != http.StatusAccepted || json.Unmarshal(w.Body.Bytes(), &acc) != nil {
		t.Fatalf("tenant a's similar question: %d %s", w.Code, w.Body)
	}
	var qa2 Question
	if err := json.Unmarshal(request(t, h, http.MethodGet, "/v1/questions/"+acc.ID, keyA, "").Body.Bytes(), &qa2); err != nil {
		t.Fatal(err)
	}
	if len(qa2.Examples) != 1 || qa2.Examples[0].SQL != secret || qa2.Examples[0].From != qa.ID {
		t.Errorf("tenant a's similar question is offered %+v; want its own correction (%q from %s)", qa2.Examples, secret, qa.ID)
	}
	request(t, h, http.MethodDelete, "/v1/questions/"+acc.ID, keyA, "")
}

// feedbackServer is a Server over a real redis-server with tenants a and
// b, set up by with.
func feedbackServer(t *testing.T, with func(*Config)) (*Server, redis.UniversalClient) {
	t.Helper()
	c := redistest.Start(t).Client(t)
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA+"\nb:"+keyB), "test")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Env: &runenv.Env{Agents: agents.Builtin(), State: runstate.New(c)}, Redis: c, Dataset: openAPIDemo,
		StateDir: t.TempDir(), Tenants: tenants}
	if with != nil {
		with(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// storeAnswered stores an answered question of tenant's and returns it.
func storeAnswered(t *testing.T, s *Server, tenant, question, sql string) *Question {
	t.Helper()
	ctx := context.Background()
	id, err := s.ids.mint(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	q := &Question{ID: id, Status: Answered, Tenant: tenant, DB: "shop", Dialect: "sqlite", Question: question, SQL: sql, Agent: "reforce",
		Votes: 1, Example: "qx", Created: time.Now().UTC(), Finished: time.Now().UTC()}
	if err := s.store.put(ctx, q); err != nil {
		t.Fatal(err)
	}
	return q
}

// TestFeedbackSQLPassesTheGuard: a corrected SQL the read-only guard
// refuses is answered 400 naming the field, and leaves neither feedback
// nor a verified pair; one it admits is stored.
func TestFeedbackSQLPassesTheGuard(t *testing.T) {
	s, c := feedbackServer(t, nil)
	h := s.Handler()
	ctx := context.Background()
	cases := []struct {
		sql  string
		want int
	}{
		{"DROP TABLE x", http.StatusBadRequest},
		{"SELECT 1; DELETE FROM t", http.StatusBadRequest},
		{"DELETE FROM customers", http.StatusBadRequest},
		{"SELECT COUNT(*) FROM customers", http.StatusOK},
	}
	for i, tc := range cases {
		q := storeAnswered(t, s, "a", fmt.Sprintf("How many customers are there, take %d?", i), "SELECT 1")
		w := request(t, h, http.MethodPost, "/v1/questions/"+q.ID+"/feedback", keyA, jsonBody(map[string]string{"verdict": "down", "sql": tc.sql}))
		var e apiError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != tc.want || tc.want == http.StatusBadRequest && e.Field != "sql" {
			t.Errorf("feedback with sql %q: %d %s; want %d (naming the field sql when refused)", tc.sql, w.Code, w.Body, tc.want)
		}
		var after Question
		_ = json.Unmarshal(request(t, h, http.MethodGet, "/v1/questions/"+q.ID, keyA, "").Body.Bytes(), &after)
		if stored := after.Feedback != nil; stored != (tc.want == http.StatusOK) {
			t.Errorf("feedback with sql %q: feedback stored %v, want %v", tc.sql, stored, tc.want == http.StatusOK)
		}
	}
	keys, err := c.Keys(ctx, "quorum:serve:verified:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var pairs []string
	for _, k := range keys {
		if typ, _ := c.Type(ctx, k).Result(); typ == "hash" {
			vals, _ := c.HVals(ctx, k).Result()
			pairs = append(pairs, vals...)
		}
	}
	if len(pairs) != 1 || !strings.Contains(pairs[0], "SELECT COUNT(*) FROM customers") {
		t.Errorf("verified pairs stored: %q; want only the admitted SQL's", pairs)
	}
}

// TestVerifiedPairsAreCappedAndExpire: a tenant's pairs on a database are
// kept at most verifiedCap, the oldest evicted first; both keys expire
// VerifiedTTL after the newest; a pair verified longer ago than that is
// neither offered nor kept.
func TestVerifiedPairsAreCappedAndExpire(t *testing.T) {
	const ttl = time.Hour
	s, c := feedbackServer(t, func(cfg *Config) { cfg.VerifiedExamples, cfg.VerifiedTTL = true, ttl })
	h := s.Handler()
	ctx := context.Background()
	pairs, index := rdb.VerifiedKey("a", "shop", "sqlite"), rdb.VerifiedIndexKey("a", "shop", "sqlite")
	question := func(i int) string { return fmt.Sprintf("How many orders did customer number %d place?", i) }
	for i := range verifiedCap + 1 {
		q := storeAnswered(t, s, "a", question(i), fmt.Sprintf("SELECT COUNT(*) FROM orders WHERE customer_id = %d", i))
		if w := request(t, h, http.MethodPost, "/v1/questions/"+q.ID+"/feedback", keyA, `{"verdict":"up"}`); w.Code != http.StatusOK {
			t.Fatalf("feedback %d: %d %s", i, w.Code, w.Body)
		}
	}
	n, _ := c.HLen(ctx, pairs).Result()
	m, _ := c.ZCard(ctx, index).Result()
	if n != verifiedCap || m != verifiedCap {
		t.Errorf("after %d pairs: %d pairs, %d indexed; want the cap, %d", verifiedCap+1, n, m, verifiedCap)
	}
	if ok, _ := c.HExists(ctx, pairs, normalize(question(0))).Result(); ok {
		t.Errorf("the oldest pair (%q) was kept past the cap", question(0))
	}
	if ok, _ := c.HExists(ctx, pairs, normalize(question(verifiedCap))).Result(); !ok {
		t.Errorf("the newest pair (%q) was not kept", question(verifiedCap))
	}
	for _, k := range []string{pairs, index} {
		if d, err := c.PTTL(ctx, k).Result(); err != nil || d <= 0 || d > ttl {
			t.Errorf("%s expires in %v (%v); want within VerifiedTTL, %v", k, d, err, ttl)
		}
	}

	// A pair verified before the TTL is not offered, and the next write
	// drops it.
	old := normalize(question(1))
	c.ZAdd(ctx, index, redis.Z{Score: float64(time.Now().Add(-2 * ttl).UnixMilli()), Member: old})
	db, _ := s.database("shop", "sqlite")
	got, err := s.verifiedFor(ctx, "a", db, question(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if normalize(p.Question) == old {
			t.Errorf("a pair verified %v ago was offered (TTL %v)", 2*ttl, ttl)
		}
	}
	q := storeAnswered(t, s, "a", "How many orders are there in all?", "SELECT COUNT(*) FROM orders")
	request(t, h, http.MethodPost, "/v1/questions/"+q.ID+"/feedback", keyA, `{"verdict":"up"}`)
	if ok, _ := c.HExists(ctx, pairs, old).Result(); ok {
		t.Errorf("a pair verified %v ago was kept after the next write (TTL %v)", 2*ttl, ttl)
	}
}

// TestSharedVerifiedExamplesByChoice: a tenant's pairs reach another
// tenant only with SharedVerifiedExamples, and then without the question
// id they came from; a tenant cannot withdraw another's pair.
func TestSharedVerifiedExamplesByChoice(t *testing.T) {
	const asked = "How many customers does the shop have?"
	const similar = "How many customers in Germany does the shop have?"
	const sql = "SELECT COUNT(*) FROM customers"
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			s, _ := feedbackServer(t, func(cfg *Config) { cfg.VerifiedExamples, cfg.SharedVerifiedExamples = true, shared })
			h := s.Handler()
			ctx := context.Background()
			qa := storeAnswered(t, s, "a", asked, sql)
			if w := request(t, h, http.MethodPost, "/v1/questions/"+qa.ID+"/feedback", keyA, `{"verdict":"up"}`); w.Code != http.StatusOK {
				t.Fatalf("feedback: %d %s", w.Code, w.Body)
			}
			// b's "down" on its own answer with the same SQL.
			qb := storeAnswered(t, s, "b", asked, sql)
			if w := request(t, h, http.MethodPost, "/v1/questions/"+qb.ID+"/feedback", keyB, `{"verdict":"down"}`); w.Code != http.StatusOK {
				t.Fatalf("b's feedback: %d %s", w.Code, w.Body)
			}
			db, _ := s.database("shop", "sqlite")
			for _, tc := range []struct {
				tenant string
				want   int
				from   string
			}{
				{"a", 1, qa.ID},
				{"b", map[bool]int{false: 0, true: 1}[shared], ""},
			} {
				got, err := s.verifiedFor(ctx, tc.tenant, db, similar)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != tc.want || len(got) == 1 && (got[0].SQL != sql || got[0].From != tc.from) {
					t.Errorf("tenant %s is offered %+v; want %d pair(s) with from %q", tc.tenant, got, tc.want, tc.from)
				}
			}
		})
	}
}
