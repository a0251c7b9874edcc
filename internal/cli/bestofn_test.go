package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// bestOfNJSON is quorum eval --metric bird --best-of-n --json.
type bestOfNJSON struct {
	birdJSON
	BestOfN *struct {
		Instances []struct {
			InstanceID string `json:"instance_id"`
			Candidates int    `json:"candidates"`
			Score      int    `json:"score"`
			CorrectBy  string `json:"correct_by"`
		} `json:"instances"`
		Correct int `json:"correct"`
		Total   int `json:"total"`
		Gold    int `json:"gold"`
	} `json:"best_of_n"`
}

// candidateFiles counts an example's candidate .sql files in a run's folder.
func candidateFiles(t *testing.T, out, id string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(out, outputs.CandidatesDir, id, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestBirdRunBestOfN: quorum run --agent raise over the BIRD fixture (gold
// SQL, no gold CSVs) scores every example under BIRD's rule in run.json,
// writes every candidate's SQL under candidates/, and warns that the
// three final roles share one model. Some example's final answer is wrong
// while a candidate is right (correct false, correct_at_k true), and quorum
// eval --best-of-n, re-executing the written candidates, reaches the same
// verdict for every example, final and Best-of-N alike.
func TestBirdRunBestOfN(t *testing.T) {
	t.Parallel()
	var out, log string
	var rep *outputs.Report
	wrongFinal := ""
	// The simulator's noise decides which answers are wrong: try a few
	// seeds for one whose vote misses a right candidate.
	for seed := 1; seed <= 6 && wrongFinal == ""; seed++ {
		out = filepath.Join(t.TempDir(), "out")
		var err error
		log, err = run(t, "run", "--dataset", birdMini, "--agent", "raise", "--agent-option", "rounds=2", "--sim-p-gold", "0.4",
			"--sim-seed", fmt.Sprint(seed), "--out", out, "--run-id", "bird", "--log-level", "error")
		if err != nil {
			t.Fatalf("quorum run: %v\n%s", err, log)
		}
		if rep, err = outputs.ReadReport(out); err != nil {
			t.Fatal(err)
		}
		for _, e := range rep.Examples {
			if e.Correct != nil && !*e.Correct && e.CorrectAtK != nil && *e.CorrectAtK {
				wrongFinal = e.InstanceID
				break
			}
		}
	}
	if wrongFinal == "" {
		t.Fatalf("no seed gave an example with a wrong final answer and a right candidate; last run.json examples: %+v", rep.Examples)
	}
	if len(rep.Examples) != 9 || rep.Totals.Scored != 9 {
		t.Errorf("%d examples, %d scored; want all 9 of the BIRD fixture scored", len(rep.Examples), rep.Totals.Scored)
	}
	for _, e := range rep.Examples {
		if e.Metric != "bird" || e.Correct == nil || e.CorrectAtK == nil {
			t.Errorf("%s: metric %q, correct %v, correct_at_k %v; want both set under bird", e.InstanceID, e.Metric, e.Correct, e.CorrectAtK)
		}
		if n := candidateFiles(t, out, e.InstanceID); e.Status == "answered" && n == 0 {
			t.Errorf("%s: answered with %d candidates, and no candidate SQL written", e.InstanceID, e.Candidates)
		}
	}
	const warning = "raise: final_a, final_b and final_c all resolve to model gpt-4o at endpoint default"
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], warning) {
		t.Errorf("run.json warnings %q, want one containing %q", rep.Warnings, warning)
	}
	if !strings.Contains(log, "warning: "+warning) {
		t.Errorf("the run's output does not warn %q:\n%s", warning, log)
	}

	js, err := run(t, "eval", "--metric", "bird", "--mode", "sql", "--best-of-n", "--json", "--dataset", birdMini, "--pred", out)
	if err != nil {
		t.Fatalf("quorum eval --best-of-n: %v\n%s", err, js)
	}
	var ev bestOfNJSON
	if err := json.Unmarshal([]byte(js), &ev); err != nil || ev.BestOfN == nil {
		t.Fatalf("eval --json: %v, best_of_n present %v\n%s", err, ev.BestOfN != nil, js)
	}
	final, best := map[string]bool{}, map[string]bool{}
	for _, s := range ev.Instances {
		final[s.InstanceID] = s.Score == 1
	}
	for _, s := range ev.BestOfN.Instances {
		best[s.InstanceID] = s.Score == 1
	}
	for _, e := range rep.Examples {
		if e.Correct == nil || e.CorrectAtK == nil {
			continue
		}
		if final[e.InstanceID] != *e.Correct || best[e.InstanceID] != *e.CorrectAtK {
			t.Errorf("%s: run.json says correct %v, correct_at_k %v; eval says final %v, best-of-n %v",
				e.InstanceID, *e.Correct, *e.CorrectAtK, final[e.InstanceID], best[e.InstanceID])
		}
	}
	if !best[wrongFinal] || final[wrongFinal] {
		t.Errorf("%s: eval final %v, best-of-n %v; want a wrong final counted by Best-of-N", wrongFinal, final[wrongFinal], best[wrongFinal])
	}
	if ev.BestOfN.Correct != rep.Totals.CorrectAtK || ev.BestOfN.Gold != 9 || ev.Correct != rep.Totals.Correct {
		t.Errorf("eval: EX %d, Best-of-N %d of gold %d; run.json: correct %d, correct_at_k %d",
			ev.Correct, ev.BestOfN.Correct, ev.BestOfN.Gold, rep.Totals.Correct, rep.Totals.CorrectAtK)
	}
	text, err := run(t, "eval", "--metric", "bird", "--mode", "sql", "--best-of-n", "--dataset", birdMini, "--pred", out)
	if want := fmt.Sprintf("Best-of-N: %.4f (%d of 9", float64(rep.Totals.CorrectAtK)/9, rep.Totals.CorrectAtK); err != nil || !strings.Contains(text, want) {
		t.Errorf("eval --best-of-n text lacks %q (err %v):\n%s", want, err, text)
	}
}

// TestSpiderRunScoresBothAndKeepsCandidates: a Spider 2.0-format run (gold
// CSVs) still gets correct and correct_at_k, judged by Spider 2.0's rules,
// with its candidates written; a RAISE run whose final roles go to three
// models carries no warning.
func TestSpiderRunScoresBothAndKeepsCandidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
	}{
		{"reforce", nil},
		{"raise on three models", []string{"--agent", "raise", "--agent-option", "rounds=1", "--role-model", "final_a=r1-distill",
			"--role-model", "final_b=o3-mini", "--role-model", "final_c=claude-3-7-sonnet"}},
	}
	for _, tt := range tests {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"run", "--dataset", demo, "--limit", "3", "--out", out, "--run-id", "spider", "--log-level", "error"}, tt.args...)
		log, err := run(t, args...)
		if err != nil {
			t.Fatalf("%s: quorum run: %v\n%s", tt.name, err, log)
		}
		rep, err := outputs.ReadReport(out)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.Scored != 3 {
			t.Errorf("%s: %d of 3 examples scored", tt.name, rep.Totals.Scored)
		}
		for _, e := range rep.Examples {
			if e.Metric != "spider2" || e.Correct == nil || e.CorrectAtK == nil {
				t.Errorf("%s: %s: metric %q, correct %v, correct_at_k %v; want both set under spider2", tt.name, e.InstanceID, e.Metric, e.Correct, e.CorrectAtK)
			}
			if n := candidateFiles(t, out, e.InstanceID); n == 0 || n > e.Candidates {
				t.Errorf("%s: %s: %d candidate files for %d candidates", tt.name, e.InstanceID, n, e.Candidates)
			}
		}
		if len(rep.Warnings) != 0 || strings.Contains(log, "warning:") {
			t.Errorf("%s: warnings %q in run.json, or in the output:\n%s", tt.name, rep.Warnings, log)
		}
	}
}

func TestEvalBestOfNBadInput(t *testing.T) {
	t.Parallel()
	noCandidates := t.TempDir()
	if err := os.WriteFile(filepath.Join(noCandidates, "dev_0.sql"), []byte("SELECT 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--best-of-n", "--gold", t.TempDir(), "--pred", t.TempDir()}, "use it with --metric bird"},
		{[]string{"eval", "--metric", "bird", "--mode", "sql", "--best-of-n", "--dataset", birdMini, "--pred", noCandidates}, "has no candidates/ folder"},
	}
	for _, tt := range tests {
		_, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}
