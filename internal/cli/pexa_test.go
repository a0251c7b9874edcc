package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestPExAAnswersTheDemo: quorum run --agent pexa over the demo, with the
// simulated LLM, through the embedded NATS and a real redis-server,
// answers every example; run.json accounts PExA's four stages; the summary
// prints EX and EX@4. quorum solve --agent pexa runs the same tasks in
// process and reaches the same answers. Six examples: each check is per
// example, and PExA over the whole demo is pkg/llmsim's
// TestPExAEndToEnd.
func TestPExAAnswersTheDemo(t *testing.T) {
	t.Parallel()
	runOut := filepath.Join(t.TempDir(), "run")
	log, err := run(t, "run", "--dataset", demo, "--agent", "pexa", "--limit", "6", "--out", runOut, "--run-id", "pexa", "--log-level", "error")
	if err != nil {
		t.Fatalf("quorum run --agent pexa: %v\n%s", err, log)
	}
	if !strings.Contains(log, "EX@4: ") {
		t.Errorf("no EX@4 in the summary:\n%s", log)
	}
	rep, err := outputs.ReadReport(runOut)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Agent != "pexa" || rep.Totals.Examples != 6 || rep.Totals.Answered != 6 {
		t.Fatalf("run.json: agent %s, %+v", rep.Agent, rep.Totals)
	}
	for _, e := range rep.Examples {
		for _, stage := range []string{"plan", "probe", "propose", "verify"} {
			if c := e.CostByStage[stage]; c == nil || c.LLMCalls == 0 {
				t.Errorf("%s: no %s calls in cost_by_stage %v", e.InstanceID, stage, e.CostByStage)
			}
		}
		if e.Candidates != 4 || e.CriticalPathSeconds <= 0 {
			t.Errorf("%s: %d candidates (want the 4 passes), critical path %.3fs", e.InstanceID, e.Candidates, e.CriticalPathSeconds)
		}
	}
	solveOut := filepath.Join(t.TempDir(), "solve")
	log, err = run(t, "solve", "--dataset", demo, "--agent", "pexa", "--limit", "6", "--out", solveOut)
	if err != nil {
		t.Fatalf("quorum solve --agent pexa: %v\n%s", err, log)
	}
	local, err := outputs.ReadReport(solveOut)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range local.Examples {
		d := rep.Examples[i]
		if e.InstanceID != d.InstanceID || e.Status != d.Status || e.Method != d.Method || e.Cost.LLMCalls != d.Cost.LLMCalls {
			t.Errorf("%s: solve %s/%s/%d calls, run %s/%s/%d calls", e.InstanceID, e.Status, e.Method, e.Cost.LLMCalls, d.Status, d.Method, d.Cost.LLMCalls)
		}
	}
}
