// Package pexa is PExA (Parekh et al., ACL 2026): a Planner writes small
// self-contained probes, a Test Case Generator per probe writes several
// SQLs and executes them in parallel, a Proposer writes the final SQL from
// that evidence alone with an executor and a semantic verifier, and the
// answer is a majority over four independent passes. The paper publishes
// no code; docs/agents/pexa.md records every decision taken where it is
// silent, with the line it rests on.
package pexa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config holds Table 5's parameters and the ablation switches (C.4).
type Config struct {
	// Passes are independent runs voted on (§4.1 L138: four).
	Passes int
	// Step limits count one step per LLM turn and one per tools execution,
	// as LangGraph's recursion limit does (D-P3).
	MaxPlannerSteps, MaxTestcaseSteps, MaxProposerSteps int
	// MaxProbesPerPlan and MaxSQLsPerTestCase cap the branching (Table 4;
	// 0 = no cap), by truncation (D-P15).
	MaxProbesPerPlan, MaxSQLsPerTestCase int
	// NoVerifier removes the semantic verifier tool (Table 2).
	NoVerifier bool
	// NoProposer removes the Proposer: the Planner writes, checks and
	// submits the final SQL itself (Table 2 "w/o proposer", C.4 L419;
	// D-P21).
	NoProposer bool
	// SequentialPlan makes the Planner plan one probe per turn, each run
	// and read before the next is planned (Table 2 "w/o plan-time
	// parallelization", C.4 L413; D-P22).
	SequentialPlan bool
	// Temperature of the planner, generator and proposer; VerifierTemp of
	// the verifier (Table 5; not sent to reasoning models, D-P16).
	Temperature, VerifierTemp float64
}

// DefaultConfig is the paper's setting.
func DefaultConfig() Config {
	return Config{Passes: 4, MaxPlannerSteps: 20, MaxTestcaseSteps: 15, MaxProposerSteps: 20, Temperature: 0.3, VerifierTemp: 1.0}
}

// Steps runs PExA's components; the runtime seam (seam.go) chains them
// into tasks.
type Steps struct {
	cfg Config
	llm llm.Client
}

// Roles of PExA's calls; each can have its own model (Table 3, Table 9).
const (
	RolePlan     llm.Role = "plan"
	RoleTestcase llm.Role = "testcase"
	RolePropose  llm.Role = "propose"
	RoleVerify   llm.Role = "verify"
)

// Record is one executed SQL of a probe, as the Proposer sees it.
type Record struct {
	Probe       string `json:"probe"`
	Description string `json:"description,omitempty"`
	SQL         string `json:"sql"`
	Exploration bool   `json:"exploration,omitempty"`
	// Number is the query's number in its execute_sql call, as the
	// feedback numbers it; call counts the message's calls (not stored).
	Number int `json:"-"`
	call   int
	// Promising is a most_promising mark the generator wrote unasked: it
	// ranks the fallback Final (D-P24).
	Promising bool   `json:"most_promising,omitempty"`
	Feedback  string `json:"feedback"`
	OK        bool   `json:"ok,omitempty"`
	Class     string `json:"class"`
}

// Probe statuses, as the Planner reads them (D-P18).
const (
	ProbeFinal     = "final SQL found"
	ProbeAllFailed = "all SQL failed"
	ProbeNEI       = "not enough information"
	ProbeLimit     = "stopped (iteration limit)"
)

// ProbeOutcome is what one Test Case Generator found.
type ProbeOutcome struct {
	Probe   string   `json:"probe"`
	Status  string   `json:"status"`
	Detail  string   `json:"detail,omitempty"`
	Records []Record `json:"records,omitempty"`
	// Chosen says the generator chose the Final record after seeing the
	// results (choose_final); a Final without it is the fallback (D-P24).
	Chosen bool `json:"chosen,omitempty"`
	// Calls and Queries count the probe's LLM calls and SQL executions.
	Calls   int `json:"calls"`
	Queries int `json:"queries"`
}

// final is the probe's Final record, if any.
func (o *ProbeOutcome) final() *Record {
	for i := range o.Records {
		if o.Records[i].Class == ClassFinal {
			return &o.Records[i]
		}
	}
	return nil
}

// chat makes one call and accounts it into c. A failed call (after the
// client's retries) is returned as *llm.CallError for the caller to end
// its loop with; other errors are the infrastructure's.
func (s *Steps) chat(ctx context.Context, c *cost.Cost, req llm.Request) (*llm.Response, error) {
	resp, err := s.llm.Chat(ctx, req)
	var ce *llm.CallError
	switch {
	case err == nil:
		c.Call(resp.Usage, false)
	case errors.As(err, &ce):
		c.Call(ce.Usage, true)
	}
	return resp, err
}

func temp(t float64) *float64 { return &t }

// mustUseTool is said when a reply that had to call a tool did not.
const mustUseTool = "In every response, you must use one of the tools."

// Probe runs one Test Case Generator (§1.5): the model writes SQLs and
// they run in parallel; a batch with a successful answering query is
// followed by the generator's choice of its Final among the successes,
// made seeing their results (D-P24), or by its revision; an
// exploration-only or all-failed batch goes back to the model with the
// feedback (D-P4). Every reply answered (tool results, the choice
// question or a re-ask) is a step besides the reply's own (D-P3).
func (s *Steps) Probe(ctx context.Context, wh warehouse.Warehouse, in TestcaseInput, seed func(step int) int64, c *cost.Cost) (*ProbeOutcome, error) {
	out := &ProbeOutcome{Probe: in.Probe}
	msgs := []llm.Message{llm.User(TestcasePrompt(in))}
	var records []Record
	// pending is the last batch while its successes await the choice.
	var pending []Record
	unread := false // the last reply could not be read
	for steps := 0; ; {
		if steps >= s.cfg.MaxTestcaseSteps {
			if pending != nil {
				// No turn left to choose in: the fallback stands.
				return ended(out, records, pending, fallbackFinal(pending)), nil
			}
			out.Status = ProbeLimit
			if unread {
				c.FormatEnded++
			}
			break
		}
		sd := seed(steps)
		tools := testcaseTools(s.cfg.MaxSQLsPerTestCase)
		if pending != nil {
			msgs = append(msgs, llm.User(ChooseFinalPrompt(successNumbers(pending))))
			tools = append(tools, chooseFinalTool())
		}
		resp, err := s.chat(ctx, c, llm.Request{Role: RoleTestcase, Messages: msgs, Tools: tools,
			ToolChoice: llm.ToolChoiceRequired, Temperature: temp(s.cfg.Temperature), Seed: &sd})
		steps++
		out.Calls++
		var ce *llm.CallError
		if errors.As(err, &ce) {
			if pending != nil {
				return ended(out, records, pending, fallbackFinal(pending)), nil
			}
			out.Status, out.Detail = ProbeLimit, "the LLM call failed: "+ce.Error()
			break
		}
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, resp.Message())
		if pending != nil {
			if n, answered := choice(resp); answered {
				final := -1
				for i, r := range pending {
					if r.OK && !r.Exploration && r.Number == n {
						final = i
					}
				}
				if final < 0 {
					// A failed query named, or no number: counted, so
					// it shows, and the fallback stands.
					c.FormatReasks++
					return ended(out, records, pending, fallbackFinal(pending)), nil
				}
				out.Chosen = true
				return ended(out, records, pending, final), nil
			}
			// Not choosing is revising: the batch becomes evidence.
			records, pending = append(records, pending...), nil
		}
		steps++ // the tools execution, or the re-ask
		if len(resp.ToolCalls) == 0 {
			msgs = append(msgs, llm.User(mustUseTool))
			c.FormatReasks++
			unread = true
			continue
		}
		var batch []Record
		unreadCalls, callIndex := 0, 0
		for _, call := range resp.ToolCalls {
			switch toolName(call.Name) {
			case ToolNotEnoughInfo:
				// The call itself is the signal; an explanation that
				// cannot be read does not undo it.
				detail := "(the explanation could not be read)"
				if f, err := reply.Args(call.Arguments); err == nil {
					if e, ok := f.String("explanation", "reason"); ok {
						detail = e
					}
				}
				out.Status, out.Detail = ProbeNEI, detail
				out.Records = classify(records, nil, -1)
				return out, nil
			case ToolExecuteSQL:
				rs, text, readable, err := s.executeBatch(ctx, wh, c, in.Probe, call.Arguments)
				if err != nil {
					return nil, err
				}
				if !readable {
					c.FormatReasks++
					unreadCalls++
				}
				out.Queries += len(rs)
				for i := range rs {
					rs[i].call = callIndex
				}
				callIndex++
				batch = append(batch, rs...)
				msgs = append(msgs, llm.ToolResult(call.ID, text))
			default:
				msgs = append(msgs, llm.ToolResult(call.ID, fmt.Sprintf("Unknown tool %q: use execute_sql or not_enough_information.", call.Name)))
			}
		}
		unread = unreadCalls == len(resp.ToolCalls)
		switch ok := successes(batch); {
		case len(ok) == 0:
			records = append(records, batch...)
		case batch[ok[0]].call != batch[ok[len(ok)-1]].call:
			// Several execute_sql calls number their queries alike, so
			// no number names one: the fallback stands.
			return ended(out, records, batch, fallbackFinal(batch)), nil
		default:
			pending = batch
		}
	}
	out.Records = classify(records, nil, -1)
	if out.Status == ProbeLimit && out.Detail == "" && len(out.Records) > 0 {
		out.Detail = "no answering query succeeded"
	}
	return out, nil
}

// ended closes a probe whose terminating batch has a success, final
// being the Final's index in it.
func ended(out *ProbeOutcome, earlier, terminating []Record, final int) *ProbeOutcome {
	out.Status = ProbeFinal
	out.Records = classify(earlier, terminating, final)
	return out
}

// executeBatch runs one execute_sql call: its readable queries at once,
// capped to MaxSQLsPerTestCase, and the numbered feedback the model reads,
// numbered as the model listed them; a query that cannot be read is not
// run and its line says why. readable is false when any part of the
// arguments could not be read (a re-ask, counted by the caller).
func (s *Steps) executeBatch(ctx context.Context, wh warehouse.Warehouse, c *cost.Cost, probe, args string) (recs []Record, text string, readable bool, err error) {
	qs, err := readQueries(args, s.cfg.MaxSQLsPerTestCase)
	if err != nil {
		return nil, fmt.Sprintf("The execute_sql arguments %v: %s.", err, errQueriesForm), false, nil
	}
	var sqls []string
	var run []int // indices in qs of the queries run
	readable = true
	for i, q := range qs {
		if q.Problem != "" {
			readable = false
			continue
		}
		sqls = append(sqls, q.SQL)
		run = append(run, i)
	}
	execs, err := executeAll(ctx, wh, c, sqls, s.cfg.MaxSQLsPerTestCase == 1)
	if err != nil {
		return nil, "", false, err
	}
	feedback := make([]string, len(qs))
	for i, q := range qs {
		feedback[i] = "Not run: " + q.Problem + "."
	}
	for j, e := range execs {
		q := qs[run[j]]
		feedback[run[j]] = e.Feedback
		recs = append(recs, Record{Probe: probe, Description: q.Description, SQL: q.SQL, Exploration: q.Exploration,
			Promising: q.Promising, Feedback: e.Feedback, OK: e.OK, Number: run[j] + 1})
	}
	var b strings.Builder
	for i, q := range qs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "Query %d (%s): %s", i+1, q.Description, feedback[i])
	}
	return recs, b.String(), readable, nil
}

// classify puts each record in one of the Proposer's clusters (D-P5):
// exploratory by its flag; the terminating batch's record at index final
// is Final (the generator's choice, D-P24, or the fallback); other
// successes Successful; answering queries that failed or returned nothing
// Failure.
func classify(earlier, terminating []Record, final int) []Record {
	all := append(append([]Record(nil), earlier...), terminating...)
	if final >= 0 {
		final += len(earlier)
	}
	out := make([]Record, 0, len(all))
	for i, r := range all {
		switch {
		case r.Exploration:
			r.Class = ClassExploratory
		case !r.OK:
			r.Class = ClassFailure
		case i == final:
			r.Class = ClassFinal
		default:
			r.Class = ClassSuccessful
		}
		out = append(out, r)
	}
	return out
}

// successes are the positions in batch of its successful answering
// queries.
func successes(batch []Record) []int {
	var out []int
	for i, r := range batch {
		if r.OK && !r.Exploration {
			out = append(out, i)
		}
	}
	return out
}

// successNumbers are the batch numbers of its successful answering
// queries, as the choice question names them.
func successNumbers(batch []Record) []int {
	var out []int
	for _, i := range successes(batch) {
		out = append(out, batch[i].Number)
	}
	return out
}

// fallbackFinal is the Final when the generator did not choose (D-P24):
// the first success it marked most_promising unasked, else the first
// success, in listed order; -1 when none succeeded.
func fallbackFinal(batch []Record) int {
	ok := successes(batch)
	for _, i := range ok {
		if batch[i].Promising {
			return i
		}
	}
	if len(ok) == 0 {
		return -1
	}
	return ok[0]
}

// Proposal is the Proposer's answer.
type Proposal struct {
	SQL      string `json:"sql"`
	Feedback string `json:"feedback"`
	OK       bool   `json:"ok"`
	// Verdict is the last verifier verdict on SQL ("" when not run).
	Verdict string `json:"verdict,omitempty"`
	// CSV is the whole result, the pass's candidate.
	CSV  string `json:"csv,omitempty"`
	Rows int    `json:"rows,omitempty"`
	// Stop says why the Proposer ended without a final answer of its own
	// (proposer_recursion, an LLM failure).
	Stop string `json:"stop,omitempty"`
}

// Render is the propose_final_sql tool result (D-P18).
func (p *Proposal) Render() string {
	v := p.Verdict
	if v == "" {
		v = "not run"
	}
	return fmt.Sprintf("Proposed SQL:\n```sql\n%s\n```\nExecution: %s\nSemantic verification: %s", p.SQL, p.Feedback, v)
}

// Propose runs the Proposer (§1.6): an agent with the executor and the
// verifier as tools; its final SQL must have executed with Success before
// it is returned (D-P6). The final SQL is read with reply.SQL; a reply
// that cannot be read (no query, a cut one) gets the reader's re-ask and is
// never executed. Every reply answered (tool results, the guard's run and
// feedback, a re-ask) is a step besides the reply's own (D-P3).
func (s *Steps) Propose(ctx context.Context, wh warehouse.Warehouse, question string, dialect warehouse.Dialect, evidence []Record,
	seed func(step int) int64, c, verify *cost.Cost) (*Proposal, error) {
	return s.ResumePropose(ctx, wh, question, dialect, evidence, seed, c, verify, nil, nil)
}

// ProposeProgress is the Proposer between two of its steps: what a
// checkpoint keeps and a redelivered propose task continues from.
type ProposeProgress struct {
	Messages []llm.Message       `json:"messages"`
	Steps    int                 `json:"steps"`
	Runs     map[string]Proposal `json:"runs,omitempty"`
	Verdicts map[string]string   `json:"verdicts,omitempty"`
	Best     *Proposal           `json:"best,omitempty"`
	Last     *Proposal           `json:"last,omitempty"`
	// BestIsLast: the two are one proposal.
	BestIsLast bool `json:"best_is_last,omitempty"`
	Unread     int  `json:"unread,omitempty"`
	LastUnread bool `json:"last_unread,omitempty"`
}

// ResumePropose is Propose continued from a checkpoint: from, when not
// nil, is the progress a previous delivery saved; save, when not nil, is
// called after each step with the progress so far. Seeds are the step's,
// so a resumed Proposer makes the calls an uninterrupted one makes; c and
// verify receive this delivery's costs only.
func (s *Steps) ResumePropose(ctx context.Context, wh warehouse.Warehouse, question string, dialect warehouse.Dialect, evidence []Record,
	seed func(step int) int64, c, verify *cost.Cost, from *ProposeProgress, save func(context.Context, *ProposeProgress) error) (*Proposal, error) {
	msgs := []llm.Message{llm.User(ProposerPrompt(question, dialect, evidence))}
	runs := map[string]execution{}
	verdicts := map[string]string{}
	var best, last *Proposal
	var mu sync.Mutex
	unread, lastUnread := 0, false
	steps := 0
	if from != nil {
		msgs, steps, unread, lastUnread, best, last = from.Messages, from.Steps, from.Unread, from.LastUnread, from.Best, from.Last
		if from.BestIsLast {
			best = last
		}
		for sql, p := range from.Runs {
			runs[reply.Key(sql)] = execution{SQL: p.SQL, Feedback: p.Feedback, OK: p.OK, CSV: p.CSV, Rows: p.Rows}
		}
		for sql, v := range from.Verdicts {
			verdicts[reply.Key(sql)] = v
		}
	}
	resumedAt := steps
	checkpoint := func() error {
		if save == nil || steps == resumedAt {
			return nil
		}
		pr := &ProposeProgress{Messages: msgs, Steps: steps, Runs: map[string]Proposal{}, Verdicts: verdicts, Best: best, Last: last,
			BestIsLast: best != nil && best == last, Unread: unread, LastUnread: lastUnread}
		for sql, e := range runs {
			pr.Runs[sql] = Proposal{SQL: e.SQL, Feedback: e.Feedback, OK: e.OK, CSV: e.CSV, Rows: e.Rows}
		}
		return save(ctx, pr)
	}
	run := func(sql string) (execution, error) {
		if e, ok := runs[reply.Key(sql)]; ok {
			return e, nil
		}
		e, err := execute(ctx, wh, c, &mu, sql, warehouse.Limits{})
		if err == nil {
			runs[reply.Key(sql)] = e
		}
		return e, err
	}
	answer := func(sql string, e execution) *Proposal {
		return &Proposal{SQL: sql, Feedback: e.Feedback, OK: e.OK, CSV: e.CSV, Rows: e.Rows, Verdict: verdicts[reply.Key(sql)]}
	}
	ending := func(why string) *Proposal {
		p := best
		if p == nil {
			p = last
		}
		if p == nil {
			return &Proposal{Stop: why, Feedback: "no SQL was proposed"}
		}
		p.Stop, p.Verdict = why, verdicts[reply.Key(p.SQL)]
		return p
	}
	for {
		// After each step (a reply and what answered it), a checkpoint.
		if err := checkpoint(); err != nil {
			return nil, err
		}
		if steps >= s.cfg.MaxProposerSteps {
			p := ending("proposer_recursion")
			if lastUnread {
				c.FormatEnded++
			}
			if p.SQL == "" && unread > 0 {
				c.FormatLost++ // no proposal because no reply could be read
			}
			return p, nil
		}
		sd := seed(steps)
		resp, err := s.chat(ctx, c, llm.Request{Role: RolePropose, Messages: msgs, Tools: proposerTools(!s.cfg.NoVerifier),
			ToolChoice: llm.ToolChoiceAuto, Temperature: temp(s.cfg.Temperature), Seed: &sd})
		steps++
		var ce *llm.CallError
		if errors.As(err, &ce) {
			return ending("the LLM call failed: " + ce.Error()), nil
		}
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, resp.Message())
		if len(resp.ToolCalls) > 0 {
			bad := 0
			for _, call := range resp.ToolCalls {
				name := toolName(call.Name)
				if name != ToolExecuteSQL && (name != ToolSemanticVerifier || s.cfg.NoVerifier) {
					msgs = append(msgs, llm.ToolResult(call.ID, fmt.Sprintf("Unknown tool %q: use %s.", call.Name, toolNames(proposerTools(!s.cfg.NoVerifier)))))
					continue
				}
				sql, err := sqlArg(call.Arguments)
				if err != nil {
					msgs = append(msgs, llm.ToolResult(call.ID, sqlArgsResult(err)))
					c.FormatReasks++
					bad++
					continue
				}
				e, err := run(sql)
				if err != nil {
					return nil, err
				}
				last = answer(sql, e)
				if e.OK {
					best = last
				}
				if name == ToolExecuteSQL {
					msgs = append(msgs, llm.ToolResult(call.ID, e.Feedback))
					continue
				}
				v, err := s.Verify(ctx, question, sql, strings.TrimPrefix(e.Feedback, "Success: "), seed(1000+steps), verify)
				if err != nil {
					return nil, err
				}
				verdicts[reply.Key(sql)] = v
				last.Verdict = v
				msgs = append(msgs, llm.ToolResult(call.ID, v))
			}
			if bad > 0 {
				unread++
			}
			lastUnread = bad == len(resp.ToolCalls)
			steps++ // the tools execution
			continue
		}
		steps++ // the re-ask, or the guard's run and feedback
		sql, err := reply.SQLWithReasoning(resp.Text, resp.Reasoning, resp.FinishReason)
		var u *reply.Unreadable
		if errors.As(err, &u) {
			msgs = append(msgs, llm.User(u.Reask))
			c.FormatReasks++
			if u.Refusal {
				c.Refusals++
			}
			unread, lastUnread = unread+1, true
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pexa: proposer reply: %w", err)
		}
		lastUnread = false
		e, err := run(sql)
		if err != nil {
			return nil, err
		}
		last = answer(sql, e)
		if !e.OK {
			// The guard: a final SQL must execute with rows (D-P6).
			msgs = append(msgs, llm.User(e.Feedback))
			continue
		}
		return last, nil
	}
}

// Verdict strings (D-P7). Only VerdictPassed verifies a query: a verdict
// that could not be read, or a verifier that could not be reached, says so
// and is never a pass.
const (
	VerdictPassed = "Semantic check passed: "
	VerdictError  = "Semantic Error: "
	VerdictUnread = "Semantic check could not be read: "
	VerdictNotRun = "Semantic check not run: "
	// notVerified ends the two verdicts that are not a check.
	notVerified = " The query is not verified."
)

// verifyAttempts is how many replies the verifier gets to give a
// readable verdict: the first and one re-ask saying what was wrong (D-P7).
const verifyAttempts = 2

// Verify runs the Semantic Verifier (Fig. 6): back-translate and compare.
// The verdict is read with reply.JSON and Fields.Bool ("false", False, 0
// and trailing commas included); an unreadable one is re-asked with what
// was wrong, and after its attempts is reported as not verified and
// counted in VerdictsUnread. A failed call is "not run" (D-P7).
func (s *Steps) Verify(ctx context.Context, question, sql, result string, seed int64, c *cost.Cost) (string, error) {
	msgs := []llm.Message{llm.User(VerifierPrompt(question, sql, result))}
	var problem error
	for attempt := range verifyAttempts {
		sd := seed + int64(attempt)
		resp, err := s.chat(ctx, c, llm.Request{Role: RoleVerify, Messages: msgs, Temperature: temp(s.cfg.VerifierTemp), Seed: &sd})
		var ce *llm.CallError
		if errors.As(err, &ce) {
			return VerdictNotRun + "the verifier could not be reached (" + ce.Error() + ")." + notVerified, nil
		}
		if err != nil {
			return "", err
		}
		v, err := readVerdict(reply.Readable(resp.Text, resp.Reasoning), resp.FinishReason)
		if err == nil {
			return v, nil
		}
		problem = err
		if attempt+1 < verifyAttempts {
			msgs = append(msgs, resp.Message(), llm.User("Your verdict could not be read: "+err.Error()+
				`. Answer with one JSON object in a `+"```json"+` block with the fields "correct" (true or false), "explanation" and "back_translated_query".`))
			c.FormatReasks++
		}
	}
	c.VerdictsUnread++
	return VerdictUnread + problem.Error() + "." + notVerified, nil
}

// readVerdict reads a verifier reply into its verdict string.
func readVerdict(text, finish string) (string, error) {
	f, err := reply.JSON(text)
	if err != nil {
		var u *reply.Unreadable
		switch {
		case finish == reply.FinishLength:
			return "", errors.New("the reply was cut off before its JSON verdict ended")
		case errors.As(err, &u):
			return "", errors.New(u.Problem)
		}
		return "", err
	}
	ok, present, err := f.Bool("correct", "is_correct")
	switch {
	case err != nil:
		return "", fmt.Errorf("the verdict's %w", err)
	case !present:
		return "", errors.New(`the verdict has no "correct" field`)
	}
	expl, _ := f.String("explanation")
	if ok {
		return VerdictPassed + expl, nil
	}
	back, _ := f.String("back_translated_query", "back_translation", "back_translated_question")
	return VerdictError + expl + " (back-translation: " + back + ")", nil
}

// ToolChooseFinal is the Test Case Generator's choice of its Final query
// once it has seen its batch's results (D-P24).
const ToolChooseFinal = "choose_final"

func chooseFinalTool() llm.Tool {
	return llm.Tool{Name: ToolChooseFinal,
		Description: "Choose, from the queries of your last batch that executed with Success, the one whose result answers the question: it becomes the probe's final SQL.",
		Parameters:  json.RawMessage(`{"type":"object","required":["query"],"properties":{"query":{"type":"integer","description":"the query's number in the batch (1 = the first)"}}}`)}
}

// ChooseFinalPrompt follows a batch with successful answering queries,
// numbered as in the batch: the generator checks their results against
// the question ("executes successfully and entails the NL test case",
// §3.1.1 L73) and names its Final, or revises.
func ChooseFinalPrompt(numbers []int) string {
	if len(numbers) == 1 {
		n := strconv.Itoa(numbers[0])
		return "Query " + n + " of your batch executed with Success. Call choose_final with the number of the query if its result answers the question, judging by the result above: it becomes the probe's final SQL. If it does not, call execute_sql with revised queries instead."
	}
	list := make([]string, len(numbers))
	for i, n := range numbers {
		list[i] = strconv.Itoa(n)
	}
	return "Queries " + strings.Join(list, ", ") + " of your batch executed with Success. Call choose_final with the number of the one whose result answers the question, judging by their results above: it becomes the probe's final SQL. If none of them does, call execute_sql with revised queries instead."
}

// choice reads the generator's reply to the choice question: answered
// when it calls choose_final, or no tool it has (a choice in prose), n
// being the number read (0 when none); execute_sql or
// not_enough_information instead revises.
func choice(resp *llm.Response) (n int, answered bool) {
	for _, call := range resp.ToolCalls {
		if toolName(call.Name) == ToolChooseFinal {
			return chosenNumber(call), true
		}
	}
	for _, call := range resp.ToolCalls {
		if name := toolName(call.Name); name == ToolExecuteSQL || name == ToolNotEnoughInfo {
			return 0, false
		}
	}
	if m := firstNumber.FindString(reply.Visible(resp.Text)); m != "" {
		n, _ = strconv.Atoi(m)
	}
	return n, true
}

// chosenNumber reads the query number of a choose_final call: its
// argument, a number or its text, under any of the names models use; 0
// when none.
func chosenNumber(call llm.ToolCall) int {
	if f, err := reply.Args(call.Arguments); err == nil {
		if v, ok := f.String("query", "query_number", "number", "index", "choice"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return 0
}

var firstNumber = regexp.MustCompile(`\b[1-9][0-9]?\b`)
