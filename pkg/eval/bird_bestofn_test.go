package eval_test

import (
	"context"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

const birdMini = "../../examples/bird-mini"

// countingRunner runs queries on the real SQLite databases and counts how
// often each query text ran.
type countingRunner struct {
	eval.SQLRunner
	mu   sync.Mutex
	runs map[string]int
}

func (r *countingRunner) RunInstanceSQL(ctx context.Context, id, sql string) (*warehouse.Result, warehouse.Dialect, error) {
	r.mu.Lock()
	r.runs[sql]++
	r.mu.Unlock()
	return r.SQLRunner.RunInstanceSQL(ctx, id, sql)
}

func birdMiniRunner(t *testing.T) (*dataset.Dataset, *countingRunner) {
	t.Helper()
	ds, err := dataset.Load(birdMini, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set := &sqlite.Set{}
	t.Cleanup(func() { _ = set.Close() })
	return ds, &countingRunner{SQLRunner: &localdb.Warehouses{DS: ds, SQLite: set, Limits: eval.ResultLimits}, runs: map[string]int{}}
}

// write creates files under dir from relative paths.
func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEvaluateBirdBestOfN scores a run's output folder on the real BIRD
// fixture: a wrong final answer with a right candidate counts for
// Best-of-N only; a right final counts for both; candidates all wrong (or
// failing) count for neither; an example with candidates and no final
// answer counts for Best-of-N alone; each gold query runs once per example
// however many candidates are scored.
func TestEvaluateBirdBestOfN(t *testing.T) {
	t.Parallel()
	ds, runner := birdMiniRunner(t)
	var tasks []eval.BirdTask
	for _, e := range ds.Examples {
		tasks = append(tasks, eval.BirdTask{InstanceID: e.ID, GoldSQL: e.Gold.SQL, Difficulty: e.Difficulty})
	}
	out := t.TempDir()
	write(t, out, map[string]string{
		// dev_0 (simple): the final counts every customer; a candidate is right.
		"dev_0.sql":                  "SELECT COUNT(*) FROM customers",
		"candidates/dev_0/r0_c0.sql": "SELECT COUNT(*) FROM customers",
		"candidates/dev_0/r0_c1.sql": "SELECT COUNT(*) FROM nope",
		"candidates/dev_0/r0_c2.sql": "SELECT COUNT(*) FROM customers WHERE loyalty_tier = 'gold'",
		// dev_2 (simple): the final is right.
		"dev_2.sql":                  "SELECT city FROM customers WHERE email = 'zoe.fischer1@mail.example'",
		"candidates/dev_2/r0_c0.sql": "SELECT 1",
		// dev_4 (moderate): every candidate wrong, one failing.
		"dev_4.sql":                  "SELECT ROUND(AVG(price), 2) FROM products WHERE discontinued = 1",
		"candidates/dev_4/r0_c0.sql": "SELECT ROUND(AVG(price), 2) FROM products WHERE discontinued = 1",
		"candidates/dev_4/r0_c1.sql": "SELECT price FROM nope",
		// dev_7 (challenging): no final answer, a right candidate.
		"candidates/dev_7/r1_c3.sql": "```sql\nSELECT c.first_name, c.last_name FROM customers c JOIN orders o ON c.customer_id = o.customer_id WHERE o.status = 'delivered' GROUP BY c.customer_id ORDER BY SUM(o.total) DESC LIMIT 1\n```",
		// not an example of the dataset
		"candidates/dev_99/r0_c0.sql": "SELECT 1",
	})
	rep, err := eval.EvaluateBird(context.Background(), eval.BirdConfig{Tasks: tasks, PredDir: out, Mode: eval.ModeSQL, Runner: runner,
		ResultLimits: eval.ResultLimits, Workers: 3, CandidatesDir: filepath.Join(out, "candidates")})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 3 || rep.Correct != 1 {
		t.Errorf("EX counts %d of %d final answers, want 1 of 3 (dev_2)", rep.Correct, rep.Total)
	}
	b := rep.BestOfN
	if b == nil {
		t.Fatal("no best_of_n in the report")
	}
	want := []eval.BestOfNInstance{
		{InstanceID: "dev_0", Candidates: 3, Score: 1, CorrectBy: "r0_c2.sql"},
		{InstanceID: "dev_2", Candidates: 1, Score: 1, CorrectBy: "final"},
		{InstanceID: "dev_4", Candidates: 2, Score: 0},
		{InstanceID: "dev_7", Candidates: 1, Score: 1, CorrectBy: "r1_c3.sql"},
	}
	if len(b.Instances) != len(want) {
		t.Fatalf("best-of-n instances %+v, want %+v", b.Instances, want)
	}
	for i, w := range want {
		if b.Instances[i] != w {
			t.Errorf("best-of-n instance %d = %+v, want %+v", i, b.Instances[i], w)
		}
	}
	if b.Correct != 3 || b.Total != 4 || b.Gold != 9 || b.EX != 0.75 || b.EXAllGold != 3.0/9 {
		t.Errorf("best-of-n totals: %d of %d (gold %d), EX %v, over gold %v; want 3 of 4 (gold 9), 0.75, 0.3333",
			b.Correct, b.Total, b.Gold, b.EX, b.EXAllGold)
	}
	byDiff := map[string][2]int{}
	for _, d := range b.ByDifficulty {
		byDiff[d.Difficulty] = [2]int{d.Correct, d.Gold}
	}
	if wantDiff := map[string][2]int{"simple": {2, 4}, "moderate": {0, 3}, "challenging": {1, 2}}; len(byDiff) != 3 ||
		byDiff["simple"] != wantDiff["simple"] || byDiff["moderate"] != wantDiff["moderate"] || byDiff["challenging"] != wantDiff["challenging"] {
		t.Errorf("best-of-n by difficulty %v, want %v", byDiff, wantDiff)
	}
	if !strings.Contains(strings.Join(rep.Ignored, " "), "dev_99") {
		t.Errorf("ignored %v, want the candidates of dev_99 (not a gold example)", rep.Ignored)
	}
	// The final and candidate of dev_0 share a text: it ran once, as did
	// each example's gold.
	for _, e := range []string{"dev_0", "dev_4", "dev_7"} {
		ex, _ := ds.Example(e)
		if n := runner.runs[ex.Gold.SQL]; n != 1 {
			t.Errorf("%s: gold SQL ran %d times, want once", e, n)
		}
	}
	if n := runner.runs["SELECT COUNT(*) FROM customers"]; n != 1 {
		t.Errorf("a candidate identical to the final ran %d times, want once", n)
	}
}

// TestBirdGoldScoresStoredTables: result tables stored as CSV (what a run
// keeps) score under BIRD's row-set rule against the gold run once; an
// empty table is right exactly when the gold returns no rows; a failing
// gold query is an error, not a wrong answer.
func TestBirdGoldScoresStoredTables(t *testing.T) {
	t.Parallel()
	_, runner := birdMiniRunner(t)
	g := &eval.BirdGold{Runner: runner, ResultLimits: eval.ResultLimits}
	ctx := context.Background()
	const gold = "SELECT T1.name FROM categories AS T1 INNER JOIN categories AS T2 ON T1.parent_id = T2.category_id WHERE T2.name = 'Electronics'"
	const none = "SELECT name FROM categories WHERE name = 'no such category'"
	tests := []struct {
		name, id, gold, csv string
		want                bool
		wantErr             string
	}{
		{"same rows in another order", "dev_1", gold, "name\nPhones\nLaptops\nAudio\n", true, ""},
		{"duplicates ignored", "dev_1", gold, "name\nAudio\nAudio\nLaptops\nPhones\n", true, ""},
		{"a row missing", "dev_1", gold, "name\nAudio\nLaptops\n", false, ""},
		{"case differs", "dev_1", gold, "name\naudio\nlaptops\nphones\n", false, ""},
		{"no rows against rows", "dev_1", gold, "", false, ""},
		{"no rows against no rows", "dev_2", none, "", true, ""},
		{"header only against no rows", "dev_2", none, "name\n", true, ""},
		{"failing gold", "dev_3", "SELECT * FROM nope", "x\n1\n", false, "gold SQL"},
	}
	for _, tt := range tests {
		got, err := g.ScoreCSV(ctx, tt.id, tt.gold, tt.csv)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: error %v, want one naming %q", tt.name, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case got != tt.want:
			t.Errorf("%s: ScoreCSV = %v, want %v", tt.name, got, tt.want)
		}
	}
	if n := runner.runs[gold]; n != 1 {
		t.Errorf("the gold of dev_1 ran %d times for 5 tables, want once", n)
	}
	g.Forget("dev_1")
	if _, err := g.ScoreCSV(ctx, "dev_1", gold, "name\nAudio\n"); err != nil || runner.runs[gold] != 2 {
		t.Errorf("after Forget: err %v, gold ran %d times, want it run again (2)", err, runner.runs[gold])
	}
}
