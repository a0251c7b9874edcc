package runstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestSessionsAreNumberedAndKept: sessions are numbered from 1 in the
// order begun; a heartbeat and a close overwrite a session's end; the key
// is in the run's index, so retirement and deletion reach it.
func TestSessionsAreNumberedAndKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	s := runstate.New(c)
	const run = "sess"
	if got, err := s.Sessions(ctx, run); err != nil || len(got) != 0 {
		t.Fatalf("a run without sessions has %v (%v), want none", got, err)
	}
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC)
	for i, want := range []int{1, 2} {
		n, err := s.BeginSession(ctx, run, t0.Add(time.Duration(i)*time.Hour))
		if err != nil || n != want {
			t.Fatalf("session begun %d-th: number %d (%v), want %d", i+1, n, err, want)
		}
	}
	if err := s.SetSession(ctx, run, runstate.Session{N: 1, Start: t0, End: t0.Add(10 * time.Minute), Closed: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSession(ctx, run, runstate.Session{N: 2, Start: t0.Add(time.Hour), End: t0.Add(time.Hour + time.Minute)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Sessions(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	want := []runstate.Session{
		{N: 1, Start: t0, End: t0.Add(10 * time.Minute), Closed: true},
		{N: 2, Start: t0.Add(time.Hour), End: t0.Add(time.Hour + time.Minute)},
	}
	if len(got) != len(want) {
		t.Fatalf("sessions %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.N != w.N || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) || g.Closed != w.Closed {
			t.Errorf("session %d: %+v, want %+v", i+1, g, w)
		}
	}
	if ok, err := c.SIsMember(ctx, rdb.RunIndexKey(run), rdb.SessionsKey(run)).Result(); err != nil || !ok {
		t.Errorf("the sessions key is not in the run's index (%v): retirement would never expire it", err)
	}
}

// TestRecordedFinalKeepsItsTime: a final recorded with its time and
// session reads back with both, and as the same answer through Finals; one
// recorded by SetFinal (as before times were kept) reads back with none.
func TestRecordedFinalKeepsItsTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := runstate.New(redistest.Start(t).Client(t))
	at := time.Date(2025, 3, 1, 10, 0, 0, 987654321, time.UTC)
	a := &message.FinalAnswer{V: message.Version, Run: "r", Example: "a", Status: "answered", SQL: "SELECT 1", Rounds: 2}
	b := &message.FinalAnswer{V: message.Version, Run: "r", Example: "b", Status: "failed", Error: "boom"}
	if err := s.RecordFinal(ctx, a, at, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFinal(ctx, b); err != nil {
		t.Fatal(err)
	}
	rec, err := s.RecordedFinals(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if r := rec["a"]; r == nil || !r.At.Equal(at) || r.Session != 3 || r.SQL != a.SQL || r.Rounds != 2 || r.Status != "answered" {
		t.Errorf("recorded final of a: %+v, want %+v at %v in session 3", r, a, at)
	}
	if r := rec["b"]; r == nil || !r.At.IsZero() || r.Session != 0 || r.Error != "boom" {
		t.Errorf("final of b, set without a time: %+v, want no time, no session", r)
	}
	finals, err := s.Finals(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if f := finals["a"]; len(finals) != 2 || f == nil || f.SQL != a.SQL || f.Example != "a" {
		t.Errorf("Finals: %+v, want a and b with a's answer %+v", finals, a)
	}
}
