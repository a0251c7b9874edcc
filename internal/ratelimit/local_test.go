package ratelimit

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
)

// TestLocalHoldsTheQuota: the in-process limiter admits the burst at once
// and the rest at the quota's rate, tokens and Retry-After cooldowns
// included. Each case runs in a synctest bubble, whose clock moves only
// when every goroutine waits: the time the calls took is the time the
// limiter made them wait, exactly, however slow the machine.
func TestLocalHoldsTheQuota(t *testing.T) {
	t.Parallel()
	bk := llm.Bucket{Model: "m"}
	for _, tt := range []struct {
		name   string
		quota  LLMQuota
		calls  int
		tokens int
		want   time.Duration
	}{
		// 600/min: a burst of 5, then 10 a second: 15 calls take 1 s.
		{"requests", LLMQuota{RequestsPerMinute: 600}, 15, 0, time.Second},
		// 6,000 tokens/min: a burst of 50, then 100 a second: 3 calls of
		// 100 tokens take 2.5 s.
		{"tokens", LLMQuota{TokensPerMinute: 6000}, 3, 100, 2500 * time.Millisecond},
		// No quota: 1,000 calls of 1,000 tokens never wait.
		{"unlimited", LLMQuota{}, 1000, 1000, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				l := &Local{Budget: LLMBudget{Default: tt.quota}}
				start := time.Now()
				for range tt.calls {
					settle, err := l.Acquire(ctx, bk, tt.tokens)
					if err != nil {
						t.Fatal(err)
					}
					settle(ctx, tt.tokens)
				}
				// x/time/rate computes in float seconds: allow a
				// microsecond of rounding either way.
				if got := time.Since(start); got < tt.want-time.Microsecond || got > tt.want+time.Microsecond {
					t.Errorf("%d calls waited %v in all, the quota makes them wait %v", tt.calls, got, tt.want)
				}
			})
		})
	}
	t.Run("cooldown", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			l := &Local{}
			if err := l.Cooldown(ctx, bk, 300*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			_ = l.Cooldown(ctx, bk, 10*time.Millisecond) // shorter: ignored
			start := time.Now()
			if _, err := l.Acquire(ctx, bk, 10); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != 300*time.Millisecond {
				t.Errorf("a call during a 300ms cooldown waited %v, want the whole cooldown", got)
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_ = l.Cooldown(ctx, bk, time.Minute)
			if _, err := l.Acquire(cctx, bk, 10); err == nil {
				t.Error("a cancelled call waiting on a cooldown was admitted")
			}
		})
	})
}
