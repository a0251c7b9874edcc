package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestEnsembleRecordsItsMembers: quorum run --agent ensemble answers every
// example, run.json holds each member's decision (and whether it agrees
// with the ensemble's), and members/<agent>/ holds each member's answers,
// which quorum eval scores like any predictions.
func TestEnsembleRecordsItsMembers(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	log, err := run(t, "run", "--dataset", demo, "--agent", "ensemble", "--agent-option", "raise.rounds=2", "--agent-option", "pexa.passes=2",
		"--votes", "4", "--limit", "5", "--out", out, "--run-id", "ens", "--log-level", "error")
	if err != nil {
		t.Fatalf("quorum run --agent ensemble: %v\n%s", err, log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.Answered != 5 {
		t.Fatalf("%d of 5 answered:\n%s", rep.Totals.Answered, log)
	}
	for _, e := range rep.Examples {
		if e.Rule != "pooled" || len(e.Members) != 3 || !strings.HasPrefix(e.Method, "ensemble_") {
			t.Fatalf("%s: rule %q, method %q, members %+v", e.InstanceID, e.Rule, e.Method, e.Members)
		}
		// High confidence means two agents have candidates in the winning
		// cluster (not that two members' own winners are there).
		for _, m := range e.Members {
			if m.Correct == nil {
				t.Errorf("%s: member %s not scored", e.InstanceID, m.Agent)
			}
		}
		for _, stage := range []string{"reforce.generate", "pexa.plan", "raise.agent"} {
			if c := e.CostByStage[stage]; c == nil || c.LLMCalls == 0 {
				t.Errorf("%s: no %s cost: %v", e.InstanceID, stage, e.CostByStage)
			}
		}
	}
	for _, m := range []string{"reforce", "pexa", "raise"} {
		files, _ := filepath.Glob(filepath.Join(out, "members", m, "*.csv"))
		if len(files) == 0 {
			t.Errorf("no answers written for member %s", m)
		}
	}
	scored, err := run(t, "eval", "--json", "--gold", filepath.Join(demo, "evaluation_suite", "gold"), "--pred", filepath.Join(out, "members", "pexa"))
	var ev struct {
		Total int `json:"total"`
	}
	lines := strings.Split(strings.TrimSpace(scored), "\n")
	if json.Unmarshal([]byte(lines[len(lines)-1]), &ev); ev.Total == 0 {
		t.Errorf("quorum eval over a member's answers: %v\n%s", err, scored)
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Error(err)
	}
}
