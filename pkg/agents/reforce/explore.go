package reforce

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// ExploreConfig bounds column exploration (reference §6).
type ExploreConfig struct {
	// Asks is how many times to ask for at least MinQueries queries.
	Asks       int
	MinQueries int
	// Corrections per failing query, one LLM call each (the reference
	// spent four: a bug sent three redundant re-asks). Every failing query
	// gets them all, as in the reference (agent.py:63-79).
	Corrections int
	// Stop after more than MaxSuccesses successes, or when a query has
	// failed all its corrections and the last MaxFailStreak attempt
	// records are all failures (of more than MaxFailStreak). The records
	// are the reference's error_rec (agent.py:64-99): each failed execution
	// or correction attempt of a failing query is a failure, a failing
	// query that ends corrected a success, and a query that fails all its
	// corrections one more failure; queries that succeed at once record
	// nothing.
	MaxSuccesses  int
	MaxFailStreak int
	// ResultChars cuts each result shown to the model; TranscriptChars
	// bounds the whole transcript.
	ResultChars     int
	TranscriptChars int
}

// DefaultExploreConfig are the reference's numbers.
func DefaultExploreConfig() ExploreConfig {
	return ExploreConfig{Asks: 3, MinQueries: 3, Corrections: 3, MaxSuccesses: 10, MaxFailStreak: 5,
		ResultChars: 500, TranscriptChars: 100_000}
}

// ExploreInput is one exploration's inputs.
type ExploreInput struct {
	Example                Example
	TableInfo, TableStruct string
	Index                  int
	Seed                   int64
}

// ExploreQuery is one executed exploration query.
type ExploreQuery struct {
	SQL       string `json:"sql"`
	Result    string `json:"result,omitempty"`
	Error     string `json:"error,omitempty"`
	Corrected bool   `json:"corrected,omitempty"`
}

// Exploration is what column exploration learnt.
type Exploration struct {
	Index   int            `json:"index"`
	Queries []ExploreQuery `json:"queries"`
	// Transcript is "Query:/Answer:" pairs of the successful queries, fed
	// to regeneration.
	Transcript string `json:"transcript"`
	Successes  int    `json:"successes"`
	Failures   int    `json:"failures"`
	Stopped    string `json:"stopped"`
	// Abandoned is set when the exploration gave regeneration nothing to
	// work from: fewer than MinQueries queries after every ask, or no
	// query that succeeded. Its vote then has no candidate, as in the
	// reference (agent.py:139-159, run.py:61-64).
	Abandoned bool      `json:"abandoned,omitempty"`
	Cost      cost.Cost `json:"cost"`
	// llmFailed is set when an LLM call of the asks failed.
	llmFailed bool
}

// Slot is what the exploration's vote records instead of a regenerated
// candidate, or nil when the vote goes on to regeneration: an abandoned
// exploration is StatusAbandoned, one whose LLM calls failed StatusGaveUp.
// Neither takes part in the vote.
func (e *Exploration) Slot(round, index int) *Candidate {
	switch {
	case e.llmFailed:
		// The LLM's error as a candidate's own ("llm: …"), so that the
		// example's most common error reads as before.
		return &Candidate{Round: round, Index: index, Status: StatusGaveUp, Error: e.Stopped}
	case e.Abandoned:
		return &Candidate{Round: round, Index: index, Status: StatusAbandoned, Error: "exploration abandoned: " + e.Stopped}
	}
	return nil
}

// Explore asks for simple-to-complex queries over the relevant columns and
// runs them with self-correction: up to Corrections fixes per failing query;
// after a successful fix the model corrects the remaining queries alike.
// An exploration with fewer than MinQueries queries after Asks asks, or
// without one successful query, is abandoned (Exploration.Abandoned).
func (a *Agent) Explore(ctx context.Context, wh warehouse.Warehouse, in ExploreInput) (*Exploration, error) {
	ec := a.cfg.Explore
	ex := &Exploration{Index: in.Index}
	s := &session{a: a, role: llm.RoleExplore, c: &ex.Cost}
	opt := in.Example.Dialect.LexOptions()
	seed := func(step string) int64 { return agent.Seed(uint64(in.Seed), in.Example.ID, 1, in.Index, step) }

	var queue []string
	prompt := ExplorePrompt(in)
	for ask := 0; ask < ec.Asks; ask++ {
		text, err := s.ask(ctx, prompt, seed(fmt.Sprintf("explore-%d", ask)))
		if err != nil {
			if ctx.Err() != nil {
				return ex, ctx.Err()
			}
			ex.Stopped, ex.llmFailed = "llm: "+err.Error(), true
			return ex, nil
		}
		queue = splitAll(readQueries(text), opt)
		if len(queue) >= ec.MinQueries {
			break
		}
		// A short re-ask in the same conversation, not the whole schema
		// again (the reference re-sent everything).
		prompt = ExploreReask(in.Example.Dialect, len(queue))
	}
	if len(queue) < ec.MinQueries {
		// The reference gives up on the vote rather than run a short list
		// (agent.py:146-149,167).
		ex.Stopped = fmt.Sprintf("%d queries after %d asks, fewer than %d", len(queue), ec.Asks, ec.MinQueries)
		ex.Abandoned = true
		return ex, nil
	}
	lim := warehouse.Limits{MaxRows: 100, MaxBytes: 64 << 10}
	var rec []bool // the reference's error_rec: false a failure, true a corrected success
	fix := 0
	for len(queue) > 0 {
		if ex.Successes > ec.MaxSuccesses {
			ex.Stopped = "enough successful queries"
			break
		}
		orig := queue[0]
		queue = queue[1:]
		sql := orig
		res, feedback, err := a.run(ctx, wh, &ex.Cost, sql, lim)
		if err != nil {
			return ex, err
		}
		if feedback == "" && res.RowCount() > 0 {
			ex.record(ExploreQuery{SQL: sql, Result: truncate(res.CSV(), ec.ResultChars)}, ec)
			continue
		}
		ex.Failures++
		rec = append(rec, false)
		fixed := false
		for c := 0; c < ec.Corrections; c++ {
			empty := feedback == ""
			if empty {
				feedback = EmptyResult
			}
			fix++
			text, err := s.ask(ctx, CorrectPrompt(sql, feedback, empty), seed(fmt.Sprintf("correct-%d", fix)))
			if err != nil {
				if ctx.Err() != nil {
					return ex, ctx.Err()
				}
				rec = append(rec, false)
				continue
			}
			blocks := readBlocks(text, s.finish)
			if len(blocks) == 0 {
				s.c.FormatReasks++
				// Counted as a failed attempt, so a model that never
				// answers cannot loop (the reference could, forever).
				rec = append(rec, false)
				continue
			}
			sql = longestAnswer(blocks, text, s.finish)
			res, feedback, err = a.run(ctx, wh, &ex.Cost, sql, lim)
			if err != nil {
				return ex, err
			}
			if feedback == "" && res.RowCount() > 0 {
				fixed = true
				break
			}
			ex.Failures++
			rec = append(rec, false)
		}
		if !fixed {
			ex.Queries = append(ex.Queries, ExploreQuery{SQL: sql, Error: orFallback(feedback, EmptyResult)})
			rec = append(rec, false)
			if failedLast(rec, ec.MaxFailStreak) {
				ex.Stopped = fmt.Sprintf("the last %d attempts failed", ec.MaxFailStreak)
				break
			}
			continue
		}
		rec = append(rec, true)
		ex.record(ExploreQuery{SQL: sql, Result: truncate(res.CSV(), ec.ResultChars), Corrected: true}, ec)
		if len(queue) > 0 {
			fix++
			text, err := s.ask(ctx, FixOthersPrompt(orig, sql, queue), seed(fmt.Sprintf("fix-others-%d", fix)))
			if err != nil {
				if ctx.Err() != nil {
					return ex, ctx.Err()
				}
				continue
			}
			if rewritten := splitAll(readQueries(text), opt); len(rewritten) >= len(queue)/2 && len(rewritten) > 0 {
				if len(rewritten) > len(queue) {
					rewritten = rewritten[:len(queue)]
				}
				queue = rewritten
			}
		}
	}
	if ex.Stopped == "" {
		ex.Stopped = "all queries run"
	}
	if ex.Successes == 0 {
		// Nothing to regenerate from: the reference abandons the vote
		// (agent.py:156-159).
		ex.Abandoned = true
		ex.Stopped = "no query succeeded (" + ex.Stopped + ")"
	}
	return ex, nil
}

// failedLast is the reference's stop rule: more than n records and the
// last n all failures (agent.py:97-99).
func failedLast(rec []bool, n int) bool {
	if n <= 0 || len(rec) <= n {
		return false
	}
	for _, ok := range rec[len(rec)-n:] {
		if ok {
			return false
		}
	}
	return true
}

func (ex *Exploration) record(q ExploreQuery, ec ExploreConfig) {
	ex.Queries = append(ex.Queries, q)
	ex.Successes++
	entry := "Query:\n" + q.SQL + "\nAnswer:\n" + q.Result + "\n"
	if len(ex.Transcript)+len(entry) < ec.TranscriptChars {
		ex.Transcript += entry
	}
}

// readQueries reads a list of queries: every complete SQL block in any
// fence spelling (a cut reply keeps the blocks before the cut), else
// queries written without fences.
func readQueries(text string) []string {
	if blocks := reply.SQLBlocks(text); len(blocks) > 0 {
		return blocks
	}
	if q := reply.PlainSQL(reply.Visible(text)); q != "" {
		return []string{q}
	}
	return nil
}

func splitAll(blocks []string, opt sqltext.Options) []string {
	var out []string
	for _, b := range blocks {
		out = append(out, sqltext.Split(b, opt)...)
	}
	return out
}

func longest(xs []string) string {
	best := ""
	for _, x := range xs {
		if len(strings.TrimSpace(x)) > len(best) {
			best = strings.TrimSpace(x)
		}
	}
	return best
}

// longestAnswer is the correction's query: the longest block, as the
// reference keeps (max by length), except that among blocks of that
// length the reply's own answer (reply.SQL: the one its prose marks
// final, else the last) wins over a draft; the reference keeps the first.
func longestAnswer(blocks []string, text, finish string) string {
	best := longest(blocks)
	if answer, err := reply.SQL(text, finish); err == nil {
		if a := strings.TrimSpace(answer); a != best && len(a) == len(best) && slices.Contains(blocks, answer) {
			return a
		}
	}
	return best
}

func orFallback(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
