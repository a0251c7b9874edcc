package schema

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/golden"
	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/bigquery"
	"github.com/quorumsql/quorum/pkg/warehouse/snowflake"
)

var update = flag.Bool("update", false, "rewrite the golden renderings under testdata/")

// answer is one recorded catalogue (or sample) answer of a fixture.
type answer struct {
	Match []string `json:"match"`
	// Snowflake: rowtype and rowset, or an engine error.
	Rowtype []map[string]any `json:"rowtype"`
	Rowset  [][]any          `json:"rowset"`
	Error   *struct {
		Code     string `json:"code"`
		SQLState string `json:"sqlState"`
		Message  string `json:"message"`
	} `json:"error"`
	// BigQuery: the result schema's fields and plain rows.
	Fields []map[string]any `json:"fields"`
	Rows   []any            `json:"rows"`
}

// recorded holds a fixture's answers and the statements it was sent.
type recorded struct {
	mu      sync.Mutex
	answers []*answer
	sent    []string
}

func loadAnswers(t *testing.T, file string) *recorded {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Answers []*answer `json:"answers"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &recorded{answers: f.Answers}
}

// find records the statement and returns its answer (nil: none).
func (r *recorded) find(sql string) *answer {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sql)
	for _, a := range r.answers {
		ok := true
		for _, m := range a.Match {
			ok = ok && strings.Contains(sql, m)
		}
		if ok {
			return a
		}
	}
	return nil
}

func (r *recorded) statements() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.sent...)
}

// setRows replaces the rows of the first answer (the fingerprint's), as a
// schema change would.
func (r *recorded) setRows(rowset [][]any, rows []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[0].Rowset, r.answers[0].Rows = rowset, rows
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// snowflakeFixture speaks the parts of Snowflake's REST API gosnowflake
// uses (login-request, query-request answered with JSON rowsets, session
// delete), answering from testdata/snowflake.json.
func snowflakeFixture(t *testing.T) (*recorded, snowflake.Config) {
	rec := loadAnswers(t, "snowflake.json")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /session/v1/login-request", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"success": true, "data": map[string]any{"token": "session-token", "masterToken": "master",
			"sessionId": 42, "validityInSeconds": 3600, "masterValidityInSeconds": 14400,
			"parameters": []map[string]any{{"name": "TIMEZONE", "value": "UTC"}}}})
	})
	mux.HandleFunc("POST /queries/v1/query-request", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		sqlText, _ := body["sqlText"].(string)
		a := rec.find(sqlText)
		switch {
		case a == nil:
			writeJSON(w, map[string]any{"success": false, "code": "002003", "message": "SQL compilation error: the fixture has no answer for this statement",
				"data": map[string]any{"errorCode": "002003", "sqlState": "42S02", "queryId": "01-none"}})
		case a.Error != nil:
			writeJSON(w, map[string]any{"success": false, "code": a.Error.Code, "message": a.Error.Message,
				"data": map[string]any{"errorCode": a.Error.Code, "sqlState": a.Error.SQLState, "queryId": "01-err"}})
		default:
			rec.mu.Lock()
			rowset := a.Rowset
			rec.mu.Unlock()
			writeJSON(w, map[string]any{"success": true, "data": map[string]any{
				"queryId": "01-ok", "queryResultFormat": "json", "total": len(rowset), "returned": len(rowset),
				"rowtype": a.Rowtype, "rowset": rowset}})
		}
	})
	mux.HandleFunc("POST /session", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, map[string]any{"success": true}) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	return rec, snowflake.Config{Account: "acme", User: "quorum", Password: "s3cret", Role: "READER", Warehouse: "WH",
		Host: u.Hostname(), Port: port, Protocol: "http", StatementTimeout: time.Minute}
}

// bigqueryFixture serves the BigQuery v2 REST calls the Go client makes
// for a query (jobs.insert for the dry run and the job, then
// jobs.getQueryResults), answering from testdata/bigquery.json in the
// API's f/v row encoding.
func bigqueryFixture(t *testing.T) (*recorded, bigquery.Config) {
	rec := loadAnswers(t, "bigquery.json")
	var mu sync.Mutex
	jobs := map[string]*answer{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bigquery/v2/projects/p/jobs", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		conf := body["configuration"].(map[string]any)
		query := conf["query"].(map[string]any)["query"].(string)
		ref := body["jobReference"].(map[string]any)
		if dry, _ := conf["dryRun"].(bool); dry {
			if a := rec.find(query); a == nil {
				w.WriteHeader(http.StatusBadRequest)
				writeJSON(w, map[string]any{"error": map[string]any{"code": 400, "message": "Not found: the fixture has no answer for this query",
					"errors": []map[string]any{{"reason": "notFound", "message": "Not found: the fixture has no answer for this query"}}}})
				return
			}
			writeJSON(w, map[string]any{"jobReference": ref, "configuration": conf, "status": map[string]any{"state": "DONE"},
				"statistics": map[string]any{"totalBytesProcessed": "10485760", "query": map[string]any{"statementType": "SELECT", "totalBytesProcessed": "10485760"}}})
			return
		}
		a := rec.find(query)
		mu.Lock()
		jobs[ref["jobId"].(string)] = a
		mu.Unlock()
		ref["location"] = "US"
		writeJSON(w, map[string]any{"jobReference": ref, "configuration": conf, "status": map[string]any{"state": "RUNNING"},
			"statistics": map[string]any{"query": map[string]any{"statementType": "SELECT"}}})
	})
	mux.HandleFunc("GET /bigquery/v2/projects/p/queries/{job}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := jobs[r.PathValue("job")]
		mu.Unlock()
		if a == nil {
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, map[string]any{"error": map[string]any{"code": 404, "message": "Not found: Job " + r.PathValue("job")}})
			return
		}
		rec.mu.Lock()
		rows := a.Rows
		rec.mu.Unlock()
		ref := map[string]any{"projectId": "p", "jobId": r.PathValue("job"), "location": "US"}
		resp := map[string]any{"jobComplete": true, "jobReference": ref, "totalRows": strconv.Itoa(len(rows)), "schema": map[string]any{"fields": a.Fields}}
		if r.URL.Query().Get("maxResults") != "0" {
			var out []any
			for _, row := range rows {
				out = append(out, fvRecord(row.([]any), a.Fields))
			}
			resp["rows"] = out
		}
		writeJSON(w, resp)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return rec, bigquery.Config{Project: "p", Endpoint: srv.URL + "/bigquery/v2/", NoAuth: true, MaxBytesBilled: 1 << 30}
}

// fvRecord encodes a row as the BigQuery API does: {"f": [{"v": cell}]},
// a RECORD cell as such a record, a REPEATED cell as a list of {"v": ...}.
func fvRecord(vals []any, fields []map[string]any) map[string]any {
	var f []any
	for i, field := range fields {
		var v any
		if i < len(vals) {
			v = vals[i]
		}
		f = append(f, map[string]any{"v": fvCell(v, field, field["mode"] == "REPEATED")})
	}
	return map[string]any{"f": f}
}

func fvCell(v any, field map[string]any, repeated bool) any {
	if v == nil {
		return nil
	}
	if repeated {
		out := []any{}
		for _, e := range v.([]any) {
			out = append(out, map[string]any{"v": fvCell(e, field, false)})
		}
		return out
	}
	if field["type"] == "RECORD" {
		var sub []map[string]any
		for _, s := range field["fields"].([]any) {
			sub = append(sub, s.(map[string]any))
		}
		return fvRecord(v.([]any), sub)
	}
	return v
}

// roundTrip writes s with WriteSpider, loads it back with
// dataset.LoadSchema and checks that both render alike.
func roundTrip(t *testing.T, s *dataset.Schema, meta *dataset.Database) *dataset.Schema {
	t.Helper()
	dir := t.TempDir()
	if err := WriteSpider(dir, s); err != nil {
		t.Fatal(err)
	}
	loaded, probs, err := dataset.LoadSchema(&dataset.Database{Name: meta.Name, Dialect: meta.Dialect, MetaDir: dir})
	if err != nil || len(probs) > 0 {
		t.Fatalf("load the written metadata: %v %v", err, probs)
	}
	for _, opt := range []dbinfo.Options{dbinfo.DefaultOptions(), dbinfo.Uncompressed()} {
		if got, want := render(loaded, meta, opt), render(s, meta, opt); got != want {
			t.Errorf("written and loaded back, the rendering differs:\n%s", firstDiff(got, want))
		}
	}
	return loaded
}

// TestSnowflakeThroughTheWire reads INFORMATION_SCHEMA answers through
// the real gosnowflake client and quorum's Snowflake warehouse.
func TestSnowflakeThroughTheWire(t *testing.T) {
	t.Parallel()
	rec, cfg := snowflakeFixture(t)
	wh, err := snowflake.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	ctx := context.Background()
	s, err := Read(ctx, wh, "shop", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Catalogue queries, then one sample query per table, identifiers
	// quoted as stored.
	sent := rec.statements()
	if len(sent) != 7 || !strings.HasPrefix(sent[0], `SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, COMMENT FROM "SHOP".INFORMATION_SCHEMA.TABLES`) ||
		!strings.Contains(sent[1], `FROM "SHOP".INFORMATION_SCHEMA.COLUMNS`) {
		t.Errorf("statements sent:\n%s", strings.Join(sent, "\n"))
	}
	samples := sent[2:]
	sort.Strings(samples)
	want := []string{
		`SELECT * FROM "SHOP"."PUBLIC"."CUSTOMERS" LIMIT 3`,
		`SELECT * FROM "SHOP"."PUBLIC"."ORDERS" LIMIT 3`,
		`SELECT * FROM "SHOP"."PUBLIC"."ORDER_TOTALS" LIMIT 3`,
		`SELECT * FROM "SHOP"."sales"."daily" LIMIT 3`,
		`SELECT * FROM "SHOP"."sales"."odd ""name""" LIMIT 3`,
	}
	if strings.Join(samples, "\n") != strings.Join(want, "\n") {
		t.Errorf("sample queries:\n%s\nwant:\n%s", strings.Join(samples, "\n"), strings.Join(want, "\n"))
	}

	if s.Database != "SHOP" || len(s.Folders) != 2 || s.Folders[0].Path != "PUBLIC" || s.Folders[1].Path != "sales" {
		t.Fatalf("schema %s with folders %v", s.Database, s.Folders)
	}
	orders := tableOf(t, s, "ORDERS")
	wantDDL := "create or replace TABLE ORDERS (\n" +
		"\tID NUMBER(38,0) NOT NULL COMMENT 'Order id.',\n" +
		"\tCUSTOMER_ID NUMBER(38,0) COMMENT 'Customer who ordered (CUSTOMERS.ID).',\n" +
		"\tAMOUNT NUMBER(10,2) COMMENT 'Amount in USD, it''s exact.',\n" +
		"\tRATIO FLOAT,\n" +
		"\tPLACED_AT TIMESTAMP_NTZ(9),\n" +
		"\tATTRS VARIANT,\n" +
		"\t\"note\" VARCHAR(100)\n" +
		")COMMENT='One row per order.'\n;"
	if orders.DDL != wantDDL || orders.FullName != "SHOP.PUBLIC.ORDERS" || orders.Description != "One row per order." {
		t.Errorf("ORDERS: %s\n%s", orders.FullName, orders.DDL)
	}
	wantRows := `[{"ID": 1, "CUSTOMER_ID": 7, "AMOUNT": 12.50, "RATIO": 0.25, "PLACED_AT": "2024-01-02 10:00:00", "ATTRS": "{\n  \"gift\": true\n}", "note": "first"}, ` +
		`{"ID": 2, "CUSTOMER_ID": 8, "AMOUNT": 7.00, "RATIO": 1.0, "PLACED_AT": "2024-01-03 10:00:00.500000", "ATTRS": null, "note": null}]`
	if string(orders.SampleRows) != wantRows {
		t.Errorf("ORDERS sample rows\n%s\nwant\n%s", orders.SampleRows, wantRows)
	}
	if c := orders.Columns[2]; c.Name != "AMOUNT" || c.Type != "NUMBER" || c.Description != "Amount in USD, it's exact." {
		t.Errorf("ORDERS column 3: %+v", c)
	}
	if odd := tableOf(t, s, `odd "name"`); string(odd.SampleRows) != "[]" || len(odd.Columns) != 1 {
		t.Errorf("a table whose sample query failed: %+v", odd)
	}
	if v := tableOf(t, s, "ORDER_TOTALS"); !strings.HasPrefix(v.DDL, "create or replace VIEW ORDER_TOTALS (\n") {
		t.Errorf("view DDL %q", v.DDL)
	}

	meta := &dataset.Database{Name: "SHOP", Dialect: warehouse.Snowflake}

	// The odd table cannot be a file; the others round-trip, picked by
	// bare, qualified and full names.
	if err := WriteSpider(t.TempDir(), s); err == nil || !strings.Contains(err.Error(), `table "odd \"name\""`) {
		t.Errorf("WriteSpider = %v, want a refusal naming the table", err)
	}
	kept, err := Read(ctx, wh, "SHOP", Options{Tables: []string{"customers", "PUBLIC.ORDERS", "SHOP.PUBLIC.ORDER_TOTALS", "sales.daily"}})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := kept.Count(); n != 4 {
		t.Fatalf("%d tables kept, want 4", n)
	}
	loaded := roundTrip(t, kept, meta)
	ddl, err := os.ReadFile(filepath.Join(loaded.Folders[0].Dir, "DDL.csv"))
	if err != nil || !strings.HasPrefix(string(ddl), "table_name,description,DDL\nCUSTOMERS,,\"create or replace TABLE CUSTOMERS (\n") {
		t.Errorf("PUBLIC/DDL.csv: %v\n%s", err, ddl)
	}
	if got := tableOf(t, loaded, "ORDERS"); got.Description != "One row per order." || got.DDL != wantDDL {
		t.Errorf("ORDERS loaded back: %q\n%s", got.Description, got.DDL)
	}

	// The fingerprint is the catalogue's aggregate; it moves with it.
	fp1, err := Fingerprint(ctx, wh, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if last := rec.statements()[len(rec.statements())-1]; !strings.Contains(last, "HASH_AGG(TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME") {
		t.Errorf("fingerprint query %s", last)
	}
	if fp2, _ := Fingerprint(ctx, wh, "SHOP"); fp2 != fp1 {
		t.Error("shop and SHOP name the same database but fingerprint differently")
	}
	rec.setRows([][]any{{"17", "-4410279634529386911", "5", "8163245019937012203"}}, nil)
	if fp3, err := Fingerprint(ctx, wh, "shop"); err != nil || fp3 == fp1 {
		t.Errorf("fingerprint after a column was added: %v, unchanged = %v", err, fp3 == fp1)
	}
}

// TestBigQueryThroughTheWire reads two datasets' INFORMATION_SCHEMA, a
// nested RECORD included, through the real BigQuery client and quorum's
// BigQuery warehouse (dry run, then the job).
func TestBigQueryThroughTheWire(t *testing.T) {
	t.Parallel()
	rec, cfg := bigqueryFixture(t)
	wh, err := bigquery.Open(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	ctx := context.Background()
	s, err := Read(ctx, wh, "pub-data.shop, pub-data.web", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Each statement is sent twice: the dry run, then the job.
	sent := rec.statements()
	if len(sent) != 14 {
		t.Errorf("%d statements, want 7 dry runs and 7 jobs:\n%s", len(sent), strings.Join(sent, "\n"))
	}
	if len(s.Folders) != 2 || s.Folders[0].Path != "pub-data.shop" || s.Folders[1].Path != "pub-data.web" {
		t.Fatalf("folders %v", s.Folders)
	}
	orders := tableOf(t, s, "orders")
	if orders.FullName != "pub-data.shop.orders" || !strings.HasPrefix(orders.DDL, "CREATE TABLE `pub-data.shop.orders`\n(") {
		t.Errorf("orders: %s %q", orders.FullName, orders.DDL)
	}
	var cols []string
	for _, c := range orders.Columns {
		cols = append(cols, c.Name+" "+c.Type+" "+c.Description)
	}
	if got := strings.Join(cols, "|"); got != "order_id INT64 Order id.|amount NUMERIC |placed DATE Day placed." {
		t.Errorf("orders columns (ordinal order) %q", got)
	}
	if got := string(orders.SampleRows); got != `[{"order_id": 1, "amount": 12.5, "placed": "2024-01-02"}, {"order_id": 2, "amount": null, "placed": "2024-01-03"}]` {
		t.Errorf("orders sample rows %s", got)
	}
	sessions := tableOf(t, s, "sessions")
	var nested []string
	for _, c := range sessions.Nested {
		nested = append(nested, c.Name+" "+c.Type+" "+c.Description)
	}
	wantNested := []string{
		"session_id STRING Visit id.",
		"device STRUCT<web_info STRUCT<version STRING, browser STRING>, category STRING> ",
		"device.web_info STRUCT<version STRING, browser STRING> ",
		"device.web_info.version STRING ",
		"device.web_info.browser STRING ",
		"device.category STRING Device class.",
		"hits ARRAY<STRUCT<page STRING, ts INT64>> ",
		"hits.page STRING Page path.",
		"hits.ts INT64 ",
	}
	if strings.Join(nested, "\n") != strings.Join(wantNested, "\n") {
		t.Errorf("nested leaves (schema order, not field_path order):\n%s\nwant:\n%s", strings.Join(nested, "\n"), strings.Join(wantNested, "\n"))
	}
	if len(sessions.Columns) != 3 || sessions.Columns[0].Description != "Visit id." {
		t.Errorf("sessions columns %+v", sessions.Columns)
	}
	wantRows := `[{"session_id": "s1", "device": "{\"category\":\"desktop\",\"web_info\":{\"browser\":\"Firefox\",\"version\":\"1.2\"}}", ` +
		`"hits": "[{\"page\":\"/home\",\"ts\":1704189600},{\"page\":\"/cart\",\"ts\":1704189700}]"}, {"session_id": "s2", "device": null, "hits": "[]"}]`
	if got := string(sessions.SampleRows); got != wantRows {
		t.Errorf("sessions sample rows\n%s\nwant\n%s", got, wantRows)
	}
	if got := string(tableOf(t, s, "order_totals").SampleRows); got != `[{"order_id": 1, "total": 12.5}]` {
		t.Errorf("view sample rows (no TABLESAMPLE) %s", got)
	}

	// Round trip: nested_column_names/types and descriptions parallel to
	// them, as Spider 2.0's BigQuery files have them.
	meta := &dataset.Database{Name: "shop_web", Dialect: warehouse.BigQuery}
	loaded := roundTrip(t, s, meta)
	b, err := os.ReadFile(filepath.Join(loaded.Folders[1].Dir, "sessions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]any
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	if n := j["nested_column_names"].([]any); len(n) != 9 || n[5] != "device.category" || j["description"].([]any)[5] != "Device class." || j["table_fullname"] != "pub-data.web.sessions" {
		t.Errorf("sessions.json: %s", b)
	}

	fp1, err := Fingerprint(ctx, wh, "pub-data.shop,pub-data.web")
	if err != nil {
		t.Fatal(err)
	}
	if fp2, _ := Fingerprint(ctx, wh, "pub-data.shop,pub-data.web"); fp2 != fp1 {
		t.Error("the fingerprint of an unchanged catalogue moved")
	}
	rec.setRows(nil, []any{[]any{"pub-data.web", "10", "-771093711"}, []any{"pub-data.shop", "5", "4406270339"}})
	if fp3, err := Fingerprint(ctx, wh, "pub-data.shop,pub-data.web"); err != nil || fp3 == fp1 {
		t.Errorf("fingerprint after a field was added: %v, unchanged = %v", err, fp3 == fp1)
	}
}

// TestGoldenRenderings pins the prompts' table information built from the
// Snowflake and BigQuery fixtures, so a change in reading or rendering
// shows as a diff.
func TestGoldenRenderings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, sfCfg := snowflakeFixture(t)
	sf, err := snowflake.Open(sfCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	sfSchema, err := Read(ctx, sf, "shop", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, bqCfg := bigqueryFixture(t)
	bq, err := bigquery.Open(ctx, bqCfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bq.Close()
	bqSchema, err := Read(ctx, bq, "pub-data.shop,pub-data.web", Options{})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, map[string]string{
		"snowflake_shop":    render(sfSchema, &dataset.Database{Name: "SHOP", Dialect: warehouse.Snowflake}, dbinfo.DefaultOptions()),
		"bigquery_shop_web": render(bqSchema, &dataset.Database{Name: "shop_web", Dialect: warehouse.BigQuery}, dbinfo.DefaultOptions()),
	}, *update, "go test ./internal/warehouse/schema -run Golden -update")
}
