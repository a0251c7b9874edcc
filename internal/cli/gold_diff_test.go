package cli

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestWrongAnswersShowGold: quorum solve and quorum run write, for each
// wrong answer, the gold SQL and its rows against gold's (counted from the
// files themselves), and nothing for a right one.
func TestWrongAnswersShowGold(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"solve", "run"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
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
					answer, err := eval.ReadCSVFile(filepath.Join(out, e.InstanceID+".csv"))
					if err != nil {
						t.Fatal(err)
					}
					// The gold table is one of the example's (a base file or
					// its variants _a, _b, …).
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
			}
			if wrong == 0 {
				t.Fatal("no wrong answer among 12 demo examples: nothing shown against gold")
			}
		})
	}
}
