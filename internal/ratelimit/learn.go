package ratelimit

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/llm"
)

// Learning the provider's real limits.
//
// A configured quota is an upper bound, not the truth: an Azure
// deployment's quota is shared with other applications, a gateway adds
// its own limit, the number typed was wrong. What the provider says is
// the truth, and every process of the cluster learns it at once through
// Redis (rl:llm-learned:<group>):
//   - the limits its headers state (x-ratelimit-limit-*) cap the quota;
//   - a 429 cuts the rate in force by learnFactor (one cut per
//     learnHoldOff: the calls in flight were sent at the old rate), and
//     while callers wait on the limiter without 429s it grows back by a
//     fixed step a second (additive increase, multiplicative decrease:
//     two clients on one quota converge to fair shares), until it reaches
//     the configured quota and is dropped;
//   - with no quota configured and no limit stated, the first 429 starts
//     learning from the rate the process was sending at.

const (
	// learnFactor is the cut a 429 makes.
	learnFactor = 0.75
	// learnHoldOff is how long after a cut 429s are not cut for again.
	learnHoldOff = 2 * time.Second
	// learnStep is the increase a second, as a share of the quota in
	// force (configured, stated or, unknown, the rate at the first cut).
	learnStep = 0.01
	// learnUnknownStep is the step when no quota is known.
	learnUnknownStep = 0.02
	// learnMaxStep bounds an increase after a quiet spell.
	learnMaxStep = time.Second
	// learnBusy is how long after callers last waited on the limiter the
	// rate still counts as in demand (it only grows then: an idle rate
	// that grew would say nothing of the provider).
	learnBusy = 5 * time.Second
	// headerRefresh is how often a process writes the stated limits again
	// when they have not changed.
	headerRefresh = 30 * time.Second
	// learnDrain bounds the pause a stated limit below the rate in force
	// makes, for the provider's window to drain.
	learnDrain = 2 * time.Second
	// meterSeconds is the window of a process's own rate.
	meterSeconds = 10
)

// learnFloor is the lowest a cut takes field's rate: a request every ten
// seconds, or 1,000 tokens a minute.
func learnFloor(field string) float64 {
	if field == "tpm" {
		return 1000
	}
	return 6
}

// Learning is a process's part in learning limits: when its callers last
// waited, the limits stated last written, its own rate, and what it saw
// learned. Set LLMBudget.Learning to learn.
type Learning struct {
	// HoldOff is how long after a cut 429s are not cut for again
	// (default learnHoldOff).
	HoldOff time.Duration

	mu     sync.Mutex
	groups map[string]*learnState
}

// NewLearning returns a process's Learning.
func NewLearning() *Learning { return &Learning{HoldOff: learnHoldOff} }

func (l *Learning) holdOff() time.Duration {
	if l.HoldOff <= 0 {
		return learnHoldOff
	}
	return l.HoldOff
}

type learnState struct {
	busyAt         time.Time
	hdrRPM, hdrTPM float64
	hdrAt          time.Time
	// calls per second of the last meterSeconds, by Unix second.
	calls [meterSeconds]int
	secs  [meterSeconds]int64
	// cuts counts the cuts this process made; lowest is the lowest rate
	// learned it saw (0: none).
	cuts   int
	lowest float64
	// heard: the provider stated a limit or answered 429 to this
	// process, about bucket.
	heard  bool
	bucket llm.Bucket
}

func (l *Learning) state(group string) *learnState {
	s := l.groups[group]
	if s == nil {
		if l.groups == nil {
			l.groups = map[string]*learnState{}
		}
		s = &learnState{}
		l.groups[group] = s
	}
	return s
}

// called counts a call of group at now; busy says it waited on the limiter.
func (l *Learning) called(group string, now time.Time, busy bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(group)
	sec := now.Unix()
	i := sec % meterSeconds
	if s.secs[i] != sec {
		s.secs[i], s.calls[i] = sec, 0
	}
	s.calls[i]++
	if busy {
		s.busyAt = now
	}
}

// rate is this process's calls of group a minute, over the last
// meterSeconds.
func (l *Learning) rate(group string, now time.Time) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(group)
	n := 0
	for i, sec := range s.secs {
		if now.Unix()-sec < meterSeconds {
			n += s.calls[i]
		}
	}
	return float64(n) * 60 / meterSeconds
}

// heard says whether the provider stated a limit or answered 429 to this
// process: until then a call with no quota need not read what was learned.
func (l *Learning) heard(group string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state(group).heard
}

func (l *Learning) hear(group string, bk llm.Bucket) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(group)
	s.heard, s.bucket = true, bk
}

func (l *Learning) busy(group string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return now.Sub(l.state(group).busyAt) < learnBusy
}

// statedChanged says whether the stated limits are news to write.
func (l *Learning) statedChanged(group string, rpm, tpm float64, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(group)
	if (rpm == 0 || rpm == s.hdrRPM) && (tpm == 0 || tpm == s.hdrTPM) && now.Sub(s.hdrAt) < headerRefresh {
		return false
	}
	if rpm > 0 {
		s.hdrRPM = rpm
	}
	if tpm > 0 {
		s.hdrTPM = tpm
	}
	s.hdrAt = now
	return true
}

func (l *Learning) cut(group, field string, to float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(group)
	s.cuts++
	if field == "rpm" && (s.lowest == 0 || to < s.lowest) {
		s.lowest = to
	}
}

// Learned is what was learned of one model's limits: the quota configured
// (or set on the running cluster), what the provider's headers stated,
// what 429s taught (0: nothing), and the cuts this process made.
type Learned struct {
	Endpoint, Model              string
	ConfiguredRPM, ConfiguredTPM float64
	StatedRPM, StatedTPM         float64
	LearnedRPM, LearnedTPM       float64
	Cuts                         int
	// Lowest is the lowest requests a minute a cut of this process set.
	Lowest float64
}

// LearnedLimits is what was learned of each model this process heard its
// provider say something of (a stated limit or a 429).
func (b *LLMBudget) LearnedLimits(ctx context.Context) ([]Learned, error) {
	if b.Learning == nil {
		return nil, nil
	}
	type heard struct {
		group string
		s     learnState
	}
	var hs []heard
	b.Learning.mu.Lock()
	for g, s := range b.Learning.groups {
		if s.heard {
			hs = append(hs, heard{g, *s})
		}
	}
	b.Learning.mu.Unlock()
	sort.Slice(hs, func(i, j int) bool { return hs[i].group < hs[j].group })
	out := make([]Learned, 0, len(hs))
	for _, h := range hs {
		ll, err := b.Limiter.LearnedLLM(ctx, h.group)
		if err != nil {
			return nil, err
		}
		q := b.overridden(ctx, h.s.bucket)
		out = append(out, Learned{Endpoint: h.s.bucket.Endpoint, Model: h.s.bucket.Model,
			ConfiguredRPM: q.RequestsPerMinute, ConfiguredTPM: q.TokensPerMinute,
			StatedRPM: ll.HeaderRPM, StatedTPM: ll.HeaderTPM, LearnedRPM: ll.RPM, LearnedTPM: ll.TPM,
			Cuts: h.s.cuts, Lowest: h.s.lowest})
	}
	return out, nil
}

// learned is q with what the cluster learned of the group's limits in
// place where lower.
func (b *LLMBudget) learned(ctx context.Context, group string, q LLMQuota) LLMQuota {
	if b.Learning == nil || q.RequestsPerMinute == 0 && q.TokensPerMinute == 0 && !b.Learning.heard(group) {
		return q // with no quota anywhere, a call does not touch Redis
	}
	l, err := rdb.ReadLearned(ctx, b.Limiter.rdb, b.Limiter.key(rdb.LLMLearnedName(group)))
	if err != nil {
		return q // Redis away: the limiter fails on its own
	}
	if r := lowest(q.RequestsPerMinute, l.HeaderRPM, l.RPM); r != q.RequestsPerMinute {
		q.RequestsPerMinute, q.RequestBurst = r, 0
	}
	if t := lowest(q.TokensPerMinute, l.HeaderTPM, l.TPM); t != q.TokensPerMinute {
		q.TokensPerMinute, q.TokenBurst = t, 0
	}
	return q
}

// lowest is the lowest of the positive values (0: none is).
func lowest(vs ...float64) float64 {
	m := 0.0
	for _, v := range vs {
		if v > 0 && (m == 0 || v < m) {
			m = v
		}
	}
	return m
}

// Learn hears what an answered attempt said of the provider's limits
// (llm.Learner).
func (b *LLMBudget) Learn(ctx context.Context, bk llm.Bucket, s llm.LimitSignal) {
	if b.Learning == nil {
		return
	}
	group := b.group(bk)
	key := b.Limiter.key(rdb.LLMLearnedName(group))
	now := b.Limiter.clk().now()
	if s.RateLimited || s.RequestsLimit > 0 || s.TokensLimit > 0 {
		b.Learning.hear(group, bk)
	}
	if (s.RequestsLimit > 0 || s.TokensLimit > 0) && b.Learning.statedChanged(group, s.RequestsLimit, s.TokensLimit, now) {
		b.stated(ctx, bk, key, s)
	}
	if !s.RateLimited && !b.Learning.busy(group, now) {
		return // an idle rate that grew would say nothing of the provider
	}
	// The ceiling: the quota configured (or set), or the provider's
	// stated limit where lower.
	configured := b.overridden(ctx, bk)
	known, err := rdb.ReadLearned(ctx, b.Limiter.rdb, key)
	if err != nil {
		return
	}
	stated := func(field string) float64 {
		if field == "tpm" {
			return lowest(configured.TokensPerMinute, s.TokensLimit, known.HeaderTPM)
		}
		return lowest(configured.RequestsPerMinute, s.RequestsLimit, known.HeaderRPM)
	}
	if !s.RateLimited {
		for _, f := range []string{"rpm", "tpm"} {
			_, _ = rdb.LearnUp(ctx, b.Limiter.rdb, key, f, stated(f), learnMaxStep)
		}
		return
	}
	inForce := configured
	inForce.RequestsPerMinute = lowest(inForce.RequestsPerMinute, known.HeaderRPM, known.RPM, s.RequestsLimit)
	inForce.TokensPerMinute = lowest(inForce.TokensPerMinute, known.HeaderTPM, known.TPM, s.TokensLimit)
	field, current := "rpm", inForce.RequestsPerMinute
	if s.TokensShort && inForce.TokensPerMinute > 0 {
		field, current = "tpm", inForce.TokensPerMinute
	}
	ceiling, step := stated(field), learnStep
	if current == 0 {
		// Nothing known: start from the rate this process sent at.
		current, step = math.Max(learnFloor("rpm"), b.Learning.rate(group, now)), learnUnknownStep
	}
	if ceiling == 0 {
		ceiling = current
	}
	to, cut, err := rdb.LearnDown(ctx, b.Limiter.rdb, key, field, current, learnFactor, learnFloor(field), b.Learning.holdOff(), step*ceiling)
	if err == nil && cut {
		b.Learning.cut(group, field, to)
	}
}

// stated records the limits the provider's headers state. Lower than the
// rate in force, they were overrun by the calls sent before: the cluster
// pauses for as long as the provider said its window takes to drain (at
// most learnDrain), and their 429s cut nothing.
func (b *LLMBudget) stated(ctx context.Context, bk llm.Bucket, key string, s llm.LimitSignal) {
	inForce := b.quota(ctx, bk)
	lowered := s.RequestsLimit > 0 && (inForce.RequestsPerMinute == 0 || s.RequestsLimit < inForce.RequestsPerMinute) ||
		s.TokensLimit > 0 && (inForce.TokensPerMinute == 0 || s.TokensLimit < inForce.TokensPerMinute)
	if err := rdb.SetHeaderLimits(ctx, b.Limiter.rdb, key, s.RequestsLimit, s.TokensLimit, lowered); err != nil || !lowered {
		return
	}
	if s.Reset > 0 {
		_ = b.Cooldown(ctx, bk, min(s.Reset, learnDrain))
	}
}

// LearnedLLM is what the cluster learned of group's limits (LLMGroup).
func (l *Limiter) LearnedLLM(ctx context.Context, group string) (rdb.LearnedLimits, error) {
	ll, err := rdb.ReadLearned(ctx, l.rdb, l.key(rdb.LLMLearnedName(group)))
	if err != nil {
		return ll, fmt.Errorf("read the limits learned of %s: %w", group, err)
	}
	return ll, nil
}

var _ llm.Learner = (*LLMBudget)(nil)
