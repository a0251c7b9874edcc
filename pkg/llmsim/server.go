// Package llmsim is quorum's simulated LLM: an OpenAI-compatible HTTP server
// that answers from a dataset's gold SQL with a chosen skill, latency,
// provider rate limits and faults. It exists because no model is reachable
// from quorum's machines, yet demos, tests and benchmarks need one. It is a
// simulator and says so: in its banner, in every response's model field, and
// in its /v1/models listing.
//
// Answers are deterministic: they depend only on the simulator's seed, the
// request's messages and the request's own seed field, never on arrival
// order, so a redelivered task gets the same answer. Under a persona the
// messages are read as canonical's would be (memory.go: the simulator
// remembers what it dressed), so a persona changes the form of the
// answers, not the answers. Latency, rate limits and faults are transport
// behaviour and vary per attempt.
package llmsim

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
)

// ModelName is what every response's model field says.
const ModelName = "quorum-llmsim (simulated model, not a real LLM)"

// Latency models time to first token plus generation at a rate, with
// log-normal jitter.
type Latency struct {
	FirstToken      time.Duration
	TokensPerSecond float64 // 0 = instant generation
	// Sigma is the log-normal jitter (0 = none).
	Sigma float64
}

// Limits are the provider limits the simulator enforces. Zero = unlimited.
type Limits struct {
	RequestsPerMinute int
	TokensPerMinute   int
	MaxConcurrency    int
	// Silent states no x-ratelimit-* headers (a provider or gateway
	// that does not say its limits); 429s still name their retry delay.
	Silent bool
}

// Faults are per-attempt failure rates.
type Faults struct {
	ServerError float64 // 500/502/503
	// Hang sends nothing, not even headers, until the client gives up (or
	// HangFor): a dead endpoint.
	Hang      float64
	Malformed float64 // 200 with a broken JSON body
	// Stall sends the headers, and a stream's first chunks, then nothing
	// for HangFor, and drops the connection: an endpoint that died while
	// writing.
	Stall   float64
	HangFor time.Duration
}

// Config configures a simulator.
type Config struct {
	Dataset *dataset.Dataset
	Seed    uint64
	Noise   Noise
	Latency Latency
	Limits  Limits
	Faults  Faults
	// Personas give requests a real model's surface by their model field
	// (see Personas); nil answers every request in canonical form.
	Personas Personas
	// Difficulty is the mix of easy, medium and hard questions; zero keeps
	// the older uniform skill.
	Difficulty Difficulty
	// PromptCache simulates a provider's prefix cache (off by default).
	PromptCache PromptCache
	Logger      *zap.Logger
}

// MaxRequestBytes bounds a chat request's body (32 MiB: above any real
// model's context window in tokens).
const MaxRequestBytes = 32 << 20

// Server is the simulator; it implements http.Handler.
type Server struct {
	cfg    Config
	know   *knowledge
	tok    *llm.Tokenizer
	mux    *http.ServeMux
	log    *zap.Logger
	limits *providerLimits
	stats  stats
	// faultSeq feeds the per-attempt random draws (faults, latency).
	faultSeq atomic.Uint64
	cache    *promptCache
	// mem maps the replies sent in a persona's form to their canonical
	// ones (memory.go), so a persona does not move the answers.
	mem *memory
}

// New builds a simulator over cfg.Dataset.
func New(cfg Config) (*Server, error) {
	if cfg.Dataset == nil {
		return nil, errors.New("llmsim: a dataset with gold SQL is required (--dataset DIR)")
	}
	if cfg.Noise == (Noise{}) {
		cfg.Noise = DefaultNoise()
	} else if cfg.Noise.pexaUnset() {
		cfg.Noise.setPExADefaults()
	}
	if cfg.Noise.raiseUnset() {
		cfg.Noise.setRAISEDefaults()
	}
	if cfg.Faults.HangFor == 0 {
		cfg.Faults.HangFor = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if err := cfg.Personas.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, know: newKnowledge(cfg.Dataset, cfg.Seed, cfg.Difficulty), tok: llm.NewTokenizer(), log: cfg.Logger,
		limits: newProviderLimits(cfg.Limits), mem: newMemory(memoryMaxEntries, memoryMaxBytes)}
	s.cache = newPromptCache(cfg.PromptCache, s.tok)
	s.stats.byKind, s.stats.toolCalls = map[Kind]int64{}, map[Kind]int64{}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.chat)
	s.mux.HandleFunc("POST /chat/completions", s.chat)
	s.mux.HandleFunc("POST /openai/deployments/{deployment}/chat/completions", s.chat)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /models", s.models)
	s.mux.HandleFunc("GET /stats", s.statsHandler)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
	Seed     *int64        `json:"seed"`
	Stream   bool          `json:"stream"`
	Options  *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Stop                stopList        `json:"stop"`
	Tools               []wireTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	// Prefix continuation (vLLM): see continuation in raise.go.
	ContinueFinal       bool   `json:"continue_final_message"`
	AddGenerationPrompt *bool  `json:"add_generation_prompt"`
	ReasoningEffort     string `json:"reasoning_effort"`
	// persona is the surface the reply takes (set by chat, not sent).
	persona string
}

// check refuses what OpenAI refuses with a 400, and parses the tool choice.
func (req chatRequest) check() (toolChoice, error) {
	if len(req.Messages) == 0 {
		return toolChoice{}, errors.New("messages must not be empty")
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return toolChoice{}, fmt.Errorf("temperature %v is outside [0, 2]", *t)
	}
	if p := req.TopP; p != nil && (*p < 0 || *p > 1) {
		return toolChoice{}, fmt.Errorf("top_p %v is outside [0, 1]", *p)
	}
	if req.MaxTokens < 0 || req.MaxCompletionTokens < 0 {
		return toolChoice{}, errors.New("max_tokens and max_completion_tokens must not be negative")
	}
	if err := checkTools(req.Tools); err != nil {
		return toolChoice{}, err
	}
	if req.ContinueFinal && req.AddGenerationPrompt != nil && *req.AddGenerationPrompt {
		return toolChoice{}, errors.New("cannot set both continue_final_message and add_generation_prompt to true")
	}
	return parseToolChoice(req.ToolChoice, req.Tools)
}

// maxTokens is the completion bound (0 = none); max_completion_tokens
// supersedes the older max_tokens.
func (req chatRequest) maxTokens() int {
	if req.MaxCompletionTokens > 0 {
		return req.MaxCompletionTokens
	}
	return req.MaxTokens
}

// reply is what the simulator answers.
type reply struct {
	text   string
	calls  []wireToolCall
	finish string
	kind   Kind
	info   *exampleInfo
	// A persona's extras: reasoning_content, the reasoning tokens usage
	// reports, and content null beside tool calls.
	reasoning       string
	reasoningTokens int
	nullContent     bool
	// again: the reply answers a re-ask of an earlier one (memory.go).
	again bool
	// refusal: the persona wrote a refusal instead of the SQL answer;
	// inReasoning: it wrote the whole reply in reasoning (text empty), so
	// the stop sequences and the completion bound apply there.
	refusal, inReasoning bool
	// cachedTokens of the prompt came from the prompt cache (cache.go).
	cachedTokens int
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.stats.requests.Add(1)
	var req chatRequest
	// A request body has a bound, as providers' do: a runaway prompt (or a
	// hostile client) must not hold the simulator's memory.
	r.Body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error",
				fmt.Sprintf("the request body is over %d bytes (llmsim's limit)", MaxRequestBytes))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not a chat completion request: "+err.Error())
		return
	}
	choice, err := req.check()
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	model := req.Model
	if model == "" {
		model = r.PathValue("deployment")
	}
	req.persona = s.cfg.Personas.For(model)
	if param, msg := personaRefusal(req.persona, req); msg != "" {
		writeParamError(w, param, msg)
		return
	}
	attempt := rand.New(rand.NewPCG(s.cfg.Seed^0x5bd1e995, s.faultSeq.Add(1)))
	handled, stall := s.fault(w, r, attempt)
	if handled {
		return
	}

	release, retryAfter, hdr := s.limits.admitRequest()
	if release == nil {
		s.tooMany(w, retryAfter, hdr)
		return
	}
	defer release()
	rep, canon, prefix := s.personaReply(req, choice)
	prompt := s.tok.CountMessages(req.Model, req.messages()) + s.tok.CountTools(req.Model, req.tools())
	completion := s.complete(req, &rep)
	if canon != nil {
		s.complete(req, canon)
		s.mem.remember(prefix, rep, *canon)
	}
	delay, first := s.latency(attempt, completion)
	rep.cachedTokens = s.cache.lookup(req.Model, req, prompt, time.Now().Add(first))
	counted := prompt + completion
	if s.cfg.PromptCache.ExcludeFromTPM {
		counted -= rep.cachedTokens
	}
	retryAfter, thdr := s.limits.admitTokens(counted)
	for k, v := range thdr {
		hdr[k] = v
	}
	if retryAfter > 0 {
		s.tooMany(w, retryAfter, hdr)
		return
	}
	for k, v := range hdr {
		w.Header().Set(k, v)
	}

	s.stats.count(rep.kind, rep.info == nil, len(rep.calls) > 0, prompt, completion)
	if rep.refusal {
		s.stats.refusals.Add(1)
	}
	if stall {
		s.stats.faults.Add(1)
	}
	if req.Stream {
		s.stream(w, r, req, rep, delay, first, prompt, completion, stall)
		return
	}
	if stall {
		// Headers, then silence: the body never comes.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		if sleepCtx(r.Context(), s.cfg.Faults.HangFor) {
			panic(http.ErrAbortHandler)
		}
		return
	}
	if !sleepCtx(r.Context(), delay) {
		return
	}
	msg := map[string]any{"role": "assistant", "content": rep.text}
	if len(rep.calls) > 0 {
		msg["tool_calls"] = rep.calls
		if rep.nullContent && rep.text == "" {
			msg["content"] = nil
		}
	}
	if rep.reasoning != "" {
		msg["reasoning_content"] = rep.reasoning
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-llmsim-" + fmt.Sprint(s.stats.requests.Load()), "object": "chat.completion",
		"created": time.Now().Unix(), "model": modelName(req.persona),
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": rep.finish}},
		"usage":   usage(rep, prompt, completion),
	})
}

// usage is a reply's usage object; reasoning personas add their reasoning
// tokens' details (completion_tokens already counts them, as OpenAI's and
// DeepSeek's do).
func usage(rep reply, prompt, completion int) map[string]any {
	u := map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	if rep.reasoningTokens > 0 {
		u["completion_tokens_details"] = map[string]any{"reasoning_tokens": rep.reasoningTokens}
	}
	if rep.cachedTokens > 0 {
		u["prompt_tokens_details"] = map[string]any{"cached_tokens": rep.cachedTokens}
	}
	return u
}

// personaReply is the reply in the request's persona: the canonical reply,
// dressed, and the canonical reply itself for the memory (nil when there
// is nothing to remember). A continued prefix gets the rest of the dressed
// reply when the prefix is its start (a reply cut short), else the
// canonical continuation: a prefill fixes the form the reply takes.
func (s *Server) personaReply(req chatRequest, choice toolChoice) (reply, *reply, uint64) {
	if req.persona == PersonaCanonical || req.persona == "" {
		return s.respond(req, choice), nil, 0
	}
	if base, prefix, ok := continuation(req); ok {
		full := s.respond(base, choice)
		s.dress(req.persona, base, &full, true)
		if rest, ok := strings.CutPrefix(full.text, prefix); ok && len(full.calls) == 0 {
			full.text, full.reasoning, full.reasoningTokens = rest, "", 0
			s.reasoningUsage(req.persona, personaRNG(s.cfg.Seed, req, req.persona), req, &full)
			return full, nil, 0
		}
		rep := s.respond(req, choice)
		s.reasoningUsage(req.persona, personaRNG(s.cfg.Seed, req, req.persona), req, &rep)
		return rep, nil, 0
	}
	// The reply is remembered under the conversation that asked for it,
	// read canonically: two different canonical replies can take the same
	// dressed form (o3's bare "Answer:" block), and only their place in the
	// conversation tells them apart.
	undressed, _ := s.mem.undress(req)
	prefix := prefixKey(undressed.Messages)
	rep := s.respond(req, choice)
	canon := rep
	canon.calls = append([]wireToolCall(nil), rep.calls...)
	s.dress(req.persona, req, &rep, false)
	if rep.kind == KindRAISEAgent && rep.info != nil {
		// Its segments are dressed where they are written and read back
		// by canonicalCommands.
		return rep, nil, 0
	}
	return rep, &canon, prefix
}

// complete applies the stop sequences and the completion bound to a reply
// and returns its completion tokens.
func (s *Server) complete(req chatRequest, rep *reply) int {
	if rep.inReasoning && rep.text == "" && len(rep.calls) == 0 {
		// A reasoning parser splits what the model generated, which the
		// stop and the bound cut as they would the text.
		moved := *rep
		moved.text, moved.reasoning, moved.inReasoning, moved.reasoningTokens = rep.reasoning, "", false, 0
		n := s.complete(req, &moved)
		rep.reasoning, rep.finish, rep.reasoningTokens = moved.text, moved.finish, n
		return n
	}
	if len(rep.calls) == 0 {
		cut := -1
		for _, stop := range req.Stop {
			if i := strings.Index(rep.text, stop); stop != "" && i >= 0 && (cut < 0 || i < cut) {
				cut = i
			}
		}
		if cut >= 0 {
			rep.text = rep.text[:cut]
		}
	}
	n := s.tok.CountCompletion(req.Model, rep.text, rep.messageCalls())
	limit := req.maxTokens()
	if limit <= 0 || n <= limit {
		return n + rep.reasoningTokens
	}
	rep.finish = "length"
	if len(rep.calls) == 0 {
		rep.text, _ = s.tok.Truncate(req.Model, rep.text, limit)
	} else {
		// A call cut short has arguments that are not valid JSON, as a
		// real model's would be.
		c := &rep.calls[0]
		rep.calls = rep.calls[:1]
		budget := limit - s.tok.CountCompletion(req.Model, "", []llm.ToolCall{{Name: c.Function.Name}})
		c.Function.Arguments, _ = s.tok.Truncate(req.Model, c.Function.Arguments, budget)
	}
	// Reasoning counts as completion, as providers bill it; the bound
	// applies to the visible text only, so a persona keeps canonical's
	// answer under the same max_tokens.
	return s.tok.CountCompletion(req.Model, rep.text, rep.messageCalls()) + rep.reasoningTokens
}

func (rep reply) messageCalls() []llm.ToolCall {
	var out []llm.ToolCall
	for _, c := range rep.calls {
		out = append(out, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return out
}

// tooMany answers 429 like OpenAI: Retry-After (whole seconds, and
// Retry-After-Ms) and the x-ratelimit-* headers.
func (s *Server) tooMany(w http.ResponseWriter, retryAfter time.Duration, hdr map[string]string) {
	s.stats.rateLimited.Add(1)
	for k, v := range hdr {
		w.Header().Set(k, v)
	}
	secs := int(math.Ceil(retryAfter.Seconds()))
	w.Header().Set("Retry-After", fmt.Sprint(max(secs, 1)))
	w.Header().Set("Retry-After-Ms", fmt.Sprint(max(retryAfter.Milliseconds(), 1)))
	writeError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached for the simulated model (llmsim); please retry after "+retryAfter.Round(time.Millisecond).String())
}

// respond decides the reply deterministically from the simulator seed, the
// messages, the tools and the request seed.
func (s *Server) respond(req chatRequest, choice toolChoice) reply {
	if base, prefix, ok := continuation(req); ok {
		rep := s.respond(base, choice)
		rep.text = continueText(rep.text, prefix)
		return rep
	}
	if req.persona != PersonaCanonical && req.persona != "" {
		// The draws read the history as canonical's would be; a re-ask
		// gets the answer it asks for again.
		var again *reply
		if req, again = s.mem.undress(req); again != nil {
			rep := *again
			rep.again = true
			return rep
		}
	}
	lastUser := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			lastUser = m.Content
		}
	}
	all := conversationText(req)
	msgs := req.messages()
	kind := ClassifyConversation(msgs)
	info := s.know.find(all)
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.cfg.Seed)
	h.Write(b[:])
	h.Write([]byte(all))
	var reqSeed uint64
	if req.Seed != nil {
		reqSeed = uint64(*req.Seed)
	}
	rng := rand.New(rand.NewPCG(h.Sum64(), reqSeed^0x9e3779b97f4a7c15))
	rep := reply{finish: "stop", kind: kind, info: info}
	if kind == KindUnknown || info == nil || info.gold == "" {
		rep.kind = KindUnknown
		rep.text = "I am quorum's simulated model (llmsim) and do not recognise this request, so I have no answer for it.\n\n```sql\n" + NoAnswerSQL + "\n```"
	} else if kind.isRAISE() {
		s.raiseReply(&rep, req, msgs, all)
		return rep
	} else if kind.isPExA() {
		s.pexaReply(&rep, rng, req, choice, msgs, all)
		return rep
	} else {
		rep.text = s.answer(rng, kind, info, lastUser)
	}
	if wantsToolCall(req, choice) {
		rep.calls = []wireToolCall{toolCall(req.Tools, choice, rep.text, s.callID(req, choice, all, 0))}
		rep.text, rep.finish = "", "tool_calls"
	}
	return rep
}

// conversationText is the request's messages as the answer's draws see
// them.
func conversationText(req chatRequest) string {
	var all strings.Builder
	for _, m := range req.Messages {
		all.WriteString(m.Content)
		// Tool traffic joins the text only when present, so requests
		// without it are answered as before.
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&all, "\x01%s\x01%s\x01%s", tc.ID, tc.Function.Name, tc.Function.Arguments)
		}
		if m.ToolCallID != "" {
			all.WriteString("\x01" + m.ToolCallID)
		}
		all.WriteByte(0)
	}
	return all.String()
}

// pexaReply fills a PExA reply: the agent's own tool call when the request
// offers that tool (tool_choice "none" or a missing tool turn it into text
// saying what the model would do), else its text.
func (s *Server) pexaReply(rep *reply, rng *rand.Rand, req chatRequest, choice toolChoice, msgs []llm.Message, all string) {
	first := 0
	for first < len(msgs) && msgs[first].Role != "user" {
		first++
	}
	offered := func(name string) bool {
		if choice.mode == llm.ToolChoiceNone {
			return false
		}
		for _, t := range req.Tools {
			if t.Function.Name == name {
				return true
			}
		}
		return false
	}
	c := newConvo(msgs, first)
	text, call := s.pexa(rng, rep.kind, rep.info, c, offered, s.pexaOptionsFor(req, c, all))
	switch {
	case call == nil:
		rep.text = text
	case offered(call.name):
		rep.calls = []wireToolCall{{ID: s.callID(req, choice, all, 0), Type: "function", Function: wireFunction{Name: call.name, Arguments: call.arguments()}}}
		rep.text, rep.finish = "", "tool_calls"
	default:
		rep.text = "I would call the " + call.name + " tool with " + call.arguments() + ", but this request does not offer it."
	}
}

// fault injects a failure for this attempt; it reports whether it
// answered the request, and whether the reply is to stall part-way.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, rng *rand.Rand) (handled, stall bool) {
	f := s.cfg.Faults
	x := rng.Float64()
	switch {
	case x < f.ServerError:
		s.stats.faults.Add(1)
		code := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[rng.IntN(3)]
		writeError(w, code, "server_error", "simulated server error (llmsim fault injection)")
		return true, false
	case x < f.ServerError+f.Hang:
		s.stats.faults.Add(1)
		sleepCtx(r.Context(), f.HangFor)
		writeError(w, http.StatusGatewayTimeout, "timeout", "simulated hang (llmsim fault injection)")
		return true, false
	case x < f.ServerError+f.Hang+f.Malformed:
		s.stats.faults.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"id": "broken", "choices": [{"message": {"content": "trunc`))
		return true, false
	case x < f.ServerError+f.Hang+f.Malformed+f.Stall:
		return false, true // counted when the reply stalls (it may be a 429 first)
	}
	return false, false
}

// latency is how long the reply takes in all, and to its first token.
func (s *Server) latency(rng *rand.Rand, completion int) (total, first time.Duration) {
	l := s.cfg.Latency
	d, f := float64(l.FirstToken), float64(l.FirstToken)
	if l.TokensPerSecond > 0 {
		d += float64(completion) / l.TokensPerSecond * float64(time.Second)
	}
	if l.Sigma > 0 {
		j := math.Exp(rng.NormFloat64() * l.Sigma)
		d, f = d*j, f*j
	}
	return time.Duration(d), time.Duration(f)
}

// stream sends the reply's role at once, its first token after first (the
// prompt processed), and the rest over the remaining delay.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req chatRequest, rep reply, delay, first time.Duration, prompt, completion int, stall bool) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	id := "chatcmpl-llmsim-" + fmt.Sprint(s.stats.requests.Load())
	model := modelName(req.persona)
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	// A tool call streams like OpenAI's: its id and name first, then the
	// arguments in pieces, each under the call's index.
	delta := func(p string) map[string]any { return map[string]any{"content": p} }
	text := rep.text
	if rep.nullContent && len(rep.calls) > 0 && text == "" {
		chunk(map[string]any{"role": "assistant", "content": nil}, nil)
	} else {
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	}
	// A persona's reasoning streams first, as reasoning_content deltas
	// (DeepSeek's), and its text beside tool calls before the calls.
	type part struct {
		text  string
		delta func(string) map[string]any
	}
	var parts []part
	if rep.reasoning != "" {
		parts = append(parts, part{rep.reasoning, func(p string) map[string]any { return map[string]any{"reasoning_content": p} }})
	}
	if len(rep.calls) > 0 && text != "" {
		parts = append(parts, part{text, delta})
	}
	if len(rep.calls) > 0 {
		c := rep.calls[0]
		zero := 0
		delta = func(p string) map[string]any {
			return map[string]any{"tool_calls": []wireToolCall{{Index: &zero, Function: wireFunction{Arguments: p}}}}
		}
		text = c.Function.Arguments
		head := map[string]any{"tool_calls": []wireToolCall{{Index: &zero, ID: c.ID, Type: c.Type, Function: wireFunction{Name: c.Function.Name}}}}
		if len(parts) == 0 {
			chunk(head, nil)
		} else {
			parts = append(parts, part{"", func(string) map[string]any { return head }})
		}
	}
	parts = append(parts, part{text, delta})
	var pieces []func() map[string]any
	for _, pt := range parts {
		for _, p := range splitPieces(pt.text, 8) {
			if p == "" && pt.text != "" {
				continue
			}
			pieces = append(pieces, func() map[string]any { return pt.delta(p) })
		}
	}
	if !sleepCtx(r.Context(), first) {
		return
	}
	step := (delay - first) / time.Duration(len(pieces)+1)
	for i, p := range pieces {
		if stall && i == len(pieces)/2 {
			// Silence, then the connection drops mid-reply.
			if sleepCtx(r.Context(), s.cfg.Faults.HangFor) {
				panic(http.ErrAbortHandler)
			}
			return
		}
		if !sleepCtx(r.Context(), step) {
			return
		}
		chunk(p(), nil)
	}
	chunk(map[string]any{}, rep.finish)
	if req.Options != nil && req.Options.IncludeUsage {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": model,
			"choices": []any{}, "usage": usage(rep, prompt, completion)})
		fmt.Fprintf(w, "data: %s\n\n", b)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

func splitPieces(s string, n int) []string {
	if len(s) == 0 {
		return []string{""}
	}
	size := max(1, (len(s)+n-1)/n)
	var out []string
	for len(s) > 0 {
		k := min(size, len(s))
		// Keep UTF-8 sequences whole.
		for k < len(s) && s[k]&0xC0 == 0x80 {
			k++
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []map[string]any{
		{"id": "llmsim", "object": "model", "created": 0, "owned_by": "quorum (simulator: answers from gold SQL, not a real model)"},
	}})
}

// Stats is what the simulator has served.
type Stats struct {
	Requests         int64          `json:"requests"`
	ByKind           map[Kind]int64 `json:"by_kind"`
	RateLimited      int64          `json:"rate_limited"`
	Faults           int64          `json:"faults"`
	Unknown          int64          `json:"unknown_requests"`
	UnknownExample   int64          `json:"unknown_example"`
	PromptTokens     int64          `json:"prompt_tokens"`
	CompletionTokens int64          `json:"completion_tokens"`
	// ToolCalls counts, by kind, the requests answered with a tool call.
	ToolCalls map[Kind]int64 `json:"tool_calls_by_kind"`
	// Refusals counts the replies a persona wrote as refusals (prose, no
	// query) where canonical's held the SQL answer.
	Refusals int64 `json:"refusals_sent"`
}

type stats struct {
	requests, rateLimited, faults atomic.Int64
	refusals                      atomic.Int64
	mu                            sync.Mutex
	byKind, toolCalls             map[Kind]int64
	unknownExample                int64
	prompt, completion            int64
}

func (st *stats) count(k Kind, noExample, toolCall bool, prompt, completion int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.byKind[k]++
	if toolCall {
		st.toolCalls[k]++
	}
	if noExample {
		st.unknownExample++
	}
	st.prompt += int64(prompt)
	st.completion += int64(completion)
}

// Stats returns a snapshot.
func (s *Server) Stats() Stats {
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	out := Stats{Requests: s.stats.requests.Load(), RateLimited: s.stats.rateLimited.Load(), Faults: s.stats.faults.Load(),
		ByKind: map[Kind]int64{}, ToolCalls: map[Kind]int64{}, UnknownExample: s.stats.unknownExample, PromptTokens: s.stats.prompt, CompletionTokens: s.stats.completion,
		Refusals: s.stats.refusals.Load()}
	for k, v := range s.stats.byKind {
		out.ByKind[k] = v
	}
	for k, v := range s.stats.toolCalls {
		out.ToolCalls[k] = v
	}
	out.Unknown = out.ByKind[KindUnknown]
	return out
}

func (s *Server) statsHandler(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": typ}})
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
