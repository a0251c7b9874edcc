package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
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
	f, err := ds.openTaskFile(task)
	if err != nil {
		return err
	}
	defer f.Close()
	gold := filepath.Join(ds.Root, "evaluation_suite", "gold")
	var specs map[string]Spec
	if st, err := os.Stat(gold); err == nil && st.IsDir() {
		ds.GoldDir = gold
		if specFile, err := FindSpecFile(gold); err == nil {
			if _, err := resolveInside(ds.Root, specFile); err != nil {
				ds.skip(specFile, 0, "", "eval config left out: it %v", err)
			} else if specs, err = LoadSpecs(specFile); err != nil {
				ds.problem(specFile, 0, "", "%v", err)
			}
		}
	}
	seen := map[string]int{}
	lines := newLineReader(f, MaxTaskLineBytes)
	for line := 1; ; line++ {
		text, size, err := lines.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s at line %d: %w", task, line, err)
		}
		if text == nil {
			ds.skip(task, line, "", "the line is %d bytes, over the %d-byte limit for a task line", size, MaxTaskLineBytes)
			continue
		}
		ds.taskLine(task, line, bytes.TrimSpace(text), seen, specs, opt)
	}
	return nil
}

// openTaskFile opens the task file. One inside the dataset folder must
// resolve inside it; one the user named elsewhere (--tasks PATH) is theirs.
func (ds *Dataset) openTaskFile(task string) (*os.File, error) {
	path := task
	if rel, err := filepath.Rel(ds.Root, task); err == nil && !escapes(rel) {
		real, err := resolveInside(ds.Root, task)
		if errors.Is(err, errOutside) {
			return nil, fmt.Errorf("task file %w", err)
		} else if err != nil {
			return nil, fmt.Errorf("task file: %w", err)
		}
		path = real
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("task file: %w", err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("task file %s is not a regular file: pass a JSONL file", task)
	}
	return f, nil
}

// taskLine reads one line of a Spider 2.0 task file into an example.
// Lines that cannot be used safely (a path for a name, a link out of the
// dataset, a file or question over its limit) are left out; an example
// with a problem that does not endanger anything (a missing file) is kept
// but blocked.
func (ds *Dataset) taskLine(task string, line int, text []byte, seen map[string]int, specs map[string]Spec, opt Options) {
	if len(text) == 0 {
		return
	}
	var tl taskLine
	if err := json.Unmarshal(text, &tl); err != nil {
		ds.skip(task, line, "", "malformed JSON line: %v", err)
		return
	}
	if tl.InstanceID == nil || *tl.InstanceID == "" {
		ds.skip(task, line, "", "no instance_id")
		return
	}
	id := *tl.InstanceID
	if err := CheckName(id); err != nil {
		ds.skip(task, line, "", "instance_id %q: %v", id, err)
		return
	}
	if db := firstNonEmpty(tl.DB, tl.DBID); db != "" {
		if err := CheckName(db); err != nil {
			ds.skip(task, line, "", "db %q: %v", db, err)
			return
		}
	}
	if first, dup := seen[id]; dup {
		// Reported without blocking the first occurrence, which still runs.
		ds.skip(task, line, id, "duplicate instance_id (first on line %d); this line is ignored", first)
		return
	}
	seen[id] = line
	e := &Example{ID: id, DB: firstNonEmpty(tl.DB, tl.DBID), Question: firstNonEmpty(tl.Question, tl.Instruction),
		Source: fmt.Sprintf("%s:%d", task, line), Temporal: len(tl.Temporal) > 0 && string(tl.Temporal) != "null"}
	if err := checkQuestion(e.Question); err != nil {
		ds.skip(task, line, id, "%v", err)
		return
	}
	// Problems that block the example without leaving it out, reported
	// once it is known the line is kept.
	var blocking []string
	if e.Question == "" {
		blocking = append(blocking, `no question (expected "question" or "instruction")`)
	}
	if tl.ExternalKnowledge != nil && strings.TrimSpace(*tl.ExternalKnowledge) != "" {
		name := strings.TrimSpace(*tl.ExternalKnowledge)
		e.ExternalKnowledgeFile = name
		docs := filepath.Join(ds.Root, "resource", "documents")
		// A path, a link out of the dataset or an oversize document would
		// send any local file, or any amount of text, to the LLM
		// endpoint: the line is left out like a malformed one (refused
		// unless --skip-invalid).
		if err := CheckName(name); err != nil {
			ds.skip(task, line, id, "external_knowledge %q: %v (name a file in %s)", name, err, docs)
			return
		}
		doc := filepath.Join(docs, name)
		b, err := readInside(ds.Root, doc, MaxDocumentBytes, "document")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			blocking = append(blocking, fmt.Sprintf("missing document %s (external_knowledge %q)", doc, name))
		case err != nil:
			ds.skip(task, line, id, "external_knowledge %q: %v", name, err)
			return
		default:
			e.ExternalKnowledge = string(b)
		}
	}
	if ok, err := ds.resolveDatabase(e, opt, &blocking); err != nil {
		ds.skip(task, line, id, "%v", err)
		return
	} else if ok {
		if err := ds.attachGold(e, specs); err != nil {
			ds.skip(task, line, id, "%v", err)
			return
		}
	}
	ds.Examples = append(ds.Examples, e)
	for _, msg := range blocking {
		ds.problem(task, line, id, "%s", msg)
	}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// resolveDatabase sets e's dialect and finds its database, adding to
// blocking what keeps e from running (no database, no dialect, a missing
// file). ok is false when e has no database to attach gold for; err says
// why the database is refused.
func (ds *Dataset) resolveDatabase(e *Example, opt Options, blocking *[]string) (ok bool, err error) {
	if e.DB == "" {
		*blocking = append(*blocking, `no database (expected "db" or "db_id")`)
		return false, nil
	}
	e.Dialect = opt.Dialect
	if e.Dialect == "" {
		d, ok := DialectFromID(e.ID)
		if !ok {
			*blocking = append(*blocking, "cannot tell the dialect from the id prefix (bq/ga BigQuery, sf Snowflake, local SQLite); pass --dialect")
			return false, nil
		}
		e.Dialect = d
	}
	db, err := ds.database(e.Dialect, e.DB, opt)
	if err != nil {
		return false, err
	}
	switch {
	case e.Dialect == sqltext.SQLite && db.SQLitePath == "":
		var where []string
		if opt.SQLiteDir != "" {
			where = append(where, opt.SQLiteDir)
		}
		where = append(where, filepath.Join(ds.Root, "resource", "databases", "spider2-localdb"), filepath.Join(ds.Root, "resource", "databases"))
		*blocking = append(*blocking, fmt.Sprintf("missing sqlite file %s.sqlite for database %q (looked in %s); put the Spider 2.0 local databases in resource/databases/spider2-localdb/ or pass --sqlite-dir",
			e.DB, e.DB, strings.Join(where, ", ")))
	case e.Dialect != sqltext.SQLite && db.MetaDir == "":
		*blocking = append(*blocking, fmt.Sprintf("unknown database %q: no folder resource/databases/%s/%s (or resource/databases/%s)", e.DB, e.Dialect, e.DB, e.DB))
	}
	return true, nil
}

// database returns the Spider 2.0 database d/name, resolved once: its
// metadata folder and, for SQLite, its file. A database whose files lead
// out of the dataset or are over their limits is refused, with the file
// named.
func (ds *Dataset) database(d sqltext.Dialect, name string, opt Options) (*Database, error) {
	key := string(d) + "/" + name
	if err, ok := ds.refused[key]; ok {
		return nil, err
	}
	if db, ok := ds.Databases[key]; ok {
		return db, nil
	}
	db := &Database{Name: name, Dialect: d, base: ds.Root}
	base := filepath.Join(ds.Root, "resource", "databases")
	// Lite nests metadata under the dialect; snow puts databases directly
	// under resource/databases.
	var err error
	for _, dir := range []string{filepath.Join(base, string(d)), base} {
		m := findFolder(dir, name)
		if m == "" {
			continue
		}
		// Checked before hasMetadata, which does not follow a link: a
		// folder linked out is refused, not silently passed over.
		if err = checkMetadata(ds.Root, m); err != nil || hasMetadata(m) {
			db.MetaDir = m
			break
		}
	}
	if err == nil && d == sqltext.SQLite {
		var where string
		db.SQLitePath, where = findSQLite(ds.Root, opt.SQLiteDir, name)
		err = checkSQLite(where, db.SQLitePath)
	}
	if err != nil {
		err = fmt.Errorf("database %q is refused: %w", name, err)
		ds.refused[key] = err
		return nil, err
	}
	ds.Databases[key] = db
	return db, nil
}

// checkSQLite checks that a database file found in folder base (the
// dataset or --sqlite-dir) resolves inside it.
func checkSQLite(base, path string) error {
	if path == "" {
		return nil
	}
	if _, err := resolveInside(base, path); errors.Is(err, errOutside) {
		return fmt.Errorf("sqlite file %w (or pass the folder that holds it as --sqlite-dir)", err)
	} else if err != nil {
		return fmt.Errorf("sqlite file: %w", err)
	}
	return nil
}

// checkMetadata checks every file of a metadata folder that LoadSchema
// reads: inside base, and within MaxMetadataBytes.
func checkMetadata(base, dir string) error {
	if dir == "" {
		return nil
	}
	if _, err := resolveInside(base, dir); errors.Is(err, errOutside) {
		return fmt.Errorf("metadata folder %w", err)
	} else if err != nil {
		return fmt.Errorf("metadata folder: %w", err)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isMetadataFile(d.Name()) {
			return nil
		}
		// WalkDir does not follow links: a file that is not one lies in
		// the folder checked above, so only its size needs checking.
		if d.Type()&fs.ModeSymlink != 0 {
			_, err := statInside(base, p, MaxMetadataBytes, metadataKind(d.Name()))
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		if st.Size() > MaxMetadataBytes {
			return tooLarge(metadataKind(d.Name()), p, st.Size(), MaxMetadataBytes)
		}
		return nil
	})
}

func isMetadataFile(name string) bool { return name == "DDL.csv" || strings.HasSuffix(name, ".json") }

func metadataKind(name string) string {
	if name == "DDL.csv" {
		return "DDL.csv"
	}
	return "table JSON"
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
		if !d.IsDir() && isMetadataFile(d.Name()) {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// findSQLite returns the database's file and the folder it was found in
// (--sqlite-dir or the dataset root), which it must resolve inside.
func findSQLite(root, sqliteDir, db string) (path, base string) {
	type dir struct{ path, base string }
	var dirs []dir
	if sqliteDir != "" {
		dirs = append(dirs, dir{sqliteDir, sqliteDir})
	}
	dirs = append(dirs, dir{filepath.Join(root, "resource", "databases", "spider2-localdb"), root}, dir{filepath.Join(root, "resource", "databases"), root})
	for _, d := range dirs {
		for _, name := range []string{db + ".sqlite", strings.ReplaceAll(db, "-", "_") + ".sqlite"} {
			p := filepath.Join(d.path, name)
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				return p, d.base
			}
		}
	}
	return "", ""
}

// attachGold reads e's gold SQL and lists its result CSVs. A gold file
// that leads out of the dataset or is over its limit is an error naming
// it: agents may see gold (the gold ablations) and llmsim answers from it.
func (ds *Dataset) attachGold(e *Example, specs map[string]Spec) error {
	if ds.GoldDir == "" {
		return nil
	}
	b, err := readInside(ds.Root, filepath.Join(ds.GoldDir, "sql", e.ID+".sql"), MaxGoldSQLBytes, "gold SQL")
	switch {
	case err == nil:
		e.Gold.SQL = string(b)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if ds.golds == nil {
		ds.golds = NewGoldIndex(filepath.Join(ds.GoldDir, "exec_result"))
	}
	if files, single, err := ds.golds.Files(e.ID); err == nil {
		for _, f := range files {
			if _, err := statInside(ds.Root, f, MaxGoldCSVBytes, "gold CSV"); err != nil {
				return err
			}
		}
		e.Gold.Results, e.Gold.Single = files, single
	}
	if s, ok := specs[e.ID]; ok {
		e.Gold.Spec, e.Gold.HasSpec = s, true
	}
	return nil
}
