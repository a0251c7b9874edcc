// Package ratelimit holds the cluster-wide limits every quorum process shares
// through Redis: requests and tokens per minute per LLM model, queries per
// second per warehouse (GCRA reservations), and concurrent queries per
// warehouse (a semaphore whose slots are leases).
//
// Reservations are made in Redis time, in one Lua call, so processes agree on
// the schedule whatever their clocks. A caller that reserves gets a start
// time and waits until it; callers never fail for lack of capacity, they
// wait (respecting their context) — the reference ReFoRCE code had no limiter
// and lost candidates to 429s instead.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/priority"
)

// Rate is a GCRA limit: Limit units per Period, with up to Burst units
// admitted at once on an idle key.
type Rate struct {
	Limit  float64
	Period time.Duration
	Burst  float64
}

// PerMinute is n units a minute with the given burst.
func PerMinute(n, burst float64) Rate { return Rate{Limit: n, Period: time.Minute, Burst: burst} }

// PerSecond is n units a second with the given burst.
func PerSecond(n, burst float64) Rate { return Rate{Limit: n, Period: time.Second, Burst: burst} }

// emissionMicros is the time one unit occupies.
func (r Rate) emissionMicros() float64 { return float64(r.Period.Microseconds()) / r.Limit }

func (r Rate) valid() error {
	if r.Limit <= 0 || r.Period <= 0 {
		return fmt.Errorf("rate %v per %v: limit and period must be positive", r.Limit, r.Period)
	}
	if r.Burst < 1 {
		return fmt.Errorf("rate %v per %v: burst %v must be at least 1", r.Limit, r.Period, r.Burst)
	}
	return nil
}

// Config configures a Limiter.
type Config struct {
	// Client is shared by every limit; it should have
	// ContextTimeoutEnabled so a caller's deadline bounds Redis calls too.
	Client redis.UniversalClient
	// Prefix namespaces the keys (default rdb.RateLimitPrefix).
	Prefix string
	// Reserve is the share of every burst that batch work may not take
	// (default DefaultReserve; negative: none): a batch run saturating a
	// quota leaves that much for interactive questions to start at once,
	// at no cost to the batch's long-run rate.
	Reserve float64
}

// DefaultReserve keeps a fifth of each burst for interactive work.
const DefaultReserve = 0.2

// Limiter makes reservations against Redis.
type Limiter struct {
	rdb      redis.UniversalClient
	prefix   string
	batchCut float64
	lines    lines
	// clock is nil (the real clock) except in tests, which read the waits
	// Warm computes without spending them.
	clock clock
}

// clock is where Warm reads the time and sleeps.
type clock interface {
	now() time.Time
	sleep(ctx context.Context, d time.Duration) error
}

type realClock struct{}

func (realClock) now() time.Time                                   { return time.Now() }
func (realClock) sleep(ctx context.Context, d time.Duration) error { return sleep(ctx, d) }

func (l *Limiter) clk() clock {
	if l.clock == nil {
		return realClock{}
	}
	return l.clock
}

// New returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Client == nil {
		return nil, errors.New("ratelimit: a Redis client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = rdb.RateLimitPrefix
	}
	switch {
	case cfg.Reserve == 0:
		cfg.Reserve = DefaultReserve
	case cfg.Reserve < 0:
		cfg.Reserve = 0
	case cfg.Reserve >= 1:
		return nil, fmt.Errorf("ratelimit: reserve %g must be below 1", cfg.Reserve)
	}
	return &Limiter{rdb: cfg.Client, prefix: cfg.Prefix, batchCut: cfg.Reserve}, nil
}

// Claim is n units on one key at one rate.
type Claim struct {
	Key   string
	Rate  Rate
	Units float64
}

func (l *Limiter) key(k string) string { return l.prefix + k }

// reserve admits the claims together, or returns how long until they
// would fit (rdb.Reserve: nothing is booked for later, so a refund helps
// whoever asks next). group names the cooldown shared by the claims (e.g.
// the model); while a cooldown is on, the wait is its remainder.
func (l *Limiter) reserve(ctx context.Context, group string, claims []Claim) (wait time.Duration, reserved bool, err error) {
	gcra, err := l.gcra(ctx, claims)
	if err != nil {
		return 0, false, err
	}
	ok, wait, err := rdb.Reserve(ctx, l.rdb, l.key(rdb.CooldownName(group)), gcra)
	if err != nil {
		return 0, false, fmt.Errorf("reserve %s: %w", group, err)
	}
	return wait, ok, nil
}

// gcra is the claims as the reservation scripts take them.
func (l *Limiter) gcra(ctx context.Context, claims []Claim) ([]rdb.GCRAClaim, error) {
	gcra := make([]rdb.GCRAClaim, 0, len(claims))
	for _, c := range claims {
		if err := c.Rate.valid(); err != nil {
			return nil, fmt.Errorf("limit %s: %w", c.Key, err)
		}
		em := c.Rate.emissionMicros()
		tol := em * c.Rate.Burst
		// Interactive claims (priority.Interactive) may use the whole
		// burst, the part batch work leaves free included.
		if !priority.IsInteractive(ctx) {
			tol *= 1 - l.batchCut
		}
		gcra = append(gcra, rdb.GCRAClaim{Key: l.key(c.Key), EmissionMicros: em, ToleranceMicros: tol, Units: c.Units})
	}
	return gcra, nil
}

// Try admits the claims now or says how long until they would fit,
// without waiting: for callers that answer "too many requests" instead.
func (l *Limiter) Try(ctx context.Context, group string, claims ...Claim) (wait time.Duration, admitted bool, err error) {
	return l.reserve(ctx, group, claims)
}

// Wait returns once the claims are admitted, sleeping for as long as the
// limiter says they would not fit (with a little jitter, so that callers
// told the same time do not all return at once). This process's callers
// of one group and priority wait in a line whose head alone asks Redis.
func (l *Limiter) Wait(ctx context.Context, group string, claims ...Claim) (time.Duration, error) {
	d, _, err := l.wait(ctx, group, func() []Claim { return claims })
	return d, err
}

// wait is Wait, also saying whether the claims were refused at least once
// (the demand met the limit). The claims are asked for at each try: a
// limit may change while a caller waits in line (a learned rate cut
// after a 429), and a caller queued at the old rate must not be admitted
// at it.
func (l *Limiter) wait(ctx context.Context, group string, claims func() []Claim) (_ time.Duration, refused bool, _ error) {
	start := time.Now()
	leave, err := l.lines.wait(ctx, lineKey(ctx, group))
	if err != nil {
		return time.Since(start), false, err
	}
	defer leave()
	for {
		wait, admitted, err := l.reserve(ctx, group, claims())
		if err != nil || admitted {
			return time.Since(start), refused, err
		}
		refused = true
		wait += time.Duration(rand.Int64N(int64(min(wait/10, 5*time.Millisecond)) + 1))
		if err := sleep(ctx, wait); err != nil {
			return time.Since(start), refused, err
		}
	}
}

// lineKey is the line of group's callers of ctx's priority: an interactive
// caller may use the burst batch work leaves, so it does not queue behind
// batch callers.
func lineKey(ctx context.Context, group string) string {
	if priority.IsInteractive(ctx) {
		return "interactive\x00" + group
	}
	return "batch\x00" + group
}

// Adjust charges (units > 0) or refunds (units < 0) a key after the fact,
// e.g. to reconcile a token estimate with the real usage.
func (l *Limiter) Adjust(ctx context.Context, key string, rate Rate, units float64) error {
	if units == 0 {
		return nil
	}
	if err := rate.valid(); err != nil {
		return err
	}
	if err := rdb.Adjust(ctx, l.rdb, l.key(key), rate.emissionMicros(), units); err != nil {
		return fmt.Errorf("adjust %s: %w", key, err)
	}
	return nil
}

// Cooldown pauses every reservation of group for d (a provider said
// Retry-After); a longer pause already in place is kept.
func (l *Limiter) Cooldown(ctx context.Context, group string, d time.Duration) error {
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	if ms <= 0 {
		return nil
	}
	if err := rdb.Cooldown(ctx, l.rdb, l.key(rdb.CooldownName(group)), time.Duration(ms)*time.Millisecond); err != nil {
		return fmt.Errorf("cooldown %s: %w", group, err)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
