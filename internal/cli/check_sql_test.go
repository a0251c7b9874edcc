package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

func decodeCheckSQL(t *testing.T, out string) []checkSQLLine {
	t.Helper()
	var lines []checkSQLLine
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		if len(m) != 3 {
			t.Errorf("line %q: want exactly file, allowed, reason", l)
		}
		var c checkSQLLine
		json.Unmarshal([]byte(l), &c)
		lines = append(lines, c)
	}
	return lines
}

func TestCheckSQLExitCodesAndLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, sql string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(sql), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.sql", "WITH copy AS (SELECT begin, call FROM t) SELECT REPLACE(call, 'a', 'b') FROM copy;\n")
	also := write("also.sql", "-- note\nSELECT [a--b] FROM t")
	bad := write("bad.sql", "SELECT [a--b]; DROP TABLE t")
	ext := write("ext.sql", "SELECT load_extension('x.so')")

	out, err := run(t, "check-sql", "--dialect", "sqlite", good, also)
	if err != nil {
		t.Fatalf("all allowed: %v\n%s", err, out)
	}
	lines := decodeCheckSQL(t, out)
	if len(lines) != 2 || lines[0].File != good || lines[1].File != also || !lines[0].Allowed || !lines[1].Allowed || lines[0].Reason != "one WITH query" {
		t.Errorf("lines %+v", lines)
	}

	out, err = run(t, "check-sql", "--dialect", "sqlite", good, bad, ext)
	if exitCode(err) != 1 {
		t.Fatalf("a refused file: error %v (exit %d), want exit 1\n%s", err, exitCode(err), out)
	}
	lines = decodeCheckSQL(t, out)
	if len(lines) != 3 || !lines[0].Allowed || lines[1].Allowed || lines[2].Allowed ||
		!strings.Contains(lines[1].Reason, "found 2 statements") || !strings.Contains(lines[2].Reason, "load_extension") {
		t.Errorf("lines %+v", lines)
	}

	// Per dialect: a Snowflake // comment, a BigQuery script.
	sf := write("sf.sql", "SELECT 1 // ; DROP TABLE t")
	if out, err := run(t, "check-sql", "--dialect", "snowflake", sf); err != nil {
		t.Errorf("snowflake: %v\n%s", err, out)
	}
	if out, err := run(t, "check-sql", "--dialect", "sqlite", sf); exitCode(err) != 1 {
		t.Errorf("the same text in sqlite: %v, want refused\n%s", err, out)
	}
	bq := write("bq.sql", "DECLARE d STRING DEFAULT '20170201';\nSET d = '20170202';\nSELECT d;")
	if out, err := run(t, "check-sql", "--dialect", "bigquery", bq); err != nil || !strings.Contains(out, "BigQuery script of 3 statements") {
		t.Errorf("bigquery script: %v\n%s", err, out)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"check-sql", "--dialect", "postgres", good}, "unknown dialect"},
		{[]string{"check-sql", good}, "--dialect is required"},
		{[]string{"check-sql", "--dialect", "sqlite"}, "no SQL files"},
		{[]string{"check-sql", "--dialect", "sqlite", good, filepath.Join(dir, "missing.sql")}, "missing.sql"},
		{[]string{"check-sql", "--dialect", "sqlite", dir}, dir},
		{[]string{"check-sql", "--no-such-flag", good}, "unknown flag"},
	} {
		out, err := run(t, tt.args...)
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("quorum %s: %v (exit %d), want exit 2 naming %q", strings.Join(tt.args, " "), err, exitCode(err), tt.want)
		}
		if out != "" {
			t.Errorf("quorum %s printed %q on a usage error", strings.Join(tt.args, " "), out)
		}
	}
}

// TestCheckSQLAdmitsSpider2Gold: quorum check-sql admits every Spider 2.0
// gold SQL in its dialect.
func TestCheckSQLAdmitsSpider2Gold(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../../../shared/data/spider2-gold-sql/*/*.sql")
	if len(files) == 0 {
		t.Skip("../shared/data/spider2-gold-sql is absent: skipping the gold SQL check")
	}
	byDialect := map[warehouse.Dialect][]string{}
	for _, f := range files {
		d, ok := dataset.DialectFromID(strings.TrimSuffix(filepath.Base(f), ".sql"))
		if !ok {
			t.Fatalf("%s: no dialect", f)
		}
		byDialect[d] = append(byDialect[d], f)
	}
	total := 0
	for d, fs := range byDialect {
		out, err := run(t, append([]string{"check-sql", "--dialect", string(d)}, fs...)...)
		lines := decodeCheckSQL(t, out)
		for _, l := range lines {
			if !l.Allowed {
				t.Errorf("%s (%s): refused: %s", l.File, d, l.Reason)
			}
		}
		if err != nil || len(lines) != len(fs) {
			t.Errorf("%s: %v, %d lines for %d files", d, err, len(lines), len(fs))
		}
		total += len(lines)
	}
	if total != 376 {
		t.Errorf("checked %d gold files, want 376", total)
	}
}
