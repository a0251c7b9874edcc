package llmsim

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestDifficultyTiersFollowTheMix(t *testing.T) {
	mix := Difficulty{Easy: 0.5, Medium: 0.3, Hard: 0.2}
	n := map[string]int{}
	const ids = 5000
	for i := range ids {
		id := fmt.Sprintf("q%d", i)
		tier := mix.tier(7, id)
		if again := mix.tier(7, id); again != tier {
			t.Fatalf("%s: tier %s then %s at one seed", id, tier, again)
		}
		n[tier]++
	}
	for tier, want := range map[string]float64{"easy": 0.5, "medium": 0.3, "hard": 0.2} {
		if got := float64(n[tier]) / ids; math.Abs(got-want) > 0.03 {
			t.Errorf("%s: %.3f of questions, want %.2f", tier, got, want)
		}
	}
}

// TestDifficultyAnswers draws many first answers per demo question: easy
// questions are mostly right, hard ones mostly wrong, and a hard
// question's wrong answers mostly agree (the plausible wrong one), more
// than an easy one's. With
// no mix no question has a tier and wrong answers do not cluster.
func TestDifficultyAnswers(t *testing.T) {
	ds := demo(t)
	off, err := New(Config{Dataset: ds, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for id, info := range off.know.examples {
		if info.tier != "" || info.cluster != 0 {
			t.Fatalf("%s: tier %q, cluster %v without a difficulty mix", id, info.tier, info.cluster)
		}
	}
	s, err := New(Config{Dataset: ds, Seed: 3, Difficulty: DefaultDifficulty()})
	if err != nil {
		t.Fatal(err)
	}
	type tally struct{ draws, gold, wrong, plausible int }
	by := map[string]*tally{}
	canon := func(sql string) string {
		sql = strings.TrimSuffix(strings.TrimSpace(sql), ";")
		if strings.HasPrefix(sql, "--") {
			_, sql, _ = strings.Cut(sql, "\n")
		}
		return strings.ToLower(sql)
	}
	for id, info := range s.know.examples {
		if info.gold == "" {
			continue
		}
		tl := by[info.tier]
		if tl == nil {
			tl = &tally{}
			by[info.tier] = tl
		}
		h := fnv.New64a()
		h.Write([]byte(id))
		rng := rand.New(rand.NewPCG(1, h.Sum64()))
		for range 200 {
			o := s.draw(rng, info)
			tl.draws++
			switch o {
			case outGold:
				tl.gold++
			case outWrong:
				tl.wrong++
				if canon(s.sqlFor(rng, info, o)) == canon(info.plausible) {
					tl.plausible++
				}
			}
		}
	}
	for tier, want := range map[string]struct{ gold, plausible float64 }{"easy": {0.9, 0.3}, "medium": {0.5, 0.6}, "hard": {0.2, 0.8}} {
		tl := by[tier]
		if tl == nil || tl.draws == 0 {
			t.Errorf("no demo question is %s", tier)
			continue
		}
		gold, plausible := float64(tl.gold)/float64(tl.draws), float64(tl.plausible)/float64(max(1, tl.wrong))
		t.Logf("%-6s %5d draws: %.2f right, %.2f of %d wrong answers plausible", tier, tl.draws, gold, plausible, tl.wrong)
		// A fresh mistake can be the plausible one too (a query with one
		// thing to flip), so the plausible share is at least the tier's.
		if math.Abs(gold-want.gold) > 0.06 || plausible < want.plausible-0.08 {
			t.Errorf("%s: %.2f right (want %.2f), %.2f of wrong answers plausible (want %.2f or more)", tier, gold, want.gold, plausible, want.plausible)
		}
	}
	share := func(tier string) float64 { return float64(by[tier].plausible) / float64(max(1, by[tier].wrong)) }
	if by["easy"] != nil && by["hard"] != nil && share("hard") <= share("easy") {
		t.Errorf("hard questions' wrong answers agree less (%.2f) than easy ones' (%.2f)", share("hard"), share("easy"))
	}
}

func TestParseDifficulty(t *testing.T) {
	for in, want := range map[string]Difficulty{"": {}, "off": {}, "default": DefaultDifficulty(), "easy=1,hard=1": {Easy: 1, Hard: 1}} {
		got, err := ParseDifficulty(in)
		if err != nil || got != want {
			t.Errorf("ParseDifficulty(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"easy", "easy=-1", "trivial=1", "easy=0,hard=0"} {
		if _, err := ParseDifficulty(bad); err == nil {
			t.Errorf("ParseDifficulty(%q) accepted", bad)
		}
	}
}
