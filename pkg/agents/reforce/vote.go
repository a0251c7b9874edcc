package reforce

import (
	"context"
	"errors"
	"strings"

	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// ReFoRCE's own methods, beside the shared vote's (package vote).
const (
	// MethodFirstRound: the exploration round had no valid candidate (every
	// vote abandoned or failed), so the first round's candidates decided,
	// with the same fallbacks (a tie by the seeded pick or the model).
	MethodFirstRound vote.Method = "first_round_fallback"
	// MethodNoVote: the one candidate of a run without voting (NoVote).
	MethodNoVote vote.Method = "no_vote"
)

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
// StatusVote, are ignored; nil entries too). Without exploration it is
// over round 0. With exploration it is over round 1 alone — the paper's
// column_explore(X_low) (eq. 7) and the reference, whose step 2 replaced
// step 1's candidates — or, with p.Rounds, over rounds 0 and 1. When the
// exploration round has no valid candidate (all its votes abandoned or
// failed), round 0 decides (MethodFirstRound) rather than leaving the
// example unanswered, the paper's random_select for what exploration did
// not resolve. Clusters are positions in all.
func DecideFinal(all []*agent.Candidate, p Pool, seed int64, tieBreak func([]*agent.Candidate) *agent.Candidate) vote.Decision {
	pick := func(keep func(*agent.Candidate) bool) ([]*agent.Candidate, []int) {
		var sub []*agent.Candidate
		var pos []int
		for i, c := range all {
			if c != nil && c.Status != string(StatusVote) && keep(c) {
				sub, pos = append(sub, c), append(pos, i)
			}
		}
		return sub, pos
	}
	final := func(keep func(*agent.Candidate) bool) vote.Decision {
		sub, pos := pick(keep)
		d := vote.Decide(sub, seed, vote.Fallbacks{TieBreak: tieBreak, NoRandom: p.NoRandom})
		for _, g := range d.Clusters {
			for k := range g {
				g[k] = pos[g[k]]
			}
		}
		return d
	}
	round := func(r int) func(*agent.Candidate) bool { return func(c *agent.Candidate) bool { return c.Round == r } }
	switch {
	case !p.Explored:
		return final(round(0))
	case p.Rounds:
		return final(func(c *agent.Candidate) bool { return c.Round <= 1 })
	}
	d := final(round(1))
	if d.Valid > 0 {
		return d
	}
	first := final(round(0))
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
