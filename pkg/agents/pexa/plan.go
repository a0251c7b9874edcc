package pexa

import (
	"context"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/reply"
	"strings"
	"sync"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// PlanState is one pass's Planner between turns: its conversation, the
// steps it spent, the evidence of every batch so far (D-P19), the latest
// proposal, and the tool calls of its last message still awaiting their
// results.
type PlanState struct {
	Messages []llm.Message `json:"messages"`
	Steps    int           `json:"steps"`
	Evidence []Record      `json:"evidence,omitempty"`
	Proposal *Proposal     `json:"proposal,omitempty"`
	Pending  []PendingCall `json:"pending,omitempty"`
	// Probes is the batch the pending calls asked for.
	Probes []string `json:"probes,omitempty"`
	// Runs are the no-proposer Planner's own executions (D-P21), by SQL
	// text, each with its whole result and its last verdict, so a SQL
	// runs once per pass as in the Proposer's conversation.
	Runs map[string]Proposal `json:"runs,omitempty"`
	// LastUnread says the Planner's last reply could not be read (no tool
	// call, or no call's arguments readable): a pass stopping then ended
	// on unreadable output (cost.Cost.FormatEnded).
	LastUnread bool `json:"last_unread,omitempty"`
	// FinalsChosen and FinalsFirst count the probes whose Final the
	// generator chose after seeing the results (choose_final) and those
	// where the fallback stood in (D-P24); ProbesDropped the probes
	// sequential planning did not run (D-P22).
	FinalsChosen  int `json:"finals_chosen,omitempty"`
	FinalsFirst   int `json:"finals_first,omitempty"`
	ProbesDropped int `json:"probes_dropped,omitempty"`
}

// PendingCall is a tool call of the Planner's last message: answered
// already (Result), or by the batch's probes From..To, or by the proposal.
type PendingCall struct {
	ID      string `json:"id"`
	Result  string `json:"result,omitempty"`
	From    int    `json:"from,omitempty"`
	To      int    `json:"to,omitempty"`
	Probes  bool   `json:"probes,omitempty"`
	Propose bool   `json:"propose,omitempty"`
	// Note follows the probes' blocks (probes sequential planning dropped).
	Note string `json:"note,omitempty"`
}

// NewPlanState opens a pass with Fig. 3.
func NewPlanState(question string) *PlanState {
	return &PlanState{Messages: []llm.Message{llm.User(PlannerPrompt(question))}}
}

// OpenPass opens a pass with the Planner's prompt for s's setting: Fig. 3,
// its no-proposer variant (D-P21), sequential planning (D-P22), or both.
func (s *Steps) OpenPass(question string) *PlanState {
	return &PlanState{Messages: []llm.Message{llm.User(render("plan", planData{Question: question,
		NoProposer: s.cfg.NoProposer, Verifier: !s.cfg.NoVerifier, Sequential: s.cfg.SequentialPlan}))}}
}

// PlanEnv is what the no-proposer Planner's own tools need (D-P21): the
// warehouse its SQL runs on, the question the verifier compares with, and
// the cost its verifier calls go to (the verify stage, as the Proposer's;
// its queries are the plan stage's). The paper's Planner needs none.
type PlanEnv struct {
	Warehouse warehouse.Warehouse
	Question  string
	Verify    *cost.Cost
}

// Action is what a Planner turn asks the runtime for.
type Action struct {
	// Probes to run as a batch, then Propose (after them) when set.
	Probes  []string `json:"probes,omitempty"`
	Propose bool     `json:"propose,omitempty"`
	// Finish ends the pass with the state's proposal; Stop ends it for
	// the reason given (the step limit, an LLM failure).
	Finish bool   `json:"finish,omitempty"`
	Stop   string `json:"stop,omitempty"`
}

// Resolve answers the pending tool calls with the batch's outcomes and
// the proposal, in the order the Planner made them, and adds the batch to
// the evidence.
func (st *PlanState) Resolve(outcomes []*ProbeOutcome, proposal *Proposal) {
	for _, o := range outcomes {
		if o == nil {
			continue
		}
		st.Evidence = append(st.Evidence, o.Records...)
		switch {
		case o.Chosen:
			st.FinalsChosen++
		case o.final() != nil:
			st.FinalsFirst++
		}
	}
	if proposal != nil {
		st.Proposal = proposal
	}
	for _, p := range st.Pending {
		text := p.Result
		switch {
		case p.Probes:
			text = renderProbes(st.Probes[p.From:p.To], outcomes[p.From:p.To], p.From)
			if p.Note != "" {
				text += "\n\n" + p.Note
			}
		case p.Propose && proposal != nil:
			text = proposal.Render()
		case p.Propose:
			text = "The proposer did not run."
		}
		st.Messages = append(st.Messages, llm.ToolResult(p.ID, text))
	}
	st.Pending, st.Probes = nil, nil
}

// renderProbes is a generate_testcase result: one block per probe (D-P18).
func renderProbes(probes []string, outcomes []*ProbeOutcome, from int) string {
	var b strings.Builder
	for i, p := range probes {
		if i > 0 {
			b.WriteString("\n\n")
		}
		o := outcomes[i]
		status, final, result := "lost: the probe did not run", "none", "none"
		if o != nil {
			status = o.Status
			if o.Detail != "" && o.Status != ProbeFinal {
				status += ": " + o.Detail
			}
			if f := o.final(); f != nil {
				final, result = f.SQL, strings.TrimPrefix(f.Feedback, "Success: ")
			} else if n := len(o.Records); n > 0 {
				result = o.Records[n-1].Feedback
			}
			if o.Status == ProbeLimit && len(o.Records) > 0 && o.final() == nil {
				status = ProbeAllFailed
			}
		}
		fmt.Fprintf(&b, "Probe %d: %s\nStatus: %s\nFinal SQL: %s\nExecuted Result (truncated): %s", from+i+1, p, status, final, result)
	}
	return b.String()
}

// Tool results the Planner gets for calls it may not make (D-P2, D-P13).
const (
	errNoProposal  = "No final SQL has been proposed yet. Call propose_final_sql first."
	errFinishAlone = "finish must be called on its own."
	// errSequentialTurn answers a second generate_testcase call in one
	// message under sequential planning (D-P22).
	errSequentialTurn = "Not run: with sequential planning one probe runs per turn. Give the next probe in your next turn, after reading this one's result."
)

// PlanTurn runs the Planner until it asks for work (probes, the
// proposer), finishes, or stops. The state is updated in place. env is
// needed only with NoProposer, whose Planner runs its own SQL (D-P21):
// execute_sql and semantic_verifier are answered within the turn, and
// finish(sql_query) ends the pass once the SQL has executed with rows.
func (s *Steps) PlanTurn(ctx context.Context, st *PlanState, env *PlanEnv, seed func(step int) int64, c *cost.Cost) (*Action, error) {
	return s.ResumePlanTurn(ctx, st, env, seed, c, nil)
}

// ResumePlanTurn is PlanTurn with a checkpoint: save, when not nil, is
// called with the state after each step that does not end the turn (a
// re-ask, tool calls answered within it), so a redelivered turn continues
// from st as saved. Seeds are the step's (seed(Steps)), so a resumed turn
// makes the calls an uninterrupted one makes.
func (s *Steps) ResumePlanTurn(ctx context.Context, st *PlanState, env *PlanEnv, seed func(step int) int64, c *cost.Cost,
	save func(context.Context, *PlanState) error) (*Action, error) {
	if s.cfg.NoProposer && (env == nil || env.Warehouse == nil) {
		return nil, errors.New("pexa: the no-proposer planner needs a warehouse")
	}
	tools := plannerTools(s.cfg)
	resumedAt := st.Steps
	for {
		if save != nil && st.Steps > resumedAt {
			if err := save(ctx, st); err != nil {
				return nil, err
			}
		}
		if st.Steps >= s.cfg.MaxPlannerSteps {
			if st.LastUnread {
				c.FormatEnded++
				if st.Proposal == nil {
					c.FormatLost++ // the pass has no answer: its last replies could not be read
				}
			}
			return &Action{Stop: "planner_recursion"}, nil
		}
		sd := seed(st.Steps)
		resp, err := s.chat(ctx, c, llm.Request{Role: RolePlan, Messages: st.Messages, Tools: tools,
			ToolChoice: llm.ToolChoiceRequired, Temperature: temp(s.cfg.Temperature), Seed: &sd})
		st.Steps++
		var ce *llm.CallError
		if errors.As(err, &ce) {
			return &Action{Stop: "the LLM call failed: " + ce.Error()}, nil
		}
		if err != nil {
			return nil, err
		}
		st.Messages = append(st.Messages, resp.Message())
		if len(resp.ToolCalls) == 0 {
			st.Steps++ // the re-ask (D-P3)
			st.Messages = append(st.Messages, llm.User("You must call one of the tools."))
			c.FormatReasks++
			st.LastUnread = true
			continue
		}
		act := &Action{}
		var pending []PendingCall
		bad := 0
		unreadable := func(id, result string) {
			pending = append(pending, PendingCall{ID: id, Result: result})
			c.FormatReasks++
			bad++
		}
		for _, call := range resp.ToolCalls {
			switch name := toolName(call.Name); {
			case name == ToolFinish:
				switch {
				case len(resp.ToolCalls) > 1:
					pending = append(pending, PendingCall{ID: call.ID, Result: errFinishAlone})
				case s.cfg.NoProposer:
					// The Proposer's guard (D-P6): the SQL must have
					// executed with rows, else the executor's feedback.
					sql, err := sqlArg(call.Arguments)
					if err != nil {
						unreadable(call.ID, sqlArgsResult(err))
						continue
					}
					p, err := s.planRun(ctx, st, env, c, sql)
					if err != nil {
						return nil, err
					}
					if !p.OK {
						pending = append(pending, PendingCall{ID: call.ID, Result: p.Feedback})
						continue
					}
					st.Proposal, st.LastUnread = &p, false
					return &Action{Finish: true}, nil
				case st.Proposal == nil:
					pending = append(pending, PendingCall{ID: call.ID, Result: errNoProposal})
				default:
					st.LastUnread = false
					return &Action{Finish: true}, nil
				}
			case name == ToolGenerateTestcase:
				// Calls in one message merge into one batch (D-P2).
				probes, err := readProbes(call.Arguments)
				if err != nil {
					unreadable(call.ID, fmt.Sprintf(`The generate_testcase arguments %v: give {"probes": ["...", "..."]}.`, err))
					continue
				}
				note := ""
				if s.cfg.SequentialPlan {
					// One probe per turn (D-P22): the first is run, the
					// rest are dropped and the Planner is told so.
					if len(act.Probes) > 0 {
						st.ProbesDropped += len(probes)
						pending = append(pending, PendingCall{ID: call.ID, Result: errSequentialTurn})
						continue
					}
					if n := len(probes) - 1; n > 0 {
						st.ProbesDropped += n
						note = fmt.Sprintf("Only the first probe was run: with sequential planning one probe runs per turn. The other %d were not run; give the next one in your next turn if it is still needed.", n)
						probes = probes[:1]
					}
				}
				if k := s.cfg.MaxProbesPerPlan; k > 0 && len(act.Probes)+len(probes) > k {
					probes = probes[:max(0, k-len(act.Probes))]
				}
				if len(probes) == 0 {
					pending = append(pending, PendingCall{ID: call.ID, Result: fmt.Sprintf("At most %d probes per plan: these were not run.", s.cfg.MaxProbesPerPlan)})
					continue
				}
				from := len(act.Probes)
				act.Probes = append(act.Probes, probes...)
				pending = append(pending, PendingCall{ID: call.ID, Probes: true, From: from, To: len(act.Probes), Note: note})
			case name == ToolProposeFinalSQL && !s.cfg.NoProposer:
				if act.Propose {
					pending = append(pending, PendingCall{ID: call.ID, Result: "The proposer was already called in this message."})
					continue
				}
				act.Propose = true
				pending = append(pending, PendingCall{ID: call.ID, Propose: true})
			case s.cfg.NoProposer && (name == ToolExecuteSQL || name == ToolSemanticVerifier && !s.cfg.NoVerifier):
				sql, err := sqlArg(call.Arguments)
				if err != nil {
					unreadable(call.ID, sqlArgsResult(err))
					continue
				}
				result, err := s.planTool(ctx, st, env, seed, c, name, sql)
				if err != nil {
					return nil, err
				}
				pending = append(pending, PendingCall{ID: call.ID, Result: result})
			default:
				pending = append(pending, PendingCall{ID: call.ID, Result: fmt.Sprintf("Unknown tool %q: use %s.", call.Name, toolNames(tools))})
			}
		}
		st.Steps++ // the tools execution
		st.LastUnread = bad == len(resp.ToolCalls)
		st.Pending, st.Probes = pending, act.Probes
		if len(act.Probes) > 0 || act.Propose {
			return act, nil
		}
		st.Resolve(nil, nil) // only immediate answers: ask again
	}
}

// planTool answers the no-proposer Planner's execute_sql and
// semantic_verifier as the Proposer does (D-P6, D-P21): the executor's
// feedback, or the verifier's verdict on the SQL, executed first if it has
// not run in this pass.
func (s *Steps) planTool(ctx context.Context, st *PlanState, env *PlanEnv, seed func(int) int64, c *cost.Cost, name, sql string) (string, error) {
	p, err := s.planRun(ctx, st, env, c, sql)
	if err != nil || name == ToolExecuteSQL {
		return p.Feedback, err
	}
	vc := env.Verify
	if vc == nil {
		vc = c
	}
	v, err := s.Verify(ctx, env.Question, sql, strings.TrimPrefix(p.Feedback, "Success: "), seed(1000+st.Steps), vc)
	if err != nil {
		return "", err
	}
	p.Verdict = v
	st.Runs[reply.Key(sql)] = p
	if st.Proposal != nil && reply.Key(st.Proposal.SQL) == reply.Key(sql) {
		st.Proposal.Verdict = v
	}
	return v, nil
}

// planRun executes one of the no-proposer Planner's SQLs, once per pass and
// whole (it may become the pass's candidate), in the plan stage's cost. As
// the Proposer's best-or-last, the state's proposal becomes the last SQL
// that executed with rows, else the last SQL run: what the pass answers
// with if it stops before finish (D-P13).
func (s *Steps) planRun(ctx context.Context, st *PlanState, env *PlanEnv, c *cost.Cost, sql string) (Proposal, error) {
	p, ok := st.Runs[reply.Key(sql)]
	if !ok {
		var mu sync.Mutex
		e, err := execute(ctx, env.Warehouse, c, &mu, sql, warehouse.Limits{})
		if err != nil {
			return Proposal{}, err
		}
		p = Proposal{SQL: sql, Feedback: e.Feedback, OK: e.OK, CSV: e.CSV, Rows: e.Rows}
		if st.Runs == nil {
			st.Runs = map[string]Proposal{}
		}
		st.Runs[reply.Key(sql)] = p
	}
	if p.OK || st.Proposal == nil || !st.Proposal.OK {
		kept := p
		st.Proposal = &kept
	}
	return p, nil
}
