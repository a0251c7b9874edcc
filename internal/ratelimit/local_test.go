package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
)

// TestLocalHoldsTheQuota: the in-process limiter admits the burst at once
// and the rest at the quota's rate, tokens and Retry-After cooldowns
// included. Only lower bounds on time are checked (a slow machine can only
// make calls later).
func TestLocalHoldsTheQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bk := llm.Bucket{Model: "m"}
	for _, tt := range []struct {
		name   string
		quota  LLMQuota
		calls  int
		tokens int
		min    time.Duration
	}{
		// 600/min: a burst of 5, then 10 a second: 15 calls need ≥ 1 s.
		{"requests", LLMQuota{RequestsPerMinute: 600}, 15, 0, 900 * time.Millisecond},
		// 6,000 tokens/min: a burst of 50, then 100 a second: 3 calls of
		// 100 tokens need ≥ 2.5 s.
		{"tokens", LLMQuota{TokensPerMinute: 6000}, 3, 100, 2400 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := &Local{Budget: LLMBudget{Default: tt.quota}}
			start := time.Now()
			for range tt.calls {
				settle, err := l.Acquire(ctx, bk, tt.tokens)
				if err != nil {
					t.Fatal(err)
				}
				settle(ctx, tt.tokens)
			}
			if got := time.Since(start); got < tt.min {
				t.Errorf("%d calls took %v, the quota needs at least %v", tt.calls, got, tt.min)
			}
		})
	}
	t.Run("cooldown", func(t *testing.T) {
		t.Parallel()
		l := &Local{}
		if err := l.Cooldown(ctx, bk, 300*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := l.Acquire(ctx, bk, 10); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < 290*time.Millisecond {
			t.Errorf("a call went %v into a 300ms cooldown", got)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_ = l.Cooldown(ctx, bk, time.Minute)
		if _, err := l.Acquire(cctx, bk, 10); err == nil {
			t.Error("a cancelled call waiting on a cooldown was admitted")
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		l := &Local{}
		start := time.Now()
		for range 1000 {
			if _, err := l.Acquire(ctx, bk, 1000); err != nil {
				t.Fatal(err)
			}
		}
		if time.Since(start) > 5*time.Second {
			t.Error("no quota, yet calls waited")
		}
	})
}
