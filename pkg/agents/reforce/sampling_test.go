package reforce

import (
	"testing"

	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/sampling"
)

// TestAdaptiveSamplingWaves runs the demo under fixed and adaptive
// sampling at one seed against llmsim. Under adaptive sampling round 0
// comes in waves of 3, 2, 2 and 1; an example the rule settles keeps only
// the candidates drawn, which are the fixed run's first ones (the same
// seeds); the slots it released never reach the model (llmsim serves
// exactly the calls the ledgers record, fewer than the fixed run's); an
// example not settled goes on as under fixed sampling and gets its
// answer.
func TestAdaptiveSamplingWaves(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	if raceEnabled {
		demo = demo.Only(t, "local001", "local002", "local013", "local016", "local026")
	}
	run := func(policy string) (int64, map[string]*agentOutcome) {
		sim, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 11}, "")
		outs := agenttest.Run(t, Definition(), demo, agenttest.Options{LLM: client, Votes: 8, Seed: 7,
			Agent: map[string]string{sampling.OptSampling: policy, sampling.OptThreshold: "0.9"}})
		var recorded int64
		res := map[string]*agentOutcome{}
		for id, o := range outs {
			recorded += int64(o.Cost.Total().LLMCalls)
			res[id] = &agentOutcome{d: o.Decision, cands: o.Candidates}
		}
		checkServed(t, policy, sim, recorded)
		return recorded, res
	}
	fixedCalls, fixed := run(sampling.Fixed)
	adaptiveCalls, adaptive := run(sampling.Adaptive)
	stopped := 0
	for id, a := range adaptive {
		f := fixed[id]
		if f.d.Sampling != nil {
			t.Errorf("%s: fixed sampling recorded a verdict %+v", id, f.d.Sampling)
		}
		if a.d.Sampling == nil {
			t.Errorf("%s: adaptive sampling recorded no verdict", id)
			continue
		}
		// Round 0's candidates drawn under adaptive are the fixed run's
		// first ones.
		n := 0
		for _, c := range a.cands {
			if c.Round < 4 {
				n++
				if fc := f.byIndex(c.Index); fc == nil || fc.SQL != c.SQL || fc.Status != c.Status {
					t.Errorf("%s: adaptive candidate %d (%s) is not the fixed run's (%v)", id, c.Index, c.SQL, fc)
				}
			}
		}
		if s := a.d.Sampling.StoppedAfter; s > 0 {
			stopped++
			if s != n || s >= 8 || a.d.Confidence != string(vote.High) || a.d.Winner == nil {
				t.Errorf("%s: stopped after %d with %d candidates drawn, confidence %s, winner %v", id, s, n, a.d.Confidence, a.d.Winner)
			}
			if a.d.Sampling.Posterior < 0.9 {
				t.Errorf("%s: stopped at posterior %.3f, below the threshold 0.9", id, a.d.Sampling.Posterior)
			}
			for _, c := range a.cands {
				if c.Index >= s {
					t.Errorf("%s: stopped after %d yet candidate %d (round %d) exists", id, s, c.Index, c.Round)
				}
			}
		} else if n != 8 {
			t.Errorf("%s: not stopped early, yet %d of round 0's 8 candidates drawn", id, n)
		}
	}
	t.Logf("fixed: %d LLM calls; adaptive: %d (%d of %d examples stopped early)", fixedCalls, adaptiveCalls, stopped, len(adaptive))
	if stopped == 0 {
		t.Fatal("no example stopped early: the waves were never tested")
	}
	if adaptiveCalls >= fixedCalls {
		t.Errorf("adaptive sampling made %d LLM calls, fixed %d", adaptiveCalls, fixedCalls)
	}
}

type agentOutcome struct {
	d     *agent.Decision
	cands []*agent.Candidate
}

func (o *agentOutcome) byIndex(i int) *agent.Candidate {
	for _, c := range o.cands {
		if c.Index == i {
			return c
		}
	}
	return nil
}

// checkServed: every call the agent recorded was served, and none more
// (a released slot's call would be served and not recorded).
func checkServed(t *testing.T, policy string, sim *llmsim.Server, recorded int64) {
	t.Helper()
	if st := sim.Stats(); st.Requests != recorded {
		t.Errorf("%s: llmsim served %d requests, the ledgers record %d", policy, st.Requests, recorded)
	}
}
