package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

const demoDir = "../../../examples/demo"

// recorder keeps the body of every request the LLM endpoint gets: what
// the agents' prompts said.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	reqs []string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, string(b))
	r.mu.Unlock()
	req.Body = io.NopCloser(bytes.NewReader(b))
	r.next.ServeHTTP(w, req)
}

// since returns the requests after the first n, and how many there are.
func (r *recorder) since(n int) ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqs[n:]...), len(r.reqs)
}

// convRig is an in-process cluster over a recorded llmsim and a serve
// API over it.
type convRig struct {
	rec *recorder
	rdb redis.UniversalClient
	cl  func(cfg Config) http.Handler
}

func newConvRig(ctx context.Context, t *testing.T) *convRig {
	ds, err := dataset.Load(demoDir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1, Noise: llmsim.Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{next: sim}
	cl := startCluster(ctx, t, rec, 4, 2)
	opt, err := redis.ParseURL(cl.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	r := &convRig{rec: rec, rdb: rc}
	r.cl = func(cfg Config) http.Handler {
		cfg.Env, cfg.Redis, cfg.Dataset, cfg.StateDir, cfg.RoundTimeout = cl.Env, rc, demoDir, t.TempDir(), time.Minute
		if cfg.Votes == 0 {
			cfg.Votes = 2
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return runServer(ctx, t, s)
	}
	return r
}

// do sends a request to h and decodes its JSON answer into out.
func do(t *testing.T, h http.Handler, method, path, body string, want int, out any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, rec.Code, strings.TrimSpace(rec.Body.String()), want)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, rec.Body.String())
		}
	}
}

// askAndWait asks and waits for the question to end.
func askAndWait(t *testing.T, h http.Handler, body string) *Question {
	t.Helper()
	var acc accepted
	do(t, h, http.MethodPost, "/v1/questions", body, http.StatusAccepted, &acc)
	var q Question
	wait.For(t, 90*time.Second, "question "+acc.ID+" to end", func() bool {
		do(t, h, http.MethodGet, "/v1/questions/"+acc.ID, "", http.StatusOK, &q)
		return q.Terminal()
	})
	return &q
}

func jsonBody(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestSimulatorSaysItHasNoAnswer: with the simulated LLM, a question not in
// its dataset fails at once as "the simulator has no answer", with no SQL,
// no confidence and no LLM call; a dataset question is answered.
func TestSimulatorSaysItHasNoAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newConvRig(ctx, t)
	h := r.cl(Config{Simulated: true})
	_, before := r.rec.since(0)
	q := askAndWait(t, h, `{"db":"shop","question":"What is the meaning of life?"}`)
	if q.Status != Failed || !q.NoAnswer || !strings.Contains(q.Error, "the simulator has no answer for this question") {
		t.Errorf("unknown question: status %s, no_answer %v, error %q; want failed, no_answer, the simulator's message", q.Status, q.NoAnswer, q.Error)
	}
	if q.SQL != "" || q.Confidence != "" || q.Candidates != 0 {
		t.Errorf("unknown question: sql %q, confidence %q, candidates %d; want none", q.SQL, q.Confidence, q.Candidates)
	}
	if reqs, _ := r.rec.since(before); len(reqs) != 0 {
		t.Errorf("unknown question: %d LLM requests, want none", len(reqs))
	}
	var ex exampleSet
	do(t, h, http.MethodGet, "/v1/databases/shop/examples", "", http.StatusOK, &ex)
	if ex.Source != "dataset" || len(ex.Questions) == 0 {
		t.Fatalf("examples with the simulator: %+v, want the dataset's questions", ex)
	}
	q = askAndWait(t, h, jsonBody(map[string]string{"db": "shop", "question": ex.Questions[0]}))
	if q.Status != Answered || q.NoAnswer || q.Confidence == "" {
		t.Errorf("the dataset's question %q: status %s, no_answer %v, confidence %q, error %q", ex.Questions[0], q.Status, q.NoAnswer, q.Confidence, q.Error)
	}
	// The same question written differently is still answered from the
	// cache, though the simulator would not recognise it.
	// (The answer is cached just after its record says answered: asked
	// before that, the variant is refused at once, costing nothing.)
	variant := "  " + strings.ToLower(strings.TrimSuffix(ex.Questions[0], "?"))
	wait.For(t, 30*time.Second, "the variant answered from the cache", func() bool {
		q = askAndWait(t, h, jsonBody(map[string]string{"db": "shop", "question": variant}))
		return q.Cached
	})
	if q.Status != Answered || !q.Cached || q.NoAnswer {
		t.Errorf("%q: status %s, cached %v, no_answer %v; want the cached answer", variant, q.Status, q.Cached, q.NoAnswer)
	}
}

// TestStandaloneSimulatorSaysItHasNoAnswer: serve over a simulator it
// knows only by its endpoint (a standalone llmsim, over HTTP: serve does
// not know its dataset) runs every question; one the simulator has no
// gold for comes back as the simulator's no-answer, which serve tells as
// "no answer" with no SQL or confidence, while a dataset question is
// answered. The same reply from an endpoint not known to be the simulator
// (a real model) is an ordinary answer: nothing is read into it.
func TestStandaloneSimulatorSaysItHasNoAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newConvRig(ctx, t)
	h := r.cl(Config{SimulatorEndpoint: true, CacheTTL: -1})
	_, before := r.rec.since(0)
	q := askAndWait(t, h, `{"db":"shop","question":"What is the meaning of life?"}`)
	if q.Status != Failed || !q.NoAnswer || !strings.Contains(q.Error, "the simulator has no answer for this question") {
		t.Errorf("unknown question: status %s, no_answer %v, error %q; want failed, no_answer, the simulator's message", q.Status, q.NoAnswer, q.Error)
	}
	if q.SQL != "" || q.Confidence != "" || q.Candidates != 0 || len(q.Rows) != 0 {
		t.Errorf("unknown question: sql %q, confidence %q, candidates %d, rows %v; want none", q.SQL, q.Confidence, q.Candidates, q.Rows)
	}
	if reqs, _ := r.rec.since(before); len(reqs) == 0 || q.Cost.LLMCalls == 0 {
		t.Errorf("unknown question: %d LLM requests, %d calls charged; want the run's (serve cannot know beforehand)", len(reqs), q.Cost.LLMCalls)
	}
	var ex exampleSet
	do(t, h, http.MethodGet, "/v1/databases/shop/examples", "", http.StatusOK, &ex)
	if ex.Source != "schema" {
		t.Errorf("examples over a standalone simulator come from %q, want the schema (its dataset is not known here)", ex.Source)
	}
	known := "How many customers does the shop have?"
	q = askAndWait(t, h, jsonBody(map[string]string{"db": "shop", "question": known}))
	if q.Status != Answered || q.NoAnswer || q.Confidence == "" || q.SQL == "" {
		t.Errorf("the dataset's question %q: status %s, no_answer %v, confidence %q, error %q", known, q.Status, q.NoAnswer, q.Confidence, q.Error)
	}
	real := r.cl(Config{CacheTTL: -1})
	q = askAndWait(t, real, `{"db":"shop","question":"What is the meaning of life?"}`)
	if q.Status != Answered || q.NoAnswer || !llmsim.IsNoAnswer(q.SQL) {
		t.Errorf("an endpoint not known to be the simulator: status %s, no_answer %v, sql %q; want its reply answered as it is", q.Status, q.NoAnswer, q.SQL)
	}
}

// TestFollowUpCarriesTheConversation: a follow-up question's prompts carry
// the earlier question and its SQL; its record names both.
func TestFollowUpCarriesTheConversation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newConvRig(ctx, t)
	h := r.cl(Config{Simulated: true})
	const first = "How many orders came through each sales channel?"
	const second = "How many customers does the shop have?"
	q1 := askAndWait(t, h, jsonBody(map[string]string{"db": "shop", "question": first}))
	if q1.Status != Answered {
		t.Fatalf("first question: %s %s", q1.Status, q1.Error)
	}
	_, before := r.rec.since(0)
	q2 := askAndWait(t, h, jsonBody(map[string]string{"db": "shop", "question": second, "follow_up_of": q1.ID}))
	if q2.Status != Answered || q2.FollowUpOf != q1.ID || len(q2.Turns) != 1 || q2.Turns[0].SQL != q1.SQL {
		t.Fatalf("follow-up: status %s (%s), follow_up_of %q, turns %+v; want answered, %s, one turn with its SQL", q2.Status, q2.Error, q2.FollowUpOf, q2.Turns, q1.ID)
	}
	reqs, _ := r.rec.since(before)
	carried := 0
	for _, body := range reqs {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if json.Unmarshal([]byte(body), &req) != nil {
			continue
		}
		var text strings.Builder
		for _, m := range req.Messages {
			text.WriteString(m.Content)
		}
		s := text.String()
		if strings.Contains(s, second) && strings.Contains(s, "Earlier question 1: "+first) && strings.Contains(s, q1.SQL) {
			carried++
		}
	}
	if carried == 0 {
		t.Fatalf("none of the follow-up's %d LLM requests carries the first question and its SQL (%q)", len(reqs), q1.SQL)
	}
	t.Logf("%d of the follow-up's %d LLM requests carry the first question and its SQL", carried, len(reqs))

	// Another tenant's or an unanswered question cannot be followed up.
	do(t, h, http.MethodPost, "/v1/questions", jsonBody(map[string]string{"db": "shop", "question": second, "follow_up_of": "q" + strings.Repeat("0", 36)}), http.StatusBadRequest, nil)
	var hist struct{ Questions []historyItem }
	do(t, h, http.MethodGet, "/v1/questions", "", http.StatusOK, &hist)
	if len(hist.Questions) < 2 || hist.Questions[0].ID != q2.ID || hist.Questions[1].ID != q1.ID || hist.Questions[0].FollowUpOf != q1.ID {
		t.Errorf("history: %+v; want %s (following up %s), then %s", hist.Questions, q2.ID, q1.ID, q1.ID)
	}
}

// TestVerifiedPairReachesASimilarQuestion: a thumbs-up makes the answer's
// question and SQL a verified pair; a later similar question on the
// database gets it in its prompt, its record and its run's manifest; an
// unrelated one does not. A corrected SQL replaces the answer's.
func TestVerifiedPairReachesASimilarQuestion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newConvRig(ctx, t)
	h := r.cl(Config{VerifiedExamples: true, CacheTTL: -1})
	const verified = "How many customers does the shop have?"
	q1 := askAndWait(t, h, jsonBody(map[string]string{"db": "shop", "question": verified}))
	if q1.Status != Answered || len(q1.Examples) != 0 {
		t.Fatalf("first question: %s %s, examples %v", q1.Status, q1.Error, q1.Examples)
	}
	do(t, h, http.MethodPost, "/v1/questions/"+q1.ID+"/feedback", `{"verdict":"sideways"}`, http.StatusBadRequest, nil)
	var fb Question
	do(t, h, http.MethodPost, "/v1/questions/"+q1.ID+"/feedback", `{"verdict":"up"}`, http.StatusOK, &fb)
	if fb.Feedback == nil || fb.Feedback.Verdict != "up" {
		t.Fatalf("feedback: %+v", fb.Feedback)
	}

	_, before := r.rec.since(0)
	const similar = "How many customers in Germany does the shop have?"
	q2 := askAndWait(t, h, jsonBody(map[string]string{"db": "shop", "question": similar}))
	if len(q2.Examples) != 1 || q2.Examples[0].Question != verified || q2.Examples[0].SQL != q1.SQL || q2.Examples[0].From != q1.ID {
		t.Fatalf("similar question's examples: %+v; want the verified pair (%q, %q)", q2.Examples, verified, q1.SQL)
	}
	reqs, _ := r.rec.since(before)
	offered := false
	for _, body := range reqs {
		if strings.Contains(body, "Verified example 1: "+verified) && strings.Contains(body, jsonEscape(q1.SQL)) {
			offered = true
		}
	}
	if !offered {
		t.Errorf("none of the similar question's %d LLM requests offers the verified pair", len(reqs))
	}
	raw, err := r.rdb.Get(ctx, rdb.ManifestKey(q2.ID)).Bytes()
	if err != nil {
		t.Fatalf("manifest of %s: %v", q2.ID, err)
	}
	var m runstate.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if !m.VerifiedExamples || len(m.Questions) != 1 || !strings.Contains(m.Questions[0].ExternalKnowledge, "Verified example 1: "+verified) {
		t.Errorf("manifest: verified_examples %v, questions %+v; want the pair recorded", m.VerifiedExamples, m.Questions)
	}

	// A corrected SQL with a down replaces the pair's SQL.
	const corrected = "SELECT COUNT(DISTINCT customer_id) AS customers FROM customers"
	do(t, h, http.MethodPost, "/v1/questions/"+q1.ID+"/feedback", jsonBody(map[string]string{"verdict": "down", "sql": corrected}), http.StatusOK, nil)
	var q3 Question
	var acc accepted
	do(t, h, http.MethodPost, "/v1/questions", jsonBody(map[string]string{"db": "shop", "question": similar}), http.StatusAccepted, &acc)
	do(t, h, http.MethodGet, "/v1/questions/"+acc.ID, "", http.StatusOK, &q3)
	if len(q3.Examples) != 1 || q3.Examples[0].SQL != corrected {
		t.Errorf("after a correction the examples are %+v; want the corrected SQL", q3.Examples)
	}
	// An unrelated question gets none.
	do(t, h, http.MethodPost, "/v1/questions", jsonBody(map[string]string{"db": "shop", "question": "Which sales channel brought the most orders?"}), http.StatusAccepted, &acc)
	q3 = Question{}
	do(t, h, http.MethodGet, "/v1/questions/"+acc.ID, "", http.StatusOK, &q3)
	if len(q3.Examples) != 0 {
		t.Errorf("an unrelated question was offered %+v", q3.Examples)
	}
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
