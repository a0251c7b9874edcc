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
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
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
	// SequentialPlan runs a batch's probes one at a time (Table 2, "w/o
	// plan-time parallelization").
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
	Feedback    string `json:"feedback"`
	OK          bool   `json:"ok,omitempty"`
	Class       string `json:"class"`
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

// Probe runs one Test Case Generator (§1.5): the model writes SQLs, they
// run in parallel, and a batch with at least one successful answering
// query ends it (D-P4); an exploration-only or all-failed batch goes back
// to the model with the feedback.
func (s *Steps) Probe(ctx context.Context, wh warehouse.Warehouse, in TestcaseInput, seed func(step int) int64, c *cost.Cost) (*ProbeOutcome, error) {
	out := &ProbeOutcome{Probe: in.Probe}
	msgs := []llm.Message{llm.User(TestcasePrompt(in))}
	var records []Record
	for steps := 0; ; {
		if steps >= s.cfg.MaxTestcaseSteps {
			out.Status = ProbeLimit
			break
		}
		sd := seed(steps)
		resp, err := s.chat(ctx, c, llm.Request{Role: RoleTestcase, Messages: msgs, Tools: testcaseTools(s.cfg.MaxSQLsPerTestCase),
			ToolChoice: llm.ToolChoiceRequired, Temperature: temp(s.cfg.Temperature), Seed: &sd})
		steps++
		out.Calls++
		var ce *llm.CallError
		if errors.As(err, &ce) {
			out.Status, out.Detail = ProbeLimit, "the LLM call failed: "+ce.Error()
			break
		}
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, resp.Message())
		if len(resp.ToolCalls) == 0 {
			msgs = append(msgs, llm.User(mustUseTool))
			continue
		}
		done := false
		var batch []Record
		for _, call := range resp.ToolCalls {
			switch call.Name {
			case ToolNotEnoughInfo:
				var a struct {
					Explanation string `json:"explanation"`
				}
				_ = json.Unmarshal([]byte(call.Arguments), &a)
				out.Status, out.Detail = ProbeNEI, a.Explanation
				out.Records = classify(records, nil)
				return out, nil
			case ToolExecuteSQL:
				rs, text, err := s.executeBatch(ctx, wh, c, in.Probe, call.Arguments)
				if err != nil {
					return nil, err
				}
				out.Queries += len(rs)
				batch = append(batch, rs...)
				msgs = append(msgs, llm.ToolResult(call.ID, text))
			default:
				msgs = append(msgs, llm.ToolResult(call.ID, fmt.Sprintf("Unknown tool %q: use execute_sql or not_enough_information.", call.Name)))
			}
		}
		steps++ // the tools execution
		for _, r := range batch {
			if r.OK && !r.Exploration {
				done = true
			}
		}
		if done {
			out.Status = ProbeFinal
			out.Records = classify(records, batch)
			return out, nil
		}
		records = append(records, batch...)
	}
	out.Records = classify(records, nil)
	if out.Status == ProbeLimit && out.Detail == "" && len(out.Records) > 0 {
		out.Detail = "no answering query succeeded"
	}
	return out, nil
}

// executeBatch runs one execute_sql call: its queries at once, capped to
// MaxSQLsPerTestCase, and the numbered feedback the model reads.
func (s *Steps) executeBatch(ctx context.Context, wh warehouse.Warehouse, c *cost.Cost, probe, args string) ([]Record, string, error) {
	var a struct {
		Queries []struct {
			Description string `json:"description"`
			SQLQuery    string `json:"sql_query"`
			Exploration bool   `json:"exploration"`
		} `json:"queries"`
	}
	if err := json.Unmarshal([]byte(args), &a); err != nil || len(a.Queries) == 0 {
		return nil, "The execute_sql arguments were not understood: give {\"queries\": [{\"description\": ..., \"sql_query\": ..., \"exploration\": false}]}.", nil
	}
	if k := s.cfg.MaxSQLsPerTestCase; k > 0 && len(a.Queries) > k {
		a.Queries = a.Queries[:k]
	}
	sqls := make([]string, len(a.Queries))
	for i, q := range a.Queries {
		sqls[i] = q.SQLQuery
	}
	execs, err := executeAll(ctx, wh, c, sqls, s.cfg.MaxSQLsPerTestCase == 1)
	if err != nil {
		return nil, "", err
	}
	var text strings.Builder
	recs := make([]Record, len(execs))
	for i, e := range execs {
		q := a.Queries[i]
		recs[i] = Record{Probe: probe, Description: q.Description, SQL: q.SQLQuery, Exploration: q.Exploration, Feedback: e.Feedback, OK: e.OK}
		if i > 0 {
			text.WriteString("\n")
		}
		fmt.Fprintf(&text, "Query %d (%s): %s", i+1, q.Description, e.Feedback)
	}
	return recs, text.String(), nil
}

// classify puts each record in one of the Proposer's clusters (D-P5):
// exploratory by its flag; the first successful answering query of the
// terminating batch is Final; other successes Successful; answering
// queries that failed or returned nothing Failure.
func classify(earlier, terminating []Record) []Record {
	out := make([]Record, 0, len(earlier)+len(terminating))
	final := false
	for i, r := range append(append([]Record(nil), earlier...), terminating...) {
		switch {
		case r.Exploration:
			r.Class = ClassExploratory
		case !r.OK:
			r.Class = ClassFailure
		case i >= len(earlier) && !final:
			r.Class, final = ClassFinal, true
		default:
			r.Class = ClassSuccessful
		}
		out = append(out, r)
	}
	return out
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

var sqlFence = regexp.MustCompile("(?s)```sql\\s*(.*?)```")

// Propose runs the Proposer (§1.6): an agent with the executor and the
// verifier as tools; its final SQL must have executed with Success before
// it is returned (D-P6).
func (s *Steps) Propose(ctx context.Context, wh warehouse.Warehouse, question string, dialect warehouse.Dialect, evidence []Record,
	seed func(step int) int64, c, verify *cost.Cost) (*Proposal, error) {
	msgs := []llm.Message{llm.User(ProposerPrompt(question, dialect, evidence))}
	runs := map[string]execution{}
	verdicts := map[string]string{}
	var best, last *Proposal
	var mu sync.Mutex
	run := func(sql string) (execution, error) {
		if e, ok := runs[sql]; ok {
			return e, nil
		}
		e, err := execute(ctx, wh, c, &mu, sql, warehouse.Limits{})
		if err == nil {
			runs[sql] = e
		}
		return e, err
	}
	answer := func(sql string, e execution) *Proposal {
		return &Proposal{SQL: sql, Feedback: e.Feedback, OK: e.OK, CSV: e.CSV, Rows: e.Rows, Verdict: verdicts[sql]}
	}
	ending := func(why string) *Proposal {
		p := best
		if p == nil {
			p = last
		}
		if p == nil {
			return &Proposal{Stop: why, Feedback: "no SQL was proposed"}
		}
		p.Stop, p.Verdict = why, verdicts[p.SQL]
		return p
	}
	for steps := 0; ; {
		if steps >= s.cfg.MaxProposerSteps {
			return ending("proposer_recursion"), nil
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
			for _, call := range resp.ToolCalls {
				var a struct {
					SQL string `json:"sql_query"`
				}
				if json.Unmarshal([]byte(call.Arguments), &a) != nil || strings.TrimSpace(a.SQL) == "" {
					msgs = append(msgs, llm.ToolResult(call.ID, `The arguments were not understood: give {"sql_query": "..."}.`))
					continue
				}
				e, err := run(a.SQL)
				if err != nil {
					return nil, err
				}
				last = answer(a.SQL, e)
				if e.OK {
					best = last
				}
				switch call.Name {
				case ToolExecuteSQL:
					msgs = append(msgs, llm.ToolResult(call.ID, e.Feedback))
				case ToolSemanticVerifier:
					if s.cfg.NoVerifier {
						msgs = append(msgs, llm.ToolResult(call.ID, "Unknown tool semantic_verifier."))
						continue
					}
					v, err := s.Verify(ctx, question, a.SQL, strings.TrimPrefix(e.Feedback, "Success: "), seed(1000+steps), verify)
					if err != nil {
						return nil, err
					}
					verdicts[a.SQL] = v
					msgs = append(msgs, llm.ToolResult(call.ID, v))
				default:
					msgs = append(msgs, llm.ToolResult(call.ID, fmt.Sprintf("Unknown tool %q.", call.Name)))
				}
			}
			steps++
			continue
		}
		m := sqlFence.FindStringSubmatch(resp.Text)
		if m == nil || strings.TrimSpace(m[1]) == "" {
			msgs = append(msgs, llm.User("Answer with one SQL query in a ```sql``` block."))
			continue
		}
		sql := strings.TrimSpace(m[1])
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

// Verdict strings (D-P7).
const (
	VerdictPassed = "Semantic check passed: "
	VerdictError  = "Semantic Error: "
)

var jsonFence = regexp.MustCompile("(?s)```json\\s*(.*?)```")

// Verify runs the Semantic Verifier (Fig. 6): back-translate and compare.
// A reply that is not its JSON after two attempts passes: the check must
// not block an answer (D-P7).
func (s *Steps) Verify(ctx context.Context, question, sql, result string, seed int64, c *cost.Cost) (string, error) {
	msgs := []llm.Message{llm.User(VerifierPrompt(question, sql, result))}
	for attempt := range 2 {
		sd := seed + int64(attempt)
		resp, err := s.chat(ctx, c, llm.Request{Role: RoleVerify, Messages: msgs, Temperature: temp(s.cfg.VerifierTemp), Seed: &sd})
		var ce *llm.CallError
		if errors.As(err, &ce) {
			return VerdictPassed + "(the verifier could not be reached: " + ce.Error() + ")", nil
		}
		if err != nil {
			return "", err
		}
		text := resp.Text
		if m := jsonFence.FindStringSubmatch(text); m != nil {
			text = m[1]
		} else if i, j := strings.Index(text, "{"), strings.LastIndex(text, "}"); i >= 0 && j > i {
			text = text[i : j+1]
		}
		var v struct {
			Correct         *bool  `json:"correct"`
			Explanation     string `json:"explanation"`
			BackTranslation string `json:"back_translated_query"`
		}
		if json.Unmarshal([]byte(text), &v) != nil || v.Correct == nil {
			continue
		}
		if *v.Correct {
			return VerdictPassed + v.Explanation, nil
		}
		return VerdictError + v.Explanation + " (back-translation: " + v.BackTranslation + ")", nil
	}
	return VerdictPassed + "(the verifier's reply was not understood)", nil
}
