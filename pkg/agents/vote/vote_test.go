package vote

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

func cand(i int, csv string) *agent.Candidate {
	return &agent.Candidate{Index: i, Status: agent.StatusOK, CSV: csv, SQL: fmt.Sprintf("SELECT %d", i)}
}

func cands(answers ...string) []*agent.Candidate {
	var cs []*agent.Candidate
	for i, a := range answers {
		c := cand(i, a)
		if a == "" {
			c.Status = agent.StatusError
		}
		cs = append(cs, c)
	}
	return cs
}

func TestMajorityTieRule(t *testing.T) {
	t.Parallel()
	A, B, C := "x\n1\n", "x\n2\n", "x\n3\n"
	zero := "x\n0\n"
	tests := []struct {
		name    string
		answers []string
		conf    Confidence
		winner  int // index of the winning candidate, -1 for none
	}{
		{"unique majority", []string{A, B, A}, High, 0},
		{"2 of 8 beats singletons", []string{A, B, C, "x\n4\n", "x\n5\n", "x\n6\n", B, "x\n7\n"}, High, 1},
		{"two clusters of two tie", []string{A, A, B, B}, Low, -1},
		{"three beat two", []string{B, A, B, A, B}, High, 0},
		{"all different", []string{A, B, C}, Low, -1},
		{"one candidate is not a consensus", []string{A}, Low, -1},
		{"nothing", nil, Low, -1},
		{"invalid answers do not vote", []string{zero, zero, A}, Low, -1},
		{"tolerance 0.001 agrees", []string{"x\n1.0004\n", "x\n1.0\n", B}, High, 0},
		{"failed candidates ignored", []string{"", A, "", A}, High, 1},
	}
	for _, tt := range tests {
		d := Majority(cands(tt.answers...))
		if d.Confidence != tt.conf {
			t.Errorf("%s: confidence %s, want %s", tt.name, d.Confidence, tt.conf)
		}
		if tt.winner >= 0 && (d.Winner == nil || d.Winner.Index != tt.winner) {
			t.Errorf("%s: winner %+v, want candidate %d", tt.name, d.Winner, tt.winner)
		}
		if tt.winner < 0 && d.Winner != nil {
			t.Errorf("%s: unexpected winner %d", tt.name, d.Winner.Index)
		}
	}
}

func TestDecideFallbacks(t *testing.T) {
	t.Parallel()
	A, B := "x\n1\n", "x\n2\n"
	final := func(seed int64, answers ...string) Decision { return Decide(cands(answers...), seed, Fallbacks{}) }
	if d := final(1, A); d.Method != MethodLone || d.Winner.Index != 0 {
		t.Errorf("lone candidate: %+v", d)
	}
	if d := final(1, A, A, B); d.Method != MethodFinalMajority {
		t.Errorf("majority: %+v", d)
	}
	if d := final(1, "x\n0\n"); d.Method != MethodInvalidFallback || d.Winner == nil {
		t.Errorf("invalid fallback: %+v", d)
	}
	if d := final(1); d.Method != MethodNone || d.Winner != nil {
		t.Errorf("nothing: %+v", d)
	}
	// A tie is broken by the seed: the same seed always picks the same
	// cluster, and different seeds reach both.
	picked := map[int]bool{}
	for seed := int64(0); seed < 20; seed++ {
		d1, d2 := final(seed, A, B, A, B), final(seed, A, B, A, B)
		if d1.Method != MethodRandomTie || d1.Winner.Index != d2.Winner.Index {
			t.Fatalf("seed %d: %+v vs %+v", seed, d1, d2)
		}
		picked[d1.Winner.Index] = true
	}
	if len(picked) != 2 {
		t.Errorf("20 seeds picked only %v", picked)
	}
	// A tie-breaker chooses among the tied clusters' first members; when
	// it names none, the seeded pick decides, or with NoRandom nothing.
	var tied []int
	choose := func(ts []*agent.Candidate) *agent.Candidate {
		for _, c := range ts {
			tied = append(tied, c.Index)
		}
		return ts[1]
	}
	if d := Decide(cands(A, B, A, B), 1, Fallbacks{TieBreak: choose}); d.Method != MethodModelVote || d.Winner.Index != 1 || !slices.Equal(tied, []int{0, 1}) {
		t.Errorf("tie-breaker: tied %v, %+v", tied, d)
	}
	none := func([]*agent.Candidate) *agent.Candidate { return nil }
	if d := Decide(cands(A, B), 1, Fallbacks{TieBreak: none}); d.Method != MethodRandomTie || d.Winner == nil {
		t.Errorf("tie-breaker without a choice: %+v", d)
	}
	if d := Decide(cands(A, B), 1, Fallbacks{TieBreak: none, NoRandom: true}); d.Method != MethodUnresolved || d.Winner != nil {
		t.Errorf("no random selection: %+v", d)
	}
}

// TestOnceRecordsVotedAndAgreed: the runtime's decision names the
// candidates the vote counted and those agreeing with the winner; a
// fallback winner agrees with itself only.
func TestOnceRecordsVotedAndAgreed(t *testing.T) {
	t.Parallel()
	A, B := "x\n1\n", "x\n2\n"
	cs := cands(A, "", B, A)
	for i, c := range cs {
		c.Index = 10 + i
	}
	d := Once(cs, 1)
	if d.Method != string(MethodMajority) || d.Confidence != string(High) || d.Winner != cs[0] || d.Valid != 3 ||
		!slices.Equal(d.Agreed, []int{10, 13}) || !slices.Equal(d.Voted, []int{10, 13, 12}) {
		t.Errorf("majority: %+v", d)
	}
	d = Once(cands(A, B), 3)
	if d.Method != string(MethodRandomTie) || d.Confidence != string(Low) || len(d.Agreed) != 1 || d.Agreed[0] != d.Winner.Index {
		t.Errorf("tie: %+v", d)
	}
	again := Once(cands(A, B), 3)
	if again.Winner.Index != d.Winner.Index {
		t.Errorf("the same seed picked %d, then %d", d.Winner.Index, again.Winner.Index)
	}
	if d := Once(nil, 1); d.Winner != nil || d.Method != string(MethodNone) || d.Voted == nil {
		t.Errorf("nothing: %+v", d)
	}
}

// benchCandidates builds n candidates with rows-row answers; every third
// agrees with the first, the rest differ.
func benchCandidates(n, rows int) []*agent.Candidate {
	out := make([]*agent.Candidate, n)
	for i := range out {
		var b strings.Builder
		b.WriteString("id,name,amount\n")
		shift := 0
		if i%3 != 0 {
			shift = i
		}
		for r := 0; r < rows; r++ {
			fmt.Fprintf(&b, "%d,name%d,%.2f\n", r, r%17, float64(r+shift)*1.25)
		}
		out[i] = &agent.Candidate{Index: i, Status: agent.StatusOK, CSV: b.String()}
	}
	return out
}

func benchmarkVote(b *testing.B, n int) {
	cs := benchCandidates(n, 200)
	for b.Loop() {
		// Each decision reads the results again, as the voter does.
		d := Decide(cs, 1, Fallbacks{})
		if d.Winner == nil {
			b.Fatal("no winner")
		}
	}
}

func BenchmarkVoterDecision8(b *testing.B)  { benchmarkVote(b, 8) }
func BenchmarkVoterDecision64(b *testing.B) { benchmarkVote(b, 64) }
