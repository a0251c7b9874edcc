package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// taskLine holds the fields of both Spider 2.0 task files: lite uses db and
// question, snow db_id and instruction.
type taskLine struct {
	InstanceID        *string         `json:"instance_id"`
	DB                string          `json:"db"`
	DBID              string          `json:"db_id"`
	Question          string          `json:"question"`
	Instruction       string          `json:"instruction"`
	ExternalKnowledge *string         `json:"external_knowledge"`
	Temporal          json.RawMessage `json:"temporal"`
}

func findTaskFile(root string) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(root, "*.jsonl"))
	var tasks []string
	for _, m := range matches {
		if !strings.HasSuffix(m, "_eval.jsonl") {
			tasks = append(tasks, m)
		}
	}
	switch len(tasks) {
	case 0:
		return "", fmt.Errorf("dataset %s has no task file: expected a Spider 2.0 *.jsonl at its root, or dev.json with database/ (Spider 1.0) or dev_databases/ (BIRD)", root)
	case 1:
		return tasks[0], nil
	}
	return "", fmt.Errorf("dataset %s has %d task files (%s): choose one with --tasks", root, len(tasks), strings.Join(tasks, ", "))
}

func (ds *Dataset) loadSpider2(opt Options) error {
	task := opt.TaskFile
	if task == "" {
		var err error
		if task, err = findTaskFile(ds.Root); err != nil {
			return err
		}
	} else if !filepath.IsAbs(task) && !strings.Contains(task, string(filepath.Separator)) {
		task = filepath.Join(ds.Root, task)
	}
	ds.TaskFile = task
	data, err := os.ReadFile(task)
	if err != nil {
		return fmt.Errorf("task file: %w", err)
	}
	gold := filepath.Join(ds.Root, "evaluation_suite", "gold")
	var specs map[string]eval.Spec
	if st, err := os.Stat(gold); err == nil && st.IsDir() {
		ds.GoldDir = gold
		if specFile, err := eval.FindSpecFile(gold); err == nil {
			if specs, err = eval.LoadSpecs(specFile); err != nil {
				ds.problem(specFile, 0, "", "%v", err)
			}
		}
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var tl taskLine
		if err := json.Unmarshal([]byte(text), &tl); err != nil {
			ds.skip(task, line, "", "malformed JSON line: %v", err)
			continue
		}
		if tl.InstanceID == nil || *tl.InstanceID == "" {
			ds.skip(task, line, "", "no instance_id")
			continue
		}
		id := *tl.InstanceID
		if err := CheckName(id); err != nil {
			ds.skip(task, line, "", "instance_id %q: %v", id, err)
			continue
		}
		if db := firstNonEmpty(tl.DB, tl.DBID); db != "" {
			if err := CheckName(db); err != nil {
				ds.skip(task, line, "", "db %q: %v", db, err)
				continue
			}
		}
		if first, dup := seen[id]; dup {
			// Reported without blocking the first occurrence, which still runs.
			ds.skip(task, line, id, "duplicate instance_id (first on line %d); this line is ignored", first)
			continue
		}
		seen[id] = line
		e := &Example{ID: id, DB: firstNonEmpty(tl.DB, tl.DBID), Question: firstNonEmpty(tl.Question, tl.Instruction),
			Source: fmt.Sprintf("%s:%d", task, line), Temporal: len(tl.Temporal) > 0 && string(tl.Temporal) != "null"}
		ds.Examples = append(ds.Examples, e)
		if e.Question == "" {
			ds.problem(task, line, id, "no question (expected \"question\" or \"instruction\")")
		}
		ds.checkSize(task, line, e)
		if e.DB == "" {
			ds.problem(task, line, id, "no database (expected \"db\" or \"db_id\")")
			continue
		}
		e.Dialect = opt.Dialect
		if e.Dialect == "" {
			d, ok := DialectFromID(id)
			if !ok {
				ds.problem(task, line, id, "cannot tell the dialect from the id prefix (bq/ga BigQuery, sf Snowflake, local SQLite); pass --dialect")
				continue
			}
			e.Dialect = d
		}
		if tl.ExternalKnowledge != nil && strings.TrimSpace(*tl.ExternalKnowledge) != "" {
			name := strings.TrimSpace(*tl.ExternalKnowledge)
			e.ExternalKnowledgeFile = name
			docs := filepath.Join(ds.Root, "resource", "documents")
			doc := filepath.Join(docs, name)
			// A path, or a symlink out of the documents folder, would send
			// any local file to the LLM endpoint: the line is left out
			// like a malformed one (refused unless --skip-invalid).
			if err := CheckName(name); err != nil {
				ds.Examples = ds.Examples[:len(ds.Examples)-1]
				ds.skip(task, line, id, "external_knowledge %q: %v (name a file in %s)", name, err, docs)
				continue
			} else if _, err := os.Stat(doc); err != nil {
				ds.problem(task, line, id, "missing document %s (external_knowledge %q)", doc, name)
			} else if real, err := within(docs, doc); err != nil {
				ds.Examples = ds.Examples[:len(ds.Examples)-1]
				ds.skip(task, line, id, "external_knowledge %q: %v", name, err)
				continue
			} else if b, err := os.ReadFile(real); err != nil {
				ds.problem(task, line, id, "document %s: %v", doc, err)
			} else {
				e.ExternalKnowledge = string(b)
			}
		}
		ds.resolveDatabase(e, task, line, opt)
		ds.attachGold(e, specs)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", task, err)
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// resolveDatabase finds the example's metadata folder and, for SQLite, its
// database file, registering the database once.
func (ds *Dataset) resolveDatabase(e *Example, file string, line int, opt Options) {
	key := string(e.Dialect) + "/" + e.DB
	db, ok := ds.Databases[key]
	if !ok {
		db = &Database{Name: e.DB, Dialect: e.Dialect}
		base := filepath.Join(ds.Root, "resource", "databases")
		// Lite nests metadata under the dialect; snow puts databases directly
		// under resource/databases.
		for _, dir := range []string{filepath.Join(base, string(e.Dialect)), base} {
			if m := findFolder(dir, e.DB); m != "" && hasMetadata(m) {
				db.MetaDir = m
				break
			}
		}
		if e.Dialect == warehouse.SQLite {
			db.SQLitePath = findSQLite(ds.Root, opt.SQLiteDir, e.DB)
		}
		ds.Databases[key] = db
	}
	switch {
	case e.Dialect == warehouse.SQLite && db.SQLitePath == "":
		var where []string
		if opt.SQLiteDir != "" {
			where = append(where, opt.SQLiteDir)
		}
		where = append(where, filepath.Join(ds.Root, "resource", "databases", "spider2-localdb"), filepath.Join(ds.Root, "resource", "databases"))
		ds.problem(file, line, e.ID, "missing sqlite file %s.sqlite for database %q (looked in %s); put the Spider 2.0 local databases in resource/databases/spider2-localdb/ or pass --sqlite-dir",
			e.DB, e.DB, strings.Join(where, ", "))
	case e.Dialect != warehouse.SQLite && db.MetaDir == "":
		ds.problem(file, line, e.ID, "unknown database %q: no folder resource/databases/%s/%s (or resource/databases/%s)", e.DB, e.Dialect, e.DB, e.DB)
	}
}

// findFolder returns dir/name, matching case and '-'/'_' loosely as Spider
// 2.0 needs (sqlite-sakila is stored as SQLITE_SAKILA, Db-IMDB as DB_IMDB).
func findFolder(dir, name string) string {
	exact := filepath.Join(dir, name)
	if st, err := os.Stat(exact); err == nil && st.IsDir() {
		return exact
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }
	for _, en := range entries {
		if en.IsDir() && norm(en.Name()) == norm(name) {
			return filepath.Join(dir, en.Name())
		}
	}
	return ""
}

func hasMetadata(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found {
			return filepath.SkipDir
		}
		if !d.IsDir() && (d.Name() == "DDL.csv" || strings.HasSuffix(d.Name(), ".json")) {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

func findSQLite(root, sqliteDir, db string) string {
	var dirs []string
	if sqliteDir != "" {
		dirs = append(dirs, sqliteDir)
	}
	dirs = append(dirs, filepath.Join(root, "resource", "databases", "spider2-localdb"), filepath.Join(root, "resource", "databases"))
	for _, dir := range dirs {
		for _, name := range []string{db + ".sqlite", strings.ReplaceAll(db, "-", "_") + ".sqlite"} {
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p
			}
		}
	}
	return ""
}

func (ds *Dataset) attachGold(e *Example, specs map[string]eval.Spec) {
	if ds.GoldDir == "" {
		return
	}
	if b, err := os.ReadFile(filepath.Join(ds.GoldDir, "sql", e.ID+".sql")); err == nil {
		e.Gold.SQL = string(b)
	}
	if files, single, err := eval.GoldFiles(filepath.Join(ds.GoldDir, "exec_result"), e.ID); err == nil {
		e.Gold.Results, e.Gold.Single = files, single
	}
	if s, ok := specs[e.ID]; ok {
		e.Gold.Spec, e.Gold.HasSpec = s, true
	}
}
