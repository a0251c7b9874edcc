package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Warmer sends the first of the calls that start with the same long
// prompt ahead of the others (ratelimit.LLMBudget implements it, across
// the cluster). A provider caches a prompt's start only once a request has
// been processed up to its first token, so an example's candidates sent
// together all pay for the whole prompt; sent after the first, they read
// it from the cache (50–90 % cheaper, and outside Anthropic's input TPM).
type Warmer interface {
	// Warm returns lead when the caller is the first with key: it sends
	// at once and calls done(true) once the provider has its prompt (its
	// first token), or done(false) when its call failed, which lets the
	// next caller lead. Otherwise Warm has waited until key was warm, at
	// most wait, giving ctx's execution slot back meanwhile (slot.Idle),
	// and done is a no-op. lock bounds a lead that never calls done (its
	// process died); ttl is how long warm lasts.
	Warm(ctx context.Context, key string, lock, wait, ttl time.Duration) (lead bool, done func(ctx context.Context, ok bool), err error)
}

// Warm-up defaults (Config.WarmUpWait, WarmUpTTL).
const (
	// DefaultWarmUpWait bounds a follower's wait for the first call: past
	// it the follower is sent anyway (the first may be queued behind the
	// quota, or slow).
	DefaultWarmUpWait = 20 * time.Second
	// DefaultWarmUpTTL is how long a warmed prompt start is taken as
	// cached: OpenAI and Anthropic keep one 5 minutes from its last use.
	DefaultWarmUpTTL = 5 * time.Minute
	// warmUpLock frees the lead of a call whose process died.
	warmUpLock = 2 * time.Minute
	// minWarmBytes is the shortest prompt start worth warming: providers
	// cache 1,024 tokens or more, about 4 bytes a token.
	minWarmBytes = 4096
)

// warmKey is the digest of what the calls of a group share: the model,
// the tools, and the messages up to the first user message (the schema and
// instructions; what follows is a candidate's own turns). "" when that is
// too short to be cached.
func warmKey(endpoint, model string, req Request) string {
	n := 0
	end := len(req.Messages)
	for i, m := range req.Messages {
		n += len(m.Content)
		if m.Role == "user" {
			end = i + 1
			break
		}
	}
	if n < minWarmBytes {
		return ""
	}
	h := sha256.New()
	h.Write([]byte(endpoint + "\x00" + model + "\x00"))
	if len(req.Tools) > 0 {
		b, _ := json.Marshal(req.Tools)
		h.Write(b)
	}
	for _, m := range req.Messages[:end] {
		h.Write([]byte("\x00" + m.Role + "\x00" + m.Content))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// warmLead is the lead call's done, told at its first token.
type warmLead struct {
	once sync.Once
	done func(ctx context.Context, ok bool)
}

func (w *warmLead) finish(ctx context.Context, ok bool) {
	if w != nil {
		w.once.Do(func() { w.done(context.WithoutCancel(ctx), ok) })
	}
}

type warmLeadKey struct{}

// leadOf is ctx's lead call, if it leads a warm-up.
func leadOf(ctx context.Context) *warmLead {
	w, _ := ctx.Value(warmLeadKey{}).(*warmLead)
	return w
}

// warmUp sends req ahead of, or after, the calls starting with the same
// prompt when its endpoint asks for it (Endpoint.WarmUp). The returned
// context carries a lead's done, which the call tells at its first token;
// end is called with the call's outcome. waited is a follower's wait.
func (c *OpenAI) warmUp(ctx context.Context, mc ModelConfig, req Request) (_ context.Context, waited time.Duration, end func(ok bool)) {
	nop := func(bool) {}
	w, ok := c.cfg.Limiter.(Warmer)
	if !ok {
		return ctx, 0, nop
	}
	ep, name := mc.Endpoint, mc.Name
	if len(mc.Deployments) > 0 {
		// A model over deployments: warmed on the first, which routing
		// prefers while it has headroom.
		ep, name = mc.Deployments[0].Endpoint, firstNonEmpty(mc.Deployments[0].Name, mc.Name)
	}
	e, found := c.endpoint(ep)
	if !found || !e.WarmUp {
		return ctx, 0, nop
	}
	key := warmKey(ep, name, req)
	if key == "" {
		return ctx, 0, nop
	}
	start := time.Now()
	// A follower waits without its slot (the Warmer leaves it).
	lead, done, err := w.Warm(ctx, key, warmUpLock, c.cfg.WarmUpWait, c.cfg.WarmUpTTL)
	if err != nil {
		// The warm-up only saves money: a call is never failed for it.
		c.log.Debug("prompt warm-up unavailable; sending at once", zap.Error(err))
		return ctx, 0, nop
	}
	if !lead {
		return ctx, time.Since(start), nop
	}
	wl := &warmLead{done: done}
	return context.WithValue(ctx, warmLeadKey{}, wl), 0, func(ok bool) { wl.finish(ctx, ok) }
}
