package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	// The one redaction of credentials in URLs (internal/layout: pkgToInternal).
	"github.com/quorumsql/quorum/internal/redact"
	"github.com/quorumsql/quorum/pkg/slot"
)

// DefaultEndpoint names the endpoint Config's top-level fields describe:
// roles whose model names no endpoint go there.
const DefaultEndpoint = "default"

// ModelConfig is how one role calls its model.
type ModelConfig struct {
	// Name is the model id (for Azure, the deployment name). A role whose
	// Name is empty uses the default model with this config's other
	// settings (endpoint, temperature, completion bound) where set.
	Name string
	// Endpoint names the endpoint serving the role; "" is the default one.
	Endpoint    string
	Temperature *float64
	// MaxCompletionTokens is sent as max_completion_tokens when set.
	MaxCompletionTokens int
	// ReasoningEffort (low, medium, high) for reasoning models.
	ReasoningEffort string
	// ContextWindow overrides the known window of the model family.
	ContextWindow int
	// Reasoning overrides the detection from the model name.
	Reasoning *bool
	// Deployments serve this model at several endpoints, each with its
	// own quota; a call goes to the healthy one with the most headroom
	// (router.go). Empty: Endpoint alone serves it.
	Deployments []Deployment
	// Fallbacks are other models tried in order when every deployment
	// of this one is cooled down.
	Fallbacks []ModelConfig
}

func (m ModelConfig) reasoning() bool {
	if m.Reasoning != nil {
		return *m.Reasoning
	}
	return IsReasoningModel(m.Name)
}

// Quota is a provider's limits on one endpoint. Zero fields are unlimited.
type Quota struct {
	RequestsPerMinute float64
	TokensPerMinute   float64
}

// Endpoint is one OpenAI-compatible server and the account used on it.
type Endpoint struct {
	// Name identifies the endpoint in role mappings, quotas and the cost
	// ledger: letters, digits, '.', '_' and '-'.
	Name         string
	BaseURL      string
	APIKey       string
	Organization string
	// AzureAPIVersion switches to Azure OpenAI: the base URL is the
	// resource endpoint and each model name is a deployment.
	AzureAPIVersion string
	// Headers are added to every request (gateways, tenant ids).
	Headers map[string]string
	// Quota is the account's limits, enforced by the Limiter; zero leaves
	// them to the Limiter's default.
	Quota Quota
	// NoStream sends the endpoint's calls non-streamed, for a server that
	// cannot stream. The client also learns it, once per endpoint with a
	// warning, from a 400 that names stream or stream_options and from a
	// whole JSON completion answered to a streamed request. Without a
	// stream the headers come only with the answer, so HeaderTimeout and
	// StallTimeout do not apply: AttemptTimeout alone bounds an attempt,
	// and a hung endpoint is told from a slow model only when it runs out.
	NoStream bool
	// Prices are the endpoint's prices by model (AnyModel for the rest);
	// a model they do not list takes the built-in table's price.
	Prices Prices
	// CachedOutsideTPM: the provider does not count prompt tokens served
	// from its prompt cache toward the tokens-per-minute limit (Anthropic's
	// current models), so the shared quota charges only uncached ones.
	CachedOutsideTPM bool
	// CacheMarkers marks the prompt's stable parts with Anthropic-style
	// cache_control breakpoints (content parts {"type": "text", ...,
	// "cache_control": {"type": "ephemeral"}}): the system message and the
	// last user message, so an example's candidates read the prompt they
	// share and a conversation's next turn reads the turns before it. For
	// endpoints that cache only what is marked (Anthropic's models behind
	// LiteLLM or another OpenAI-compatible proxy that passes the markers
	// on); OpenAI caches a shared prefix by itself and needs none.
	CacheMarkers bool
	// WarmUp sends the first call of those starting with the same long
	// prompt (an example's candidates share their schema prompt) ahead,
	// and the others once the provider has processed it, so they read it
	// from the prompt cache instead of all paying for it (Warmer; a
	// Limiter that is not a Warmer leaves calls as they come).
	WarmUp bool
}

// Bucket is the shared quota a call draws on: its endpoint, that
// endpoint's limits, and the model.
type Bucket struct {
	Endpoint string
	Model    string
	Quota    Quota
}

func (b Bucket) key() string { return b.Endpoint + "/" + b.Model }

// Limiter is the shared quota the client waits on before each attempt
// (ratelimit.LLMBudget implements it).
type Limiter interface {
	// Acquire waits until the bucket admits a call estimated at tokens;
	// settle reconciles the estimate with the real usage.
	Acquire(ctx context.Context, b Bucket, tokens int) (settle func(ctx context.Context, actual int), err error)
	// Cooldown pauses every call to the bucket for d, cluster-wide.
	Cooldown(ctx context.Context, b Bucket, d time.Duration) error
}

// Config configures an OpenAI-compatible client.
type Config struct {
	// BaseURL, APIKey, Organization, AzureAPIVersion, Headers, Quota,
	// NoStream and Prices describe the default endpoint (see Endpoint).
	BaseURL          string
	APIKey           string
	Organization     string
	AzureAPIVersion  string
	Headers          map[string]string
	Quota            Quota
	NoStream         bool
	Prices           Prices
	CachedOutsideTPM bool
	CacheMarkers     bool
	WarmUp           bool
	// WarmUpWait bounds a call's wait for the first call with its prompt
	// start (default DefaultWarmUpWait); WarmUpTTL is how long a warmed
	// start is taken as cached (default DefaultWarmUpTTL).
	WarmUpWait time.Duration
	WarmUpTTL  time.Duration
	// Endpoints are further endpoints that ModelConfig.Endpoint names.
	Endpoints []Endpoint
	// Models by role; Default serves roles not listed.
	Models  map[Role]ModelConfig
	Default ModelConfig
	// MaxAttempts per call (default 8); backoff between attempts grows from
	// BaseBackoff (default 1s) to MaxBackoff (default 60s), with jitter,
	// unless the provider says how long to wait (Retry-After-Ms, else
	// Retry-After, else for a 429 x-ratelimit-reset-*). A 429 that says
	// so spends no attempt: its wait is the provider's, with a little
	// jitter, and up to 100 such waits, together at most the call's time
	// limit and ending before ctx's deadline, are taken before the call
	// fails with ErrRateLimited. After a server error or
	// a transport failure (not a 429) it grows to MaxErrorBackoff at most
	// (default 8s): an endpoint that fails every attempt then fails the
	// call in well under a minute instead of minutes.
	MaxAttempts     int
	BaseBackoff     time.Duration
	MaxBackoff      time.Duration
	MaxErrorBackoff time.Duration
	// InteractiveAttempts bounds the attempts of a call a user waits for
	// (priority.Interactive: a quorum serve question), whose waits between
	// attempts are also capped at a few seconds (default 3).
	InteractiveAttempts int
	// Calls are streamed, so an endpoint shows it is alive long before a
	// slow model has finished: it sends its response headers as soon as it
	// takes the work, then chunks while it writes. The comment on the
	// Default…Timeout constants works out what the defaults give.
	//
	// HeaderTimeout bounds a streamed attempt's wait for its response
	// headers (default 15s; an interactive call waits at most 5s). It does
	// not cover the first chunk: a reasoning model sends none while it
	// thinks, which StallTimeout covers. An endpoint that sends its
	// headers only with its first token (Ollama loading a model) needs
	// more.
	HeaderTimeout time.Duration
	// StallTimeout is the silence a stream may keep once its headers came,
	// before its first chunk and between chunks (default 2 minutes: a
	// reasoning model may think that long without a token). Any bytes
	// count, keep-alive comments too.
	StallTimeout time.Duration
	// DeadEndpointTimeout bounds the time a call spends on an endpoint
	// that shows no life: attempts that got no response headers
	// (transport errors, HeaderTimeout), server errors (5xx), and the
	// waits after them (default 3 × HeaderTimeout; an interactive call at
	// most 12s). A 2xx response or a 429 shows the endpoint alive and
	// restarts this clock.
	DeadEndpointTimeout time.Duration
	// AttemptTimeout bounds one HTTP attempt however live its stream
	// (default 10 minutes: the longest generation accepted). A dead
	// endpoint is caught by HeaderTimeout instead, except without a
	// stream (Endpoint.NoStream), where this is the only bound.
	AttemptTimeout time.Duration
	// CallTimeout bounds a call's retrying (default 15 minutes): no
	// attempt starts after it, a streamed attempt waits for its headers
	// only until it, and a non-streamed attempt, whose answer is its only
	// sign of life, ends at it. A stream already flowing is not cut
	// (StallTimeout and AttemptTimeout bound it), so a slow but live
	// generation is never lost to it. Time spent waiting for quota (the
	// Limiter, a 429's retry delay) does not count: throttled work is
	// slow, not failing. An interactive call gets at most
	// InteractiveCallTimeout (default 1 minute), which bounds its stream
	// too: a user is waiting, and an endpoint silent after its headers
	// would otherwise hold the call for StallTimeout.
	CallTimeout            time.Duration
	InteractiveCallTimeout time.Duration
	// ExpectedCompletionTokens is the completion size reserved against the
	// token quota when MaxCompletionTokens is unset (default 1024); the
	// reservation is reconciled with the real usage afterwards.
	ExpectedCompletionTokens int
	Limiter                  Limiter
	// DeploymentFailures health failures in a row (server errors,
	// timeouts, connection errors) cool a deployment down for
	// DeploymentCooldown (defaults 3 and 30s): cluster-wide when the
	// Limiter is a Router, else in this process.
	DeploymentFailures int
	DeploymentCooldown time.Duration
	Tokenizer          *Tokenizer
	HTTPClient         *http.Client
	Logger             *zap.Logger
}

// defaultEndpoint is the default endpoint as an Endpoint.
func (c Config) defaultEndpoint() Endpoint {
	return Endpoint{Name: DefaultEndpoint, BaseURL: c.BaseURL, APIKey: c.APIKey, Organization: c.Organization,
		AzureAPIVersion: c.AzureAPIVersion, Headers: c.Headers, Quota: c.Quota, NoStream: c.NoStream, Prices: c.Prices, CachedOutsideTPM: c.CachedOutsideTPM,
		CacheMarkers: c.CacheMarkers, WarmUp: c.WarmUp}
}

// HasQuota reports whether any endpoint has a quota of its own, i.e.
// whether the client needs a Limiter even without a default quota.
func (c Config) HasQuota() bool {
	for _, e := range append([]Endpoint{c.defaultEndpoint()}, c.Endpoints...) {
		if e.Quota != (Quota{}) {
			return true
		}
	}
	return false
}

// OpenAI is a Client on go-openai.
type OpenAI struct {
	cfg         Config
	endpoints   map[string]*endpoint
	log         *zap.Logger
	completions completionSizes
	// transport is the client's own connection pool (nil when
	// Config.HTTPClient brought one).
	transport *http.Transport
	// health is the deployments' health when the Limiter is no Router.
	health *memHealth
	// sleep waits between a call's attempts (sleepCtx; tests record the
	// waits the client decided instead).
	sleep func(ctx context.Context, d time.Duration) error
}

// Close closes the client's idle connections (a Config.HTTPClient's stay
// its owner's). A call after Close still works, on a new connection.
func (c *OpenAI) Close() {
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
}

// completionSizes tracks the completion size of each endpoint and model
// (an exponentially weighted mean), so token reservations match what the
// provider will count.
type completionSizes struct {
	mu   sync.Mutex
	mean map[string]float64
	// cached is the mean share of the prompt served from the provider's
	// cache, by bucket (kept for CachedOutsideTPM endpoints).
	cached map[string]float64
}

// cachedShare is the bucket's mean cached share of prompts, 0 before any
// call; a tenth is kept in reserve, as a call may miss the cache.
func (s *completionSizes) cachedShare(key string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return 0.9 * s.cached[key]
}

func (s *completionSizes) observeCached(key string, cached, prompt int) {
	if prompt <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached == nil {
		s.cached = map[string]float64{}
	}
	share := float64(cached) / float64(prompt)
	if m, ok := s.cached[key]; ok {
		share = 0.8*m + 0.2*share
	}
	s.cached[key] = share
}

// estimate is the completion to reserve: the mean so far with a quarter
// of margin, or initial before any call.
func (s *completionSizes) estimate(key string, initial int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.mean[key]
	if !ok {
		return initial
	}
	return max(16, int(math.Ceil(1.25*m)))
}

func (s *completionSizes) observe(key string, tokens int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mean == nil {
		s.mean = map[string]float64{}
	}
	m, ok := s.mean[key]
	if !ok {
		s.mean[key] = float64(tokens)
		return
	}
	s.mean[key] = 0.8*m + 0.2*float64(tokens)
}

// pace honours a provider's rate-limit headers on a successful response:
// when fewer requests or tokens remain than another call like this one
// needs, every caller of the bucket waits for the reset the provider
// announced, instead of meeting a 429.
func (c *OpenAI) pace(ctx context.Context, b Bucket, h http.Header, tokens int) {
	if c.cfg.Limiter == nil || h == nil {
		return
	}
	var wait time.Duration
	for _, lim := range []struct {
		remaining, reset string
		need             int
	}{{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests", 1}, {"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens", tokens}} {
		left, err := strconv.Atoi(strings.TrimSpace(h.Get(lim.remaining)))
		if err != nil || left >= lim.need {
			continue
		}
		if d, err := time.ParseDuration(strings.TrimSpace(h.Get(lim.reset))); err == nil {
			wait = max(wait, d)
		}
	}
	if wait > 0 {
		_ = c.cfg.Limiter.Cooldown(ctx, b, min(wait, c.cfg.MaxBackoff))
	}
}

// endpoint is an Endpoint with its go-openai client.
type endpoint struct {
	Endpoint
	client *openai.Client
	// noStream: the endpoint cannot stream (configured, or learnt).
	noStream atomic.Bool
}

// stopStreaming sends the endpoint's calls non-streamed from now on,
// saying so once.
func (c *OpenAI) stopStreaming(ep *endpoint, model, why string) {
	if ep.noStream.CompareAndSwap(false, true) {
		c.log.Warn("llm endpoint does not stream: its calls go non-streamed from now on, and a hung attempt is abandoned only after the attempt timeout (configure it with stream: false to skip this)",
			zap.String("endpoint", ep.Name), zap.String("url", redact.URL(ep.BaseURL)), zap.String("model", model), zap.String("why", why))
	}
}

var endpointName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Default time limits of a call (see Config).
//
// With them, a call to a dead endpoint fails in under a minute, and an
// interactive one in seconds (TestDefaultsFailADeadEndpointInTime checks
// this arithmetic; "≤" includes the backoff's jitter):
//
//   - batch, nothing answers: each attempt waits 15s for headers; the
//     waits after attempts 1 and 2 are at most 1s and 2s (BaseBackoff,
//     doubling). Attempt 2 ends by 31s, the wait after it by 33s, and
//     attempt 3 waits only the 12s left of DeadEndpointTimeout (45s):
//     the call fails by 45s.
//   - batch, every attempt a 500 at once: 8 attempts and 7 waits of at
//     most 1, 2, 4, then MaxErrorBackoff's 8s: 39s at most.
//   - interactive, nothing answers: 5s, ≤1s, 5s; the wait after attempt 2
//     (≥1s) would pass the interactive 12s dead limit, so the call fails
//     by 11s.
//   - interactive, 500s: 3 attempts, waits of ≤1s and ≤2s: 3s.
//
// A live batch stream is never cut by these: once headers came, only
// StallTimeout (2m of silence) and AttemptTimeout (10m) apply. An
// interactive call's stream, live or silent, ends at its 1m limit.
const (
	DefaultHeaderTimeout          = 15 * time.Second
	DefaultStallTimeout           = 2 * time.Minute
	DefaultAttemptTimeout         = 10 * time.Minute
	DefaultCallTimeout            = 15 * time.Minute
	DefaultInteractiveCallTimeout = time.Minute
)

// An interactive call's waits for headers and for a dead endpoint: a user
// is waiting, and a live endpoint sends its headers within a second.
const (
	interactiveHeaderTimeout = 5 * time.Second
	interactiveDeadTimeout   = 12 * time.Second
)

// ErrCallTimeout is a call that ran out of its CallTimeout.
var ErrCallTimeout = errors.New("the call's time limit ran out")

// New builds a client. It sends nothing until the first call.
func New(cfg Config) (*OpenAI, error) {
	if cfg.Default.Name == "" && len(cfg.Models) == 0 {
		return nil, errors.New("llm: no model configured (set a default model)")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.InteractiveAttempts <= 0 {
		cfg.InteractiveAttempts = 3
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 60 * time.Second
	}
	if cfg.MaxErrorBackoff <= 0 {
		cfg.MaxErrorBackoff = 8 * time.Second
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = DefaultHeaderTimeout
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.DeadEndpointTimeout <= 0 {
		cfg.DeadEndpointTimeout = 3 * cfg.HeaderTimeout
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.InteractiveCallTimeout <= 0 {
		cfg.InteractiveCallTimeout = DefaultInteractiveCallTimeout
	}
	if cfg.ExpectedCompletionTokens <= 0 {
		cfg.ExpectedCompletionTokens = 1024
	}
	if cfg.DeploymentFailures <= 0 {
		cfg.DeploymentFailures = 3
	}
	if cfg.WarmUpWait <= 0 {
		cfg.WarmUpWait = DefaultWarmUpWait
	}
	if cfg.WarmUpTTL <= 0 {
		cfg.WarmUpTTL = DefaultWarmUpTTL
	}
	if cfg.DeploymentCooldown <= 0 {
		cfg.DeploymentCooldown = 30 * time.Second
	}
	if cfg.Tokenizer == nil {
		cfg.Tokenizer = NewTokenizer()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	base := http.DefaultTransport
	var own *http.Transport
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		base = cfg.HTTPClient.Transport
	} else if t, ok := http.DefaultTransport.(*http.Transport); ok {
		// A pool of its own, which Close empties. It keeps a connection
		// for every call a worker may have in flight (waiting tasks hold
		// no slot, so hundreds may be): Go's default of 2 idle per host
		// would open a connection (and a TLS handshake) for most calls,
		// delaying each past the moment the quota admitted it.
		own = t.Clone()
		own.MaxIdleConns, own.MaxIdleConnsPerHost = 1024, 512
		base = own
	}
	c := &OpenAI{cfg: cfg, endpoints: map[string]*endpoint{}, log: cfg.Logger, transport: own, health: &memHealth{}, sleep: sleepCtx}
	for i, e := range append([]Endpoint{cfg.defaultEndpoint()}, cfg.Endpoints...) {
		if i > 0 {
			if !endpointName.MatchString(e.Name) || e.Name == DefaultEndpoint {
				return nil, fmt.Errorf("llm: endpoint name %q: use letters, digits, '.', '_' and '-' (%q is the top-level endpoint)", e.Name, DefaultEndpoint)
			}
			if e.BaseURL == "" {
				return nil, fmt.Errorf("llm: endpoint %s has no base URL", e.Name)
			}
		}
		if _, dup := c.endpoints[e.Name]; dup {
			return nil, fmt.Errorf("llm: endpoint %s is configured twice", e.Name)
		}
		ep, err := newEndpoint(e, base)
		if err != nil {
			return nil, err
		}
		c.endpoints[e.Name] = ep
	}
	for role, m := range cfg.Models {
		if _, ok := c.endpoint(m.Endpoint); !ok {
			return nil, fmt.Errorf("llm: role %s uses endpoint %q, which is not configured", role, m.Endpoint)
		}
		if err := c.checkRoutes(m); err != nil {
			return nil, fmt.Errorf("llm: role %s: %w", role, err)
		}
	}
	if _, ok := c.endpoint(cfg.Default.Endpoint); !ok {
		return nil, fmt.Errorf("llm: the default model uses endpoint %q, which is not configured", cfg.Default.Endpoint)
	}
	if err := c.checkRoutes(cfg.Default); err != nil {
		return nil, fmt.Errorf("llm: the default model: %w", err)
	}
	return c, nil
}

func newEndpoint(e Endpoint, base http.RoundTripper) (*endpoint, error) {
	httpc := &http.Client{Transport: &captureTransport{base: base, headers: e.Headers}}
	var oc openai.ClientConfig
	if e.AzureAPIVersion != "" {
		if e.BaseURL == "" {
			return nil, fmt.Errorf("llm: endpoint %s: Azure needs the resource endpoint as the base URL", e.Name)
		}
		oc = openai.DefaultAzureConfig(e.APIKey, e.BaseURL)
		oc.APIVersion = e.AzureAPIVersion
		oc.AzureModelMapperFunc = func(model string) string { return model }
	} else {
		oc = openai.DefaultConfig(e.APIKey)
		if e.BaseURL != "" {
			oc.BaseURL = strings.TrimRight(e.BaseURL, "/")
		}
	}
	oc.OrgID = e.Organization
	oc.HTTPClient = httpc
	// go-openai fails a stream after this many non-data lines in a row:
	// keep-alive comments while a model thinks are not an error (the
	// attempt's time limits bound a stream).
	oc.EmptyMessagesLimit = 1 << 20
	ep := &endpoint{Endpoint: e, client: openai.NewClientWithConfig(oc)}
	ep.noStream.Store(e.NoStream)
	return ep, nil
}

func (c *OpenAI) endpoint(name string) (*endpoint, bool) {
	if name == "" {
		name = DefaultEndpoint
	}
	e, ok := c.endpoints[name]
	return e, ok
}

// Model returns the model configuration of a role.
func (c *OpenAI) Model(role Role) ModelConfig {
	m, ok := c.cfg.Models[role]
	if !ok {
		return c.cfg.Default
	}
	if m.Name != "" {
		return m
	}
	// Settings without a model name refine the default model.
	d := c.cfg.Default
	if m.Endpoint != "" {
		d.Endpoint = m.Endpoint
	}
	if m.Temperature != nil {
		d.Temperature = m.Temperature
	}
	if m.MaxCompletionTokens > 0 {
		d.MaxCompletionTokens = m.MaxCompletionTokens
	}
	if m.ReasoningEffort != "" {
		d.ReasoningEffort = m.ReasoningEffort
	}
	if len(m.Deployments) > 0 {
		d.Deployments = m.Deployments
	}
	if len(m.Fallbacks) > 0 {
		d.Fallbacks = m.Fallbacks
	}
	return d
}

// call runs a call on one route: the role's only endpoint, with the
// client's retries, or one deployment chosen by the router, which
// acquired its quota for the first attempt.
func (c *OpenAI) call(ctx context.Context, req Request, rt route) (*Response, error) {
	r, err := c.newCallRun(req, rt)
	if err != nil {
		return nil, err
	}
	// From here the call waits (for the quota, then the endpoint): the
	// task's execution slot runs another task meanwhile.
	ctx, back := slot.Idle(ctx)
	defer back()
	r.start(ctx)
	for attempt := 1; r.spent < r.attempts; attempt++ {
		r.usage.Attempts = attempt
		settle, err := r.acquire(ctx, attempt)
		if err != nil {
			return nil, err
		}
		lim, err := r.budget(ctx, attempt, settle)
		if err != nil {
			return nil, err
		}
		resp, capt, err := r.send(ctx, lim)
		if err == nil {
			return r.finish(ctx, resp, capt, settle), nil
		}
		// Failed attempts use no tokens of the provider's quota.
		settle(ctx, 0)
		delay, again, err := r.next(ctx, attempt, capt, err)
		if err != nil {
			return nil, err
		}
		if !again {
			break
		}
		if err := c.sleep(ctx, delay); err != nil {
			return nil, r.fail(attempt, r.lastStatus, err)
		}
	}
	if r.left() <= 0 {
		return nil, r.outOfTime(r.usage.Attempts)
	}
	if r.deadLeft() <= 0 {
		return nil, r.down(r.usage.Attempts)
	}
	return nil, r.fail(r.usage.Attempts, r.lastStatus, r.lastErr)
}

// rateLimitWaits bounds the 429s a call waits out without spending an
// attempt, so a provider that throttles forever still ends the call.
const rateLimitWaits = 100

// ErrRateLimited fails a call whose provider kept answering 429 past the
// waits a call allows.
var ErrRateLimited = errors.New("rate limited")

// interactiveBackoff caps the wait between an interactive call's attempts
// (a 429's retry delay is still honoured: the quota is shared).
const interactiveBackoff = 2 * time.Second

// errInteractiveStream ends an interactive call's stream at the call's
// time limit (the call then fails with ErrCallTimeout).
var errInteractiveStream = errors.New("the stream was still open at the interactive call's time limit")

// finishLength is the finish reason of a reply cut by its length: at the
// token limit by the endpoint, or at its size bound by the client.
const finishLength = "length"

func (c *OpenAI) buildRequest(mc ModelConfig, req Request) (openai.ChatCompletionRequest, error) {
	msgs := make([]openai.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = openai.ChatCompletionMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, openai.ToolCall{ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
	}
	o := openai.ChatCompletionRequest{Model: mc.Name, Messages: msgs, MaxCompletionTokens: mc.MaxCompletionTokens, Stop: req.Stop}
	if req.MaxTokens > 0 {
		o.MaxCompletionTokens = req.MaxTokens
	}
	if req.Seed != nil {
		s := int(*req.Seed)
		o.Seed = &s
	}
	tools, choice, err := toolsOf(req)
	if err != nil {
		return o, err
	}
	o.Tools, o.ToolChoice = tools, choice
	if mc.reasoning() {
		o.ReasoningEffort = mc.ReasoningEffort
		return o, nil
	}
	temp := mc.Temperature
	if req.Temperature != nil {
		temp = req.Temperature
	}
	if temp != nil {
		o.Temperature = nonZero(*temp)
	}
	if req.TopP != nil {
		o.TopP = nonZero(*req.TopP)
	}
	return o, nil
}

// nonZero converts a sampling parameter for go-openai, which omits zeros
// (omitempty) that the API would read as its default (1.0); the smallest
// float32 means "greedy".
func nonZero(v float64) float32 {
	if f := float32(v); f != 0 {
		return f
	}
	return math.SmallestNonzeroFloat32
}

// toolsOf maps the request's tools and tool choice, checking what the API
// would refuse only after a round trip.
func toolsOf(req Request) ([]openai.Tool, any, error) {
	var tools []openai.Tool
	names := map[string]bool{}
	for i, t := range req.Tools {
		if t.Name == "" {
			return nil, nil, fmt.Errorf("tool %d has no name", i+1)
		}
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !json.Valid(params) {
			return nil, nil, fmt.Errorf("tool %s: its parameters are not valid JSON", t.Name)
		}
		names[t.Name] = true
		tools = append(tools, openai.Tool{Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params}})
	}
	switch req.ToolChoice {
	case "":
		return tools, nil, nil
	case ToolChoiceAuto, ToolChoiceNone:
		if len(tools) == 0 {
			return nil, nil, nil // the API refuses a tool choice without tools
		}
		return tools, req.ToolChoice, nil
	case ToolChoiceRequired:
		if len(tools) == 0 {
			return nil, nil, errors.New(`tool choice "required" without tools`)
		}
		return tools, req.ToolChoice, nil
	}
	if !names[req.ToolChoice] {
		return nil, nil, fmt.Errorf("tool choice %q names no tool of the request", req.ToolChoice)
	}
	return tools, openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: req.ToolChoice}}, nil
}

// response is the call's Response for the completion resp: cut at
// maxBytes (and recorded so) when longer or already cut.
func (c *OpenAI) response(mc ModelConfig, resp openai.ChatCompletionResponse, prompt, maxBytes int, cut bool) *Response {
	ch := resp.Choices[0]
	r := &Response{Text: ch.Message.Content, Reasoning: ch.Message.ReasoningContent, FinishReason: string(ch.FinishReason), Model: resp.Model}
	for _, tc := range ch.Message.ToolCalls {
		r.ToolCalls = append(r.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	if r.bound(maxBytes) || cut {
		r.FinishReason, r.CutAt = finishLength, maxBytes
	}
	u := resp.Usage
	r.Usage.PromptTokens, r.Usage.CompletionTokens = u.PromptTokens, u.CompletionTokens
	if u.CompletionTokensDetails != nil {
		r.Usage.ReasoningTokens = u.CompletionTokensDetails.ReasoningTokens
	}
	if u.PromptTokensDetails != nil {
		r.Usage.CachedTokens = u.PromptTokensDetails.CachedTokens
	}
	// Some servers omit usage; count it ourselves so accounting never
	// silently reads zero.
	if r.Usage.PromptTokens == 0 {
		r.Usage.PromptTokens = prompt
	}
	if r.Usage.CompletionTokens == 0 {
		r.Usage.CompletionTokens = c.cfg.Tokenizer.CountCompletion(mc.Name, r.Text, r.ToolCalls)
	}
	return r
}

// classify decides whether a failure is worth another attempt and how long
// to wait: the provider's delay when it gives one (told), otherwise
// exponential backoff with jitter from the attempt'th.
func (c *OpenAI) classify(status int, h http.Header, attempt int) (retry bool, delay time.Duration, told bool) {
	switch {
	case status == 0, status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status >= 500:
	default:
		return false, 0, false // 400, 401, 403, 404, 422: the same request fails again
	}
	if d, ok := providerDelay(h, status == http.StatusTooManyRequests, time.Now()); ok {
		return true, min(d+providerJitter(d), c.cfg.MaxBackoff), true
	}
	ceiling := float64(c.cfg.BaseBackoff) * math.Pow(2, float64(attempt-1))
	ceiling = math.Min(ceiling, float64(c.cfg.MaxBackoff))
	return true, time.Duration(ceiling/2 + rand.Float64()*ceiling/2), false
}

// providerJitter is a little random wait added to the provider's delay,
// so a whole cluster does not return at once: up to a quarter of it
// (10ms to 250ms), so a 20ms ask stays about 20ms.
func providerJitter(d time.Duration) time.Duration {
	return time.Duration(rand.Float64() * float64(maxJitter(d)))
}

func maxJitter(d time.Duration) time.Duration {
	return min(max(d/4, 10*time.Millisecond), 250*time.Millisecond)
}

// providerDelay reads the provider's delay as OpenAI's SDKs do:
// Retry-After-Ms first (milliseconds: Retry-After is whole seconds, and
// read first it would stretch a 20ms ask to a second), then Retry-After
// (seconds or an HTTP date, from now) and, for 429s, the larger of the
// x-ratelimit-reset-requests/tokens durations ("6m0s", "20ms").
func providerDelay(h http.Header, rateLimited bool, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if ms := strings.TrimSpace(h.Get("Retry-After-Ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v >= 0 {
			return scaled(v, time.Millisecond), true
		}
	}
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if secs, err := strconv.ParseFloat(ra, 64); err == nil && secs >= 0 {
			return scaled(secs, time.Second), true
		}
		if t, err := http.ParseTime(ra); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	if !rateLimited {
		return 0, false
	}
	var best time.Duration
	found := false
	for _, k := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		if v := strings.TrimSpace(h.Get(k)); v != "" {
			if d, err := time.ParseDuration(v); err == nil {
				found = true
				best = max(best, d)
			}
		}
	}
	return best, found
}

// scaled is v units as a Duration, at most a day: a huge or infinite
// header value would overflow it (the wait is capped at MaxBackoff anyway).
func scaled(v float64, unit time.Duration) time.Duration {
	return time.Duration(min(v, float64(24*time.Hour/unit)) * float64(unit))
}

func statusOf(err error) int {
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		return apiErr.HTTPStatusCode
	}
	var reqErr *openai.RequestError
	if errors.As(err, &reqErr) {
		return reqErr.HTTPStatusCode
	}
	return 0
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// patchBody adds what go-openai has no names for: the prefix-continuation
// fields (continue_final_message and add_generation_prompt for vLLM,
// "prefix" on the final assistant message for DeepSeek and LiteLLM) and
// cache_control breakpoints (see Endpoint.CacheMarkers).
func patchBody(req *http.Request, continueFinal, cacheMarkers bool) (*http.Request, error) {
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	// Numbers stay as written: a 64-bit seed decoded into a float64 would
	// lose its low bits, and the provider would sample with another seed.
	var body map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("patch the request body: %w", err)
	}
	msgs, _ := body["messages"].([]any)
	if continueFinal {
		body["continue_final_message"] = true
		body["add_generation_prompt"] = false
		if len(msgs) > 0 {
			if last, ok := msgs[len(msgs)-1].(map[string]any); ok && last["role"] == "assistant" {
				last["prefix"] = true
			}
		}
	}
	if cacheMarkers {
		markCache(msgs)
	}
	if b, err = json.Marshal(body); err != nil {
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(b))
	out.ContentLength = int64(len(b))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return out, nil
}

// markCache puts a cache_control breakpoint on the first system message,
// the last user message and, when the conversation ends with tool results,
// the last of them (three of the four Anthropic allows): their string
// content becomes one text part carrying it. The user message's is what an
// example's candidates share; the tool result's lets an agent's next turn
// (PExA's planner and proposer) read the turns before it.
func markCache(msgs []any) {
	mark := func(m map[string]any) {
		if text, ok := m["content"].(string); ok && text != "" {
			m["content"] = []any{map[string]any{"type": "text", "text": text, "cache_control": map[string]any{"type": "ephemeral"}}}
		}
	}
	for _, v := range msgs {
		if m, ok := v.(map[string]any); ok && m["role"] == "system" {
			mark(m)
			break
		}
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if m, ok := msgs[i].(map[string]any); ok && m["role"] == "user" {
			mark(m)
			break
		}
	}
	if n := len(msgs); n > 0 {
		if m, ok := msgs[n-1].(map[string]any); ok && m["role"] == "tool" {
			mark(m)
		}
	}
}

// captureTransport records each response's headers for the attempt that
// sent it (go-openai returns errors without them, and 429s carry
// Retry-After there), and adds the configured custom headers.
type captureTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

type captureKey struct{}

type capture struct {
	mu sync.Mutex
	h  http.Header
	// ok: the response was a 2xx (the endpoint is alive).
	ok bool
	// json is a whole completion answered to a streamed request.
	json []byte
	// continueFinal and cacheMarkers patch the request body (patchBody).
	continueFinal, cacheMarkers bool
	// watch times a streamed attempt (nil for a non-streamed one); set
	// before the request is sent.
	watch *watchdog
	// lead, when the call leads a prompt warm-up, is told at the first
	// token: the provider has processed the prompt and cached its start.
	lead *warmLead
	// maxTokens is the request's completion bound, from which the
	// response's size bounds follow (limitsFor); cut says the reply was
	// cut at them (set by the attempt's own goroutine).
	maxTokens int
	cut       bool
}

// firstToken tells a warm-up's lead that the provider has the prompt.
func (c *capture) firstToken(ctx context.Context) {
	c.lead.finish(ctx, true)
}

func (c *capture) answered() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok
}

func (c *capture) header() http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.h
}

func (t *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if c, ok := req.Context().Value(captureKey{}).(*capture); ok && (c.continueFinal || c.cacheMarkers) && req.Body != nil {
		patched, err := patchBody(req, c.continueFinal, c.cacheMarkers)
		if err != nil {
			return nil, err
		}
		req = patched
	}
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.base.RoundTrip(req)
	if resp != nil {
		if c, ok := req.Context().Value(captureKey{}).(*capture); ok {
			c.mu.Lock()
			c.h = resp.Header.Clone()
			c.ok = resp.StatusCode/100 == 2
			c.mu.Unlock()
			resp.Body = newBoundedBody(resp.Body, limitsFor(resp, c.maxTokens, c.watch != nil))
			if c.watch != nil {
				c.watch.headers()
				resp.Body = liveBody{ReadCloser: resp.Body, w: c.watch}
				if err := c.takeJSONAnswer(resp); err != nil {
					resp.Body.Close()
					return nil, err
				}
			}
		}
	}
	return resp, err
}
