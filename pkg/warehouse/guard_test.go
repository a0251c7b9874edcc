package warehouse_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// goldSQLDir holds every Spider 2.0 gold SQL (lite and snow); CI has the
// shared data at ../shared next to the repository.
const goldSQLDir = "../../../shared/data/spider2-gold-sql"

// TestGuardAdmitsEverySpider2GoldSQL: the benchmark authors' own queries
// are all legitimate reads, so the guard must admit each one in its dialect
// (from the instance id, as the dataset loader decides it).
func TestGuardAdmitsEverySpider2GoldSQL(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join(goldSQLDir, "*", "*.sql"))
	if len(files) == 0 {
		t.Skipf("no gold SQL under %s (the shared data is absent): skipping the Spider 2.0 gold SQL check", goldSQLDir)
	}
	admitted := 0
	byDialect := map[warehouse.Dialect]int{}
	for _, f := range files {
		id := strings.TrimSuffix(filepath.Base(f), ".sql")
		d, ok := dataset.DialectFromID(id)
		if !ok {
			t.Errorf("%s: no dialect for instance id %s", f, id)
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text, err := warehouse.CheckReadOnly(d, string(b))
		if err != nil {
			t.Errorf("%s (%s): %v", f, d, err)
			continue
		}
		if text == "" {
			t.Errorf("%s: admitted with no text", f)
		}
		admitted++
		byDialect[d]++
	}
	if len(files) != 376 {
		t.Errorf("found %d gold SQL files, want the 376 of Spider 2.0 (lite 256, snow 120)", len(files))
	}
	t.Logf("admitted %d of %d gold SQL files: %v", admitted, len(files), byDialect)
}

// TestGuardRefusalIsAQueryError: refusals reach the model as a refused
// *QueryError that names what was refused and what is allowed.
func TestGuardRefusalIsAQueryError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d         warehouse.Dialect
		sql, want string
	}{
		{warehouse.SQLite, "SELECT load_extension('x')", "load_extension"},
		{warehouse.SQLite, "SELECT [a--b]; DROP TABLE t", "found 2 statements"},
		{warehouse.Snowflake, "SELECT SYSTEM$CANCEL_ALL_QUERIES(1)", "SYSTEM$CANCEL_ALL_QUERIES"},
		{warehouse.BigQuery, "SELECT * FROM EXTERNAL_QUERY('c', 'SELECT 1')", "EXTERNAL_QUERY"},
		{warehouse.BigQuery, "WITH x AS (SELECT 1) DELETE FROM t WHERE true", "WITH ... DELETE"},
	}
	for _, tt := range tests {
		text, err := warehouse.CheckReadOnly(tt.d, tt.sql)
		var qe *warehouse.QueryError
		if text != "" || !errors.As(err, &qe) || !qe.Refused || qe.Dialect != tt.d ||
			!strings.Contains(qe.Message, tt.want) || !strings.Contains(qe.Message, "read-only") {
			t.Errorf("%s %q: %q, %v; want a refused *QueryError naming %s", tt.d, tt.sql, text, err, tt.want)
		}
	}
	for _, tt := range []struct {
		d         warehouse.Dialect
		sql, want string
	}{
		{warehouse.SQLite, "SELECT begin, call FROM t;  -- note", "SELECT begin, call FROM t"},
		{warehouse.Snowflake, "SELECT REPLACE(a, 'x', 'y') FROM copy;", "SELECT REPLACE(a, 'x', 'y') FROM copy"},
		{warehouse.BigQuery, "DECLARE x INT64 DEFAULT 1;\nSELECT x;\n", "DECLARE x INT64 DEFAULT 1;\nSELECT x"},
	} {
		if text, err := warehouse.CheckReadOnly(tt.d, tt.sql); err != nil || text != tt.want {
			t.Errorf("%s %q: %q, %v; want %q", tt.d, tt.sql, text, err, tt.want)
		}
	}
}

// TestGuardRefusesOversizedAndDeepSQL: SQL over sqltext.MaxSQLBytes is
// refused before it is classified, the message naming its length and the
// limit; parentheses deeper than sqltext.MaxNesting are refused naming the
// depth limit.
func TestGuardRefusesOversizedAndDeepSQL(t *testing.T) {
	t.Parallel()
	huge := "SELECT 1" + strings.Repeat(" ", sqltext.MaxSQLBytes)
	deep := strings.Repeat("(", sqltext.MaxNesting+1) + "SELECT 1" + strings.Repeat(")", sqltext.MaxNesting+1)
	tests := []struct {
		name, sql, want string
	}{
		{"oversized", huge, fmt.Sprintf("the SQL text is %d bytes, over the limit of %d bytes", len(huge), sqltext.MaxSQLBytes)},
		{"too deep", deep, fmt.Sprintf("parentheses nest deeper than %d levels", sqltext.MaxNesting)},
	}
	for _, tt := range tests {
		for _, d := range []warehouse.Dialect{warehouse.SQLite, warehouse.Snowflake, warehouse.BigQuery} {
			v, err := warehouse.Guard{AllowHistory: true}.Admit(d, tt.sql)
			var qe *warehouse.QueryError
			if v.Allowed || !errors.As(err, &qe) || !qe.Refused || !strings.Contains(qe.Message, tt.want) {
				t.Errorf("%s, %s: allowed %v, err %.300v; want a refused *QueryError saying %q", tt.name, d, v.Allowed, err, tt.want)
			}
		}
	}
}
