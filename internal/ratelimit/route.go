package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/llm"
)

// healthWindow is how long a deployment's failures count as in a row
// without another failure.
const healthWindow = time.Minute

// AcquireAny waits until one of the candidates not cooled down admits a
// call of tokens, reading the same buckets Acquire draws on, so every
// process of the cluster routes by the same headroom. It implements
// llm.Router.
func (b *LLMBudget) AcquireAny(ctx context.Context, cands []llm.Candidate, tokens int) (int, func(context.Context, int), error) {
	rc := make([]rdb.RouteCandidate, len(cands))
	groups := make([]string, len(cands))
	for i, c := range cands {
		group := b.group(c.Bucket)
		groups[i] = group
		claims, err := b.Limiter.gcra(ctx, b.claims(ctx, c.Bucket, tokens))
		if err != nil {
			return 0, nil, err
		}
		rc[i] = rdb.RouteCandidate{CooldownKey: b.Limiter.key(rdb.CooldownName(group)), DownKey: b.Limiter.key(rdb.DeploymentDownName(group)),
			Claims: claims, Weight: c.Weight, Priority: c.Priority}
	}
	// Callers routing over the same deployments wait in one line (see
	// Limiter.Wait).
	leave, err := b.Limiter.lines.wait(ctx, lineKey(ctx, "any\x00"+strings.Join(groups, "\x00")))
	if err != nil {
		return 0, nil, err
	}
	defer leave()
	for {
		i, wait, allDown, err := rdb.ReserveAny(ctx, b.Limiter.rdb, rc)
		switch {
		case err != nil:
			return 0, nil, fmt.Errorf("reserve one of %d deployments of %s: %w", len(cands), cands[0].Model, err)
		case allDown:
			return 0, nil, llm.ErrAllDown
		case i >= 0:
			return i, b.settle(ctx, cands[i].Bucket, tokens), nil
		}
		// Never longer than a second: a deployment coming back, or
		// cooled down elsewhere, changes the answer.
		wait = min(wait, time.Second)
		wait += time.Duration(rand.Int64N(int64(min(wait/10, 5*time.Millisecond)) + 1))
		if err := sleep(ctx, wait); err != nil {
			return 0, nil, err
		}
	}
}

// Failed records a health failure of the deployment; the failures-th in
// a row cools it down cluster-wide for cooldown.
func (b *LLMBudget) Failed(ctx context.Context, bk llm.Bucket, failures int, cooldown time.Duration) (bool, error) {
	group := b.group(bk)
	cooled, err := rdb.DeploymentFailed(ctx, b.Limiter.rdb, b.Limiter.key(rdb.DeploymentFailsName(group)),
		b.Limiter.key(rdb.DeploymentDownName(group)), failures, healthWindow, cooldown)
	if err != nil {
		return false, fmt.Errorf("record a failure of %s: %w", group, err)
	}
	if cooled && b.OnHealth != nil {
		b.OnHealth(bk.Endpoint, bk.Model, cooldown)
	}
	return cooled, nil
}

// Succeeded ends the deployment's run of failures.
func (b *LLMBudget) Succeeded(ctx context.Context, bk llm.Bucket) error {
	n, err := b.Limiter.rdb.Del(ctx, b.Limiter.key(rdb.DeploymentFailsName(b.group(bk)))).Result()
	if err != nil {
		return fmt.Errorf("record a success of %s: %w", b.group(bk), err)
	}
	if n > 0 && b.OnHealth != nil {
		b.OnHealth(bk.Endpoint, bk.Model, 0)
	}
	return nil
}

// Down is how long the deployment stays cooled down.
func (b *LLMBudget) Down(ctx context.Context, bk llm.Bucket) (time.Duration, error) {
	d, err := b.Limiter.rdb.PTTL(ctx, b.Limiter.key(rdb.DeploymentDownName(b.group(bk)))).Result()
	if errors.Is(err, redis.Nil) || d < 0 {
		return 0, nil
	}
	if err == nil && d == 0 {
		// Its last millisecond: PTTL rounds it to 0 while the key (which
		// ReserveAny checks) still exists.
		d = time.Millisecond
	}
	return d, err
}

var _ llm.Router = (*LLMBudget)(nil)
