package pexa_test

import (
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestResumedPassAnswersAsAnUninterruptedOne stops a pass's delivery at
// its (N+1)th call of a role, as a worker killed there, and lets local
// deliver the task again (as the queue redelivers it): the calls after the
// stop are what the pass had left, not the turn or the Proposer again
// from its start, and the pass answers as an uninterrupted one.
func TestResumedPassAnswersAsAnUninterruptedOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		role llm.Role
		n    int
		opts map[string]string
	}{
		{"the proposer", pexa.RolePropose, 1, map[string]string{pexa.OptPasses: "1"}},
		{"the no-proposer planner", pexa.RolePlan, 2, map[string]string{pexa.OptPasses: "1", pexa.OptNoProposer: "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			demo := agenttest.Demo(t).Only(t, "local010")
			_, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 5}, "")
			opt := func(c llm.Client) agenttest.Options { return agenttest.Options{LLM: c, Agent: tc.opts, Seed: 7} }
			whole := agenttest.Record(client)
			want := agenttest.Run(t, pexa.Definition(), demo, opt(whole))["local010"]
			match := func(r llm.Request) bool { return r.Role == tc.role }
			total := 0
			for _, r := range whole.Requests() {
				if match(r) {
					total++
				}
			}
			t.Logf("%d %s calls of %d", total, tc.role, len(whole.Requests()))
			if total <= tc.n+1 {
				t.Fatalf("the pass made %d %s calls: too few to stop it after %d", total, tc.role, tc.n)
			}
			stop := &agenttest.Interrupter{Client: client, N: tc.n, Match: match}
			got := agenttest.Run(t, pexa.Definition(), demo, opt(stop))["local010"]
			if before, after, stopped := stop.Calls(); !stopped || after != total-tc.n {
				t.Errorf("%s calls: %d before the stop, %d after (stopped: %v), want the %d left", tc.role, before, after, stopped, total-tc.n)
			}
			if len(got.Candidates) != len(want.Candidates) {
				t.Fatalf("%d candidates resumed, %d uninterrupted", len(got.Candidates), len(want.Candidates))
			}
			for i, w := range want.Candidates {
				if g := got.Candidates[i]; g.Index != w.Index || g.SQL != w.SQL || g.Status != w.Status {
					t.Errorf("candidate %d: resumed %s %q, uninterrupted %s %q", w.Index, g.Status, g.SQL, w.Status, w.SQL)
				}
			}
		})
	}
}
