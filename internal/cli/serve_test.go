package cli

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"

	_ "modernc.org/sqlite" // database/sql driver, to change a schema
)

// countingSim is llmsim over the demo, counting chat calls (and those
// whose request holds needle, when given), with a little latency so that a
// question is in flight long enough to cancel.
func countingSim(t *testing.T, ds *dataset.Dataset, needle ...string) (string, *atomic.Int64) {
	t.Helper()
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1, Latency: llmsim.Latency{FirstToken: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if len(needle) == 0 || bytes.Contains(b, []byte(needle[0])) {
				calls.Add(1)
			}
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/v1", &calls
}

// startServe runs the quorum binary's serve with args (its API keys from
// them) on a free port, and waits until it is ready; it is stopped at the
// end of the test. A listen address in args is replaced. The flags are
// parsed here too, for what a test reads of them (the state folder).
func startServe(t *testing.T, args ...string) (*serveFlags, *servedProcess) {
	t.Helper()
	bin := quorumBinary(t)
	f, err := parseServeFlags(true, args...)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", killFreePort(t))
	argv := []string{"serve", "--listen", addr}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--listen":
			i++
		case strings.HasPrefix(a, "--listen="):
		default:
			argv = append(argv, a)
		}
	}
	p := startKillServe(t, bin, argv, filepath.Join(t.TempDir(), "serve.log"))
	s := &servedProcess{killServe: p, url: "http://" + addr}
	p.waitReady(t, http.DefaultClient, s.url)
	return f, s
}

// servedProcess is a quorum serve process and its API's address.
type servedProcess struct {
	*killServe
	url string
}

// client talks to the question API as one tenant.
type client struct {
	t    *testing.T
	base string
	key  string
}

func (c *client) do(method, path string, body any, hdr ...string) (int, http.Header, []byte) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, out
}

func (c *client) ask(body map[string]any, hdr ...string) string {
	c.t.Helper()
	code, _, out := c.do("POST", "/v1/questions", body, hdr...)
	var a struct{ ID, Status string }
	if code != http.StatusAccepted || json.Unmarshal(out, &a) != nil || a.ID == "" {
		c.t.Fatalf("POST %v: %d %s", body, code, out)
	}
	return a.ID
}

func (c *client) get(id string) *serve.Question {
	c.t.Helper()
	code, _, out := c.do("GET", "/v1/questions/"+id, nil)
	var q serve.Question
	if code != http.StatusOK || json.Unmarshal(out, &q) != nil {
		c.t.Fatalf("GET %s: %d %s", id, code, out)
	}
	return &q
}

// wait polls until the question is finished.
func (c *client) wait(id string) *serve.Question {
	c.t.Helper()
	var q *serve.Question
	if !wait.Until(3*time.Minute, func() bool { q = c.get(id); return q.Terminal() }) {
		c.t.Fatalf("question %s still %s after 3 minutes", id, q.Status)
	}
	return q
}

const (
	keyA = "tenant-a-0123456789abcdef"
	keyB = "tenant-b-0123456789abcdef"
	keyC = "tenant-c-0123456789abcdef"
)

// TestServeAnswersLikeSolve runs quorum serve's question API through the
// real parts (embedded NATS, a spawned redis-server, llmsim over HTTP):
// 20 questions asked at once (and one with quorum ask) are each answered with the SQL quorum solve
// writes for the same question and seed; an Idempotency-Key sent twice
// does no new work; a cancel stops the question's tasks; and the API's
// refusals (401, 429, 400 naming the field, 404) each come as documented.
func TestServeAnswersLikeSolve(t *testing.T) {
	if testing.Short() {
		t.Skip("runs questions through the runtime")
	}
	demoDS, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	llmURL, calls := countingSim(t, demoDS)
	examples := demoDS.Examples[:20]

	// quorum solve over the same examples of the dataset itself: serve
	// asked a dataset's question runs it under the example's own id, so
	// --seed gives the same answer (the flag's promise).
	ids := make([]string, len(examples))
	for i, e := range examples {
		ids[i] = e.ID
	}
	solved := filepath.Join(t.TempDir(), "solve")
	if log, err := run(t, "solve", "--dataset", demo, "--ids", strings.Join(ids, ","), "--votes", "2", "--seed", "1", "--llm-base-url", llmURL, "--llm-api-key", "k",
		"--out", solved); err != nil {
		t.Fatalf("quorum solve: %v\n%s", err, log)
	}

	keys := filepath.Join(t.TempDir(), "keys")
	// Tenant c is unlimited: b's limit is spent by the refusals.
	os.WriteFile(keys, []byte("a:"+keyA+"\nb:"+keyB+"\nc:"+keyC+"\n"), 0o600)
	f, s := startServe(t, "--dataset", demo, "--api-keys", keys, "--tenant-limit", "b=2/0", "--votes", "2", "--seed", "1",
		"--llm-base-url", llmURL, "--llm-api-key", "k", "--state-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "error")
	a := &client{t: t, base: s.url, key: keyA}

	var wg sync.WaitGroup
	for i, e := range examples {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = a.ask(map[string]any{"db": e.DB, "question": e.Question, "external_knowledge": e.ExternalKnowledge})
		}()
	}
	wg.Wait()
	for i, e := range examples {
		q := a.wait(ids[i])
		want, err := os.ReadFile(filepath.Join(solved, e.ID+".sql"))
		switch {
		case err != nil:
			t.Errorf("%s: solve wrote no answer: %v", e.ID, err)
		case q.Status != serve.Answered:
			t.Errorf("%s: %s (%s), want answered", e.ID, q.Status, q.Error)
		case q.SQL != strings.TrimSpace(string(want)):
			t.Errorf("%s: serve answered\n%s\nsolve answered\n%s", e.ID, q.SQL, want)
		case len(q.Columns) == 0 || q.Cost.LLMCalls == 0 || q.Confidence == "":
			t.Errorf("%s: incomplete answer %+v", e.ID, q)
		}
	}

	t.Run("idempotent resend", func(t *testing.T) {
		e := demoDS.Examples[30]
		body := map[string]any{"db": e.DB, "question": e.Question, "external_knowledge": e.ExternalKnowledge, "cache": false}
		id := a.ask(body, "Idempotency-Key", "order-30")
		a.wait(id)
		before := calls.Load()
		if again := a.ask(body, "Idempotency-Key", "order-30"); again != id {
			t.Fatalf("the resend got id %s, want %s", again, id)
		}
		// Without the key, the same question is new work. Its whole life
		// is the window in which work the resend started would call the
		// LLM: every call since the resend must be the new question's.
		other := a.ask(body)
		if other == id {
			t.Fatal("a question without the key reused the keyed one's id")
		}
		q := a.wait(other)
		if n := calls.Load() - before; n != int64(q.Cost.LLMCalls) {
			t.Errorf("%d LLM calls since the resend, %d of them the new question's: the resend did work", n, q.Cost.LLMCalls)
		}
	})

	t.Run("cache", func(t *testing.T) {
		e := examples[0]
		before := calls.Load()
		id := a.ask(map[string]any{"db": e.DB, "question": "  " + strings.ToUpper(e.Question[:1]) + e.Question[1:] + " ", "external_knowledge": e.ExternalKnowledge})
		q := a.wait(id)
		if !q.Cached || q.Cost.LLMCalls != 0 || q.SQL == "" || calls.Load() != before {
			t.Errorf("an equal question: cached %v, cost %+v, %d LLM calls", q.Cached, q.Cost, calls.Load()-before)
		}
	})

	t.Run("cancel stops the tasks", func(t *testing.T) {
		e := demoDS.Examples[40]
		id := a.ask(map[string]any{"db": e.DB, "question": e.Question, "external_knowledge": e.ExternalKnowledge, "votes": 8, "cache": false})
		wait.For(t, 3*time.Minute, "the question to start", func() bool { return a.get(id).Status != serve.Queued })
		code, _, out := a.do("DELETE", "/v1/questions/"+id, nil)
		if code != http.StatusOK || !strings.Contains(string(out), `"status":"cancelled"`) {
			t.Fatalf("DELETE: %d %s", code, out)
		}
		// Two questions asked after the cancel, one after the other, are
		// its windows: the workers reach their tasks only past the
		// cancelled one's (running calls end, queued tasks are dropped,
		// during the first); every call during the second is its own.
		fresh := func(e *dataset.Example) *serve.Question {
			return a.wait(a.ask(map[string]any{"db": e.DB, "question": e.Question, "external_knowledge": e.ExternalKnowledge, "cache": false}))
		}
		fresh(demoDS.Examples[41])
		settled := calls.Load()
		q := fresh(demoDS.Examples[42])
		if n := calls.Load() - settled; n != int64(q.Cost.LLMCalls) {
			t.Errorf("%d LLM calls after the cancel settled, %d of them another question's: its tasks go on", n, q.Cost.LLMCalls)
		}
		if q := a.get(id); q.Status != serve.Cancelled {
			t.Errorf("status %s after the cancel", q.Status)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		e := examples[1]
		good := map[string]any{"db": e.DB, "question": e.Question}
		for _, tc := range []struct {
			name  string
			key   string
			body  any
			code  int
			field string
		}{
			{"no key", "", good, 401, ""},
			{"wrong key", "nope-0123456789abcdef", good, 401, ""},
			{"malformed JSON", keyA, `{"db": "shop", `, 400, ""},
			{"missing db", keyA, map[string]any{"question": "x"}, 400, "db"},
			{"unknown db", keyA, map[string]any{"db": "nowhere", "question": "x"}, 400, "db"},
			{"missing question", keyA, map[string]any{"db": e.DB}, 400, "question"},
			{"oversize question", keyA, map[string]any{"db": e.DB, "question": strings.Repeat("x", dataset.MaxQuestionBytes+1)}, 400, "question"},
			{"unknown field", keyA, map[string]any{"db": e.DB, "question": "x", "colour": "red"}, 400, "colour"},
			{"votes out of range", keyA, map[string]any{"db": e.DB, "question": "x", "votes": 99}, 400, "votes"},
			{"unknown agent", keyA, map[string]any{"db": e.DB, "question": "x", "agent": "oracle"}, 400, "agent"},
			{"votes not a number", keyA, `{"db": "shop", "question": "x", "votes": "eight"}`, 400, "votes"},
			// Options are the agent's allow-list within the votes cap
			// (agent.Option.Asker): options.votes once drew 100 candidates.
			{"options.votes over the cap", keyA, map[string]any{"db": e.DB, "question": "x", "votes": 1, "options": map[string]string{"votes": "100"}, "cache": false}, 400, "options.votes"},
			{"options.votes not a count", keyA, map[string]any{"db": e.DB, "question": "x", "options": map[string]string{"votes": "0x7fffffff"}}, 400, "options.votes"},
			{"an operator's option", keyA, map[string]any{"db": e.DB, "question": "x", "options": map[string]string{"gold-tables": "true"}}, 400, "options.gold-tables"},
			{"another agent's option", keyA, map[string]any{"db": e.DB, "question": "x", "options": map[string]string{"passes": "2"}}, 400, "options.passes"},
			{"pexa's passes over the cap", keyA, map[string]any{"db": e.DB, "question": "x", "agent": "pexa", "options": map[string]string{"passes": "33"}}, 400, "options.passes"},
			{"a member's rounds over the cap", keyA, map[string]any{"db": e.DB, "question": "x", "agent": "ensemble", "options": map[string]string{"raise.rounds": "1000000"}}, 400, "options.raise.rounds"},
			{"a threshold that is not a number", keyA, map[string]any{"db": e.DB, "question": "x", "options": map[string]string{"sampling-threshold": "NaN"}}, 400, "options.sampling-threshold"},
		} {
			c := &client{t: t, base: s.url, key: tc.key}
			code, _, out := c.do("POST", "/v1/questions", tc.body)
			var e struct{ Error, Field string }
			_ = json.Unmarshal(out, &e)
			if code != tc.code || e.Field != tc.field || e.Error == "" {
				t.Errorf("%s: %d %s, want %d naming field %q", tc.name, code, out, tc.code, tc.field)
			}
			if tc.field == "options.votes" && tc.code == 400 && !strings.Contains(e.Error, "from 1 to 32") {
				t.Errorf("%s: %q does not name the limit (from 1 to 32)", tc.name, e.Error)
			}
		}
		if code, _, _ := a.do("GET", "/v1/questions/qnothing", nil); code != 404 {
			t.Errorf("an unknown id: %d, want 404", code)
		}
		b := &client{t: t, base: s.url, key: keyB}
		if code, _, _ := b.do("GET", "/v1/questions/"+ids[0], nil); code != 404 {
			t.Errorf("another tenant's question: %d, want 404", code)
		}
		// Tenant b may ask 2 questions a minute: the burst is 1.
		b.ask(good)
		code, hdr, out := b.do("POST", "/v1/questions", good)
		if code != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" {
			t.Errorf("over the tenant's limit: %d %s (Retry-After %q), want 429 with Retry-After", code, out, hdr.Get("Retry-After"))
		}
	})

	t.Run("quorum ask --server", func(t *testing.T) {
		e := examples[2]
		log, err := run(t, "ask", "--server", s.url, "--api-key", keyA, "--db", e.DB, e.Question)
		want, _ := os.ReadFile(filepath.Join(solved, e.ID+".sql"))
		if err != nil || !strings.Contains(log, strings.TrimSpace(string(want))) || !strings.Contains(log, "Confidence: ") || !strings.Contains(log, "Cost: ") {
			t.Errorf("quorum ask: %v\n%s", err, log)
		}
		if _, err := run(t, "ask", "--server", s.url, "--api-key", keyA, "--db", "nowhere", "x"); exitCode(err) != 2 || !strings.Contains(err.Error(), "db: unknown database") {
			t.Errorf("quorum ask about an unknown database: exit %d, %v; want 2 naming the field", exitCode(err), err)
		}
		if _, err := run(t, "ask", "--server", s.url, "--db", e.DB, "x"); exitCode(err) != 2 || !strings.Contains(err.Error(), "401") {
			t.Errorf("quorum ask without a key: exit %d, %v; want 2 with the 401", exitCode(err), err)
		}
	})

	t.Run("databases", func(t *testing.T) {
		code, _, out := a.do("GET", "/v1/databases", nil)
		if code != 200 || !strings.Contains(string(out), `"name":"shop","dialect":"sqlite","tables":29`) {
			t.Errorf("GET /v1/databases: %d %s", code, out)
		}
	})

	t.Run("keys are never stored", func(t *testing.T) {
		// The question log and the embedded Redis's append-only file hold
		// everything serve wrote.
		logged := false
		filepath.Walk(f.stateDir, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			logged = logged || (strings.HasSuffix(p, "questions.jsonl") && bytes.Contains(b, []byte(`"tenant":"a"`)))
			for _, k := range []string{keyA, keyB} {
				if bytes.Contains(b, []byte(k)) {
					t.Errorf("%s holds an API key", p)
				}
			}
			return nil
		})
		if !logged {
			t.Error("the question log has no line of tenant a")
		}
	})

	// Issue 50: a correction's SQL and question reach only its tenant's
	// questions (in process: TestFeedbackStaysWithItsTenant, which reads
	// the prompts too).
	t.Run("feedback stays with its tenant", func(t *testing.T) {
		e := demoDS.Examples[43]
		const secret = "SELECT COUNT(*) AS secret_of_tenant_a FROM customers"
		qa := a.wait(a.ask(map[string]any{"db": e.DB, "question": e.Question, "cache": false}))
		if code, _, out := a.do("POST", "/v1/questions/"+qa.ID+"/feedback", map[string]string{"verdict": "down", "sql": secret}); code != http.StatusOK {
			t.Fatalf("tenant a's correction: %d %s", code, out)
		}
		similar := map[string]any{"db": e.DB, "question": e.Question + " Answer in one query.", "cache": false}
		c := &client{t: t, base: s.url, key: keyC}
		qc := c.wait(c.ask(similar))
		_, _, history := c.do("GET", "/v1/questions", nil)
		_, _, record := c.do("GET", "/v1/questions/"+qc.ID, nil)
		for where, text := range map[string]string{"tenant c's question": string(record), "tenant c's history": string(history)} {
			for _, leak := range []string{"secret_of_tenant_a", qa.ID} {
				if strings.Contains(text, leak) {
					t.Errorf("%s holds %q from tenant a's feedback", where, leak)
				}
			}
		}
		// The correction keeps its meaning for tenant a's own questions.
		qa2 := a.wait(a.ask(similar))
		if len(qa2.Examples) != 1 || qa2.Examples[0].SQL != secret || qa2.Examples[0].From != qa.ID {
			t.Errorf("tenant a's similar question is offered %+v; want its own correction (%q from %s)", qa2.Examples, secret, qa.ID)
		}
	})
}

// TestServeLiveSchema serves databases read from their warehouse rather
// than from Spider files: the demo's SQLite file, through the live path,
// gives the same compressed table information as the demo's Spider 2.0
// metadata (which adds descriptions SQLite does not keep); a question is
// answered; a schema change is read again and drops the cached answers.
func TestServeLiveSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("runs questions through the runtime")
	}
	abs, _ := filepath.Abs(demo)
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(abs, "resource", "databases", "spider2-localdb", "shop.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "shop.sqlite")
	if err := os.WriteFile(dbPath, src, 0o644); err != nil {
		t.Fatal(err)
	}
	demoDS, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	llmURL, withNewTable := countingSim(t, demoDS, "gift_cards")
	state := t.TempDir()
	_, s := startServe(t, "--sqlite-dir", dir, "--no-auth", "--votes", "2", "--schema-refresh", "200ms",
		"--llm-base-url", llmURL, "--llm-api-key", "k", "--state-dir", state, "--listen", "127.0.0.1:0", "--log-level", "error")

	// The same compressed table information as the Spider metadata.
	render := func(root string, descriptions bool) string {
		ds, err := dataset.Load(root, dataset.Options{Catalogue: true, SQLiteDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		db := ds.Databases["sqlite/shop"]
		if db == nil {
			t.Fatalf("%s: no database shop", root)
		}
		sc, _, err := dataset.LoadSchema(db)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range sc.Folders {
			for _, tb := range f.Tables {
				for i := range tb.Columns {
					if !descriptions {
						tb.Columns[i].Description = ""
					}
				}
			}
		}
		opt := dbinfo.DefaultOptions()
		opt.SampleRows = false // the demo's generator sampled rows across each table; the live path takes the first
		return dbinfo.FromMetadata(sc, db, opt).Prompt("")
	}
	if live, spider := render(filepath.Join(state, "live"), true), render(demo, false); live != spider {
		t.Errorf("live table information differs from the Spider metadata's:\nlive:\n%.2000s\nspider:\n%.2000s", live, spider)
	}

	c := &client{t: t, base: s.url}
	code, _, out := c.do("GET", "/v1/databases", nil)
	if code != 200 || !strings.Contains(string(out), `"name":"shop","dialect":"sqlite","tables":29`) {
		t.Fatalf("GET /v1/databases: %d %s", code, out)
	}
	e := demoDS.Examples[0]
	body := map[string]any{"db": "shop", "question": e.Question}
	if q := c.wait(c.ask(body)); q.Status != serve.Answered || q.Cached {
		t.Fatalf("first question: %s cached=%v %s", q.Status, q.Cached, q.Error)
	}
	if q := c.wait(c.ask(body)); !q.Cached {
		t.Fatal("the same question again was not answered from the cache")
	}

	// A new table: the schema is read again, and the cache no longer
	// answers for the old schema.
	// serve reads the file every 200 ms from another process; the writer
	// waits for those readers' shared locks instead of failing busy.
	rw, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(60000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Exec("CREATE TABLE gift_cards (card_id INTEGER, balance REAL)"); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	newTable := filepath.Join(state, "live", "resource", "databases", "sqlite", "shop", "gift_cards.json")
	wait.For(t, 30*time.Second, "the new table to be read", func() bool { _, err := os.Stat(newTable); return err == nil })
	if q := c.wait(c.ask(body)); q.Cached || q.Status != serve.Answered {
		t.Errorf("after the schema changed: %s cached=%v, want a fresh answer", q.Status, q.Cached)
	}
	if withNewTable.Load() == 0 {
		t.Error("no prompt after the schema changed showed the new table")
	}
	// Schemas, questions and answers under --state-dir are the tenants':
	// no other local user may read them.
	filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s under --state-dir has mode %v, want no access for group or others", p, info.Mode().Perm())
		}
		return nil
	})
}

// TestServeQuestionWithTheLLMDown: a question whose LLM endpoint fails
// every call ends failed, soon, with the endpoint's error in "error".
func TestServeQuestionWithTheLLMDown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a question through the runtime")
	}
	url := brokenEndpoint(t, status(503, `{"error":{"message":"upstream overloaded","type":"server_error"}}`))
	_, s := startServe(t, "--dataset", demo, "--no-auth", "--votes", "2", "--llm-base-url", url, "--llm-api-key", "k",
		"--state-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "error")
	c := &client{t: t, base: s.url}
	q := c.wait(c.ask(map[string]any{"db": "shop", "question": "How many customers does the shop have?"}))
	t.Logf("failed: %s", q.Error)
	if q.Status != serve.Failed || !strings.Contains(q.Error, "503") || !strings.Contains(q.Error, "upstream overloaded") {
		t.Errorf("%s: %q, want failed with the endpoint's 503", q.Status, q.Error)
	}
	// "Soon" is the recorded reason, not the time: the LLM call gave up on
	// the endpoint (its attempts or dead-endpoint limit), not on a
	// question deadline.
	if !strings.Contains(q.Error, "llm call") || strings.Contains(q.Error, "deadline") || strings.Contains(q.Error, "time limit") {
		t.Errorf("error %q: want the LLM call's own failure, not a time limit", q.Error)
	}
}

// TestServeOverStandaloneSimulator: `quorum serve --llm-base-url` pointed
// at a standalone llmsim (over HTTP; its /models says it is the
// simulator) answers a question outside the simulator's dataset as "the
// simulator has no answer for this question", with no SQL and no
// confidence, never a confident SELECT 1; a dataset question is answered.
func TestServeOverStandaloneSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs questions through the runtime")
	}
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1, Noise: llmsim.Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1}})
	if err != nil {
		t.Fatal(err)
	}
	simSrv := httptest.NewServer(sim)
	defer simSrv.Close()
	_, s := startServe(t, "--dataset", demo, "--no-auth", "--votes", "2", "--llm-base-url", simSrv.URL+"/v1", "--llm-api-key", "k",
		"--state-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "error")
	c := &client{t: t, base: s.url}
	q := c.wait(c.ask(map[string]any{"db": "shop", "question": "What is the meaning of life?"}))
	if q.Status != serve.Failed || !q.NoAnswer || !strings.Contains(q.Error, "the simulator has no answer for this question") || q.SQL != "" || q.Confidence != "" {
		t.Errorf("unknown question: status %s, no_answer %v, error %q, sql %q, confidence %q; want the simulator's no answer", q.Status, q.NoAnswer, q.Error, q.SQL, q.Confidence)
	}
	q = c.wait(c.ask(map[string]any{"db": "shop", "question": "How many customers does the shop have?"}))
	if q.Status != serve.Answered || q.NoAnswer || q.Confidence == "" || len(q.Rows) != 1 || q.Rows[0][0] != "300" {
		t.Errorf("the dataset's question: status %s, no_answer %v, confidence %q, rows %v, error %q", q.Status, q.NoAnswer, q.Confidence, q.Rows, q.Error)
	}
}
