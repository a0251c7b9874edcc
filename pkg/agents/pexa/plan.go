package pexa

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
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
}

// NewPlanState opens a pass with Fig. 3.
func NewPlanState(question string) *PlanState {
	return &PlanState{Messages: []llm.Message{llm.User(PlannerPrompt(question))}}
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
		if o != nil {
			st.Evidence = append(st.Evidence, o.Records...)
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
)

// PlanTurn runs the Planner until it asks for work (probes, the
// proposer), finishes, or stops. The state is updated in place.
func (s *Steps) PlanTurn(ctx context.Context, st *PlanState, seed func(step int) int64, c *cost.Cost) (*Action, error) {
	for {
		if st.Steps >= s.cfg.MaxPlannerSteps {
			return &Action{Stop: "planner_recursion"}, nil
		}
		sd := seed(st.Steps)
		resp, err := s.chat(ctx, c, llm.Request{Role: RolePlan, Messages: st.Messages, Tools: plannerTools(s.cfg.MaxProbesPerPlan),
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
			st.Messages = append(st.Messages, llm.User("You must call one of the tools."))
			continue
		}
		act := &Action{}
		var pending []PendingCall
		for _, call := range resp.ToolCalls {
			switch call.Name {
			case ToolFinish:
				switch {
				case len(resp.ToolCalls) > 1:
					pending = append(pending, PendingCall{ID: call.ID, Result: errFinishAlone})
				case st.Proposal == nil:
					pending = append(pending, PendingCall{ID: call.ID, Result: errNoProposal})
				default:
					return &Action{Finish: true}, nil
				}
			case ToolGenerateTestcase:
				// Calls in one message merge into one batch (D-P2).
				var a struct {
					Probes []string `json:"probes"`
				}
				if json.Unmarshal([]byte(call.Arguments), &a) != nil || len(a.Probes) == 0 {
					pending = append(pending, PendingCall{ID: call.ID, Result: `The arguments were not understood: give {"probes": ["...", "..."]}.`})
					continue
				}
				if k := s.cfg.MaxProbesPerPlan; k > 0 && len(act.Probes)+len(a.Probes) > k {
					a.Probes = a.Probes[:max(0, k-len(act.Probes))]
				}
				if len(a.Probes) == 0 {
					pending = append(pending, PendingCall{ID: call.ID, Result: fmt.Sprintf("At most %d probes per plan: these were not run.", s.cfg.MaxProbesPerPlan)})
					continue
				}
				from := len(act.Probes)
				act.Probes = append(act.Probes, a.Probes...)
				pending = append(pending, PendingCall{ID: call.ID, Probes: true, From: from, To: len(act.Probes)})
			case ToolProposeFinalSQL:
				if act.Propose {
					pending = append(pending, PendingCall{ID: call.ID, Result: "The proposer was already called in this message."})
					continue
				}
				act.Propose = true
				pending = append(pending, PendingCall{ID: call.ID, Propose: true})
			default:
				pending = append(pending, PendingCall{ID: call.ID, Result: fmt.Sprintf("Unknown tool %q: use generate_testcase, propose_final_sql or finish.", call.Name)})
			}
		}
		st.Steps++ // the tools execution
		st.Pending, st.Probes = pending, act.Probes
		if len(act.Probes) > 0 || act.Propose {
			return act, nil
		}
		st.Resolve(nil, nil) // only immediate answers: ask again
	}
}
