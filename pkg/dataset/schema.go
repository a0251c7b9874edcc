package dataset

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Schema is the Spider 2.0 metadata of one database: its schema folders
// (BigQuery project.dataset, Snowflake SCHEMA, or the database folder itself
// for SQLite), each with tables from DDL.csv and per-table JSON.
type Schema struct {
	Database string
	Folders  []*SchemaFolder
}

// SchemaFolder is one folder holding a DDL.csv and table JSON files.
type SchemaFolder struct {
	// Path is the folder relative to the database's metadata folder, with
	// '/' separators ("" for SQLite, "bigquery-public-data.ga4_obfuscated_sample_ecommerce", "NOAA_GSOD").
	Path string
	Dir  string
	// Tables come in DDL.csv row order, then tables that only have JSON, by
	// name. The reference emits prompts in DDL.csv order.
	Tables []*Table
}

// Table is one table's metadata.
type Table struct {
	Name     string
	FullName string
	// DDL is the CREATE statement from DDL.csv ("" if the table has no row).
	DDL         string
	Description string
	Columns     []ColumnMeta
	// Nested lists BigQuery's flattened STRUCT/ARRAY leaves.
	Nested []ColumnMeta
	// SampleRows is the raw JSON list of row objects, key order preserved.
	SampleRows json.RawMessage
	// HasJSON is false for tables listed only in DDL.csv.
	HasJSON bool
	// JSONFile is the table's JSON file, when it has one.
	JSONFile string
}

// ColumnMeta is one column.
type ColumnMeta struct {
	Name        string
	Type        string
	Description string
}

type tableJSON struct {
	TableName         string            `json:"table_name"`
	TableFullName     string            `json:"table_fullname"`
	ColumnNames       []string          `json:"column_names"`
	ColumnTypes       []string          `json:"column_types"`
	NestedColumnNames []string          `json:"nested_column_names"`
	NestedColumnTypes []string          `json:"nested_column_types"`
	Description       []json.RawMessage `json:"description"`
	SampleRows        json.RawMessage   `json:"sample_rows"`
}

// LoadSchema reads the metadata of db. Unreadable files are reported as
// problems; the rest of the schema is still returned. Each file is read
// only when it resolves inside the dataset and is within MaxMetadataBytes:
// Load checked them, but serve reads the schema again later.
func LoadSchema(db *Database) (*Schema, []Problem, error) {
	if db.MetaDir == "" {
		return nil, nil, fmt.Errorf("database %s (%s) has no Spider 2.0 metadata folder", db.Name, db.Dialect)
	}
	base := db.base
	if base == "" {
		base = db.MetaDir
	}
	s := &Schema{Database: db.Name}
	var problems []Problem
	err := filepath.WalkDir(db.MetaDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		f, probs := loadFolder(base, db.MetaDir, p)
		problems = append(problems, probs...)
		if f != nil {
			s.Folders = append(s.Folders, f)
		}
		return nil
	})
	if err != nil {
		return nil, problems, fmt.Errorf("read metadata of %s: %w", db.Name, err)
	}
	return s, problems, nil
}

// loadFolder reads the metadata folder dir of the database whose metadata
// is in meta; its files must resolve inside base.
func loadFolder(base, meta, dir string) (*SchemaFolder, []Problem) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []Problem{{File: dir, Message: err.Error()}}
	}
	var jsonFiles []string
	hasDDL := false
	for _, e := range entries {
		switch {
		case e.IsDir():
		case e.Name() == "DDL.csv":
			hasDDL = true
		case strings.HasSuffix(e.Name(), ".json"):
			jsonFiles = append(jsonFiles, e.Name())
		}
	}
	if !hasDDL && len(jsonFiles) == 0 {
		return nil, nil
	}
	rel, _ := filepath.Rel(meta, dir)
	if rel == "." {
		rel = ""
	}
	f := &SchemaFolder{Path: filepath.ToSlash(rel), Dir: dir}
	var problems []Problem
	byName := map[string]*Table{}
	if hasDDL {
		rows, err := readDDL(base, filepath.Join(dir, "DDL.csv"))
		if err != nil {
			problems = append(problems, Problem{File: filepath.Join(dir, "DDL.csv"), Message: err.Error()})
		}
		for _, r := range rows {
			t := &Table{Name: r.name, DDL: r.ddl, Description: r.description}
			f.Tables = append(f.Tables, t)
			byName[lastDotted(r.name)] = t
		}
	}
	sort.Strings(jsonFiles)
	var extra []*Table
	for _, name := range jsonFiles {
		path := filepath.Join(dir, name)
		tj, err := readTableJSON(base, path)
		if err != nil {
			problems = append(problems, Problem{File: path, Message: err.Error()})
			continue
		}
		// Files are named <table>.json or <SCHEMA>.<table>.json.
		key := lastDotted(strings.TrimSuffix(name, ".json"))
		if tj.TableName != "" {
			key = lastDotted(tj.TableName)
		}
		t, ok := byName[key]
		if !ok {
			t = &Table{Name: key}
			byName[key] = t
			extra = append(extra, t)
		}
		fillFromJSON(t, tj, path)
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].Name < extra[j].Name })
	f.Tables = append(f.Tables, extra...)
	return f, problems
}

func lastDotted(s string) string {
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[i+1:]
	}
	return s
}

type ddlRow struct{ name, ddl, description string }

// readDDL reads a DDL.csv: table_name plus ddl/DDL and, for Snowflake,
// description. Multi-line DDL sits inside quotes.
func readDDL(base, path string) ([]ddlRow, error) {
	data, err := readInside(base, path, MaxMetadataBytes, "DDL.csv")
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("malformed CSV: %w", err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[strings.ToLower(strings.TrimSpace(h))] = i
	}
	nameCol, ok := col["table_name"]
	if !ok {
		return nil, fmt.Errorf("no table_name column in header %q", strings.Join(recs[0], ","))
	}
	ddlCol, hasDDL := col["ddl"]
	descCol, hasDesc := col["description"]
	var out []ddlRow
	for i, rec := range recs[1:] {
		if nameCol >= len(rec) {
			return out, fmt.Errorf("row %d has no table_name", i+2)
		}
		row := ddlRow{name: strings.TrimSpace(rec[nameCol])}
		if hasDDL && ddlCol < len(rec) {
			row.ddl = rec[ddlCol]
		}
		if hasDesc && descCol < len(rec) {
			row.description = rec[descCol]
		}
		out = append(out, row)
	}
	return out, nil
}

func readTableJSON(base, path string) (*tableJSON, error) {
	b, err := readInside(base, path, MaxMetadataBytes, "table JSON")
	if err != nil {
		return nil, err
	}
	var tj tableJSON
	if err := json.Unmarshal(pythonJSON(b), &tj); err != nil {
		return nil, fmt.Errorf("malformed table JSON: %w", err)
	}
	if len(tj.ColumnNames) != len(tj.ColumnTypes) {
		return nil, fmt.Errorf("column_names has %d entries but column_types %d", len(tj.ColumnNames), len(tj.ColumnTypes))
	}
	return &tj, nil
}

func fillFromJSON(t *Table, tj *tableJSON, path string) {
	t.HasJSON, t.JSONFile = true, path
	t.FullName = tj.TableFullName
	if t.FullName == "" {
		t.FullName = t.Name
	}
	desc := func(i int) string {
		if i >= len(tj.Description) {
			return ""
		}
		var s string
		if json.Unmarshal(tj.Description[i], &s) != nil {
			return "" // null or not text
		}
		return s
	}
	nested := len(tj.NestedColumnNames) > 0
	for i, name := range tj.ColumnNames {
		c := ColumnMeta{Name: name, Type: tj.ColumnTypes[i]}
		if !nested {
			c.Description = desc(i)
		}
		t.Columns = append(t.Columns, c)
	}
	if nested {
		// BigQuery descriptions run parallel to the nested list; top-level
		// columns appear in it by name.
		idx := map[string]int{}
		for i, name := range tj.NestedColumnNames {
			typ := ""
			if i < len(tj.NestedColumnTypes) {
				typ = tj.NestedColumnTypes[i]
			}
			t.Nested = append(t.Nested, ColumnMeta{Name: name, Type: typ, Description: desc(i)})
			if _, ok := idx[name]; !ok {
				idx[name] = i
			}
		}
		for i := range t.Columns {
			if j, ok := idx[t.Columns[i].Name]; ok {
				t.Columns[i].Description = desc(j)
			}
		}
	}
	t.SampleRows = tj.SampleRows
}

// Count returns the number of tables and columns (top level) in the schema.
func (s *Schema) Count() (tables, columns int) {
	for _, f := range s.Folders {
		for _, t := range f.Tables {
			tables++
			columns += len(t.Columns)
		}
	}
	return tables, columns
}

// pythonJSON rewrites the non-standard tokens Python's json.dump writes for
// floats (NaN, Infinity, -Infinity) to null, outside string literals, so the
// Spider 2.0 table files decode with encoding/json.
func pythonJSON(b []byte) []byte {
	var out []byte
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			if c == '\\' && i+1 < len(b) {
				if out != nil {
					out = append(out, c, b[i+1])
				}
				i++
				continue
			}
			if c == '"' {
				inString = false
			}
			if out != nil {
				out = append(out, c)
			}
			continue
		}
		if c == '"' {
			inString = true
		}
		for _, tok := range []string{"-Infinity", "Infinity", "NaN"} {
			if strings.HasPrefix(string(b[i:min(len(b), i+len(tok))]), tok) {
				if out == nil {
					out = append(make([]byte, 0, len(b)), b[:i]...)
				}
				out = append(out, "null"...)
				i += len(tok) - 1
				c = 0
				break
			}
		}
		if c == 0 {
			continue
		}
		if out != nil {
			out = append(out, c)
		}
	}
	if out == nil {
		return b
	}
	return out
}
