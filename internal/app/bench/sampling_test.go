package bench

import (
	"bytes"
	"context"
	"testing"
)

// TestCompareSampling runs ReFoRCE under fixed and adaptive sampling on
// the real pieces with the default difficulty mix: adaptive sampling
// stops some examples early and makes fewer LLM calls per example; an
// unknown agent or policy is refused before anything runs.
func TestCompareSampling(t *testing.T) {
	t.Parallel()
	sc := Standard()
	sc.Dataset = "../../../examples/demo"
	sc.Examples, sc.Votes, sc.RPM = 16, 8, 3000
	sc.FirstTokenMS, sc.TokensPerSecond = 20, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 2, 8, 1, 4
	var progress bytes.Buffer
	if _, err := CompareSampling(context.Background(), sc, []string{"reforce", "nosuch"}, []string{"fixed", "adaptive"}, t.TempDir(), &progress); err == nil {
		t.Fatal("an agent that does not exist was not refused")
	}
	if _, err := CompareSampling(context.Background(), sc, []string{"reforce"}, []string{"fixed", "sometimes"}, t.TempDir(), &progress); err == nil {
		t.Fatal("a policy that does not exist was not refused")
	}
	if progress.Len() != 0 {
		t.Fatalf("a refused comparison ran: %s", progress.String())
	}
	c, err := CompareSampling(context.Background(), sc, []string{"reforce"}, []string{"fixed", "adaptive"}, t.TempDir(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 2 || c.Scenario.Difficulty == "" {
		t.Fatalf("rows %+v, difficulty %q", c.Rows, c.Scenario.Difficulty)
	}
	fixed, adaptive := c.Rows[0], c.Rows[1]
	t.Logf("fixed: %.2f calls/example, EX %.3f; adaptive: %.2f calls/example, EX %.3f, %d stopped early",
		fixed.CallsPerExample, fixed.EX, adaptive.CallsPerExample, adaptive.EX, adaptive.StoppedEarly)
	if fixed.Sampling != "fixed" || fixed.StoppedEarly != 0 || adaptive.StoppedEarly == 0 {
		t.Errorf("fixed stopped %d early, adaptive %d", fixed.StoppedEarly, adaptive.StoppedEarly)
	}
	if adaptive.CallsPerExample >= fixed.CallsPerExample {
		t.Errorf("adaptive sampling made %.2f calls per example, fixed %.2f", adaptive.CallsPerExample, fixed.CallsPerExample)
	}
	// The default rule (sure) never changes an answer: compared per
	// example with the fixed run's.
	if fixed.AnswersChanged != 0 || adaptive.AnswersChanged != 0 {
		t.Errorf("answers changed: fixed %d, adaptive %d against the fixed run (%v)", fixed.AnswersChanged, adaptive.AnswersChanged, adaptive.Changed)
	}
	if fixed.FailedExamples+adaptive.FailedExamples != 0 {
		t.Errorf("failed examples: fixed %d, adaptive %d", fixed.FailedExamples, adaptive.FailedExamples)
	}
}

// TestSetSampling: every shipped agent takes the policy, PExA and RAISE
// as their own option, the ensemble as each member's.
func TestSetSampling(t *testing.T) {
	for _, tc := range []struct {
		agent string
		want  []string
	}{
		{"reforce", []string{"sampling"}},
		{"pexa", []string{"sampling"}},
		{"raise", []string{"sampling"}},
		{"ensemble", []string{"reforce.sampling", "pexa.sampling", "raise.sampling"}},
	} {
		opts := map[string]string{}
		if err := setSampling(tc.agent, opts, "adaptive"); err != nil {
			t.Fatalf("%s: %v", tc.agent, err)
		}
		if len(opts) != len(tc.want) {
			t.Errorf("%s: set %v, want %v", tc.agent, opts, tc.want)
		}
		for _, k := range tc.want {
			if opts[k] != "adaptive" {
				t.Errorf("%s: %s=%q in %v, want adaptive", tc.agent, k, opts[k], opts)
			}
		}
	}
}
