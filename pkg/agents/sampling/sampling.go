// Package sampling is the candidate-sampling policy the agents share:
// fixed (every candidate slot is drawn) or adaptive, after
// Adaptive-Consistency (Aggarwal et al., EMNLP 2023, "Let's Sample Step by
// Step"): candidates are drawn in waves, and after each wave a stopping
// rule over the result clusters so far says whether the majority is
// settled; if it is, the remaining slots are never drawn.
//
// The rule sees only cluster sizes (how many candidates agree on each
// result), so it applies to any agent whose vote clusters by result.
package sampling

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Policies.
const (
	Fixed    = "fixed"
	Adaptive = "adaptive"
)

// Stopping rules: Sure, the default, and the paper's two.
const (
	// Sure stops only once the candidates not yet drawn cannot change the
	// vote: the largest cluster (of two or more) leads the runner-up by
	// more than the candidates left, so with every slot drawn it would
	// still be the unique largest, and the example decided as under fixed
	// sampling. It never changes an answer; it saves draws on examples
	// whose candidates agree (3 of 8 for five agreeing of five).
	Sure = "sure"
	// Beta: the probability, under a uniform prior, that the largest
	// cluster's share exceeds the runner-up's, given their two counts
	// (the paper's Beta stopping criterion).
	Beta = "beta"
	// Dirichlet: the probability that the largest cluster's share is the
	// largest of all clusters' (the paper's Dirichlet criterion), by a
	// seeded Monte Carlo estimate.
	Dirichlet = "dirichlet"
)

// The options an agent declares to take the policy (Options); a composite
// agent's members declare them under their own prefix.
const (
	OptSampling  = "sampling"
	OptRule      = "sampling-rule"
	OptThreshold = "sampling-threshold"
	OptFirst     = "sampling-first"
	OptStep      = "sampling-step"
)

// Defaults: the Sure rule, waves of 3 then 2 more at a time. The
// threshold is the paper's rules' (beta, dirichlet): they stop on a
// posterior, so they may stop before a vote the remaining draws would have
// changed. With at most 8 candidates 0.95 can stop no earlier than four
// agreeing ones (three agreeing give 15/16 = 0.9375); 0.9 lets three
// unanimous candidates settle an example, and changes answers
// (docs/agents/reforce.md).
const (
	DefaultRule      = Sure
	DefaultThreshold = 0.9
	DefaultFirst     = 3
	DefaultStep      = 2
)

// Config is a sampling policy.
type Config struct {
	Policy    string
	Rule      string
	Threshold float64
	// First is the first wave's size; Step each later wave's.
	First, Step int
}

// Options are the policy's agent options, with unit naming what a
// candidate is for the agent (a candidate, a pass, a round).
func Options(unit string) []agent.Option {
	return OptionsAt(unit, DefaultThreshold)
}

// OptionsAt is Options with another default threshold: for an agent whose
// units are not independent samples (RAISE's rounds give 4 finals from one
// trajectory, which the rule counts as 4), so the shared default stops
// too early.
func OptionsAt(unit string, threshold float64) []agent.Option {
	units := unit + "s"
	if strings.HasSuffix(unit, "s") {
		units = unit + "es" // a pass, passes
	}
	return []agent.Option{
		{Name: OptSampling, Default: Fixed, Usage: "candidate sampling: fixed (every " + unit + ") or adaptive (" + units + " in waves, stopping once the result clusters' majority is settled)", Asker: agent.AskOneOf(Fixed, Adaptive)},
		{Name: OptRule, Default: DefaultRule, Usage: "adaptive sampling's stopping rule: sure (stop only once the " + units + " left cannot change the vote; never changes an answer), or beta or dirichlet (Adaptive-Consistency's posteriors: fewer draws, and some answers change)", Asker: agent.AskOneOf(Sure, Beta, Dirichlet)},
		{Name: OptThreshold, Default: strconv.FormatFloat(threshold, 'g', -1, 64), Usage: "the beta and dirichlet rules stop once their posterior confidence reaches this", Asker: agent.AskNumber(0.5, 0.999)},
		{Name: OptFirst, Default: strconv.Itoa(DefaultFirst), Usage: "adaptive sampling's first wave, in " + units, Asker: agent.AskCount()},
		{Name: OptStep, Default: strconv.Itoa(DefaultStep), Usage: "adaptive sampling's later waves, in " + units, Asker: agent.AskCount()},
	}
}

// FromOptions reads the policy from an agent's checked options; options
// it does not find keep their defaults.
func FromOptions(opts map[string]string) (Config, error) {
	c := Config{Policy: Fixed, Rule: DefaultRule, Threshold: DefaultThreshold, First: DefaultFirst, Step: DefaultStep}
	if v := opts[OptSampling]; v != "" {
		c.Policy = v
	}
	if v := opts[OptRule]; v != "" {
		c.Rule = v
	}
	if v := opts[OptThreshold]; v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return c, fmt.Errorf("option %s=%q: want a number", OptThreshold, v)
		}
		c.Threshold = t
	}
	for _, o := range []struct {
		name string
		dst  *int
	}{{OptFirst, &c.First}, {OptStep, &c.Step}} {
		if v := opts[o.name]; v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return c, fmt.Errorf("option %s=%q: want an integer", o.name, v)
			}
			*o.dst = n
		}
	}
	return c, c.Check()
}

// Check refuses a policy that cannot run.
func (c Config) Check() error {
	switch {
	case c.Policy != Fixed && c.Policy != Adaptive:
		return fmt.Errorf("option %s=%q: want %s or %s", OptSampling, c.Policy, Fixed, Adaptive)
	case c.Rule != Sure && c.Rule != Beta && c.Rule != Dirichlet:
		return fmt.Errorf("option %s=%q: want %s, %s or %s", OptRule, c.Rule, Sure, Beta, Dirichlet)
	case !(c.Threshold > 0 && c.Threshold < 1):
		return fmt.Errorf("option %s=%v: want a number between 0 and 1", OptThreshold, c.Threshold)
	case c.First < 1 || c.Step < 1:
		return fmt.Errorf("options %s=%d and %s=%d: use 1 or more", OptFirst, c.First, OptStep, c.Step)
	}
	return nil
}

// Waves are the wave sizes of up to max candidates: one wave of max when
// fixed; else First, then Step at a time, the last cut to what is left.
func (c Config) Waves(max int) []int {
	if c.Policy != Adaptive || max <= c.First {
		return []int{max}
	}
	out := []int{c.First}
	for left := max - c.First; left > 0; left -= c.Step {
		out = append(out, min(c.Step, left))
	}
	return out
}

// Wave says which wave the drawn-th candidate (from 0) is in, and the
// first candidate of that wave.
func (c Config) Wave(max, drawn int) (wave, from int) {
	for i, n := range c.Waves(max) {
		if drawn < from+n {
			return i, from
		}
		from += n
	}
	return len(c.Waves(max)), max
}

// Verdict is the rule's answer after a wave.
type Verdict struct {
	// Settled: stop drawing.
	Settled bool
	// Confidence is the rule's posterior that the largest cluster is the
	// majority.
	Confidence float64
}

// Judge applies the rule to the sizes of the result clusters so far, with
// left candidates not yet drawn. Candidates in no cluster (failed, empty,
// invalid) count toward no answer, as in the paper, where only answers
// are voted. With no cluster at all nothing is settled. Confidence is the
// Beta posterior under Sure (for the record; Sure does not stop on it).
func (c Config) Judge(sizes []int, left int) Verdict {
	s := slices.Clone(sizes)
	slices.SortFunc(s, func(a, b int) int { return b - a })
	for len(s) > 0 && s[len(s)-1] <= 0 {
		s = s[:len(s)-1]
	}
	if len(s) == 0 {
		return Verdict{}
	}
	switch c.Rule {
	case Sure:
		second := 0
		if len(s) > 1 {
			second = s[1]
		}
		return Verdict{Settled: s[0] >= 2 && s[0] > second+max(left, 0), Confidence: BetaConfidence(s)}
	case Dirichlet:
		p := DirichletConfidence(s)
		return Verdict{Settled: p >= c.Threshold, Confidence: p}
	}
	p := BetaConfidence(s)
	return Verdict{Settled: p >= c.Threshold, Confidence: p}
}

// BetaConfidence is P(p1 > p2) for the two largest counts v1 >= v2 (the
// others ignored) under Beta(v1+1, v2+1), the paper's Beta criterion:
// the integral from 1/2 to 1 of the Beta density. For integer parameters
// it is exact: P(X > 1/2) for X ~ Beta(a, b) is P(Binomial(a+b-1, 1/2) <
// a).
func BetaConfidence(sorted []int) float64 {
	v1, v2 := sorted[0], 0
	if len(sorted) > 1 {
		v2 = sorted[1]
	}
	a, n := v1+1, v1+v2+1
	// Sum C(n,k)/2^n for k < a in log space, so large counts stay finite.
	var sum float64
	for k := 0; k < a; k++ {
		lg, _ := math.Lgamma(float64(n + 1))
		lk, _ := math.Lgamma(float64(k + 1))
		lnk, _ := math.Lgamma(float64(n - k + 1))
		sum += math.Exp(lg - lk - lnk - float64(n)*math.Ln2)
	}
	return min(sum, 1)
}

// dirichletDraws is the Monte Carlo sample size of DirichletConfidence:
// its standard error is at most 0.0025.
const dirichletDraws = 40000

// DirichletConfidence is P(p1 is the largest share) under
// Dirichlet(v1+1, ..., vk+1) plus one more cluster of count zero for the
// answers not yet seen, estimated by seeded Monte Carlo (the seed is the
// counts, so a verdict replays).
func DirichletConfidence(sorted []int) float64 {
	alpha := append(slices.Clone(sorted), 0)
	var seed uint64 = 1469598103934665603
	for _, v := range sorted {
		seed = (seed ^ uint64(v)) * 1099511628211
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(sorted))))
	wins := 0
	for range dirichletDraws {
		// A Gamma(k+1) draw is the sum of k+1 exponentials; the shares
		// need not be normalized to compare.
		first := gamma(rng, alpha[0]+1)
		best := true
		for _, v := range alpha[1:] {
			if gamma(rng, v+1) >= first {
				best = false
				break
			}
		}
		if best {
			wins++
		}
	}
	return float64(wins) / dirichletDraws
}

func gamma(rng *rand.Rand, k int) float64 {
	var s float64
	for range k {
		s += rng.ExpFloat64()
	}
	return s
}

// Settle judges the candidates drawn so far, with left more to draw: the
// rule over their result clusters (vote.Clusters), and the majority vote
// over them. It is settled when the rule says so and the vote has a
// winner with high confidence (a unique largest cluster of two or more),
// so an early stop always decides as the paper's first vote would. Every
// agent's waves and the offline replay (Replay) decide with it.
func (c Config) Settle(cands []*agent.Candidate, left int) (Verdict, vote.Decision) {
	groups, _ := vote.Clusters(cands)
	sizes := make([]int, len(groups))
	for i, g := range groups {
		sizes[i] = len(g)
	}
	v, m := c.Judge(sizes, left), vote.Majority(cands)
	v.Settled = v.Settled && m.Confidence == vote.High
	return v, m
}

// Replayed is what adaptive sampling would have done with candidates
// drawn in order: how many it drew, the rule's last posterior, whether it
// stopped early, and the vote then (meaningful when it stopped).
type Replayed struct {
	Drawn     int
	Stopped   bool
	Posterior float64
	Vote      vote.Decision
}

// Replay runs the waves over cands, the candidates in the order they
// were drawn (a fixed run's, by index): after each wave it settles or
// draws the next, as an agent's Decide does live.
func (c Config) Replay(cands []*agent.Candidate) Replayed {
	drawn := 0
	var r Replayed
	for _, n := range c.Waves(len(cands)) {
		drawn += n
		v, m := c.Settle(cands[:drawn], len(cands)-drawn)
		r = Replayed{Drawn: drawn, Posterior: v.Confidence, Vote: m}
		if v.Settled {
			r.Stopped = drawn < len(cands)
			return r
		}
	}
	return r
}

// MethodAwaitingWave is the method of the decision that opens the next
// wave.
const MethodAwaitingWave = "awaiting_wave"

// AfterWave is an agent's decision after wave round (waves as Waves gave
// them) over cands, the candidates of every wave so far: settled
// (Settle), the vote's high-confidence majority with the verdict, the
// units not drawn released; not settled, the next wave, opened by
// open(round+1, first unit, units); nil after the last wave, for the
// agent's own vote to decide (with the rule's last posterior). A unit
// (a pass, a round) may give several candidates, as many as its slots:
// each unit left counts as many as the units drawn gave on average,
// rounded up.
func (c Config) AfterWave(waves []int, round int, cands []*agent.Candidate,
	open func(round, from, n int) (*agent.Dispatch, error)) (*agent.Decision, error) {
	if round >= len(waves)-1 {
		return nil, nil
	}
	drawn, total := 0, 0
	for i, n := range waves {
		if i <= round {
			drawn += n
		}
		total += n
	}
	perUnit := max(1, (len(cands)+drawn-1)/max(drawn, 1))
	j, v := c.Settle(cands, (total-drawn)*perUnit)
	verdict := &agent.Sampling{Posterior: j.Confidence}
	if j.Settled {
		verdict.StoppedAfter = drawn
		out := v.Runtime(cands)
		out.Sampling = verdict
		return out, nil
	}
	next, err := open(round+1, drawn, waves[round+1])
	if err != nil {
		return nil, err
	}
	return &agent.Decision{Next: next, Confidence: string(vote.Low), Method: MethodAwaitingWave, Sampling: verdict}, nil
}
