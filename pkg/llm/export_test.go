package llm

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Defaulted is cfg with the defaults New fills in.
func Defaulted(cfg Config) Config {
	if cfg.Default.Name == "" {
		cfg.Default.Name = "gpt-4o"
	}
	c, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return c.cfg
}

// The interactive caps, for the arithmetic over the defaults.
const (
	InteractiveHeaderTimeout = interactiveHeaderTimeout
	InteractiveDeadTimeout   = interactiveDeadTimeout
	InteractiveBackoff       = interactiveBackoff
)

// WireBytes is the most the client reads of a 2xx response to a request
// whose completion is bounded by maxTokens.
func WireBytes(maxTokens int, stream bool) int64 { return wireBytes(maxTokens, stream) }

// ProviderDelay is providerDelay, and RateLimitWaits the 429 waits a call
// takes without spending an attempt.
var ProviderDelay = providerDelay

const RateLimitWaits = rateLimitWaits

// MaxJitter is the most jitter added to a provider's delay d.
func MaxJitter(d time.Duration) time.Duration { return maxJitter(d) }

// RecordWaits makes c record the waits between its calls' attempts
// instead of sleeping them; the returned func lists them in order.
func RecordWaits(c *OpenAI) func() []time.Duration {
	var mu sync.Mutex
	var got []time.Duration
	c.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return ctx.Err()
	}
	return func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// LimitSignalOf is what the client tells a Learner of an answer's headers.
var LimitSignalOf = limitSignal
