package cli

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestWrongAnswersShowGold: quorum solve and quorum run write, for each
// wrong answer, the gold SQL and its rows against gold's (counted from the
// files themselves), and nothing for a right one. Both say which quorum
// wrote them and fingerprint what their examples asked: the same twelve
// examples, the same fingerprint.
func TestWrongAnswersShowGold(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	fingerprints := map[string]string{}
	t.Run("commands", func(t *testing.T) {
		for _, cmd := range []string{"solve", "run"} {
			t.Run(cmd, func(t *testing.T) {
				t.Parallel()
				fp := wrongAnswersShowGold(t, cmd)
				mu.Lock()
				defer mu.Unlock()
				fingerprints[cmd] = fp
			})
		}
	})
	if len(fingerprints) < 2 && !t.Failed() {
		t.Skip("solve and run did not both run (go test -short skips them): no fingerprints to compare")
	}
	if fingerprints["solve"] == "" || fingerprints["solve"] != fingerprints["run"] {
		t.Errorf("dataset fingerprints of solve and run over the same examples: %q and %q, want equal and set", fingerprints["solve"], fingerprints["run"])
	}
}

// wrongAnswersShowGold runs cmd over twelve demo examples, checks what it
// wrote against gold and returns its report's dataset fingerprint.
func wrongAnswersShowGold(t *testing.T, cmd string) string {
	out := filepath.Join(t.TempDir(), "out")
	if log, err := run(t, cmd, "--dataset", demo, "--examples", "12", "--votes", "4", "--out", out); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for _, e := range rep.Examples {
		switch {
		case e.Correct == nil:
		case *e.Correct || e.Status != "answered":
			if e.Gold != nil {
				t.Errorf("%s (%s, right %v): a gold diff, want none", e.InstanceID, e.Status, *e.Correct)
			}
		case e.Gold == nil || e.Gold.RowDiff == nil:
			t.Errorf("%s is wrong: no gold diff", e.InstanceID)
		default:
			wrong++
			checkGoldDiff(t, out, e)
		}
	}
	if wrong == 0 {
		t.Fatal("no wrong answer among 12 demo examples: nothing shown against gold")
	}
	if rep.QuorumVersion == "" {
		t.Errorf("%s: run.json does not say which quorum wrote it", cmd)
	}
	return rep.DatasetFingerprint
}

// checkGoldDiff checks wrong example e's diff against the files: its
// answer's rows, and one of its gold tables' (a base file or its variants
// _a, _b, …).
func checkGoldDiff(t *testing.T, out string, e outputs.Example) {
	t.Helper()
	answer, err := eval.ReadCSVFile(filepath.Join(out, e.InstanceID+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(demo, "evaluation_suite", "gold", "exec_result")
	variants, _ := filepath.Glob(filepath.Join(dir, e.InstanceID+"_*.csv"))
	var goldRows []int
	for _, f := range append(variants, filepath.Join(dir, e.InstanceID+".csv")) {
		if g, err := eval.ReadCSVFile(f); err == nil {
			goldRows = append(goldRows, g.Rows)
		}
	}
	d := e.Gold
	if d.AnswerRows != answer.Rows || !slices.Contains(goldRows, d.GoldRows) || d.SQL == "" {
		t.Errorf("%s: gold diff of %d answer rows and %d gold rows (SQL %q); the files hold %d and %v",
			e.InstanceID, d.AnswerRows, d.GoldRows, d.SQL, answer.Rows, goldRows)
	}
	if d.MissingCount+d.ExtraCount == 0 && !slices.Contains(d.Found, "") {
		t.Errorf("%s is wrong, yet its diff finds every gold column and no row missing or extra: %+v", e.InstanceID, d.RowDiff)
	}
}
