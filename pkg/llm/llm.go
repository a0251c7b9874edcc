// Package llm is the chat interface the agents use, and its implementation on
// any OpenAI-compatible endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, or
// quorum's llmsim simulator).
//
// Unlike the reference ReFoRCE client, which exited the process on any HTTP
// error after the SDK's two retries, every call here ends in a response or
// an error the caller records: retries are bounded, jittered, and honour the
// provider's delay as OpenAI's SDKs read it: Retry-After-Ms first, then
// Retry-After, then (for 429s) x-ratelimit-reset-*. A 429 pauses the model
// cluster-wide through the shared limiter for that delay, and when it
// names one it spends none of the call's attempts (a bounded number of
// such waits, see Config.MaxAttempts).
package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Role is the agent step a call serves; each role can use its own model.
type Role string

// Roles the agents use.
const (
	RoleGenerate Role = "generate"
	RoleExplore  Role = "explore"
	RoleLink     Role = "link"
	RoleFormat   Role = "format"
	RoleVerify   Role = "verify"
	RolePlan     Role = "plan"
	RoleVote     Role = "vote"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"` // system, user, assistant or tool
	Content string `json:"content"`
	// Name optionally tells participants of the same role apart.
	Name string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is, on a role "tool" message, the call whose result
	// Content carries.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// User and Assistant build messages.
func User(s string) Message      { return Message{Role: "user", Content: s} }
func Assistant(s string) Message { return Message{Role: "assistant", Content: s} }
func System(s string) Message    { return Message{Role: "system", Content: s} }

// ToolResult is the message that answers the tool call callID.
func ToolResult(callID, content string) Message {
	return Message{Role: "tool", Content: content, ToolCallID: callID}
}

// ToolCall is one function call the model asked for.
type ToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is JSON text, as the model wrote it (it may be invalid).
	Arguments string `json:"arguments"`
}

// Tool is a function the model may call.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments (an object schema);
	// empty means no arguments.
	Parameters json.RawMessage
}

// Tool choices besides a tool's name, which forces that function.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceNone     = "none"
)

// Request is one chat call.
type Request struct {
	Role     Role
	Messages []Message
	// Tools the model may call, and whether it must: "" or "auto" (the
	// model decides), "required", "none", or a tool's name (call that
	// one).
	Tools      []Tool
	ToolChoice string
	// Stop sequences end the completion (excluded from the text).
	Stop []string
	// Temperature and TopP override the role's model setting (ignored by
	// reasoning models, which reject them).
	Temperature *float64
	TopP        *float64
	// MaxTokens bounds the completion (max_completion_tokens); 0 uses the
	// model's setting.
	MaxTokens int
	// Seed is OpenAI's reproducibility parameter; quorum derives one per
	// candidate and step so simulated runs do not depend on scheduling.
	Seed *int64
	// ContinueFinal asks the endpoint to continue the last message, an
	// assistant prefix, instead of starting a new one: vLLM's
	// continue_final_message (with add_generation_prompt off) and the
	// "prefix" flag of DeepSeek's and LiteLLM's prefix completion are
	// sent together. The reply's Text is the continuation only.
	ContinueFinal bool
}

// Usage is what one call cost.
type Usage struct {
	// Endpoint and Model name the endpoint and model of one call; Add
	// leaves them alone, since a sum spans calls.
	Endpoint         string `json:"endpoint,omitempty"`
	Model            string `json:"model,omitempty"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	ReasoningTokens  int    `json:"reasoning_tokens"`
	CachedTokens     int    `json:"cached_tokens"`
	// Money is what the call cost at its endpoint's price for its model
	// (Endpoint.Prices, else the built-in table; 0 for a model neither
	// knows).
	Money   float64       `json:"money,omitempty"`
	Latency time.Duration `json:"latency_ns"`
	// Attempts is the requests the call sent, 429s included; RateLimited
	// is how many were answered 429. Config.MaxAttempts bounds all but
	// the 429s that named a retry delay, so Attempts may exceed it.
	Attempts    int `json:"attempts"`
	RateLimited int `json:"rate_limited"`
	// LimiterWait is the time spent waiting for the shared quota.
	LimiterWait time.Duration `json:"limiter_wait_ns"`
	// Tokenize is the time spent counting the prompt's tokens.
	Tokenize time.Duration `json:"tokenize_ns,omitempty"`
	// Fallbacks counts calls answered by a fallback model, every
	// deployment of the role's own being down.
	Fallbacks int `json:"fallback_calls,omitempty"`
	// WarmUpWait is the time a call waited for the first call with the
	// same prompt start to warm the provider's cache (Endpoint.WarmUp).
	WarmUpWait time.Duration `json:"warm_up_wait_ns,omitempty"`
}

// Add accumulates the counts of o into the receiver.
func (u *Usage) Add(o Usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.ReasoningTokens += o.ReasoningTokens
	u.CachedTokens += o.CachedTokens
	u.Money += o.Money
	u.Latency += o.Latency
	u.Attempts += o.Attempts
	u.RateLimited += o.RateLimited
	u.LimiterWait += o.LimiterWait
	u.Tokenize += o.Tokenize
	u.Fallbacks += o.Fallbacks
	u.WarmUpWait += o.WarmUpWait
}

// Response is a call's answer.
type Response struct {
	Text string
	// Reasoning is the reasoning the endpoint returned beside the text
	// (reasoning_content: DeepSeek's reasoner, vLLM's reasoning parsers);
	// reasoning inline in Text (<think>…</think>) stays there.
	Reasoning string
	// ToolCalls are the functions the model asked to call (FinishReason
	// "tool_calls"); answer each with a ToolResult message.
	ToolCalls []ToolCall
	// FinishReason is why the reply ended: "stop", "tool_calls", or
	// "length" for a reply cut by the token limit or by the client's
	// size bound (then CutAt is set).
	FinishReason string
	// CutAt is, for a reply the client stopped reading at its size bound
	// (MaxReplyBytes of the request's completion bound), that bound in
	// bytes; the reply holds what came before it. 0: not cut by the
	// client.
	CutAt int
	// Model is the model the endpoint says answered.
	Model string
	// Endpoint is the name of the endpoint that answered.
	Endpoint string
	Usage    Usage
}

// Message is the assistant message to append to the conversation.
func (r *Response) Message() Message {
	return Message{Role: "assistant", Content: r.Echo(), ToolCalls: r.ToolCalls}
}

// EchoBytes bounds a cut reply's text as it goes back into a
// conversation.
const EchoBytes = 8 << 10

// Echo is the reply's text as an agent sends it back in the next turn. A
// reply the client cut at its size bound (CutAt) is kept to its first
// EchoBytes and a note: it holds no usable answer, and sent back whole
// (up to the bound, megabytes) it would cost every later turn its size in
// prompt tokens.
func (r *Response) Echo() string {
	if r.CutAt == 0 || len(r.Text) <= EchoBytes {
		return r.Text
	}
	head := r.Text[:EchoBytes]
	for len(head) > 0 && !utf8.RuneStart(r.Text[len(head)]) {
		head = head[:len(head)-1]
	}
	return head + fmt.Sprintf("\n[… the rest of this reply (%d bytes) is left out: it was cut at the size limit]", len(r.Text)-len(head))
}

// Client is what agents call.
type Client interface {
	Chat(ctx context.Context, req Request) (*Response, error)
}

// ErrContextTooLong is returned, without sending, when a prompt plus the
// completion budget exceeds the model's context window.
var ErrContextTooLong = errors.New("prompt exceeds the model's context window")

// CallError is a call that failed after its attempts. Usage holds what the
// failed attempts cost, so the caller can account for them.
type CallError struct {
	Model string
	// Endpoint is the name of the endpoint the call went to, URL its base
	// URL with any credentials removed.
	Endpoint string
	URL      string
	// Attempts is the requests sent, as Usage.Attempts counts them.
	Attempts int
	// Status is the last HTTP status (0 for transport errors).
	Status int
	Err    error
	Usage  Usage
}

func (e *CallError) Error() string {
	to := e.Model
	if e.Endpoint != "" && e.Endpoint != DefaultEndpoint {
		to += " at endpoint " + e.Endpoint
	}
	if e.URL != "" {
		to += " (" + e.URL + ")"
	}
	if e.Status > 0 {
		return fmt.Sprintf("llm call to %s failed after %d attempts (last status %d): %v", to, e.Attempts, e.Status, e.Err)
	}
	return fmt.Sprintf("llm call to %s failed after %d attempts: %v", to, e.Attempts, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }
