package sampling

import (
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"math"
	"slices"
	"testing"
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
	for _, c := range []struct {
		name    string
		cfg     Config
		sizes   []int
		settled bool
	}{
		{"three agree: 0.94 is short of 0.95", beta, []int{3}, false},
		{"three agree at 0.9", loose, []int{3}, true},
		{"five agree", beta, []int{5}, true},
		{"four to one", beta, []int{4, 1}, false},
		{"six to one", beta, []int{6, 1}, true},
		{"split", beta, []int{3, 2}, false},
		{"unsorted sizes sort", beta, []int{1, 6}, true},
		{"nothing valid", beta, nil, false},
		{"zero-size clusters ignored", beta, []int{0, 0}, false},
		{"dirichlet: five agree", dir, []int{5}, true},
		{"dirichlet: three, two, one", dir, []int{3, 2, 1}, false},
		{"dirichlet: seven and one", dir, []int{7, 1}, true},
	} {
		v := c.cfg.Judge(c.sizes)
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
	if err != nil || c.Policy != Adaptive || c.Threshold != 0.9 || c.First != 3 || c.Step != 2 || c.Rule != Beta {
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
