// Package llm is the chat interface the agents use, and its implementation on
// any OpenAI-compatible endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, or
// quorum's llmsim simulator).
//
// Unlike the reference ReFoRCE client, which exited the process on any HTTP
// error after the SDK's two retries, every call here ends in a response or
// an error the caller records: retries are bounded, jittered, and honour the
// provider's Retry-After and x-ratelimit-reset-* headers; 429s also pause the
// model cluster-wide through the shared limiter.
package llm

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	Role    string `json:"role"` // system, user or assistant
	Content string `json:"content"`
}

// User and Assistant build messages.
func User(s string) Message      { return Message{Role: "user", Content: s} }
func Assistant(s string) Message { return Message{Role: "assistant", Content: s} }
func System(s string) Message    { return Message{Role: "system", Content: s} }

// Request is one chat call.
type Request struct {
	Role     Role
	Messages []Message
	// Temperature overrides the role's model setting (ignored by reasoning
	// models).
	Temperature *float64
	// MaxTokens bounds the completion (max_completion_tokens); 0 uses the
	// model's setting.
	MaxTokens int
	// Seed is OpenAI's reproducibility parameter; quorum derives one per
	// candidate and step so simulated runs do not depend on scheduling.
	Seed *int64
}

// Usage is what one call cost.
type Usage struct {
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	ReasoningTokens  int           `json:"reasoning_tokens"`
	CachedTokens     int           `json:"cached_tokens"`
	Latency          time.Duration `json:"latency_ns"`
	Attempts         int           `json:"attempts"`
	RateLimited      int           `json:"rate_limited"`
	// LimiterWait is the time spent waiting for the shared quota.
	LimiterWait time.Duration `json:"limiter_wait_ns"`
}

// Add accumulates u into the receiver.
func (u *Usage) Add(o Usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.ReasoningTokens += o.ReasoningTokens
	u.CachedTokens += o.CachedTokens
	u.Latency += o.Latency
	u.Attempts += o.Attempts
	u.RateLimited += o.RateLimited
	u.LimiterWait += o.LimiterWait
}

// Response is a call's answer.
type Response struct {
	Text         string
	FinishReason string
	// Model is the model the endpoint says answered.
	Model string
	Usage Usage
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
	Model    string
	Attempts int
	// Status is the last HTTP status (0 for transport errors).
	Status int
	Err    error
	Usage  Usage
}

func (e *CallError) Error() string {
	if e.Status > 0 {
		return fmt.Sprintf("llm call to %s failed after %d attempts (last status %d): %v", e.Model, e.Attempts, e.Status, e.Err)
	}
	return fmt.Sprintf("llm call to %s failed after %d attempts: %v", e.Model, e.Attempts, e.Err)
}

func (e *CallError) Unwrap() error { return e.Err }
