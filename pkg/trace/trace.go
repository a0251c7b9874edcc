// Package trace records what an agent did for each example: every task
// with the LLM calls and warehouse queries it made, each decision of the
// voter, and the final answer. The runtime records it for every agent
// without agent code doing any bookkeeping: the worker hands each task a
// Recorder in its context, the LLM client and the warehouses the runtime
// lends an agent (Client, Warehouse) write into it, and the worker, voter
// and coordinator store the entries in the run's state (runstate's trace
// list) with large texts in the content-addressed blob store, so the
// schema text eight candidates share is stored once.
//
// The same hooks emit OpenTelemetry spans (otel.go) when a process has a
// tracer provider: one trace per example across every role, the W3C trace
// context carried in the NATS message headers.
package trace

import (
	"fmt"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
)

// Level is how much a run's trace keeps.
type Level int

// Levels: None keeps nothing; Summary keeps every task, call and query
// with its timing, tokens, SQL and status but no prompt or reply text;
// Full keeps the texts too.
const (
	None Level = iota
	Summary
	Full
)

// Names of the levels, as --trace takes them.
const (
	NameNone    = "none"
	NameSummary = "summary"
	NameFull    = "full"
)

// ParseLevel reads a --trace value.
func ParseLevel(s string) (Level, error) {
	switch s {
	case NameNone:
		return None, nil
	case NameSummary:
		return Summary, nil
	case NameFull:
		return Full, nil
	}
	return None, fmt.Errorf("--trace %q: want %s, %s or %s", s, NameNone, NameSummary, NameFull)
}

func (l Level) String() string {
	switch l {
	case Summary:
		return NameSummary
	case Full:
		return NameFull
	}
	return NameNone
}

// Text is a text of the trace: inline when short, else a blob reference
// (Ref) with its length.
type Text struct {
	S   string `json:"s,omitempty"`
	Ref string `json:"ref,omitempty"`
	N   int    `json:"n,omitempty"`
}

// T makes a Text.
func T(s string) Text { return Text{S: s, N: len(s)} }

// Message is one message of a call's request.
type Message struct {
	Role       string         `json:"role"`
	Name       string         `json:"name,omitempty"`
	Content    Text           `json:"content"`
	ToolCalls  []llm.ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// Params are a call's request parameters.
type Params struct {
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"top_p,omitempty"`
	MaxTokens     int      `json:"max_tokens,omitempty"`
	Seed          *int64   `json:"seed,omitempty"`
	Tools         []string `json:"tools,omitempty"`
	ToolChoice    string   `json:"tool_choice,omitempty"`
	Stop          []string `json:"stop,omitempty"`
	ContinueFinal bool     `json:"continue_final,omitempty"`
}

// Call is one LLM call: what was asked and what came back.
type Call struct {
	Role     string `json:"role"`
	Endpoint string `json:"endpoint,omitempty"`
	// Model is the model configured for the role; Answered the one the
	// endpoint said answered, when it differs.
	Model    string    `json:"model"`
	Answered string    `json:"answered,omitempty"`
	Messages []Message `json:"messages,omitempty"`
	Params   Params    `json:"params"`
	Text     Text      `json:"text"`
	// Reasoning is what the endpoint returned beside the text.
	Reasoning Text           `json:"reasoning,omitzero"`
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
	Finish    string         `json:"finish,omitempty"`
	Usage     llm.Usage      `json:"usage"`
	Error     string         `json:"error,omitempty"`
}

// Query is one warehouse query.
type Query struct {
	Dialect string `json:"dialect"`
	SQL     Text   `json:"sql"`
	// Status is ok, empty, error (the engine's or quorum's refusal) or
	// failed (the query did not complete: a timeout, a lost connection).
	Status    string   `json:"status"`
	Rows      int      `json:"rows"`
	Columns   []string `json:"columns,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
	// Preview is the result's first rows as CSV, bounded.
	Preview Text   `json:"preview,omitzero"`
	Error   string `json:"error,omitempty"`
}

// Step is one call or query of a task, in the order they started.
type Step struct {
	At      time.Time `json:"at"`
	Seconds float64   `json:"seconds"`
	LLM     *Call     `json:"llm,omitempty"`
	Query   *Query    `json:"query,omitempty"`
}

// Result is one candidate a task recorded.
type Result struct {
	Index  int    `json:"index"`
	Status string `json:"status"`
	Rows   int    `json:"rows"`
	SQL    string `json:"sql,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Task is one delivery of a task.
type Task struct {
	Kind     string `json:"kind"`
	ID       string `json:"id"`
	Pool     string `json:"pool"`
	Round    int    `json:"round"`
	Slots    []int  `json:"slots,omitempty"`
	Delivery int    `json:"delivery"`
	// Outcome is done, retry (an error a redelivery may fix), failed
	// (permanent), cancelled or lease_lost.
	Outcome string   `json:"outcome"`
	Error   string   `json:"error,omitempty"`
	Results []Result `json:"results,omitempty"`
	// Next are the ids of the tasks it continues into; Part whether it
	// recorded a join part.
	Next  []string `json:"next,omitempty"`
	Part  bool     `json:"part,omitempty"`
	Steps []Step   `json:"steps,omitempty"`
}

// Candidate is a candidate as a decision saw it, with the cluster of
// candidates whose results are equal.
type Candidate struct {
	Round   int    `json:"round"`
	Index   int    `json:"index"`
	Status  string `json:"status"`
	Rows    int    `json:"rows"`
	SQL     string `json:"sql,omitempty"`
	Cluster int    `json:"cluster"`
}

// Member is a member agent's decision inside a composite one.
type Member struct {
	Agent      string `json:"agent"`
	Winner     string `json:"winner,omitempty"`
	Confidence string `json:"confidence,omitempty"`
	Method     string `json:"method,omitempty"`
	Valid      int    `json:"valid"`
	Agrees     bool   `json:"agrees"`
	// StoppedAfter and Posterior are the member's adaptive-sampling
	// verdict, as Decision's.
	StoppedAfter int     `json:"stopped_after,omitempty"`
	Posterior    float64 `json:"posterior,omitempty"`
}

// Decision is one decision of the voter.
type Decision struct {
	Round      int         `json:"round"`
	Candidates []Candidate `json:"candidates,omitempty"`
	// Clusters are the candidates the vote counted (round.index): those
	// agreeing with the winner first (Agreed, the agent's own judgement),
	// then the others grouped by equal results, largest first; an
	// unusable or uncounted candidate is in none (Candidate.Cluster -1).
	Clusters [][]string `json:"clusters,omitempty"`
	// Uncounted are the usable candidates the vote left out (ReFoRCE's
	// after exploring counts the exploration round alone).
	Uncounted  []string `json:"uncounted,omitempty"`
	Winner     string   `json:"winner,omitempty"`
	Confidence string   `json:"confidence,omitempty"`
	Method     string   `json:"method,omitempty"`
	Valid      int      `json:"valid"`
	Agreed     []int    `json:"agreed,omitempty"`
	// NextRound and NextTasks are the round the decision opened and its
	// tasks' ids.
	NextRound *int     `json:"next_round,omitempty"`
	NextTasks []string `json:"next_tasks,omitempty"`
	Members   []Member `json:"members,omitempty"`
	Rule      string   `json:"rule,omitempty"`
	// StoppedAfter and Posterior are adaptive sampling's verdict: the
	// candidates drawn when the rule settled the example (0: all were),
	// and its confidence in the majority.
	StoppedAfter int     `json:"stopped_after,omitempty"`
	Posterior    float64 `json:"posterior,omitempty"`
}

// Final is the example's final answer.
type Final struct {
	Status     string `json:"status"`
	Confidence string `json:"confidence,omitempty"`
	Method     string `json:"method,omitempty"`
	SQL        string `json:"sql,omitempty"`
	Rounds     int    `json:"rounds"`
	Candidates int    `json:"candidates"`
	Valid      int    `json:"valid"`
	Error      string `json:"error,omitempty"`
}

// Start is the example's admission: its first round.
type Start struct {
	Warehouse string   `json:"warehouse,omitempty"`
	Round     int      `json:"round"`
	Expect    int      `json:"expect"`
	Tasks     []string `json:"tasks,omitempty"`
	// Steps are the calls and queries the agent's start made.
	Steps []Step `json:"steps,omitempty"`
}

// Entry types.
const (
	TypeStart    = "start"
	TypeTask     = "task"
	TypeDecision = "decision"
	TypeFinal    = "final"
)

// Entry is one record of an example's trace.
type Entry struct {
	Type    string    `json:"type"`
	Agent   string    `json:"agent,omitempty"`
	Process string    `json:"process,omitempty"`
	At      time.Time `json:"at"`
	End     time.Time `json:"end"`
	// TraceID is the example's OpenTelemetry trace id, when exported.
	TraceID  string    `json:"trace_id,omitempty"`
	Start    *Start    `json:"start,omitempty"`
	Task     *Task     `json:"task,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	Final    *Final    `json:"final,omitempty"`
}

// Texts calls fn with every Text of e, to store or resolve them.
func (e *Entry) Texts(fn func(*Text)) {
	var steps []Step
	switch {
	case e.Task != nil:
		steps = e.Task.Steps
	case e.Start != nil:
		steps = e.Start.Steps
	}
	for i := range steps {
		s := &steps[i]
		if c := s.LLM; c != nil {
			for j := range c.Messages {
				fn(&c.Messages[j].Content)
			}
			fn(&c.Text)
			fn(&c.Reasoning)
		}
		if q := s.Query; q != nil {
			fn(&q.SQL)
			fn(&q.Preview)
		}
	}
}
