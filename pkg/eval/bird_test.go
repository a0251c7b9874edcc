package eval

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

func TestBirdEqual(t *testing.T) {
	t.Parallel()
	i, f, s, n := warehouse.IntValue, warehouse.FloatValue, warehouse.TextValue, warehouse.Value{}
	pointOne, pointTwo := 0.1, 0.2 // variables: Go would add the constants exactly
	row := func(v ...warehouse.Value) []warehouse.Value { return v }
	rows := func(r ...[]warehouse.Value) [][]warehouse.Value { return r }
	tests := []struct {
		name       string
		pred, gold [][]warehouse.Value
		want       bool
	}{
		{"same rows", rows(row(i(1), s("a"))), rows(row(i(1), s("a"))), true},
		{"order ignored", rows(row(i(1)), row(i(2))), rows(row(i(2)), row(i(1))), true},
		{"duplicates ignored", rows(row(i(1)), row(i(1)), row(i(2))), rows(row(i(2)), row(i(1))), true},
		{"a missing row", rows(row(i(1))), rows(row(i(1)), row(i(2))), false},
		{"an extra row", rows(row(i(1)), row(i(3))), rows(row(i(1))), false},
		{"both empty", nil, rows(), true},
		{"empty vs a row", nil, rows(row(i(1))), false},
		{"NULL equals NULL", rows(row(n, s("x"))), rows(row(n, s("x"))), true},
		{"NULL is not 0", rows(row(n)), rows(row(i(0))), false},
		{"NULL is not the empty string", rows(row(n)), rows(row(s(""))), false},
		{"1 == 1.0", rows(row(i(1))), rows(row(f(1.0))), true},
		{"-0.0 == 0", rows(row(f(math.Copysign(0, -1)))), rows(row(i(0))), true},
		{"2**53+1 != float(2**53+1)", rows(row(i(1<<53 + 1))), rows(row(f(float64(1<<53 + 1)))), false},
		{"2**62 == 2.0**62", rows(row(i(1 << 62))), rows(row(f(1 << 62))), true},
		{"0.1+0.2 != 0.3", rows(row(f(pointOne + pointTwo))), rows(row(f(0.3))), false},
		{"floats exactly", rows(row(f(415.96818181818185))), rows(row(f(415.96818181818185))), true},
		{"1.5 vs 1", rows(row(f(1.5))), rows(row(i(1))), false},
		{"strings case-sensitive", rows(row(s("Lille"))), rows(row(s("lille"))), false},
		{"strings with trailing space", rows(row(s("a "))), rows(row(s("a"))), false},
		{"'1' is not 1", rows(row(s("1"))), rows(row(i(1))), false},
		{"bytes are not str", rows(row(warehouse.BytesValue([]byte("ab")))), rows(row(s("ab"))), false},
		{"bytes equal bytes", rows(row(warehouse.BytesValue([]byte("ab")))), rows(row(warehouse.BytesValue([]byte("ab")))), true},
		{"True == 1", rows(row(warehouse.BoolValue(true))), rows(row(i(1))), true},
		{"column order matters", rows(row(i(1), s("a"))), rows(row(s("a"), i(1))), false},
		{"more columns", rows(row(i(1), s("a"))), rows(row(i(1))), false},
		{"fewer columns", rows(row(s("Bob"))), rows(row(s("Bob"), s("Hansen"))), false},
		// Self-delimiting keys: ("ab", "c") and ("a", "bc") are different.
		{"cell boundaries", rows(row(s("ab"), s("c"))), rows(row(s("a"), s("bc"))), false},
		{"number-text boundaries", rows(row(i(1), s("2"))), rows(row(i(12))), false},
	}
	for _, tt := range tests {
		if got := BirdEqual(tt.pred, tt.gold); got != tt.want {
			t.Errorf("%s: BirdEqual = %v, want %v", tt.name, got, tt.want)
		}
		if got := BirdEqual(tt.gold, tt.pred); got != tt.want {
			t.Errorf("%s (swapped): BirdEqual = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestBirdEqualFrames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, pred, gold string
		want             bool
	}{
		{"order and duplicates", "a,b\n1,x\n2,y\n2,y\n", "a,b\n2,y\n1,x\n", true},
		{"header names are not compared", "n\n5\n", "count(*)\n5\n", true},
		{"int column vs float column", "n\n1\n2\n", "n\n1.0\n2.0\n", true},
		{"0.30000000000000004 vs 0.3", "n\n0.30000000000000004\n", "n\n0.3\n", false},
		{"missing equals missing", "a,b\n1,\n", "a,b\n1,\n", true},
		{"missing is not 0", "a,b\n1,\n", "a,b\n1,0\n", false},
		{"case-sensitive", "s\nBob\n", "s\nbob\n", false},
		{"column counts", "a,b\nBob,Hansen\n", "a\nBob\n", false},
		{"both empty", "a\n", "b\n", true},
	}
	for _, tt := range tests {
		p, err := ReadCSV([]byte(tt.pred))
		if err != nil {
			t.Fatal(err)
		}
		g, err := ReadCSV([]byte(tt.gold))
		if err != nil {
			t.Fatal(err)
		}
		if got := BirdEqualFrames(p, g); got != tt.want {
			t.Errorf("%s: BirdEqualFrames = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// fakeRunner answers known SQL texts with fixed rows.
type fakeRunner map[string][][]warehouse.Value

func (r fakeRunner) RunInstanceSQL(_ context.Context, _ string, sql string) (*warehouse.Result, warehouse.Dialect, error) {
	rows, ok := r[strings.TrimSpace(sql)]
	if !ok {
		return nil, warehouse.SQLite, &warehouse.QueryError{Dialect: warehouse.SQLite, Message: "no such table: nope"}
	}
	return &warehouse.Result{Rows: rows}, warehouse.SQLite, nil
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEvaluateBirdSQL(t *testing.T) {
	t.Parallel()
	i, f := warehouse.IntValue, warehouse.FloatValue
	runner := fakeRunner{
		"SELECT gold1": {{i(1)}, {i(2)}},
		"SELECT pred1": {{f(2)}, {f(1)}, {i(1)}},
		"SELECT gold2": {{i(3)}},
		"SELECT pred2": {{i(4)}},
		"SELECT gold3": {{i(5)}},
		"SELECT gold4": {{i(6)}},
	}
	tasks := []BirdTask{
		{"dev_1", "SELECT gold1", "simple"},
		{"dev_2", "SELECT gold2", "simple"},
		{"dev_3", "SELECT gold3", "moderate"},
		{"dev_4", "SELECT gold4", "challenging"},
		{"dev_5", "SELECT gold4", ""},
	}
	pred := t.TempDir()
	writeFiles(t, pred, map[string]string{
		"dev_1.sql":   "```sql\nSELECT pred1\n```\n",
		"dev_2.sql":   "SELECT pred2",
		"dev_3.sql":   "SELECT broken",
		"dev_9.sql":   "SELECT gold1",
		"dev_4.txt":   "not a prediction",
		"dev_5.sql":   "SELECT gold4",
		"notes/x.sql": "SELECT 1",
	})
	rep, err := EvaluateBird(context.Background(), BirdConfig{Tasks: tasks, PredDir: pred, Mode: ModeSQL, Runner: runner, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]InstanceScore{}
	for _, s := range rep.Instances {
		got[s.InstanceID] = s
	}
	if got["dev_1"].Score != 1 || got["dev_2"].Score != 0 || !strings.Contains(got["dev_2"].Error, "result mismatch") ||
		got["dev_3"].Score != 0 || got["dev_3"].Error != "no such table: nope" || got["dev_5"].Score != 1 {
		t.Errorf("instances %+v", rep.Instances)
	}
	if rep.Correct != 2 || rep.Total != 4 || rep.EX != 0.5 || rep.Gold != 5 || rep.EXAllGold != 0.4 ||
		strings.Join(rep.Missing, ",") != "dev_4" || strings.Join(rep.Ignored, ",") != "dev_9.sql" {
		t.Errorf("report %+v", rep.Report)
	}
	want := []DifficultyScore{
		{"simple", 1, 2, 0.5},
		{"moderate", 0, 1, 0},
		{"challenging", 0, 1, 0},
		{"unknown", 1, 1, 1},
	}
	if len(rep.ByDifficulty) != len(want) {
		t.Fatalf("by difficulty %+v", rep.ByDifficulty)
	}
	for k, w := range want {
		if rep.ByDifficulty[k] != w {
			t.Errorf("by difficulty %d = %+v, want %+v", k, rep.ByDifficulty[k], w)
		}
	}

	// A gold SQL that fails scores the instance 0 and says so.
	runner2 := fakeRunner{"SELECT pred1": {{i(1)}}}
	rep, err = EvaluateBird(context.Background(), BirdConfig{Tasks: tasks[:1], PredDir: pred, Mode: ModeSQL, Runner: runner2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Instances[0].Score != 0 || !strings.HasPrefix(rep.Instances[0].Error, "gold SQL: ") {
		t.Errorf("failing gold: %+v", rep.Instances)
	}
	if _, err := EvaluateBird(context.Background(), BirdConfig{Tasks: tasks, PredDir: pred, Mode: ModeSQL}); err == nil {
		t.Error("sql mode without a runner")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := EvaluateBird(ctx, BirdConfig{Tasks: tasks, PredDir: pred, Mode: ModeSQL, Runner: runner}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestEvaluateBirdExecResult(t *testing.T) {
	t.Parallel()
	gold := t.TempDir()
	writeFiles(t, gold, map[string]string{
		"exec_result/dev_1.csv": "n\n1\n2\n",
		"exec_result/dev_2.csv": "name\nBob\n",
		"exec_result/dev_3.csv": "x\n0.3\n",
	})
	pred := t.TempDir()
	writeFiles(t, pred, map[string]string{
		"dev_1.csv": "count\n2.0\n1.0\n1\n",
		"dev_2.csv": "name\nbob\n",
		"dev_7.csv": "n\n1\n",
	})
	rep, err := EvaluateBird(context.Background(), BirdConfig{GoldDir: gold, PredDir: pred, Mode: ModeExecResult,
		Tasks: []BirdTask{{InstanceID: "dev_1", Difficulty: "simple"}, {InstanceID: "dev_3", Difficulty: "challenging"}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Correct != 1 || rep.Total != 2 || rep.Gold != 3 || strings.Join(rep.Missing, ",") != "dev_3" || strings.Join(rep.Ignored, ",") != "dev_7.csv" {
		t.Errorf("report %+v", rep.Report)
	}
	if len(rep.ByDifficulty) != 3 || rep.ByDifficulty[0] != (DifficultyScore{"simple", 1, 1, 1}) ||
		rep.ByDifficulty[1] != (DifficultyScore{"challenging", 0, 1, 0}) || rep.ByDifficulty[2] != (DifficultyScore{"unknown", 0, 1, 0}) {
		t.Errorf("by difficulty %+v", rep.ByDifficulty)
	}
	// Without difficulties there is no breakdown.
	rep, err = EvaluateBird(context.Background(), BirdConfig{GoldDir: filepath.Join(gold, "exec_result"), PredDir: pred, Mode: ModeExecResult})
	if err != nil || rep.ByDifficulty != nil || rep.Correct != 1 {
		t.Errorf("%v %+v", err, rep)
	}
	if _, err := EvaluateBird(context.Background(), BirdConfig{GoldDir: t.TempDir(), PredDir: pred, Mode: ModeExecResult}); err == nil {
		t.Error("an empty gold folder")
	}
}
