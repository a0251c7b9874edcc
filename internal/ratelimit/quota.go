package ratelimit

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/llm"
)

// LLMQuota is a provider's limits for one model. Zero means unlimited.
type LLMQuota struct {
	RequestsPerMinute float64
	TokensPerMinute   float64
	// RequestBurst and TokenBurst default to half a second's worth:
	// providers enforce per-minute limits at about one-second granularity,
	// and the other half absorbs the clumping that scheduling and network
	// delays add between our grant and the provider's clock (a fifth was
	// not enough on a loaded 2-core machine). Burst does not change the
	// steady rate, only how bunched the calls may be.
	RequestBurst float64
	TokenBurst   float64
}

// lowRateSlack is the time a call leaves to the next under a quota of
// fewer than two requests a second.
const lowRateSlack = 60 * time.Millisecond

func (q LLMQuota) rates() (req, tok Rate) {
	if q.RequestsPerMinute > 0 {
		rpm, b := q.RequestsPerMinute, q.RequestBurst
		if b <= 0 {
			b = math.Max(1, math.Floor(0.5*rpm/60))
			if rpm < 120 {
				// Under two a second, a provider's one-second window
				// holds a single request: calls granted exactly at its
				// rate reach it with no slack, and any delay between
				// the grant and its clock draws a 429 (and a pause).
				// Leave each call lowRateSlack.
				rpm = 60 / (60/rpm + lowRateSlack.Seconds())
			}
		}
		req = PerMinute(rpm, b)
	}
	if q.TokensPerMinute > 0 {
		b := q.TokenBurst
		if b <= 0 {
			b = math.Max(1, math.Floor(0.5*q.TokensPerMinute/60))
		}
		tok = PerMinute(q.TokensPerMinute, b)
	}
	return req, tok
}

// LLMBudget applies per-endpoint, per-model quotas shared by every process
// that uses the same Redis and Scope. It implements llm.Limiter.
type LLMBudget struct {
	Limiter *Limiter
	// Scope names the account of the default endpoint (e.g. "openai");
	// other endpoints are scoped under it by name.
	Scope string
	// Quotas by model name and Default for models not listed apply to
	// calls whose endpoint has no quota of its own.
	Quotas  map[string]LLMQuota
	Default LLMQuota
	// OnHealth, when set, hears a deployment's health change: cooled
	// down (for d) or back (d = 0) as this process saw it (metrics).
	OnHealth func(endpoint, model string, d time.Duration)
	// Overrides, when set, are the limits set on the running cluster
	// (quorum limits set): they replace the quota above.
	Overrides *Overrides
	// Learning, when set, learns the provider's real limits from its
	// answers (learn.go): they lower the quota above where lower.
	Learning *Learning
}

// quota is the quota in force: overridden, lowered where the cluster
// learned the provider allows less (learn.go).
func (b *LLMBudget) quota(ctx context.Context, bk llm.Bucket) LLMQuota {
	return b.learned(ctx, b.group(bk), b.overridden(ctx, bk))
}

// overridden is the endpoint's own quota when it has one (zero fields
// then mean unlimited), else the model's, else the default; a limit set on
// the running cluster replaces what it sets.
func (b *LLMBudget) overridden(ctx context.Context, bk llm.Bucket) LLMQuota {
	q := b.configured(bk)
	if set, ok := b.Overrides.of(ctx, b.group(bk)); ok {
		q = set.over(q)
	}
	return q
}

func (b *LLMBudget) configured(bk llm.Bucket) LLMQuota {
	if bk.Quota != (llm.Quota{}) {
		return LLMQuota{RequestsPerMinute: bk.Quota.RequestsPerMinute, TokensPerMinute: bk.Quota.TokensPerMinute}
	}
	if q, ok := b.Quotas[bk.Model]; ok {
		return q
	}
	return b.Default
}

// group names the bucket's keys and cooldown. The default endpoint keeps
// the keys used before endpoints existed (Scope:model), so processes of
// both versions share one budget; others are Scope@endpoint:model, which
// no model name can collide with ("@" is not allowed in endpoint names,
// and model names such as llama3:8b may hold ':').
func (b *LLMBudget) group(bk llm.Bucket) string {
	if bk.Endpoint == "" || bk.Endpoint == llm.DefaultEndpoint {
		return b.Scope + ":" + bk.Model
	}
	return b.Scope + "@" + bk.Endpoint + ":" + bk.Model
}

// Acquire waits until the bucket's request and token budgets admit one
// call estimated at tokens (prompt plus maximum completion). The returned
// settle function reconciles the estimate with the real usage after the
// call.
func (b *LLMBudget) Acquire(ctx context.Context, bk llm.Bucket, tokens int) (settle func(ctx context.Context, actual int), err error) {
	group := b.group(bk)
	claims := b.claims(ctx, bk, tokens)
	noop := func(context.Context, int) {}
	if len(claims) == 0 {
		if b.Learning != nil {
			b.Learning.called(group, b.Limiter.clk().now(), false)
		}
		return noop, nil
	}
	// Asked again once the caller's turn in line comes: the rate may have
	// changed while it waited.
	_, refused, err := b.Limiter.wait(ctx, group, func() []Claim { return b.claims(ctx, bk, tokens) })
	if b.Learning != nil {
		b.Learning.called(group, b.Limiter.clk().now(), refused)
	}
	if err != nil {
		return noop, err
	}
	return b.settle(ctx, bk, tokens), nil
}

// claims are a call's claims on the bucket: one request, tokens.
func (b *LLMBudget) claims(ctx context.Context, bk llm.Bucket, tokens int) []Claim {
	req, tok := b.quota(ctx, bk).rates()
	group := b.group(bk)
	var claims []Claim
	if req.Limit > 0 {
		claims = append(claims, Claim{Key: rdb.LLMRequestsName(group), Rate: req, Units: 1})
	}
	if tok.Limit > 0 && tokens > 0 {
		claims = append(claims, Claim{Key: rdb.LLMTokensName(group), Rate: tok, Units: float64(tokens)})
	}
	return claims
}

// settle reconciles a call's token estimate with its real usage.
func (b *LLMBudget) settle(ctx context.Context, bk llm.Bucket, tokens int) func(ctx context.Context, actual int) {
	_, tok := b.quota(ctx, bk).rates()
	if tok.Limit <= 0 || tokens <= 0 {
		return func(context.Context, int) {}
	}
	group := b.group(bk)
	return func(ctx context.Context, actual int) {
		if actual >= 0 && actual != tokens {
			_ = b.Limiter.Adjust(ctx, rdb.LLMTokensName(group), tok, float64(actual-tokens))
		}
	}
}

// Cooldown pauses all calls to the bucket's endpoint and model for d,
// cluster-wide.
func (b *LLMBudget) Cooldown(ctx context.Context, bk llm.Bucket, d time.Duration) error {
	return b.Limiter.Cooldown(ctx, b.group(bk), d)
}

// WarehouseQuota limits one warehouse. Zero means unlimited.
type WarehouseQuota struct {
	QueriesPerSecond float64
	Burst            float64
	MaxConcurrent    int
	// Lease is how long a concurrency slot survives a dead holder (default
	// 30s); live holders renew it.
	Lease time.Duration
}

// WarehouseGate admits queries to one warehouse within its quota.
type WarehouseGate struct {
	l    *Limiter
	name string
	qps  Rate
	sem  *Semaphore
}

// WarehouseGate returns the gate for the named warehouse.
func (l *Limiter) WarehouseGate(name string, q WarehouseQuota) (*WarehouseGate, error) {
	g := &WarehouseGate{l: l, name: name}
	if q.QueriesPerSecond > 0 {
		b := q.Burst
		if b <= 0 {
			b = math.Max(1, math.Floor(q.QueriesPerSecond))
		}
		g.qps = PerSecond(q.QueriesPerSecond, b)
	}
	if q.MaxConcurrent > 0 {
		lease := q.Lease
		if lease == 0 {
			lease = 30 * time.Second
		}
		sem, err := l.Semaphore(rdb.WarehouseGroup(name), q.MaxConcurrent, lease)
		if err != nil {
			return nil, fmt.Errorf("warehouse %s: %w", name, err)
		}
		g.sem = sem
	}
	return g, nil
}

// Acquire waits for a concurrency slot and a query start under the QPS
// limit. Call release when the query ends.
func (g *WarehouseGate) Acquire(ctx context.Context) (release func(), err error) {
	release = func() {}
	if g.sem != nil {
		p, err := g.sem.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		release = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = p.Release(ctx)
			cancel()
		}
	}
	if g.qps.Limit > 0 {
		if _, err := g.l.Wait(ctx, rdb.WarehouseGroup(g.name), Claim{Key: rdb.WarehouseQPSName(g.name), Rate: g.qps, Units: 1}); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

// ByteBudget bounds the bytes a run may scan on a warehouse (BigQuery's
// cost), shared by the cluster.
type ByteBudget struct {
	Limiter *Limiter
	// Limit is the bytes per run; 0 means no limit.
	Limit int64
}

// Spend records n bytes for run, or refuses them if the run's budget would
// be exceeded.
func (b *ByteBudget) Spend(ctx context.Context, run string, n int64) error {
	ok, spent, err := rdb.Spend(ctx, b.Limiter.rdb, b.Limiter.key(rdb.BytesName(run)), n, b.Limit)
	if err != nil {
		return fmt.Errorf("byte budget of run %s: %w", run, err)
	}
	if !ok {
		return fmt.Errorf("the run's byte budget (%d bytes) would be exceeded: %d already scanned, this query needs %d", b.Limit, spent, n)
	}
	return nil
}
