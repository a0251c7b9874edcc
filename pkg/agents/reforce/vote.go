package reforce

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
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
	// MethodFirstRound: the exploration round had no valid candidate (every
	// vote abandoned or failed), so the first round's candidates decided,
	// with the same fallbacks (a tie by the seeded pick or the model).
	MethodFirstRound Method = "first_round_fallback"
	// MethodUnresolved: a tie left unanswered (NoRandomSelection).
	MethodUnresolved Method = "unresolved_tie"
	// MethodNoVote: the one candidate of a run without voting (NoVote).
	MethodNoVote Method = "no_vote"
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

// Decide is the final vote over cands: a unique largest cluster of two or
// more wins; a tie goes to a seeded random choice among the largest
// clusters; a lone valid candidate is chosen rather than dropped. Which
// candidates take part is the caller's (see DecideFinal).
func Decide(cands []*Candidate, seed int64) Decision {
	return decide(cands, seed, nil, false)
}

// Pool says which candidates the final vote of a low-confidence example
// is over.
type Pool struct {
	// Explored: the example went through column exploration (round 1).
	Explored bool
	// Rounds: pool rounds 0 and 1 (the PoolRounds option).
	Rounds bool
	// NoRandom leaves a tie unanswered (the NoRandomSelection ablation).
	NoRandom bool
}

// DecideFinal is the final vote of a low-confidence example over every
// candidate it has (by round then index; records of other kinds, such as
// StatusVote, are ignored). Without exploration it is over round 0. With
// exploration it is over round 1 alone — the paper's column_explore(X_low)
// (eq. 7) and the reference, whose step 2 replaced step 1's candidates —
// or, with p.Rounds, over rounds 0 and 1. When the exploration round has
// no valid candidate (all its votes abandoned or failed), round 0 decides
// (MethodFirstRound) rather than leaving the example unanswered, the
// paper's random_select for what exploration did not resolve. Clusters
// are positions in all.
func DecideFinal(all []*Candidate, p Pool, seed int64, tieBreak func([]*Candidate) *Candidate) Decision {
	pick := func(keep func(*Candidate) bool) ([]*Candidate, []int) {
		var sub []*Candidate
		var pos []int
		for i, c := range all {
			if c != nil && c.Status != StatusVote && keep(c) {
				sub, pos = append(sub, c), append(pos, i)
			}
		}
		return sub, pos
	}
	vote := func(keep func(*Candidate) bool) Decision {
		sub, pos := pick(keep)
		d := decide(sub, seed, tieBreak, p.NoRandom)
		for _, g := range d.Clusters {
			for k := range g {
				g[k] = pos[g[k]]
			}
		}
		return d
	}
	round := func(r int) func(*Candidate) bool { return func(c *Candidate) bool { return c.Round == r } }
	switch {
	case !p.Explored:
		return vote(round(0))
	case p.Rounds:
		return vote(func(c *Candidate) bool { return c.Round <= 1 })
	}
	d := vote(round(1))
	if d.Valid > 0 {
		return d
	}
	first := vote(round(0))
	switch {
	case first.Valid > 0:
		first.Method = MethodFirstRound
		return first
	case d.Winner != nil:
		return d
	}
	return first
}

// pool says which rounds the final vote is over: round 1 when examples
// are explored (ExploreAll, or a low-confidence example without
// NoExploration or NoVote).
func (c Config) pool() Pool {
	explored := c.ExploreAll || (!c.NoExploration && !c.NoVote)
	return Pool{Explored: explored, Rounds: c.PoolRounds, NoRandom: c.NoRandomSelection}
}

func decide(cands []*Candidate, seed int64, tieBreak func([]*Candidate) *Candidate, noRandom bool) Decision {
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
	if noRandom {
		d.Method = MethodUnresolved
		return d
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
		if cand := chosenFile(text, tied); cand != nil {
			return cand, nil
		}
		prompt = "Please output the name of the chosen sql file in ```plaintext\nxxx.sql\n``` format, one of the candidates above."
	}
	return nil, errors.New("the model named no candidate")
}

// chosenFile reads the model's choice: a block (```plaintext, ```text or
// bare) holding a candidate's file name, else the one candidate file the
// visible reply names (models often answer "I choose 2result.sql.").
func chosenFile(text string, tied []*Candidate) *Candidate {
	vis := reply.Visible(text)
	for _, b := range reply.Blocks(vis) {
		name := strings.Trim(strings.TrimSpace(b.Body), "`'\".")
		for _, cand := range tied {
			if name == cand.FileName() {
				return cand
			}
		}
	}
	var named *Candidate
	for _, cand := range tied {
		if fileNamed(vis, cand.FileName()) {
			if named != nil {
				return nil // several named: ask again
			}
			named = cand
		}
	}
	return named
}

// fileNamed reports whether name occurs in text as a whole name ("2result.sql"
// is not in "12result.sql").
func fileNamed(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		at := i + j
		if at == 0 || !isDigit(text[at-1]) {
			return true
		}
		i = at + len(name)
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
