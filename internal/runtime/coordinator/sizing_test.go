package coordinator

import (
	"testing"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// TestSizingFromCountedTokens: the window sized for TokensPerCall is sized
// again, once enough calls finished, from what they counted toward TPM:
// with cached tokens outside TPM, a prompt the candidates share counts a
// tenth, so the window widens tenfold; counted whole, it stays.
func TestSizingFromCountedTokens(t *testing.T) {
	t.Parallel()
	load := agent.Load{Width: 8, Calls: 16, Depth: 4}
	final := func() *message.FinalAnswer {
		l := cost.Ledger{}
		// 16 calls, each 12,000 prompt tokens of which 10,800 cached.
		*l.Stage("generate") = cost.Cost{LLMCalls: 16, LLM: llm.Usage{PromptTokens: 16 * 12_000, CachedTokens: 16 * 10_800}}
		return &message.FinalAnswer{Cost: l}
	}
	for _, tc := range []struct {
		name         string
		outside      bool
		finals, want int
	}{
		// 1,000,000 tokens/min at 12,000 a call: 83 calls a minute, 4.
		{"one final: too few calls measured", true, 1, 4},
		// 1,200 counted a call: 833 calls a minute, 52 s / 16 calls: 35.
		{"cached outside TPM", true, 2, 35},
		{"cached counted", false, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Sizing{Held: 1024, Load: load, RPM: 0, TPM: 1_000_000, CachedOutsideTPM: tc.outside}
			c := &coord{log: zap.NewNop(), sizing: s, window: Window(s.Held, s.Load, s.RPM, s.TPM)}
			if c.window != 4 {
				t.Fatalf("initial window %d, want 4", c.window)
			}
			for range tc.finals {
				c.spend(final())
			}
			if c.window != tc.want {
				t.Errorf("after %d finals (%d tokens over %d calls) the window is %d, want %d", tc.finals, c.counted, c.countedCalls, c.window, tc.want)
			}
		})
	}
}
