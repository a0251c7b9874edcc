package raise

import (
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/local"
)

// TestAdaptiveSamplingRounds runs demo examples under fixed and adaptive
// sampling at one seed against llmsim (with its difficulty mix). Under
// adaptive sampling the 8 rounds come in waves of 3, 2, 2 and 1 rounds
// (each round's 4 finals); an example the rule settles keeps only the
// rounds drawn, whose finals are the fixed run's (the same seeds); its
// released rounds are never started (fewer tasks, and llmsim serves
// exactly the calls the ledgers record, fewer than the fixed run's); an
// example drawn whole is decided as the fixed run decided it.
func TestAdaptiveSamplingRounds(t *testing.T) {
	t.Parallel()
	ids := []string{"local001", "local002", "local004", "local007", "local009", "local010",
		"local013", "local016", "local018", "local022", "local026", "local030"}
	if raceEnabled {
		// These twelve take minutes under the race detector (485 s for the
		// package with two make tests at once); these three hold every
		// outcome: 001 stops after the first wave, 013 after the third,
		// 007 is drawn whole.
		ids = []string{"local001", "local007", "local013"}
	}
	demo := agenttest.Demo(t).Only(t, ids...)
	waves := sampling.Config{Policy: sampling.Adaptive, First: sampling.DefaultFirst, Step: sampling.DefaultStep}
	fixed, adaptive := agenttest.RunPolicies(t, Definition(), demo, agenttest.SamplingConfig{
		Sim: llmsim.Config{Seed: 11, Difficulty: llmsim.DefaultDifficulty()}, Model: "r1", Run: agenttest.Options{Seed: 7}})
	agenttest.ComparePolicies(t, fixed, adaptive, func(id string, f, a *local.Outcome) {
		agenttest.SameAnswer(t, id, f, a)
		rounds := map[int]bool{}
		for _, c := range a.Candidates {
			if fc := agenttest.ByIndex(f.Candidates, c.Index); fc == nil || fc.SQL != c.SQL || fc.Status != c.Status {
				t.Errorf("%s: adaptive final %d (%s) is not the fixed run's (%v)", id, c.Index, c.SQL, fc)
			}
			r := c.Index / 4
			rounds[r] = true
			if want, _ := waves.Wave(8, r); c.Round != want {
				t.Errorf("%s: RAISE round %d's final %d in runtime round %d, want %d", id, r, c.Index, c.Round, want)
			}
		}
		if s := a.Decision.Sampling.StoppedAfter; s > 0 {
			if s != len(rounds) || s >= 8 || a.Decision.Confidence != string(vote.High) || a.Decision.Winner == nil {
				t.Errorf("%s: stopped after %d rounds with %d drawn, confidence %s, winner %v", id, s, len(rounds), a.Decision.Confidence, a.Decision.Winner)
			}
			if a.Tasks >= f.Tasks || a.Cost.Total().LLMCalls >= f.Cost.Total().LLMCalls {
				t.Errorf("%s: stopped early yet %d tasks and %d LLM calls, the fixed run %d and %d",
					id, a.Tasks, a.Cost.Total().LLMCalls, f.Tasks, f.Cost.Total().LLMCalls)
			}
			return
		}
		if len(rounds) != 8 || a.Rounds != 4 {
			t.Errorf("%s: not stopped early, yet %d rounds drawn in %d runtime rounds; want 8 in 4", id, len(rounds), a.Rounds)
		}
		if w, fw := a.Decision.Winner, f.Decision.Winner; (w == nil) != (fw == nil) || (w != nil && w.Index != fw.Index) ||
			a.Decision.Method != f.Decision.Method {
			t.Errorf("%s: drawn whole, decided %s %v; the fixed run %s %v", id, a.Decision.Method, w, f.Decision.Method, fw)
		}
	})
}
