package dataset

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/warehouse"
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
}

func (ds *Dataset) loadSpider1(opt Options) error {
	task := opt.TaskFile
	if !filepath.IsAbs(task) && !strings.Contains(task, string(filepath.Separator)) {
		task = filepath.Join(ds.Root, task)
	}
	ds.TaskFile = task
	data, err := os.ReadFile(task)
	if err != nil {
		return fmt.Errorf("task file: %w", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("%s: not a JSON array of examples: %w", task, err)
	}
	stem := strings.TrimSuffix(filepath.Base(task), filepath.Ext(task))
	seen := map[string]bool{}
	for i, r := range raw {
		var en spider1Entry
		// Entries have no line numbers of their own; the index is reported
		// as the position in the array.
		if err := json.Unmarshal(r, &en); err != nil {
			ds.problem(task, 0, fmt.Sprintf("entry %d", i), "malformed entry: %v", err)
			continue
		}
		n := strconv.Itoa(i)
		if len(en.QuestionID) > 0 {
			n = strings.Trim(string(en.QuestionID), `"`)
		}
		id := stem + "_" + n
		if seen[id] {
			ds.problem(task, 0, id, "duplicate question_id")
			continue
		}
		seen[id] = true
		e := &Example{ID: id, DB: en.DBID, Dialect: warehouse.SQLite, Question: en.Question,
			ExternalKnowledge: en.Evidence, Source: fmt.Sprintf("%s[%d]", task, i)}
		ds.checkSize(task, 0, e)
		if opt.Dialect != "" {
			e.Dialect = opt.Dialect
		}
		e.Gold.SQL = firstNonEmpty(en.Query, en.SQL)
		ds.Examples = append(ds.Examples, e)
		if e.DB == "" {
			ds.problem(task, 0, id, "entry %d has no db_id", i)
			continue
		}
		key := string(e.Dialect) + "/" + e.DB
		if _, ok := ds.Databases[key]; !ok {
			db := &Database{Name: e.DB, Dialect: e.Dialect}
			var candidates []string
			if opt.SQLiteDir != "" {
				candidates = append(candidates, filepath.Join(opt.SQLiteDir, e.DB+".sqlite"))
			}
			candidates = append(candidates, filepath.Join(ds.Root, "database", e.DB, e.DB+".sqlite"))
			for _, p := range candidates {
				if st, err := os.Stat(p); err == nil && !st.IsDir() {
					db.SQLitePath = p
					break
				}
			}
			ds.Databases[key] = db
		}
		if ds.Databases[key].SQLitePath == "" {
			ds.problem(task, 0, id, "missing sqlite file database/%s/%s.sqlite for database %q", e.DB, e.DB, e.DB)
		}
	}
	return nil
}
