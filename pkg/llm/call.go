package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	// The one redaction of credentials in URLs (internal/layout: pkgToInternal).
	"github.com/quorumsql/quorum/internal/redact"
	"github.com/quorumsql/quorum/pkg/priority"
)

// callRun is one call on one route, across its attempts: the request,
// its reservation, its limits and clocks, and what the attempts so far
// have spent and seen.
type callRun struct {
	c      *OpenAI
	rt     route
	mc     ModelConfig
	ep     *endpoint
	oreq   openai.ChatCompletionRequest
	bucket Bucket
	// continueFinal is the request's, for each attempt's capture.
	continueFinal bool
	// prompt is the counted prompt; reserved+completion is what each
	// attempt acquires of the quota.
	prompt, reserved, completion int
	usage                        Usage

	attempts            int
	interactive         bool
	limit, header, dead time.Duration
	// ownRetries: the call waits out a 429 that names its retry delay
	// (see rateLimit).
	ownRetries bool

	// The call's clock runs except while it waits for quota; so does the
	// dead-endpoint clock, which restarts whenever the endpoint shows life.
	began, deadFrom      time.Time
	quotaWait, deadQuota time.Duration

	lastErr    error
	lastStatus int
	// spent counts the attempts spent; waits and waited, the 429s waited
	// out without spending one.
	spent, waits int
	waited       time.Duration
}

// newCallRun prepares a call: its request, its prompt's tokens and its
// reservation, failing a prompt too long for the model's context window.
func (c *OpenAI) newCallRun(req Request, rt route) (*callRun, error) {
	r := &callRun{c: c, rt: rt, mc: rt.mc, ep: rt.ep, continueFinal: req.ContinueFinal,
		usage: Usage{Endpoint: rt.ep.Name, Model: rt.mc.Name}}
	oreq, err := c.buildRequest(r.mc, req)
	if err != nil {
		return nil, r.fail(0, 0, err)
	}
	r.oreq = oreq
	counted := time.Now()
	r.prompt = c.cfg.Tokenizer.CountMessages(r.mc.Name, req.Messages) + c.cfg.Tokenizer.CountTools(r.mc.Name, req.Tools)
	r.usage.Tokenize = time.Since(counted)
	// Reserve what the completion is likely to be, not its ceiling: an
	// over-reservation is refunded only after the call, too late for the
	// callers queued behind it.
	r.bucket = rt.bucket()
	r.completion = c.completions.estimate(r.bucket.key(), c.cfg.ExpectedCompletionTokens)
	r.reserved = r.prompt
	if r.ep.CachedOutsideTPM {
		// Reserve what the provider will count: the prompt less the share
		// of it the bucket's recent calls had cached.
		r.reserved -= int(float64(r.prompt) * c.completions.cachedShare(r.bucket.key()))
	}
	if oreq.MaxCompletionTokens > 0 {
		r.completion = min(r.completion, oreq.MaxCompletionTokens)
	}
	window := r.mc.ContextWindow
	if window == 0 {
		window = ContextWindow(r.mc.Name)
	}
	if oreq.MaxCompletionTokens > 0 && r.prompt+oreq.MaxCompletionTokens > window || r.prompt >= window {
		return nil, r.fail(0, 0, fmt.Errorf("%w: %d prompt tokens + %d completion tokens > %d", ErrContextTooLong, r.prompt, oreq.MaxCompletionTokens, window))
	}
	return r, nil
}

// start sets the call's limits and starts its clocks.
func (r *callRun) start(ctx context.Context) {
	cfg := &r.c.cfg
	r.attempts, r.interactive = cfg.MaxAttempts, priority.IsInteractive(ctx)
	if r.rt.attempts > 0 {
		r.attempts = r.rt.attempts
	}
	r.limit, r.header, r.dead = cfg.CallTimeout, cfg.HeaderTimeout, cfg.DeadEndpointTimeout
	if r.interactive {
		// A user is waiting: say what is wrong within seconds.
		r.attempts = min(r.attempts, cfg.InteractiveAttempts)
		r.limit = min(r.limit, cfg.InteractiveCallTimeout)
		r.header = min(r.header, interactiveHeaderTimeout)
		r.dead = min(r.dead, interactiveDeadTimeout)
	}
	r.began = time.Now()
	r.deadFrom = r.began
	r.ownRetries = r.rt.attempts == 0
}

// need is the quota an attempt acquires.
func (r *callRun) need() int { return r.reserved + r.completion }

func (r *callRun) left() time.Duration { return r.limit - (time.Since(r.began) - r.quotaWait) }

func (r *callRun) deadLeft() time.Duration {
	return r.dead - (time.Since(r.deadFrom) - (r.quotaWait - r.deadQuota))
}

// fail is the call's error after attempts, with its usage so far.
func (r *callRun) fail(attempts, status int, err error) error {
	return &CallError{Model: r.mc.Name, Endpoint: r.ep.Name, URL: redact.URL(r.ep.BaseURL), Attempts: attempts, Status: status, Err: err, Usage: r.usage}
}

func (r *callRun) outOfTime(done int) error {
	err := fmt.Errorf("%w (%s, quota waits not counted)", ErrCallTimeout, r.limit)
	if r.lastErr != nil {
		err = fmt.Errorf("%w; the last attempt: %w", err, r.lastErr)
	}
	return r.fail(done, r.lastStatus, err)
}

func (r *callRun) down(done int) error {
	err := fmt.Errorf("%w: no response for %s (attempts got no headers, transport errors or server errors only)", ErrEndpointDown, r.dead)
	if r.lastErr != nil {
		err = fmt.Errorf("%w; the last attempt: %w", err, r.lastErr)
	}
	return r.fail(done, r.lastStatus, err)
}

func (r *callRun) rateLimited(done int, err error, why string, args ...any) error {
	return r.fail(done, http.StatusTooManyRequests, fmt.Errorf("%w: model %s at endpoint %s %s; the last response: %w",
		ErrRateLimited, r.mc.Name, r.ep.Name, fmt.Sprintf(why, args...), err))
}

// acquire takes the quota of the attempt'th attempt and returns its
// settle. A routed call's first attempt has the quota the router took.
func (r *callRun) acquire(ctx context.Context, attempt int) (settle func(context.Context, int), _ error) {
	if attempt == 1 && r.rt.settle != nil {
		return r.rt.settle, nil
	}
	if r.c.cfg.Limiter == nil {
		return func(context.Context, int) {}, nil
	}
	start := time.Now()
	s, err := r.c.cfg.Limiter.Acquire(ctx, r.bucket, r.need())
	waited := time.Since(start)
	r.usage.LimiterWait += waited
	r.quotaWait += waited
	if err != nil {
		return nil, r.fail(attempt-1, r.lastStatus, fmt.Errorf("waiting for the quota of %s at endpoint %s: %w", r.mc.Name, r.ep.Name, err))
	}
	return s, nil
}

// budget is the attempt's time limits, from what is left of the call's
// time and of the dead-endpoint time. When either is spent, or the caller
// stopped the work, it settles the attempt's quota unused and fails.
func (r *callRun) budget(ctx context.Context, attempt int, settle func(context.Context, int)) (attemptLimits, error) {
	remaining, deadRemaining := r.left(), r.deadLeft()
	if remaining <= 0 {
		settle(ctx, 0)
		return attemptLimits{}, r.outOfTime(attempt - 1)
	}
	if deadRemaining <= 0 {
		settle(ctx, 0)
		return attemptLimits{}, r.down(attempt - 1)
	}
	// Asked last, after any wait for the quota: the caller may have
	// stopped the work meanwhile (a question at its token cap).
	if err := meterBefore(ctx); err != nil {
		settle(ctx, 0)
		return attemptLimits{}, r.fail(attempt-1, r.lastStatus, err)
	}
	lim := attemptLimits{plain: min(r.c.cfg.AttemptTimeout, remaining), whole: r.c.cfg.AttemptTimeout,
		header: min(r.header, remaining, deadRemaining), stall: r.c.cfg.StallTimeout}
	if r.interactive && remaining < lim.whole {
		// A user is waiting: the limit covers the stream too, silent
		// after its headers or not.
		lim.whole, lim.wholeCause = remaining, errInteractiveStream
	}
	return lim, nil
}

// send makes one attempt, streamed unless the endpoint cannot stream,
// and returns its capture with its answer.
func (r *callRun) send(ctx context.Context, lim attemptLimits) (openai.ChatCompletionResponse, *capture, error) {
	newCapture := func() *capture {
		return &capture{continueFinal: r.continueFinal, cacheMarkers: r.ep.CacheMarkers, lead: leadOf(ctx), maxTokens: r.oreq.MaxCompletionTokens}
	}
	capt := newCapture()
	stream := !r.ep.noStream.Load()
	start := time.Now()
	resp, answeredJSON, err := r.c.send(ctx, r.ep, r.oreq, capt, stream, lim)
	if stream && err != nil && ctx.Err() == nil && rejectsStreaming(err) {
		// The endpoint cannot stream: the same attempt, non-streamed.
		r.c.stopStreaming(r.ep, r.mc.Name, err.Error())
		capt = newCapture()
		resp, _, err = r.c.send(ctx, r.ep, r.oreq, capt, false, lim)
	} else if answeredJSON {
		r.c.stopStreaming(r.ep, r.mc.Name, "it answered a streamed request with a whole JSON completion")
	}
	elapsed := time.Since(start)
	r.usage.Latency += elapsed
	if err == nil && len(resp.Choices) == 0 {
		err = errors.New("the response has no choices")
	}
	return resp, capt, err
}

// finish makes the successful attempt's Response and accounts for it:
// the quota it used, the completion sizes, the provider's rate-limit
// headers, its price and the meter.
func (r *callRun) finish(ctx context.Context, resp openai.ChatCompletionResponse, capt *capture, settle func(context.Context, int)) *Response {
	c, ep, mc := r.c, r.ep, r.mc
	capt.firstToken(ctx) // a whole answer, not streamed: it has the prompt
	out := c.response(mc, resp, r.prompt, MaxReplyBytes(r.oreq.MaxCompletionTokens), capt.cut)
	counted := out.Usage.PromptTokens + out.Usage.CompletionTokens
	if ep.CachedOutsideTPM {
		counted -= out.Usage.CachedTokens
		c.completions.observeCached(r.bucket.key(), out.Usage.CachedTokens, out.Usage.PromptTokens)
	}
	settle(ctx, counted)
	c.completions.observe(r.bucket.key(), out.Usage.CompletionTokens)
	c.pace(ctx, r.bucket, capt.header(), r.need())
	c.learn(ctx, r.bucket, capt.header(), false, r.need())
	out.Endpoint = ep.Name
	out.Usage.Endpoint, out.Usage.Model = ep.Name, mc.Name
	out.Usage.Latency, out.Usage.Attempts, out.Usage.RateLimited, out.Usage.LimiterWait, out.Usage.Tokenize =
		r.usage.Latency, r.usage.Attempts, r.usage.RateLimited, r.usage.LimiterWait, r.usage.Tokenize
	if p, ok := ep.Prices.lookup(mc.Name); ok {
		out.Usage.Money = p.Money(out.Usage)
	}
	meter(ctx, out.Usage)
	return out
}

// next decides what follows the failed attempt'th attempt, whose quota is
// settled: another attempt after delay (again), the end of the attempts
// (neither again nor an error), or the call's error.
func (r *callRun) next(ctx context.Context, attempt int, capt *capture, err error) (delay time.Duration, again bool, _ error) {
	if ctx.Err() != nil {
		return 0, false, r.fail(attempt, r.lastStatus, ctx.Err())
	}
	status := statusOf(err)
	r.lastErr, r.lastStatus = err, status
	if capt.answered() || status == http.StatusTooManyRequests {
		// Alive, if failing: not what the dead-endpoint clock times.
		r.deadFrom, r.deadQuota = time.Now(), r.quotaWait
	}
	// The backoff grows with the attempts spent, this one included.
	retry, delay, told := r.c.classify(status, capt.header(), r.spent+1)
	if !retry {
		return 0, false, r.fail(attempt, status, err)
	}
	free := false
	if status == http.StatusTooManyRequests {
		var failed error
		if free, failed = r.rateLimit(ctx, attempt, capt, delay, told, err); failed != nil {
			return 0, false, failed
		}
	}
	if !free {
		r.spent++
		if r.spent == r.attempts {
			return 0, false, nil
		}
	}
	if status != http.StatusTooManyRequests {
		var failed error
		if delay, failed = r.backoff(attempt, delay); failed != nil {
			return 0, false, failed
		}
	} else {
		r.quotaWait += delay
	}
	r.c.log.Debug("llm attempt failed; retrying", zap.String("endpoint", r.ep.Name), zap.String("model", r.mc.Name), zap.Int("attempt", attempt),
		zap.Int("status", status), zap.Duration("delay", delay), zap.Bool("attempt_spent", !free), zap.Error(err))
	return delay, true, nil
}

// rateLimit accounts for a 429 and says whether its wait is free.
//
// A 429 that names its retry delay (told) spends no attempt: the provider
// said when to come back. Only a call that owns its retries waits it out;
// a routed call's 429 goes back to the router, which may pick another
// deployment. Such waits end at rateLimitWaits, at the call's limit in
// total, or at ctx's deadline.
func (r *callRun) rateLimit(ctx context.Context, attempt int, capt *capture, delay time.Duration, told bool, err error) (free bool, _ error) {
	r.usage.RateLimited++
	if r.c.cfg.Limiter != nil {
		_ = r.c.cfg.Limiter.Cooldown(ctx, r.bucket, delay)
		r.c.learn(ctx, r.bucket, capt.header(), true, r.need())
	}
	if !told || !r.ownRetries {
		return false, nil
	}
	if r.waits >= rateLimitWaits {
		return false, r.rateLimited(attempt, err, "answered 429 %d times, each naming a retry delay (a call waits out at most %d)", r.waits+1, rateLimitWaits)
	}
	if r.waited+delay > r.limit {
		return false, r.rateLimited(attempt, err, "asked for %s more after %s of 429 waits, past the call's %s limit",
			delay.Round(time.Millisecond), r.waited.Round(time.Millisecond), r.limit)
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < delay {
		return false, r.rateLimited(attempt, err, "asked to retry after %s, past the call's deadline", delay.Round(time.Millisecond))
	}
	r.waits++
	r.waited += delay
	return true, nil
}

// backoff caps the wait after a failure other than a 429 (whose delay the
// provider set, for a quota others share), and fails the call when the
// next attempt would start past the call's or the dead-endpoint limit.
func (r *callRun) backoff(attempt int, delay time.Duration) (time.Duration, error) {
	delay = min(delay, r.c.cfg.MaxErrorBackoff)
	if r.interactive {
		delay = min(delay, interactiveBackoff)
	}
	if delay >= r.left() {
		// The next attempt would start after the limit.
		return 0, r.outOfTime(attempt)
	}
	if delay >= r.deadLeft() {
		return 0, r.down(attempt)
	}
	return delay, nil
}
