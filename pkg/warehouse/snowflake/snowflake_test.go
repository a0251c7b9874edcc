package snowflake

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// fixture speaks the parts of Snowflake's REST API that gosnowflake uses
// (login-request, query-request with JSON rowsets and result chunks,
// abort-request, session delete), written from the driver's protocol.
type fixture struct {
	mu      sync.Mutex
	logins  []map[string]any
	queries []map[string]any
	aborts  int
	srv     *httptest.Server
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /session/v1/login-request", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.logins = append(f.logins, body)
		f.mu.Unlock()
		writeJSON(w, map[string]any{"success": true, "data": map[string]any{"token": "session-token", "masterToken": "master",
			"sessionId": 42, "validityInSeconds": 3600, "masterValidityInSeconds": 14400,
			"parameters": []map[string]any{{"name": "TIMEZONE", "value": "UTC"}}}})
	})
	mux.HandleFunc("POST /queries/v1/query-request", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.queries = append(f.queries, body)
		f.mu.Unlock()
		sqlText, _ := body["sqlText"].(string)
		switch {
		case strings.Contains(sqlText, "slow"):
			<-r.Context().Done() // a long query: the client gives up
		case strings.Contains(sqlText, "nope"):
			writeJSON(w, map[string]any{"success": false, "code": "000904", "message": "SQL compilation error: error line 1 at position 7\ninvalid identifier 'NOPE'",
				"data": map[string]any{"errorCode": "000904", "sqlState": "42000", "queryId": "01b2-err"}})
		default:
			writeJSON(w, map[string]any{"success": true, "data": map[string]any{
				"queryId": "01b2-ok", "queryResultFormat": "json", "total": 4, "returned": 2,
				"rowtype": []map[string]any{
					{"name": "ID", "type": "fixed", "scale": 0, "precision": 38, "nullable": false},
					{"name": "AMOUNT", "type": "fixed", "scale": 2, "precision": 10, "nullable": true},
					{"name": "RATIO", "type": "real", "nullable": true},
					{"name": "NAME", "type": "text", "nullable": true},
					{"name": "D", "type": "date", "nullable": true},
					{"name": "TS", "type": "timestamp_ntz", "scale": 9, "nullable": true},
					{"name": "V", "type": "variant", "nullable": true},
					{"name": "OK", "type": "boolean", "nullable": true},
				},
				"rowset": [][]any{
					{"1", "12.50", "0.25", "ann", "19724", "1704189600.000000000", "{\n  \"a\": 1\n}", "1"},
					{"2", nil, "1.5", "bob", "19725", "1704189600.250000000", "[1,2]", "0"},
				},
				"chunks": []map[string]any{{"url": f.srv.URL + "/chunk/1", "rowCount": 2, "uncompressedSize": 100, "compressedSize": 100}},
			}})
		}
	})
	mux.HandleFunc("GET /chunk/1", func(w http.ResponseWriter, r *http.Request) {
		// Result chunks are rows without the enclosing brackets.
		io.WriteString(w, `["3","0.10","2","cy","19726","1704189600.000000000",null,"1"],["4","7.00","3","dee","19727","1704189600.000000000","\"s\"","0"]`)
	})
	mux.HandleFunc("POST /queries/v1/abort-request", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.aborts++
		f.mu.Unlock()
		writeJSON(w, map[string]any{"success": true})
	})
	mux.HandleFunc("POST /session", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, map[string]any{"success": true}) })
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *fixture) config(t *testing.T) Config {
	u, _ := url.Parse(f.srv.URL)
	port, _ := strconv.Atoi(u.Port())
	return Config{Account: "acme", User: "quorum", Password: "s3cret", Role: "READER", Warehouse: "WH",
		Host: u.Hostname(), Port: port, Protocol: "http", StatementTimeout: 90 * time.Second}
}

func TestQueryWithChunksAgainstFixture(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db, err := Open(f.config(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := warehouse.WithLabels(context.Background(), map[string]string{"run": "r1", "example": "sf001"})
	res, err := db.Query(ctx, "SELECT * FROM DB.S.T;", warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := "ID,AMOUNT,RATIO,NAME,D,TS,V,OK\n" +
		"1,12.50,0.25,ann,2024-01-02,2024-01-02 10:00:00,\"{\n  \"\"a\"\": 1\n}\",True\n" +
		"2,,1.5,bob,2024-01-03,2024-01-02 10:00:00.250000,\"[1,2]\",False\n" +
		"3,0.10,2.0,cy,2024-01-04,2024-01-02 10:00:00,,True\n" +
		"4,7.00,3.0,dee,2024-01-05,2024-01-02 10:00:00,\"\"\"s\"\"\",False\n"
	if got := res.CSV(); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	login := f.logins[0]["data"].(map[string]any)
	params, _ := login["SESSION_PARAMETERS"].(map[string]any)
	if login["LOGIN_NAME"] != "quorum" || login["ACCOUNT_NAME"] != "acme" || params["STATEMENT_TIMEOUT_IN_SECONDS"] != "90" ||
		params["MULTI_STATEMENT_COUNT"] != "1" {
		t.Errorf("login request %v", login)
	}
	qp, _ := f.queries[0]["parameters"].(map[string]any)
	if f.queries[0]["sqlText"] != "SELECT * FROM DB.S.T" || qp["QUERY_TAG"] != "quorum example=sf001 run=r1" ||
		qp["MULTI_STATEMENT_COUNT"] != float64(1) {
		t.Errorf("query request %v", f.queries[0])
	}
}

func TestEngineErrorAndGuard(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db, _ := Open(f.config(t))
	defer db.Close()
	_, err := db.Query(context.Background(), "SELECT nope FROM t", warehouse.Limits{})
	var qe *warehouse.QueryError
	if !errors.As(err, &qe) || !strings.HasPrefix(qe.Message, "##ERROR##000904 (42000): SQL compilation error") || !strings.Contains(qe.Message, "invalid identifier 'NOPE'") {
		t.Fatalf("err = %v", err)
	}
	before := len(f.queries)
	for _, q := range []string{"DROP TABLE t", "SELECT 1; DELETE FROM t", "WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "SELECT $$;$$; DROP TABLE t",
		"SELECT SYSTEM$CANCEL_ALL_QUERIES(1)", "CALL p()", "EXECUTE IMMEDIATE 'DROP TABLE t'", "SELECT 1 // x\n; DROP TABLE t", "USE ROLE ACCOUNTADMIN"} {
		_, err := db.Query(context.Background(), q, warehouse.Limits{})
		if !errors.As(err, &qe) || !qe.Refused {
			t.Errorf("%q: %v, want refused before reaching Snowflake", q, err)
		}
	}
	if len(f.queries) != before {
		t.Error("a refused statement reached the server")
	}
	// Words that start statements elsewhere are plain identifiers here.
	if _, err := db.Query(context.Background(), "SELECT begin, call, copy, REPLACE(use, 'a', 'b') FROM t // note", warehouse.Limits{}); err != nil {
		t.Errorf("a read with columns named begin/call/copy/use: %v", err)
	}
}

func TestCancelAbortsTheQueryOnTheServer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	db, _ := Open(f.config(t))
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	_, err := db.Query(ctx, "SELECT slow FROM t", warehouse.Limits{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	wait.For(t, time.Minute, "an abort-request to reach the server after the context ended", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.aborts > 0
	})
}

func TestKeyPairLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	path := filepath.Join(t.TempDir(), "rsa_key.p8")
	os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	cfg := f.config(t)
	cfg.Password, cfg.PrivateKeyFile = "", path
	db, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Query(context.Background(), "SELECT 1", warehouse.Limits{}); err != nil {
		t.Fatal(err)
	}
	login := f.logins[0]["data"].(map[string]any)
	if login["AUTHENTICATOR"] != "SNOWFLAKE_JWT" || strings.Count(login["TOKEN"].(string), ".") != 2 {
		t.Errorf("key-pair login sent %v", login)
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SNOWFLAKE_ACCOUNT": "acme", "SNOWFLAKE_USER": "u", "SNOWFLAKE_PASSWORD": "pw", "SNOWFLAKE_ROLE": "R"}
	c := Config{Role: "FROMFLAG"}.FromEnv(func(k string) string { return env[k] })
	if c.Account != "acme" || c.Role != "FROMFLAG" || c.Check() != nil {
		t.Errorf("env config %+v: %v", c, c.Check())
	}
	if s := c.String(); strings.Contains(s, "pw") || !strings.Contains(s, "auth=password") {
		t.Errorf("String leaks or lacks: %s", s)
	}
	dsn, err := c.DSN()
	if err != nil || !strings.HasPrefix(dsn, "u:pw@acme") || !strings.Contains(dsn, "STATEMENT_TIMEOUT_IN_SECONDS=300") {
		t.Errorf("DSN %q %v", dsn, err)
	}
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "missing account (SNOWFLAKE_ACCOUNT), user (SNOWFLAKE_USER), a password, private_key_file or oauth_token"},
		{Config{Account: "a", User: "u", Password: "p", OAuthToken: "t"}, "only one of"},
	}
	for _, tt := range tests {
		if err := tt.cfg.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	// Spider 2.0's snowflake_credential.json loads as it is.
	path := filepath.Join(t.TempDir(), "snowflake_credential.json")
	os.WriteFile(path, []byte(`{"user": "U", "password": "P", "account": "RSRSBDK-YDB67606"}`), 0o600)
	fc, err := LoadFile(path)
	if err != nil || fc.User != "U" || fc.Account != "RSRSBDK-YDB67606" || fc.Check() != nil {
		t.Errorf("credential file: %+v %v", fc, err)
	}
}

func TestToValue(t *testing.T) {
	t.Parallel()
	ts := time.Date(2024, 1, 2, 10, 0, 0, 250_000_000, time.UTC)
	tz := time.Date(2024, 1, 2, 10, 0, 0, 0, time.FixedZone("", -8*3600))
	tests := []struct {
		v     any
		typ   string
		scale int64
		want  string
	}{
		{"42", "FIXED", 0, "42"},
		{"99999999999999999999999", "FIXED", 0, "99999999999999999999999"},
		{"12.50", "FIXED", 2, "12.50"},
		{"0.1", "REAL", 0, "0.1"},
		{"1e+20", "REAL", 0, "1e+20"},
		{true, "BOOLEAN", 0, "True"},
		{ts, "DATE", 0, "2024-01-02"},
		{ts, "TIME", 0, "10:00:00.250000"},
		{ts, "TIMESTAMP_NTZ", 9, "2024-01-02 10:00:00.250000"},
		{tz, "TIMESTAMP_TZ", 9, "2024-01-02 10:00:00-08:00"},
		{[]byte{0xde, 0xad}, "BINARY", 0, `b'\xde\xad'`},
		{"{\"a\":1}", "VARIANT", 0, `{"a":1}`},
		{"POINT(1 2)", "GEOGRAPHY", 0, "POINT(1 2)"},
		{nil, "TEXT", 0, ""},
	}
	for _, tt := range tests {
		if got := ToValue(tt.v, tt.typ, tt.scale).CSV(); got != tt.want {
			t.Errorf("ToValue(%v, %s) = %q, want %q", tt.v, tt.typ, got, tt.want)
		}
	}
	if FormatError(2, "0A000", "000002 (0A000): Unsupported feature 'x'.") != "##ERROR##000002 (0A000): Unsupported feature 'x'." {
		t.Error("FormatError doubles the code")
	}
}

// TestLive runs against a real account when SNOWFLAKE_ACCOUNT and
// SNOWFLAKE_USER are set (with SNOWFLAKE_PASSWORD, _PRIVATE_KEY_FILE or
// _OAUTH_TOKEN).
func TestLive(t *testing.T) {
	cfg := Config{}.FromEnv(os.Getenv)
	if cfg.Account == "" || cfg.Check() != nil {
		t.Skip("live Snowflake test skipped: set SNOWFLAKE_ACCOUNT, SNOWFLAKE_USER and SNOWFLAKE_PASSWORD (or SNOWFLAKE_PRIVATE_KEY_FILE / SNOWFLAKE_OAUTH_TOKEN) to run it")
	}
	db, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Query(context.Background(), "SELECT 1 AS ONE, CURRENT_DATE() AS D", warehouse.Limits{})
	if err != nil || res.RowCount() != 1 || res.Rows[0][0].Int != 1 {
		t.Fatalf("live query: %v %+v", err, res)
	}
	// Past the guard, the session's MULTI_STATEMENT_COUNT=1 makes the
	// server itself refuse a second statement.
	if rows, err := db.db.QueryContext(context.Background(), "SELECT 1; SELECT 2"); err == nil {
		rows.Close()
		t.Error("Snowflake ran two statements with MULTI_STATEMENT_COUNT=1")
	}
}

// TestQueryHistoryByOperatorsChoice: the account's query history (every
// user's SQL) is refused before it reaches Snowflake unless the operator's
// config allows it.
func TestQueryHistoryByOperatorsChoice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const history = "SELECT query_text FROM snowflake.account_usage.query_history"
	for _, allow := range []bool{false, true} {
		cfg := f.config(t)
		cfg.AllowQueryHistory = allow
		db, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := len(f.queries)
		_, err = db.Query(context.Background(), history, warehouse.Limits{})
		db.Close()
		var qe *warehouse.QueryError
		refused := errors.As(err, &qe) && qe.Refused
		if refused == allow || (len(f.queries) > before) != allow {
			t.Errorf("allow_query_history=%v: %v (reached the server: %v); want refused only when not allowed", allow, err, len(f.queries) > before)
		}
	}
}
