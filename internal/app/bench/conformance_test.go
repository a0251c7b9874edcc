package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// TestConformanceUnderPersonas runs every agent under personas that write
// as real models do (fences spelt by dialect, bare and plain SQL, Python
// literals and string booleans in JSON, <think> blocks, replies cut by the
// token limit) through the real pieces: no candidate may be lost to the
// form of a reply, and the table must show the forms were met (the
// truncating persona's cuts are re-asked, never executed).
func TestConformanceUnderPersonas(t *testing.T) {
	tier.Servers(t, "a cluster per agent and persona")
	t.Parallel()
	sc := Standard()
	sc.Dataset = "../../../examples/demo"
	sc.Examples, sc.Votes, sc.RPM = 6, 2, 0
	sc.FirstTokenMS, sc.TokensPerSecond, sc.Jitter = 1, 0, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 2, 8, 1, 8
	agents := []string{"reforce", "pexa", "raise"}
	personas := []string{llmsim.PersonaQwenCoder, llmsim.PersonaDeepSeekR1, llmsim.PersonaTruncating}
	var progress bytes.Buffer
	c, err := Conform(context.Background(), sc, agents, personas, t.TempDir(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(agents) * (len(personas) + 1); len(c.Rows) != want {
		t.Fatalf("%d rows, want %d (canonical first): %+v", len(c.Rows), want, c.Rows)
	}
	reasks := map[string]int{}
	for _, r := range c.Rows {
		if r.Examples != sc.Examples || r.FailedExamples != 0 {
			t.Errorf("%s under %s: %d examples, %d failed; want %d, 0", r.Agent, r.Persona, r.Examples, r.FailedExamples, sc.Examples)
		}
		if r.CandidatesLost != 0 {
			t.Errorf("%s under %s lost %d candidates to the form of its replies", r.Agent, r.Persona, r.CandidatesLost)
		}
		if r.Persona == llmsim.PersonaCanonical && (r.FormatReasks != 0 || r.EndedEarly != 0 || r.VerdictsUnread != 0 || r.DeltaPoints != 0) {
			t.Errorf("%s under canonical: %d re-asks, %d ended early, %d verdicts unread, delta %.1f; want all 0", r.Agent, r.FormatReasks, r.EndedEarly, r.VerdictsUnread, r.DeltaPoints)
		}
		if r.LLMErrors != 0 {
			t.Errorf("%s under %s: %d LLM calls failed", r.Agent, r.Persona, r.LLMErrors)
		}
		reasks[r.Persona] += r.FormatReasks
	}
	// Cut replies are re-asked: the counters see them.
	if reasks[llmsim.PersonaTruncating] == 0 {
		t.Errorf("no format re-ask under the truncating persona: its cuts were not seen (rows %+v)", c.Rows)
	}
	var html bytes.Buffer
	if err := ConformanceHTML(&html, c); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(html.String(), `class="conformance-row"`); n != len(c.Rows) {
		t.Errorf("report.html has %d conformance rows, want %d", n, len(c.Rows))
	}
}
