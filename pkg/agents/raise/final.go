package raise

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
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

// maxReasks bounds the re-asks of one request whose reply holds no
// readable SQL (D-R18). They are not the paper's refinement retries: a
// reply's form says nothing about its query.
const maxReasks = 2

// reaskSeeds offsets the seeds of re-asks from those of attempts.
const reaskSeeds = 1000

// answer is what a request for SQL gave.
type answer struct {
	sql, model string
	// failed: the call failed after its retries.
	failed *llm.CallError
	// unread: no reply could be read, re-asks included.
	unread *reply.Unreadable
}

// askSQL sends req and reads its reply's SQL with reply.SQL. An unreadable
// reply (prose, a cut query, nothing) is re-asked in the same conversation
// with the Unreadable's Reask, up to maxReasks times (c.FormatReasks); then
// the answer is lost (c.FormatLost). Unreadable text is never executed.
func (s *Steps) askSQL(ctx context.Context, req llm.Request, reseed func(k int) int64, c *cost.Cost) (answer, error) {
	prompt := req.Messages
	for k := 0; ; k++ {
		if k > 0 {
			sd := reseed(k)
			req.Seed = &sd
		}
		resp, err := s.llm.Chat(ctx, req)
		var ce *llm.CallError
		if errors.As(err, &ce) {
			c.Call(ce.Usage, true)
			return answer{failed: ce}, nil
		}
		if err != nil {
			return answer{}, fmt.Errorf("raise %s: %w", req.Role, err)
		}
		c.Call(resp.Usage, false)
		sql, err := reply.SQLWithReasoning(resp.Text, resp.Reasoning, resp.FinishReason)
		if err == nil {
			return answer{sql: sql, model: resp.Model}, nil
		}
		var u *reply.Unreadable
		if !errors.As(err, &u) {
			return answer{}, fmt.Errorf("raise %s reply: %w", req.Role, err)
		}
		if u.Refusal {
			c.Refusals++
		}
		if k == maxReasks {
			c.FormatLost++
			return answer{unread: u, model: resp.Model}, nil
		}
		c.FormatReasks++
		req.Messages = reaskMessages(prompt, resp.Echo(), u.Reask)
	}
}

// reaskMessages is the conversation of a re-ask: the prompt, the reply
// without its reasoning, the re-ask. A reply with nothing visible (cut
// while thinking) is left out, and the re-ask joins the prompt, since
// providers refuse an empty assistant turn or two user turns in a row.
func reaskMessages(prompt []llm.Message, text, reask string) []llm.Message {
	msgs := append([]llm.Message(nil), prompt...)
	if vis := reply.Visible(text); vis != "" {
		return append(msgs, llm.Assistant(vis), llm.User(reask))
	}
	last := &msgs[len(msgs)-1]
	last.Content += "\n\n" + reask
	return msgs
}

// Final writes one model's final SQL from the operations, retrying up to
// Refine times with every earlier attempt's error or empty result (§4
// L286-L290; D-R7: each retry a fresh single-turn prompt). A reply with no
// readable SQL is re-asked outside those retries (D-R18).
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
		req := llm.Request{Role: role, Messages: []llm.Message{llm.User(FinalPrompt(d, question, ek, ops, attempts))}, Seed: &sd}
		ans, err := s.askSQL(ctx, req, func(k int) int64 { return seed(reaskSeeds + try*maxReasks + k) }, into)
		if err != nil {
			return nil, err
		}
		switch {
		case ans.failed != nil && last != nil:
			return last, nil
		case ans.failed != nil:
			return &Candidate{Status: "gave_up", Error: ans.failed.Error(), Attempts: try + 1}, nil
		case ans.unread != nil && last != nil:
			return last, nil
		case ans.unread != nil:
			return &Candidate{Status: "gave_up", Error: "no readable SQL in the replies: " + ans.unread.Problem, Attempts: try + 1, Model: ans.model}, nil
		}
		cand, err := execute(ctx, wh, ans.sql, into)
		if err != nil {
			return nil, err
		}
		cand.Attempts, cand.Model = try+1, ans.model
		if cand.Status == "ok" {
			return cand, nil
		}
		last = cand
		result := noRows
		if cand.Status == "error" {
			result = "Error: " + cand.Error
		}
		attempts = append(attempts, Attempt{SQL: ans.sql, Result: result})
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
// the select list; the rewrite is kept only if it keeps the query's logic
// (CheckColumns, D-R9), then executed. A nil candidate comes with why
// there is none (rejected, unreadable, or the model failed).
func (s *Steps) Columns(ctx context.Context, wh warehouse.Warehouse, d warehouse.Dialect, question, sql string, seed int64, c *cost.Cost) (*Candidate, string, error) {
	req := llm.Request{Role: RoleColumns, Messages: []llm.Message{llm.User(ColumnsPrompt(question, sql))}, Seed: &seed}
	ans, err := s.askSQL(ctx, req, func(k int) int64 { return seed + int64(k) }, c)
	switch {
	case err != nil:
		return nil, "", err
	case ans.failed != nil:
		return nil, "the column post-process failed: " + ans.failed.Error(), nil
	case ans.unread != nil:
		return nil, "the column post-process gave no readable SQL: " + ans.unread.Problem, nil
	}
	if err := CheckColumns(sql, ans.sql, d); err != nil {
		return nil, "the column post-process was rejected: " + err.Error(), nil
	}
	cand, err := execute(ctx, wh, ans.sql, c)
	if err != nil {
		return nil, "", err
	}
	cand.Attempts, cand.Model = 1, ans.model
	return cand, "", nil
}
