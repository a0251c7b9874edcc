package coordinator

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// TestETAFollowsTheRun simulates runs of examples admitted into a window
// (each taking about the same time) and checks the ETA printed at every
// final against the time the run in fact had left: within a factor of two,
// give or take one example's latency. The rate of finals alone (the ETA
// before) put the first at 14 minutes for a run of 40 s: the window's
// first wave finishes together.
func TestETAFollowsTheRun(t *testing.T) {
	for _, tc := range []struct {
		examples, window int
		latency          time.Duration
	}{
		{44, 32, 20 * time.Second},
		{547, 64, 90 * time.Second},
		{12, 4, 5 * time.Second},
		{8, 16, time.Minute},
		{200, 1, 10 * time.Second},
	} {
		t.Run(fmt.Sprintf("%d_in_%d", tc.examples, tc.window), func(t *testing.T) {
			ends := simulateWindow(tc.examples, tc.window, tc.latency)
			last := ends[len(ends)-1].at
			var sum time.Duration
			for i, e := range ends {
				sum += e.latency
				remaining := tc.examples - (i + 1)
				if remaining == 0 {
					break
				}
				// Started before this final's slot is refilled, less the finished.
				inFlight := min(tc.examples, tc.window+i) - (i + 1)
				eta := etaOf(remaining, inFlight, i+1, e.at, sum/time.Duration(i+1))
				truth := last - e.at
				if eta > 2*truth+tc.latency || 2*eta < truth-tc.latency {
					t.Errorf("final %d of %d at %s: ETA %s, the run had %s left", i+1, tc.examples, e.at, eta.Round(time.Second), truth)
				}
			}
		})
	}
}

type simEnd struct{ at, latency time.Duration }

// simulateWindow runs n examples through a window of w: each starts when
// a slot frees and takes latency ±20 % (a fixed spread, no randomness).
func simulateWindow(n, w int, latency time.Duration) []simEnd {
	var running, ends []simEnd
	lat := func(i int) time.Duration { return latency * time.Duration(80+(i*37)%41) / 100 }
	next, now := 0, time.Duration(0)
	for next < n && len(running) < w {
		running = append(running, simEnd{at: now + lat(next), latency: lat(next)})
		next++
	}
	for len(running) > 0 {
		sort.Slice(running, func(a, b int) bool { return running[a].at < running[b].at })
		e := running[0]
		running = running[1:]
		now = e.at
		ends = append(ends, e)
		if next < n {
			running = append(running, simEnd{at: now + lat(next), latency: lat(next)})
			next++
		}
	}
	return ends
}
