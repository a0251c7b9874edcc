package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/pyrepr"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

const demoDir = "../../../examples/demo"

// demo returns the demo dataset's shop database, its shipped Spider 2.0
// metadata and a read-only warehouse on its SQLite file.
func demo(t *testing.T) (*dataset.Database, *dataset.Schema, *sqlite.DB) {
	t.Helper()
	ds, err := dataset.Load(demoDir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db, ok := ds.Databases["sqlite/shop"]
	if !ok {
		t.Fatal("the demo dataset has no sqlite/shop database")
	}
	s, probs, err := dataset.LoadSchema(db)
	if err != nil || len(probs) > 0 {
		t.Fatalf("demo metadata: %v %v", err, probs)
	}
	wh, err := sqlite.Open(sqlite.Config{Path: db.SQLitePath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wh.Close() })
	return db, s, wh
}

// withoutDescriptions is the Spider side as a live SQLite read sees it:
// SQLite keeps no column descriptions. The demo generator also wrote REAL
// cells through Go's encoding/json, which drops ".0" from integral floats
// (0 for 0.0); Spider 2.0's own files, written by Python, keep it
// (northwind's "unitprice": 55.0), and so does Read. Integer literals in
// REAL columns are therefore written back as Python wrote them.
func withoutDescriptions(t *testing.T, s *dataset.Schema) {
	t.Helper()
	for _, f := range s.Folders {
		for _, tb := range f.Tables {
			real := map[string]bool{}
			for i := range tb.Columns {
				tb.Columns[i].Description = ""
				if tb.Columns[i].Type == "REAL" {
					real[tb.Columns[i].Name] = true
				}
			}
			tb.SampleRows = pythonFloats(t, tb.SampleRows, real)
		}
	}
}

// pythonFloats rewrites integer literals of the named keys of each row
// object as floats ("0" to "0.0"), keeping key order.
func pythonFloats(t *testing.T, raw json.RawMessage, keys map[string]bool) json.RawMessage {
	t.Helper()
	var rows []json.RawMessage
	if err := json.Unmarshal(raw, &rows); err != nil {
		t.Fatalf("sample rows %s: %v", raw, err)
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		b.WriteByte('{')
		for j := 0; dec.More(); j++ {
			kt, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if j > 0 {
				b.WriteString(", ")
			}
			writeString(&b, kt.(string))
			b.WriteString(": ")
			if keys[kt.(string)] && jsonNumber.MatchString(string(v)) && !bytes.ContainsAny(v, ".eE") {
				v = append(v, ".0"...)
			}
			b.Write(v)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// generatorRows reads the rows examples/demo/gen wrote as sample rows:
// five rows spread through each table (row i*n/5 in insertion order), not
// the first ones, encoded as Read encodes its own.
func generatorRows(t *testing.T, wh warehouse.Warehouse, table string) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	res, err := wh.Query(ctx, "SELECT count(*) FROM "+sqliteIdent(table), warehouse.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	n := int(res.Rows[0][0].Int)
	all := &warehouse.Result{}
	for i := 0; i < 5 && i < n; i++ {
		r, err := wh.Query(ctx, fmt.Sprintf("SELECT * FROM %s LIMIT 1 OFFSET %d", sqliteIdent(table), i*n/5), warehouse.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		all.Columns = r.Columns
		all.Rows = append(all.Rows, r.Rows...)
	}
	return encodeRows(all, warehouse.SQLite)
}

func render(s *dataset.Schema, db *dataset.Database, opt dbinfo.Options) string {
	info := dbinfo.FromMetadata(s, db, opt)
	return info.Tables + info.Structure()
}

// TestDemoMatchesSpiderMetadata: the demo's SQLite file read live and
// rendered by dbinfo gives the shipped Spider 2.0 metadata's table
// information, column for column and, with the generator's rows picked,
// sample row for sample row; so does the live schema written with
// WriteSpider and loaded back by the unchanged dataset loader.
func TestDemoMatchesSpiderMetadata(t *testing.T) {
	t.Parallel()
	db, spider, wh := demo(t)
	withoutDescriptions(t, spider)
	live, err := Read(context.Background(), wh, "shop", Options{SampleRows: 5})
	if err != nil {
		t.Fatal(err)
	}
	// The first live sample row is the generator's first row too.
	for _, f := range live.Folders {
		for _, tb := range f.Tables {
			got := firstRow(t, tb.SampleRows)
			want := firstRow(t, tableOf(t, spider, tb.Name).SampleRows)
			if got != want {
				t.Errorf("%s: first sample row\n%s\nwant\n%s", tb.Name, got, want)
			}
		}
	}
	matched := cloneSchema(t, live)
	for _, f := range matched.Folders {
		for _, tb := range f.Tables {
			tb.SampleRows = generatorRows(t, wh, tb.Name)
		}
	}
	dir := t.TempDir()
	if err := WriteSpider(dir, matched); err != nil {
		t.Fatal(err)
	}
	loaded, probs, err := dataset.LoadSchema(&dataset.Database{Name: "shop", Dialect: warehouse.SQLite, MetaDir: dir})
	if err != nil || len(probs) > 0 {
		t.Fatalf("load the written metadata: %v %v", err, probs)
	}
	for _, opt := range []struct {
		name string
		opt  dbinfo.Options
	}{{"compressed", dbinfo.DefaultOptions()}, {"uncompressed", dbinfo.Uncompressed()}, {"structural", dbinfo.StructuralOptions()}} {
		want := render(spider, db, opt.opt)
		for _, got := range []struct {
			name string
			s    *dataset.Schema
		}{{"live", matched}, {"written and loaded", loaded}} {
			if g := render(got.s, db, opt.opt); g != want {
				t.Errorf("%s, %s: table information differs from the Spider metadata's:\n%s", opt.name, got.name, firstDiff(g, want))
			}
		}
	}
	if n, _ := live.Count(); n != 29 {
		t.Errorf("%d tables, want 29", n)
	}
	// The DDL is sqlite_master's, ended with ';' as DDL.csv has it.
	for _, f := range spider.Folders {
		for _, tb := range f.Tables {
			if got := tableOf(t, live, tb.Name).DDL; got != tb.DDL {
				t.Errorf("%s DDL %q, want %q", tb.Name, got, tb.DDL)
			}
		}
	}
}

func tableOf(t *testing.T, s *dataset.Schema, name string) *dataset.Table {
	t.Helper()
	for _, f := range s.Folders {
		for _, tb := range f.Tables {
			if tb.Name == name {
				return tb
			}
		}
	}
	t.Fatalf("no table %s", name)
	return nil
}

func firstRow(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var rows []json.RawMessage
	if err := json.Unmarshal(raw, &rows); err != nil || len(rows) == 0 {
		t.Fatalf("sample rows %s: %v", raw, err)
	}
	s, err := pyrepr.JSON(rows[0])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cloneSchema(t *testing.T, s *dataset.Schema) *dataset.Schema {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out dataset.Schema
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// firstDiff shows where two renderings part.
func firstDiff(got, want string) string {
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			return fmt.Sprintf("line %d:\n got: %.400s\nwant: %.400s", i+1, g, w)
		}
	}
	return "(equal)"
}

// TestSQLiteOptions: sample sizes, the table filter, the table limit and
// the family rule, on the demo file.
func TestSQLiteOptions(t *testing.T) {
	t.Parallel()
	_, _, wh := demo(t)
	count := func(raw json.RawMessage) int {
		var rows []json.RawMessage
		if err := json.Unmarshal(raw, &rows); err != nil {
			t.Fatalf("sample rows %s: %v", raw, err)
		}
		return len(rows)
	}
	tests := []struct {
		name    string
		opt     Options
		tables  int
		samples map[string]int // table: sample rows
		err     string
	}{
		{"default: three rows per table", Options{}, 29, map[string]int{"customers": 3, "events_20240301": 3, "events_20240314": 3}, ""},
		{"no sample rows", Options{SampleRows: -1}, 29, map[string]int{"customers": 0, "orders": 0}, ""},
		{"filter by name, any case", Options{Tables: []string{"ORDERS", "payments", "nope"}, SampleRows: 2}, 2, map[string]int{"orders": 2, "payments": 2}, ""},
		{"only the first of a family", Options{Families: FamilyFirst}, 29, map[string]int{"events_20240301": 3, "events_20240302": 0, "events_20240314": 0, "orders": 3}, ""},
		{"over the table limit", Options{MaxTables: 20}, 0, nil, "29 tables, over the limit of 20"},
		{"within the limit after filtering", Options{MaxTables: 1, Tables: []string{"orders"}}, 1, map[string]int{"orders": 3}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Read(context.Background(), wh, "shop", tt.opt)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "shop") {
					t.Fatalf("err = %v, want %q naming the database", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := s.Count(); n != tt.tables {
				t.Errorf("%d tables, want %d", n, tt.tables)
			}
			for name, want := range tt.samples {
				if got := count(tableOf(t, s, name).SampleRows); got != want {
					t.Errorf("%s: %d sample rows, want %d", name, got, want)
				}
			}
		})
	}
}

// TestSQLiteViewsAndValues: views are read with their columns; sample
// cells keep SQLite's types as Python shows them (floats with .0, text
// dates, NULL, blobs as bytearray text that dbinfo hides); a view over a
// dropped table is left out instead of failing the read.
func TestSQLiteViewsAndValues(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v.sqlite")
	rw := openRW(t, path)
	for _, stmt := range []string{
		`CREATE TABLE "odd ""t""" (id INTEGER, x REAL, d DATE, b BLOB, s TEXT)`,
		`INSERT INTO "odd ""t""" VALUES (1, 2.0, '2024-01-02', x'00ff', 'it''s'), (2, NULL, NULL, NULL, 'a "b"')`,
		`CREATE TABLE gone (a INTEGER)`,
		`CREATE VIEW v AS SELECT id, x * 2 AS x2 FROM "odd ""t"""`,
		`CREATE VIEW broken AS SELECT a FROM gone`,
		`DROP TABLE gone`,
		`CREATE TABLE docs (id INTEGER, body TEXT)`,
		`INSERT INTO docs VALUES (1, printf('%.*c', 100000, 'x'))`,
	} {
		if _, err := rw.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	wh, err := sqlite.Open(sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer wh.Close()
	s, err := Read(context.Background(), wh, "v", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tb := range s.Folders[0].Tables {
		names = append(names, tb.Name)
	}
	if strings.Join(names, ",") != `odd "t",v,docs` {
		t.Fatalf("tables %q, want the tables and the working view", names)
	}
	odd, v, docs := s.Folders[0].Tables[0], s.Folders[0].Tables[1], s.Folders[0].Tables[2]
	// A value over the sample's byte bound is refused inside SQLite: that
	// table gets no sample rows, the others theirs.
	if string(docs.SampleRows) != "[]" || len(docs.Columns) != 2 {
		t.Errorf("docs: %d columns, sample rows %.100s", len(docs.Columns), docs.SampleRows)
	}
	wantRows := `[{"id": 1, "x": 2.0, "d": "2024-01-02", "b": "bytearray(b'\\x00\\xff')", "s": "it's"}, {"id": 2, "x": null, "d": null, "b": null, "s": "a \"b\""}]`
	if string(odd.SampleRows) != wantRows {
		t.Errorf("sample rows\n%s\nwant\n%s", odd.SampleRows, wantRows)
	}
	if v.DDL != `CREATE VIEW v AS SELECT id, x * 2 AS x2 FROM "odd ""t""";` || len(v.Columns) != 2 || string(v.SampleRows) != `[{"id": 1, "x2": 4.0}, {"id": 2, "x2": null}]` {
		t.Errorf("view: %+v", v)
	}
	info := dbinfo.FromMetadata(s, &dataset.Database{Name: "v", Dialect: warehouse.SQLite}, dbinfo.DefaultOptions())
	if !strings.Contains(info.Tables, `[{'id': 1, 'x': 2.0, 'd': '2024-01-02', 'b': '<binary data>', 's': "it's"}, {'id': 2, 'x': None, 'd': None, 'b': None, 's': 'a "b"'}]`) {
		t.Errorf("rendered:\n%s", info.Tables)
	}
	// A cancelled read fails, naming the database, and keeps the cause.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Read(ctx, wh, "v", Options{}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "v") {
		t.Errorf("cancelled Read: %v", err)
	}
	// The table's name cannot be a file name.
	err = WriteSpider(t.TempDir(), s)
	if err == nil || !strings.Contains(err.Error(), `table "odd \"t\""`) {
		t.Errorf("WriteSpider = %v, want a refusal naming the table", err)
	}
}

func TestEncodeRows(t *testing.T) {
	t.Parallel()
	res := &warehouse.Result{
		Columns: []warehouse.Column{{Name: "n"}, {Name: "f"}, {Name: "big", Type: "FIXED"}, {Name: "dec", Type: "NUMERIC"}, {Name: "txt", Type: "FIXED"}, {Name: "ok"}, {Name: "inf"}, {Name: "html"}},
		Rows: [][]warehouse.Value{{warehouse.IntValue(-3), warehouse.FloatValue(1e16), warehouse.TextValue("99999999999999999999999"),
			warehouse.TextValue("12.50"), warehouse.TextValue("n/a"), warehouse.BoolValue(true), warehouse.FloatValue(posInf()), warehouse.TextValue("<a&b>")}},
	}
	tests := []struct {
		d    warehouse.Dialect
		want string
	}{
		{warehouse.Snowflake, `[{"n": -3, "f": 1e+16, "big": 99999999999999999999999, "dec": 12.50, "txt": "n/a", "ok": true, "inf": null, "html": "<a&b>"}]`},
		// SQLite text is text, whatever the declared type.
		{warehouse.SQLite, `[{"n": -3, "f": 1e+16, "big": "99999999999999999999999", "dec": "12.50", "txt": "n/a", "ok": true, "inf": null, "html": "<a&b>"}]`},
	}
	for _, tt := range tests {
		if got := string(encodeRows(res, tt.d)); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.d, got, tt.want)
		}
	}
	if got := string(encodeRows(&warehouse.Result{Columns: res.Columns}, warehouse.SQLite)); got != "[]" {
		t.Errorf("no rows: %s", got)
	}
	long := bytes.Repeat([]byte{1}, 40)
	got := string(encodeRows(&warehouse.Result{Columns: []warehouse.Column{{Name: "b"}}, Rows: [][]warehouse.Value{{warehouse.BytesValue(long)}}}, warehouse.SQLite))
	if !strings.HasSuffix(got, `...)"}]`) || strings.Count(got, `\\x01`) != maxBinary {
		t.Errorf("long binary: %s", got)
	}
}

func posInf() float64 {
	f, _ := strconv.ParseFloat("+Inf", 64)
	return f
}

// copyDemo copies the demo database file to a temporary folder.
func copyDemo(t *testing.T, db *dataset.Database) string {
	t.Helper()
	b, err := os.ReadFile(db.SQLitePath)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "shop.sqlite")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
