package coordinator

import (
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// TestSessionsOfKilledAndLost: a closed session keeps its recorded end; a
// killed one (its last heartbeat recorded) ends at its last final answer
// when that came later; a session Redis lost is rebuilt from its finals;
// each counts the examples it finished, and finals recorded before
// sessions were kept count in none.
func TestSessionsOfKilledAndLost(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	stored := []runstate.Session{
		{N: 1, Start: at(0), End: at(10 * time.Minute), Closed: true},
		{N: 2, Start: at(time.Hour), End: at(time.Hour + 30*time.Second)}, // killed: its heartbeat
		{N: 4, Start: at(3 * time.Hour), End: at(3*time.Hour + time.Minute), Closed: true},
	}
	ends := map[string]finalEnd{
		"a": {at(time.Minute), 1}, "b": {at(9 * time.Minute), 1},
		"c": {at(time.Hour + 20*time.Second), 2}, "d": {at(time.Hour + 45*time.Second), 2},
		"e": {at(2 * time.Hour), 3}, "f": {at(2*time.Hour + 5*time.Second), 3},
		"g": {at(3*time.Hour + 30*time.Second), 4},
		"h": {at(-time.Hour), 0},
	}
	got := sessionsOf(stored, ends)
	type want struct {
		n          int
		start, end time.Duration
		examples   int
		endUnknown bool
		seconds    float64
	}
	wants := []want{
		{1, 0, 10 * time.Minute, 2, false, 600},
		{2, time.Hour, time.Hour + 45*time.Second, 2, true, 45},
		{3, 2 * time.Hour, 2*time.Hour + 5*time.Second, 2, true, 5},
		{4, 3 * time.Hour, 3*time.Hour + time.Minute, 1, false, 60},
	}
	if len(got) != len(wants) {
		t.Fatalf("%d sessions %+v, want %d", len(got), got, len(wants))
	}
	for i, w := range wants {
		g := got[i]
		if g.Number != w.n || !g.Started.Equal(at(w.start)) || !g.Finished.Equal(at(w.end)) || g.Examples != w.examples ||
			g.EndUnknown != w.endUnknown || g.Seconds != w.seconds {
			t.Errorf("session %d: %+v, want number %d from +%v to +%v (%v s), %d examples, end unknown %v",
				i+1, g, w.n, w.start, w.end, w.seconds, w.examples, w.endUnknown)
		}
	}
}
