package ratelimit

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/slot"
)

// TestWarm: the first caller of a key leads; the others wait until it is
// warm, or until their wait runs out when the lead never says; a lead that
// failed lets the next caller lead. Waits are events (the follower leaving
// its slot) or a fake clock's record, never time spent.
func TestWarm(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t), Prefix: "t:"})
	b := &LLMBudget{Limiter: l, Scope: "s"}
	ctx := context.Background()
	const lock, ttl = time.Minute, time.Minute

	leadSlot := &countingSlot{}
	lead, done, err := b.Warm(slot.With(ctx, leadSlot), "k1", lock, time.Minute, ttl)
	if err != nil || !lead {
		t.Fatalf("the first caller: lead %v, err %v; want the lead", lead, err)
	}
	if leadSlot.left.Load() != 0 {
		t.Error("the lead, which does not wait, left its execution slot")
	}
	type followed struct {
		lead bool
		err  error
	}
	got := make(chan followed, 1)
	followerSlot := &countingSlot{}
	go func() {
		lead, _, err := b.Warm(slot.With(ctx, followerSlot), "k1", lock, time.Minute, ttl)
		got <- followed{lead, err}
	}()
	// The follower waits: it leaves its slot only once told the lead is
	// under way, and has not returned then.
	wait.For(t, time.Minute, "the follower to wait for the lead, without its slot", func() bool { return followerSlot.left.Load() == 1 })
	select {
	case f := <-got:
		t.Fatalf("a follower returned (lead %v, err %v) before the lead's first token", f.lead, f.err)
	default:
	}
	done(ctx, true)
	if f := <-got; f.lead || f.err != nil {
		t.Fatalf("the follower after the lead warmed it: lead %v, err %v; want a follower", f.lead, f.err)
	}
	if l, r := followerSlot.left.Load(), followerSlot.returned.Load(); l != 1 || r != 1 {
		t.Errorf("the follower left its slot %d times and took it back %d times; want once each (waiting holds no slot)", l, r)
	}
	if lead, _, _ := b.Warm(ctx, "k1", lock, time.Minute, ttl); lead {
		t.Error("a caller after the key is warm led again")
	}

	// A lead that failed: the next caller leads.
	lead, done, _ = b.Warm(ctx, "k2", lock, time.Minute, ttl)
	if !lead {
		t.Fatal("the first caller of k2 did not lead")
	}
	done(ctx, false)
	if lead, _, _ := b.Warm(ctx, "k2", lock, time.Minute, ttl); !lead {
		t.Error("after the lead failed, the next caller did not lead")
	}

	// A lead that never says: a follower goes after its wait, all of it,
	// read from the sleeps Warm asked for (a fake clock: none is spent).
	if lead, _, _ := b.Warm(ctx, "k3", lock, time.Minute, ttl); !lead {
		t.Fatal("the first caller of k3 did not lead")
	}
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	l.clock = clk // the follower above has returned: nothing else reads it
	lead, _, err = b.Warm(ctx, "k3", lock, 200*time.Millisecond, ttl)
	if lead || err != nil {
		t.Fatalf("a follower of a silent lead: lead %v, err %v; want a follower sent after its wait", lead, err)
	}
	// Polls back off from 20ms, doubling, the last cut to the wait left.
	want := []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 60 * time.Millisecond}
	if !slices.Equal(clk.slept, want) {
		t.Errorf("a follower of a silent lead slept %v, want %v: its whole wait (200ms), polling", clk.slept, want)
	}
}

// fakeClock is a Limiter's clock that records the sleeps asked of it and
// moves its time on by them at once.
type fakeClock struct {
	mu    sync.Mutex
	t     time.Time
	slept []time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
	return ctx.Err()
}

// countingSlot counts how often a task left its execution slot and took
// it back.
type countingSlot struct{ left, returned atomic.Int32 }

func (s *countingSlot) Leave() { s.left.Add(1) }

func (s *countingSlot) Return(context.Context) error {
	s.returned.Add(1)
	return nil
}
