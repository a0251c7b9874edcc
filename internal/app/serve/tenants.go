package serve

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
// its tokens for the day; when refused it says how long to wait.
func (q *quota) admit(ctx context.Context, tenant string, l Limits) (time.Duration, error) {
	if l.TokensPerDay > 0 {
		used, err := q.rdb.Get(ctx, tokensKey(tenant, time.Now())).Int64()
		if err != nil && err != redis.Nil {
			return 0, err
		}
		if used >= l.TokensPerDay {
			return untilMidnight(), nil
		}
	}
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

// spend adds an answer's tokens and money to the tenant's day.
func (q *quota) spend(ctx context.Context, tenant string, tokens int, money float64) {
	if tokens <= 0 && money <= 0 {
		return
	}
	now := time.Now()
	pipe := q.rdb.TxPipeline()
	if tokens > 0 {
		k := tokensKey(tenant, now)
		pipe.IncrBy(ctx, k, int64(tokens))
		pipe.Expire(ctx, k, rdb.TokensTTL)
	}
	if money > 0 {
		k := rdb.MoneyKey(tenant, now)
		pipe.HIncrBy(ctx, k, "micro", int64(math.Round(money*1e6)))
		pipe.HIncrBy(ctx, k, "n", 1)
		pipe.Expire(ctx, k, rdb.TokensTTL)
	}
	_, _ = pipe.Exec(ctx)
}
