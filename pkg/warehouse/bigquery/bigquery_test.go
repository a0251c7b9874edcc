package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	bq "cloud.google.com/go/bigquery"
	"cloud.google.com/go/civil"

	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// fixture serves the BigQuery REST calls the Go client makes for
// Query.Run + Job.Read (jobs.insert, jobs.getQueryResults, jobs.cancel),
// written from the published v2 API.
type fixture struct {
	mu      sync.Mutex
	inserts []map[string]any
	cancels int
	srv     *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bigquery/v2/projects/p/jobs", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.inserts = append(f.inserts, body)
		f.mu.Unlock()
		conf := body["configuration"].(map[string]any)
		query := conf["query"].(map[string]any)["query"].(string)
		ref := body["jobReference"].(map[string]any)
		if strings.Contains(query, "FORM") {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]any{"error": map[string]any{"code": 400, "message": "Syntax error: Unexpected identifier \"FORM\" at [1:10]",
				"errors": []map[string]any{{"reason": "invalidQuery", "message": "Syntax error: Unexpected identifier \"FORM\" at [1:10]"}}}})
			return
		}
		if dry, _ := conf["dryRun"].(bool); dry {
			bytes, stype := "1024", "SELECT"
			if strings.Contains(query, "huge") {
				bytes = "99000000000000"
			}
			if strings.Contains(query, "MERGE") {
				stype = "MERGE"
			}
			if strings.Contains(query, "DECLARE") || strings.Contains(query, "as_script") {
				stype = "SCRIPT"
			}
			writeJSON(w, map[string]any{"jobReference": ref, "configuration": conf, "status": map[string]any{"state": "DONE"},
				"statistics": map[string]any{"totalBytesProcessed": bytes, "query": map[string]any{"statementType": stype, "totalBytesProcessed": bytes}}})
			return
		}
		ref["location"] = "US"
		writeJSON(w, map[string]any{"jobReference": ref, "configuration": conf, "status": map[string]any{"state": "RUNNING"},
			"statistics": map[string]any{"query": map[string]any{"statementType": "SELECT"}}})
	})
	mux.HandleFunc("GET /bigquery/v2/projects/p/queries/{job}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		last := f.inserts[len(f.inserts)-1]
		f.mu.Unlock()
		query := last["configuration"].(map[string]any)["query"].(map[string]any)["query"].(string)
		ref := map[string]any{"projectId": "p", "jobId": r.PathValue("job"), "location": "US"}
		if strings.Contains(query, "slow") {
			writeJSON(w, map[string]any{"jobComplete": false, "jobReference": ref})
			return
		}
		resp := map[string]any{"jobComplete": true, "jobReference": ref, "totalRows": "2", "schema": schema()}
		if r.URL.Query().Get("maxResults") != "0" {
			resp["rows"] = []any{
				row("1", "12.500000000", "0.25", "ann", "2024-01-02", "2024-01-02T10:00:00.25", "1704189600000000", "true",
					map[string]any{"f": []any{map[string]any{"v": "x"}, map[string]any{"v": "2"}}}, []any{map[string]any{"v": "a"}, map[string]any{"v": "b"}}),
				row("2", nil, "1.5", "bob", "2024-01-03", "2024-01-03T00:00:00", "1704240000000000", "false", nil, []any{}),
			}
		}
		writeJSON(w, resp)
	})
	mux.HandleFunc("POST /bigquery/v2/projects/p/jobs/{job}/cancel", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.cancels++
		f.mu.Unlock()
		writeJSON(w, map[string]any{"job": map[string]any{"jobReference": map[string]any{"projectId": "p", "jobId": r.PathValue("job")},
			"status": map[string]any{"state": "DONE"}}})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func schema() map[string]any {
	return map[string]any{"fields": []map[string]any{
		{"name": "id", "type": "INTEGER"}, {"name": "amount", "type": "NUMERIC"}, {"name": "ratio", "type": "FLOAT"},
		{"name": "name", "type": "STRING"}, {"name": "d", "type": "DATE"}, {"name": "dt", "type": "DATETIME"},
		{"name": "ts", "type": "TIMESTAMP"}, {"name": "ok", "type": "BOOLEAN"},
		{"name": "rec", "type": "RECORD", "fields": []map[string]any{{"name": "k", "type": "STRING"}, {"name": "n", "type": "INTEGER"}}},
		{"name": "tags", "type": "STRING", "mode": "REPEATED"},
	}}
}

func row(vals ...any) map[string]any {
	var f []any
	for _, v := range vals {
		f = append(f, map[string]any{"v": v})
	}
	return map[string]any{"f": f}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func open(t *testing.T, f *fixture, budget ByteBudget) *DB {
	t.Helper()
	db, err := Open(context.Background(), Config{Project: "p", Endpoint: f.srv.URL + "/bigquery/v2/", NoAuth: true, MaxBytesBilled: 1 << 30}, budget)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestQueryAgainstFixture(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := open(t, f, nil)
	ctx := warehouse.WithLabels(context.Background(), map[string]string{"run": "Run.1", "example": "bq011"})
	res, err := db.Query(ctx, "SELECT * FROM `p.d.t`", warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := "id,amount,ratio,name,d,dt,ts,ok,rec,tags\n" +
		"1,12.5,0.25,ann,2024-01-02,2024-01-02 10:00:00.250000,2024-01-02 10:00:00+00:00,True,\"{\"\"k\"\":\"\"x\"\",\"\"n\"\":2}\",\"[\"\"a\"\",\"\"b\"\"]\"\n" +
		"2,,1.5,bob,2024-01-03,2024-01-03 00:00:00,2024-01-03 00:00:00+00:00,False,,[]\n"
	if got := res.CSV(); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inserts) != 2 {
		t.Fatalf("%d jobs inserted, want a dry run and the query", len(f.inserts))
	}
	dry := f.inserts[0]["configuration"].(map[string]any)
	real := f.inserts[1]["configuration"].(map[string]any)
	if dry["dryRun"] != true || real["dryRun"] == true {
		t.Errorf("dry run flags: %v / %v", dry["dryRun"], real["dryRun"])
	}
	q := real["query"].(map[string]any)
	labels := real["labels"].(map[string]any)
	if q["maximumBytesBilled"] != "1073741824" || real["jobTimeoutMs"] != "300000" || labels["run"] != "run_1" || labels["example"] != "bq011" || labels["app"] != "quorum" {
		t.Errorf("job configuration %v", real)
	}
}

func TestDryRunRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := open(t, f, nil)
	tests := []struct {
		sql, want string
	}{
		{"SELECT * FROM huge", "would scan 99000000000000 bytes, over the limit of 1073741824"},
		// The fixture reports a MERGE statement type for this text: only the dry run can tell.
		{"SELECT 'MERGE' AS s", "MERGE statement; only SELECT"},
		{"DELETE FROM t WHERE true", "DELETE is not a read statement"},
		{"SELECT 1; DROP TABLE t", "found 2 statements"},
		// A single query the dry run calls a script: something the guard did not see.
		{"SELECT 'as_script' AS s", "BigQuery says this is a script"},
		{"SELECT * FROM EXTERNAL_QUERY('conn', 'SELECT 1')", "EXTERNAL_QUERY"},
		{"DECLARE x INT64; SET @@dataset_id = 'd'; SELECT 1", "system variable"},
		{"CREATE TEMP TABLE t AS SELECT 1; SELECT * FROM t", "CREATE TEMP TABLE"},
		{"SELECT ''';'''; DROP TABLE t", "statement 2 (DROP TABLE)"},
	}
	for _, tt := range tests {
		_, err := db.Query(context.Background(), tt.sql, warehouse.Limits{})
		var qe *warehouse.QueryError
		if !errors.As(err, &qe) || !qe.Refused || !strings.Contains(qe.Message, tt.want) {
			t.Errorf("%q: %v, want a refusal saying %q", tt.sql, err, tt.want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.inserts {
		if in["configuration"].(map[string]any)["dryRun"] != true {
			t.Errorf("a refused query ran: %v", in)
		}
	}
}

// TestScriptsOfDeclarationsRun: the guard admits a script of DECLARE, SET,
// CREATE TEMP FUNCTION and queries, and the dry run's SCRIPT type is then
// accepted; the text goes to BigQuery as written, without the final ';'.
func TestScriptsOfDeclarationsRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := open(t, f, nil)
	script := "DECLARE d STRING DEFAULT '20170201';\nSET d = '20170202';\nSELECT begin, call FROM `p.d.t` WHERE day = d;"
	if _, err := db.Query(context.Background(), script, warehouse.Limits{}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inserts) != 2 {
		t.Fatalf("%d jobs, want a dry run and the script", len(f.inserts))
	}
	q := f.inserts[1]["configuration"].(map[string]any)["query"].(map[string]any)["query"]
	if q != strings.TrimSuffix(script, ";") {
		t.Errorf("sent %q", q)
	}
}

func TestEngineErrorVerbatim(t *testing.T) {
	t.Parallel()
	db := open(t, newFixture(t), nil)
	_, err := db.Query(context.Background(), "SELECT a FORM t", warehouse.Limits{})
	var qe *warehouse.QueryError
	if !errors.As(err, &qe) || qe.Refused || qe.Message != `##ERROR##Syntax error: Unexpected identifier "FORM" at [1:10]` {
		t.Fatalf("err = %#v", err)
	}
}

func TestCancelCallsJobsCancel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db := open(t, f, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := db.Query(ctx, "SELECT slow FROM t", warehouse.Limits{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	wait.For(t, time.Minute, "jobs.cancel to be called after the context ended", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.cancels == 1
	})
}

type budget struct{ spent int64 }

func (b *budget) Spend(_ context.Context, _ string, n int64) error {
	if b.spent+n > 1500 {
		return errors.New("the run's byte budget (1500 bytes) would be exceeded")
	}
	b.spent += n
	return nil
}

func TestRunByteBudget(t *testing.T) {
	t.Parallel()
	db := open(t, newFixture(t), &budget{})
	if _, err := db.Query(context.Background(), "SELECT 1", warehouse.Limits{}); err != nil {
		t.Fatal(err)
	}
	_, err := db.Query(context.Background(), "SELECT 2", warehouse.Limits{})
	var qe *warehouse.QueryError
	if !errors.As(err, &qe) || !strings.Contains(qe.Message, "byte budget") {
		t.Errorf("second 1024-byte query within a 1500-byte budget: %v", err)
	}
}

func TestValuesAndDecisions(t *testing.T) {
	t.Parallel()
	rec := &bq.FieldSchema{Name: "r", Type: bq.RecordFieldType, Schema: bq.Schema{{Name: "a", Type: bq.IntegerFieldType}, {Name: "b", Type: bq.NumericFieldType}}}
	tests := []struct {
		v    bq.Value
		f    *bq.FieldSchema
		want string
	}{
		{big.NewRat(1, 3), nil, "0.33333333333333333333333333333333333333"},
		{big.NewRat(25, 2), nil, "12.5"},
		{big.NewRat(-7, 1), nil, "-7"},
		{civil.Time{Hour: 9, Minute: 5, Second: 1}, nil, "09:05:01"},
		{time.Date(2024, 1, 2, 3, 4, 5, 6000, time.FixedZone("", 3600)), nil, "2024-01-02 02:04:05.000006+00:00"},
		{[]bq.Value{int64(1), big.NewRat(3, 2)}, rec, `{"a":1,"b":1.5}`},
		{[]byte("hi"), nil, "b'hi'"},
	}
	for _, tt := range tests {
		if got := ToValue(tt.v, tt.f).CSV(); got != tt.want {
			t.Errorf("ToValue(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
	if CheckDryRun("SELECT", false, 10, 0) != nil || CheckDryRun("SCRIPT", false, 1, 0) == nil || CheckDryRun("SCRIPT", true, 1, 0) != nil ||
		CheckDryRun("INSERT", true, 1, 0) == nil || CheckDryRun("SELECT", false, 11, 10) == nil || CheckDryRun("SCRIPT", true, 11, 10) == nil {
		t.Error("CheckDryRun")
	}
	if (Config{}).Check() == nil {
		t.Error("a config without project passed")
	}
}

// TestLive runs against BigQuery when GOOGLE_CLOUD_PROJECT and credentials
// (GOOGLE_APPLICATION_CREDENTIALS) are set.
func TestLive(t *testing.T) {
	project := os.Getenv("GOOGLE_CLOUD_PROJECT")
	if project == "" || os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") == "" {
		t.Skip("live BigQuery test skipped: set GOOGLE_CLOUD_PROJECT and GOOGLE_APPLICATION_CREDENTIALS to run it")
	}
	db, err := Open(context.Background(), Config{Project: project, CredentialsFile: os.Getenv("GOOGLE_APPLICATION_CREDENTIALS")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Query(context.Background(), "SELECT 1 AS one", warehouse.Limits{})
	if err != nil || res.RowCount() != 1 {
		t.Fatalf("live query: %v", err)
	}
	// A script the guard admits: the dry run calls it SCRIPT (or SELECT for
	// temp functions and one query), and the last statement's rows come back.
	for _, q := range []string{
		"DECLARE x INT64 DEFAULT 2;\nSET x = x + 1;\nSELECT x AS three;",
		"CREATE TEMP FUNCTION three() AS (3);\nSELECT three() AS three;",
	} {
		res, err := db.Query(context.Background(), q, warehouse.Limits{})
		if err != nil || res.RowCount() != 1 || res.Rows[0][0].Int != 3 {
			t.Errorf("live script %q: %v %+v", q, err, res)
		}
	}
}
