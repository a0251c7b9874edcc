package reforce

import (
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/local"
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
	fixed, adaptive := agenttest.RunPolicies(t, Definition(), demo, agenttest.SamplingConfig{
		Sim: llmsim.Config{Seed: 11}, Run: agenttest.Options{Votes: 8, Seed: 7}})
	agenttest.ComparePolicies(t, fixed, adaptive, func(id string, f, a *local.Outcome) {
		agenttest.SameAnswer(t, id, f, a)
		// Round 0's candidates drawn under adaptive are the fixed run's
		// first ones.
		n := 0
		for _, c := range a.Candidates {
			if c.Round < 4 {
				n++
				if fc := agenttest.ByIndex(f.Candidates, c.Index); fc == nil || fc.SQL != c.SQL || fc.Status != c.Status {
					t.Errorf("%s: adaptive candidate %d (%s) is not the fixed run's (%v)", id, c.Index, c.SQL, fc)
				}
			}
		}
		if s := a.Decision.Sampling.StoppedAfter; s > 0 {
			if s != n || s >= 8 || a.Decision.Confidence != string(vote.High) || a.Decision.Winner == nil {
				t.Errorf("%s: stopped after %d with %d candidates drawn, confidence %s, winner %v", id, s, n, a.Decision.Confidence, a.Decision.Winner)
			}
			for _, c := range a.Candidates {
				if c.Index >= s {
					t.Errorf("%s: stopped after %d yet candidate %d (round %d) exists", id, s, c.Index, c.Round)
				}
			}
		} else if n != 8 {
			t.Errorf("%s: not stopped early, yet %d of round 0's 8 candidates drawn", id, n)
		}
	})
}
