package schema

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

func table(name string) *dataset.Table {
	return &dataset.Table{Name: name, FullName: name, DDL: "CREATE TABLE " + name + " (a INTEGER);", HasJSON: true,
		Columns: []dataset.ColumnMeta{{Name: "a", Type: "INTEGER"}}, SampleRows: json.RawMessage(`[{"a": 1}]`)}
}

// TestWriteSpiderRefusesUnsafeNames: a table or folder name that could
// leave dir, hide a file or collide with another is refused, naming it,
// before anything is written.
func TestWriteSpiderRefusesUnsafeNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		folder string
		tables []string
		want   string
	}{
		{"parent directory", "", []string{"ok", "../escape"}, `table "../escape"`},
		{"separator", "", []string{"a/b"}, `table "a/b"`},
		{"hidden file", "", []string{".hidden"}, `table ".hidden"`},
		{"absolute path", "", []string{"/etc/passwd"}, `table "/etc/passwd"`},
		{"space", "", []string{"line items"}, `table "line items"`},
		{"empty", "", []string{""}, `table ""`},
		{"folder escapes", "../up", []string{"t"}, `folder "../up"`},
		{"folder segment hidden", "proj/.git", []string{"t"}, `folder "proj/.git"`},
		{"same file on a case-insensitive disk", "", []string{"Orders", "orders"}, `tables "Orders" and "orders"`},
		{"same loader key", "", []string{"x.events", "events"}, `tables "x.events" and "events"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			f := &dataset.SchemaFolder{Path: tt.folder}
			for _, n := range tt.tables {
				f.Tables = append(f.Tables, table(n))
			}
			err := WriteSpider(dir, &dataset.Schema{Database: "db", Folders: []*dataset.SchemaFolder{f}})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "db") {
				t.Fatalf("err = %v, want one naming %s and the database", err, tt.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("%d entries written before the refusal", len(entries))
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.json")); err == nil {
				t.Error("a file was written outside dir")
			}
		})
	}
}

// TestWriteSpiderLayout: the files are Spider 2.0's (DDL.csv with the
// description column only when a table has one, <table>.json with keys in
// Spider's order), a rewrite leaves only the current tables, and what
// dataset.LoadSchema reads back equals what was written.
func TestWriteSpiderLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flat := &dataset.SchemaFolder{Path: "", Tables: []*dataset.Table{table("b_first"), table("a_second")}}
	withDesc := table("T")
	withDesc.Description = "A table, with \"quotes\"\nand lines."
	withDesc.FullName = "DB.S.T"
	withDesc.Columns[0].Description = "Column a."
	nested := table("n")
	nested.FullName = "p.d.n"
	nested.Columns = []dataset.ColumnMeta{{Name: "r", Type: "STRUCT<x INT64>", Description: "Record."}}
	nested.Nested = []dataset.ColumnMeta{{Name: "r", Type: "STRUCT<x INT64>", Description: "Record."}, {Name: "r.x", Type: "INT64", Description: "Leaf."}}
	nested.SampleRows = nil
	s := &dataset.Schema{Database: "db", Folders: []*dataset.SchemaFolder{
		flat,
		{Path: "S", Tables: []*dataset.Table{withDesc}},
		{Path: "p.d", Tables: []*dataset.Table{nested}},
	}}
	if err := WriteSpider(dir, s); err != nil {
		t.Fatal(err)
	}
	ddl, _ := os.ReadFile(filepath.Join(dir, "DDL.csv"))
	if string(ddl) != "table_name,DDL\nb_first,CREATE TABLE b_first (a INTEGER);\na_second,CREATE TABLE a_second (a INTEGER);\n" {
		t.Errorf("DDL.csv:\n%s", ddl)
	}
	ddl, _ = os.ReadFile(filepath.Join(dir, "S", "DDL.csv"))
	if !strings.HasPrefix(string(ddl), "table_name,description,DDL\nT,\"A table, with \"\"quotes\"\"\nand lines.\",") {
		t.Errorf("S/DDL.csv:\n%s", ddl)
	}
	js, _ := os.ReadFile(filepath.Join(dir, "p.d", "n.json"))
	keys := jsonKeys(t, js)
	if strings.Join(keys, ",") != "table_name,table_fullname,column_names,column_types,nested_column_names,nested_column_types,description,sample_rows" {
		t.Errorf("n.json keys %v:\n%s", keys, js)
	}
	if !strings.Contains(string(js), `"sample_rows": []`) || !strings.Contains(string(js), `"Leaf."`) {
		t.Errorf("n.json:\n%s", js)
	}

	loaded, probs, err := dataset.LoadSchema(&dataset.Database{Name: "db", Dialect: warehouse.SQLite, MetaDir: dir})
	if err != nil || len(probs) > 0 {
		t.Fatalf("%v %v", err, probs)
	}
	for _, f := range loaded.Folders {
		f.Dir = ""
		for _, tb := range f.Tables {
			tb.JSONFile = ""
			tb.SampleRows = compact(t, tb.SampleRows)
		}
	}
	want := cloneSchema(t, s)
	want.Folders[2].Tables[0].SampleRows = json.RawMessage("[]")
	for _, f := range want.Folders {
		for _, tb := range f.Tables {
			tb.SampleRows = compact(t, tb.SampleRows)
		}
	}
	if !reflect.DeepEqual(loaded, want) {
		a, _ := json.MarshalIndent(loaded, "", " ")
		b, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("loaded back:\n%s\nwant:\n%s", a, b)
	}

	// A rewrite without b_first removes its file; files that are not
	// metadata stay.
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("notes"), 0o644)
	flat.Tables = flat.Tables[1:]
	if err := WriteSpider(dir, s); err != nil {
		t.Fatal(err)
	}
	var files []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		files = append(files, e.Name())
	}
	sort.Strings(files)
	if strings.Join(files, ",") != "DDL.csv,README.md,S,a_second.json,p.d" {
		t.Errorf("after the rewrite: %v", files)
	}
}

func jsonKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func compact(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(raw)
	if err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return b
}

func TestBigQueryTypes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ  string
		want []string // name type
	}{
		{"STRING", nil},
		{"ARRAY<INT64>", nil},
		{"STRUCT<a INT64, b STRING>", []string{"a INT64", "b STRING"}},
		{"ARRAY<STRUCT<key STRING, value STRUCT<string_value STRING, int_value INT64>>>", []string{"key STRING", "value STRUCT<string_value STRING, int_value INT64>"}},
		{"STRUCT<n NUMERIC(10, 2), `odd name` STRING, arr ARRAY<STRUCT<x INT64>>>", []string{"n NUMERIC(10, 2)", "odd name STRING", "arr ARRAY<STRUCT<x INT64>>"}},
		{"STRUCT<a INT64 NOT NULL> NOT NULL", []string{"a INT64 NOT NULL"}},
		{"STRUCT<a INT64", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, f := range bqSubfields(tt.typ) {
			got = append(got, f.name+" "+f.typ)
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("bqSubfields(%q) = %q, want %q", tt.typ, got, tt.want)
		}
	}
}

func TestDatabaseNames(t *testing.T) {
	t.Parallel()
	sf := []struct{ in, want, err string }{
		{"shop", "SHOP", ""},
		{" NOAA_DATA ", "NOAA_DATA", ""},
		{`"MixedCase"`, "MixedCase", ""},
		{`"we""ird"`, `we"ird`, ""},
		{"sh op", "", "plain name"},
		{`"a"b"`, "", "malformed"},
		{`""`, "", "malformed"},
	}
	for _, tt := range sf {
		got, err := snowflakeName(tt.in)
		if got != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("snowflakeName(%q) = %q, %v", tt.in, got, err)
		}
	}
	bq := []struct{ in, want, err string }{
		{"bigquery-public-data.ga4_obfuscated_sample_ecommerce", "`bigquery-public-data`.ga4_obfuscated_sample_ecommerce", ""},
		{"p.a, q.b", "`p`.a|`q`.b", ""},
		{"example.com:proj.d", "`example.com:proj`.d", ""},
		{"just_dataset", "just_dataset", ""},
		{"p.d-x", "", "dataset"},
		{"p q.d", "", "project"},
		{"", "", "name project.dataset"},
	}
	for _, tt := range bq {
		sets, err := bqDatasets(tt.in)
		var refs []string
		for _, d := range sets {
			refs = append(refs, d.ref())
		}
		if strings.Join(refs, "|") != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("bqDatasets(%q) = %q, %v", tt.in, refs, err)
		}
	}
	if got := bqIdent("a`b\\c"); got != "`a\\`b\\\\c`" {
		t.Errorf("bqIdent = %s", got)
	}
}

// unknown is a warehouse of a dialect Read does not know.
type unknown struct{ warehouse.Warehouse }

func (unknown) Dialect() warehouse.Dialect { return "oracle" }

func TestUnsupportedDialect(t *testing.T) {
	t.Parallel()
	if _, err := Read(context.Background(), unknown{}, "db", Options{}); err == nil || !strings.Contains(err.Error(), `unsupported dialect "oracle"`) {
		t.Errorf("Read: %v", err)
	}
	if _, err := Fingerprint(context.Background(), unknown{}, "db"); err == nil {
		t.Error("Fingerprint of an unknown dialect")
	}
}
