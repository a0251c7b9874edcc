// Package vote is the result-clustering vote the agents share, over the
// runtime's candidates. Candidates whose results agree (eval.Agree) form a
// cluster; a unique largest cluster of two or more wins with high
// confidence (Majority); otherwise the final vote's fallbacks decide
// (Decide): a lone valid candidate, an invalid answer when nothing valid
// is left, a tie broken by a tie-breaker or a seeded pick. ReFoRCE
// introduced it (majority-vote consensus; paper eq. 7); PExA and RAISE
// decide with it (Once), and the ensemble clusters its members'
// candidates with it. No agent owns it.
package vote

import (
	"math/rand/v2"
	"slices"

	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Confidence of a decision.
type Confidence string

// A unique largest cluster of at least two agreeing candidates is high
// confidence; anything else is low.
const (
	High Confidence = "high"
	Low  Confidence = "low"
)

// Method says how the answer was chosen.
type Method string

// Decision methods.
const (
	MethodMajority Method = "majority" // unique largest cluster, first vote
	// MethodFinalMajority is the final vote's unique largest cluster
	// (ReFoRCE's after column exploration, hence the name).
	MethodFinalMajority   Method = "majority_explored"
	MethodModelVote       Method = "model_vote"       // the tie-breaker (ReFoRCE's model vote) broke a tie
	MethodRandomTie       Method = "random_tie_break" // seeded random among the largest clusters
	MethodLone            Method = "lone_candidate"   // the only valid candidate
	MethodInvalidFallback Method = "invalid_fallback" // only invalid results (e.g. all zeros) were left
	MethodNone            Method = "none"             // no candidate produced rows
	// MethodUnresolved: a tie left unanswered (Fallbacks.NoRandom).
	MethodUnresolved Method = "unresolved_tie"
)

// Decision is the outcome of a vote over a slice of candidates.
type Decision struct {
	Confidence Confidence
	Method     Method
	// Winner is one of the voted candidates, nil for none.
	Winner *agent.Candidate
	// Clusters lists the candidates (by position in the voted slice) of
	// each group of agreeing answers, largest first.
	Clusters [][]int
	Valid    int
}

// Clusters groups the valid candidates by answer agreement: positions in
// cands, largest cluster first (ties keep the order of their first
// member), and how many were valid. A candidate takes part when its status
// is ok and its result reads as a valid answer (eval.Valid). Tolerance-
// based equality is not transitive, so each candidate joins the first
// cluster whose first member it agrees with (the reference asserted
// transitivity and could crash).
func Clusters(cands []*agent.Candidate) (groups [][]int, valid int) {
	var reps []*eval.Frame
	for i, c := range cands {
		if c == nil || c.Status != agent.StatusOK {
			continue
		}
		f, err := eval.ReadCSV([]byte(c.CSV))
		if err != nil || !eval.Valid(f) {
			continue
		}
		valid++
		joined := false
		for g, rep := range reps {
			if eval.Agree(rep, f) {
				groups[g] = append(groups[g], i)
				joined = true
				break
			}
		}
		if !joined {
			reps = append(reps, f)
			groups = append(groups, []int{i})
		}
	}
	for i := 1; i < len(groups); i++ {
		for j := i; j > 0 && len(groups[j]) > len(groups[j-1]); j-- {
			groups[j], groups[j-1] = groups[j-1], groups[j]
		}
	}
	return groups, valid
}

// Majority is the first vote's consensus: a unique largest cluster of at
// least two candidates wins with high confidence; a tie, or no agreement,
// is low confidence with no winner.
func Majority(cands []*agent.Candidate) Decision {
	groups, valid := Clusters(cands)
	d := Decision{Confidence: Low, Method: MethodNone, Clusters: groups, Valid: valid}
	if len(groups) > 0 && len(groups[0]) >= 2 && (len(groups) == 1 || len(groups[1]) < len(groups[0])) {
		d.Confidence, d.Method, d.Winner = High, MethodMajority, cands[groups[0][0]]
	}
	return d
}

// Fallbacks shape the final vote's handling of a tie.
type Fallbacks struct {
	// TieBreak, when set, chooses among the tied clusters' first members
	// (ReFoRCE's model vote); nil from it leaves the tie to the rest.
	TieBreak func(tied []*agent.Candidate) *agent.Candidate
	// NoRandom leaves a tie unanswered (MethodUnresolved) instead of the
	// seeded pick.
	NoRandom bool
}

// Decide is the final vote over cands: a unique largest cluster of two or
// more wins (MethodFinalMajority); a tie goes to the tie-breaker, then to
// a seeded random choice among the largest clusters; a lone valid
// candidate is chosen rather than dropped, and with nothing valid the
// first ok candidate (an invalid answer) is. Which candidates take part
// is the caller's.
func Decide(cands []*agent.Candidate, seed int64, f Fallbacks) Decision {
	d := Majority(cands)
	if d.Confidence == High {
		d.Method = MethodFinalMajority
		return d
	}
	groups := d.Clusters
	switch {
	case len(groups) == 0:
		for _, cand := range cands {
			if cand != nil && cand.Status == agent.StatusOK {
				d.Method, d.Winner = MethodInvalidFallback, cand
				return d
			}
		}
		return d
	case len(groups) == 1:
		d.Method, d.Winner = MethodLone, cands[groups[0][0]]
		return d
	}
	var tied []*agent.Candidate
	for _, g := range groups {
		if len(g) == len(groups[0]) {
			tied = append(tied, cands[g[0]])
		}
	}
	if f.TieBreak != nil {
		if w := f.TieBreak(tied); w != nil {
			d.Method, d.Winner = MethodModelVote, w
			return d
		}
	}
	if f.NoRandom {
		d.Method = MethodUnresolved
		return d
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5851f42d4c957f2d))
	d.Method, d.Winner = MethodRandomTie, tied[rng.IntN(len(tied))]
	return d
}

// Once is the vote as an agent's whole decision (PExA over its passes,
// RAISE over its rounds): the first vote's majority with high confidence,
// else the final vote's seeded fallbacks.
func Once(cands []*agent.Candidate, tieSeed int64) *agent.Decision {
	d := Majority(cands)
	if d.Confidence != High {
		d = Decide(cands, tieSeed, Fallbacks{})
	}
	return d.Runtime(cands)
}

// Runtime is the decision as the runtime records it: the candidates the
// vote counted (Voted) and those that agree with the winner (Agreed), by
// index. cands is the slice d voted over.
func (d Decision) Runtime(cands []*agent.Candidate) *agent.Decision {
	out := &agent.Decision{Confidence: string(d.Confidence), Method: string(d.Method), Valid: d.Valid, Voted: []int{}, Winner: d.Winner}
	for _, g := range d.Clusters {
		for _, pos := range g {
			out.Voted = append(out.Voted, cands[pos].Index)
		}
	}
	if out.Winner == nil {
		return out
	}
	out.Agreed = []int{out.Winner.Index} // a fallback winner agrees with itself only
	for _, g := range d.Clusters {
		if slices.ContainsFunc(g, func(pos int) bool { return cands[pos] == d.Winner }) {
			out.Agreed = out.Agreed[:0]
			for _, pos := range g {
				out.Agreed = append(out.Agreed, cands[pos].Index)
			}
		}
	}
	return out
}
