package rdb_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// TestLease: one holder at a time; only the holder renews or releases (a
// holder that lost the lease cannot free its successor's); a released
// lease is free at once, an abandoned one after its TTL. The TTL is long
// and its lapse is made by the test (PEXPIRE), so a loaded machine's
// pauses cannot expire a lease the test means to hold.
func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const ttl = 30 * time.Second
	a := rdb.NewLease(c, "quorum:test:lease", "proc-a", ttl)
	b := rdb.NewLease(c, "quorum:test:lease", "", ttl)
	if a.Token() == b.Token() || a.Token()[:7] != "proc-a/" {
		t.Fatalf("tokens %q and %q", a.Token(), b.Token())
	}
	if ok, err := a.Acquire(ctx); err != nil || !ok {
		t.Fatalf("a: %v %v", ok, err)
	}
	if ok, err := b.Acquire(ctx); err != nil || ok {
		t.Fatalf("b took a held lease: %v %v", ok, err)
	}
	if ok, err := b.Renew(ctx); err != nil || ok {
		t.Fatalf("b renewed a's lease: %v %v", ok, err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, a.Key()).Result(); err != nil || v != a.Token() {
		t.Fatalf("b's release freed a's lease: %q %v", v, err)
	}
	// Most of the TTL spent: a renewal restores all of it.
	if err := c.PExpire(ctx, a.Key(), time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := a.Renew(ctx); err != nil || !ok {
		t.Fatalf("a's renewal: %v %v", ok, err)
	}
	if left, err := c.PTTL(ctx, a.Key()).Result(); err != nil || left < ttl/2 {
		t.Fatalf("the renewed lease expires in %v (%v), want about %v", left, err, ttl)
	}
	if ok, err := b.Acquire(ctx); err != nil || ok {
		t.Fatalf("b took a renewed lease: %v %v", ok, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Acquire(ctx); err != nil || !ok {
		t.Fatalf("b after a's release: %v %v", ok, err)
	}
	// b is abandoned: its TTL lapses, a gets the lease, and b, late,
	// frees nothing.
	if err := c.PExpire(ctx, b.Key(), time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the abandoned lease to expire", func() bool {
		n, err := c.Exists(ctx, b.Key()).Result()
		return err == nil && n == 0
	})
	if ok, err := a.Acquire(ctx); err != nil || !ok {
		t.Fatalf("a after b's TTL: %v %v", ok, err)
	}
	if ok, err := b.Renew(ctx); err != nil || ok {
		t.Fatalf("b renewed a lease it had lost: %v %v", ok, err)
	}
	_ = b.Release(ctx)
	if v, _ := c.Get(ctx, a.Key()).Result(); v != a.Token() {
		t.Fatalf("b's late release freed a's lease: %q", v)
	}
}

// TestRenewer: a started renewer keeps a lease alive past its TTL; Stop
// returns once its goroutine has ended (no renewal after it); a lease taken
// from under it is reported once and ends it; it can be started again, not
// twice at once. It waits on renewals, not on the clock: a renewal is
// every TTL/3, and the TTL (3 s) leaves a loaded machine seconds of slack.
func TestRenewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const ttl = 3 * time.Second
	l := rdb.NewLease(c, "quorum:test:renewed", "", ttl)
	if ok, err := l.Acquire(ctx); err != nil || !ok {
		t.Fatal(ok, err)
	}
	acquired := time.Now()
	var renewals atomic.Int64
	r := l.Renewer()
	r.AfterRenew = func(context.Context) { renewals.Add(1) }
	lost := make(chan struct{})
	r.OnLost = func() { close(lost) }
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); !errors.Is(err, rdb.ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	// Renewed until the first TTL has passed: the lease outlives it.
	wait.For(t, 60*time.Second, "renewals past the first TTL", func() bool {
		return renewals.Load() >= 4 && time.Since(acquired) > ttl
	})
	if ttlLeft, err := c.PTTL(ctx, l.Key()).Result(); err != nil || ttlLeft <= 0 {
		t.Fatalf("the renewed lease expires in %v (%v) after %d renewals", ttlLeft, err, renewals.Load())
	}
	r.Stop()
	n := renewals.Load()
	// No renewal after Stop: the lease lapses at its TTL (made now).
	if err := c.PExpire(ctx, l.Key(), time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 10*time.Second, "the lease to lapse once its renewer stopped", func() bool {
		ex, err := c.Exists(ctx, l.Key()).Result()
		return err == nil && ex == 0
	})
	if got := renewals.Load(); got != n {
		t.Fatalf("renewed after Stop returned: %d renewals, %d at Stop", got, n)
	}
	r.Stop() // a second Stop does nothing

	// Started again, on a lease another process has taken: lost.
	if err := c.Set(ctx, l.Key(), "someone else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the lost lease was not reported")
	}
	r.Stop()
	if v, _ := c.Get(ctx, l.Key()).Result(); v != "someone else" {
		t.Fatalf("the other holder's lease was touched: %q", v)
	}

	// A renewer ends with its context too; Stop then returns at once.
	ctx2, cancel := context.WithCancel(ctx)
	r2 := &rdb.Renewer{Renew: func(context.Context) (bool, error) { return true, nil }, Every: time.Millisecond}
	if err := r2.Start(ctx2); err != nil {
		t.Fatal(err)
	}
	cancel()
	r2.Stop()
	if err := (&rdb.Renewer{}).Start(ctx); err == nil {
		t.Fatal("a renewer without Renew started")
	}
}
