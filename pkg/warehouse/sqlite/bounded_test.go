package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// zeros is SQL for a text of n '0' characters, built inside the engine.
func zeros(n int) string { return fmt.Sprintf("hex(zeroblob(%d))", n/2) }

// hostileCalls are single calls that SQLite's built-ins run for minutes to
// hours in one VM step, where its interrupt cannot reach (measured with
// the built-ins: instr of a 2 MB text for a 1 MB needle 25 s, replace 39 s,
// LIKE of 2 MB against a 48 KB pattern 424 s). want is the replacement's
// answer when it finishes in linear time (within 10s, a bound for the race
// detector; it takes well under 1s), empty when it must be stopped at its
// 1s timeout.
var hostileCalls = []struct {
	name, sql, want string
}{
	{"instr", "SELECT instr(" + zeros(2<<20) + ", " + zeros(1<<20) + "||'x')", "0"},
	{"replace", "SELECT length(replace(" + zeros(2<<20) + ", " + zeros(1<<20) + "||'x', ''))", "2097152"},
	{"ltrim", "SELECT length(ltrim(" + zeros(2<<20) + ", replace(" + zeros(1<<20) + ", '0', '1')||'0'))", "0"},
	{"like", "SELECT " + zeros(4<<20) + " LIKE '%'||" + zeros(8000) + "||'x%'", ""},
	{"glob", "SELECT " + zeros(4<<20) + " GLOB '*'||" + zeros(8000) + "||'x*'", ""},
	// A malformed 6-byte character in the set takes SQLite's own scan of
	// the set at every position, which must stop when interrupted.
	{"rtrim malformed set", "SELECT length(rtrim(" + zeros(4<<20) + ", replace(" + zeros(1<<20) + ", '0', '1')||CAST(x'c3a9a9a9a9a9' AS TEXT)||'0'))", ""},
}

// TestHostileCallsEndAndFreeTheConnection: each hostile call, on a pool of
// one connection, either answers (instr, replace and trim run in linear
// time) or is interrupted inside the call at its 1s timeout, and the
// connection is back in the pool when Query returns: a SELECT 1 waiting
// for it meanwhile gets it. StopGrace is long, so it is the call that
// stopped, not Query giving up on it.
func TestHostileCallsEndAndFreeTheConnection(t *testing.T) {
	t.Parallel()
	for _, tt := range hostileCalls {
		t.Run(tt.name, func(t *testing.T) {
			db := open(t, Config{Path: fixture(t), MaxOpenConns: 1, StopGrace: time.Minute})
			hostile, ended := make(chan error, 1), make(chan struct{})
			var got string
			go func() {
				timeout := time.Second
				if tt.want != "" {
					timeout = 10 * time.Second
				}
				res, err := db.Query(context.Background(), tt.sql, warehouse.Limits{Timeout: timeout})
				if err == nil {
					got = res.Rows[0][0].CSV()
				}
				hostile <- err
				close(ended)
			}()
			waitHeld(db, ended)
			// Today's built-ins held the only connection for the whole
			// call: this query gave up waiting for it.
			if _, err := db.Query(context.Background(), "SELECT 1", warehouse.Limits{Timeout: 15 * time.Second}); err != nil {
				t.Fatalf("SELECT 1 while %s ran: %v, want it to get the connection once %s ended", tt.name, err, tt.name)
			}
			err := <-hostile
			var qe *warehouse.QueryError
			switch {
			case tt.want != "" && (err != nil || got != tt.want):
				t.Errorf("%s = %q, %v; want %s within its timeout", tt.name, got, err, tt.want)
			case tt.want == "" && (!errors.As(err, &qe) || !strings.Contains(qe.Message, "interrupted")):
				t.Errorf("%s: %v, want a query error saying it was interrupted", tt.name, err)
			}
			if n := db.db.Stats().InUse; n != 0 {
				t.Errorf("%d connections in use after %s returned, want 0 (not left running)", n, tt.name)
			}
		})
	}
}

// waitHeld waits until the hostile query holds the pool's connection or
// has already ended (done is closed).
func waitHeld(db *DB, done <-chan struct{}) {
	for db.db.Stats().InUse == 0 {
		select {
		case <-done:
			return
		case <-time.After(time.Millisecond):
		}
	}
}

// TestStepsQueryCannotStopAreLeft: a row of many long built-in calls is
// one stretch of VM steps with no interrupt check between them (the
// driver checks at jumps). Query answers at its timeout + grace that the
// query was interrupted, and the pool's only slot is free at once: a
// SELECT 1 waiting for it meanwhile gets it, on a new connection, long
// before the abandoned one (80 calls of about 40 ms) ends and is dropped.
func TestStepsQueryCannotStopAreLeft(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t), MaxOpenConns: 1, StopGrace: 100 * time.Millisecond})
	cols := strings.Repeat("length(hex(x)), ", 79) + "length(hex(x))"
	sql := "WITH t(x) AS MATERIALIZED (SELECT zeroblob(8000000)) SELECT " + cols + " FROM t"
	hostile, ended := make(chan error, 1), make(chan struct{})
	go func() {
		_, err := db.Query(context.Background(), sql, warehouse.Limits{Timeout: 200 * time.Millisecond})
		hostile <- err
		close(ended)
	}()
	waitHeld(db, ended)
	// Today's Query held the only connection until the row was done.
	if _, err := db.Query(context.Background(), "SELECT 1", warehouse.Limits{Timeout: 1500 * time.Millisecond}); err != nil {
		t.Errorf("SELECT 1 while 80 long calls ran: %v, want the slot freed when they were interrupted", err)
	}
	var qe *warehouse.QueryError
	if err := <-hostile; !errors.As(err, &qe) || !strings.Contains(qe.Message, "interrupted") {
		t.Errorf("80 long calls in one row: %v, want a query error saying it was interrupted", err)
	}
}

// TestRunBounded: work that ends is waited for; work still running grace
// after ctx ended is left, and its outcome arrives later on late.
func TestRunBounded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	out, late := runBounded(ctx, time.Hour, func() int { return 1 })
	if out != 1 || late != nil {
		t.Errorf("finished work: %d, late %v; want 1 and no late", out, late)
	}
	release := make(chan struct{})
	cancel()
	out, late = runBounded(ctx, time.Millisecond, func() int { <-release; return 2 })
	if out != 0 || late == nil {
		t.Fatalf("stuck work: %d, late %v; want it left", out, late)
	}
	close(release)
	if got := <-late; got != 2 {
		t.Errorf("late outcome %d, want 2", got)
	}
}

// TestLimitsOnEveryConnection: the per-connection limits hold on every
// query, and refuse what they bound with the engine's error.
func TestLimitsOnEveryConnection(t *testing.T) {
	t.Parallel()
	db := open(t, Config{Path: fixture(t)})
	for _, tt := range []struct{ name, sql, want string }{
		{"expression depth", "SELECT 1" + strings.Repeat("+1", 600), "too large"},
		{"compound select", "SELECT 1" + strings.Repeat(" UNION ALL SELECT 1", 200), "too many terms in compound SELECT"},
		{"function arguments", "SELECT max(" + strings.TrimSuffix(strings.Repeat("1,", 128), ",") + ")", "too many arguments"},
		{"LIKE pattern", "SELECT 'a' LIKE " + zeros(likePatternLength+2), "pattern too complex"},
	} {
		_, err := db.Query(context.Background(), tt.sql, warehouse.Limits{})
		var qe *warehouse.QueryError
		if !errors.As(err, &qe) || !strings.Contains(qe.Message, tt.want) {
			t.Errorf("%s: %v, want a query error saying %q", tt.name, err, tt.want)
		}
	}
	res, err := db.Query(context.Background(), "SELECT max("+strings.TrimSuffix(strings.Repeat("1,", 127), ",")+") AS m", warehouse.Limits{})
	if err != nil || res.Rows[0][0].CSV() != "1" {
		t.Errorf("127 arguments: %v, want them allowed", err)
	}
	// The rest are read back: the guard refuses longer SQL first, and
	// ATTACH is refused by the authorizer too.
	conn, err := db.db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := setLimits(conn, 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, l := range connLimits() {
		if got, err := msqlite.Limit(conn, l.id, -1); err != nil || got != l.value {
			t.Errorf("%s = %d (%v), want %d", l.what, got, err, l.value)
		}
	}
}

// TestErrorsNameTheDatabaseNotItsFile: no error a tenant or the model can
// see holds the file's path; pragma_database_list, whose file column is
// the path, is refused.
func TestErrorsNameTheDatabaseNotItsFile(t *testing.T) {
	t.Parallel()
	path := fixture(t)
	dir := filepath.Dir(path)
	db := open(t, Config{Path: path})
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	checks := map[string]error{}
	_, checks["a cancelled query"] = db.Query(cancelled, "SELECT 1", warehouse.Limits{})
	for _, q := range []string{"SELECT * FROM pragma_database_list", "PRAGMA database_list", "SELECT file FROM pragma_database_list()"} {
		_, err := db.Query(context.Background(), q, warehouse.Limits{})
		checks[q] = err
		var qe *warehouse.QueryError
		if !errors.As(err, &qe) || !strings.Contains(qe.Message, "not authorized") && !qe.Refused {
			t.Errorf("%s: %v, want it refused", q, err)
		}
	}
	checks["an engine message naming the file"] = db.hide(fmt.Errorf("unable to open database file %s (%s-journal)", db.Path(), db.Path()))
	_, checks["a missing file"] = Open(Config{Path: filepath.Join(dir, "gone.sqlite")})
	closed, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	_, checks["a closed pool"] = closed.Query(context.Background(), "SELECT 1", warehouse.Limits{})
	for what, err := range checks {
		switch {
		case err == nil:
			t.Errorf("%s: no error", what)
		case strings.Contains(err.Error(), dir):
			t.Errorf("%s: %q shows the folder %s", what, err, dir)
		}
	}
	if msg := checks["an engine message naming the file"].Error(); msg != "unable to open database file shop (shop-journal)" {
		t.Errorf("engine message = %q, want the path replaced by the database's name", msg)
	}
	if msg := checks["a missing file"].Error(); !strings.Contains(msg, "gone.sqlite") {
		t.Errorf("missing file: %q, want it to name the file", msg)
	}
}

// TestReplacedFunctionsAnswerAsTheBuiltIns compares instr, replace, the
// trims, LIKE (with and without ESCAPE) and GLOB on quorum's connections
// with SQLite's built-ins on a plain connection, over fixed edge cases and
// random arguments of every type: malformed UTF-8, NUL bytes, wildcards,
// numbers (SQLite's own text for REALs), blobs and NULLs.
func TestReplacedFunctionsAnswerAsTheBuiltIns(t *testing.T) {
	t.Parallel()
	path := fixture(t)
	db := open(t, Config{Path: path})
	plain, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	exprs := []string{
		"instr(amount, '.')", "replace(amount, '.', ',')", "trim(amount, '0.')", "instr(id, 1)",
		"amount LIKE '%.5'", "amount GLOB '*5'", "replace(customer, 'n', 'NN')", "customer LIKE 'A%'",
		"instr(1e20, 'e')", "replace(0.1, '1', '2')", "replace(1.0/3, '3', '')", "ltrim(-0.0, '-')",
		"replace(x'616263', 'b', 'x')", "instr(x'00ff00', x'ff')", "instr('abc', x'62')", "x'61' LIKE 'a'",
		"'abc' LIKE 'a\\%' ESCAPE '\\'", "'a%c' LIKE 'a\\%c' ESCAPE '\\'", "'abc' LIKE 'abc' ESCAPE 'ab'",
		"'abc' LIKE 'a%' ESCAPE NULL", "'a_c' LIKE 'a%_c' ESCAPE '%'", "'x' GLOB '[^a-c]'", "']' GLOB '[]]'",
		"'b' GLOB '[a-]'", "'-' GLOB '[a-]'", "'é' GLOB '[à-ê]'", "'abcabc' GLOB '*[c]'", "like('a%')",
		"'ÄB' LIKE 'äb'", "'AB' LIKE 'ab'", "replace('aaa', 'aa', 'b')", "replace('abc', '', NULL)",
		"replace('abc', 'b', NULL)", "trim('xxaxx', '')", "trim('aé', 'é')", "rtrim(CAST(x'61c3a980' AS TEXT), CAST(x'c3a9' AS TEXT))",
		"ltrim(CAST(x'c3a9a9' AS TEXT), CAST(x'c3' AS TEXT)||'a'||CAST(x'c3a9' AS TEXT))",
		"instr(CAST(x'61c3a962' AS TEXT), 'b')", "instr(CAST(x'61a962' AS TEXT), CAST(x'a962' AS TEXT))",
		"instr(CAST(x'a962' AS TEXT), CAST(x'a9' AS TEXT))", "instr(CAST(x'610062' AS TEXT), 'b')",
	}
	rng := rand.New(rand.NewPCG(50, 2))
	for range 600 {
		exprs = append(exprs, randomCall(rng))
	}
	for _, e := range exprs {
		q := "SELECT typeof(r), hex(r) FROM (SELECT " + e + " AS r)"
		want, wantErr := plainAnswer(plain, q)
		res, err := db.Query(context.Background(), q, warehouse.Limits{})
		switch {
		case (err != nil) != (wantErr != nil):
			t.Errorf("%s: error %v, built-in's %v", e, err, wantErr)
		case err == nil && res.Rows[0][0].CSV()+" "+res.Rows[0][1].CSV() != want:
			t.Errorf("%s = %s %s, built-in's %s", e, res.Rows[0][0].CSV(), res.Rows[0][1].CSV(), want)
		}
	}
}

func plainAnswer(db *sql.DB, q string) (string, error) {
	var typ, h string
	if err := db.QueryRow(q).Scan(&typ, &h); err != nil {
		return "", err
	}
	return typ + " " + h, nil
}

// randomCall is one call of a replaced function on random arguments.
func randomCall(rng *rand.Rand) string {
	a := func() string { return randomArg(rng) }
	switch rng.IntN(9) {
	case 0:
		return "instr(" + a() + ", " + a() + ")"
	case 1:
		return "replace(" + a() + ", " + a() + ", " + a() + ")"
	case 2:
		return "trim(" + a() + ", " + a() + ")"
	case 3:
		return "ltrim(" + a() + ", " + a() + ")"
	case 4:
		return "rtrim(" + a() + ", " + a() + ")"
	case 5:
		return a() + " LIKE " + a()
	case 6:
		return a() + " LIKE " + a() + " ESCAPE " + a()
	case 7:
		return a() + " GLOB " + a()
	}
	return a() + " NOT LIKE " + a()
}

// randomArg is a literal: mostly text from a small alphabet of
// wildcards, cases, multi-byte, malformed and NUL bytes.
func randomArg(rng *rand.Rand) string {
	switch rng.IntN(12) {
	case 0:
		return "NULL"
	case 1:
		return fmt.Sprint(rng.IntN(200) - 50)
	case 2:
		return []string{"0.5", "3.0", "1e20", "-2.25", "0.1", "1.0/3", "100.0"}[rng.IntN(7)]
	case 3:
		return "x'" + hex.EncodeToString([]byte(randomText(rng))) + "'"
	}
	t := randomText(rng)
	if rng.IntN(3) == 0 {
		return "CAST(x'" + hex.EncodeToString([]byte(t)) + "' AS TEXT)"
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(t, "'", "''"), "\x00", "") + "'"
}

func randomText(rng *rand.Rand) string {
	alphabet := []string{"a", "b", "A", "B", "%", "_", "*", "?", "[", "]", "^", "-", "\\", "é", "É", "ß",
		"\x80", "\xc3", "\xc3\xa9\xa9", "\x00", "0", ".", " ", "ab", "ba"}
	var b strings.Builder
	for range rng.IntN(7) {
		b.WriteString(alphabet[rng.IntN(len(alphabet))])
	}
	return b.String()
}

// BenchmarkHostileCallStops reports how long each hostile call takes on
// quorum's connections with a 1s timeout (ns/op): the linear ones well
// under it, the interrupted ones about 1s.
func BenchmarkHostileCallStops(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "shop.sqlite")
	w, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := w.Exec("CREATE TABLE t (x)"); err != nil {
		b.Fatal(err)
	}
	w.Close()
	db, err := Open(Config{Path: path, MaxOpenConns: 1, StopGrace: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, tt := range hostileCalls {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				_, _ = db.Query(context.Background(), tt.sql, warehouse.Limits{Timeout: time.Second})
			}
		})
	}
}
