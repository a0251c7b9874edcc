package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/llm"
)

// Limits set on a running cluster.
//
// A provider lowers a tier, another team starts sharing the quota, the
// configured number was wrong: `quorum limits set` changes an LLM model's
// quota for every process on the cluster's Redis at once, without a
// restart. A set limit replaces the configured one (the flags, the
// endpoint's or the model's quota) field by field; every LLMBudget with
// Overrides reads them again at most LimitsRefresh after a change.

// LimitsRefresh is how often a process reads the limits set again.
const LimitsRefresh = 2 * time.Second

// LimitChange is one change of a set limit: its group, the quota (zero
// fields: the configured value), when, and whether it was cleared.
type LimitChange struct {
	Group   string    `json:"group"`
	Quota   SetQuota  `json:"quota"`
	At      time.Time `json:"at"`
	Cleared bool      `json:"cleared,omitempty"`
}

// SetQuota is a quota set on a running cluster: a field left 0 keeps the
// configured value.
type SetQuota struct {
	RequestsPerMinute float64 `json:"rpm,omitempty"`
	TokensPerMinute   float64 `json:"tpm,omitempty"`
}

// over is q with s's set fields in place of its own.
func (s SetQuota) over(q LLMQuota) LLMQuota {
	if s.RequestsPerMinute > 0 {
		q.RequestsPerMinute, q.RequestBurst = s.RequestsPerMinute, 0
	}
	if s.TokensPerMinute > 0 {
		q.TokensPerMinute, q.TokenBurst = s.TokensPerMinute, 0
	}
	return q
}

// LLMGroup names an endpoint and model's quota as an LLMBudget of scope
// does (the default endpoint: "" or llm.DefaultEndpoint).
func LLMGroup(scope, endpoint, model string) string {
	return (&LLMBudget{Scope: scope}).group(llm.Bucket{Endpoint: endpoint, Model: model})
}

// SetLLMLimit sets group's quota on the cluster, and logs the change.
func (l *Limiter) SetLLMLimit(ctx context.Context, group string, q SetQuota) error {
	if q.RequestsPerMinute < 0 || q.TokensPerMinute < 0 || q == (SetQuota{}) {
		return fmt.Errorf("limit of %s: give requests or tokens per minute above 0 (%+v)", group, q)
	}
	b, _ := json.Marshal(q)
	return l.changeLimit(ctx, LimitChange{Group: group, Quota: q, At: l.clk().now()}, func(p redis.Pipeliner) {
		p.HSet(ctx, l.key(rdb.LLMLimitsName), group, b)
	})
}

// ClearLLMLimit returns group to its configured quota.
func (l *Limiter) ClearLLMLimit(ctx context.Context, group string) error {
	return l.changeLimit(ctx, LimitChange{Group: group, At: l.clk().now(), Cleared: true}, func(p redis.Pipeliner) {
		p.HDel(ctx, l.key(rdb.LLMLimitsName), group)
	})
}

func (l *Limiter) changeLimit(ctx context.Context, c LimitChange, change func(redis.Pipeliner)) error {
	entry, _ := json.Marshal(c)
	_, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		change(p)
		p.LPush(ctx, l.key(rdb.LLMLimitsLogName), entry)
		p.LTrim(ctx, l.key(rdb.LLMLimitsLogName), 0, rdb.LimitsLogLen-1)
		return nil
	})
	if err != nil {
		return fmt.Errorf("limit of %s: %w", c.Group, err)
	}
	return nil
}

// LLMLimits returns the quotas set on the cluster, by group.
func (l *Limiter) LLMLimits(ctx context.Context) (map[string]SetQuota, error) {
	m, err := l.rdb.HGetAll(ctx, l.key(rdb.LLMLimitsName)).Result()
	if err != nil {
		return nil, fmt.Errorf("read the LLM limits set: %w", err)
	}
	out := make(map[string]SetQuota, len(m))
	for g, v := range m {
		var q SetQuota
		if err := json.Unmarshal([]byte(v), &q); err != nil {
			return nil, fmt.Errorf("LLM limit of %s: %q: %w", g, v, err)
		}
		out[g] = q
	}
	return out, nil
}

// LimitChanges returns the changes of the limits set, newest first.
func (l *Limiter) LimitChanges(ctx context.Context) ([]LimitChange, error) {
	vs, err := l.rdb.LRange(ctx, l.key(rdb.LLMLimitsLogName), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read the LLM limits' changes: %w", err)
	}
	out := make([]LimitChange, 0, len(vs))
	for _, v := range vs {
		var c LimitChange
		if json.Unmarshal([]byte(v), &c) == nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// LimitChangesBetween returns the changes made from from to to, oldest
// first.
func (l *Limiter) LimitChangesBetween(ctx context.Context, from, to time.Time) ([]LimitChange, error) {
	all, err := l.LimitChanges(ctx)
	if err != nil {
		return nil, err
	}
	var out []LimitChange
	for i := len(all) - 1; i >= 0; i-- {
		if c := all[i]; !c.At.Before(from) && !c.At.After(to) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Overrides are the limits set on the cluster as one process sees them:
// read again at most every LimitsRefresh. A read that fails keeps the
// last ones (Redis away: the limiter fails on its own anyway).
type Overrides struct {
	lim *Limiter
	mu  sync.Mutex
	at  time.Time
	set map[string]SetQuota
}

// NewOverrides reads the limits set through lim.
func NewOverrides(lim *Limiter) *Overrides { return &Overrides{lim: lim} }

// of returns group's set quota, if any.
func (o *Overrides) of(ctx context.Context, group string) (SetQuota, bool) {
	if o == nil {
		return SetQuota{}, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if now := o.lim.clk().now(); o.set == nil || now.Sub(o.at) >= LimitsRefresh {
		o.at = now
		set, err := o.lim.LLMLimits(ctx)
		switch {
		case err == nil:
			o.set = set
		case o.set == nil && !errors.Is(err, context.Canceled):
			o.set = map[string]SetQuota{}
		}
	}
	q, ok := o.set[group]
	return q, ok
}
