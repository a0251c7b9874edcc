package pexa_test

import (
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/local"
)

// TestAdaptiveSamplingPasses runs the demo under fixed and adaptive
// sampling at one seed against llmsim (with its difficulty mix, so some
// questions are easy and some are not). Under adaptive sampling the 4
// passes come in waves of 3 and 1; an example the rule settles keeps only
// the passes drawn, which are the fixed run's first ones (the same
// seeds), and its released pass is never started (no task, and llmsim
// serves exactly the calls the ledgers record, fewer than the fixed
// run's); an example not settled draws every pass and is decided as the
// fixed run decided it.
func TestAdaptiveSamplingPasses(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	if raceEnabled {
		// The whole demo takes minutes under the race detector (720 s with
		// two make tests at once); these five hold both outcomes: 002 and
		// 039 draw every pass, the others stop after the first wave.
		demo = demo.Only(t, "local001", "local002", "local009", "local020", "local039")
	}
	fixed, adaptive := agenttest.RunPolicies(t, pexa.Definition(), demo, agenttest.SamplingConfig{
		Sim: llmsim.Config{Seed: 11, Difficulty: llmsim.DefaultDifficulty()}, Run: agenttest.Options{Seed: 7}})
	stopped := agenttest.ComparePolicies(t, fixed, adaptive, func(id string, f, a *local.Outcome) {
		agenttest.SameAnswer(t, id, f, a)
		for _, c := range a.Candidates {
			if fc := agenttest.ByIndex(f.Candidates, c.Index); fc == nil || fc.SQL != c.SQL || fc.Status != c.Status {
				t.Errorf("%s: adaptive pass %d (%s) is not the fixed run's (%v)", id, c.Index, c.SQL, fc)
			}
			// Waves of 3 and 1: passes 0-2 in round 0, pass 3 in round 1.
			if want := c.Index / 3; c.Round != want {
				t.Errorf("%s: pass %d in round %d, want %d", id, c.Index, c.Round, want)
			}
		}
		if s := a.Decision.Sampling.StoppedAfter; s > 0 {
			if s != 3 || len(a.Candidates) != 3 || a.Decision.Confidence != string(vote.High) || a.Decision.Winner == nil {
				t.Errorf("%s: stopped after %d with %d passes drawn, confidence %s, winner %v; want 3, 3, high and a winner",
					id, s, len(a.Candidates), a.Decision.Confidence, a.Decision.Winner)
			}
			// The released pass never started: fewer tasks, fewer calls.
			if a.Tasks >= f.Tasks || a.Cost.Total().LLMCalls >= f.Cost.Total().LLMCalls {
				t.Errorf("%s: stopped early yet %d tasks and %d LLM calls, the fixed run %d and %d",
					id, a.Tasks, a.Cost.Total().LLMCalls, f.Tasks, f.Cost.Total().LLMCalls)
			}
			if a.Rounds != 1 {
				t.Errorf("%s: stopped after the first wave in %d rounds", id, a.Rounds)
			}
			return
		}
		if len(a.Candidates) != 4 || a.Rounds != 2 {
			t.Errorf("%s: not stopped early, yet %d passes in %d rounds; want 4 in 2", id, len(a.Candidates), a.Rounds)
		}
		if w, fw := a.Decision.Winner, f.Decision.Winner; (w == nil) != (fw == nil) || (w != nil && w.Index != fw.Index) ||
			a.Decision.Method != f.Decision.Method {
			t.Errorf("%s: drawn whole, decided %s %v; the fixed run %s %v", id, a.Decision.Method, w, f.Decision.Method, fw)
		}
	})
	if stopped == len(adaptive.Outcomes) {
		t.Fatal("every example stopped early: the second wave was never tested")
	}
}
