package llm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// Why an attempt or a call gave up on an endpoint that showed no life.
var (
	// ErrHeaderTimeout: a streamed attempt got no response headers within
	// HeaderTimeout (or what was left of the call's limits).
	ErrHeaderTimeout = errors.New("the endpoint sent no response headers")
	// ErrStalled: a stream went silent for StallTimeout.
	ErrStalled = errors.New("the response stream stalled")
	// ErrEndpointDown: a call's attempts got only transport errors, no
	// headers or server errors for DeadEndpointTimeout.
	ErrEndpointDown = errors.New("the endpoint is down")
)

// watchdog cancels a streamed attempt that shows no life: no response
// headers within the header wait, then no bytes within the stall wait.
// Any bytes count (an SSE keep-alive comment too): the stall rule detects
// a dead connection, not a model thinking at length.
type watchdog struct {
	timer         *time.Timer
	header, stall time.Duration
	live          atomic.Bool
	bytes         atomic.Int64
}

func newWatchdog(header, stall time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{header: header, stall: stall}
	w.timer = time.AfterFunc(header, func() {
		if w.live.Load() {
			cancel(fmt.Errorf("%w: no data for %s after %d bytes (StallTimeout)", ErrStalled, w.stall, w.bytes.Load()))
			return
		}
		cancel(fmt.Errorf("%w within %s (HeaderTimeout, or what was left of the call's limits)", ErrHeaderTimeout, w.header.Round(time.Millisecond)))
	})
	return w
}

// headers marks the response headers come: from now on silence is timed.
func (w *watchdog) headers() {
	if w == nil {
		return
	}
	w.live.Store(true)
	w.timer.Reset(w.stall)
}

func (w *watchdog) read(n int) {
	if w == nil || n <= 0 {
		return
	}
	w.bytes.Add(int64(n))
	w.timer.Reset(w.stall)
}

func (w *watchdog) stop() {
	if w != nil {
		w.timer.Stop()
	}
}

// liveBody is a response body whose reads feed the watchdog.
type liveBody struct {
	io.ReadCloser
	w *watchdog
}

func (b liveBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.w.read(n)
	return n, err
}

// takeJSONAnswer handles an endpoint that answers a streamed request with
// a whole completion (it ignores stream): a 2xx body that is not an event
// stream and starts with '{' is kept in c for the caller to decode, and
// the stream go-openai reads is left empty. Anything else, SSE under an
// unexpected content type included, goes through untouched.
func (c *capture) takeJSONAnswer(resp *http.Response) error {
	if resp.StatusCode/100 != 2 || strings.Contains(resp.Header.Get("Content-Type"), "text/event-stream") {
		return nil
	}
	br := bufio.NewReader(resp.Body)
	for {
		b, err := br.Peek(1)
		if err != nil {
			break // an empty body: the stream reader says so
		}
		if b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n' {
			_, _ = br.ReadByte()
			continue
		}
		if b[0] != '{' {
			break
		}
		body, err := io.ReadAll(br) // bounded below (boundedBody)
		resp.Body.Close()
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.json = body
		c.mu.Unlock()
		resp.Body = io.NopCloser(strings.NewReader(""))
		return nil
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{br, resp.Body}
	return nil
}

// hasToken: the chunk carries generated output, not just the role that
// some servers send before the prompt is processed.
func hasToken(ch openai.ChatCompletionStreamResponse) bool {
	for _, c := range ch.Choices {
		if c.Delta.Content != "" || c.Delta.ReasoningContent != "" || len(c.Delta.ToolCalls) > 0 || c.FinishReason != "" {
			return true
		}
	}
	return false
}

// streamed gathers a streamed completion into the response the
// non-streamed call returns.
type streamed struct {
	resp      openai.ChatCompletionResponse
	text      strings.Builder
	reasoning strings.Builder
	calls     []openai.ToolCall
	finish    openai.FinishReason
	choice    bool
	// size keeps text, reasoning and tool calls within the reply's bound.
	size replyCap
}

// maxToolCalls bounds the index a tool-call delta may name.
const maxToolCalls = 256

func (s *streamed) add(ch openai.ChatCompletionStreamResponse) {
	if s.resp.ID == "" {
		s.resp.ID = ch.ID
	}
	if s.resp.Model == "" {
		s.resp.Model = ch.Model
	}
	if ch.Usage != nil {
		// The final chunk (include_usage); some servers send a running
		// count on every chunk, whose last is the total.
		s.resp.Usage = *ch.Usage
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue // n is always 1
		}
		s.choice = true
		s.text.WriteString(s.size.take(c.Delta.Content))
		s.reasoning.WriteString(s.size.take(c.Delta.ReasoningContent))
		for _, tc := range c.Delta.ToolCalls {
			s.addCall(tc)
		}
		if c.FinishReason != "" {
			s.finish = c.FinishReason
		}
	}
}

// addCall adds a tool-call piece: the call its index names gets the id,
// type and name of its first piece and every piece's arguments.
func (s *streamed) addCall(tc openai.ToolCall) {
	i := len(s.calls) - 1
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case tc.ID != "" && (i < 0 || s.calls[i].ID != tc.ID):
		i = len(s.calls) // a server that numbers no pieces starts a call with its id
	case i < 0:
		i = 0
	}
	if i < 0 || i >= maxToolCalls {
		return
	}
	for len(s.calls) <= i {
		s.calls = append(s.calls, openai.ToolCall{})
	}
	c := &s.calls[i]
	if c.ID == "" {
		c.ID = s.size.take(tc.ID)
	}
	if c.Type == "" {
		c.Type = tc.Type
	}
	if c.Function.Name == "" {
		c.Function.Name = s.size.take(tc.Function.Name)
	}
	c.Function.Arguments += s.size.take(tc.Function.Arguments)
}

// cut is the gathered stream as a completion cut at the reply's bound.
func (s *streamed) cut() openai.ChatCompletionResponse {
	s.choice, s.finish = true, finishLength
	return s.completion()
}

// completion is the gathered stream as one completion.
func (s *streamed) completion() openai.ChatCompletionResponse {
	out := s.resp
	if !s.choice {
		return out // no choices: the caller says so
	}
	msg := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: s.text.String(), ReasoningContent: s.reasoning.String()}
	for _, c := range s.calls {
		if c.ID != "" || c.Function.Name != "" || c.Function.Arguments != "" {
			c.Index = nil
			msg.ToolCalls = append(msg.ToolCalls, c)
		}
	}
	out.Choices = []openai.ChatCompletionChoice{{Message: msg, FinishReason: s.finish}}
	return out
}

// rejectsStreaming reports whether err is an endpoint refusing a streamed
// request as such (stream or stream_options unsupported).
func rejectsStreaming(err error) bool {
	return statusOf(err) == http.StatusBadRequest && strings.Contains(strings.ToLower(err.Error()), "stream")
}

// attemptLimits are one attempt's time limits (see Config).
type attemptLimits struct {
	// plain bounds a non-streamed attempt, whose answer is its only sign
	// of life; whole bounds a streamed one, however live, failing it with
	// wholeCause (nil: context.DeadlineExceeded).
	plain, whole time.Duration
	wholeCause   error
	// header and stall are a stream's waits for its headers and then
	// between bytes.
	header, stall time.Duration
}

// send makes one attempt, streamed or not. answeredJSON says the endpoint
// answered a streamed request with a whole completion. A reply that
// passed its size bound is returned cut (capt.cut), with what was kept.
func (c *OpenAI) send(ctx context.Context, ep *endpoint, oreq openai.ChatCompletionRequest, capt *capture, stream bool, lim attemptLimits) (resp openai.ChatCompletionResponse, answeredJSON bool, err error) {
	if !stream {
		actx, cancel := context.WithTimeout(context.WithValue(ctx, captureKey{}, capt), lim.plain)
		defer cancel()
		resp, err = ep.client.CreateChatCompletion(actx, oreq)
		return cutIfBounded(resp, capt, err), false, nilIfBounded(err)
	}
	actx, cancel := context.WithTimeoutCause(ctx, lim.whole, lim.wholeCause)
	defer cancel()
	wctx, stop := context.WithCancelCause(context.WithValue(actx, captureKey{}, capt))
	defer stop(nil)
	capt.watch = newWatchdog(lim.header, lim.stall, stop)
	defer capt.watch.stop()
	oreq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	resp, answeredJSON, err = readStream(wctx, ep, oreq, capt)
	if err != nil {
		// The watchdog's or the deadline's reason, not the "context
		// canceled" it caused.
		if cause := context.Cause(wctx); errors.Is(cause, ErrHeaderTimeout) || errors.Is(cause, ErrStalled) ||
			(lim.wholeCause != nil && errors.Is(cause, lim.wholeCause)) {
			err = cause
		}
	}
	return cutIfBounded(resp, capt, err), answeredJSON, nilIfBounded(err)
}

// cutIfBounded is resp, or, when err is the reply passing its size bound
// before any of it could be kept (a whole completion over its bound), an
// empty reply cut at it.
func cutIfBounded(resp openai.ChatCompletionResponse, capt *capture, err error) openai.ChatCompletionResponse {
	if !errors.Is(err, errReplyBound) {
		return resp
	}
	capt.cut = true
	var s streamed
	return s.cut()
}

func nilIfBounded(err error) error {
	if errors.Is(err, errReplyBound) {
		return nil
	}
	return err
}

func readStream(ctx context.Context, ep *endpoint, oreq openai.ChatCompletionRequest, capt *capture) (openai.ChatCompletionResponse, bool, error) {
	var resp openai.ChatCompletionResponse
	s, err := ep.client.CreateChatCompletionStream(ctx, oreq)
	if err != nil {
		return resp, false, err
	}
	defer s.Close()
	capt.mu.Lock()
	body := capt.json
	capt.mu.Unlock()
	if body != nil {
		if err := json.Unmarshal(body, &resp); err != nil {
			return resp, false, fmt.Errorf("the endpoint answered a streamed request with JSON that is not a completion: %w", err)
		}
		return resp, len(resp.Choices) > 0, nil
	}
	acc := streamed{size: replyCap{left: MaxReplyBytes(oreq.MaxCompletionTokens)}}
	for {
		chunk, err := s.Recv()
		if errors.Is(err, errReplyBound) {
			// The stream passed its wire bounds: what was kept is the reply.
			capt.cut = true
			return acc.cut(), false, nil
		}
		if errors.Is(err, io.EOF) {
			if acc.choice && acc.finish == "" {
				// A stream ends with a finish reason; one without was cut
				// short, and its text is not the answer.
				return resp, false, errors.New("the response stream ended without a finish reason (cut short; set stream: false for an endpoint that never sends one)")
			}
			return acc.completion(), false, nil
		}
		if err != nil {
			return resp, false, fmt.Errorf("reading the response stream: %w", err)
		}
		if hasToken(chunk) {
			capt.firstToken(ctx)
		}
		acc.add(chunk)
		if acc.size.full {
			// Closing the stream unread closes the connection.
			capt.cut = true
			return acc.cut(), false, nil
		}
	}
}
