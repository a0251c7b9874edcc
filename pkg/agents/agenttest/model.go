package agenttest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/quorumsql/quorum/pkg/llm"
)

// Model is a scripted llm.Client: a rule the test writes answers each
// call (Script, Texts, Replies, Down), or a real client does and the
// model only records (Record). Every request and reply is kept, in
// the order they were sent, for the test to read. Set Count and Usage
// before the first call; a Model is safe for concurrent calls, as an
// agent's parallel candidates make them (its rules run one at a time).
type Model struct {
	// Count keys the call counter n a rule sees: nil counts every call,
	// ByRole each role's calls apart (a planner's third turn is n = 2
	// however many probes ran between its turns).
	Count func(llm.Request) string
	// Usage fills in the zero token counts and attempts of each scripted
	// reply (Script, Texts and Replies set 10 prompt tokens, 5 completion
	// tokens and 1 attempt), so the agent's cost ledger has something to
	// add up. Record leaves the real replies' usage alone.
	Usage llm.Usage

	reply  func(req llm.Request, n int) (*llm.Response, error)
	client llm.Client // Record's: answers instead of reply

	mu     sync.Mutex
	counts map[string]int
	reqs   []llm.Request
	resps  []*llm.Response
}

// defaultUsage is what a scripted reply costs unless it says otherwise.
var defaultUsage = llm.Usage{PromptTokens: 10, CompletionTokens: 5, Attempts: 1}

// Script answers each call with reply(req, n), n counting the calls from 0
// (by Count's key when set). A nil reply is a call that failed after the
// client's retries (*llm.CallError), as an endpoint that went down. A
// reply without a finish reason ends "stop", or "tool_calls" when it
// calls tools.
func Script(reply func(req llm.Request, n int) *llm.Response) *Model {
	return &Model{Usage: defaultUsage, reply: func(req llm.Request, n int) (*llm.Response, error) {
		r := reply(req, n)
		if r == nil {
			return nil, endpointDown()
		}
		return r, nil
	}}
}

// endpointDown is a call's error after the client's retries against an
// endpoint that does not answer.
func endpointDown() error {
	return &llm.CallError{Model: "scripted", Attempts: 3, Err: errors.New("connection refused")}
}

// Texts answers each call with the text reply(n, last) writes, last being
// the content of the request's last message (what the agent just asked).
func Texts(reply func(n int, last string) string) *Model {
	return Script(func(req llm.Request, n int) *llm.Response {
		return Text(reply(n, LastMessage(req).Content))
	})
}

// Replies answers the calls with texts in order, the last one repeated.
func Replies(texts ...string) *Model {
	if len(texts) == 0 {
		panic("agenttest.Replies: no replies")
	}
	return Texts(func(n int, _ string) string { return texts[min(n, len(texts)-1)] })
}

// Down fails every call with err; nil fails them as a client does after
// its retries against an endpoint that is down (*llm.CallError).
func Down(err error) *Model {
	return &Model{reply: func(llm.Request, int) (*llm.Response, error) {
		if err == nil {
			return nil, endpointDown()
		}
		return nil, err
	}}
}

// Record forwards every call to c (llmsim, a real endpoint) and records
// it: what the agent asked when it asked, and what came back (nil until
// it has).
func Record(c llm.Client) *Model {
	return &Model{client: c}
}

// ByRole is a Count that counts each role's calls apart.
func ByRole(req llm.Request) string { return string(req.Role) }

// Chat implements llm.Client.
func (m *Model) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	// The agent may reuse its message slice for the next turn: keep a
	// copy of what this call carried.
	req.Messages = slices.Clone(req.Messages)
	req.Tools = slices.Clone(req.Tools)
	if m.client != nil {
		m.mu.Lock()
		m.count(req)
		i := len(m.reqs)
		m.reqs, m.resps = append(m.reqs, req), append(m.resps, nil)
		m.mu.Unlock()
		resp, err := m.client.Chat(ctx, req)
		m.mu.Lock()
		m.resps[i] = resp
		m.mu.Unlock()
		return resp, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.count(req)
	m.reqs = append(m.reqs, req)
	resp, err := m.reply(req, n)
	if resp != nil {
		cp := *resp
		resp = &cp
		m.fill(resp)
	}
	m.resps = append(m.resps, resp)
	return resp, err
}

// count counts req under its key and returns the count before it.
func (m *Model) count(req llm.Request) int {
	key := ""
	if m.Count != nil {
		key = m.Count(req)
	}
	if m.counts == nil {
		m.counts = map[string]int{}
	}
	n := m.counts[key]
	m.counts[key]++
	return n
}

func (m *Model) fill(r *llm.Response) {
	if r.FinishReason == "" {
		r.FinishReason = "stop"
		if len(r.ToolCalls) > 0 {
			r.FinishReason = "tool_calls"
		}
	}
	if r.Usage.PromptTokens == 0 {
		r.Usage.PromptTokens = m.Usage.PromptTokens
	}
	if r.Usage.CompletionTokens == 0 {
		r.Usage.CompletionTokens = m.Usage.CompletionTokens
	}
	if r.Usage.Attempts == 0 {
		r.Usage.Attempts = m.Usage.Attempts
	}
}

// Calls is how many calls the model got.
func (m *Model) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.reqs)
}

// CallsOf is how many calls of role the model got.
func (m *Model) CallsOf(role llm.Role) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.reqs {
		if r.Role == role {
			n++
		}
	}
	return n
}

// Requests are the calls the model got, in order.
func (m *Model) Requests() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

// Request is the i-th call the model got.
func (m *Model) Request(i int) llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[i]
}

// Responses are the replies, in the order of Requests (nil for a call
// that failed, or a recorded one still in flight).
func (m *Model) Responses() []*llm.Response {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.resps)
}

// Asked is the content of each call's last message, in order: what the
// agent asked each time.
func (m *Model) Asked() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(m.reqs))
	for i, r := range m.reqs {
		out[i] = LastMessage(r).Content
	}
	return out
}

// Reset forgets the calls, the counters included.
func (m *Model) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counts, m.reqs, m.resps = nil, nil, nil
}

// LastMessage is a request's last message (the zero message for none).
func LastMessage(req llm.Request) llm.Message {
	if len(req.Messages) == 0 {
		return llm.Message{}
	}
	return req.Messages[len(req.Messages)-1]
}

// Text is a reply that ends normally.
func Text(s string) *llm.Response { return &llm.Response{Text: s, FinishReason: "stop"} }

// Cut is a reply the token limit cut (finish_reason "length").
func Cut(s string) *llm.Response { return &llm.Response{Text: s, FinishReason: "length"} }

// Reasoned is a reply whose reasoning came apart from its text
// (reasoning_content: DeepSeek's reasoner, vLLM's reasoning parsers).
func Reasoned(reasoning, text string) *llm.Response {
	return &llm.Response{Text: text, Reasoning: reasoning, FinishReason: "stop"}
}

// ToolCalls is a reply that calls tools.
func ToolCalls(calls ...llm.ToolCall) *llm.Response {
	return &llm.Response{ToolCalls: calls, FinishReason: "tool_calls"}
}

// Call is one tool call, its arguments args as JSON.
func Call(id, name string, args any) llm.ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic("agenttest.Call: " + err.Error())
	}
	return llm.ToolCall{ID: id, Name: name, Arguments: string(b)}
}
