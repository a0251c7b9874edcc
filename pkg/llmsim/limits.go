package llmsim

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// providerLimits enforces requests/min, tokens/min (GCRA, one second's worth
// of burst, the granularity real providers enforce at) and concurrency, and
// answers like OpenAI: x-ratelimit-* headers on every response, 429 with
// Retry-After when over.
type providerLimits struct {
	cfg      Limits
	mu       sync.Mutex
	reqTAT   time.Time
	tokTAT   time.Time
	inFlight int
}

func newProviderLimits(l Limits) *providerLimits { return &providerLimits{cfg: l} }

// gcra checks n units against a TAT; it returns the new TAT and the wait
// before the request would fit (0 = admitted).
func gcra(now, tat time.Time, perMinute int, n float64) (time.Time, time.Duration) {
	em := time.Duration(float64(time.Minute) / float64(perMinute))
	burst := math.Max(1, math.Floor(float64(perMinute)/60))
	tol := time.Duration(float64(em) * burst)
	if tat.Before(now) {
		tat = now
	}
	newTAT := tat.Add(time.Duration(float64(em) * n))
	if wait := newTAT.Sub(now) - tol; wait > 0 {
		return tat, wait
	}
	return newTAT, 0
}

// admitRequest counts a request on arrival, as providers do: requests per
// minute and concurrency. It returns a release function (nil when refused),
// the time to wait when refused, and rate-limit headers.
func (p *providerLimits) admitRequest() (func(), time.Duration, map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	hdr := map[string]string{}
	var wait time.Duration
	reqTAT := p.reqTAT
	if p.cfg.RequestsPerMinute > 0 {
		reqTAT, wait = gcra(now, p.reqTAT, p.cfg.RequestsPerMinute, 1)
		hdr["X-Ratelimit-Limit-Requests"] = fmt.Sprint(p.cfg.RequestsPerMinute)
		hdr["X-Ratelimit-Reset-Requests"] = max(reqTAT.Sub(now), 0).Round(time.Millisecond).String()
		hdr["X-Ratelimit-Remaining-Requests"] = fmt.Sprint(remaining(now, reqTAT, p.cfg.RequestsPerMinute))
	}
	if p.cfg.MaxConcurrency > 0 && p.inFlight >= p.cfg.MaxConcurrency {
		wait = max(wait, 100*time.Millisecond)
	}
	if p.cfg.Silent {
		clear(hdr)
	}
	if wait > 0 {
		return nil, wait, hdr
	}
	p.reqTAT = reqTAT
	p.inFlight++
	return func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}, 0, hdr
}

// admitTokens counts a request's tokens per minute once they are known.
func (p *providerLimits) admitTokens(tokens int) (time.Duration, map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hdr := map[string]string{}
	if p.cfg.TokensPerMinute <= 0 {
		return 0, hdr
	}
	now := time.Now()
	tokTAT, wait := gcra(now, p.tokTAT, p.cfg.TokensPerMinute, float64(tokens))
	hdr["X-Ratelimit-Limit-Tokens"] = fmt.Sprint(p.cfg.TokensPerMinute)
	hdr["X-Ratelimit-Reset-Tokens"] = max(tokTAT.Sub(now), 0).Round(time.Millisecond).String()
	hdr["X-Ratelimit-Remaining-Tokens"] = fmt.Sprint(remaining(now, tokTAT, p.cfg.TokensPerMinute))
	if wait == 0 {
		p.tokTAT = tokTAT
	}
	if p.cfg.Silent {
		clear(hdr)
	}
	return wait, hdr
}

// remaining is how many units fit right now under the per-minute limit.
func remaining(now, tat time.Time, perMinute int) int {
	used := float64(max(tat.Sub(now), 0)) / float64(time.Minute) * float64(perMinute)
	return max(0, perMinute-int(math.Ceil(used)))
}
