package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/slot"
)

// warmPoll bounds how often a follower reads a warm-up mark: it waits
// about one time to first token, and a few reads a second per follower
// are little for Redis.
const (
	warmPollFirst = 20 * time.Millisecond
	warmPollMax   = 200 * time.Millisecond
)

// Warm lets the first call with a prompt start (key) lead, cluster-wide,
// and the others wait until it has warmed the provider's cache, at most
// wait, without their execution slot (slot.Idle). It implements
// llm.Warmer.
func (b *LLMBudget) Warm(ctx context.Context, key string, lock, wait, ttl time.Duration) (bool, func(context.Context, bool), error) {
	k := b.Limiter.key(rdb.WarmName(key))
	nop := func(context.Context, bool) {}
	clk := b.Limiter.clk()
	deadline := clk.now().Add(wait)
	poll := warmPollFirst
	back := func() {}
	defer func() { back() }()
	for {
		state, err := rdb.WarmTake(ctx, b.Limiter.rdb, k, lock)
		if err != nil {
			return false, nop, fmt.Errorf("read the warm-up mark %s: %w", k, err)
		}
		switch state {
		case rdb.WarmLead:
			return true, func(ctx context.Context, ok bool) {
				if ok {
					_ = b.Limiter.rdb.Set(ctx, k, rdb.WarmReady, ttl).Err()
					return
				}
				// Failed: the next caller leads.
				_, _ = rdb.DeleteIfEquals(ctx, b.Limiter.rdb, k, rdb.WarmPending)
			}, nil
		case rdb.WarmReady:
			return false, nop, nil
		}
		left := deadline.Sub(clk.now())
		if left <= 0 {
			return false, nop, nil // sent anyway: the lead is slow or queued
		}
		if poll == warmPollFirst {
			// Only a caller that must wait leaves its slot.
			ctx, back = slot.Idle(ctx)
		}
		if err := clk.sleep(ctx, min(poll, left)); err != nil {
			return false, nop, err
		}
		poll = min(2*poll, warmPollMax)
	}
}
