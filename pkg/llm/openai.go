package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"
)

// ModelConfig is how one role calls its model.
type ModelConfig struct {
	// Name is the model id (for Azure, the deployment name).
	Name        string
	Temperature *float64
	// MaxCompletionTokens is sent as max_completion_tokens when set.
	MaxCompletionTokens int
	// ReasoningEffort (low, medium, high) for reasoning models.
	ReasoningEffort string
	// ContextWindow overrides the known window of the model family.
	ContextWindow int
	// Reasoning overrides the detection from the model name.
	Reasoning *bool
}

func (m ModelConfig) reasoning() bool {
	if m.Reasoning != nil {
		return *m.Reasoning
	}
	return IsReasoningModel(m.Name)
}

// Limiter is the shared quota the client waits on before each attempt
// (ratelimit.LLMBudget implements it).
type Limiter interface {
	// Acquire waits until model admits a call estimated at tokens; settle
	// reconciles the estimate with the real usage.
	Acquire(ctx context.Context, model string, tokens int) (settle func(ctx context.Context, actual int), err error)
	// Cooldown pauses every call to model for d, cluster-wide.
	Cooldown(ctx context.Context, model string, d time.Duration) error
}

// Config configures an OpenAI-compatible client.
type Config struct {
	BaseURL      string
	APIKey       string
	Organization string
	// AzureAPIVersion switches to Azure OpenAI: the base URL is the resource
	// endpoint and each model name is a deployment.
	AzureAPIVersion string
	// Headers are added to every request (gateways, tenant ids).
	Headers map[string]string
	// Models by role; Default serves roles not listed.
	Models  map[Role]ModelConfig
	Default ModelConfig
	// MaxAttempts per call (default 8); backoff between attempts grows from
	// BaseBackoff (default 1s) to MaxBackoff (default 60s), with jitter,
	// unless the provider says how long to wait.
	MaxAttempts int
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// AttemptTimeout bounds one HTTP attempt (default 5 minutes).
	AttemptTimeout time.Duration
	// ExpectedCompletionTokens is the completion size reserved against the
	// token quota when MaxCompletionTokens is unset (default 1024); the
	// reservation is reconciled with the real usage afterwards.
	ExpectedCompletionTokens int
	Limiter                  Limiter
	Tokenizer                *Tokenizer
	HTTPClient               *http.Client
	Logger                   *zap.Logger
}

// OpenAI is a Client on go-openai.
type OpenAI struct {
	cfg    Config
	client *openai.Client
	log    *zap.Logger
}

// New builds a client. It sends nothing until the first call.
func New(cfg Config) (*OpenAI, error) {
	if cfg.Default.Name == "" && len(cfg.Models) == 0 {
		return nil, errors.New("llm: no model configured (set a default model)")
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 8
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 60 * time.Second
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 5 * time.Minute
	}
	if cfg.ExpectedCompletionTokens <= 0 {
		cfg.ExpectedCompletionTokens = 1024
	}
	if cfg.Tokenizer == nil {
		cfg.Tokenizer = NewTokenizer()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	base := http.DefaultTransport
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		base = cfg.HTTPClient.Transport
	}
	httpc := &http.Client{Transport: &captureTransport{base: base, headers: cfg.Headers}}
	var oc openai.ClientConfig
	if cfg.AzureAPIVersion != "" {
		if cfg.BaseURL == "" {
			return nil, errors.New("llm: Azure needs the resource endpoint as the base URL")
		}
		oc = openai.DefaultAzureConfig(cfg.APIKey, cfg.BaseURL)
		oc.APIVersion = cfg.AzureAPIVersion
		oc.AzureModelMapperFunc = func(model string) string { return model }
	} else {
		oc = openai.DefaultConfig(cfg.APIKey)
		if cfg.BaseURL != "" {
			oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
		}
	}
	oc.OrgID = cfg.Organization
	oc.HTTPClient = httpc
	return &OpenAI{cfg: cfg, client: openai.NewClientWithConfig(oc), log: cfg.Logger}, nil
}

// Model returns the model configuration of a role.
func (c *OpenAI) Model(role Role) ModelConfig {
	if m, ok := c.cfg.Models[role]; ok && m.Name != "" {
		return m
	}
	return c.cfg.Default
}

// Chat implements Client.
func (c *OpenAI) Chat(ctx context.Context, req Request) (*Response, error) {
	mc := c.Model(req.Role)
	oreq := c.buildRequest(mc, req)
	prompt := c.cfg.Tokenizer.CountMessages(mc.Name, req.Messages)
	completion := oreq.MaxCompletionTokens
	if completion == 0 {
		completion = c.cfg.ExpectedCompletionTokens
	}
	window := mc.ContextWindow
	if window == 0 {
		window = ContextWindow(mc.Name)
	}
	if oreq.MaxCompletionTokens > 0 && prompt+oreq.MaxCompletionTokens > window || prompt >= window {
		return nil, &CallError{Model: mc.Name, Err: fmt.Errorf("%w: %d prompt tokens + %d completion tokens > %d", ErrContextTooLong, prompt, oreq.MaxCompletionTokens, window)}
	}
	var usage Usage
	var lastErr error
	lastStatus := 0
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		usage.Attempts = attempt
		settle := func(context.Context, int) {}
		if c.cfg.Limiter != nil {
			start := time.Now()
			s, err := c.cfg.Limiter.Acquire(ctx, mc.Name, prompt+completion)
			usage.LimiterWait += time.Since(start)
			if err != nil {
				return nil, &CallError{Model: mc.Name, Attempts: attempt - 1, Err: fmt.Errorf("waiting for the %s quota: %w", mc.Name, err), Usage: usage}
			}
			settle = s
		}
		capt := &capture{}
		actx, cancel := context.WithTimeout(context.WithValue(ctx, captureKey{}, capt), c.cfg.AttemptTimeout)
		start := time.Now()
		resp, err := c.client.CreateChatCompletion(actx, oreq)
		elapsed := time.Since(start)
		cancel()
		usage.Latency += elapsed
		if err == nil && len(resp.Choices) == 0 {
			err = errors.New("the response has no choices")
		}
		if err == nil {
			r := c.response(mc, req, resp, prompt)
			settle(ctx, r.Usage.PromptTokens+r.Usage.CompletionTokens)
			r.Usage.Latency, r.Usage.Attempts, r.Usage.RateLimited, r.Usage.LimiterWait =
				usage.Latency, usage.Attempts, usage.RateLimited, usage.LimiterWait
			return r, nil
		}
		// Failed attempts use no tokens of the provider's quota.
		settle(ctx, 0)
		if ctx.Err() != nil {
			return nil, &CallError{Model: mc.Name, Attempts: attempt, Status: lastStatus, Err: ctx.Err(), Usage: usage}
		}
		status := statusOf(err)
		lastErr, lastStatus = err, status
		retry, delay := c.classify(status, capt.header(), attempt)
		if !retry {
			return nil, &CallError{Model: mc.Name, Attempts: attempt, Status: status, Err: err, Usage: usage}
		}
		if status == http.StatusTooManyRequests {
			usage.RateLimited++
			if c.cfg.Limiter != nil {
				_ = c.cfg.Limiter.Cooldown(ctx, mc.Name, delay)
			}
		}
		if attempt == c.cfg.MaxAttempts {
			break
		}
		c.log.Debug("llm attempt failed; retrying", zap.String("model", mc.Name), zap.Int("attempt", attempt),
			zap.Int("status", status), zap.Duration("delay", delay), zap.Error(err))
		if err := sleepCtx(ctx, delay); err != nil {
			return nil, &CallError{Model: mc.Name, Attempts: attempt, Status: status, Err: err, Usage: usage}
		}
	}
	return nil, &CallError{Model: mc.Name, Attempts: c.cfg.MaxAttempts, Status: lastStatus, Err: lastErr, Usage: usage}
}

func (c *OpenAI) buildRequest(mc ModelConfig, req Request) openai.ChatCompletionRequest {
	msgs := make([]openai.ChatCompletionMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	o := openai.ChatCompletionRequest{Model: mc.Name, Messages: msgs, MaxCompletionTokens: mc.MaxCompletionTokens}
	if req.MaxTokens > 0 {
		o.MaxCompletionTokens = req.MaxTokens
	}
	if req.Seed != nil {
		s := int(*req.Seed)
		o.Seed = &s
	}
	if mc.reasoning() {
		o.ReasoningEffort = mc.ReasoningEffort
		return o
	}
	temp := mc.Temperature
	if req.Temperature != nil {
		temp = req.Temperature
	}
	if temp != nil {
		o.Temperature = float32(*temp)
		if o.Temperature == 0 {
			// go-openai omits a zero temperature (omitempty), which the
			// API would read as 1.0; the smallest float32 means "greedy".
			o.Temperature = math.SmallestNonzeroFloat32
		}
	}
	return o
}

func (c *OpenAI) response(mc ModelConfig, req Request, resp openai.ChatCompletionResponse, prompt int) *Response {
	ch := resp.Choices[0]
	r := &Response{Text: ch.Message.Content, FinishReason: string(ch.FinishReason), Model: resp.Model}
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
	if r.Usage.CompletionTokens == 0 && r.Text != "" {
		r.Usage.CompletionTokens = c.cfg.Tokenizer.Count(mc.Name, r.Text)
	}
	return r
}

// classify decides whether a failure is worth another attempt and how long
// to wait: the provider's Retry-After or rate-limit reset when it gives
// one, otherwise exponential backoff with jitter.
func (c *OpenAI) classify(status int, h http.Header, attempt int) (bool, time.Duration) {
	switch {
	case status == 0, status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status >= 500:
	default:
		return false, 0 // 400, 401, 403, 404, 422: the same request fails again
	}
	if d, ok := providerDelay(h, status == http.StatusTooManyRequests); ok {
		// A little jitter so a whole cluster does not return at once.
		d += time.Duration(rand.Float64() * float64(250*time.Millisecond))
		return true, min(d, c.cfg.MaxBackoff)
	}
	ceiling := float64(c.cfg.BaseBackoff) * math.Pow(2, float64(attempt-1))
	ceiling = math.Min(ceiling, float64(c.cfg.MaxBackoff))
	return true, time.Duration(ceiling/2 + rand.Float64()*ceiling/2)
}

// providerDelay reads Retry-After (seconds or an HTTP date) and, for 429s,
// the x-ratelimit-reset-requests/tokens durations ("6m0s", "20ms").
func providerDelay(h http.Header, rateLimited bool) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if ra := strings.TrimSpace(h.Get("Retry-After")); ra != "" {
		if secs, err := strconv.ParseFloat(ra, 64); err == nil && secs >= 0 {
			return time.Duration(secs * float64(time.Second)), true
		}
		if t, err := http.ParseTime(ra); err == nil {
			return max(time.Until(t), 0), true
		}
	}
	if ms := strings.TrimSpace(h.Get("Retry-After-Ms")); ms != "" {
		if v, err := strconv.ParseFloat(ms, 64); err == nil && v >= 0 {
			return time.Duration(v * float64(time.Millisecond)), true
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
}

func (c *capture) header() http.Header {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.h
}

func (t *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
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
			c.mu.Unlock()
		}
	}
	return resp, err
}
