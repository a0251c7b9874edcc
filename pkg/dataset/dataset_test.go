package dataset

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

const subset = "../../../shared/data/spider2-lite-subset"

func TestLoadSpider2LiteSubset(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(subset); err != nil {
		t.Skipf("shared Spider 2.0-lite subset not beside the repository (%v)", err)
	}
	ds, err := Load(subset, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Examples) != 173 {
		t.Fatalf("%d examples, want 173", len(ds.Examples))
	}
	counts := map[sqltext.Dialect]int{}
	for _, e := range ds.Examples {
		counts[e.Dialect]++
	}
	if counts[sqltext.SQLite] != 135 || counts[sqltext.BigQuery] != 37 || counts[sqltext.Snowflake] != 1 {
		t.Errorf("dialects %v, want sqlite 135, bigquery 37, snowflake 1", counts)
	}
	// The subset ships no .sqlite files: every local example is blocked
	// with a problem that says where to put them.
	missing := 0
	for _, p := range ds.Problems {
		if strings.Contains(p.Message, "missing sqlite file") {
			missing++
			if p.Line == 0 || !strings.Contains(p.Message, "spider2-localdb") {
				t.Errorf("problem lacks a line or a hint: %s", p)
			}
		} else {
			t.Errorf("unexpected problem: %s", p)
		}
	}
	if missing != 135 {
		t.Errorf("%d missing-sqlite problems, want 135", missing)
	}
	e, _ := ds.Example("bq011")
	if e.DB != "ga4" || !strings.Contains(e.ExternalKnowledge, "event") || !ds.Runnable("bq011") {
		t.Errorf("bq011: %+v", e)
	}
	if len(e.Gold.Results) == 0 || !e.Gold.HasSpec {
		t.Errorf("bq011 gold not attached: %+v", e.Gold)
	}
	// Folder-name exceptions resolve: sqlite-sakila is stored as SQLITE_SAKILA.
	sak, ok := ds.Example("local193")
	if !ok {
		t.Fatal("local193 missing")
	}
	db, _ := ds.Database(sak)
	if !strings.HasSuffix(db.MetaDir, "SQLITE_SAKILA") {
		t.Errorf("sqlite-sakila metadata %q", db.MetaDir)
	}
}

func TestLoadSchemaBigQueryNested(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(subset); err != nil {
		t.Skipf("shared subset missing (%v)", err)
	}
	ds, err := Load(subset, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := ds.Example("bq011")
	db, _ := ds.Database(e)
	s, problems, err := LoadSchema(db)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("%d problems, first: %v", len(problems), problems[0])
	}
	if len(s.Folders) != 1 || s.Folders[0].Path != "bigquery-public-data.ga4_obfuscated_sample_ecommerce" {
		t.Fatalf("folders %+v", s.Folders)
	}
	tables, _ := s.Count()
	if tables < 90 {
		t.Errorf("%d tables, want the 92 events_ shards", tables)
	}
	var ev *Table
	for _, tb := range s.Folders[0].Tables {
		if tb.Name == "events_20201101" {
			ev = tb
		}
	}
	if ev == nil || !ev.HasJSON || ev.DDL == "" || len(ev.Nested) == 0 || len(ev.SampleRows) == 0 {
		t.Fatalf("events_20201101: %+v", ev)
	}
	if !strings.HasPrefix(ev.FullName, "bigquery-public-data.ga4_obfuscated_sample_ecommerce.") {
		t.Errorf("full name %q", ev.FullName)
	}
}

// writeDataset lays out a small Spider 2.0-style dataset with known faults.
func writeDataset(t *testing.T, tasks string) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "resource", "documents"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "resource", "databases", "sqlite", "shop"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "resource", "databases", "spider2-localdb"), 0o755))
	must(os.WriteFile(filepath.Join(root, "resource", "documents", "doc.md"), []byte("# Margin\nprice - cost"), 0o644))
	must(os.WriteFile(filepath.Join(root, "resource", "databases", "sqlite", "shop", "DDL.csv"), []byte("table_name,DDL\nitems,\"CREATE TABLE items (\n  id INTEGER\n);\"\n"), 0o644))
	must(os.WriteFile(filepath.Join(root, "resource", "databases", "sqlite", "shop", "items.json"),
		[]byte(`{"table_name":"items","table_fullname":"items","column_names":["id"],"column_types":["INTEGER"],"description":[""],"sample_rows":[{"id":1}]}`), 0o644))
	db, err := sql.Open("sqlite", filepath.Join(root, "resource", "databases", "spider2-localdb", "shop.sqlite"))
	must(err)
	_, err = db.Exec("CREATE TABLE items (id INTEGER); INSERT INTO items VALUES (1),(2)")
	must(err)
	db.Close()
	must(os.WriteFile(filepath.Join(root, "tasks.jsonl"), []byte(tasks), 0o644))
	return root
}

func TestLoadReportsEveryProblem(t *testing.T) {
	t.Parallel()
	tasks := `{"instance_id": "local001", "db": "shop", "question": "How many items?", "external_knowledge": "doc.md"}
{"instance_id": "local002", "db": "shop", "question": "broken"
{"instance_id": "local003", "db": "nowhere", "question": "q", "external_knowledge": null}
{"instance_id": "local004", "db": "shop", "question": "q", "external_knowledge": "missing.md"}
{"instance_id": "bq005", "db": "nothere", "question": "q"}
{"instance_id": "zz006", "db": "shop", "question": "q"}
{"instance_id": "local001", "db": "shop", "question": "again"}
`
	root := writeDataset(t, tasks)
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"tasks.jsonl:2: malformed JSON line",
		"tasks.jsonl:3: local003: missing sqlite file nowhere.sqlite",
		"tasks.jsonl:4: local004: missing document",
		"tasks.jsonl:5: bq005: unknown database \"nothere\"",
		"tasks.jsonl:6: zz006: cannot tell the dialect",
		"tasks.jsonl:7: local001: duplicate instance_id (first on line 1)",
	}
	if len(ds.Problems) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(ds.Problems), len(want), ds.Problems)
	}
	for i, w := range want {
		if i >= len(ds.Problems) {
			break
		}
		got := ds.Problems[i].String()
		if !strings.Contains(got, w) {
			t.Errorf("problem %d = %q, want it to contain %q", i, got, w)
		}
	}
	e, _ := ds.Example("local001")
	if !ds.Runnable("local001") || e.ExternalKnowledge == "" {
		t.Errorf("local001 should load with its document: %+v", e)
	}
	if ds.Runnable("local004") {
		t.Error("local004 references a missing document and must not be runnable")
	}
	sel, err := ds.Select(Filter{Dialect: sqltext.SQLite})
	if err != nil || len(sel) != 3 {
		t.Errorf("select sqlite: %d %v", len(sel), err)
	}
	if sel, err := ds.Select(Filter{IDs: []string{"local001"}}); err != nil || len(sel) != 1 || sel[0].ID != "local001" {
		t.Errorf("select by id: %d examples, %v", len(sel), err)
	}
	if _, err := ds.Select(Filter{IDs: []string{"local001", "nope"}}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("select unknown id: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	if _, err := Load(filepath.Join(t.TempDir(), "absent"), Options{}); err == nil {
		t.Error("absent folder loaded")
	}
	empty := t.TempDir()
	if _, err := Load(empty, Options{}); err == nil || !strings.Contains(err.Error(), "no task file") {
		t.Errorf("empty folder: %v", err)
	}
}

func TestLoadSpider1AndBIRD(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "database", "concert"), 0o755); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(root, "database", "concert", "concert.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE singer (name TEXT)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	dev := `[{"db_id":"concert","question":"How many singers?","query":"SELECT count(*) FROM singer"},
{"question_id": 7, "db_id":"concert","question":"Names?","evidence":"name is the singer's name","SQL":"SELECT name FROM singer"},
{"db_id":"missing","question":"q","query":"SELECT 1"}]`
	if err := os.WriteFile(filepath.Join(root, "dev.json"), []byte(dev), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Layout != LayoutSpider1 || len(ds.Examples) != 3 {
		t.Fatalf("layout %s, %d examples", ds.Layout, len(ds.Examples))
	}
	bird, ok := ds.Example("dev_7")
	if !ok || bird.ExternalKnowledge != "name is the singer's name" || bird.Gold.SQL != "SELECT name FROM singer" || bird.Dialect != sqltext.SQLite {
		t.Errorf("BIRD entry: %+v", bird)
	}
	if len(ds.Problems) != 1 || !strings.Contains(ds.Problems[0].Message, "missing sqlite file database/missing/missing.sqlite") {
		t.Errorf("problems %v", ds.Problems)
	}
}

func TestPythonJSON(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"a": NaN, "b": "NaN", "c": -Infinity, "d": [Infinity]}`, `{"a": null, "b": "NaN", "c": null, "d": [null]}`},
		{`{"s": "say \"NaN\"", "n": 1}`, `{"s": "say \"NaN\"", "n": 1}`},
		{`[1, 2]`, `[1, 2]`},
	}
	for _, tt := range tests {
		if got := string(pythonJSON([]byte(tt.in))); got != tt.want {
			t.Errorf("pythonJSON(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestLoadSnowLayout(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	schema := filepath.Join(root, "resource", "databases", "GA360", "GOOGLE_ANALYTICS_SAMPLE")
	if err := os.MkdirAll(schema, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(schema, "DDL.csv"), []byte("table_name,description,DDL\nGA_SESSIONS_20170801,,\"create or replace TABLE GA_SESSIONS_20170801 (\n\t\"\"visitId\"\" NUMBER(38,0)\n);\"\n"), 0o644)
	os.WriteFile(filepath.Join(schema, "GA_SESSIONS_20170801.json"), []byte(`{"table_name":"GOOGLE_ANALYTICS_SAMPLE.GA_SESSIONS_20170801","table_fullname":"GA360.GOOGLE_ANALYTICS_SAMPLE.GA_SESSIONS_20170801","column_names":["visitId"],"column_types":["NUMBER"],"description":[null],"sample_rows":[{"visitId":1}]}`), 0o644)
	os.WriteFile(filepath.Join(root, "spider2-snow.jsonl"), []byte(`{"instance_id": "sf_bq001", "instruction": "Count visits.", "db_id": "GA360", "external_knowledge": null}`+"\n"), 0o644)
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := ds.Example("sf_bq001")
	if !ok || e.Dialect != sqltext.Snowflake || e.Question != "Count visits." || e.DB != "GA360" || len(ds.Problems) > 0 {
		t.Fatalf("example %+v problems %v", e, ds.Problems)
	}
	db, _ := ds.Database(e)
	s, probs, err := LoadSchema(db)
	if err != nil || len(probs) > 0 {
		t.Fatal(err, probs)
	}
	tb := s.Folders[0].Tables[0]
	if s.Folders[0].Path != "GOOGLE_ANALYTICS_SAMPLE" || tb.Name != "GA_SESSIONS_20170801" || !tb.HasJSON || tb.FullName != "GA360.GOOGLE_ANALYTICS_SAMPLE.GA_SESSIONS_20170801" {
		t.Errorf("schema %+v table %+v", s.Folders[0], tb)
	}
}

// TestOversizeQuestionIsRefused: a question over MaxQuestionBytes leaves
// its line out when the dataset loads (refused before a run starts, unless
// --skip-invalid), naming the line and the limit; the next line loads.
func TestOversizeQuestionIsRefused(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	long := strings.Repeat("how many? ", MaxQuestionBytes/10+1)
	line := `{"instance_id":"local001","db":"shop","question":"` + long + `"}` + "\n" + `{"instance_id":"local002","db":"shop","question":"ok?"}` + "\n"
	if err := os.WriteFile(filepath.Join(root, "t.jsonl"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ds.Example("local001"); ok {
		t.Error("the example with the oversize question was loaded")
	}
	if _, ok := ds.Example("local002"); !ok {
		t.Error("the line after the oversize question was not loaded")
	}
	skipped := ds.Skipped()
	if len(skipped) != 1 || skipped[0].Line != 1 || !strings.Contains(skipped[0].Message, "over the 65536-byte limit for a question") {
		t.Errorf("skipped %v, want line 1 left out naming the 65536-byte limit", skipped)
	}
}
