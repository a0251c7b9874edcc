package sampling

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

func TestBetaConfidenceExact(t *testing.T) {
	// P(Binomial(n, 1/2) < a) worked by hand.
	for _, c := range []struct {
		counts []int
		want   float64
	}{
		{[]int{3}, 15.0 / 16},            // n=4, a=4: 1 - 1/16
		{[]int{4}, 31.0 / 32},            // n=5, a=5
		{[]int{4, 1}, 57.0 / 64},         // n=6, a=5: 1 - (6+1)/64
		{[]int{2, 2}, 0.5},               // a tie is a coin toss
		{[]int{5, 1, 1, 1}, 120.0 / 128}, // the smaller clusters are ignored: n=7, a=6
	} {
		if got := BetaConfidence(c.counts); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("BetaConfidence(%v) = %v, want %v", c.counts, got, c.want)
		}
	}
}

func TestJudgeOnClusters(t *testing.T) {
	beta := Config{Policy: Adaptive, Rule: Beta, Threshold: 0.95, First: 3, Step: 2}
	loose := beta
	loose.Threshold = 0.9
	dir := beta
	dir.Rule = Dirichlet
	sure := beta
	sure.Rule = Sure
	for _, c := range []struct {
		name    string
		cfg     Config
		sizes   []int
		left    int
		settled bool
	}{
		{"sure: three agree, five left", sure, []int{3}, 5, false},
		{"sure: five agree, three left", sure, []int{5}, 3, true},
		{"sure: four and a failure, three left", sure, []int{4}, 3, true},
		{"sure: four to one, three left could tie", sure, []int{4, 1}, 3, false},
		{"sure: five, one, one; one left", sure, []int{5, 1, 1}, 1, true},
		{"sure: a lone candidate, none left", sure, []int{1}, 0, false},
		{"sure: two to one, none left", sure, []int{2, 1}, 0, true},
		{"sure: a tie, none left", sure, []int{2, 2}, 0, false},
		{"three agree: 0.94 is short of 0.95", beta, []int{3}, 0, false},
		{"three agree at 0.9", loose, []int{3}, 0, true},
		{"five agree", beta, []int{5}, 0, true},
		{"four to one", beta, []int{4, 1}, 0, false},
		{"six to one", beta, []int{6, 1}, 0, true},
		{"split", beta, []int{3, 2}, 0, false},
		{"unsorted sizes sort", beta, []int{1, 6}, 0, true},
		{"nothing valid", beta, nil, 0, false},
		{"zero-size clusters ignored", beta, []int{0, 0}, 0, false},
		{"dirichlet: five agree", dir, []int{5}, 0, true},
		{"dirichlet: three, two, one", dir, []int{3, 2, 1}, 0, false},
		{"dirichlet: seven and one", dir, []int{7, 1}, 0, true},
	} {
		v := c.cfg.Judge(c.sizes, c.left)
		if v.Settled != c.settled {
			t.Errorf("%s: Judge(%v) settled=%v (confidence %.4f), want %v", c.name, c.sizes, v.Settled, v.Confidence, c.settled)
		}
	}
}

func TestDirichletReplays(t *testing.T) {
	a, b := DirichletConfidence([]int{4, 2}), DirichletConfidence([]int{4, 2})
	if a != b {
		t.Fatalf("DirichletConfidence([4 2]) gave %v then %v", a, b)
	}
	// With two clusters it estimates the Beta criterion's exact value when
	// the unseen answers' share is small; it must lie below it (the unseen
	// cluster can only take wins away).
	if exact := BetaConfidence([]int{4, 2}); a > exact+0.01 {
		t.Fatalf("DirichletConfidence([4 2]) = %v above the two-cluster exact %v", a, exact)
	}
}

func TestWaves(t *testing.T) {
	ad := Config{Policy: Adaptive, First: 3, Step: 2}
	for _, c := range []struct {
		cfg  Config
		max  int
		want []int
	}{
		{ad, 8, []int{3, 2, 2, 1}},
		{ad, 7, []int{3, 2, 2}},
		{ad, 3, []int{3}},
		{ad, 2, []int{2}},
		{Config{Policy: Fixed, First: 3, Step: 2}, 8, []int{8}},
	} {
		if got := c.cfg.Waves(c.max); !slices.Equal(got, c.want) {
			t.Errorf("%s Waves(%d) = %v, want %v", c.cfg.Policy, c.max, got, c.want)
		}
	}
	if w, from := ad.Wave(8, 5); w != 2 || from != 5 {
		t.Errorf("Wave(8, 5) = %d, %d; want 2, 5", w, from)
	}
}

func TestFromOptions(t *testing.T) {
	c, err := FromOptions(map[string]string{OptSampling: Adaptive, OptThreshold: "0.9"})
	if err != nil || c.Policy != Adaptive || c.Threshold != 0.9 || c.First != 3 || c.Step != 2 || c.Rule != Sure {
		t.Fatalf("FromOptions = %+v, %v", c, err)
	}
	for _, bad := range []map[string]string{{OptSampling: "sometimes"}, {OptThreshold: "1"}, {OptRule: "gauss"}, {OptFirst: "0"}} {
		if _, err := FromOptions(bad); err == nil {
			t.Errorf("FromOptions(%v) accepted", bad)
		}
	}
}

func cands(answers ...string) []*agent.Candidate {
	out := make([]*agent.Candidate, len(answers))
	for i, a := range answers {
		out[i] = &agent.Candidate{Index: i, Status: agent.StatusOK, CSV: "v\n" + a + "\n"}
		if a == "" {
			out[i].Status, out[i].CSV = agent.StatusError, ""
		}
	}
	return out
}

func TestReplayWaves(t *testing.T) {
	c := Config{Policy: Adaptive, Rule: Beta, Threshold: 0.95, First: 3, Step: 2}
	for _, tc := range []struct {
		name    string
		cands   []*agent.Candidate
		drawn   int
		stopped bool
		winner  int // -1: none
	}{
		{"five agree by the second wave", cands("1", "1", "1", "1", "1", "2", "2", "3"), 5, true, 0},
		{"a split never settles", cands("1", "2", "1", "2", "1", "2", "1", "2"), 8, false, -1},
		{"failures count for no answer", cands("", "1", "1", "1", "1", "2", "2", "2"), 5, true, 1},
		{"six to one settles at the third wave", cands("1", "2", "1", "1", "1", "1", "1", "1"), 7, true, 0},
		{"two to six: the last wave draws every slot", cands("1", "2", "1", "2", "1", "1", "1", "1"), 8, false, 0},
	} {
		r := c.Replay(tc.cands)
		w := -1
		if r.Vote.Winner != nil {
			w = r.Vote.Winner.Index
		}
		if r.Drawn != tc.drawn || r.Stopped != tc.stopped || w != tc.winner {
			t.Errorf("%s: drew %d, stopped %v, winner %d (posterior %.3f); want %d, %v, %d", tc.name, r.Drawn, r.Stopped, w, r.Posterior, tc.drawn, tc.stopped, tc.winner)
		}
	}
}

// TestAfterWave: after a wave that is not the last, a settled example is
// decided (high confidence, stopped after the units drawn so far) and an
// unsettled one opens the next wave from the first unit not drawn, in
// the next round; after the last wave the agent's own vote decides.
func TestAfterWave(t *testing.T) {
	c := Config{Policy: Adaptive, Rule: Beta, Threshold: 0.9, First: 3, Step: 2}
	waves := c.Waves(8) // 3, 2, 2, 1
	type opened struct{ round, from, n int }
	var got []opened
	open := func(round, from, n int) (*agent.Dispatch, error) {
		got = append(got, opened{round, from, n})
		return &agent.Dispatch{Round: round, Expect: n}, nil
	}
	d, err := c.AfterWave(waves, 0, cands("1", "1", "1"), open)
	if err != nil || d == nil || d.Next != nil || d.Confidence != "high" || d.Winner == nil || d.Sampling == nil ||
		d.Sampling.StoppedAfter != 3 || d.Sampling.Posterior < 0.9 || len(got) != 0 {
		t.Fatalf("three unanimous after the first wave: %+v (%v), opened %v; want decided, stopped after 3", d, err, got)
	}
	d, err = c.AfterWave(waves, 1, cands("1", "2", "1", "2", "3"), open)
	if err != nil || d == nil || d.Next == nil || d.Method != MethodAwaitingWave || d.Sampling == nil || d.Sampling.StoppedAfter != 0 ||
		!slices.Equal(got, []opened{{2, 5, 2}}) {
		t.Fatalf("a split after the second wave: %+v (%v), opened %v; want the third wave (round 2, from 5, 2 units)", d, err, got)
	}
	if d, err := c.AfterWave(waves, 3, cands("1", "1", "1", "1", "1", "1", "1", "1"), open); d != nil || err != nil {
		t.Fatalf("after the last wave: %+v (%v), want nil for the agent's own vote", d, err)
	}
}

// TestSureNeverChangesTheDecision enumerates every sequence of n
// candidates over a small alphabet of results (a failure among them), as
// each agent draws them in its waves: the default rule's early stop
// always decides as fixed sampling's vote over all n would (a unique
// largest cluster: the same winner; none: never stopped early, so the
// agent's own path runs on every candidate). The paper's Beta rule at
// 0.9, over the same sequences, does change decisions: the enumeration
// can tell.
func TestSureNeverChangesTheDecision(t *testing.T) {
	looseChanged := 0
	for _, tc := range []struct {
		name     string
		n        int // candidates
		perUnit  int // candidates a unit (pass, round) gives
		alphabet int // distinct results, a failure besides
	}{
		{"ReFoRCE's 8 candidates, PExA's 8 passes", 8, 1, 3},
		{"RAISE: 5 rounds of 2 finals", 10, 2, 2},
		{"6 candidates, 4 results", 6, 1, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			units := tc.n / tc.perUnit
			sure := Config{Policy: Adaptive, Rule: DefaultRule, Threshold: DefaultThreshold, First: DefaultFirst, Step: DefaultStep}
			loose := sure
			loose.Rule = Beta
			changed := map[string]int{}
			saved := map[string]int{}
			seqs := 0
			seq := make([]int, tc.n)
			for {
				cs := make([]*agent.Candidate, tc.n)
				for i, r := range seq {
					cs[i] = &agent.Candidate{Index: i, Status: agent.StatusOK, CSV: fmt.Sprintf("v\n%d\n", r)}
					if r == tc.alphabet {
						cs[i].Status, cs[i].CSV = agent.StatusError, ""
					}
				}
				full := decision(vote.Majority(cs))
				for _, c := range []Config{sure, loose} {
					waves := c.Waves(units)
					var got string
					drawn := 0
					for w := range waves {
						drawn += waves[w]
						d, err := c.AfterWave(waves, w, cs[:drawn*tc.perUnit], func(round, from, n int) (*agent.Dispatch, error) {
							return &agent.Dispatch{Round: round}, nil
						})
						if err != nil {
							t.Fatal(err)
						}
						if d == nil || d.Next == nil {
							if d != nil {
								got = decision(vote.Decision{Winner: d.Winner, Confidence: vote.Confidence(d.Confidence)})
								saved[c.Rule] += tc.n - drawn*tc.perUnit
							} else {
								got = full // the last wave: the agent's own vote over all
							}
							break
						}
					}
					if got != full {
						changed[c.Rule]++
						if c.Rule == Sure && changed[c.Rule] <= 3 {
							t.Errorf("results %v: the sure rule decided %s, fixed sampling %s", seq, got, full)
						}
					}
				}
				seqs++
				if !next(seq, tc.alphabet+1) {
					break
				}
			}
			looseChanged += changed[Beta]
			if saved[Sure] == 0 {
				t.Errorf("over %d sequences the sure rule never stopped early", seqs)
			}
			t.Logf("%d sequences: sure changed %d decisions and left %d candidates undrawn; beta 0.9 changed %d, left %d undrawn",
				seqs, changed[Sure], saved[Sure], changed[Beta], saved[Beta])
		})
	}
	if looseChanged == 0 {
		t.Errorf("the beta rule at 0.9 changed no decision in any enumeration: it cannot tell a change")
	}
}

// decision is what an answer is: the winner's result, or that the vote
// has none (the agent explores or falls back).
func decision(d vote.Decision) string {
	if d.Confidence != vote.High || d.Winner == nil {
		return "no majority"
	}
	return fmt.Sprintf("%q", d.Winner.CSV)
}

// next steps seq to the next sequence over base symbols (an odometer);
// false after the last.
func next(seq []int, base int) bool {
	for i := len(seq) - 1; i >= 0; i-- {
		seq[i]++
		if seq[i] < base {
			return true
		}
		seq[i] = 0
	}
	return false
}
