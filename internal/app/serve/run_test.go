package serve

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/ratelimit"
)

// runOK runs sql on question id as key's tenant and decodes the result.
func runOK(t *testing.T, h http.Handler, id, key, sql string) runResult {
	t.Helper()
	w := request(t, h, http.MethodPost, "/v1/questions/"+id+"/run", key, jsonBody(map[string]string{"sql": sql}))
	if w.Code != http.StatusOK {
		t.Fatalf("run %q: %d %s, want 200", sql, w.Code, strings.TrimSpace(w.Body.String()))
	}
	var res runResult
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatalf("run %q: %v: %s", sql, err, w.Body.String())
	}
	return res
}

// TestRunEditedSQL: the owner of a question runs edited SQL on its
// database (the demo's real SQLite file) and gets its rows as an answer
// has them, capped at MaxRows, with how it was understood; a write, an
// ATTACH, a pragma write or a second statement is refused with the
// guard's reason (and the database is unchanged); an engine error and a
// timeout come back as 400 with their text; another tenant cannot run on
// the question.
func TestRunEditedSQL(t *testing.T) {
	s, _ := redisServer(t, HTTPLimits{})
	s.cfg.MaxRows, s.cfg.QueryTimeout = 50, 2*time.Second
	h := s.Handler()
	id := storeQuestion(t, s, "a")

	res := runOK(t, h, id, keyA, "SELECT COUNT(*) AS n FROM customers")
	if strings.Join(res.Columns, ",") != "n" || len(res.Rows) != 1 || res.Rows[0][0] != "300" || res.RowCount != 1 || res.Truncated {
		t.Errorf("count: columns %v rows %v row_count %d truncated %v; want n = 300", res.Columns, res.Rows, res.RowCount, res.Truncated)
	}
	if res.Understood != "Counted rows in customers" {
		t.Errorf("understood %q", res.Understood)
	}
	res = runOK(t, h, id, keyA, "SELECT customer_id FROM customers ORDER BY customer_id")
	if len(res.Rows) != 50 || !res.Truncated || res.Rows[0][0] != "1" {
		t.Errorf("300 rows capped at 50: %d rows, truncated %v, first %v", len(res.Rows), res.Truncated, res.Rows[:min(1, len(res.Rows))])
	}

	for _, c := range []struct{ sql, want string }{
		{"DELETE FROM customers", "quorum refused the statement"},
		{"SELECT 1; DELETE FROM customers", "quorum refused the statement"},
		{"ATTACH DATABASE '/tmp/x.db' AS x", "quorum refused the statement"},
		{"PRAGMA journal_mode = WAL", "quorum refused the statement"},
		{"UPDATE customers SET name = 'x'", "quorum refused the statement"},
		{"SELECT nope FROM customers", "no such column"},
		{"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c", "interrupted"},
		{"", "sql: required"},
	} {
		w := request(t, h, http.MethodPost, "/v1/questions/"+id+"/run", keyA, jsonBody(map[string]string{"sql": c.sql}))
		var e apiError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != http.StatusBadRequest || e.Field != "sql" || !strings.Contains(e.Error, c.want) {
			t.Errorf("run %q: %d %+v, want 400 on field sql saying %q", c.sql, w.Code, e, c.want)
		}
	}
	if res := runOK(t, h, id, keyA, "SELECT COUNT(*) FROM customers"); res.Rows[0][0] != "300" {
		t.Errorf("after the refused writes customers has %s rows, want 300", res.Rows[0][0])
	}

	w := request(t, h, http.MethodPost, "/v1/questions/"+id+"/run", keyB, `{"sql":"SELECT 1"}`)
	if w.Code != http.StatusNotFound {
		t.Errorf("tenant b runs on a's question: %d %s, want 404", w.Code, w.Body.String())
	}
	w = request(t, h, http.MethodPost, "/v1/questions/"+id+"/run", keyA, `{"SQL":"SELECT 1"}`)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "unknown field") {
		t.Errorf("a misnamed field: %d %s, want 400 unknown field", w.Code, w.Body.String())
	}

	// Reruns count against the tenant's requests per minute: at 6 a
	// minute (a burst of 1) the second at once is refused.
	lim, err := ratelimit.New(ratelimit.Config{Client: s.cfg.Redis})
	if err != nil {
		t.Fatal(err)
	}
	s.quota.lim, s.cfg.Tenants.Default = lim, Limits{RequestsPerMinute: 6}
	runOK(t, h, id, keyA, "SELECT 1")
	w = request(t, h, http.MethodPost, "/v1/questions/"+id+"/run", keyA, `{"sql":"SELECT 1"}`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("a rerun over the tenant's quota: %d (Retry-After %q) %s, want 429", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
}
