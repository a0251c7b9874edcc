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
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

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
	// Prefix namespaces the keys (default "quorum:rl:").
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
}

// New returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Client == nil {
		return nil, errors.New("ratelimit: a Redis client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "quorum:rl:"
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

// reserveScript admits every claim together now, or none of them and says
// how long until they would all fit: nothing is booked for later, so a
// refund (a token estimate reconciled after a call) helps whoever asks
// next instead of being lost to callers already scheduled. A claim larger
// than its burst fits when its key is idle. A cooldown key (set after a
// provider 429) defers everything. Returns {admitted, wait_us}.
var reserveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cd = redis.call('PTTL', KEYS[#KEYS])
if cd > 0 then return {0, cd * 1000} end
local n = #KEYS - 1
local wait = 0
local tats = {}
for i = 1, n do
  local em = tonumber(ARGV[(i-1)*3 + 1])
  local tol = tonumber(ARGV[(i-1)*3 + 2])
  local units = tonumber(ARGV[(i-1)*3 + 3])
  if em * units > tol then tol = em * units end
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  tats[i] = tat
  local w = tat + em * units - tol - now
  if w > wait then wait = w end
end
if wait > 0 then return {0, string.format('%.0f', wait)} end
for i = 1, n do
  local em = tonumber(ARGV[(i-1)*3 + 1])
  local units = tonumber(ARGV[(i-1)*3 + 3])
  local newtat = tats[i] + em * units
  local ttl = math.ceil((newtat - now) / 1000) + 1000
  redis.call('SET', KEYS[i], string.format('%.0f', newtat), 'PX', ttl)
end
return {1, '0'}
`)

// adjustScript moves a key's schedule by units (negative refunds), never
// before now.
var adjustScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
tat = tat + tonumber(ARGV[1]) * tonumber(ARGV[2])
if tat <= now then redis.call('DEL', KEYS[1]) return 0 end
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return 1
`)

// cooldownScript extends (never shortens) a pause.
var cooldownScript = redis.NewScript(`
local cur = redis.call('PTTL', KEYS[1])
if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end
return 1
`)

func (l *Limiter) key(k string) string { return l.prefix + k }

// reserve admits the claims together, or returns how long until they
// would fit. group names the cooldown shared by the claims (e.g. the
// model); while a cooldown is on, the wait is its remainder.
func (l *Limiter) reserve(ctx context.Context, group string, claims []Claim) (wait time.Duration, reserved bool, err error) {
	keys := make([]string, 0, len(claims)+1)
	args := make([]any, 0, 3*len(claims))
	for _, c := range claims {
		if err := c.Rate.valid(); err != nil {
			return 0, false, fmt.Errorf("limit %s: %w", c.Key, err)
		}
		em := c.Rate.emissionMicros()
		tol := em * c.Rate.Burst
		// Interactive claims (priority.Interactive) may use the whole
		// burst, the part batch work leaves free included.
		if !priority.IsInteractive(ctx) {
			tol *= 1 - l.batchCut
		}
		keys = append(keys, l.key(c.Key))
		args = append(args, em, tol, c.Units)
	}
	keys = append(keys, l.key("cooldown:"+group))
	res, err := reserveScript.Run(ctx, l.rdb, keys, args...).Slice()
	if err != nil {
		return 0, false, fmt.Errorf("reserve %s: %w", group, err)
	}
	ok, _ := res[0].(int64)
	var micros float64
	switch v := res[1].(type) {
	case int64:
		micros = float64(v)
	case string:
		micros, _ = strconv.ParseFloat(v, 64)
	}
	return time.Duration(micros) * time.Microsecond, ok == 1, nil
}

// Try admits the claims now or says how long until they would fit,
// without waiting: for callers that answer "too many requests" instead.
func (l *Limiter) Try(ctx context.Context, group string, claims ...Claim) (wait time.Duration, admitted bool, err error) {
	return l.reserve(ctx, group, claims)
}

// Wait returns once the claims are admitted, sleeping for as long as the
// limiter says they would not fit (with a little jitter, so that callers
// told the same time do not all return at once).
func (l *Limiter) Wait(ctx context.Context, group string, claims ...Claim) (time.Duration, error) {
	var waited time.Duration
	for {
		wait, admitted, err := l.reserve(ctx, group, claims)
		if err != nil || admitted {
			return waited, err
		}
		wait += time.Duration(rand.Int64N(int64(min(wait/10, 5*time.Millisecond)) + 1))
		if err := sleep(ctx, wait); err != nil {
			return waited + wait, err
		}
		waited += wait
	}
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
	if err := adjustScript.Run(ctx, l.rdb, []string{l.key(key)}, rate.emissionMicros(), units).Err(); err != nil {
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
	if err := cooldownScript.Run(ctx, l.rdb, []string{l.key("cooldown:" + group)}, ms).Err(); err != nil {
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
