package reforce

import (
	"path/filepath"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

func correct(t *testing.T, e *dataset.Example, goldDir string, c *agent.Candidate) bool {
	t.Helper()
	if c == nil || c.Status != agent.StatusOK {
		return false
	}
	f, err := eval.ReadCSV([]byte(c.CSV))
	if err != nil {
		return false
	}
	ok, err := eval.ScoreAgainstGold(f, filepath.Join(goldDir, "exec_result"), e.ID, e.Gold.Spec)
	return err == nil && ok
}

// TestDemoAgainstSimulator runs ReFoRCE with 8 candidates over the demo
// through the runtime's seam (in process) against llmsim at its default
// noise: voting must beat a single candidate, low-confidence examples must
// go through exploration, and every LLM call must be accounted for.
func TestDemoAgainstSimulator(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	if raceEnabled {
		// The race detector makes tokenizing ~10x slower: a subset with
		// examples that are low confidence at this seed, so the
		// exploration round runs under the detector too.
		demo = demo.Only(t, "local001", "local002", "local013", "local016", "local026")
	}
	examples, ds := demo.Examples, demo.Dataset
	sim, client := agenttest.Sim(t, llmsim.Config{Dataset: ds, Seed: 11}, "")
	outs := agenttest.Run(t, Definition(), demo, agenttest.Options{LLM: client, Votes: 8, Seed: 7})
	total := cost.Ledger{}
	single, voted, low, cands := 0, 0, 0, 0
	for _, e := range examples {
		id, o := e.ID, outs[e.ID]
		total.Merge(o.Cost)
		cands += len(o.Candidates)
		if correct(t, e, ds.GoldDir, o.Candidates[0]) {
			single++
		}
		if correct(t, e, ds.GoldDir, o.Decision.Winner) {
			voted++
		}
		if o.Decision.Confidence == string(vote.Low) {
			t.Logf("  %s: low confidence, final %s", id, o.Decision.Method)
			low++
			if o.Rounds != 2 || len(o.Candidates) != 16 || calls(o.Cost, "explore") == 0 {
				t.Errorf("%s: low confidence but %d rounds, %d candidates, costs %v", id, o.Rounds, len(o.Candidates), o.Cost)
			}
		} else if o.Rounds != 1 || calls(o.Cost, "explore") != 0 {
			t.Errorf("%s: high confidence yet explored", id)
		}
	}
	n := float64(len(examples))
	tot := total.Total()
	st := sim.Stats()
	t.Logf("%d examples: EX %.3f with 1 candidate, %.3f with 8 and voting; %d low confidence (%.0f%%)",
		len(examples), float64(single)/n, float64(voted)/n, low, 100*float64(low)/n)
	t.Logf("per example: %.2f LLM calls, %.2f warehouse queries, %.0f tokens; per candidate: %.2f calls, %.2f queries",
		float64(tot.LLMCalls)/n, float64(tot.Queries)/n, float64(tot.Tokens())/n,
		float64(tot.LLMCalls)/float64(cands), float64(tot.Queries)/float64(cands))
	for _, s := range total.Stages() {
		c := total[s]
		t.Logf("  stage %-10s %5d calls %5d queries %8d tokens", s, c.LLMCalls, c.Queries, c.Tokens())
	}
	if int64(tot.LLMCalls) != st.Requests {
		t.Errorf("accounting: %d calls recorded vs %d served", tot.LLMCalls, st.Requests)
	}
	if st.Unknown != 0 || st.UnknownExample != 0 {
		t.Errorf("the simulator did not recognise %d requests (%d without an example): %v", st.Unknown, st.UnknownExample, st.ByKind)
	}
	if voted <= single && !raceEnabled {
		t.Errorf("voting (%d correct) did not beat a single candidate (%d correct)", voted, single)
	}
	if low == 0 {
		t.Error("no example was low confidence, so exploration was never exercised")
	}
}
