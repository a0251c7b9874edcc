package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const birdMini = "../../examples/bird-mini"

type birdEntry struct {
	QuestionID int    `json:"question_id"`
	SQL        string `json:"SQL"`
	Difficulty string `json:"difficulty"`
}

func birdEntries(t *testing.T) []birdEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(birdMini, "dev.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []birdEntry
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// writePreds writes <id>.sql files into a new folder.
func writePreds(t *testing.T, preds map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for id, sql := range preds {
		if err := os.WriteFile(filepath.Join(dir, id+".sql"), []byte(sql), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type birdJSON struct {
	Instances []struct {
		InstanceID string `json:"instance_id"`
		Score      int    `json:"score"`
		Error      string `json:"error"`
	} `json:"instances"`
	Correct      int      `json:"correct"`
	Total        int      `json:"total"`
	EX           float64  `json:"ex"`
	Missing      []string `json:"missing"`
	Gold         int      `json:"gold"`
	EXAllGold    float64  `json:"ex_all_gold"`
	ByDifficulty []struct {
		Difficulty string  `json:"difficulty"`
		Correct    int     `json:"correct"`
		Gold       int     `json:"gold"`
		EX         float64 `json:"ex"`
	} `json:"by_difficulty"`
}

// TestEvalBirdGoldSQLScoresFullMarks: the fixture's own gold SQL, as
// predictions, scores EX 1.0 under BIRD's rule, overall and per difficulty.
func TestEvalBirdGoldSQLScoresFullMarks(t *testing.T) {
	t.Parallel()
	preds := map[string]string{}
	for _, e := range birdEntries(t) {
		preds["dev_"+strconv.Itoa(e.QuestionID)] = e.SQL
	}
	pred := writePreds(t, preds)
	out, err := run(t, "eval", "--metric", "bird", "--mode", "sql", "--json", "--gold", birdMini, "--pred", pred, "--dataset", birdMini)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep birdJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if rep.Total != 9 || rep.Correct != 9 || rep.EX != 1 || rep.Gold != 9 || rep.EXAllGold != 1 || len(rep.Missing) != 0 {
		t.Fatalf("report %+v", rep)
	}
	want := map[string]int{"simple": 4, "moderate": 3, "challenging": 2}
	if len(rep.ByDifficulty) != 3 {
		t.Fatalf("by difficulty %+v", rep.ByDifficulty)
	}
	for i, d := range []string{"simple", "moderate", "challenging"} {
		got := rep.ByDifficulty[i]
		if got.Difficulty != d || got.Gold != want[d] || got.Correct != want[d] || got.EX != 1 {
			t.Errorf("difficulty %d: %+v", i, got)
		}
	}
	// --gold may be the task file, and --dataset may then be left out.
	out, err = run(t, "eval", "--metric", "bird", "--mode", "sql", "--gold", filepath.Join(birdMini, "dev.json"), "--pred", pred)
	if err != nil || !strings.Contains(out, "EX: 1.0000 (9 of 9 correct)") || !strings.Contains(out, "challenging  2      2        1.0000") {
		t.Errorf("--gold dev.json: %v\n%s", err, out)
	}
}

// TestEvalBirdWrongPredictions: BIRD compares row sets — a different order,
// duplicates and an int for a float still score 1; a wrong value, a missing
// column or an SQL error score 0; missing predictions count wrong over all
// gold examples and in the difficulty table.
func TestEvalBirdWrongPredictions(t *testing.T) {
	t.Parallel()
	pred := writePreds(t, map[string]string{
		// simple
		"dev_0": "SELECT COUNT(*) FROM customers", // 60, not 19
		"dev_1": "```sql\nSELECT T1.name FROM categories AS T1 JOIN categories AS T2 ON T1.parent_id = T2.category_id WHERE T2.name = 'Electronics' UNION ALL SELECT 'Audio' ORDER BY 1 DESC\n```",
		"dev_2": "SELECT city, country FROM customers WHERE email = 'zoe.fischer1@mail.example'",
		"dev_3": "SELECT customer_id, birth_date FROM customers WHERE city = 'Lille' ORDER BY customer_id DESC",
		// moderate
		"dev_4": "SELECT ROUND(AVG(price), 2) FROM products WHERE discontinued = 1",
		"dev_6": "SELECT SUM(marketing_opt_in) * 100 / COUNT(*) FROM customers", // 50 == 50.0
		// challenging
		"dev_7": "SELECT first_name, last_name FROM nope",
		// not in the dataset
		"dev_99": "SELECT 1",
	})
	out, err := run(t, "eval", "--metric", "bird", "--mode", "sql", "--dataset", birdMini, "--pred", pred)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"dev_0     0      result mismatch",
		"dev_1     1",
		"dev_2     0      result mismatch",
		"dev_3     1",
		"dev_4     0      result mismatch",
		"dev_6     1",
		"dev_7     0      SQL logic error: no such table: nope",
		"ignored dev_99.sql: its instance is not a gold example of the dataset",
		"missing: 2 of 9 gold examples have no prediction (dev_5, dev_8)",
		"EX: 0.4286 (3 of 7 correct)",
		"EX over all 9 gold examples, the missing scored wrong: 0.3333",
		"simple       4      2        0.5000",
		"moderate     3      1        0.3333",
		"challenging  2      0        0.0000",
		"total        9      3        0.3333",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// One wrong prediction alone scores 0.
	one := writePreds(t, map[string]string{"dev_5": "SELECT COUNT(order_id) FROM orders WHERE channel = 'web'"})
	out, err = run(t, "eval", "--metric", "bird", "--mode", "sql", "--json", "--dataset", birdMini, "--pred", one)
	if err != nil {
		t.Fatal(err)
	}
	var rep birdJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Total != 1 || rep.Correct != 0 || rep.EX != 0 || rep.Instances[0].Score != 0 || rep.EXAllGold != 0 || len(rep.Missing) != 8 {
		t.Errorf("one wrong prediction: %+v", rep)
	}
}

// TestEvalBirdExecResult compares CSVs as row sets, with the dataset's
// difficulties.
func TestEvalBirdExecResult(t *testing.T) {
	t.Parallel()
	gold, pred := t.TempDir(), t.TempDir()
	files := map[string]string{
		filepath.Join(gold, "dev_0.csv"): "COUNT(customer_id)\n19\n",
		filepath.Join(gold, "dev_1.csv"): "name\nAudio\nLaptops\nPhones\n",
		filepath.Join(gold, "dev_7.csv"): "first_name,last_name\nBob,Hansen\n",
		filepath.Join(pred, "dev_0.csv"): "n\n19.0\n",
		filepath.Join(pred, "dev_1.csv"): "name\nphones\nlaptops\naudio\n",
	}
	for p, body := range files {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, "eval", "--metric", "bird", "--gold", gold, "--pred", pred, "--dataset", birdMini)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"dev_0     1", "dev_1     0      result mismatch", "missing: 1 of 3", "EX: 0.5000 (1 of 2 correct)",
		"simple       2      1        0.5000", "challenging  1      0        0.0000"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestEvalBirdBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--metric", "spider3", "--gold", "g", "--pred", "p"}, "unknown metric"},
		{[]string{"eval", "--metric", "bird", "--mode", "sql", "--pred", t.TempDir()}, "pass --dataset"},
		{[]string{"eval", "--metric", "bird", "--mode", "sql", "--gold", t.TempDir(), "--dataset", birdMini, "--pred", t.TempDir()}, "must be the same folder"},
		{[]string{"eval", "--metric", "bird", "--pred", t.TempDir()}, "pass --gold"},
		{[]string{"eval", "--metric", "bird", "--mode", "sql", "--dataset", birdMini}, "--pred is required"},
		{[]string{"eval", "--metric", "bird", "--gold", t.TempDir(), "--pred", t.TempDir()}, "no <instance_id>.csv gold results"},
	}
	for _, tt := range tests {
		_, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}

// TestInspectBirdMini: the committed fixture loads with no problem.
func TestInspectBirdMini(t *testing.T) {
	t.Parallel()
	out, err := run(t, "inspect", "--strict", birdMini)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"spider1/bird layout", "Examples: 9, runnable 9", "Gold: 9 with SQL", "sqlite/shop", "dev_databases/shop/shop.sqlite", "Problems: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}
