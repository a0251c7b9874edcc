package reforce

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Status is how a candidate ended.
type Status string

// Candidate statuses. Only StatusOK candidates take part in the vote.
const (
	StatusOK     Status = "ok"      // the SQL returned rows
	StatusEmpty  Status = "empty"   // it kept returning no rows
	StatusError  Status = "error"   // it kept failing
	StatusGaveUp Status = "gave_up" // the model gave no usable SQL, or the LLM call failed
	// StatusAbandoned is a vote whose column exploration found nothing to
	// regenerate from (Exploration.Abandoned): it has no candidate.
	StatusAbandoned Status = "abandoned"
	// StatusVote is the record of a model vote on the runtime (the vote
	// task's result), not an answer.
	StatusVote Status = "vote"
)

// Example is what the agent needs to know about a question.
type Example struct {
	ID                string
	Question          string
	Dialect           warehouse.Dialect
	ExternalKnowledge string
}

// CandidateInput is one candidate's ("vote's") inputs.
type CandidateInput struct {
	Example Example
	// TableInfo is the full database-information prompt; TableStruct the
	// structure repr used in tips.
	TableInfo, TableStruct string
	// Format is the expected answer format (format restriction), if any.
	Format string
	// Exploration is the column-exploration transcript (round 2).
	Exploration  string
	Round, Index int
	// Seed is this candidate's base seed; every call derives its own.
	Seed int64
}

// Candidate is one candidate answer.
type Candidate struct {
	Round  int    `json:"round"`
	Index  int    `json:"index"`
	SQL    string `json:"sql"`
	Status Status `json:"status"`
	// Result is the full result of SQL (capped only if the configuration
	// asks); CSV is it rendered as Spider 2.0 gold files are.
	Result     *warehouse.Result `json:"-"`
	CSV        string            `json:"-"`
	Rows       int               `json:"rows"`
	Error      string            `json:"error,omitempty"`
	Iterations int               `json:"iterations"`
	// CTERefined is set when CTE-based refinement produced the SQL.
	CTERefined bool      `json:"cte_refined,omitempty"`
	Cost       cost.Cost `json:"cost"`

	frame    *eval.Frame
	frameErr error
}

// setResult records a result and drops the cached frame.
func (c *Candidate) setResult(res *warehouse.Result) {
	c.Result, c.CSV, c.Rows = res, res.CSV(), res.RowCount()
	c.frame, c.frameErr = nil, nil
}

// FileName is the reference's name for the candidate's SQL file.
func (c *Candidate) FileName() string { return fmt.Sprintf("%dresult.sql", c.Index) }

// Frame is the candidate's result read the way the vote reads it.
func (c *Candidate) Frame() (*eval.Frame, error) {
	if c.frame == nil && c.frameErr == nil {
		c.frame, c.frameErr = eval.ReadCSV([]byte(c.CSV))
	}
	return c.frame, c.frameErr
}

// session is one conversation with the model, accounted into c.
type session struct {
	a    *Agent
	role llm.Role
	msgs []llm.Message
	c    *cost.Cost
	// finish is the last reply's finish reason ("length" when cut).
	finish string
}

// ask sends prompt in the conversation and returns the reply text.
func (s *session) ask(ctx context.Context, prompt string, seed int64) (string, error) {
	s.msgs = append(s.msgs, llm.User(prompt))
	req := llm.Request{Role: s.role, Messages: s.msgs, Seed: &seed, Temperature: s.a.cfg.Temperature}
	resp, err := s.a.llm.Chat(ctx, req)
	if errors.Is(err, llm.ErrContextTooLong) && len(s.msgs) > 3 {
		// Histories grow by a full answer per turn; keep the first prompt
		// and the latest exchange rather than failing the candidate.
		trimmed := append([]llm.Message{s.msgs[0]}, s.msgs[len(s.msgs)-3:]...)
		s.msgs = trimmed
		req.Messages = s.msgs
		resp, err = s.a.llm.Chat(ctx, req)
	}
	if err != nil {
		var ce *llm.CallError
		u := llm.Usage{}
		if errors.As(err, &ce) {
			u = ce.Usage
		}
		s.c.Call(u, true)
		s.msgs = s.msgs[:len(s.msgs)-1]
		return "", err
	}
	s.c.Call(resp.Usage, false)
	s.msgs = append(s.msgs, llm.Assistant(resp.Echo()))
	s.finish = resp.FinishReason
	return reply.Readable(resp.Text, resp.Reasoning), nil
}

// run executes one query, accounted into c. A *warehouse.QueryError comes
// back as feedback text for the model; other errors (the warehouse is gone,
// the context ended) are returned.
func (a *Agent) run(ctx context.Context, wh warehouse.Warehouse, c *cost.Cost, sql string, lim warehouse.Limits) (*warehouse.Result, string, error) {
	start := time.Now()
	res, err := wh.Query(ctx, sql, lim)
	var qe *warehouse.QueryError
	switch {
	case err == nil:
		c.Query(time.Since(start), false)
		return res, "", nil
	case errors.As(err, &qe):
		c.Query(time.Since(start), true)
		return nil, qe.Message, nil
	}
	c.Query(time.Since(start), true)
	return nil, "", err
}

// Candidate runs self-refinement for one candidate (reference §5): ask for
// exactly one SQL (re-asking up to Reasks times), execute, feed back the
// engine's error or the empty result, up to MaxIter times; stop early after
// EmptyStop empty results in a row. The candidate is the first SQL whose
// result has rows or, with SelfConsistency, the first answer seen twice.
// The returned error is only for failures of the infrastructure (context,
// warehouse connection); a failed LLM call ends the candidate as gave_up
// with the error recorded.
func (a *Agent) Candidate(ctx context.Context, wh warehouse.Warehouse, in CandidateInput) (*Candidate, error) {
	cand := &Candidate{Round: in.Round, Index: in.Index, Status: StatusGaveUp}
	s := &session{a: a, role: llm.RoleGenerate, c: &cand.Cost}
	prompt := GeneratePrompt(in)
	var seen []*Candidate // successful answers, for self-consistency
	var good *Candidate   // the latest of them
	emptyStreak := 0
	lastSQL := ""
	for iter := 0; iter < a.cfg.MaxIter; iter++ {
		cand.Iterations = iter + 1
		var blocks []string
		for try := 0; try < a.cfg.Reasks; try++ {
			text, err := s.ask(ctx, prompt, agent.Seed(uint64(in.Seed), in.Example.ID, in.Round, in.Index, fmt.Sprintf("gen-%d-%d", iter, try)))
			if err != nil {
				if ctx.Err() != nil {
					return cand, ctx.Err()
				}
				cand.Error = "llm: " + err.Error()
				return cand, nil
			}
			var reask string
			var refusal bool
			blocks, reask, refusal = readSQL(text, s.finish)
			if len(blocks) == 1 {
				break
			}
			// The reference's fence re-ask, saying what was wrong. A reply
			// with several statements is no reason to re-ask: the reader's
			// policy picks the one marked final, else the last.
			cand.Cost.FormatReasks++
			if refusal {
				cand.Cost.Refusals++
			}
			prompt = reask
		}
		if len(blocks) == 0 || strings.TrimSpace(blocks[len(blocks)-1]) == "" {
			cand.Error = "the model gave no SQL"
			cand.Status = StatusGaveUp
			cand.Cost.FormatLost++
			return cand, nil
		}
		// Still several after the re-asks: the last, where a reply that
		// drafts and then finalises puts its answer (the reference took
		// the first).
		sql := blocks[len(blocks)-1]
		lastSQL = sql
		cand.SQL = sql
		res, feedback, err := a.run(ctx, wh, &cand.Cost, sql, a.cfg.ResultLimits)
		if err != nil {
			return cand, fmt.Errorf("candidate %d of %s: %w", in.Index, in.Example.ID, err)
		}
		switch {
		case feedback != "":
			cand.Status, cand.Error = StatusError, feedback
			emptyStreak = 0
		case res.RowCount() == 0:
			cand.Status, cand.Error = StatusEmpty, EmptyResult
			feedback = EmptyResult
			emptyStreak++
		default:
			cand.Status, cand.Error = StatusOK, ""
			cand.setResult(res)
			if !a.cfg.SelfConsistency {
				return cand, nil
			}
			if consistent(cand, seen) {
				return cand, nil
			}
			good = &Candidate{SQL: sql, Result: res, CSV: cand.CSV, Rows: cand.Rows}
			seen = append(seen, good)
			prompt = ReviewPrompt(ReviewInput{Question: in.Example.Question, Format: in.Format, CSV: cand.CSV, SQL: sql,
				Dialect: in.Example.Dialect, TableStruct: in.TableStruct})
			continue
		}
		if emptyStreak >= a.cfg.EmptyStop {
			break
		}
		prompt = RefinePrompt(sql, feedback)
	}
	if good != nil {
		// No answer came twice, or a later iteration broke a working one:
		// keep the latest that worked rather than nothing (the reference
		// dropped the candidate).
		cand.SQL, cand.Status, cand.Error = good.SQL, StatusOK, ""
		cand.setResult(good.Result)
	}
	if cand.Status == StatusOK && cand.CSV != "" {
		return cand, nil
	}
	if (cand.Status == StatusEmpty || cand.Status == StatusError) && a.cfg.CTERefine {
		// v1 §3.2.4 runs it "if refinement fails", whether on errors or
		// on empty results.
		if err := a.cteRefine(ctx, wh, s, in, cand, lastSQL, cand.Error); err != nil {
			return cand, err
		}
	}
	return cand, nil
}

// consistent reports whether c's answer equals one seen before. The
// reference compared only the first column without its first row; here
// whole answers are compared with the vote's equality.
func consistent(c *Candidate, seen []*Candidate) bool {
	f, err := c.Frame()
	if err != nil {
		return false
	}
	for _, s := range seen {
		g, err := s.Frame()
		if err == nil && eval.Agree(f, g) {
			return true
		}
	}
	return false
}

// cteRefine runs each CTE prefix of a query whose refinement failed (empty
// results or errors; feedback is the last one), shows the model where the
// rows disappear or the error starts and lets it rewrite that CTE (v1's
// CTE-based refinement, which the reference code never implemented). A
// query without CTEs is first sent back to be rewritten as CTEs; if the
// rewrite already returns rows it is taken.
func (a *Agent) cteRefine(ctx context.Context, wh warehouse.Warehouse, s *session, in CandidateInput, cand *Candidate, sql, feedback string) error {
	d := in.Example.Dialect
	q, ok := sqltext.SplitCTEs(sql, d.LexOptions())
	if !ok || len(q.CTEs) == 0 {
		rewritten, ok, err := a.cteAsk(ctx, s, in, CTERewritePrompt(sql, feedback), "cte-rewrite")
		if err != nil || !ok {
			return err
		}
		res, fb, err := a.run(ctx, wh, &cand.Cost, rewritten, a.cfg.ResultLimits)
		if err != nil {
			return err
		}
		if fb == "" && res.RowCount() > 0 {
			cand.SQL, cand.Status, cand.Error, cand.CTERefined = rewritten, StatusOK, "", true
			cand.setResult(res)
			return nil
		}
		if q, ok = sqltext.SplitCTEs(rewritten, d.LexOptions()); !ok || len(q.CTEs) == 0 {
			return nil
		}
		sql, feedback = rewritten, fb
		if feedback == "" {
			feedback = EmptyResult
		}
	}
	var b strings.Builder
	for i := range q.CTEs {
		res, fb, err := a.run(ctx, wh, &cand.Cost, ctePrefixQuery(q, i+1, 5, d), warehouse.Limits{MaxRows: 5, MaxBytes: 4096})
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "CTE %d %s: ", i+1, q.CTEs[i].Name)
		switch {
		case fb != "":
			b.WriteString("error: " + fb + "\n")
		case res.RowCount() == 0:
			b.WriteString("no rows\n")
		default:
			b.WriteString(fmt.Sprintf("rows, for example:\n%s", truncate(res.CSV(), 500)))
		}
	}
	fixed, ok, err := a.cteAsk(ctx, s, in, CTEFeedbackPrompt(sql, feedback, b.String()), "cte")
	if err != nil || !ok {
		return err
	}
	res, fb, err := a.run(ctx, wh, &cand.Cost, fixed, a.cfg.ResultLimits)
	if err != nil {
		return err
	}
	if fb == "" && res.RowCount() > 0 {
		cand.SQL, cand.Status, cand.Error, cand.CTERefined = fixed, StatusOK, "", true
		cand.setResult(res)
	}
	return nil
}

// cteAsk asks one CTE-refinement question and returns the first SQL block
// of the reply; a failed LLM call ends the refinement quietly unless the
// context ended.
func (a *Agent) cteAsk(ctx context.Context, s *session, in CandidateInput, prompt, tag string) (string, bool, error) {
	text, err := s.ask(ctx, prompt, agent.Seed(uint64(in.Seed), in.Example.ID, in.Round, in.Index, tag))
	if err != nil {
		if ctx.Err() != nil {
			return "", false, ctx.Err()
		}
		return "", false, nil
	}
	sql, err := reply.SQL(text, s.finish)
	if err != nil {
		s.c.FormatEnded++
		return "", false, nil
	}
	return sql, true, nil
}

// readSQL reads a reply's answer the way real models write it
// (pkg/reply's answer policy: the statement marked final, else the last).
// With none, reask says what was wrong, in the words of the reference's
// fence re-ask, and refusal whether the reply held no statement at all.
func readSQL(text, finish string) (blocks []string, reask string, refusal bool) {
	sql, err := reply.SQL(text, finish)
	var u *reply.Unreadable
	if errors.As(err, &u) {
		return nil, ReaskFence(u.Problem), u.Refusal
	}
	return []string{sql}, "", false
}

// readBlocks reads every complete statement of a reply (an exploration
// correction keeps the longest, as the reference does); a statement a
// reply cut by the token limit ends in is left out.
func readBlocks(text, finish string) []string {
	sts := reply.Find(text)
	var out []string
	for i, st := range sts {
		if st.Cut || finish == reply.FinishLength && i == len(sts)-1 && st.AtEnd {
			continue
		}
		out = append(out, st.SQL)
	}
	return out
}

// ctePrefixQuery runs the first n CTEs of q and selects from the n-th,
// naming it as the dialect resolves it (sqltext's PrefixQuery always writes
// "name", a string literal in BigQuery and a case-sensitive identifier in
// Snowflake that misses an unquoted, upper-cased CTE).
func ctePrefixQuery(q sqltext.WithQuery, n, limit int, d warehouse.Dialect) string {
	parts := make([]string, n)
	for i := 0; i < n; i++ {
		parts[i] = q.CTEs[i].Text
	}
	return q.Prefix + " " + strings.Join(parts, ",\n") + "\nSELECT * FROM " + cteRef(q.CTEs[n-1], d) + " LIMIT " + strconv.Itoa(limit)
}

// cteRef is how a query refers to cte in dialect d: BigQuery in backticks;
// Snowflake exactly as the CTE was declared (bare, which Snowflake
// upper-cases on both sides, or quoted with its case); SQLite in double
// quotes (its identifiers are case-insensitive either way).
func cteRef(cte sqltext.CTE, d warehouse.Dialect) string {
	switch d {
	case warehouse.BigQuery:
		return "`" + strings.ReplaceAll(cte.Name, "`", "\\`") + "`"
	case warehouse.Snowflake:
		// Text starts with the name as declared; its first token has the
		// same length (Tokens only lower-cases bare words).
		if toks := sqltext.Tokens(cte.Text, d.LexOptions()); len(toks) > 0 && len(toks[0].Text) <= len(cte.Text) {
			return cte.Text[:len(toks[0].Text)]
		}
		return cte.Name
	}
	return `"` + strings.ReplaceAll(cte.Name, `"`, `""`) + `"`
}
