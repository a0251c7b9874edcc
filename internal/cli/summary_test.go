package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestPrintSummaryCalibration: the summary prints run.json's accuracy by
// confidence and by method, says how many examples had no gold, and
// labels EX@k by the candidates the examples drew.
func TestPrintSummaryCalibration(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	ex := func(conf, method string, cands int, correct *bool) outputs.Example {
		return outputs.Example{InstanceID: method + conf, Status: "answered", Confidence: conf, Method: method, Rounds: 1,
			Candidates: cands, Correct: correct, CorrectAtK: correct}
	}
	for _, tc := range []struct {
		name         string
		examples     []outputs.Example
		want, absent []string
	}{{
		name: "k differing, one without gold",
		examples: []outputs.Example{ex("high", "majority", 3, &yes), ex("high", "majority", 3, &no), ex("low", "random_tie_break", 12, &yes),
			ex("high", "majority_explored", 8, nil)},
		want: []string{"EX: 0.6667 (2 of 3), EX@k: 0.6667 (any candidate right; k = candidates drawn per example, 3–12)\n",
			"EX by confidence: high: 1 of 2 right (0.500), low: 1 of 1 right (1.000)\n",
			"EX by method: majority: 1 of 2 right (0.500), random_tie_break: 1 of 1 right (1.000)\n",
			"(EX counts the 3 examples with gold; 1 without are left out)"},
		absent: []string{"EX@12", "EX@3", "majority_explored"},
	}, {
		name:     "one k",
		examples: []outputs.Example{ex("high", "majority", 4, &yes), ex("low", "fallback", 4, &no)},
		want: []string{"EX: 0.5000 (1 of 2), EX@4: 0.5000 (any of an example's 4 candidates right)\n",
			"EX by confidence: high: 1 of 1 right (1.000), low: 0 of 1 right (0.000)\n"},
		absent: []string{"without are left out"},
	}, {
		name:     "no gold",
		examples: []outputs.Example{ex("high", "majority", 4, nil)},
		absent:   []string{"EX", "left out"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &outputs.Report{Votes: 8, Examples: tc.examples}
			rep.Summarize()
			var b bytes.Buffer
			printSummary(&b, rep, "out/x")
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("summary lacks %q:\n%s", w, b.String())
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(b.String(), a) {
					t.Errorf("summary shows %q:\n%s", a, b.String())
				}
			}
		})
	}
}

// TestFirstHourTexts: what a new user reads first (quorum agents, quorum
// serve --help) has no typo and names the flags by their current names.
func TestFirstHourTexts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args   []string
		absent *regexp.Regexp
	}{
		{[]string{"agents"}, regexp.MustCompile(`passs`)},
		{[]string{"serve", "--help"}, regexp.MustCompile(`--api-keys([^-]|$)`)},
	} {
		cmd := NewRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(tc.args)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("quorum %s: %v", strings.Join(tc.args, " "), err)
		}
		if m := tc.absent.FindString(out.String()); m != "" {
			t.Errorf("quorum %s prints %q", strings.Join(tc.args, " "), m)
		}
	}
}
