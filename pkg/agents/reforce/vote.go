package reforce

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/llm"
)

// Confidence of a decision.
type Confidence string

// A unique largest cluster of at least two agreeing candidates is high
// confidence; anything else is low.
const (
	High Confidence = "high"
	Low  Confidence = "low"
)

// Method says how the final answer was chosen.
type Method string

// Decision methods.
const (
	MethodMajority        Method = "majority"          // unique largest cluster, first round
	MethodMajorityExplore Method = "majority_explored" // unique largest cluster after exploration
	MethodModelVote       Method = "model_vote"        // the model broke a tie (option)
	MethodRandomTie       Method = "random_tie_break"  // seeded random among the largest clusters
	MethodLone            Method = "lone_candidate"    // the only valid candidate
	MethodInvalidFallback Method = "invalid_fallback"  // only invalid results (e.g. all zeros) were left
	MethodNone            Method = "none"              // no candidate produced rows
)

// Decision is the outcome of a vote.
type Decision struct {
	Confidence Confidence `json:"confidence"`
	Method     Method     `json:"method"`
	Winner     *Candidate `json:"-"`
	// Clusters lists the candidates (by position in the voted slice) of
	// each group of agreeing answers, largest first.
	Clusters [][]int `json:"clusters"`
	Valid    int     `json:"valid"`
}

// clusters groups valid candidates by answer equality. Tolerance-based
// equality is not transitive, so each candidate joins the first cluster
// whose first member it agrees with (the reference asserted transitivity
// and could crash).
func clusters(cands []*Candidate) (groups [][]int, valid int) {
	var reps []*eval.Frame
	for i, c := range cands {
		if c == nil || c.Status != StatusOK {
			continue
		}
		f, err := c.Frame()
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
	// Largest first; ties keep the order of their first member.
	for i := 1; i < len(groups); i++ {
		for j := i; j > 0 && len(groups[j]) > len(groups[j-1]); j-- {
			groups[j], groups[j-1] = groups[j-1], groups[j]
		}
	}
	return groups, valid
}

// Vote is the first-round consensus: a unique largest cluster of at least
// two candidates wins with high confidence; a tie, or no agreement, is low
// confidence and goes to column exploration.
func Vote(cands []*Candidate) Decision {
	groups, valid := clusters(cands)
	d := Decision{Confidence: Low, Method: MethodNone, Clusters: groups, Valid: valid}
	if len(groups) > 0 && len(groups[0]) >= 2 && (len(groups) == 1 || len(groups[1]) < len(groups[0])) {
		d.Confidence, d.Method, d.Winner = High, MethodMajority, cands[groups[0][0]]
	}
	return d
}

// Decide is the final vote over every candidate of every round (the
// first round's are kept as evidence; the reference deleted them). A unique
// largest cluster of two or more wins; a tie goes to a seeded random choice
// among the largest clusters; a lone valid candidate is chosen rather than
// dropped.
func Decide(cands []*Candidate, seed int64) Decision {
	return decide(cands, seed, nil)
}

// Decide is the package-level Decide, with the model breaking ties when the
// agent is configured for it (v1's model vote).
func (a *Agent) Decide(ctx context.Context, cands []*Candidate, in CandidateInput, seed int64, c *cost.Cost) Decision {
	var tieBreak func([]*Candidate) *Candidate
	if a.cfg.ModelVote {
		tieBreak = func(tied []*Candidate) *Candidate {
			w, err := a.modelVote(ctx, tied, in, seed, c)
			if err != nil {
				return nil
			}
			return w
		}
	}
	return decide(cands, seed, tieBreak)
}

func decide(cands []*Candidate, seed int64, tieBreak func([]*Candidate) *Candidate) Decision {
	d := Vote(cands)
	if d.Confidence == High {
		d.Method = MethodMajorityExplore
		return d
	}
	groups := d.Clusters
	switch {
	case len(groups) == 0:
		for _, cand := range cands {
			if cand != nil && cand.Status == StatusOK {
				d.Method, d.Winner = MethodInvalidFallback, cand
				return d
			}
		}
		return d
	case len(groups) == 1:
		d.Method, d.Winner = MethodLone, cands[groups[0][0]]
		return d
	}
	var tied []*Candidate
	for _, g := range groups {
		if len(g) == len(groups[0]) {
			tied = append(tied, cands[g[0]])
		}
	}
	if tieBreak != nil {
		if w := tieBreak(tied); w != nil {
			d.Method, d.Winner = MethodModelVote, w
			return d
		}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5851f42d4c957f2d))
	d.Method, d.Winner = MethodRandomTie, tied[rng.IntN(len(tied))]
	return d
}

// modelVote asks the model to choose among tied candidates (v1 option). Up
// to three asks; every answer is checked (the reference never read the
// third).
func (a *Agent) modelVote(ctx context.Context, tied []*Candidate, in CandidateInput, seed int64, c *cost.Cost) (*Candidate, error) {
	s := &session{a: a, role: llm.RoleVote, c: c}
	prompt := VotePrompt(in.TableInfo, in.Example.Question, tied)
	for try := 0; try < 3; try++ {
		text, err := s.ask(ctx, prompt, seed+int64(try))
		if err != nil {
			return nil, err
		}
		for _, b := range llm.Blocks(text, "plaintext") {
			name := strings.TrimSpace(b)
			for _, cand := range tied {
				if name == cand.FileName() {
					return cand, nil
				}
			}
		}
		prompt = "Please output the name of the chosen sql file in ```plaintext\nxxx.sql\n``` format, one of the candidates above."
	}
	return nil, errors.New("the model named no candidate")
}
