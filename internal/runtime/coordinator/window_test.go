package coordinator_test

import (
	"testing"

	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// TestWindow: enough examples in flight to keep the quota busy (twice
// Little's law at CallSeconds a call), within what the held tasks fit,
// at least 4.
func TestWindow(t *testing.T) {
	t.Parallel()
	reforce := agent.Load{Width: 8, Calls: 16, Depth: 4}
	raise := agent.Load{Width: 6, Calls: 26, Depth: 11}
	for _, tc := range []struct {
		name     string
		held     int
		load     agent.Load
		rpm, tpm float64
		want     int
	}{
		// 3,000/16 examples a minute, 20 s each: 62.5 in flight, twice.
		{"reforce at 3,000 rpm", 1024, reforce, 3000, 0, 125},
		// 3,000/26 a minute, 55 s each: 106 in flight, twice.
		{"raise at 3,000 rpm", 1536, raise, 3000, 0, 212},
		{"held tasks bind", 256, raise, 3000, 0, 86},
		{"no quota: what the held tasks fit", 1024, reforce, 0, 0, 256},
		// 1,000,000 tokens a minute is 83 calls of 12,000 tokens.
		{"tokens bind", 1024, reforce, 6000, 1_000_000, 4},
		{"tokens alone: 1,000 calls a minute", 1024, reforce, 0, 12_000_000, 42},
		{"at least 4", 4, reforce, 3000, 0, 4},
	} {
		if got := coordinator.Window(tc.held, tc.load, tc.rpm, tc.tpm); got != tc.want {
			t.Errorf("%s: window %d, want %d", tc.name, got, tc.want)
		}
	}
}
