package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/priority"
	"github.com/quorumsql/quorum/pkg/slot"
)

// Deployment is one endpoint serving a model, with a quota of its own:
// the same model deployed in several Azure regions, or a vLLM pool beside
// a hosted API.
type Deployment struct {
	Endpoint string
	// Name is the model's name there (an Azure deployment name); "" is
	// the model's name.
	Name string
	// Quota overrides the endpoint's quota for this deployment when set.
	Quota Quota
	// Weight scales the deployment's headroom when choosing (default 1).
	Weight float64
	// Priority: among the deployments that admit a call now the lowest
	// priority takes it; higher ones take the overflow.
	Priority int
}

// Candidate is a deployment as a Router sees it.
type Candidate struct {
	Bucket
	Weight   float64
	Priority int
}

// Router is a Limiter that also chooses among a model's deployments and
// keeps their health, cluster-wide (ratelimit.LLMBudget implements it
// on the same Redis buckets that enforce the quotas, so every process
// agrees on which deployment has headroom and which is down).
type Router interface {
	Limiter
	// AcquireAny waits until one of the candidates that is not cooled
	// down admits a call estimated at tokens and returns its index:
	// among those admitting it now, the lowest Priority, then the most
	// headroom times Weight. ErrAllDown: every candidate is cooled down.
	AcquireAny(ctx context.Context, cands []Candidate, tokens int) (int, func(ctx context.Context, actual int), error)
	// Failed records a health failure of b; the failures-th in a row
	// cools b down for cooldown, after which one call probes it (true:
	// this failure cooled it down).
	Failed(ctx context.Context, b Bucket, failures int, cooldown time.Duration) (bool, error)
	// Succeeded ends b's run of failures.
	Succeeded(ctx context.Context, b Bucket) error
	// Down is how long b stays cooled down (0: it is up).
	Down(ctx context.Context, b Bucket) (time.Duration, error)
}

// ErrAllDown is AcquireAny's answer when every candidate is cooled down.
var ErrAllDown = errors.New("every deployment is cooled down")

// ErrAllRoutesDown fails a call when every deployment of the model and of
// its fallbacks stayed cooled down past the dead-endpoint time.
var ErrAllRoutesDown = errors.New("every route of the model is down")

// RoutesUpNote ends the error of a routed call that failed while some
// route of its model was up: such a failure is the call's, not an outage,
// and does not count towards aborting a run.
const RoutesUpNote = "(other routes of the model were up)"

// route is one deployment a call may take.
type route struct {
	// mc names the deployment's model and endpoint.
	mc       ModelConfig
	ep       *endpoint
	quota    Quota
	weight   float64
	priority int
	// attempts overrides Config.MaxAttempts; settle is the quota the
	// router acquired for the first attempt.
	attempts int
	settle   func(context.Context, int)
}

func (r route) bucket() Bucket { return Bucket{Endpoint: r.ep.Name, Model: r.mc.Name, Quota: r.quota} }

func (r route) candidate() Candidate {
	return Candidate{Bucket: r.bucket(), Weight: r.weight, Priority: r.priority}
}

// Chat implements Client.
func (c *OpenAI) Chat(ctx context.Context, req Request) (*Response, error) {
	mc := c.Model(req.Role)
	ctx, waited, end := c.warmUp(ctx, mc, req)
	var resp *Response
	var err error
	if len(mc.Deployments) == 0 && len(mc.Fallbacks) == 0 {
		ep, _ := c.endpoint(mc.Endpoint) // New checked every role's endpoint
		resp, err = c.call(ctx, req, route{mc: mc, ep: ep, quota: ep.Quota})
	} else {
		resp, err = c.routed(ctx, req, mc)
	}
	end(err == nil)
	if resp != nil {
		resp.Usage.WarmUpWait = waited
	}
	return resp, err
}

// checkRoutes checks that every deployment and fallback names a
// configured endpoint.
func (c *OpenAI) checkRoutes(mc ModelConfig) error {
	for i, m := range append([]ModelConfig{mc}, mc.Fallbacks...) {
		if i > 0 && m.Name == "" && len(m.Deployments) == 0 {
			return fmt.Errorf("fallback %d names no model", i)
		}
		if _, ok := c.endpoint(m.Endpoint); !ok {
			return fmt.Errorf("fallback %s uses endpoint %q, which is not configured", m.Name, m.Endpoint)
		}
		for _, d := range m.Deployments {
			if _, ok := c.endpoint(d.Endpoint); !ok {
				return fmt.Errorf("a deployment of %s uses endpoint %q, which is not configured", m.Name, d.Endpoint)
			}
			if d.Weight < 0 {
				return fmt.Errorf("a deployment of %s at %s: weight %g must not be negative", m.Name, d.Endpoint, d.Weight)
			}
			if firstNonEmpty(d.Name, m.Name) == "" {
				return fmt.Errorf("a deployment at %s names no model", d.Endpoint)
			}
		}
	}
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// tiers are the routes of mc, then of each fallback in order.
func (c *OpenAI) tiers(mc ModelConfig) [][]route {
	var out [][]route
	for i, m := range append([]ModelConfig{mc}, mc.Fallbacks...) {
		if i > 0 {
			// A fallback keeps the role's settings it does not set.
			if m.Temperature == nil {
				m.Temperature = mc.Temperature
			}
			if m.MaxCompletionTokens == 0 {
				m.MaxCompletionTokens = mc.MaxCompletionTokens
			}
		}
		m.Fallbacks = nil
		if len(m.Deployments) == 0 {
			ep, _ := c.endpoint(m.Endpoint)
			out = append(out, []route{{mc: m, ep: ep, quota: ep.Quota, weight: 1}})
			continue
		}
		var tier []route
		for _, d := range m.Deployments {
			dm := m
			dm.Name, dm.Endpoint, dm.Deployments = firstNonEmpty(d.Name, m.Name), d.Endpoint, nil
			ep, _ := c.endpoint(d.Endpoint)
			q := d.Quota
			if q == (Quota{}) {
				q = ep.Quota
			}
			w := d.Weight
			if w == 0 {
				w = 1
			}
			tier = append(tier, route{mc: dm, ep: ep, quota: q, weight: w, priority: d.Priority})
		}
		out = append(out, tier)
	}
	return out
}

// routed runs a call over the model's deployments: each attempt goes to
// the healthy deployment with the most headroom now; a deployment that
// keeps failing is cooled down and its calls move to the others; when
// every deployment is down the fallbacks take over, and when every route
// is down the call waits for their probes, at most the dead-endpoint time.
func (c *OpenAI) routed(ctx context.Context, req Request, mc ModelConfig) (*Response, error) {
	tiers := c.tiers(mc)
	n := 0
	for _, t := range tiers {
		n += len(t)
	}
	ctx, back := slot.Idle(ctx)
	defer back()
	limit, dead := c.cfg.CallTimeout, c.cfg.DeadEndpointTimeout
	if priority.IsInteractive(ctx) {
		limit, dead = min(limit, c.cfg.InteractiveCallTimeout), min(dead, interactiveDeadTimeout)
	}
	first := tiers[0][0]
	tokens := c.cfg.Tokenizer.CountMessages(first.mc.Name, req.Messages) + c.cfg.Tokenizer.CountTools(first.mc.Name, req.Tools)
	completion := c.completions.estimate(first.bucket().key(), c.cfg.ExpectedCompletionTokens)
	if m := max(req.MaxTokens, first.mc.MaxCompletionTokens); m > 0 {
		completion = min(completion, m)
	}
	tokens += completion

	var spent Usage
	var lastErr error
	lastStatus, tries, failsInRow := 0, 0, 0
	began := time.Now()
	var quotaWait time.Duration
	var downSince time.Time
	fail := func(err error) error {
		ce := &CallError{Model: mc.Name, Attempts: tries, Status: lastStatus, Err: err, Usage: spent}
		ce.Usage.Model = mc.Name
		return ce
	}
	for tries < c.cfg.MaxAttempts*n {
		if time.Since(began)-quotaWait > limit {
			return nil, fail(fmt.Errorf("%w (%s, quota waits not counted): %w %s", ErrCallTimeout, limit, lastErr, RoutesUpNote))
		}
		picked, cooled := false, false
		var failed error
		for ti, tier := range tiers {
			start := time.Now()
			i, settle, err := c.acquireAny(ctx, tier, tokens)
			quotaWait += time.Since(start)
			if errors.Is(err, ErrAllDown) {
				continue
			}
			if err != nil {
				return nil, fail(fmt.Errorf("waiting for the quota of %s's deployments: %w", mc.Name, err))
			}
			picked, downSince = true, time.Time{}
			rt := tier[i]
			rt.attempts, rt.settle = 1, settle
			tries++
			resp, err := c.call(ctx, req, rt)
			if err == nil {
				c.succeeded(ctx, rt)
				if ti > 0 {
					resp.Usage.Fallbacks = 1
				}
				resp.Usage.Attempts += spent.Attempts
				resp.Usage.RateLimited += spent.RateLimited
				resp.Usage.LimiterWait += spent.LimiterWait
				resp.Usage.Latency += spent.Latency
				return resp, nil
			}
			var ce *CallError
			if !errors.As(err, &ce) {
				return nil, err
			}
			spent.Add(ce.Usage)
			lastErr, lastStatus = err, ce.Status
			if ctx.Err() != nil || !retryable(ce) {
				ce.Usage = spent
				return nil, ce
			}
			if ce.Status != http.StatusTooManyRequests {
				cooled = c.failed(ctx, rt)
				failed = err
			}
			break
		}
		if !picked {
			// Every route is cooled down: wait for the first to come back
			// (its probe), as long as a dead endpoint is waited for.
			if downSince.IsZero() {
				downSince = time.Now()
			}
			left := dead - time.Since(downSince)
			if left <= 0 {
				err := fmt.Errorf("%w: %s and its fallbacks stayed cooled down for %s", ErrAllRoutesDown, mc.Name, dead)
				if lastErr != nil {
					err = fmt.Errorf("%w; the last attempt: %w", err, lastErr)
				}
				return nil, fail(err)
			}
			wait := min(c.soonestUp(ctx, tiers), left)
			quotaWait += wait // waiting for a route is not the call's own time
			if err := sleepCtx(ctx, wait+time.Duration(rand.Int64N(int64(50*time.Millisecond)))); err != nil {
				return nil, fail(err)
			}
			continue
		}
		if failed == nil {
			failsInRow = 0
			continue
		}
		failsInRow++
		if !cooled && failsInRow > 1 {
			// The same failures again: back off, as the client does on
			// one endpoint (a cooled-down deployment's calls move at once).
			ceiling := math.Min(float64(c.cfg.BaseBackoff)*math.Pow(2, float64(failsInRow-2)), float64(c.cfg.MaxErrorBackoff))
			c.log.Debug("llm deployment failed; retrying", zap.String("model", mc.Name), zap.Error(failed))
			if err := sleepCtx(ctx, time.Duration(ceiling/2+rand.Float64()*ceiling/2)); err != nil {
				return nil, fail(err)
			}
		}
	}
	return nil, fail(fmt.Errorf("%w %s", lastErr, RoutesUpNote))
}

// retryable: a failure another attempt, maybe elsewhere, may not repeat.
func retryable(ce *CallError) bool {
	if ce.Attempts == 0 {
		return false // never sent: the request itself is at fault
	}
	s := ce.Status
	return s == 0 || s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500
}

// acquireAny takes the quota of one of the tier's healthy routes.
func (c *OpenAI) acquireAny(ctx context.Context, tier []route, tokens int) (int, func(context.Context, int), error) {
	if r, ok := c.cfg.Limiter.(Router); ok {
		cands := make([]Candidate, len(tier))
		for i, rt := range tier {
			cands[i] = rt.candidate()
		}
		return r.AcquireAny(ctx, cands, tokens)
	}
	i, ok := c.health.pick(tier)
	if !ok {
		return 0, nil, ErrAllDown
	}
	if c.cfg.Limiter == nil {
		return i, nil, nil
	}
	settle, err := c.cfg.Limiter.Acquire(ctx, tier[i].bucket(), tokens)
	return i, settle, err
}

// failed records a health failure; true when it cooled the route down.
func (c *OpenAI) failed(ctx context.Context, rt route) bool {
	b := rt.bucket()
	var cooled bool
	if r, ok := c.cfg.Limiter.(Router); ok {
		var err error
		if cooled, err = r.Failed(ctx, b, c.cfg.DeploymentFailures, c.cfg.DeploymentCooldown); err != nil {
			c.log.Warn("llm deployment health not recorded", zap.String("endpoint", b.Endpoint), zap.String("model", b.Model), zap.Error(err))
		}
	} else {
		cooled = c.health.failed(b.key(), c.cfg.DeploymentFailures, c.cfg.DeploymentCooldown)
	}
	if cooled {
		c.log.Warn("llm deployment cooled down after failures in a row: its calls go to the others", zap.String("endpoint", b.Endpoint),
			zap.String("model", b.Model), zap.Int("failures", c.cfg.DeploymentFailures), zap.Duration("cooldown", c.cfg.DeploymentCooldown))
	}
	return cooled
}

func (c *OpenAI) succeeded(ctx context.Context, rt route) {
	if r, ok := c.cfg.Limiter.(Router); ok {
		_ = r.Succeeded(ctx, rt.bucket())
		return
	}
	c.health.succeeded(rt.bucket().key())
}

// soonestUp is how long until the first cooled-down route comes back
// (at most a second, so a route cooled by another process is seen).
func (c *OpenAI) soonestUp(ctx context.Context, tiers [][]route) time.Duration {
	best := time.Second
	for _, tier := range tiers {
		for _, rt := range tier {
			var d time.Duration
			if r, ok := c.cfg.Limiter.(Router); ok {
				d, _ = r.Down(ctx, rt.bucket())
			} else {
				d = c.health.down(rt.bucket().key())
			}
			best = min(best, d)
		}
	}
	return max(best, 10*time.Millisecond)
}

// memHealth is the deployments' health within one process, for a client
// whose Limiter is no Router (no Redis): the same rules, not shared.
type memHealth struct {
	mu sync.Mutex
	// fails in a row and cooled-down-until by bucket key; credit is the
	// smooth weighted round robin's state.
	fails  map[string]int
	until  map[string]time.Time
	credit map[string]float64
}

// pick chooses among the routes not cooled down: the lowest priority,
// then by weight (smooth weighted round robin).
func (h *memHealth) pick(tier []route) (int, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.credit == nil {
		h.credit = map[string]float64{}
	}
	now := time.Now()
	best, total := -1, 0.0
	for i, rt := range tier {
		if now.Before(h.until[rt.bucket().key()]) {
			continue
		}
		if best >= 0 && rt.priority > tier[best].priority {
			continue
		}
		if best >= 0 && rt.priority < tier[best].priority {
			best, total = -1, 0
		}
		k := rt.bucket().key()
		h.credit[k] += rt.weight
		total += rt.weight
		if best < 0 || h.credit[k] > h.credit[tier[best].bucket().key()] {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	h.credit[tier[best].bucket().key()] -= total
	return best, true
}

func (h *memHealth) failed(key string, failures int, cooldown time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fails == nil {
		h.fails, h.until = map[string]int{}, map[string]time.Time{}
	}
	if time.Now().Before(h.until[key]) {
		return false
	}
	h.fails[key]++
	if h.fails[key] < failures {
		return false
	}
	// The probe after the cooldown: one more failure cools it again.
	h.fails[key] = failures - 1
	h.until[key] = time.Now().Add(cooldown)
	return true
}

func (h *memHealth) succeeded(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.fails, key)
}

func (h *memHealth) down(key string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return max(time.Until(h.until[key]), 0)
}
