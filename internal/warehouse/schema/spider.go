package schema

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
)

// spiderTable is a <table>.json file, keys in Spider 2.0's order.
type spiderTable struct {
	TableName         string          `json:"table_name"`
	TableFullName     string          `json:"table_fullname"`
	ColumnNames       []string        `json:"column_names"`
	ColumnTypes       []string        `json:"column_types"`
	NestedColumnNames []string        `json:"nested_column_names,omitempty"`
	NestedColumnTypes []string        `json:"nested_column_types,omitempty"`
	Description       []string        `json:"description"`
	SampleRows        json.RawMessage `json:"sample_rows"`
}

// WriteSpider writes s in Spider 2.0's metadata layout under dir (the
// database's metadata folder, e.g. resource/databases/sqlite/<db>): for
// each folder, dir/<folder path>/DDL.csv (table_name, description when
// any table has one, DDL) and one <table>.json per table, the files
// dataset.LoadSchema reads. BigQuery tables keep their nested leaves
// (nested_column_names/types, with descriptions running parallel to
// them, as Spider 2.0's files have it).
//
// Table and folder names become file names, so each must pass
// dataset.CheckName (letters, digits, '_', '-', '.', not starting with
// '.'); a name that does not, or two that would share a file on a
// case-insensitive disk or a key in dataset.LoadSchema (which keys tables
// by the part after their last '.'), is refused with an error naming the
// table, before anything is written. DDL.csv and .json files left in the
// written folders by an earlier write, for tables s no longer has, are
// removed, so the folder lists exactly s.
func WriteSpider(dir string, s *dataset.Schema) error {
	type plan struct {
		dir    string
		folder *dataset.SchemaFolder
		files  map[string]bool
	}
	var plans []plan
	seenDir := map[string]bool{}
	for _, f := range s.Folders {
		fdir := dir
		if f.Path != "" {
			for _, seg := range strings.Split(f.Path, "/") {
				if err := dataset.CheckName(seg); err != nil {
					return fmt.Errorf("write metadata of %s: folder %q: %w", s.Database, f.Path, err)
				}
			}
			fdir = filepath.Join(dir, filepath.FromSlash(f.Path))
		}
		if seenDir[strings.ToLower(fdir)] {
			return fmt.Errorf("write metadata of %s: folder %q appears twice", s.Database, f.Path)
		}
		seenDir[strings.ToLower(fdir)] = true
		p := plan{dir: fdir, folder: f, files: map[string]bool{"DDL.csv": true}}
		keys := map[string]string{}
		for _, t := range f.Tables {
			if err := dataset.CheckName(t.Name); err != nil {
				return fmt.Errorf("write metadata of %s: table %q in folder %q cannot be a file name: %w", s.Database, t.Name, f.Path, err)
			}
			file := strings.ToLower(t.Name + ".json")
			key := strings.ToLower(t.Name[strings.LastIndexByte(t.Name, '.')+1:])
			if other, ok := keys[key]; ok {
				return fmt.Errorf("write metadata of %s: tables %q and %q in folder %q would share a metadata file or key", s.Database, other, t.Name, f.Path)
			}
			if other, ok := keys["file:"+file]; ok {
				return fmt.Errorf("write metadata of %s: tables %q and %q in folder %q would share a metadata file or key", s.Database, other, t.Name, f.Path)
			}
			keys[key], keys["file:"+file] = t.Name, t.Name
			if t.HasJSON {
				p.files[t.Name+".json"] = true
			}
		}
		plans = append(plans, p)
	}
	for _, p := range plans {
		if err := writeFolder(p.dir, p.folder); err != nil {
			return fmt.Errorf("write metadata of %s: %w", s.Database, err)
		}
		if err := removeStale(p.dir, p.files); err != nil {
			return fmt.Errorf("write metadata of %s: %w", s.Database, err)
		}
	}
	return nil
}

func writeFolder(dir string, f *dataset.SchemaFolder) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	withDesc := false
	for _, t := range f.Tables {
		withDesc = withDesc || t.Description != ""
	}
	var ddl bytes.Buffer
	w := csv.NewWriter(&ddl)
	header := []string{"table_name", "DDL"}
	if withDesc {
		header = []string{"table_name", "description", "DDL"}
	}
	_ = w.Write(header) // writes to a bytes.Buffer cannot fail
	for _, t := range f.Tables {
		rec := []string{t.Name, t.DDL}
		if withDesc {
			rec = []string{t.Name, t.Description, t.DDL}
		}
		_ = w.Write(rec)
		if !t.HasJSON {
			continue
		}
		b, err := json.MarshalIndent(spiderJSON(t), "", "    ")
		if err != nil {
			return fmt.Errorf("table %s: %w", t.FullName, err)
		}
		if err := os.WriteFile(filepath.Join(dir, t.Name+".json"), append(b, '\n'), 0o600); err != nil {
			return fmt.Errorf("table %s: %w", t.FullName, err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "DDL.csv"), ddl.Bytes(), 0o600)
}

func spiderJSON(t *dataset.Table) spiderTable {
	j := spiderTable{TableName: t.Name, TableFullName: t.FullName, ColumnNames: []string{}, ColumnTypes: []string{}, Description: []string{}}
	if j.TableFullName == "" {
		j.TableFullName = t.Name
	}
	for _, c := range t.Columns {
		j.ColumnNames = append(j.ColumnNames, c.Name)
		j.ColumnTypes = append(j.ColumnTypes, c.Type)
	}
	if len(t.Nested) > 0 {
		for _, c := range t.Nested {
			j.NestedColumnNames = append(j.NestedColumnNames, c.Name)
			j.NestedColumnTypes = append(j.NestedColumnTypes, c.Type)
			j.Description = append(j.Description, c.Description)
		}
	} else {
		for _, c := range t.Columns {
			j.Description = append(j.Description, c.Description)
		}
	}
	j.SampleRows = t.SampleRows
	if len(bytes.TrimSpace(j.SampleRows)) == 0 {
		j.SampleRows = json.RawMessage("[]")
	}
	return j
}

// removeStale deletes metadata files (DDL.csv, *.json) in dir that this
// write did not produce.
func removeStale(dir string, keep map[string]bool) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (name != "DDL.csv" && !strings.HasSuffix(name, ".json")) || keep[name] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
