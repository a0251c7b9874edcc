package llm

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Learner is a Limiter that learns the provider's real limits from what
// its answers say (ratelimit.LLMBudget is one): a configured quota is
// often wrong or shared, and the provider's word is the truth.
type Learner interface {
	// Learn hears what one answered attempt of the bucket said.
	Learn(ctx context.Context, b Bucket, s LimitSignal)
}

// LimitSignal is what one answered attempt said of the provider's limits.
type LimitSignal struct {
	// RateLimited: the attempt was answered 429.
	RateLimited bool
	// TokensShort: the 429's headers show tokens, not requests, ran out.
	TokensShort bool
	// RequestsLimit and TokensLimit are the per-minute limits the
	// provider's headers state (0: not stated).
	RequestsLimit, TokensLimit float64
	// Reset is the longest wait the headers state for the provider's
	// window to refill (x-ratelimit-reset-*; 0: not stated).
	Reset time.Duration
}

// limitHeaders are the headers stating a provider's per-minute limits, as
// OpenAI (and Azure, vLLM gateways, llmsim) and Anthropic name them.
var limitHeaders = struct{ requests, tokens []string }{
	requests: []string{"X-Ratelimit-Limit-Requests", "Anthropic-Ratelimit-Requests-Limit"},
	tokens:   []string{"X-Ratelimit-Limit-Tokens", "Anthropic-Ratelimit-Tokens-Limit"},
}

// limitSignal reads an answered attempt's headers. need is the tokens the
// call counted on, for telling which limit a 429 met.
func limitSignal(h http.Header, rateLimited bool, need int) LimitSignal {
	s := LimitSignal{RateLimited: rateLimited}
	if h == nil {
		return s
	}
	s.RequestsLimit = firstNumber(h, limitHeaders.requests)
	s.TokensLimit = firstNumber(h, limitHeaders.tokens)
	for _, k := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		if d, err := time.ParseDuration(strings.TrimSpace(h.Get(k))); err == nil && d > s.Reset {
			s.Reset = d
		}
	}
	if rateLimited {
		reqLeft, reqOK := headerInt(h, "X-Ratelimit-Remaining-Requests")
		tokLeft, tokOK := headerInt(h, "X-Ratelimit-Remaining-Tokens")
		s.TokensShort = tokOK && tokLeft < need && (!reqOK || reqLeft >= 1)
	}
	return s
}

// firstNumber is the first of the headers holding a positive number.
func firstNumber(h http.Header, names []string) float64 {
	for _, n := range names {
		if v, err := strconv.ParseFloat(strings.TrimSpace(h.Get(n)), 64); err == nil && v > 0 && v < 1e12 {
			return v
		}
	}
	return 0
}

func headerInt(h http.Header, name string) (int, bool) {
	v, err := strconv.Atoi(strings.TrimSpace(h.Get(name)))
	return v, err == nil
}

// learn tells the limiter, when it learns, what an attempt said.
func (c *OpenAI) learn(ctx context.Context, b Bucket, h http.Header, rateLimited bool, need int) {
	if l, ok := c.cfg.Limiter.(Learner); ok {
		l.Learn(ctx, b, limitSignal(h, rateLimited, need))
	}
}
