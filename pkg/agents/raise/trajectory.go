package raise

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Transports of the trajectory (D-R2).
const (
	// TransportContinue continues one assistant message (vLLM
	// continue_final_message, DeepSeek/LiteLLM prefix): the paper's
	// uninterrupted generation.
	TransportContinue = "continue"
	// TransportMultiTurn emulates it for endpoints without prefill: each
	// segment an assistant turn, each result a user turn. Not faithful;
	// chosen explicitly.
	TransportMultiTurn = "multiturn"
)

// Config holds the paper's controls and quorum's safety caps.
type Config struct {
	// Rounds are independent trajectories, each with its final
	// generations (§5.2: 8).
	Rounds int
	// SegmentTokens: a segment this long without a command gets the nudge
	// (§3.2 L207: 1,400); TotalTokens ends the trajectory (L212: 10,000).
	SegmentTokens, TotalTokens int
	// MaxCalls and MaxCommands are safety caps (D-R16).
	MaxCalls, MaxCommands int
	// MaxOps keeps the first k commands for the final prompt (0 = all;
	// §5.1's depth curve).
	MaxOps int
	// Refine is the final generation's retries (§4 L287: up to 5).
	Refine int
	// Static removes run_query (§4 L273).
	Static bool
	// Columns adds the column post-process of one final model (§3.3).
	Columns bool
	// Transport is TransportContinue or TransportMultiTurn.
	Transport string
	// ThinkTag opens the prefill with "<think>\n" for R1-style models.
	ThinkTag bool
	// Temperature and TopP of the agent (D-R12: DeepSeek's 0.6 / 0.95).
	Temperature, TopP float64
}

// DefaultConfig is the paper's setting.
func DefaultConfig() Config {
	return Config{Rounds: 8, SegmentTokens: 1400, TotalTokens: 10000, MaxCalls: 60, MaxCommands: 50, Refine: 5,
		Columns: true, Transport: TransportContinue, Temperature: 0.6, TopP: 0.95}
}

// LLM roles: the agent, the three final models (the paper's
// R1-distill, o3-mini and Claude 3.7 Sonnet) and the column post-process.
const (
	RoleAgent   llm.Role = "agent"
	RoleFinalA  llm.Role = "final_a"
	RoleFinalB  llm.Role = "final_b"
	RoleFinalC  llm.Role = "final_c"
	RoleColumns llm.Role = "columns"
)

// FinalRoles are the three final models in slot order.
var FinalRoles = []llm.Role{RoleFinalA, RoleFinalB, RoleFinalC}

// Trajectory is one agent run: the commands it executed with their
// outputs, and how it ended.
type Trajectory struct {
	Ops    []Op `json:"ops"`
	Calls  int  `json:"calls"`
	Tokens int  `json:"tokens"`
	Nudges int  `json:"nudges"`
	// Corrections counts the corrective nudges (D-R17).
	Corrections int    `json:"corrections,omitempty"`
	End         string `json:"end"`
	// Answer is the agent's own final SQL, recorded but not used (Fig. 3
	// caption: its answer is discarded).
	Answer string `json:"answer,omitempty"`
}

// Trajectory ends.
const (
	EndAnswer   = "answer"       // the model stopped on its own
	EndTokens   = "token_limit"  // 10,000 generated tokens
	EndCalls    = "call_limit"   // safety cap
	EndCommands = "command_cap"  // safety cap
	EndLLM      = "llm_failure"  // a call failed after its retries
	EndEmpty    = "empty_output" // the model produced nothing
	// EndFormat: maxCorrections corrective nudges in a row did not give a
	// command that can be run (D-R17).
	EndFormat = "unreadable_commands"
)

// maxCorrections bounds the corrective nudges without a command run in
// between (D-R17).
const maxCorrections = 3

// Steps runs RAISE's components.
type Steps struct {
	cfg Config
	llm llm.Client
}

// Run is the agent loop (§2.3 of our spec): prefilled start phrase,
// segments that stop at [EXECUTE] with the command run and its result
// appended, the nudge after a segment of SegmentTokens without a command,
// a corrective nudge after a command written in a form that cannot be run
// (D-R17), and the end at TotalTokens.
func (s *Steps) Run(ctx context.Context, tools *Tools, d warehouse.Dialect, question, ek string, seed func(int) int64, c *cost.Cost) (*Trajectory, error) {
	return s.Resume(ctx, tools, d, question, ek, seed, c, nil, nil)
}

// Progress is a trajectory between two of its steps (a step: one LLM
// segment and what was appended after it, a command's result or a
// nudge): what a checkpoint keeps and a redelivered task continues from.
type Progress struct {
	Messages    []llm.Message `json:"messages"`
	Trajectory  Trajectory    `json:"trajectory"`
	Corrections int           `json:"corrections,omitempty"`
}

// Resume is Run continued from a checkpoint: from, when not nil, is the
// progress a previous delivery saved; save, when not nil, is called after
// each step with the progress so far. The seeds are the step's
// (seed(Calls)), so a resumed trajectory makes the calls an uninterrupted
// one makes. c receives this delivery's costs only: what the earlier
// steps cost was the earlier delivery's.
func (s *Steps) Resume(ctx context.Context, tools *Tools, d warehouse.Dialect, question, ek string, seed func(int) int64, c *cost.Cost,
	from *Progress, save func(context.Context, *Progress) error) (*Trajectory, error) {
	prompt := AgentPrompt(d, question, ek, s.cfg.Static)
	prefix := PhraseStart + "\n"
	if s.cfg.ThinkTag {
		prefix = "<think>\n" + prefix
	}
	multi := s.cfg.Transport == TransportMultiTurn
	// The conversation so far: one user prompt and one growing assistant
	// message (continue), or alternating turns (multi-turn).
	msgs := []llm.Message{llm.User(prompt), llm.Assistant(prefix)}
	if multi {
		msgs = []llm.Message{llm.User(prompt + MultiTurnStart())}
	}
	tr := &Trajectory{}
	corrections := 0 // corrective nudges since the last command ran
	if from != nil {
		msgs, corrections = from.Messages, from.Corrections
		trc := from.Trajectory
		tr = &trc
	}
	checkpoint := func() error {
		if save == nil {
			return nil
		}
		return save(ctx, &Progress{Messages: msgs, Trajectory: *tr, Corrections: corrections})
	}
	appendText := func(text string) {
		if multi {
			msgs = append(msgs, llm.User(strings.TrimSpace(text)))
			return
		}
		msgs[1].Content += text
	}
	temp, topP := s.cfg.Temperature, s.cfg.TopP
	for {
		switch {
		case tr.Calls >= s.cfg.MaxCalls:
			tr.End = EndCalls
			return tr, nil
		case len(tr.Ops) >= s.cfg.MaxCommands:
			tr.End = EndCommands
			return tr, nil
		}
		sd := seed(tr.Calls)
		req := llm.Request{Role: RoleAgent, Messages: append([]llm.Message(nil), msgs...), Stop: []string{TagExecute},
			MaxTokens: s.cfg.SegmentTokens, Temperature: &temp, TopP: &topP, Seed: &sd, ContinueFinal: !multi}
		resp, err := s.llm.Chat(ctx, req)
		tr.Calls++
		var ce *llm.CallError
		if errors.As(err, &ce) {
			c.Call(ce.Usage, true)
			tr.End = EndLLM
			return tr, nil
		}
		if err != nil {
			return nil, err
		}
		c.Call(resp.Usage, false)
		tr.Tokens += resp.Usage.CompletionTokens
		rd := readResponse(resp)
		// The transcript keeps what a server honouring the stop would have
		// returned: nothing the model wrote past its own [EXECUTE].
		if multi {
			msgs = append(msgs, llm.Assistant(rd.Text))
		} else {
			msgs[1].Content += rd.Text
		}
		switch {
		case resp.FinishReason == reply.FinishLength && !rd.Cut:
			// SegmentTokens without a tool call: the nudge (rule 2), never
			// parsed as a command.
			tr.Nudges++
			appendText("\n" + Nudge + "\n")
		case rd.HasCmd:
			// The model stopped at a command (D-R5).
			corrections = 0
			if !multi {
				msgs[1].Content += TagExecute
			}
			out, err := tools.Run(ctx, rd.Cmd.Name, rd.Cmd.Args)
			if err != nil {
				return nil, fmt.Errorf("raise command %s: %w", rd.Cmd.Text(), err)
			}
			tr.Ops = append(tr.Ops, Op{Command: rd.Cmd.Text(), Output: out})
			appendText("\n" + TagResult + "\n" + out + "\n" + TagEnd + "\n")
		case rd.Mention:
			// A command the parser cannot read: say the syntax rather than
			// lose the exploration (D-R17).
			if corrections >= maxCorrections {
				c.FormatEnded++
				tr.End = EndFormat
				return tr, nil
			}
			corrections++
			tr.Corrections++
			c.FormatReasks++
			appendText("\n" + Correction(rd.Tool, s.cfg.Static) + "\n")
		case strings.TrimSpace(rd.Text) == "":
			tr.End = EndEmpty
			return tr, nil
		default:
			// The agent's answer is recorded, not used (D-R5).
			tr.End = EndAnswer
			tr.Answer, _ = reply.SQL(rd.Text, resp.FinishReason)
			return tr, nil
		}
		if tr.Tokens >= s.cfg.TotalTokens {
			// Rule 3. The forced final answer would be discarded (Fig. 3
			// caption), so it is not asked for (D-R4).
			appendText("\n" + PhraseTerminate + "\n")
			tr.End = EndTokens
			return tr, nil
		}
		if err := checkpoint(); err != nil {
			return nil, err
		}
	}
}

// readResponse reads a segment wherever the serving stack put it: the
// text; a native tool call (a template that parses commands into
// tool_calls); the reasoning field, when the text holds no command and no
// answer (a vLLM reasoning parser can move a whole reply there).
func readResponse(resp *llm.Response) Segment {
	rd := ReadSegment(resp.Text)
	if rd.HasCmd {
		return rd
	}
	if n := len(resp.ToolCalls); n > 0 {
		tc := resp.ToolCalls[n-1]
		name := tc.Name
		if i := strings.LastIndexByte(name, '.'); i >= 0 {
			name = name[i+1:]
		}
		cmd := Command{Name: canonical(name), Args: tc.Arguments}
		text := strings.TrimRight(rd.Text, " \t\r\n")
		if text != "" {
			text += "\n"
		}
		return Segment{Text: text + TagRun + " " + cmd.Text(), Cmd: cmd, HasCmd: true}
	}
	if strings.TrimSpace(resp.Reasoning) == "" || len(reply.Statements(resp.Text)) > 0 {
		return rd
	}
	if r := ReadSegment(resp.Reasoning); r.HasCmd || strings.TrimSpace(reply.Visible(resp.Text)) == "" {
		return r
	}
	return rd
}
