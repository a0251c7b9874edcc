package cli

import (
	"path/filepath"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestEnsembleRecordsMembersSampling: with every member under adaptive
// sampling (MEMBER.sampling=adaptive), quorum run's run.json holds each
// member's own verdict (stopped_after within the member's units, the
// rule's posterior), through the voter and the coordinator.
func TestEnsembleRecordsMembersSampling(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	log, err := run(t, "run", "--dataset", demo, "--agent", "ensemble", "--votes", "4",
		"--agent-option", "reforce.sampling=adaptive", "--agent-option", "pexa.sampling=adaptive", "--agent-option", "raise.sampling=adaptive",
		"--agent-option", "pexa.passes=4", "--agent-option", "raise.rounds=4", "--agent-option", "raise.sampling-first=2",
		"--limit", "5", "--out", out, "--run-id", "ens-sampling", "--log-level", "error")
	if err != nil {
		t.Fatalf("quorum run --agent ensemble: %v\n%s", err, log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]int{"reforce": 4, "pexa": 4, "raise": 4}
	posterior, stopped := map[string]int{}, map[string]int{}
	for _, e := range rep.Examples {
		if len(e.Members) != 3 {
			t.Fatalf("%s: members %+v", e.InstanceID, e.Members)
		}
		if e.StoppedAfter != 0 {
			t.Errorf("%s: the ensemble's own stopped_after is %d: its members sample", e.InstanceID, e.StoppedAfter)
		}
		for _, m := range e.Members {
			if m.Posterior < 0 || m.Posterior > 1 || m.StoppedAfter < 0 || m.StoppedAfter >= units[m.Agent] {
				t.Errorf("%s: member %s stopped after %d of %d units at posterior %v", e.InstanceID, m.Agent, m.StoppedAfter, units[m.Agent], m.Posterior)
			}
			if m.Posterior > 0 {
				posterior[m.Agent]++
			}
			if m.StoppedAfter > 0 {
				stopped[m.Agent]++
			}
		}
	}
	t.Logf("members with a posterior: %v; stopped early: %v", posterior, stopped)
	for m := range units {
		if posterior[m] == 0 || stopped[m] == 0 {
			t.Errorf("member %s: a posterior in %d examples, stopped early in %d, of %d: its verdict is not in run.json", m, posterior[m], stopped[m], len(rep.Examples))
		}
	}
}
