package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// scripted is an endpoint whose chat handler a test writes; it keeps the
// request bodies it got.
type scripted struct {
	mu     sync.Mutex
	bodies []map[string]any
}

func (s *scripted) serve(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body map[string]any)) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	ts := httptest.NewServer(s.handler(func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		h(w, r.WithContext(stopOn(r.Context(), stop)), body)
	}))
	t.Cleanup(func() { close(stop); ts.Close() })
	return ts
}

// handler records each request's body and passes it on to h (serve's
// server, or fakeTransport inside a synctest bubble).
func (s *scripted) handler(h func(w http.ResponseWriter, r *http.Request, body map[string]any)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		h(w, r, body)
	}
}

// streamed lists whether each request asked for a stream.
func (s *scripted) streamed() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []bool
	for _, b := range s.bodies {
		out = append(out, b["stream"] == true)
	}
	return out
}

// stopOn is ctx, also done when stop closes (the test ends).
func stopOn(ctx context.Context, stop <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx
}

// sse writes an event stream: headers at once, then each event flushed.
type sse struct{ w http.ResponseWriter }

func startSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	return sse{w}
}

func (s sse) send(events ...string) {
	for _, e := range events {
		fmt.Fprintf(s.w, "data: %s\n\n", e)
	}
	s.w.(http.Flusher).Flush()
}

func (s sse) raw(text string) {
	io.WriteString(s.w, text)
	s.w.(http.Flusher).Flush()
}

// chunk is a chat.completion.chunk with one choice's delta (and finish
// reason when not empty).
func chunk(delta string, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"c1","object":"chat.completion.chunk","model":"m-1","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + f + `}]}`
}

func usageChunk(u string) string {
	return `{"id":"c1","object":"chat.completion.chunk","model":"m-1","choices":[],"usage":` + u + `}`
}

const plainCompletion = `{"id":"c1","object":"chat.completion","model":"m-1","choices":[{"index":0,"message":{"role":"assistant","content":"SELECT 1"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`

func ask(ctx context.Context, c *llm.OpenAI) (*llm.Response, error) {
	return c.Chat(ctx, llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User("How many orders? Answer in SQL.")}})
}

// TestStreamAssemblesTheResponse: a streamed answer becomes the Response
// the non-streamed call gave: text and reasoning deltas joined, tool
// calls gathered by index from split pieces, the finish reason, and the
// usage of the final chunk (estimated when the stream has none). The
// request asks for a stream with usage.
func TestStreamAssemblesTheResponse(t *testing.T) {
	t.Parallel()
	role := chunk(`{"role":"assistant","content":""}`, "")
	tok := llm.NewTokenizer()
	tests := []struct {
		name   string
		events []string
		// keepAlive is sent between events: SSE comments, as gateways
		// send while a model thinks.
		keepAlive string
		want      llm.Response
	}{
		{name: "text, reasoning and usage",
			events: []string{role, chunk(`{"reasoning_content":"Let me "}`, ""), chunk(`{"reasoning_content":"think."}`, ""),
				chunk(`{"content":"SELECT"}`, ""), chunk(`{"content":" 1"}`, ""), chunk(`{}`, "stop"),
				usageChunk(`{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"completion_tokens_details":{"reasoning_tokens":3},"prompt_tokens_details":{"cached_tokens":2}}`)},
			want: llm.Response{Text: "SELECT 1", Reasoning: "Let me think.", FinishReason: "stop", Model: "m-1",
				Usage: llm.Usage{PromptTokens: 11, CompletionTokens: 7, ReasoningTokens: 3, CachedTokens: 2}}},
		{name: "two tool calls, arguments split and interleaved",
			events: []string{role,
				chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"run_sql","arguments":""}}]}`, ""),
				chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"describe","arguments":""}}]}`, ""),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"sql\":"}}]}`, ""),
				chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"table\""}}]}`, ""),
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"SELECT 1\"}"}}]}`, ""),
				chunk(`{"tool_calls":[{"index":1,"function":{"arguments":":\"t\"}"}}]}`, ""),
				chunk(`{}`, "tool_calls"), usageChunk(`{"prompt_tokens":20,"completion_tokens":12,"total_tokens":32}`)},
			want: llm.Response{FinishReason: "tool_calls", Model: "m-1", ToolCalls: []llm.ToolCall{
				{ID: "call_a", Name: "run_sql", Arguments: `{"sql":"SELECT 1"}`}, {ID: "call_b", Name: "describe", Arguments: `{"table":"t"}`}},
				Usage: llm.Usage{PromptTokens: 20, CompletionTokens: 12}}},
		{name: "cut by the token limit",
			events: []string{role, chunk(`{"content":"SELECT * FR"}`, ""), chunk(`{}`, "length"), usageChunk(`{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}`)},
			want:   llm.Response{Text: "SELECT * FR", FinishReason: "length", Model: "m-1", Usage: llm.Usage{PromptTokens: 5, CompletionTokens: 4}}},
		{name: "no usage: counted by the tokenizer",
			events: []string{role, chunk(`{"content":"SELECT 1"}`, "stop")},
			want: llm.Response{Text: "SELECT 1", FinishReason: "stop", Model: "m-1",
				Usage: llm.Usage{PromptTokens: tok.CountMessages("gpt-4o", []llm.Message{llm.User("How many orders? Answer in SQL.")}),
					CompletionTokens: tok.CountCompletion("gpt-4o", "SELECT 1", nil)}}},
		{name: "keep-alive comments between chunks (more than go-openai's 300 by default)",
			events:    []string{role, chunk(`{"content":"SELECT 1"}`, ""), chunk(`{}`, "stop"), usageChunk(`{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}`)},
			keepAlive: strings.Repeat(": keep-alive\n\n", 400),
			want:      llm.Response{Text: "SELECT 1", FinishReason: "stop", Model: "m-1", Usage: llm.Usage{PromptTokens: 5, CompletionTokens: 3}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ep scripted
			ts := ep.serve(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
				s := startSSE(w)
				for _, e := range tt.events {
					s.raw(tt.keepAlive)
					s.send(e)
				}
				s.raw("data: [DONE]\n\n")
			})
			c := client(t, llm.Config{BaseURL: ts.URL + "/v1", MaxAttempts: 1})
			got, err := ask(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			want.Endpoint = llm.DefaultEndpoint
			if got.Text != want.Text || got.Reasoning != want.Reasoning || got.FinishReason != want.FinishReason || got.Model != want.Model ||
				fmt.Sprint(got.ToolCalls) != fmt.Sprint(want.ToolCalls) || got.Endpoint != want.Endpoint {
				t.Errorf("response %+v\nwant     %+v", got, want)
			}
			u := got.Usage
			if u.PromptTokens != want.Usage.PromptTokens || u.CompletionTokens != want.Usage.CompletionTokens ||
				u.ReasoningTokens != want.Usage.ReasoningTokens || u.CachedTokens != want.Usage.CachedTokens || u.Attempts != 1 {
				t.Errorf("usage %+v, want the tokens of %+v", u, want.Usage)
			}
			ep.mu.Lock()
			body := ep.bodies[0]
			ep.mu.Unlock()
			if opts, _ := body["stream_options"].(map[string]any); body["stream"] != true || opts["include_usage"] != true {
				t.Errorf("request %v: want stream with stream_options.include_usage", body)
			}
		})
	}
}

// TestStreamCutShortIsAnError: a stream that ends without a finish reason
// was cut; its partial text is not an answer.
func TestStreamCutShortIsAnError(t *testing.T) {
	t.Parallel()
	var ep scripted
	ts := ep.serve(t, func(w http.ResponseWriter, r *http.Request, _ map[string]any) {
		startSSE(w).send(chunk(`{"role":"assistant","content":"SELECT * FROM"}`, ""))
	})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", MaxAttempts: 2, BaseBackoff: time.Millisecond})
	_, err := ask(context.Background(), c)
	var ce *llm.CallError
	if !errors.As(err, &ce) || ce.Attempts != 2 || !strings.Contains(err.Error(), "without a finish reason") {
		t.Errorf("err = %v, want a CallError after 2 attempts saying the stream ended without a finish reason", err)
	}
}

// TestStreamTimeouts: an endpoint that sends no headers fails each attempt
// after HeaderTimeout; a stream gone silent fails after StallTimeout,
// saying so; a slow but live stream, silent before its first chunk for
// longer than HeaderTimeout and running for longer than StallTimeout in
// all, is answered.
func TestStreamTimeouts(t *testing.T) {
	t.Parallel()
	role := chunk(`{"role":"assistant","content":""}`, "")
	tests := []struct {
		name    string
		cfg     llm.Config
		handler func(w http.ResponseWriter, r *http.Request)
		// want is the error the call ends in (nil: answered); attempts
		// its attempts; within the most it may take and atLeast the
		// least, on the fake clock of a synctest bubble (exact: two
		// header timeouts and a backoff of at most 10ms; one stall
		// timeout; 600ms of thinking and nine 250ms paces).
		want            error
		attempts        int
		atLeast, within time.Duration
		alsoSays        string
	}{
		{name: "no headers: each attempt ends at the header timeout",
			cfg: llm.Config{HeaderTimeout: 300 * time.Millisecond, MaxAttempts: 2, BaseBackoff: 10 * time.Millisecond},
			handler: func(w http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			},
			want: llm.ErrHeaderTimeout, attempts: 2, atLeast: 600 * time.Millisecond, within: 610 * time.Millisecond, alsoSays: "no response headers within 300ms"},
		{name: "stalled mid-stream",
			cfg: llm.Config{StallTimeout: 300 * time.Millisecond, MaxAttempts: 1},
			handler: func(w http.ResponseWriter, r *http.Request) {
				startSSE(w).send(role, chunk(`{"content":"SELECT"}`, ""))
				<-r.Context().Done()
			},
			want: llm.ErrStalled, attempts: 1, atLeast: 300 * time.Millisecond, within: 300 * time.Millisecond, alsoSays: "no data for 300ms"},
		{name: "slow but live: silent past the header timeout, longer than the stall timeout in all",
			cfg: llm.Config{HeaderTimeout: 200 * time.Millisecond, StallTimeout: 1500 * time.Millisecond, MaxAttempts: 1},
			handler: func(w http.ResponseWriter, r *http.Request) {
				s := startSSE(w)
				// Thinking: nothing for three header timeouts.
				pace := time.NewTimer(600 * time.Millisecond)
				defer pace.Stop()
				for i := 0; i < 10; i++ {
					select {
					case <-r.Context().Done():
						return
					case <-pace.C:
					}
					s.send(chunk(fmt.Sprintf(`{"content":"w%d "}`, i), ""))
					pace.Reset(250 * time.Millisecond)
				}
				s.send(chunk(`{}`, "stop"))
				s.raw("data: [DONE]\n\n")
			},
			attempts: 1, atLeast: 2850 * time.Millisecond, within: 2850 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				var ep scripted
				c := fakeClient(t, tt.cfg, ep.handler(func(w http.ResponseWriter, r *http.Request, _ map[string]any) { tt.handler(w, r) }))
				start := time.Now()
				resp, err := ask(context.Background(), c)
				took := time.Since(start)
				t.Logf("took %v (fake clock): %v", took, err)
				if took < tt.atLeast || took > tt.within {
					t.Errorf("the call took %v on the fake clock, want between %v and %v", took, tt.atLeast, tt.within)
				}
				if tt.want == nil {
					if err != nil {
						t.Fatalf("err = %v, want an answer", err)
					}
					if !strings.HasPrefix(resp.Text, "w0 w1 ") || resp.Usage.Attempts != tt.attempts {
						t.Errorf("response %+v", resp)
					}
					return
				}
				var ce *llm.CallError
				if !errors.As(err, &ce) || !errors.Is(err, tt.want) || ce.Attempts != tt.attempts || !strings.Contains(err.Error(), tt.alsoSays) {
					t.Errorf("err = %v, want a CallError after %d attempts wrapping %v and saying %q", err, tt.attempts, tt.want, tt.alsoSays)
				}
			})
		})
	}
}

// TestSimulatorFaultsOnTheStream: llmsim's hang sends no headers (a dead
// endpoint, caught by the header timeout), and its stall sends headers and
// a few chunks, then silence (caught by the stall timeout).
func TestSimulatorFaultsOnTheStream(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	for _, tt := range []struct {
		name   string
		faults llmsim.Faults
		cfg    llm.Config
		want   error
	}{
		{"hang", llmsim.Faults{Hang: 1, HangFor: time.Minute}, llm.Config{HeaderTimeout: 300 * time.Millisecond}, llm.ErrHeaderTimeout},
		// The simulator writes the reply before its headers: room for that
		// on a loaded machine.
		{"stall", llmsim.Faults{Stall: 1, HangFor: time.Minute}, llm.Config{HeaderTimeout: 20 * time.Second, StallTimeout: 300 * time.Millisecond}, llm.ErrStalled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ts := sim(t, llmsim.Config{Dataset: ds, Faults: tt.faults})
			cfg := tt.cfg
			cfg.BaseURL, cfg.MaxAttempts, cfg.BaseBackoff = ts.URL+"/v1", 2, 10*time.Millisecond
			c := client(t, cfg)
			_, err := c.Chat(context.Background(), generate(ds.Examples[0].Question, 1))
			var ce *llm.CallError
			if !errors.As(err, &ce) || ce.Attempts != 2 || !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want a CallError after 2 attempts wrapping %v", err, tt.want)
			}
			if f := s.Stats().Faults; f != 2 {
				t.Errorf("simulator faults %d, want 2", f)
			}
		})
	}
}

// TestStreamedAndPlainAnswersAgree: through llmsim, a streamed call and a
// non-streamed one (an endpoint with NoStream) give the same Response:
// text, reasoning (DeepSeek's reasoning_content), tool calls, finish
// reasons (length included) and usage (o3's reasoning tokens included).
func TestStreamedAndPlainAnswersAgree(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := sim(t, llmsim.Config{Dataset: ds, Personas: llmsim.Personas{"deepseek-reasoner": llmsim.PersonaDeepSeekReasoner, "o3": llmsim.PersonaO3}})
	roles := map[llm.Role]llm.ModelConfig{
		llm.RoleExplore: {Name: "deepseek-reasoner"},
		llm.RoleVerify:  {Name: "o3"},
	}
	streamed := client(t, llm.Config{BaseURL: ts.URL + "/v1", Models: roles})
	plain := client(t, llm.Config{BaseURL: ts.URL + "/v1", Models: roles, NoStream: true})
	for _, tt := range []struct {
		name   string
		role   llm.Role
		tools  bool
		max    int
		finish string
	}{
		{name: "canonical", role: llm.RoleGenerate, finish: "stop"},
		{name: "tool call", role: llm.RoleGenerate, tools: true, finish: "tool_calls"},
		{name: "cut by max tokens", role: llm.RoleGenerate, max: 5, finish: "length"},
		{name: "reasoning_content", role: llm.RoleExplore, finish: "stop"},
		{name: "reasoning tokens", role: llm.RoleVerify, finish: "stop"},
	} {
		req := generate(ds.Examples[2].Question, 5)
		req.Role, req.MaxTokens = tt.role, tt.max
		if tt.tools {
			req.Tools = []llm.Tool{runSQL}
		}
		a, err := streamed.Chat(context.Background(), req)
		if err != nil {
			t.Fatalf("%s, streamed: %v", tt.name, err)
		}
		b, err := plain.Chat(context.Background(), req)
		if err != nil {
			t.Fatalf("%s, plain: %v", tt.name, err)
		}
		if a.Text != b.Text || a.Reasoning != b.Reasoning || fmt.Sprint(a.ToolCalls) != fmt.Sprint(b.ToolCalls) || a.FinishReason != b.FinishReason ||
			a.Model != b.Model || a.FinishReason != tt.finish {
			t.Errorf("%s: streamed %+v\nplain %+v", tt.name, a, b)
		}
		ua, ub := a.Usage, b.Usage
		if ua.PromptTokens != ub.PromptTokens || ua.CompletionTokens != ub.CompletionTokens || ua.ReasoningTokens != ub.ReasoningTokens {
			t.Errorf("%s: streamed usage %+v, plain %+v", tt.name, ua, ub)
		}
		if tt.name == "reasoning_content" && a.Reasoning == "" || tt.name == "reasoning tokens" && ua.ReasoningTokens == 0 {
			t.Errorf("%s: the persona's reasoning is missing: %+v", tt.name, a)
		}
	}
}

// TestEndpointsThatCannotStream: an endpoint refusing stream_options with a
// 400, or answering a streamed request with a whole JSON completion (with
// or without its content type), is answered all the same, called without
// streaming from then on, and warned about once; stream: false in the
// configuration skips streaming from the start, without a warning.
func TestEndpointsThatCannotStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		noStream bool
		handler  func(w http.ResponseWriter, body map[string]any)
		// streamed is whether each request of two calls was streamed.
		streamed []bool
		warned   int
	}{
		{name: "400 naming stream_options",
			handler: func(w http.ResponseWriter, body map[string]any) {
				if body["stream"] == true {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, `{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error"}}`)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, plainCompletion)
			},
			streamed: []bool{true, false, false}, warned: 1},
		{name: "JSON answer to a streamed request",
			handler: func(w http.ResponseWriter, _ map[string]any) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, plainCompletion)
			},
			streamed: []bool{true, false}, warned: 1},
		{name: "JSON answer without a content type",
			handler: func(w http.ResponseWriter, _ map[string]any) {
				io.WriteString(w, "\n"+plainCompletion) // sniffed as text/plain
			},
			streamed: []bool{true, false}, warned: 1},
		{name: "stream: false configured", noStream: true,
			handler: func(w http.ResponseWriter, body map[string]any) {
				if body["stream"] == true {
					http.Error(w, `{"error":{"message":"streamed","type":"server_error"}}`, http.StatusInternalServerError)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, plainCompletion)
			},
			streamed: []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ep scripted
			ts := ep.serve(t, func(w http.ResponseWriter, _ *http.Request, body map[string]any) { tt.handler(w, body) })
			core, logs := observer.New(zapcore.WarnLevel)
			c := client(t, llm.Config{Endpoints: []llm.Endpoint{{Name: "gw", BaseURL: ts.URL + "/v1", NoStream: tt.noStream}},
				Default: llm.ModelConfig{Name: "gpt-4o", Endpoint: "gw"}, MaxAttempts: 1, Logger: zap.New(core)})
			for i := 0; i < 2; i++ {
				resp, err := ask(context.Background(), c)
				if err != nil {
					t.Fatalf("call %d: %v", i+1, err)
				}
				if resp.Text != "SELECT 1" || resp.FinishReason != "stop" || resp.Usage.PromptTokens != 9 || resp.Usage.CompletionTokens != 3 || resp.Usage.Attempts != 1 {
					t.Errorf("call %d: %+v", i+1, resp)
				}
			}
			if got := ep.streamed(); fmt.Sprint(got) != fmt.Sprint(tt.streamed) {
				t.Errorf("requests streamed %v, want %v", got, tt.streamed)
			}
			warns := logs.FilterMessageSnippet("does not stream").All()
			if len(warns) != tt.warned {
				t.Errorf("%d warnings, want %d: %v", len(warns), tt.warned, warns)
			}
			for _, w := range warns {
				if w.ContextMap()["endpoint"] != "gw" {
					t.Errorf("the warning names endpoint %v, want gw", w.ContextMap()["endpoint"])
				}
			}
		})
	}
}

// cooldowns is a Limiter that admits every call and records the cooldowns
// the client asks for.
type cooldowns struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *cooldowns) Acquire(context.Context, llm.Bucket, int) (func(context.Context, int), error) {
	return func(context.Context, int) {}, nil
}

func (l *cooldowns) Cooldown(_ context.Context, _ llm.Bucket, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d = append(l.d, d)
	return nil
}

// TestStreamedHeadersPaceAndRetry: the headers of a streamed response are
// read as a plain one's were: a 429's Retry-After-Ms sets the wait and
// the cluster-wide cooldown, and x-ratelimit-remaining-requests 0 on the
// answer pauses the bucket until the announced reset.
func TestStreamedHeadersPaceAndRetry(t *testing.T) {
	t.Parallel()
	var ep scripted
	ts := ep.serve(t, func(w http.ResponseWriter, _ *http.Request, _ map[string]any) {
		ep.mu.Lock()
		n := len(ep.bodies)
		ep.mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After-Ms", "40")
			http.Error(w, `{"error":{"message":"rate limited","type":"rate_limit_exceeded"}}`, http.StatusTooManyRequests)
			return
		}
		w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		w.Header().Set("X-Ratelimit-Reset-Requests", "1.5s")
		s := startSSE(w)
		s.send(chunk(`{"role":"assistant","content":"SELECT 1"}`, "stop"))
		s.raw("data: [DONE]\n\n")
	})
	lim := &cooldowns{}
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", Limiter: lim})
	resp, err := ask(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.RateLimited != 1 || resp.Usage.Attempts != 2 || resp.Text != "SELECT 1" {
		t.Errorf("response %+v", resp)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if len(lim.d) != 2 || lim.d[0] < 40*time.Millisecond || lim.d[0] > 300*time.Millisecond || lim.d[1] != 1500*time.Millisecond {
		t.Errorf("cooldowns %v, want the 429's 40ms (plus jitter) and the 1.5s reset", lim.d)
	}
	if got := ep.streamed(); fmt.Sprint(got) != "[true true]" {
		t.Errorf("requests streamed %v", got)
	}
}
