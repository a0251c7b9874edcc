package reforce

import (
	"fmt"
	"strings"
	"testing"
)

// candidates builds n candidates with rows-row answers; every third agrees
// with the first, the rest differ.
func benchCandidates(n, rows int) []*Candidate {
	out := make([]*Candidate, n)
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
		out[i] = &Candidate{Index: i, Status: StatusOK, CSV: b.String()}
	}
	return out
}

func benchmarkVote(b *testing.B, n int) {
	cands := benchCandidates(n, 200)
	for b.Loop() {
		for _, c := range cands {
			c.frame, c.frameErr = nil, nil // parse again, as the voter does per decision
		}
		d := Decide(cands, 1)
		if d.Winner == nil {
			b.Fatal("no winner")
		}
	}
}

func BenchmarkVoterDecision8(b *testing.B)  { benchmarkVote(b, 8) }
func BenchmarkVoterDecision64(b *testing.B) { benchmarkVote(b, 64) }
