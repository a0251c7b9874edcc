package reforce

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Format asks once per example for the expected answer format (v1's format
// restriction) and returns it as a one-line csv block shared by every
// candidate, or "" when the model gave none (the reference crashed).
func (a *Agent) Format(ctx context.Context, ex Example, seed int64) (string, cost.Cost, error) {
	var c cost.Cost
	s := &session{a: a, role: llm.RoleFormat, c: &c}
	text, err := s.ask(ctx, FormatPrompt(ex.Question), seed)
	if err != nil {
		if ctx.Err() != nil {
			return "", c, ctx.Err()
		}
		return "", c, nil
	}
	blocks := llm.Blocks(reply.Visible(text), "csv")
	if len(blocks) == 0 {
		return "", c, nil
	}
	header, _, _ := strings.Cut(strings.TrimSpace(blocks[0]), "\n")
	if header == "" {
		return "", c, nil
	}
	return "```csv\n" + header + "\n```", c, nil
}

// SolveInput is one example for Solve.
type SolveInput struct {
	Example Example
	Info    *dbinfo.Info
	// RunSeed seeds every call of the example.
	RunSeed uint64
	// Linker, when set, links tables of prompts over its budget.
	Linker *dbinfo.Linker
	// GoldSQL is the example's gold SQL, for the GoldTables and GoldSchema
	// ablations.
	GoldSQL string
}

// Outcome is everything Solve did for one example.
type Outcome struct {
	ExampleID string `json:"instance_id"`
	Format    string `json:"format,omitempty"`
	Linked    bool   `json:"linked"`
	// GoldRestricted: the gold ablations restricted the schema.
	GoldRestricted bool `json:"gold_restricted,omitempty"`
	// First is the first-round vote; Decision the final one.
	First        Decision       `json:"first_vote"`
	Decision     Decision       `json:"decision"`
	Final        *Candidate     `json:"-"`
	Candidates   []*Candidate   `json:"candidates"`
	Explorations []*Exploration `json:"explorations,omitempty"`
	Cost         cost.Ledger    `json:"cost"`
}

// Solve runs the whole pipeline for one example in this process: linking
// when over budget, format restriction (option), Votes candidates in
// parallel, the vote, and for low confidence one exploration plus
// regeneration per vote (none for an abandoned exploration), then the
// final vote over the exploration round (DecideFinal) and its fallbacks.
// The ablations change it as the paper's Table 3 describes: ExploreAll
// starts with the exploration round, NoVote takes the one candidate,
// NoRandomSelection leaves a final tie unanswered.
func (a *Agent) Solve(ctx context.Context, wh warehouse.Warehouse, in SolveInput) (*Outcome, error) {
	out := &Outcome{ExampleID: in.Example.ID, Cost: cost.Ledger{}}
	info := in.Info
	ex := in.Example
	info, out.GoldRestricted = a.cfg.Restrict(info, in.GoldSQL)
	if in.Linker != nil && in.Linker.NeedsLinking(info, ex.ExternalKnowledge) {
		linked, _, c, err := in.Linker.Link(ctx, info, dbinfo.LinkQuestion{ID: ex.ID, Question: ex.Question,
			ExternalKnowledge: ex.ExternalKnowledge, Seed: Seed(in.RunSeed, ex.ID, 0, 0, "link")})
		out.Cost.Stage("link").Add(c)
		if err != nil {
			return out, err
		}
		info, out.Linked = linked, linked.Linked
	}
	base := CandidateInput{Example: ex, TableInfo: info.Prompt(ex.ExternalKnowledge), TableStruct: info.TableStruct()}
	if a.cfg.FormatRestriction {
		f, c, err := a.Format(ctx, ex, Seed(in.RunSeed, ex.ID, 0, 0, "format"))
		out.Cost.Stage("format").Add(c)
		if err != nil {
			return out, err
		}
		out.Format = f
	}
	base.Format = out.Format

	if a.cfg.ExploreAll {
		// Column exploration only: no first round, no first vote.
		out.First = Decision{Confidence: Low, Method: MethodNone}
	} else {
		first, err := a.round(ctx, wh, base, in.RunSeed, 0, nil)
		out.Candidates = append(out.Candidates, first...)
		addCosts(out.Cost.Stage("generate"), first)
		if err != nil {
			return out, err
		}
		out.First = Vote(first)
		if out.First.Confidence == High && !a.cfg.NoVote {
			out.Decision, out.Final = out.First, out.First.Winner
			return out, nil
		}
	}
	if a.cfg.pool().Explored {
		explorations, second, err := a.exploreRound(ctx, wh, base, in.RunSeed)
		out.Explorations = explorations
		out.Candidates = append(out.Candidates, second...)
		for _, e := range explorations {
			if e != nil {
				out.Cost.Stage("explore").Add(e.Cost)
			}
		}
		addCosts(out.Cost.Stage("regenerate"), second)
		if err != nil {
			return out, err
		}
	}
	var vc cost.Cost
	out.Decision = a.DecideFinal(ctx, out.Candidates, base, Seed(in.RunSeed, ex.ID, 2, 0, "tie"), &vc)
	out.Cost.Stage("vote").Add(vc)
	if a.cfg.NoVote && out.Decision.Winner != nil && out.Decision.Method == MethodLone {
		out.Decision.Method = MethodNoVote
	}
	out.Final = out.Decision.Winner
	return out, nil
}

func addCosts(c *cost.Cost, cands []*Candidate) {
	for _, cand := range cands {
		if cand != nil {
			c.Add(cand.Cost)
		}
	}
}

// round runs Votes candidates in parallel. explorations, when given, feed
// candidate i the transcript of exploration i.
func (a *Agent) round(ctx context.Context, wh warehouse.Warehouse, base CandidateInput, runSeed uint64, round int, explorations []*Exploration) ([]*Candidate, error) {
	cands := make([]*Candidate, a.cfg.Votes)
	errs := make([]error, a.cfg.Votes)
	var wg sync.WaitGroup
	for i := 0; i < a.cfg.Votes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := base
			in.Round, in.Index, in.Seed = round, round*a.cfg.Votes+i, int64(runSeed)
			if explorations != nil && explorations[i] != nil {
				in.Exploration = explorations[i].Transcript
			}
			cands[i], errs[i] = a.Candidate(ctx, wh, in)
		}()
	}
	wg.Wait()
	return cands, errors.Join(errs...)
}

// exploreRound runs one exploration per vote and regenerates each vote's
// candidate from its own findings; an abandoned exploration's vote records
// Exploration.Slot instead.
func (a *Agent) exploreRound(ctx context.Context, wh warehouse.Warehouse, base CandidateInput, runSeed uint64) ([]*Exploration, []*Candidate, error) {
	n := a.cfg.Votes
	explorations := make([]*Exploration, n)
	cands := make([]*Candidate, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := a.Explore(ctx, wh, ExploreInput{Example: base.Example, TableInfo: base.TableInfo, TableStruct: base.TableStruct,
				Index: i, Seed: int64(runSeed)})
			explorations[i] = e
			if err != nil {
				errs[i] = err
				return
			}
			if slot := e.Slot(1, n+i); slot != nil {
				cands[i] = slot
				return
			}
			in := base
			in.Round, in.Index, in.Seed, in.Exploration = 1, n+i, int64(runSeed), e.Transcript
			cands[i], errs[i] = a.Candidate(ctx, wh, in)
		}()
	}
	wg.Wait()
	return explorations, cands, errors.Join(errs...)
}
