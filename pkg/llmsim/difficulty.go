package llmsim

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Difficulty is a mix of easy, medium and hard questions. Each question's
// tier is drawn from the seed and its id, and sets its skill (how often a
// first answer is right) and how often its wrong answers are the one
// plausible wrong answer of the question rather than a fresh mistake:
// real models' errors on a hard question agree with each other, so a
// majority can be wrong and agreement alone does not prove an answer.
// The zero value is off: every question keeps the older uniform skill
// (skillOf) and wrong answers that rarely agree, today's fixtures.
type Difficulty struct {
	// Easy, Medium and Hard weigh the tiers (normalized).
	Easy, Medium, Hard float64
}

// Off reports whether no mix is set.
func (d Difficulty) Off() bool { return d.Easy+d.Medium+d.Hard <= 0 }

// DefaultDifficulty is the mix the bench's sampling comparison uses: half
// the questions easy, a third medium, a sixth hard.
func DefaultDifficulty() Difficulty { return Difficulty{Easy: 0.5, Medium: 0.33, Hard: 0.17} }

// A tier's skill multiplies Noise.Gold (at the default 0.5: right 90%,
// 50% and 20% of first answers); cluster is the share of its wrong
// answers that are the question's plausible wrong one.
var tiers = map[string]struct{ skill, cluster float64 }{
	"easy":   {1.8, 0.3},
	"medium": {1.0, 0.6},
	"hard":   {0.4, 0.8},
}

// tier draws a question's tier.
func (d Difficulty) tier(seed uint64, id string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "difficulty/%d/%s", seed, id)
	x := float64(h.Sum64()%1_000_000) / 1_000_000 * (d.Easy + d.Medium + d.Hard)
	switch {
	case x < d.Easy:
		return "easy"
	case x < d.Easy+d.Medium:
		return "medium"
	}
	return "hard"
}

// plausibleWrong is a question's one plausible wrong answer: a wrong
// query drawn from the seed and the question alone, so every candidate
// that makes it gets the same result.
func plausibleWrong(seed uint64, info *exampleInfo) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "plausible/%d/%s", seed, info.ex.ID)
	return wrongQuery(rand.New(rand.NewPCG(h.Sum64(), 1)), info.gold, info.ex.Dialect.LexOptions())
}

// String is the mix as ParseDifficulty reads it; "" when off.
func (d Difficulty) String() string {
	if d.Off() {
		return ""
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	return "easy=" + f(d.Easy) + ",medium=" + f(d.Medium) + ",hard=" + f(d.Hard)
}

// ParseDifficulty reads a mix: "off" (or ""), "default", or
// "easy=W,medium=W,hard=W" (tiers left out weigh 0).
func ParseDifficulty(s string) (Difficulty, error) {
	var d Difficulty
	switch strings.TrimSpace(s) {
	case "", "off":
		return d, nil
	case "default":
		return DefaultDifficulty(), nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		w, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil || w < 0 {
			return d, fmt.Errorf("difficulty %q: want easy=W,medium=W,hard=W with weights of 0 or more", s)
		}
		switch k {
		case "easy":
			d.Easy = w
		case "medium":
			d.Medium = w
		case "hard":
			d.Hard = w
		default:
			return d, fmt.Errorf("difficulty %q: unknown tier %q (easy, medium, hard)", s, k)
		}
	}
	if d.Off() {
		return d, fmt.Errorf("difficulty %q: every weight is 0", s)
	}
	return d, nil
}
