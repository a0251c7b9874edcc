package ensemble

import (
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/agents/raise"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// TestMembersSampleByTheirOwnPolicies runs the ensemble with every
// member under adaptive sampling (MEMBER.sampling=adaptive) against
// llmsim with its difficulty mix, and once with ReFoRCE's alone: each
// adaptive member's verdict is recorded in its own Member entry (its
// stopped_after is the units it drew: ReFoRCE's candidates, PExA's
// passes, RAISE's rounds), a fixed member records none, and a member
// that stopped early drew fewer units than its maximum.
func TestMembersSampleByTheirOwnPolicies(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t).Only(t, "local001", "local002", "local007")
	def := Definition(reforce.Definition(), pexa.Definition(), raise.Definition())
	// ReFoRCE: 4 candidates in waves of 3 and 1; PExA: 4 passes, 3 and 1;
	// RAISE: 4 rounds of 4 finals, 3 and 1 (sure cannot stop after 2 of 4).
	base := map[string]string{"reforce.votes": "4", "pexa.passes": "4", "raise.rounds": "4", "raise.sampling-first": "3"}
	full := map[string]int{"reforce": 4, "pexa": 4, "raise": 4}
	drawn := func(name string, cands []*agent.Candidate) int {
		units := map[int]bool{}
		for _, c := range cands {
			i := c.Index - memberIndex(name)*slotSpan
			if i < 0 || i >= slotSpan {
				continue
			}
			switch name {
			case "raise":
				units[i/4] = true
			case "reforce":
				if i < 4 { // round 0's candidates (exploration fills 4-7)
					units[i] = true
				}
			default:
				units[i] = true
			}
		}
		return len(units)
	}
	for _, tc := range []struct {
		name     string
		adaptive []string
	}{
		{"every member adaptive", []string{"reforce", "pexa", "raise"}},
		{"reforce alone adaptive", []string{"reforce"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := map[string]string{}
			for k, v := range base {
				opts[k] = v
			}
			adaptive := map[string]bool{}
			for _, m := range tc.adaptive {
				opts[m+"."+sampling.OptSampling], adaptive[m] = sampling.Adaptive, true
			}
			_, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 11, Difficulty: llmsim.DefaultDifficulty()}, "")
			outs := agenttest.Run(t, def, demo, agenttest.Options{LLM: client, Agent: opts, Seed: 7})
			stopped := map[string]int{}
			for id, o := range outs {
				if o.Decision.Sampling != nil {
					t.Errorf("%s: the ensemble's own decision has a verdict %+v: its members sample", id, o.Decision.Sampling)
				}
				if len(o.Decision.Members) != 3 {
					t.Fatalf("%s: %d members in the decision, want 3", id, len(o.Decision.Members))
				}
				for _, m := range o.Decision.Members {
					n := drawn(m.Agent, o.Candidates)
					switch {
					case !adaptive[m.Agent]:
						if m.Sampling != nil || n != full[m.Agent] {
							t.Errorf("%s: fixed member %s has verdict %+v and drew %d of %d units", id, m.Agent, m.Sampling, n, full[m.Agent])
						}
					case m.Sampling == nil:
						t.Errorf("%s: adaptive member %s recorded no verdict", id, m.Agent)
					case m.Sampling.StoppedAfter > 0:
						stopped[m.Agent]++
						if m.Sampling.StoppedAfter != n || n >= full[m.Agent] || m.Confidence != "high" {
							t.Errorf("%s: member %s stopped after %d units, drew %d of %d, confidence %s", id, m.Agent, m.Sampling.StoppedAfter, n, full[m.Agent], m.Confidence)
						}
					default:
						if n != full[m.Agent] {
							t.Errorf("%s: member %s did not stop early yet drew %d of %d units", id, m.Agent, n, full[m.Agent])
						}
					}
				}
			}
			t.Logf("members stopped early: %v", stopped)
			for _, m := range tc.adaptive {
				if stopped[m] == 0 {
					t.Errorf("member %s never stopped early on %d examples: its verdict was never tested", m, len(outs))
				}
			}
		})
	}
}

// memberIndex is the member's position in the test's ensemble.
func memberIndex(name string) int {
	return map[string]int{"reforce": 0, "pexa": 1, "raise": 2}[name]
}
