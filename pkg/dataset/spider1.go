package dataset

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// spider1Entry holds the fields of Spider 1.0 (query) and BIRD (SQL,
// evidence, question_id) task entries.
type spider1Entry struct {
	DBID       string          `json:"db_id"`
	Question   string          `json:"question"`
	Query      string          `json:"query"`
	SQL        string          `json:"SQL"`
	Evidence   string          `json:"evidence"`
	QuestionID json.RawMessage `json:"question_id"`
	Difficulty string          `json:"difficulty"`
}

// databaseDirs are the folders, relative to the dataset root, that may hold
// <db>/<db>.sqlite for a task file: Spider 1.0's database/, BIRD's
// <split>_databases/ (dev_databases/ beside dev.json, train_databases/
// beside train.json), then BIRD's other splits.
func databaseDirs(taskFile string) []string {
	stem := strings.TrimSuffix(filepath.Base(taskFile), filepath.Ext(taskFile))
	dirs := []string{"database", stem + "_databases"}
	for _, d := range []string{"dev_databases", "train_databases", "test_databases"} {
		if d != dirs[1] {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func (ds *Dataset) loadSpider1(opt Options) error {
	task := opt.TaskFile
	if !filepath.IsAbs(task) && !strings.Contains(task, string(filepath.Separator)) {
		task = filepath.Join(ds.Root, task)
	}
	ds.TaskFile = task
	data, err := ds.readTaskFile(task)
	if err != nil {
		return err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("%s: not a JSON array of examples: %w", task, err)
	}
	stem := strings.TrimSuffix(filepath.Base(task), filepath.Ext(task))
	dbDirs := databaseDirs(task)
	// mainDir is the databases folder named in problems: the first that
	// exists, else Spider 1.0's database/.
	mainDir := dbDirs[0]
	for _, d := range dbDirs {
		if st, err := os.Stat(filepath.Join(ds.Root, d)); err == nil && st.IsDir() {
			mainDir = d
			break
		}
	}
	seen := map[string]bool{}
	for i, r := range raw {
		var en spider1Entry
		// Entries have no line numbers of their own; the index is reported
		// as the position in the array.
		if err := json.Unmarshal(r, &en); err != nil {
			ds.skip(task, 0, fmt.Sprintf("entry %d", i), "malformed entry: %v", err)
			continue
		}
		n := strconv.Itoa(i)
		if len(en.QuestionID) > 0 {
			n = strings.Trim(string(en.QuestionID), `"`)
		}
		id := stem + "_" + n
		if err := CheckName(id); err != nil {
			ds.skip(task, 0, "", "entry %d: question_id %q: %v", i, n, err)
			continue
		}
		if en.DBID != "" {
			if err := CheckName(en.DBID); err != nil {
				ds.skip(task, 0, "", "entry %d: db_id %q: %v", i, en.DBID, err)
				continue
			}
		}
		if seen[id] {
			ds.problem(task, 0, id, "duplicate question_id")
			continue
		}
		seen[id] = true
		e := &Example{ID: id, DB: en.DBID, Dialect: sqltext.SQLite, Question: en.Question,
			ExternalKnowledge: en.Evidence, Difficulty: strings.ToLower(strings.TrimSpace(en.Difficulty)),
			Source: fmt.Sprintf("%s[%d]", task, i)}
		if err := checkQuestion(e.Question); err != nil {
			ds.skip(task, 0, id, "entry %d: %v", i, err)
			continue
		}
		if n := len(e.ExternalKnowledge); n > MaxDocumentBytes {
			ds.skip(task, 0, id, "entry %d: the evidence is %d bytes, over the %d-byte limit for external knowledge: shorten it", i, n, MaxDocumentBytes)
			continue
		}
		if opt.Dialect != "" {
			e.Dialect = opt.Dialect
		}
		e.Gold.SQL = firstNonEmpty(en.Query, en.SQL)
		if e.DB == "" {
			ds.Examples = append(ds.Examples, e)
			ds.problem(task, 0, id, "entry %d has no db_id", i)
			continue
		}
		key := string(e.Dialect) + "/" + e.DB
		if _, ok := ds.Databases[key]; !ok && ds.refused[key] == nil {
			db, err := ds.resolveSpider1Database(e, dbDirs, opt)
			if err != nil {
				ds.refused[key] = fmt.Errorf("database %q is refused: %w", e.DB, err)
			} else {
				ds.Databases[key] = db
			}
		}
		if err := ds.refused[key]; err != nil {
			ds.skip(task, 0, id, "entry %d: %v", i, err)
			continue
		}
		ds.Examples = append(ds.Examples, e)
		if ds.Databases[key].SQLitePath == "" {
			ds.problem(task, 0, id, "missing sqlite file %s/%s/%s.sqlite for database %q", mainDir, e.DB, e.DB, e.DB)
		}
	}
	return nil
}

// resolveSpider1Database finds e's sqlite file (--sqlite-dir first, as
// <db>.sqlite or <db>/<db>.sqlite, then each databases folder) and BIRD's
// description folder: beside the sqlite file, else in any databases folder.
// A file that leads out of the folder it was found in (the dataset or
// --sqlite-dir), or is over its limit, refuses the database (err).
func (ds *Dataset) resolveSpider1Database(e *Example, dbDirs []string, opt Options) (*Database, error) {
	db := &Database{Name: e.DB, Dialect: e.Dialect, base: ds.Root}
	type candidate struct{ path, base string }
	var candidates []candidate
	if opt.SQLiteDir != "" {
		candidates = append(candidates, candidate{filepath.Join(opt.SQLiteDir, e.DB+".sqlite"), opt.SQLiteDir}, candidate{filepath.Join(opt.SQLiteDir, e.DB, e.DB+".sqlite"), opt.SQLiteDir})
	}
	for _, d := range dbDirs {
		candidates = append(candidates, candidate{filepath.Join(ds.Root, d, e.DB, e.DB+".sqlite"), ds.Root})
	}
	sqliteBase := ""
	for _, c := range candidates {
		if st, err := os.Stat(c.path); err == nil && !st.IsDir() {
			db.SQLitePath, sqliteBase = c.path, c.base
			break
		}
	}
	if err := checkSQLite(sqliteBase, db.SQLitePath); err != nil {
		return nil, err
	}
	var descDirs []candidate
	if db.SQLitePath != "" {
		descDirs = append(descDirs, candidate{filepath.Join(filepath.Dir(db.SQLitePath), DescriptionDirName), sqliteBase})
	}
	for _, d := range dbDirs {
		descDirs = append(descDirs, candidate{filepath.Join(ds.Root, d, e.DB, DescriptionDirName), ds.Root})
	}
	for _, dir := range descDirs {
		if st, err := os.Stat(dir.path); err == nil && st.IsDir() {
			return db, ds.loadDescriptions(db, dir.path, dir.base)
		}
	}
	return db, nil
}

// readTaskFile reads a Spider 1.0 / BIRD task file (a JSON array, read
// whole) within MaxTaskFileBytes. One inside the dataset folder must
// resolve inside it; one the user named elsewhere (--tasks PATH) is theirs.
func (ds *Dataset) readTaskFile(task string) ([]byte, error) {
	base := ds.Root
	if rel, err := filepath.Rel(ds.Root, task); err != nil || escapes(rel) {
		if real, err := filepath.EvalSymlinks(task); err == nil {
			base = filepath.Dir(real)
		}
	}
	return readInside(base, task, MaxTaskFileBytes, "task file")
}
