package agenttest

import (
	"context"
	"database/sql"
	"encoding/json"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // builds the fixture databases

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// SQLite builds a database in the test's temporary folder by running
// script (its DDL and rows) and opens it as the agents open every
// database: read-only, closed when the test ends.
func SQLite(t testing.TB, script string) warehouse.Warehouse {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db.sqlite")
	writeSQLite(t, path, script)
	db, err := sqlite.Open(sqlite.Config{Path: path, QueryTimeout: QueryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// QueryTimeout bounds a fixture's queries far above a healthy query's time
// even under -race on a machine loaded many times over its cores (pure-Go
// SQLite under the race detector is tens of times slower): a query stopped
// at the 60 s default turns into an error the agent reads, and its answers
// change, which an agent's test would read as the agent's fault. The
// timeout itself is tested in pkg/warehouse/sqlite.
const QueryTimeout = 10 * time.Minute

func writeSQLite(t testing.TB, path, script string) {
	t.Helper()
	w, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Exec(script); err != nil {
		t.Fatalf("building the fixture database %s: %v", filepath.Base(path), err)
	}
}

// Fixture is a dataset as a run sees it: the dataset, its warehouses
// (SQLite pools closed when the test ends) and the examples Run runs.
type Fixture struct {
	Dataset    *dataset.Dataset
	Warehouses *localdb.Warehouses
	// Examples are the examples Run runs: all the dataset's unless Only
	// picked some.
	Examples []*dataset.Example
}

// Question is one example of a dataset NewDataset writes.
type Question struct {
	// ID names the example; it must start with "local", the Spider
	// 2.0-lite prefix of SQLite examples.
	ID       string
	Question string
	// Gold, when set, is the gold SQL: the dataset keeps it and its
	// result (as the runtime does for scoring, and llmsim answers from
	// it); agents see it only under a gold ablation.
	Gold string
	// Knowledge, when set, is the example's external knowledge document.
	Knowledge string
}

// NewDataset writes a Spider 2.0-lite dataset in the test's temporary
// folder: one SQLite database db built by script, and questions on it
// (with their gold results, run on the database, and documents), then
// loads it as quorum run and solve do. Any problem loading it fails the
// test.
func NewDataset(t testing.TB, db, script string, questions ...Question) *Fixture {
	t.Helper()
	root := t.TempDir()
	dbs := filepath.Join(root, "resource", "databases", "spider2-localdb")
	for _, dir := range []string{dbs, filepath.Join(root, "resource", "documents"), filepath.Join(root, "evaluation_suite", "gold", "sql"),
		filepath.Join(root, "evaluation_suite", "gold", "exec_result")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dbs, db+".sqlite")
	writeSQLite(t, path, script)
	var gold warehouse.Warehouse
	var tasks strings.Builder
	for _, q := range questions {
		line := map[string]any{"instance_id": q.ID, "db": db, "question": q.Question, "external_knowledge": nil}
		if q.Knowledge != "" {
			doc := q.ID + ".md"
			write(t, filepath.Join(root, "resource", "documents", doc), q.Knowledge)
			line["external_knowledge"] = doc
		}
		b, err := json.Marshal(line)
		if err != nil {
			t.Fatal(err)
		}
		tasks.Write(append(b, '\n'))
		if q.Gold == "" {
			continue
		}
		if gold == nil {
			wh, err := sqlite.Open(sqlite.Config{Path: path, QueryTimeout: QueryTimeout})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { wh.Close() })
			gold = wh
		}
		res, err := gold.Query(context.Background(), q.Gold, warehouse.Limits{})
		if err != nil {
			t.Fatalf("%s: the gold SQL fails: %v", q.ID, err)
		}
		write(t, filepath.Join(root, "evaluation_suite", "gold", "sql", q.ID+".sql"), q.Gold)
		write(t, filepath.Join(root, "evaluation_suite", "gold", "exec_result", q.ID+".csv"), res.CSV())
	}
	write(t, filepath.Join(root, "tasks.jsonl"), tasks.String())
	return Load(t, root)
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Load loads the dataset folder dir (any layout quorum reads); a problem
// with any of its examples fails the test.
func Load(t testing.TB, dir string) *Fixture {
	t.Helper()
	ds, err := dataset.Load(dir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ds.Problems {
		t.Errorf("dataset %s: %s", dir, p)
	}
	if t.Failed() {
		t.FailNow()
	}
	set := &sqlite.Set{Base: sqlite.Config{QueryTimeout: QueryTimeout}}
	t.Cleanup(func() { set.Close() })
	return &Fixture{Dataset: ds, Warehouses: &localdb.Warehouses{DS: ds, SQLite: set}, Examples: ds.Examples}
}

// Demo is the repository's demo dataset (examples/demo: a shop database,
// 42 Spider 2.0-lite questions with their gold), found above the test's
// folder.
func Demo(t testing.TB) *Fixture {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		demo := filepath.Join(dir, "examples", "demo")
		if _, err := os.Stat(filepath.Join(demo, "demo.jsonl")); err == nil {
			return Load(t, demo)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("agenttest.Demo: no examples/demo above the test's folder")
		}
		dir = parent
	}
}

// Only is the fixture with the examples ids alone, in that order; an id
// the dataset does not have fails the test.
func (f *Fixture) Only(t testing.TB, ids ...string) *Fixture {
	t.Helper()
	out := *f
	out.Examples = nil
	for _, id := range ids {
		out.Examples = append(out.Examples, f.Example(t, id))
	}
	return &out
}

// Example is the dataset's example id; one it does not have fails the
// test.
func (f *Fixture) Example(t testing.TB, id string) *dataset.Example {
	t.Helper()
	e, ok := f.Dataset.Example(id)
	if !ok {
		t.Fatalf("dataset %s has no example %s", f.Dataset.Root, id)
	}
	return e
}

// Warehouse opens the database of example id.
func (f *Fixture) Warehouse(t testing.TB, id string) warehouse.Warehouse {
	t.Helper()
	wh, err := f.Warehouses.For(f.Example(t, id))
	if err != nil {
		t.Fatal(err)
	}
	return wh
}
