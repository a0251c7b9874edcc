package sqltext

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		opt  Options
		want []string
	}{
		{"one", "SELECT 1", Options{}, []string{"SELECT 1"}},
		{"trailing semicolon", "SELECT 1;", Options{}, []string{"SELECT 1"}},
		{"two", "SELECT 1; SELECT 2;", Options{}, []string{"SELECT 1", "SELECT 2"}},
		{"semicolon in string", "SELECT 'a;b'; SELECT 2", Options{}, []string{"SELECT 'a;b'", "SELECT 2"}},
		{"escaped quote", "SELECT 'it''s;x'", Options{}, []string{"SELECT 'it''s;x'"}},
		{"semicolon in identifier", `SELECT "a;b" FROM t`, Options{}, []string{`SELECT "a;b" FROM t`}},
		{"semicolon in backticks", "SELECT `a;b` FROM t", Options{}, []string{"SELECT `a;b` FROM t"}},
		{"semicolon in line comment", "SELECT 1 -- x; y\n; SELECT 2", Options{}, []string{"SELECT 1 -- x; y", "SELECT 2"}},
		{"semicolon in block comment", "SELECT /* ; */ 1", Options{}, []string{"SELECT /* ; */ 1"}},
		{"comment-only fragment dropped", "SELECT 1;\n-- the end\n", Options{}, []string{"SELECT 1"}},
		{"description comment kept", "--Description: a\nSELECT 1;\n--Description: b\nSELECT 2;", Options{},
			[]string{"--Description: a\nSELECT 1", "--Description: b\nSELECT 2"}},
		{"backslash escape", `SELECT 'a\';b'; SELECT 2`, Options{BackslashEscapes: true}, []string{`SELECT 'a\';b'`, "SELECT 2"}},
		{"no backslash escape in sqlite", `SELECT 'a\'; SELECT 2`, Options{}, []string{`SELECT 'a\'`, "SELECT 2"}},
		{"dollar string", "SELECT $$a;b$$; SELECT 2", Options{DollarStrings: true}, []string{"SELECT $$a;b$$", "SELECT 2"}},
		{"empty", "  ;; ", Options{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Split(tt.in, tt.opt); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Split(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestInspect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		keyword string
		writes  []string
		text    string
	}{
		{"select 1 -- note", "SELECT", nil, "select 1"},
		{"(SELECT 1)", "SELECT", nil, "(SELECT 1)"},
		{"WITH x AS (SELECT 1) SELECT * FROM x", "WITH", nil, "WITH x AS (SELECT 1) SELECT * FROM x"},
		{"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "WITH", []string{"INSERT"}, ""},
		{"WITH x AS (DELETE FROM t RETURNING *) SELECT 1", "WITH", nil, ""},
		{"/* c */ insert into t values (1)", "INSERT", nil, ""},
		{"SELECT 'DROP TABLE t'", "SELECT", nil, ""},
		{"pragma query_only=0", "PRAGMA", nil, ""},
	}
	for _, tt := range tests {
		st := Inspect(tt.in, Options{})
		if len(st) != 1 {
			t.Fatalf("Inspect(%q) gave %d statements", tt.in, len(st))
		}
		if st[0].Keyword != tt.keyword || !reflect.DeepEqual(st[0].Writes, tt.writes) {
			t.Errorf("Inspect(%q) = %+v, want keyword %s writes %v", tt.in, st[0], tt.keyword, tt.writes)
		}
		if tt.text != "" && st[0].Text != tt.text {
			t.Errorf("Inspect(%q).Text = %q, want %q", tt.in, st[0].Text, tt.text)
		}
	}
}

func TestSplitCTEs(t *testing.T) {
	t.Parallel()
	q, ok := SplitCTEs("-- note\nWITH a AS (SELECT 1 AS x), \"b c\"(y) AS (SELECT x FROM a WHERE x IN (1, 2)), d AS MATERIALIZED (SELECT ')' AS p)\nSELECT * FROM \"b c\", d;", Options{})
	if !ok || len(q.CTEs) != 3 {
		t.Fatalf("ok %v, %d CTEs: %+v", ok, len(q.CTEs), q)
	}
	if q.Prefix != "-- note\nWITH" || q.CTEs[0].Name != "a" || q.CTEs[1].Name != "b c" || q.CTEs[1].Text != "\"b c\"(y) AS (SELECT x FROM a WHERE x IN (1, 2))" || q.Main != "SELECT * FROM \"b c\", d;" {
		t.Errorf("split %+v", q)
	}
	if got := q.PrefixQuery(2, 5); got != "-- note\nWITH a AS (SELECT 1 AS x),\n\"b c\"(y) AS (SELECT x FROM a WHERE x IN (1, 2))\nSELECT * FROM \"b c\" LIMIT 5" {
		t.Errorf("prefix query %q", got)
	}
	r, ok := SplitCTEs("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 3) SELECT i FROM n", Options{})
	if !ok || r.Prefix != "WITH RECURSIVE" || len(r.CTEs) != 1 || r.Main != "SELECT i FROM n" {
		t.Errorf("recursive %+v", r)
	}
	for _, bad := range []string{"SELECT 1", "WITH a AS SELECT 1", "WITH a AS (SELECT 1", "WITH a AS (SELECT 1)"} {
		if _, ok := SplitCTEs(bad, Options{}); ok {
			t.Errorf("SplitCTEs(%q) accepted", bad)
		}
	}
}
