package llm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/priority"
)

// floodLimit is where a flooding endpoint stops by itself, far past any
// bound of the client's: without the bounds, a test reads this much and
// fails on what it kept, instead of reading forever.
const floodLimit = 48 << 20

// counting is a transport that counts the response bytes the client read.
type counting struct {
	base http.RoundTripper
	read atomic.Int64
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if resp != nil {
		resp.Body = countedBody{resp.Body, &c.read}
	}
	return resp, err
}

type countedBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// flood writes piece until floodLimit bytes or a write fails (the client
// closed the connection), after writing head and before writing tail;
// closed records how it ended.
func flood(w http.ResponseWriter, head, piece, tail string, closed *atomic.Bool) {
	fl := w.(http.Flusher)
	io.WriteString(w, head)
	fl.Flush()
	for n := len(head); n < floodLimit; n += len(piece) {
		if _, err := io.WriteString(w, piece); err != nil {
			closed.Store(true)
			return
		}
	}
	io.WriteString(w, tail)
}

// kept is how many bytes of model output a response holds.
func kept(r *llm.Response) int {
	n := len(r.Text) + len(r.Reasoning)
	for _, tc := range r.ToolCalls {
		n += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	return n
}

// TestRepliesAreBounded: an endpoint that streams without end (text,
// reasoning, tool-call arguments, one endless line, endless keep-alive
// comments) or sends a huge whole completion gets its reply cut at the
// size bound derived from max_tokens (a fixed ceiling without one): the
// call returns a reply recorded as cut (finish reason "length", CutAt the
// bound) holding at most the bound, having read at most the wire bound,
// and the connection is closed (the endpoint's writes fail).
func TestRepliesAreBounded(t *testing.T) {
	t.Parallel()
	const maxTokens = 1000
	fill := strings.Repeat("x", 1024)
	tests := []struct {
		name      string
		maxTokens int
		noStream  bool
		// contentType of the answer; head, piece and tail its body.
		contentType       string
		head, piece, tail string
	}{
		{name: "endless text", maxTokens: maxTokens, contentType: "text/event-stream",
			piece: "data: " + chunk(`{"content":"`+fill+`"}`, "") + "\n\n", tail: "data: " + chunk(`{}`, "stop") + "\n\ndata: [DONE]\n\n"},
		{name: "endless text, no max_tokens: the fixed ceiling", contentType: "text/event-stream",
			piece: "data: " + chunk(`{"content":"`+fill+`"}`, "") + "\n\n", tail: "data: " + chunk(`{}`, "stop") + "\n\ndata: [DONE]\n\n"},
		{name: "endless reasoning", maxTokens: maxTokens, contentType: "text/event-stream",
			piece: "data: " + chunk(`{"reasoning_content":"`+fill+`"}`, "") + "\n\n", tail: "data: " + chunk(`{}`, "stop") + "\n\ndata: [DONE]\n\n"},
		{name: "endless tool-call arguments", maxTokens: maxTokens, contentType: "text/event-stream",
			head:  "data: " + chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"run_sql","arguments":""}}]}`, "") + "\n\n",
			piece: "data: " + chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"`+fill+`"}}]}`, "") + "\n\n",
			tail:  "data: " + chunk(`{}`, "tool_calls") + "\n\ndata: [DONE]\n\n"},
		{name: "one endless line", maxTokens: maxTokens, contentType: "text/event-stream",
			head: `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`, piece: fill,
			tail: `"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"},
		{name: "endless keep-alive comments", maxTokens: maxTokens, contentType: "text/event-stream",
			piece: ": keep-alive " + fill + "\n\n", tail: "data: " + chunk(`{"content":"SELECT 1"}`, "stop") + "\n\ndata: [DONE]\n\n"},
		{name: "a huge whole completion", maxTokens: maxTokens, noStream: true, contentType: "application/json",
			head: `{"id":"c1","object":"chat.completion","model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"`, piece: fill,
			tail: `"},"finish_reason":"stop"}]}`},
		{name: "a huge whole completion answered to a streamed request", maxTokens: maxTokens, contentType: "application/json",
			head: `{"id":"c1","object":"chat.completion","model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"`, piece: fill,
			tail: `"},"finish_reason":"stop"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var closed atomic.Bool
			ended := make(chan struct{})
			var ep scripted
			ts := ep.serve(t, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
				defer close(ended)
				w.Header().Set("Content-Type", tt.contentType)
				flood(w, tt.head, tt.piece, tt.tail, &closed)
			})
			tr := &counting{base: http.DefaultTransport}
			c := client(t, llm.Config{BaseURL: ts.URL + "/v1", NoStream: tt.noStream, MaxAttempts: 1, HTTPClient: &http.Client{Transport: tr}})
			resp, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleGenerate, MaxTokens: tt.maxTokens,
				Messages: []llm.Message{llm.User("How many orders? Answer in SQL.")}})
			if err != nil {
				t.Fatalf("err = %v, want a reply recorded as cut", err)
			}
			bound := llm.MaxReplyBytes(tt.maxTokens)
			if resp.FinishReason != "length" || resp.CutAt != bound || kept(resp) > bound {
				t.Errorf("finish %q, CutAt %d, %d bytes kept; want finish \"length\", CutAt %d, at most %d bytes kept",
					resp.FinishReason, resp.CutAt, kept(resp), bound, bound)
			}
			stream := !tt.noStream
			if wire := llm.WireBytes(tt.maxTokens, stream); tr.read.Load() > wire+1 {
				t.Errorf("the client read %d bytes, over the wire bound %d", tr.read.Load(), wire)
			}
			c.Close()
			<-ended // the endpoint ends: a write failed, or it reached its own limit
			if !closed.Load() {
				t.Errorf("the endpoint wrote all %d bytes: the client did not close the connection", floodLimit)
			}
			t.Logf("read %d bytes, kept %d (bound %d)", tr.read.Load(), kept(resp), bound)
		})
	}
}

// TestReplyBoundEdges: a reply just under its bound is whole; a whole
// completion over it (but within the wire bound) is cut to it, its text
// a prefix of what was sent; an error body of any size is cut short but
// keeps its status (a huge 400 is still not retried).
func TestReplyBoundEdges(t *testing.T) {
	t.Parallel()
	const maxTokens = 100
	bound := llm.MaxReplyBytes(maxTokens)
	under := strings.Repeat("y", bound-10)
	over := strings.Repeat("é", bound) // twice the bound in bytes
	tests := []struct {
		name     string
		noStream bool
		handler  func(w http.ResponseWriter)
		// text and finish are the reply's; status the error's when it fails.
		text, finish string
		cutAt        int
		status       int
	}{
		{name: "streamed, under the bound",
			handler: func(w http.ResponseWriter) {
				startSSE(w).send(chunk(`{"content":"`+under+`"}`, "stop"))
				io.WriteString(w, "data: [DONE]\n\n")
			},
			text: under, finish: "stop"},
		{name: "whole, over the bound", noStream: true,
			handler: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"`+over+`"},"finish_reason":"stop"}]}`)
			},
			text: over[:bound], finish: "length", cutAt: bound},
		{name: "a huge 400",
			handler: func(w http.ResponseWriter) {
				var closed atomic.Bool
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				flood(w, `{"error":{"message":"`, strings.Repeat("e", 1024), `"}}`, &closed)
			},
			status: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ep scripted
			ts := ep.serve(t, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) { tt.handler(w) })
			c := client(t, llm.Config{BaseURL: ts.URL + "/v1", NoStream: tt.noStream, MaxAttempts: 3, BaseBackoff: time.Millisecond})
			resp, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleGenerate, MaxTokens: maxTokens, Messages: []llm.Message{llm.User("SQL?")}})
			if tt.status != 0 {
				var ce *llm.CallError
				if !errors.As(err, &ce) || ce.Status != tt.status || ce.Attempts != 1 || len(err.Error()) > 64<<10 {
					t.Errorf("err %.300v (%d bytes); want a CallError with status %d after 1 attempt, its message bounded", err, len(fmt.Sprint(err)), tt.status)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v, want a reply", err)
			}
			if resp.Text != tt.text || resp.FinishReason != tt.finish || resp.CutAt != tt.cutAt {
				t.Errorf("text of %d bytes (want %d), finish %q (want %q), CutAt %d (want %d)",
					len(resp.Text), len(tt.text), resp.FinishReason, tt.finish, resp.CutAt, tt.cutAt)
			}
		})
	}
}

// TestInteractiveLimitCoversSilenceAfterHeaders: an endpoint that sends
// its response headers and then nothing holds an interactive call only
// until the interactive limit, not the stall timeout: the call fails with
// the interactive limit's reason.
func TestInteractiveLimitCoversSilenceAfterHeaders(t *testing.T) {
	t.Parallel()
	var ep scripted
	ts := ep.serve(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		startSSE(w)
		<-r.Context().Done()
	})
	// The stall timeout is longer than the interactive limit, and short
	// enough that, without the interactive limit on the body, the test
	// ends in seconds (with ErrStalled).
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", InteractiveCallTimeout: 400 * time.Millisecond,
		StallTimeout: 4 * time.Second, BaseBackoff: time.Millisecond})
	_, err := c.Chat(priority.Interactive(context.Background()), llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User("SQL?")}})
	var ce *llm.CallError
	if !errors.As(err, &ce) || !errors.Is(err, llm.ErrCallTimeout) || errors.Is(err, llm.ErrStalled) || !strings.Contains(err.Error(), "400ms") {
		t.Errorf("err = %v; want a CallError for the interactive limit (400ms), not the stall timeout", err)
	}
	if batch := llm.Defaulted(llm.Config{}); batch.StallTimeout < time.Minute {
		t.Errorf("the batch stall timeout is %v: a live batch stream must not be cut by the interactive rule", batch.StallTimeout)
	}
}

// TestCountingLongRunsIsLinear: a reply of one endless word (what a
// flooding endpoint sends) is counted in pieces, as tiktoken counts it
// whole: the byte-pair merge is quadratic in a word's length (64 KiB of
// one letter took 4 s, a megabyte an hour), so a cut reply of a megabyte
// would hold the call for its usage.
func TestCountingLongRunsIsLinear(t *testing.T) {
	t.Parallel()
	tok := llm.NewTokenizer()
	tests := []struct {
		name string
		text string
		// want is tiktoken's count of the text whole (measured on 64 KiB).
		want int
	}{
		{"64 KiB of one letter", strings.Repeat("x", 64<<10), 8 << 10},
		{"a MiB of one letter", strings.Repeat("x", 1<<20), 128 << 10},
		{"a MiB of a two-byte letter", strings.Repeat("é", 1<<19), 1 << 19},
		{"words", strings.Repeat("ab ", 1<<15), 1<<15 + 1},
	}
	for _, tt := range tests {
		if got := tok.Count("gpt-4o", tt.text); got != tt.want {
			t.Errorf("%s: %d tokens, want %d", tt.name, got, tt.want)
		}
	}
}

// BenchmarkCountLongRun: counting a megabyte of one letter, per byte.
func BenchmarkCountLongRun(b *testing.B) {
	tok := llm.NewTokenizer()
	text := strings.Repeat("x", 1<<20)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Count("gpt-4o", text)
	}
}
