// Package dataset loads Text-to-SQL benchmark folders into one in-memory model
// of an example: id, database, dialect, question, external knowledge and gold.
//
// Two layouts are read: Spider 2.0's (a task JSONL at the root, resource/,
// evaluation_suite/gold/) and Spider 1.0 / BIRD's (dev.json beside
// database/<db>/<db>.sqlite, or BIRD's dev_databases/<db>/<db>.sqlite with
// its database_description/<table>.csv column documentation). Problems with single examples (a malformed line,
// an unknown database, a missing document or sqlite file) are collected, each
// naming its file and line, instead of stopping at the first.
//
// Every file the loader opens must resolve, links followed, inside the
// dataset folder (or --sqlite-dir), and is checked against its limit
// (limits.go) before it is read: a line or database that needs a file
// leading out, or one over its limit, is left out like a malformed line.
package dataset

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Layout is the folder convention a dataset follows.
type Layout string

// Supported layouts.
const (
	LayoutSpider2 Layout = "spider2"
	LayoutSpider1 Layout = "spider1/bird"
)

// Example is one question to answer.
type Example struct {
	ID       string
	DB       string
	Dialect  sqltext.Dialect
	Question string
	// ExternalKnowledge is the text of the referenced document, if any.
	ExternalKnowledge     string
	ExternalKnowledgeFile string
	Temporal              bool
	// Difficulty is BIRD's difficulty label (simple, moderate,
	// challenging); empty when the dataset has none.
	Difficulty string
	Gold       Gold
	// Source is "file:line" of the task line.
	Source string
}

// Gold is what is known about an example's correct answer.
type Gold struct {
	// SQL is the gold query, when the dataset has one.
	SQL string
	// Results are the gold result CSVs (exec_result), base file or variants.
	Results []string
	Single  bool
	// Spec holds condition_cols and ignore_order from the eval config.
	Spec    Spec
	HasSpec bool
}

// Database is one database that examples refer to.
type Database struct {
	Name    string
	Dialect sqltext.Dialect
	// MetaDir holds Spider 2.0 metadata (DDL.csv and per-table JSON); empty
	// when the dataset has none for this database.
	MetaDir string
	// SQLitePath is the local database file (SQLite only).
	SQLitePath string
	// Descriptions is BIRD's column documentation, read from
	// DescriptionDir (<db>/database_description/*.csv); nil when the
	// dataset has none for this database.
	Descriptions   Descriptions
	DescriptionDir string
	// base is the folder every file of the database must resolve inside:
	// the dataset root ("" for a Database built elsewhere: its MetaDir).
	base string
}

// Key identifies a database within a dataset.
func (d *Database) Key() string { return string(d.Dialect) + "/" + d.Name }

// Problem is one thing wrong with the input.
type Problem struct {
	File     string
	Line     int
	Instance string
	Message  string
	// Skipped marks a task line or entry left out of the dataset
	// (malformed, duplicated, a name that could be taken for a path).
	Skipped bool
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	if p.Instance != "" {
		b.WriteString(": " + p.Instance)
	}
	b.WriteString(": " + p.Message)
	return b.String()
}

// Dataset is a loaded benchmark folder.
type Dataset struct {
	Root     string
	Layout   Layout
	TaskFile string
	// GoldDir is evaluation_suite/gold when present.
	GoldDir   string
	Examples  []*Example
	Databases map[string]*Database
	Problems  []Problem
	// blocked holds ids of examples that cannot run (their problem is in
	// Problems).
	blocked map[string]bool
	// refused holds, by Database.Key, why a database whose files lead out
	// of the dataset or are over their limits is not used.
	refused map[string]error
	// index is each example's position in Examples, built by Load, so a
	// lookup by id costs the same at 10,000 examples as at 10 (the
	// runtime looks an example up for every task). A lookup checks the
	// position still holds the id, and scans when it does not (Examples
	// changed since) or when there is no index.
	index map[string]int
	// golds is the gold result folder's listing while loading.
	golds *GoldIndex
}

// Options adjust loading.
type Options struct {
	// TaskFile picks the task JSONL when the root holds several.
	TaskFile string
	// SQLiteDir is searched first for <db>.sqlite files.
	SQLiteDir string
	// Dialect overrides the dialect derived from instance id prefixes.
	Dialect sqltext.Dialect
	// Catalogue registers every database of resource/databases (metadata
	// folders per dialect, and SQLite files), not only those the task file
	// names: what quorum serve can be asked about.
	Catalogue bool
}

// Load reads the dataset folder at root. It returns an error only when the
// folder cannot be used at all; problems with single examples are in
// Dataset.Problems.
func Load(root string, opt Options) (*Dataset, error) {
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("dataset folder: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("dataset %s is not a folder: pass the folder that holds the task file", root)
	}
	ds := &Dataset{Root: root, Databases: map[string]*Database{}, blocked: map[string]bool{}, refused: map[string]error{}}
	if opt.TaskFile == "" {
	find:
		for _, name := range []string{"dev.json", "train.json", "test.json"} {
			if _, err := os.Stat(filepath.Join(root, name)); err != nil {
				continue
			}
			for _, dir := range databaseDirs(name) {
				if st, err := os.Stat(filepath.Join(root, dir)); err == nil && st.IsDir() {
					opt.TaskFile = filepath.Join(root, name)
					break find
				}
			}
		}
	}
	if strings.HasSuffix(opt.TaskFile, ".json") {
		ds.Layout = LayoutSpider1
		err = ds.loadSpider1(opt)
	} else {
		ds.Layout = LayoutSpider2
		err = ds.loadSpider2(opt)
	}
	if err != nil {
		return nil, err
	}
	if opt.Catalogue {
		ds.catalogue(opt)
	}
	ds.golds = nil
	ds.index = make(map[string]int, len(ds.Examples))
	for i, e := range ds.Examples {
		if _, dup := ds.index[e.ID]; !dup {
			ds.index[e.ID] = i
		}
	}
	sort.SliceStable(ds.Problems, func(i, j int) bool {
		if ds.Problems[i].File != ds.Problems[j].File {
			return ds.Problems[i].File < ds.Problems[j].File
		}
		return ds.Problems[i].Line < ds.Problems[j].Line
	})
	return ds, nil
}

func (ds *Dataset) problem(file string, line int, id, format string, args ...any) {
	ds.Problems = append(ds.Problems, Problem{File: file, Line: line, Instance: id, Message: fmt.Sprintf(format, args...)})
	if id != "" {
		ds.blocked[id] = true
	}
}

// skip records a task line that is left out.
func (ds *Dataset) skip(file string, line int, id, format string, args ...any) {
	ds.Problems = append(ds.Problems, Problem{File: file, Line: line, Instance: id, Message: fmt.Sprintf(format, args...), Skipped: true})
}

// Skipped lists the task lines left out.
func (ds *Dataset) Skipped() []Problem {
	var out []Problem
	for _, p := range ds.Problems {
		if p.Skipped {
			out = append(out, p)
		}
	}
	return out
}

// Runnable reports whether the example has no blocking problem.
func (ds *Dataset) Runnable(id string) bool { return !ds.blocked[id] }

// checkQuestion refuses a question over MaxQuestionBytes: prompts repeat
// it on every call of every candidate, so its line is left out when the
// dataset loads, before any work.
func checkQuestion(q string) error {
	if n := len(q); n > MaxQuestionBytes {
		return fmt.Errorf("the question is %d bytes, over the %d-byte limit for a question: shorten it", n, MaxQuestionBytes)
	}
	return nil
}

// Example returns the example with the given id.
func (ds *Dataset) Example(id string) (*Example, bool) {
	if i, ok := ds.index[id]; ok && i < len(ds.Examples) && ds.Examples[i].ID == id {
		return ds.Examples[i], true
	}
	for _, e := range ds.Examples {
		if e.ID == id {
			return e, true
		}
	}
	return nil, false
}

// Database returns the database of an example.
func (ds *Dataset) Database(e *Example) (*Database, bool) {
	db, ok := ds.Databases[string(e.Dialect)+"/"+e.DB]
	return db, ok
}

// Filter selects examples.
type Filter struct {
	IDs      []string
	Dialect  sqltext.Dialect
	Database string
	Limit    int
}

// Select returns the examples matching f, in dataset order. Unknown ids are an
// error naming them.
func (ds *Dataset) Select(f Filter) ([]*Example, error) {
	want := map[string]bool{}
	missing := map[string]bool{}
	for _, id := range f.IDs {
		want[id], missing[id] = true, true
	}
	var out []*Example
	for _, e := range ds.Examples {
		if len(want) > 0 && !want[e.ID] {
			continue
		}
		delete(missing, e.ID)
		if f.Dialect != "" && e.Dialect != f.Dialect {
			continue
		}
		if f.Database != "" && !strings.EqualFold(e.DB, f.Database) {
			continue
		}
		out = append(out, e)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	if len(missing) > 0 && (f.Limit == 0 || len(out) < f.Limit) {
		var ids []string
		for id := range missing {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return nil, fmt.Errorf("unknown instance ids %s in %s", strings.Join(ids, ", "), ds.TaskFile)
	}
	return out, nil
}

// DialectFromID derives the dialect from a Spider 2.0 instance id prefix:
// sf/sf_bq Snowflake, bq/ga BigQuery, local SQLite.
func DialectFromID(id string) (sqltext.Dialect, bool) {
	switch {
	case strings.HasPrefix(id, "sf"):
		return sqltext.Snowflake, true
	case strings.HasPrefix(id, "bq"), strings.HasPrefix(id, "ga"):
		return sqltext.BigQuery, true
	case strings.HasPrefix(id, "local"):
		return sqltext.SQLite, true
	}
	return "", false
}
