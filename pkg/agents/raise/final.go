package raise

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Candidate is one final SQL with its whole result.
type Candidate struct {
	SQL      string `json:"sql"`
	Status   string `json:"status"` // ok, empty, error, gave_up
	Error    string `json:"error,omitempty"`
	CSV      string `json:"-"`
	Rows     int    `json:"rows"`
	Attempts int    `json:"attempts"`
	Model    string `json:"model,omitempty"`
}

const noRows = "The query returned no rows."

// Final writes one model's final SQL from the operations, retrying up to
// Refine times with every earlier attempt's error or empty result (§4
// L286-L290; D-R7: each retry a fresh single-turn prompt).
func (s *Steps) Final(ctx context.Context, wh warehouse.Warehouse, role llm.Role, d warehouse.Dialect, question, ek string, ops []Op,
	seed func(int) int64, c, refine *cost.Cost) (*Candidate, error) {
	var attempts []Attempt
	var last *Candidate
	for try := 0; try <= s.cfg.Refine; try++ {
		into := c
		if try > 0 {
			into = refine
		}
		sd := seed(try)
		resp, err := s.llm.Chat(ctx, llm.Request{Role: role, Messages: []llm.Message{llm.User(FinalPrompt(d, question, ek, ops, attempts))}, Seed: &sd})
		var ce *llm.CallError
		if errors.As(err, &ce) {
			into.Call(ce.Usage, true)
			if last != nil {
				return last, nil
			}
			return &Candidate{Status: "gave_up", Error: ce.Error(), Attempts: try + 1}, nil
		}
		if err != nil {
			return nil, err
		}
		into.Call(resp.Usage, false)
		sql := lastSQL(resp.Text)
		if sql == "" {
			sql = strings.TrimSpace(resp.Text)
		}
		cand, err := execute(ctx, wh, sql, into)
		if err != nil {
			return nil, err
		}
		cand.Attempts, cand.Model = try+1, resp.Model
		if cand.Status == "ok" {
			return cand, nil
		}
		last = cand
		result := noRows
		if cand.Status == "error" {
			result = "Error: " + cand.Error
		}
		attempts = append(attempts, Attempt{SQL: sql, Result: result})
	}
	return last, nil
}

// execute runs a candidate's SQL and keeps its whole result.
func execute(ctx context.Context, wh warehouse.Warehouse, sql string, c *cost.Cost) (*Candidate, error) {
	cand := &Candidate{SQL: sql}
	if sql == "" {
		cand.Status, cand.Error = "error", "the answer holds no SQL"
		return cand, nil
	}
	start := time.Now()
	res, err := wh.Query(ctx, sql, warehouse.Limits{})
	c.Query(time.Since(start), err != nil)
	var qe *warehouse.QueryError
	switch {
	case errors.As(err, &qe):
		cand.Status, cand.Error = "error", qe.Message
	case err != nil:
		return nil, err
	case res.RowCount() == 0:
		cand.Status = "empty"
	default:
		cand.Status, cand.CSV, cand.Rows = "ok", res.CSV(), res.RowCount()
	}
	return cand, nil
}

// Columns is the column post-process (§3.3 L237-L239): the model rewrites
// the select list; the rewrite is kept only if nothing outside it changed
// (D-R9), then executed. ok is false when there is no candidate (rejected,
// or the model failed).
func (s *Steps) Columns(ctx context.Context, wh warehouse.Warehouse, d warehouse.Dialect, question, sql string, seed int64, c *cost.Cost) (*Candidate, string, error) {
	resp, err := s.llm.Chat(ctx, llm.Request{Role: RoleColumns, Messages: []llm.Message{llm.User(ColumnsPrompt(question, sql))}, Seed: &seed})
	var ce *llm.CallError
	if errors.As(err, &ce) {
		c.Call(ce.Usage, true)
		return nil, "the column post-process failed: " + ce.Error(), nil
	}
	if err != nil {
		return nil, "", err
	}
	c.Call(resp.Usage, false)
	rewritten := lastSQL(resp.Text)
	if rewritten == "" {
		return nil, "the column post-process gave no SQL", nil
	}
	if !SameOutsideSelect(sql, rewritten, d) {
		return nil, "the column post-process changed more than the selected columns: rejected", nil
	}
	cand, err := execute(ctx, wh, rewritten, c)
	if err != nil {
		return nil, "", err
	}
	cand.Attempts, cand.Model = 1, resp.Model
	return cand, "", nil
}

// SameOutsideSelect reports whether two queries differ at most in the
// select list of their final query block: the tokens between its top-level
// SELECT and FROM (after any WITH clause, whose SELECTs sit in
// parentheses). Comments, spacing and the case of bare words are ignored.
func SameOutsideSelect(a, b string, d warehouse.Dialect) bool {
	opt := sqltext.Options{BackslashEscapes: d != warehouse.SQLite, DollarStrings: d == warehouse.Snowflake}
	outside := func(q string) []string {
		toks := sqltext.Tokens(strings.TrimRight(strings.TrimSpace(q), ";"), opt)
		sel, from := -1, len(toks)
		for i, t := range toks {
			if t.Depth != 0 || !t.Word {
				continue
			}
			if sel < 0 && t.Text == "select" {
				sel = i
			} else if sel >= 0 && t.Text == "from" {
				from = i
				break
			}
		}
		var out []string
		for i, t := range toks {
			if sel >= 0 && i > sel && i < from {
				continue
			}
			out = append(out, t.Text)
		}
		return out
	}
	x, y := outside(a), outside(b)
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != y[i] {
			return false
		}
	}
	return true
}
