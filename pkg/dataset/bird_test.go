package dataset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

const birdMini = "../../examples/bird-mini"

// TestLoadBirdMini reads the committed BIRD-layout fixture: dev.json beside
// dev_databases/, difficulties, and description files in every encoding
// BIRD uses, with no problem.
func TestLoadBirdMini(t *testing.T) {
	t.Parallel()
	ds, err := Load(birdMini, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Problems) > 0 {
		t.Fatalf("problems: %v", ds.Problems)
	}
	if ds.Layout != LayoutSpider1 || filepath.Base(ds.TaskFile) != "dev.json" || len(ds.Examples) != 9 {
		t.Fatalf("layout %s, task file %s, %d examples", ds.Layout, ds.TaskFile, len(ds.Examples))
	}
	count := map[string]int{}
	for _, e := range ds.Examples {
		count[e.Difficulty]++
		if !ds.Runnable(e.ID) || e.Gold.SQL == "" || e.ExternalKnowledge == "" || e.Dialect != sqltext.SQLite {
			t.Errorf("%s: %+v", e.ID, e)
		}
	}
	if count["simple"] != 4 || count["moderate"] != 3 || count["challenging"] != 2 {
		t.Errorf("difficulties %v", count)
	}
	e, ok := ds.Example("dev_7")
	if !ok || e.Difficulty != "challenging" || !strings.Contains(e.ExternalKnowledge, "full name refers to first_name, last_name") {
		t.Errorf("dev_7: %+v", e)
	}
	db, ok := ds.Database(e)
	if !ok || filepath.Base(db.SQLitePath) != "shop.sqlite" || !strings.Contains(db.SQLitePath, "dev_databases") {
		t.Fatalf("database %+v", db)
	}
	if filepath.Base(db.DescriptionDir) != DescriptionDirName {
		t.Errorf("description dir %q", db.DescriptionDir)
	}
	tables, cols := db.Descriptions.Count()
	if tables != 5 || cols != 14+6+14+14+9 {
		t.Errorf("%d tables, %d columns documented", tables, cols)
	}
	tests := []struct {
		table, column string
		want          ColumnDoc
	}{
		// UTF-8 with a BOM and CRLF: the first header name is still found.
		{"customers", "customer_id", ColumnDoc{Column: "customer_id", Name: "customer id", Description: "the unique id of the customer", DataFormat: "integer"}},
		{"Customers", "CITY", ColumnDoc{Column: "city", Description: "the city the customer lives in (Chicago, Zürich, ...)", DataFormat: "text"}},
		{"customers", "last_name", ColumnDoc{Column: "last_name", Name: "last name", Description: "the customer's last name", DataFormat: "text", ValueDescription: "full name refers to first_name, last_name"}},
		// Latin-1.
		{"categories", "name", ColumnDoc{Column: "name", Description: "nom de la catégorie", DataFormat: "text"}},
		{"categories", "parent_id", ColumnDoc{Column: "parent_id", Name: "parent id", Description: "the category_id of the parent category", DataFormat: "integer", ValueDescription: "NULL for the top-level categories « racine »"}},
		// Windows-1252 with blank lines and padded fields.
		{"orders", "order_id", ColumnDoc{Column: "order_id", Name: "order id", Description: "the unique id of the order", DataFormat: "integer"}},
		{"orders", "status", ColumnDoc{Column: "status", Description: "the order’s status", DataFormat: "text", ValueDescription: "“pending”, “shipped”, “delivered”, “returned” or “cancelled”"}},
		{"orders", "currency", ColumnDoc{Column: "currency", DataFormat: "text", ValueDescription: "USD or EUR (€)"}},
		// A padded header, a short row, a stray quote.
		{"products", "supplier_id", ColumnDoc{Column: "supplier_id", Name: "supplier id"}},
		{"products", "size", ColumnDoc{Column: "size", Description: "clothing or screen size", DataFormat: "text", ValueDescription: `S / M / L or 10" and 13" for screens`}},
		// A header without data_format and value_description.
		{"order_items", "quantity", ColumnDoc{Column: "quantity", Description: "how many units were ordered"}},
	}
	for _, tt := range tests {
		got, ok := db.Descriptions.Column(tt.table, tt.column)
		if !ok || got != tt.want {
			t.Errorf("%s.%s = %+v (found %v), want %+v", tt.table, tt.column, got, ok, tt.want)
		}
	}
	if _, ok := db.Descriptions.Column("order_items", ""); ok {
		t.Error("the padding row ,, was kept")
	}
	if doc, _ := db.Descriptions.Column("customers", "marketing_opt_in"); doc.Text() != "whether the customer accepts marketing e-mails. Value description: 1: opted in; 0: not opted in" {
		t.Errorf("Text() = %q", doc.Text())
	}
}

func TestColumnDocText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  ColumnDoc
		want string
	}{
		{ColumnDoc{}, ""},
		{ColumnDoc{Column: "cust_id", Name: "customer id"}, "customer id"},
		{ColumnDoc{Column: "city", Name: "City"}, ""},
		{ColumnDoc{Column: "x", Description: "  the\n x  value. ", ValueDescription: "1: yes"}, "the x value. Value description: 1: yes"},
		{ColumnDoc{Column: "x", ValueDescription: "commonsense evidence:\nNULL means none"}, "Value description: commonsense evidence: NULL means none"},
	}
	for _, tt := range tests {
		if got := tt.doc.Text(); got != tt.want {
			t.Errorf("%+v.Text() = %q, want %q", tt.doc, got, tt.want)
		}
	}
}

func TestDecodeText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte("plain"), "plain"},
		{[]byte("\xef\xbb\xbfcaf\xc3\xa9"), "café"},
		{[]byte("caf\xe9 \x93quoted\x94 \x80 \x81"), "café “quoted” € \u0081"},
		{[]byte("\xff\xfeh\x00\xe9\x00"), "hé"},
		{[]byte("\xfe\xff\x00h\x00\xe9"), "hé"},
		// A file mixing UTF-8 and latin-1 keeps both readable.
		{[]byte("Z\xc3\xbcrich and Z\xfcrich"), "Zürich and Zürich"},
	}
	for _, tt := range tests {
		if got := DecodeText(tt.in); got != tt.want {
			t.Errorf("DecodeText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestBirdBadDescriptionFiles: description files that cannot be used are
// problems naming the file; the others, and every example, still load.
func TestBirdBadDescriptionFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dbDir := filepath.Join(root, "dev_databases", "shop")
	desc := filepath.Join(dbDir, DescriptionDirName)
	if err := os.MkdirAll(desc, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(birdMini, "dev_databases", "shop", "shop.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"shop.sqlite":                        string(src),
		DescriptionDirName + "/good.csv":     "original_column_name,column_description\nid,the id\n",
		DescriptionDirName + "/noheader.csv": "column,meaning\nid,the id\n",
		DescriptionDirName + "/empty.csv":    " \n\n",
		DescriptionDirName + "/binary.csv":   "original_column_name\n\x00\x01\x02",
		DescriptionDirName + "/notes.txt":    "not a description file",
		DescriptionDirName + "/unclosed.csv": "original_column_name,column_description\nname,\"never closed\n",
		DescriptionDirName + "/ragged.csv":   "original_column_name,column_description,value_description\nid\n\nname,n,v,extra,fields\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dbDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev := `[{"question_id": 1, "db_id": "shop", "question": "How many customers?", "evidence": "", "SQL": "SELECT COUNT(*) FROM customers", "difficulty": "Simple"},
{"question_id": 2, "db_id": "nowhere", "question": "q", "evidence": "", "SQL": "SELECT 1"}]`
	if err := os.WriteFile(filepath.Join(root, "dev.json"), []byte(dev), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"binary.csv: description of table \"binary\" in database \"shop\": the file holds NUL bytes",
		"empty.csv: description of table \"empty\" in database \"shop\": the file is empty",
		"noheader.csv:1: description of table \"noheader\" in database \"shop\": the header has no original_column_name column (found column, meaning)",
		"dev.json: dev_2: missing sqlite file dev_databases/nowhere/nowhere.sqlite",
	}
	if len(ds.Problems) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(ds.Problems), len(want), ds.Problems)
	}
	for _, w := range want {
		found := false
		for _, p := range ds.Problems {
			found = found || strings.Contains(p.String(), w)
		}
		if !found {
			t.Errorf("no problem %q in %v", w, ds.Problems)
		}
	}
	if !ds.Runnable("dev_1") || ds.Runnable("dev_2") {
		t.Error("a bad description file must not block the examples of its database")
	}
	e, _ := ds.Example("dev_1")
	if e.Difficulty != "simple" {
		t.Errorf("difficulty %q, want it lower-cased", e.Difficulty)
	}
	db, _ := ds.Database(e)
	if d, ok := db.Descriptions.Column("good", "id"); !ok || d.Description != "the id" {
		t.Errorf("good.csv: %+v", db.Descriptions["good"])
	}
	// Lenient reads: an unclosed quote runs to the end of the file; a
	// short row has empty fields; extra fields are ignored.
	if d, _ := db.Descriptions.Column("unclosed", "name"); d.Description != "never closed" {
		t.Errorf("unclosed.csv: %+v", db.Descriptions["unclosed"])
	}
	if d, ok := db.Descriptions.Column("ragged", "id"); !ok || d.Description != "" {
		t.Errorf("ragged.csv id: %+v", d)
	}
	if d, _ := db.Descriptions.Column("ragged", "name"); d.Description != "n" || d.ValueDescription != "v" {
		t.Errorf("ragged.csv name: %+v", d)
	}
	if _, ok := db.Descriptions["notes"]; ok {
		t.Error("a .txt file was read as a description")
	}
}

// TestBirdTrainLayout: train.json beside train_databases/ is found without
// --tasks, and --sqlite-dir may point at a BIRD databases folder.
func TestBirdTrainLayout(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dbDir := filepath.Join(root, "train_databases", "shop")
	if err := os.MkdirAll(dbDir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(birdMini, "dev_databases", "shop", "shop.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dbDir, "shop.sqlite"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	// BIRD's train split has no question_id and no difficulty.
	train := `[{"db_id": "shop", "question": "How many customers?", "evidence": "", "SQL": "SELECT COUNT(*) FROM customers"}]`
	if err := os.WriteFile(filepath.Join(root, "train.json"), []byte(train), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := Load(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := ds.Example("train_0")
	if !ok || len(ds.Problems) > 0 || e.Difficulty != "" {
		t.Fatalf("train_0 %+v, problems %v", e, ds.Problems)
	}
	db, _ := ds.Database(e)
	if db.Descriptions != nil || db.DescriptionDir != "" {
		t.Errorf("descriptions without a folder: %+v", db)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "dev.json"), []byte(strings.ReplaceAll(train, "train", "dev")), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err = Load(other, Options{TaskFile: "dev.json", SQLiteDir: filepath.Join(birdMini, "dev_databases")})
	if err != nil {
		t.Fatal(err)
	}
	e, _ = ds.Example("dev_0")
	db, _ = ds.Database(e)
	if len(ds.Problems) > 0 || db.SQLitePath == "" || db.Descriptions == nil {
		t.Errorf("--sqlite-dir dev_databases: %+v, problems %v", db, ds.Problems)
	}
}
