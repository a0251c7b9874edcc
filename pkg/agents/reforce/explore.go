package reforce

import (
	"context"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// ExploreConfig bounds column exploration (reference §6).
type ExploreConfig struct {
	// Asks is how many times to ask for at least MinQueries queries.
	Asks       int
	MinQueries int
	// Corrections per failing query, one LLM call each (the reference
	// spent four: a bug sent three redundant re-asks).
	Corrections int
	// Stop after more than MaxSuccesses successes or MaxFailStreak failed
	// executions in a row.
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
	Transcript string    `json:"transcript"`
	Successes  int       `json:"successes"`
	Failures   int       `json:"failures"`
	Stopped    string    `json:"stopped"`
	Cost       cost.Cost `json:"cost"`
}

// Explore asks for simple-to-complex queries over the relevant columns and
// runs them with self-correction: up to Corrections fixes per failing query;
// after a successful fix the model corrects the remaining queries alike.
func (a *Agent) Explore(ctx context.Context, wh warehouse.Warehouse, in ExploreInput) (*Exploration, error) {
	ec := a.cfg.Explore
	ex := &Exploration{Index: in.Index}
	s := &session{a: a, role: llm.RoleExplore, c: &ex.Cost}
	opt := in.Example.Dialect.LexOptions()
	seed := func(step string) int64 { return Seed(uint64(in.Seed), in.Example.ID, 1, in.Index, step) }

	var queue []string
	prompt := ExplorePrompt(in)
	for ask := 0; ask < ec.Asks; ask++ {
		text, err := s.ask(ctx, prompt, seed(fmt.Sprintf("explore-%d", ask)))
		if err != nil {
			if ctx.Err() != nil {
				return ex, ctx.Err()
			}
			ex.Stopped = "llm: " + err.Error()
			return ex, nil
		}
		queue = splitAll(llm.Blocks(text, "sql"), opt)
		if len(queue) >= ec.MinQueries {
			break
		}
		// A short re-ask in the same conversation, not the whole schema
		// again (the reference re-sent everything).
		prompt = ExploreReask(in.Example.Dialect, len(queue))
	}
	lim := warehouse.Limits{MaxRows: 100, MaxBytes: 64 << 10}
	failStreak := 0
	fix := 0
	for len(queue) > 0 {
		if ex.Successes > ec.MaxSuccesses {
			ex.Stopped = "enough successful queries"
			break
		}
		if failStreak >= ec.MaxFailStreak {
			ex.Stopped = fmt.Sprintf("%d failures in a row", failStreak)
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
			failStreak = 0
			continue
		}
		ex.Failures++
		failStreak++
		fixed := false
		for c := 0; c < ec.Corrections && failStreak < ec.MaxFailStreak; c++ {
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
				failStreak++
				continue
			}
			blocks := llm.Blocks(text, "sql")
			if len(blocks) == 0 {
				// Counted as a failure, so a model that never answers
				// cannot loop (the reference could, forever).
				failStreak++
				continue
			}
			sql = longest(blocks)
			res, feedback, err = a.run(ctx, wh, &ex.Cost, sql, lim)
			if err != nil {
				return ex, err
			}
			if feedback == "" && res.RowCount() > 0 {
				fixed = true
				break
			}
			ex.Failures++
			failStreak++
		}
		if !fixed {
			ex.Queries = append(ex.Queries, ExploreQuery{SQL: sql, Error: orFallback(feedback, EmptyResult)})
			continue
		}
		failStreak = 0
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
			if rewritten := splitAll(llm.Blocks(text, "sql"), opt); len(rewritten) >= len(queue)/2 && len(rewritten) > 0 {
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
	return ex, nil
}

func (ex *Exploration) record(q ExploreQuery, ec ExploreConfig) {
	ex.Queries = append(ex.Queries, q)
	ex.Successes++
	entry := "Query:\n" + q.SQL + "\nAnswer:\n" + q.Result + "\n"
	if len(ex.Transcript)+len(entry) < ec.TranscriptChars {
		ex.Transcript += entry
	}
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

func orFallback(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
