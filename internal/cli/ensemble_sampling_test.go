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
	options := []string{"--dataset", demo, "--agent", "ensemble", "--votes", "4",
		"--agent-option", "reforce.sampling=adaptive", "--agent-option", "pexa.sampling=adaptive", "--agent-option", "raise.sampling=adaptive",
		"--agent-option", "pexa.passes=4", "--agent-option", "raise.rounds=4", "--agent-option", "raise.sampling-first=3"}
	// quorum solve runs the same agent in process and records the same.
	for _, cmd := range []struct {
		name string
		args []string
	}{
		{"run", []string{"run", "--limit", "5", "--run-id", "ens-sampling", "--log-level", "error"}},
		{"solve", []string{"solve", "--examples", "5"}},
	} {
		t.Run(cmd.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			args := append(append(append([]string{}, cmd.args...), options...), "--out", out)
			log, err := run(t, args...)
			if err != nil {
				t.Fatalf("quorum %s --agent ensemble: %v\n%s", cmd.name, err, log)
			}
			rep, err := outputs.ReadReport(out)
			if err != nil {
				t.Fatal(err)
			}
			checkMembersSampling(t, rep)
		})
	}
}

// checkMembersSampling: every example has its three members' verdicts, and
// every member stopped early somewhere.
func checkMembersSampling(t *testing.T, rep *outputs.Report) {
	t.Helper()
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
