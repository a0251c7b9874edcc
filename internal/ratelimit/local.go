package ratelimit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/quorumsql/quorum/pkg/llm"
)

// Local applies LLM quotas within one process, for commands that run
// without Redis (quorum solve). It implements llm.Limiter with the same
// quota resolution and bursts as LLMBudget.
type Local struct {
	// Budget supplies the quotas; its Limiter is not used.
	Budget LLMBudget

	mu      sync.Mutex
	buckets map[string]*localBucket
}

type localBucket struct {
	req, tok *rate.Limiter
	// paused is when a provider's Retry-After lets calls go again.
	paused time.Time
}

func (l *Local) bucket(bk llm.Bucket) *localBucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	group := l.Budget.group(bk)
	if b, ok := l.buckets[group]; ok {
		return b
	}
	if l.buckets == nil {
		l.buckets = map[string]*localBucket{}
	}
	req, tok := l.Budget.configured(bk).rates()
	b := &localBucket{}
	if req.Limit > 0 {
		b.req = rate.NewLimiter(rate.Limit(req.Limit/req.Period.Seconds()), int(req.Burst))
	}
	if tok.Limit > 0 {
		b.tok = rate.NewLimiter(rate.Limit(tok.Limit/tok.Period.Seconds()), int(tok.Burst))
	}
	l.buckets[group] = b
	return b
}

// Acquire waits for the bucket's cooldown, one request and tokens.
func (l *Local) Acquire(ctx context.Context, bk llm.Bucket, tokens int) (func(context.Context, int), error) {
	b := l.bucket(bk)
	noop := func(context.Context, int) {}
	l.mu.Lock()
	pause := time.Until(b.paused)
	l.mu.Unlock()
	if pause > 0 {
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return noop, ctx.Err()
		case <-t.C:
		}
	}
	if b.req != nil {
		if err := b.req.Wait(ctx); err != nil {
			return noop, err
		}
	}
	if b.tok == nil || tokens <= 0 {
		return noop, nil
	}
	if err := waitN(ctx, b.tok, tokens); err != nil {
		return noop, err
	}
	// Spending less than estimated is not refunded (conservative);
	// spending more is charged before the next call can go.
	return func(_ context.Context, actual int) {
		if extra := actual - tokens; extra > 0 {
			for extra > 0 {
				n := min(extra, b.tok.Burst())
				b.tok.ReserveN(time.Now(), n)
				extra -= n
			}
		}
	}, nil
}

// waitN takes n tokens, in pieces of at most the burst (a call's estimate
// may exceed a second's worth of a small quota).
func waitN(ctx context.Context, lim *rate.Limiter, n int) error {
	for n > 0 {
		k := min(n, lim.Burst())
		if err := lim.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// Cooldown pauses the bucket's calls for d.
func (l *Local) Cooldown(_ context.Context, bk llm.Bucket, d time.Duration) error {
	b := l.bucket(bk)
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := time.Now().Add(d); until.After(b.paused) {
		b.paused = until
	}
	return nil
}
