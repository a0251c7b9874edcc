package serve

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/priority"
)

// Limits are one tenant's quotas; zero means none.
type Limits struct {
	RequestsPerMinute float64
	TokensPerDay      int64
	// BudgetPerDay is the money a tenant's questions may spend per UTC day
	// at the endpoints' prices: a question is refused when the day's spend
	// plus the mean of its questions so far would pass it.
	BudgetPerDay float64
}

// Tenants maps API keys to tenants. Only hashes of the keys are kept, so
// a dump of the process holds no key.
type Tenants struct {
	byHash map[[sha256.Size]byte]string
	// Limits per tenant, and Default for tenants without their own.
	Limits  map[string]Limits
	Default Limits
}

// ParseKeys reads "tenant:key" lines (blank lines and # comments
// ignored). src names the input in errors; a key is never quoted in one.
func ParseKeys(r io.Reader, src string) (*Tenants, error) {
	t := &Tenants{byHash: map[[sha256.Size]byte]string{}, Limits: map[string]Limits{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tenant, key, ok := strings.Cut(line, ":")
		tenant, key = strings.TrimSpace(tenant), strings.TrimSpace(key)
		switch {
		case !ok || tenant == "" || key == "":
			return nil, fmt.Errorf("%s:%d: want tenant:key", src, n)
		case len(key) < 16:
			return nil, fmt.Errorf("%s:%d: tenant %s's key is under 16 characters; use a long random key", src, n, tenant)
		}
		h := sha256.Sum256([]byte(key))
		if prev, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("%s:%d: tenant %s reuses the key of tenant %s", src, n, tenant, prev)
		}
		t.byHash[h] = tenant
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if len(t.byHash) == 0 {
		return nil, fmt.Errorf("%s: no tenant:key lines", src)
	}
	return t, nil
}

// Tenant returns the tenant of an API key.
func (t *Tenants) Tenant(key string) (string, bool) {
	if key == "" {
		return "", false
	}
	h := sha256.Sum256([]byte(key))
	for k, tenant := range t.byHash {
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			return tenant, true
		}
	}
	return "", false
}

// Names lists the tenants, sorted.
func (t *Tenants) Names() []string {
	seen := map[string]bool{}
	var out []string
	for _, tenant := range t.byHash {
		if !seen[tenant] {
			seen[tenant] = true
			out = append(out, tenant)
		}
	}
	sort.Strings(out)
	return out
}

// LimitsOf returns a tenant's quotas.
func (t *Tenants) LimitsOf(tenant string) Limits {
	if l, ok := t.Limits[tenant]; ok {
		return l
	}
	return t.Default
}

// quota enforces tenants' limits in Redis, across serve processes.
type quota struct {
	rdb redis.UniversalClient
	lim *ratelimit.Limiter
}

var tokensKey = rdb.TokensKey

// admit takes one request from the tenant's per-minute quota and checks
// its tokens and money for the day; when refused it says how long to wait,
// or returns a refusal (*overTokens, *overBudget). asks says the request
// asks a question, whose tokens are reserved here (tokenReservation); a
// rerun calls no LLM and needs only the day not spent.
//
// An admitted question's reservation is returned (its ledger field, ""
// if none): holdTokens moves it to the question once it is stored, and
// release gives it back if the request ends without storing one.
func (q *quota) admit(ctx context.Context, tenant string, l Limits, asks bool) (string, time.Duration, error) {
	var hold string
	if l.TokensPerDay > 0 {
		var err error
		hold, err = rdb.ReserveTokens(ctx, q.rdb, tenant, func(v rdb.TokenLedger) (int64, error) {
			return tokenReservation(tenant, l.TokensPerDay, v, asks)
		})
		if err != nil {
			return "", 0, err
		}
	}
	wait, err := q.admitRest(ctx, tenant, l)
	if wait > 0 || err != nil {
		// Refused after all: the reservation goes back at once.
		q.release(ctx, tenant, hold)
		return "", wait, err
	}
	return hold, 0, nil
}

// release gives back an admission's reservation whose request stored no
// question (a bad body, a replayed Idempotency-Key, an unavailable store),
// at once rather than when it lapses.
func (q *quota) release(ctx context.Context, tenant, hold string) {
	if hold != "" {
		_ = rdb.ReleaseTokenHold(context.WithoutCancel(ctx), q.rdb, tenant, hold)
	}
}

// admitRest checks the tenant's money for the day and takes a request
// from its per-minute quota.
func (q *quota) admitRest(ctx context.Context, tenant string, l Limits) (time.Duration, error) {
	if l.BudgetPerDay > 0 {
		spent, n, err := q.spent(ctx, tenant)
		if err != nil {
			return 0, err
		}
		if spent >= l.BudgetPerDay || n > 0 && spent+spent/float64(n) > l.BudgetPerDay {
			b := &overBudget{tenant: tenant, spent: spent, budget: l.BudgetPerDay, wait: untilMidnight()}
			if n > 0 {
				b.mean = spent / float64(n)
			}
			return 0, b
		}
	}
	if l.RequestsPerMinute > 0 && q.lim != nil {
		burst := max(1, l.RequestsPerMinute/6) // ten seconds' worth
		wait, ok, err := q.lim.Try(priority.Interactive(ctx), rdb.TenantGroup(tenant),
			ratelimit.Claim{Key: rdb.TenantRequestsName(tenant), Rate: ratelimit.PerMinute(l.RequestsPerMinute, burst), Units: 1})
		if err != nil || ok {
			return 0, err
		}
		return max(wait, time.Second), nil
	}
	return 0, nil
}

// Token limits are charged before a question runs. A question is admitted
// only if, atomically in Redis (rdb.ReserveTokens), the day's charged
// tokens plus what the tenant's unfinished questions hold plus its own
// reservation R stay within the limit L, and R is then held until the
// question's cost is charged, in the same transaction that releases it
// (rdb.ChargeTokens; a cancelled question's through rdb.SettleTokenHold).
// R is the tenant's mean tokens per question today (else yesterday's): as
// --tenant-budget does with money, a question is refused once one more at
// the mean would pass the limit. With no such history R is all that is
// left of the limit, so that question runs alone.
//
// A question runs capped at its reservation (tokencap.go): its run is
// stopped once its answered LLM calls reach R, and it ends failed, charged
// what it spent. So C_q, what q costs, is at most R_q + F_q, F_q being
// the tokens of q's calls in flight when its count reached R_q (one call
// with --votes 1; at most one per task running then).
//
// The bound: the tokens charged to a tenant for a day are at most
// L + Σ max(0, C_q − R_q) ≤ L + Σ F_q over the questions q running when
// its last question of the day was admitted (that one included): a
// question passes the limit only by what it costs beyond its own
// reservation. A tenant with no history is served at most L + F before
// its first question ends, and is refused from then on if that question
// spent L: at most the calls in flight when it reached the limit. What the
// bound does not cover: a question stored over a minute after its
// admission (rdb.PendingHoldTTL) runs with R_q = 0, uncapped, and a
// question admitted before midnight is charged to the day it ends. Nothing
// is booked for a rerun (no LLM call), which is refused only once the day
// is spent.

// reserveRetry is the Retry-After of a question refused because the
// tenant's running questions hold the rest of its tokens: one may end soon
// and give back what it did not use.
const reserveRetry = 10 * time.Second

// tokenReservation is the tokens to reserve for a tenant's request under
// limit, or why it is refused.
func tokenReservation(tenant string, limit int64, v rdb.TokenLedger, asks bool) (int64, error) {
	over := &overTokens{tenant: tenant, limit: limit, charged: v.Charged, held: v.Held, running: v.Holds, wait: untilMidnight()}
	if v.Charged >= limit {
		return 0, over
	}
	if !asks {
		return 0, nil
	}
	r := meanTokens(v)
	if r > 0 && v.Charged+r > limit {
		over.mean = r
		return 0, over
	}
	if r == 0 {
		r = limit - v.Charged - v.Held // no history: the rest, so it runs alone
	}
	if r <= 0 || v.Charged+v.Held+r > limit {
		over.busy, over.mean, over.wait = true, r, reserveRetry
		return 0, over
	}
	return r, nil
}

// meanTokens is the tenant's tokens per question today, else yesterday,
// rounded up (0: no question charged tokens either day).
func meanTokens(v rdb.TokenLedger) int64 {
	switch {
	case v.Questions > 0:
		return (v.Charged + v.Questions - 1) / v.Questions
	case v.PrevQuestions > 0:
		return (v.PrevCharged + v.PrevQuestions - 1) / v.PrevQuestions
	}
	return 0
}

// overTokens refuses a question: the tenant's day's tokens, with one more
// question, would pass its limit; or (busy) what its running questions
// hold leaves no room for one more until one ends.
type overTokens struct {
	tenant                     string
	limit, charged, held, mean int64
	running                    int
	busy                       bool
	wait                       time.Duration
}

func (e *overTokens) Error() string {
	switch {
	case e.busy:
		return fmt.Sprintf("tenant %s's daily limit of %d tokens is taken: %d used today and %d reserved by its %d question(s) running; retry when one ends (in about %s)",
			e.tenant, e.limit, e.charged, e.held, e.running, e.wait)
	case e.mean > 0:
		return fmt.Sprintf("tenant %s has used %d of its daily limit of %d tokens, and its questions use %d each on average: no new question until the limit renews at midnight UTC (in %s)",
			e.tenant, e.charged, e.limit, e.mean, e.wait.Round(time.Minute))
	}
	return fmt.Sprintf("tenant %s has used %d of its daily limit of %d tokens: no new question until the limit renews at midnight UTC (in %s)",
		e.tenant, e.charged, e.limit, e.wait.Round(time.Minute))
}

func (e *overTokens) retryAfter() time.Duration { return e.wait }

// refusal is a quota's refusal: 429 with its message and Retry-After.
type refusal interface {
	error
	retryAfter() time.Duration
}

// holdTokens moves the reservation admitTenant made for a question (its
// ledger field, hold) to the question, once it is stored: it then lasts
// while the question runs. A cached answer runs nothing, so its
// reservation is released; every other question is charged when it ends
// (execute.go's finished, through spend), which releases one. A question
// whose admission's reservation lapsed before it was stored reserves
// again, so that it runs capped (tokencap.go); refused, the refusal is
// returned and the question must not run.
func (s *Server) holdTokens(ctx context.Context, q *Question, hold string) error {
	if s.cfg.Tenants == nil {
		return nil
	}
	l := s.cfg.Tenants.LimitsOf(q.Tenant)
	if l.TokensPerDay <= 0 {
		return nil
	}
	_, err := rdb.StartTokenHold(ctx, s.cfg.Redis, q.Tenant, q.ID, hold, !q.Cached && !q.NoAnswer, func(v rdb.TokenLedger) (int64, error) {
		return tokenReservation(q.Tenant, l.TokensPerDay, v, true)
	})
	var refused refusal
	if err != nil && !errors.As(err, &refused) {
		s.cfg.Log.Warn("moving a token reservation to its question", zap.String("question", q.ID), zap.Error(err))
		return nil
	}
	return err
}

// settled reconciles a cancelled question's reservation with what it has
// been charged (settle.go's charge, at the cancel and at each settling
// pass): it holds only what it may still cost, for window.
func (q *quota) settled(ctx context.Context, tenant, id string, charged int, window time.Duration) error {
	return rdb.SettleTokenHold(ctx, q.rdb, tenant, id, int64(charged), window)
}

// untilMidnight is how long until the UTC day ends (a day's quotas renew).
func untilMidnight() time.Duration {
	now := time.Now().UTC()
	return time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
}

// overBudget refuses a question: the tenant's day's spend, with one more
// question at its mean, would pass its budget.
type overBudget struct {
	tenant              string
	spent, budget, mean float64
	wait                time.Duration
}

func (e *overBudget) retryAfter() time.Duration { return e.wait }

func (e *overBudget) Error() string {
	return fmt.Sprintf("tenant %s has spent %.4f of its daily budget of %.4f, and its questions cost %.4f each on average: no new question until the budget renews at midnight UTC (in %s)",
		e.tenant, e.spent, e.budget, e.mean, e.wait.Round(time.Minute))
}

// spent is the tenant's money today and the questions that spent it.
func (q *quota) spent(ctx context.Context, tenant string) (float64, int64, error) {
	v, err := q.rdb.HMGet(ctx, rdb.MoneyKey(tenant, time.Now()), "micro", "n").Result()
	if err != nil {
		return 0, 0, err
	}
	num := func(x any) int64 {
		s, _ := x.(string)
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	return float64(num(v[0])) / 1e6, num(v[1]), nil
}

// spend adds an answer's tokens and money to the tenant's day; the tokens
// go with the release of the question's reservation (rdb.ChargeTokens),
// so it runs for every ended question, even one that cost nothing.
func (q *quota) spend(ctx context.Context, tenant string, tokens int, money float64) {
	now := time.Now()
	if err := rdb.ChargeTokens(ctx, q.rdb, tenant, int64(tokens)); err != nil && tokens > 0 {
		// The charge matters more than the release (which lapses).
		k := tokensKey(tenant, now)
		_, _ = q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.IncrBy(ctx, k, int64(tokens))
			p.Expire(ctx, k, rdb.TokensTTL)
			return nil
		})
	}
	if money > 0 {
		k := rdb.MoneyKey(tenant, now)
		_, _ = q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HIncrBy(ctx, k, "micro", int64(math.Round(money*1e6)))
			p.HIncrBy(ctx, k, "n", 1)
			p.Expire(ctx, k, rdb.TokensTTL)
			return nil
		})
	}
}
