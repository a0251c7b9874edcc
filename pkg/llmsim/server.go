// Package llmsim is quorum's simulated LLM: an OpenAI-compatible HTTP server
// that answers from a dataset's gold SQL with a chosen skill, latency,
// provider rate limits and faults. It exists because no model is reachable
// from quorum's machines, yet demos, tests and benchmarks need one. It is a
// simulator and says so: in its banner, in every response's model field, and
// in its /v1/models listing.
//
// Answers are deterministic: they depend only on the simulator's seed, the
// request's messages and the request's own seed field, never on arrival
// order, so a redelivered task gets the same answer. Latency, rate limits
// and faults are transport behaviour and vary per attempt.
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
}

// Faults are per-attempt failure rates.
type Faults struct {
	ServerError float64 // 500/502/503
	Hang        float64 // no answer until the client gives up (or HangFor)
	Malformed   float64 // 200 with a broken JSON body
	HangFor     time.Duration
}

// Config configures a simulator.
type Config struct {
	Dataset *dataset.Dataset
	Seed    uint64
	Noise   Noise
	Latency Latency
	Limits  Limits
	Faults  Faults
	Logger  *zap.Logger
}

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
}

// New builds a simulator over cfg.Dataset.
func New(cfg Config) (*Server, error) {
	if cfg.Dataset == nil {
		return nil, errors.New("llmsim: a dataset with gold SQL is required (--dataset DIR)")
	}
	if cfg.Noise == (Noise{}) {
		cfg.Noise = DefaultNoise()
	}
	if cfg.Faults.HangFor == 0 {
		cfg.Faults.HangFor = 10 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Server{cfg: cfg, know: newKnowledge(cfg.Dataset, cfg.Seed), tok: llm.NewTokenizer(), log: cfg.Logger,
		limits: newProviderLimits(cfg.Limits)}
	s.stats.byKind = map[Kind]int64{}
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
	Messages []llm.Message `json:"messages"`
	Seed     *int64        `json:"seed"`
	Stream   bool          `json:"stream"`
	Options  *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	s.stats.requests.Add(1)
	var req chatRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not a chat completion request: "+err.Error())
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "messages must not be empty")
		return
	}
	attempt := rand.New(rand.NewPCG(s.cfg.Seed^0x5bd1e995, s.faultSeq.Add(1)))
	if s.fault(w, r, attempt) {
		return
	}

	release, retryAfter, hdr := s.limits.admitRequest()
	if release == nil {
		s.tooMany(w, retryAfter, hdr)
		return
	}
	defer release()
	text, kind, info := s.respond(req)
	prompt := s.tok.CountMessages(req.Model, req.Messages)
	completion := s.tok.Count(req.Model, text)
	retryAfter, thdr := s.limits.admitTokens(prompt + completion)
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

	s.stats.count(kind, info == nil, prompt, completion)
	delay := s.latency(attempt, completion)
	if req.Stream {
		s.stream(w, r, req, text, delay, prompt, completion)
		return
	}
	if !sleepCtx(r.Context(), delay) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "chatcmpl-llmsim-" + fmt.Sprint(s.stats.requests.Load()), "object": "chat.completion",
		"created": time.Now().Unix(), "model": ModelName,
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
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

// respond decides the reply text deterministically from the simulator seed,
// the messages and the request seed.
func (s *Server) respond(req chatRequest) (string, Kind, *exampleInfo) {
	lastUser := ""
	var all strings.Builder
	for _, m := range req.Messages {
		if m.Role == "user" {
			lastUser = m.Content
		}
		all.WriteString(m.Content)
		all.WriteByte(0)
	}
	kind := Classify(lastUser)
	info := s.know.find(all.String())
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], s.cfg.Seed)
	h.Write(b[:])
	h.Write([]byte(all.String()))
	var reqSeed uint64
	if req.Seed != nil {
		reqSeed = uint64(*req.Seed)
	}
	rng := rand.New(rand.NewPCG(h.Sum64(), reqSeed^0x9e3779b97f4a7c15))
	if kind == KindUnknown || info == nil || info.gold == "" {
		return "I am quorum's simulated model (llmsim) and do not recognise this request, so here is a generic answer.\n\n```sql\nSELECT 1\n```", KindUnknown, info
	}
	return s.answer(rng, kind, info, lastUser), kind, info
}

// fault injects a failure for this attempt; it reports whether it did.
func (s *Server) fault(w http.ResponseWriter, r *http.Request, rng *rand.Rand) bool {
	f := s.cfg.Faults
	x := rng.Float64()
	switch {
	case x < f.ServerError:
		s.stats.faults.Add(1)
		code := []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable}[rng.IntN(3)]
		writeError(w, code, "server_error", "simulated server error (llmsim fault injection)")
		return true
	case x < f.ServerError+f.Hang:
		s.stats.faults.Add(1)
		sleepCtx(r.Context(), f.HangFor)
		writeError(w, http.StatusGatewayTimeout, "timeout", "simulated hang (llmsim fault injection)")
		return true
	case x < f.ServerError+f.Hang+f.Malformed:
		s.stats.faults.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"id": "broken", "choices": [{"message": {"content": "trunc`))
		return true
	}
	return false
}

func (s *Server) latency(rng *rand.Rand, completion int) time.Duration {
	l := s.cfg.Latency
	d := float64(l.FirstToken)
	if l.TokensPerSecond > 0 {
		d += float64(completion) / l.TokensPerSecond * float64(time.Second)
	}
	if l.Sigma > 0 {
		d *= math.Exp(rng.NormFloat64() * l.Sigma)
	}
	return time.Duration(d)
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req chatRequest, text string, delay time.Duration, prompt, completion int) {
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	id := "chatcmpl-llmsim-" + fmt.Sprint(s.stats.requests.Load())
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": ModelName,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	pieces := splitPieces(text, 8)
	step := delay / time.Duration(len(pieces)+1)
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, p := range pieces {
		if !sleepCtx(r.Context(), step) {
			return
		}
		chunk(map[string]any{"content": p}, nil)
	}
	chunk(map[string]any{}, "stop")
	if req.Options != nil && req.Options.IncludeUsage {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": ModelName,
			"choices": []any{}, "usage": map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}})
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
}

type stats struct {
	requests, rateLimited, faults atomic.Int64
	mu                            sync.Mutex
	byKind                        map[Kind]int64
	unknownExample                int64
	prompt, completion            int64
}

func (st *stats) count(k Kind, noExample bool, prompt, completion int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.byKind[k]++
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
		ByKind: map[Kind]int64{}, UnknownExample: s.stats.unknownExample, PromptTokens: s.stats.prompt, CompletionTokens: s.stats.completion}
	for k, v := range s.stats.byKind {
		out.ByKind[k] = v
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
