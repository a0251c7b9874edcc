package sqltext

import (
	"reflect"
	"strings"
	"testing"
)

// TestClassifyRefusesHostileStatements: every statement here could change
// data, schema, session state or the system, or hides a second statement
// from a naive scanner; each is refused with a reason naming it.
func TestClassifyRefusesHostileStatements(t *testing.T) {
	t.Parallel()
	common := []struct{ sql, want string }{
		{"INSERT INTO t VALUES (1)", "INSERT is not a read statement"},
		{"update t set a = 1", "UPDATE is not a read statement"},
		{"DELETE FROM t", "DELETE is not a read statement"},
		{"MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE", "MERGE"},
		{"CREATE TABLE x AS SELECT 1", "CREATE TABLE is not a read statement"},
		{"CREATE OR REPLACE VIEW v AS SELECT 1", "CREATE OR REPLACE VIEW"},
		{"DROP TABLE t", "DROP TABLE"},
		{"ALTER TABLE t ADD COLUMN b INT", "ALTER TABLE"},
		{"TRUNCATE TABLE t", "TRUNCATE"},
		{"GRANT SELECT ON t TO r", "GRANT"},
		{"CALL p()", "CALL is not a read statement"},
		{"EXECUTE IMMEDIATE 'DROP TABLE t'", "EXECUTE IMMEDIATE"},
		{"BEGIN", "BEGIN"},
		{"COMMIT", "COMMIT"},
		{"USE DATABASE other", "USE"},
		{"  -- only a comment\n", "empty"},
		{";;", "empty"},
		{"SELECT 1; DELETE FROM t", "found 2 statements"},
		{"SELECT 'a;'; DELETE FROM t", "found 2 statements"},
		{"SELECT 1 /* ; */; DROP TABLE t", "found 2 statements"},
		{"SELECT 1 -- x\n; DROP TABLE t", "found 2 statements"},
		// Text that engines could read differently is refused outright.
		{"SELECT 1 --\r; DROP TABLE t", "carriage return"},
		{"SELECT 1 --\r'\n; DROP TABLE t; --'", "carriage return"},
		{"SELECT 1 /* /* */ ' */ ; DROP TABLE t; --'", "nests comments"},
		{"WITH x AS (SELECT 1) DELETE FROM t", "WITH ... DELETE is not a read statement"},
		{"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "WITH ... INSERT"},
		{"WITH x AS (SELECT 1), y AS (SELECT 2) UPDATE t SET a = 1", "WITH ... UPDATE"},
		{"WITH x AS (SELECT 1)", "no final query"},
		{"WITH x AS SELECT 1", "could not follow the WITH clause"},
		{"(DELETE FROM t)", "DELETE is not a read statement"},
		{"SELECT 'unterminated", "unterminated string literal"},
		{"SELECT 1 /* unterminated", "unterminated comment"},
		{"SELECT 1\x00; DROP TABLE t", "NUL byte"},
		{"SELECT a FROM t; -- fine\nDROP TABLE t", "found 2 statements"},
		{"EXPLAIN SELECT 1", "EXPLAIN"},
		{"SELECT 1 WHERE 1 = (EXECUTE IMMEDIATE 'x')", "EXECUTE IMMEDIATE"},
	}
	perDialect := map[Dialect][]struct{ sql, want string }{
		SQLite: {
			{"SELECT 1; SELECT 2", "found 2 statements"},
			{"PRAGMA writable_schema=1", "PRAGMA is not a read statement"},
			{"ATTACH DATABASE 'x.db' AS x", "ATTACH"},
			{"DETACH x", "DETACH"},
			{"VACUUM INTO 'copy.db'", "VACUUM"},
			{"REPLACE INTO t VALUES (1)", "REPLACE is not a read statement"},
			{"SELECT [a--b]; DROP TABLE t", "found 2 statements"},
			{"SELECT [a;b] FROM t; DROP TABLE t", "found 2 statements"},
			{"SELECT `a--b`; DROP TABLE t", "found 2 statements"},
			{`SELECT "a--b"; DROP TABLE t`, "found 2 statements"},
			{`SELECT 'a\'; DROP TABLE t`, "found 2 statements"},
			{"SELECT load_extension('x.so')", "load_extension"},
			{"SELECT LOAD_EXTENSION ('x.so')", "load_extension"},
			{"SELECT load_extension /* c */ ('x.so')", "load_extension"},
			{`SELECT "load_extension"('x.so')`, "load_extension"},
			{"SELECT writefile('/tmp/x', 'y')", "writefile"},
			{"SELECT readfile('/etc/passwd')", "readfile"},
			{"SELECT fts3_tokenizer('simple', x'00')", "fts3_tokenizer"},
			{"SELECT * FROM t WHERE a IN (SELECT load_extension('x'))", "load_extension"},
			{"SELECT 1 // comment; DROP TABLE t", "found 2 statements"},
			{"SELECT 1 # comment; DROP TABLE t", "found 2 statements"},
			{"SELECT [unterminated", "unterminated quoted identifier"},
			{"SAVEPOINT a", "SAVEPOINT"},
		},
		Snowflake: {
			{"SELECT 1; SELECT 2", "found 2 statements"},
			{"SELECT SYSTEM$CANCEL_ALL_QUERIES(1)", "SYSTEM$CANCEL_ALL_QUERIES, a Snowflake system function that changes state"},
			{"select system$abort_session(1065153868222)", "SYSTEM$ABORT_SESSION"},
			{"SELECT system$cancel_query('id')", "SYSTEM$CANCEL_QUERY"},
			{"SELECT SYSTEM$WAIT(100)", "SYSTEM$WAIT"},
			{"SELECT SYSTEM$SOMETHING_NEW('x')", "not known to be read-only"},
			{`SELECT "SYSTEM$CANCEL_ALL_QUERIES"(1)`, "SYSTEM$CANCEL_ALL_QUERIES"},
			{"SELECT a FROM t WHERE b = SYSTEM$ABORT_TRANSACTION(1)", "SYSTEM$ABORT_TRANSACTION"},
			{"SELECT $$;$$; DROP TABLE t", "found 2 statements"},
			{`SELECT 'a\';'; DROP TABLE t`, "found 2 statements"},
			{"SELECT 1 // x\n; DROP TABLE t", "found 2 statements"},
			{"COPY INTO t FROM @stage", "COPY is not a read statement"},
			{"PUT file:///tmp/x @stage", "PUT"},
			{"GET @stage file:///tmp", "GET"},
			{"REMOVE @stage", "REMOVE"},
			{"UNDROP TABLE t", "UNDROP TABLE"},
			{"SHOW TABLES", "SHOW"},
			{"SET x = 1", "SET is not a read statement"},
			{"DECLARE x INT; SELECT 1", "found 2 statements"},
			{"BEGIN SELECT 1; END", "found 2 statements"},
			{"CREATE TEMPORARY TABLE t (a INT)", "CREATE TEMPORARY TABLE"},
			{"WITH p AS PROCEDURE () RETURNS INT LANGUAGE SQL AS $$ BEGIN RETURN 1; END $$ CALL p()", "could not follow the WITH clause"},
			{"SELECT $$unterminated", "unterminated string literal"},
			{"SELECT 1$$'$$; DROP TABLE t; --'", "$$ touches a name"},
			{"SELECT a$$ FROM t", "$$ touches a name"},
		},
		BigQuery: {
			{"SELECT * FROM EXTERNAL_QUERY('conn', 'SELECT 1')", "EXTERNAL_QUERY, which runs SQL on an external database"},
			{"SELECT * FROM external_query ('conn', 'DELETE FROM x')", "EXTERNAL_QUERY"},
			{"SELECT * FROM `EXTERNAL_QUERY`('conn', 'x')", "EXTERNAL_QUERY"},
			{"SELECT * FROM `region-us`.EXTERNAL_QUERY('conn', 'x')", "EXTERNAL_QUERY"},
			{"SELECT '''a;'''; DROP TABLE t", "statement 2 (DROP TABLE)"},
			{`SELECT """a;"""; DELETE FROM t WHERE true`, "statement 2 (DELETE)"},
			{`SELECT r'a\'; DROP TABLE t'`, "SELECT query"},
			{"SELECT 1 # x\n; DROP TABLE t", "statement 2 (DROP TABLE)"},
			{"DECLARE x INT64; DELETE FROM t WHERE true", "statement 2 (DELETE) may not run in a BigQuery script"},
			{"DECLARE x INT64; SET @@dataset_id = 'd'; SELECT 1", "SET @@"},
			{"SET @@query_label = 'a:b'", "system variable"},
			{"CREATE TEMP TABLE t AS SELECT 1; SELECT * FROM t", "CREATE TEMP TABLE"},
			{"CREATE TABLE d.t AS SELECT 1", "CREATE TABLE"},
			{"CREATE FUNCTION d.f() AS (1)", "CREATE FUNCTION"},
			{"CREATE TEMP FUNCTION f() AS (1); INSERT INTO t VALUES (1)", "statement 2 (INSERT)"},
			{"DECLARE x INT64; BEGIN SELECT 1; END", "BEGIN"},
			{"DECLARE x INT64; IF x > 1 THEN SELECT 1; END IF", "IF"},
			{"DECLARE q STRING DEFAULT 'DROP TABLE t'; EXECUTE IMMEDIATE q", "EXECUTE IMMEDIATE"},
			{"CALL d.p()", "CALL"},
			{"EXPORT DATA OPTIONS(uri='gs://b/*') AS SELECT 1", "EXPORT"},
			{"LOAD DATA INTO d.t FROM FILES(uris=['gs://b/x'])", "LOAD"},
			{"SELECT '''unterminated", "unterminated string literal"},
			{"WITH x AS (SELECT 1) SELECT 1; WITH y AS (SELECT 1) DELETE FROM t WHERE true", "statement 2 (WITH ... DELETE)"},
		},
	}
	for _, d := range []Dialect{SQLite, Snowflake, BigQuery} {
		cases := append(append([]struct{ sql, want string }{}, common...), perDialect[d]...)
		for _, tt := range cases {
			v := Classify(tt.sql, d)
			if tt.want == "SELECT query" { // admitted on purpose: the ';' is inside a raw string
				if !v.Allowed {
					t.Errorf("%s: Classify(%q) refused: %s", d, tt.sql, v.Reason)
				}
				continue
			}
			if v.Allowed || v.Text != "" || !strings.Contains(v.Reason, tt.want) {
				t.Errorf("%s: Classify(%q) = %+v, want refused saying %q", d, tt.sql, v, tt.want)
			}
		}
	}
}

// TestClassifyAdmitsTrickyReads: queries that a keyword scan gets wrong.
func TestClassifyAdmitsTrickyReads(t *testing.T) {
	t.Parallel()
	common := []string{
		"SELECT 1",
		"select 1;",
		"SELECT 1;;\n-- trailing comment\n",
		"-- Description: a note\nSELECT 1",
		"SELECT 1 /* ; DROP TABLE t */",
		"SELECT 'a;b; DROP TABLE t' AS s",
		"SELECT 'DELETE FROM t'",
		"SELECT begin, call, load, use, copy, replace, merge, grant, commit FROM t",
		"SELECT t.begin AS call, t.load AS use FROM t ORDER BY begin, call",
		"SELECT a FROM t WHERE call IN (1, 2) AND load > 0",
		"WITH copy AS (SELECT 1 AS a) SELECT a FROM copy",
		"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT i FROM n",
		"WITH a AS (SELECT 1), b AS (SELECT 2) SELECT * FROM a, b",
		"WITH a AS (SELECT 1) (SELECT * FROM a)",
		"SELECT REPLACE(name, 'a', 'b') FROM t",
		"SELECT REPLACE(REPLACE(name, 'a', 'b'), 'c', 'd') AS replace FROM t",
		"(SELECT 1) UNION (SELECT 2)",
		"((SELECT 1))",
		"VALUES (1), (2)",
		"SELECT count(*) AS insert_count, max(update_time) FROM t",
		"SELECT a FROM t WHERE note = 'x' -- ; DROP TABLE t",
		"SELECT a -- Windows line ends\r\nFROM t\r\n",
		"SELECT a /* a comment\r\n over lines */ FROM t",
	}
	perDialect := map[Dialect][]string{
		SQLite: {
			"SELECT [a--b], [c;d] FROM [my table]",
			"SELECT `begin` FROM `t`",
			`SELECT "call", "load" FROM "t"`,
			"SELECT 'it''s; fine'",
			"SELECT * FROM pragma_table_info('t')",
			"WITH x AS MATERIALIZED (SELECT 1), y AS NOT MATERIALIZED (SELECT 2) SELECT * FROM x, y",
			"SELECT a$b FROM t",
			"SELECT extension_loaded FROM t",
		},
		Snowflake: {
			"SELECT 1 // comment",
			"SELECT 1 // ; DROP TABLE t",
			"SELECT $$a;b$$ AS s",
			`SELECT 'a\'; b' AS s`,
			"SELECT 'it''s' AS s",
			`SELECT "begin", "CALL" FROM "DB"."S"."T"`,
			"SELECT SYSTEM$TYPEOF(1)",
			"SELECT system$clustering_information('t')",
			"SELECT $1, $2 FROM @stage",
			"SELECT 'https://x.y/z' || \"a\" FROM t WHERE b NOT LIKE '//%'",
			"WITH t (a, b) AS (SELECT 1, 2) SELECT a FROM t",
		},
		BigQuery: {
			"SELECT '''a;b''', \"\"\"c;\nd\"\"\", r'\\d;', b\"x;\", rb'''y;''', BR\"z\"",
			"SELECT `begin`, `call` FROM `p.d.t`",
			"SELECT 1 # comment ; DROP TABLE t",
			"#standardSQL\nSELECT 1",
			`SELECT "a;b" AS s`,
			`SELECT 'a\';b' AS s`,
			"SELECT * FROM `bigquery-public-data.samples.shakespeare` WHERE word = 'set'",
			"DECLARE x INT64 DEFAULT 1;\nSELECT x",
			"DECLARE start_date STRING DEFAULT '20170201';\nDECLARE end_date STRING;\nSET end_date = '20170228';\nWITH v AS (SELECT 1) SELECT * FROM v;",
			"DECLARE a ARRAY<STRING>;\nSET a = ['x', 'y'];\nSELECT * FROM t WHERE c IN UNNEST(a);",
			"SET (a, b) = (SELECT AS STRUCT 1, 2)",
			"CREATE TEMP FUNCTION f(x INT64) AS (x + 1);\nSELECT f(1);",
			"CREATE TEMPORARY FUNCTION f(s STRING) RETURNS STRING LANGUAGE js AS '''\n  return s + ';';\n''';\nSELECT f('a')",
			"CREATE OR REPLACE TEMP FUNCTION f() AS (1); SELECT f()",
			"CREATE TEMP AGGREGATE FUNCTION s(x INT64) AS (SUM(x)); SELECT s(a) FROM t",
		},
	}
	for _, d := range []Dialect{SQLite, Snowflake, BigQuery} {
		for _, sql := range append(append([]string{}, common...), perDialect[d]...) {
			v := Classify(sql, d)
			if !v.Allowed || v.Reason == "" || v.Text == "" {
				t.Errorf("%s: Classify(%q) = %+v, want admitted", d, sql, v)
			}
		}
	}
}

func TestClassifyVerdict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sql  string
		d    Dialect
		want Verdict
	}{
		{"  -- note\nSELECT 1 ; -- end\n", SQLite, Verdict{Allowed: true, Reason: "one SELECT query", Statements: 1, Text: "-- note\nSELECT 1"}},
		{"WITH x AS (SELECT 1) SELECT * FROM x;", Snowflake, Verdict{Allowed: true, Reason: "one WITH query", Statements: 1, Text: "WITH x AS (SELECT 1) SELECT * FROM x"}},
		{"DECLARE x INT64;\nSELECT x; -- done", BigQuery, Verdict{Allowed: true, Reason: "a BigQuery script of 2 statements (DECLARE, SELECT)", Statements: 2, Script: true, Text: "DECLARE x INT64;\nSELECT x"}},
		{"DECLARE x INT64", BigQuery, Verdict{Allowed: true, Reason: "one DECLARE statement", Statements: 1, Script: true, Text: "DECLARE x INT64"}},
		{"SELECT 1; SELECT 2", SQLite, Verdict{Reason: "found 2 statements (SELECT, SELECT); only one may run", Statements: 2}},
		{"DROP TABLE t", BigQuery, Verdict{Reason: "DROP TABLE is not a read statement", Statements: 1}},
		{"SELECT 1", Dialect("postgres"), Verdict{Reason: `unknown dialect "postgres"`}},
	}
	for _, tt := range tests {
		if got := Classify(tt.sql, tt.d); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Classify(%q, %s) = %+v, want %+v", tt.sql, tt.d, got, tt.want)
		}
	}
}

// TestDialectLexing: each dialect's quotes and comments, seen through Split.
func TestDialectLexing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    Dialect
		in   string
		want []string
	}{
		{SQLite, "SELECT [a;b]; SELECT 2", []string{"SELECT [a;b]", "SELECT 2"}},
		{SQLite, "SELECT [a--b]; SELECT 2", []string{"SELECT [a--b]", "SELECT 2"}},
		{SQLite, `SELECT 'a\'; SELECT 2`, []string{`SELECT 'a\'`, "SELECT 2"}},
		{SQLite, "SELECT 1 # x; SELECT 2", []string{"SELECT 1 # x", "SELECT 2"}},
		{Snowflake, "SELECT 1 // x; y\n; SELECT 2", []string{"SELECT 1 // x; y", "SELECT 2"}},
		{Snowflake, "SELECT [1, 2]; SELECT 2", []string{"SELECT [1, 2]", "SELECT 2"}},
		{Snowflake, "SELECT `a;b`", []string{"SELECT `a", "b`"}},
		{Snowflake, `SELECT "a\"; SELECT 2`, []string{`SELECT "a\"`, "SELECT 2"}},
		{Snowflake, "SELECT 1 # x; SELECT 2", []string{"SELECT 1 # x", "SELECT 2"}},
		{BigQuery, "SELECT '''a';b'''; SELECT 2", []string{"SELECT '''a';b'''", "SELECT 2"}},
		{BigQuery, `SELECT """a"";b"""; SELECT 2`, []string{`SELECT """a"";b"""`, "SELECT 2"}},
		{BigQuery, `SELECT rb'''\''';''', 2`, []string{`SELECT rb'''\''';''', 2`}},
		{BigQuery, "SELECT `a\\`;b`; SELECT 2", []string{"SELECT `a\\`;b`", "SELECT 2"}},
		{BigQuery, "SELECT 1 # x; y\n; SELECT 2", []string{"SELECT 1 # x; y", "SELECT 2"}},
		{BigQuery, "SELECT [1, 2]; SELECT 2", []string{"SELECT [1, 2]", "SELECT 2"}},
	}
	for _, tt := range tests {
		if got := Split(tt.in, DialectOptions(tt.d)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Split(%q) = %q, want %q", tt.d, tt.in, got, tt.want)
		}
	}
	if w := Words("SELECT SYSTEM$TYPEOF(a$b)", DialectOptions(Snowflake)); len(w) != 3 || w[1].Text != "SYSTEM$TYPEOF" || w[2].Text != "a$b" {
		t.Errorf("Snowflake words %+v", w)
	}
}

// FuzzClassify: the classifier never panics, is stable on what it admits,
// and never admits text in which the dialect's tokenizer finds a second
// statement, except a BigQuery script of DECLARE, SET, CREATE TEMP FUNCTION
// and queries.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		"SELECT 1", "SELECT [a--b]; DROP TABLE t", "SELECT $$;$$; DROP TABLE t", "SELECT '''a;'''; DROP TABLE t",
		"WITH x AS (SELECT 1) DELETE FROM t", "DECLARE x INT64; SET x = 1; SELECT x", "SELECT 1 // c\n; SELECT 2",
		"CREATE TEMP FUNCTION f() AS (1); SELECT f()", "SELECT r'\\'; DROP TABLE t'", "SELECT 1 --\r; DROP TABLE t",
		"(SELECT 1) UNION (SELECT 2)", "SELECT `a;b`; SELECT \"c;d\"", "SELECT 'a''b'; SELECT 1 /* ; */",
	} {
		for d := range 3 {
			f.Add(s, uint8(d))
		}
	}
	dialects := []Dialect{SQLite, Snowflake, BigQuery}
	f.Fuzz(func(t *testing.T, sql string, di uint8) {
		d := dialects[int(di)%len(dialects)]
		v := Classify(sql, d)
		if !v.Allowed {
			if v.Reason == "" || v.Text != "" {
				t.Fatalf("refusal without a reason or with text: %+v", v)
			}
			return
		}
		parts := Split(sql, DialectOptions(d))
		if len(parts) != v.Statements {
			t.Fatalf("%s: admitted %q as %d statements, the tokenizer splits %d: %q", d, sql, v.Statements, len(parts), parts)
		}
		if len(parts) > 1 {
			if d != BigQuery {
				t.Fatalf("%s: admitted %q with %d statements", d, sql, len(parts))
			}
			for _, p := range parts {
				w := Words(p, DialectOptions(d))
				if len(w) == 0 {
					t.Fatalf("admitted a statement without words: %q", p)
				}
				switch strings.ToUpper(w[0].Text) {
				case "SELECT", "WITH", "VALUES", "DECLARE", "SET", "CREATE":
				default:
					t.Fatalf("admitted a script statement %q", p)
				}
			}
		}
		again := Classify(v.Text, d)
		if !again.Allowed || again.Text != v.Text || again.Statements != v.Statements {
			t.Fatalf("%s: admitted %q, but its text %q classifies as %+v", d, sql, v.Text, again)
		}
	})
}
