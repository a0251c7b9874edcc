package outputs

import (
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
)

// TestRateLimitNote: a run's 429s are said with their share of the
// requests sent, and past 1 % with the hint that the configured quota is
// above the provider's.
func TestRateLimitNote(t *testing.T) {
	for _, tc := range []struct {
		name            string
		calls, attempts int
		limited         int
		want            string
		hint            bool
	}{
		{"none", 100, 100, 0, "none", false},
		{"a few", 1000, 1005, 5, "0.5 % of 1005 requests sent", false},
		{"many", 100, 130, 30, "23.1 % of 130 requests sent", true},
		{"attempts unrecorded", 200, 0, 10, "5.0 % of 200 requests sent", true},
	} {
		c := cost.Cost{LLMCalls: tc.calls, LLM: llm.Usage{Attempts: tc.attempts, RateLimited: tc.limited}}
		got := RateLimitNote(c)
		if !strings.HasPrefix(got, tc.want) || strings.Contains(got, "configure the provider's real limits") != tc.hint {
			t.Errorf("%s: %q, want it to start %q, the hint %v", tc.name, got, tc.want, tc.hint)
		}
	}
}
