package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // writable connection to build fixtures

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// fixture writes a small database and returns its path.
func fixture(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shop.sqlite")
	w, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, s := range []string{
		`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT, amount REAL, placed DATE, at TIMESTAMP, paid BOOLEAN, note TEXT, blob BLOB)`,
		`INSERT INTO orders VALUES (1, 'ann', 10.5, '2024-01-02', '2024-01-02T10:00:00Z', 1, 'a,b', x'00ff')`,
		`INSERT INTO orders VALUES (2, 'bob', 3, '2024-01-03', '2024-01-03 11:30:00.250', 0, NULL, NULL)`,
		`INSERT INTO orders VALUES (3, 'cy', NULL, 'not a date', NULL, NULL, 'say "hi"', NULL)`,
	} {
		if _, err := w.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	return path
}

func open(t *testing.T, cfg Config) *DB {
	t.Helper()
	db, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func fileHash(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestQueryTypesAndCSV(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t)})
	res, err := db.Query(context.Background(), "SELECT id, customer, amount, placed, at, paid, note, blob FROM orders ORDER BY id;", warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := "id,customer,amount,placed,at,paid,note,blob\n" +
		"1,ann,10.5,2024-01-02,2024-01-02T10:00:00Z,1,\"a,b\",b'\\x00\\xff'\n" +
		"2,bob,3.0,2024-01-03,2024-01-03 11:30:00.250,0,,\n" +
		"3,cy,,not a date,,,\"say \"\"hi\"\"\",\n"
	if got := res.CSV(); got != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", got, want)
	}
	if res.RowCount() != 3 || res.Truncated {
		t.Errorf("rows %d truncated %v", res.RowCount(), res.Truncated)
	}
	if k := res.Rows[0][0].Kind; k != warehouse.Int {
		t.Errorf("id kind %v, want Int", k)
	}
	if k := res.Rows[0][2].Kind; k != warehouse.Float {
		t.Errorf("amount kind %v, want Float", k)
	}
}

func TestDateTextKeptThroughExpressionsAndOrder(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t)})
	res, err := db.Query(context.Background(), "WITH x AS (SELECT placed FROM orders) SELECT placed AS p FROM x ORDER BY placed DESC -- newest first", warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.CSV(), "p\nnot a date\n2024-01-03\n2024-01-02\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestSingleEmptyFieldIsQuoted(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t)})
	res, err := db.Query(context.Background(), "SELECT note FROM orders WHERE id = 2", warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.CSV(), "note\n\"\"\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestReadOnlyRefusals(t *testing.T) {
	t.Parallel()
	path := fixture(t)
	before := fileHash(t, path)
	db := open(t, Config{Path: path})
	dir := filepath.Dir(path)
	attached := filepath.Join(dir, "new.sqlite")
	tests := []struct {
		name string
		sql  string
	}{
		{"insert", "INSERT INTO orders(id) VALUES (9)"},
		{"update", "UPDATE orders SET amount = 0"},
		{"delete", "DELETE FROM orders"},
		{"drop", "DROP TABLE orders"},
		{"create", "CREATE TABLE x(a)"},
		{"attach new file", "ATTACH DATABASE '" + attached + "' AS n"},
		{"attach rwc uri", "ATTACH 'file:" + attached + "?mode=rwc' AS n"},
		{"query_only off", "PRAGMA query_only=0"},
		{"insert through cte", "WITH x AS (SELECT 1) INSERT INTO orders(id) SELECT 9 FROM x"},
		{"delete through cte", "WITH x AS (SELECT 1) DELETE FROM orders"},
		{"multi statement", "SELECT 1; DELETE FROM orders"},
		{"multi statement, both reads", "SELECT 1; SELECT 2"},
		{"hidden after comment", "SELECT 1 /* ; */; DROP TABLE orders"},
		{"vacuum into", "VACUUM INTO '" + attached + "'"},
		{"empty", "  -- nothing\n"},
		{"load_extension", "SELECT load_extension('x')"},
		{"writefile", "SELECT writefile('" + attached + "', 'x')"},
		{"bracket identifier hides a statement", "SELECT [a--b] FROM orders; DROP TABLE orders"},
		{"writable_schema", "PRAGMA writable_schema=1"},
		{"replace into", "REPLACE INTO orders(id) VALUES (1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := db.Query(context.Background(), tt.sql, warehouse.Limits{})
			var qe *warehouse.QueryError
			if !errors.As(err, &qe) || !qe.Refused {
				t.Fatalf("Query(%q) = %v, want a refused *QueryError", tt.sql, err)
			}
			if !strings.Contains(qe.Message, "read-only") {
				t.Errorf("message %q does not tell what is allowed", qe.Message)
			}
		})
	}
	if _, err := os.Stat(attached); !os.IsNotExist(err) {
		t.Errorf("a refused statement created %s", attached)
	}
	if fileHash(t, path) != before {
		t.Error("the database file changed")
	}
}

// TestAuthorizerAloneRefusesWrites bypasses the statement guard to show the
// second layer holds by itself: mode=ro does not stop ATTACH or turning
// query_only off, the authorizer does.
func TestAuthorizerAloneRefusesWrites(t *testing.T) {
	t.Parallel()
	path := fixture(t)
	before := fileHash(t, path)
	db := open(t, Config{Path: path})
	attached := filepath.Join(filepath.Dir(path), "side.sqlite")
	for _, s := range []string{
		"ATTACH DATABASE '" + attached + "' AS n",
		"PRAGMA query_only=0",
		"WITH x AS (SELECT 1) INSERT INTO orders(id) SELECT 9 FROM x",
		"INSERT INTO orders(id) VALUES (10)",
		"SELECT load_extension('x')",
	} {
		conn, err := db.db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.scan(context.Background(), conn, s, warehouse.Limits{})
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), "not authorized") {
			t.Errorf("%q: err = %v, want authorization denied", s, err)
		}
	}
	if _, err := os.Stat(attached); !os.IsNotExist(err) {
		t.Errorf("ATTACH created %s", attached)
	}
	if fileHash(t, path) != before {
		t.Error("the database file changed")
	}
	// Reads the exploration prompts rely on still work.
	res, err := db.Query(context.Background(),
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3) SELECT (SELECT count(*) FROM sqlite_master), (SELECT count(*) FROM pragma_table_info('orders')), max(i) FROM n",
		warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.CSV(); !strings.HasSuffix(got, "1,8,3\n") {
		t.Errorf("reads: got %q", got)
	}
}

// TestWordsThatStartStatementsElsewhereAreIdentifiers: columns and CTEs
// named begin, call, load, use, copy and a REPLACE() call are plain reads.
func TestWordsThatStartStatementsElsewhereAreIdentifiers(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t)})
	res, err := db.Query(context.Background(),
		"WITH copy AS (SELECT id AS begin, id + 1 AS call, id + 2 AS \"load\", [id] AS [use] FROM orders WHERE id = 1)\n"+
			"SELECT begin, call, load, use, REPLACE('a-b', '-', '+') AS replace FROM copy; -- the end",
		warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.CSV(), "begin,call,load,use,replace\n1,2,3,1,a+b\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestContextDeadlineInterruptsQuery(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t), QueryTimeout: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	// The query never ends by itself: its returning DeadlineExceeded is
	// the deadline interrupting it (how soon is not asserted: a loaded
	// machine is slower to get there).
	_, err := db.Query(ctx, "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r", warehouse.Limits{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
}

func TestQueryTimeoutIsAQueryError(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t), QueryTimeout: 200 * time.Millisecond})
	_, err := db.Query(context.Background(), "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM r) SELECT count(*) FROM r", warehouse.Limits{})
	var qe *warehouse.QueryError
	if !errors.As(err, &qe) || !strings.Contains(qe.Message, "interrupted") {
		t.Fatalf("err = %v, want an interrupted *QueryError", err)
	}
}

func TestEngineErrorVerbatim(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t)})
	_, err := db.Query(context.Background(), "SELECT nope FROM orders", warehouse.Limits{})
	var qe *warehouse.QueryError
	if !errors.As(err, &qe) || qe.Refused || !strings.Contains(qe.Message, "no such column: nope") {
		t.Fatalf("err = %#v, want the engine's no such column error", err)
	}
}

func TestLimitsAreReported(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t)})
	q := "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000) SELECT i, 'xxxxxxxxxx' FROM n"
	tests := []struct {
		lim  warehouse.Limits
		rows int
		by   string
	}{
		{warehouse.Limits{}, 1000, ""},
		{warehouse.Limits{MaxRows: 10}, 10, "rows"},
		{warehouse.Limits{MaxBytes: 180}, 10, "bytes"},
		{warehouse.Limits{MaxRows: 1000}, 1000, ""},
	}
	for _, tt := range tests {
		res, err := db.Query(context.Background(), q, tt.lim)
		if err != nil {
			t.Fatal(err)
		}
		if res.RowCount() != tt.rows || res.Truncated != (tt.by != "") || res.TruncatedBy != tt.by {
			t.Errorf("%+v: rows %d truncated %v by %q, want %d by %q", tt.lim, res.RowCount(), res.Truncated, res.TruncatedBy, tt.rows, tt.by)
		}
	}
}

func TestConcurrentQueriesAndSet(t *testing.T) {
	t.Parallel()
	path := fixture(t)
	set := &Set{Base: Config{MaxOpenConns: 2}}
	t.Cleanup(func() { set.Close() })
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := set.Get(path)
			if err != nil {
				errs <- err
				return
			}
			res, err := db.Query(context.Background(), "SELECT count(*) FROM orders", warehouse.Limits{})
			if err != nil {
				errs <- err
				return
			}
			if res.Rows[0][0].Int != 3 {
				errs <- errors.New("wrong count")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	a, _ := set.Get(path)
	b, _ := set.Get(filepath.Join(filepath.Dir(path), ".", "shop.sqlite"))
	if a != b {
		t.Error("Set opened two pools for one file")
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	_, err := Open(Config{Path: filepath.Join(t.TempDir(), "missing.sqlite")})
	if err == nil || !strings.Contains(err.Error(), "missing.sqlite") {
		t.Errorf("err = %v, want it to name the missing file", err)
	}
	_, err = Open(Config{Path: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("err = %v, want a directory error", err)
	}
}
