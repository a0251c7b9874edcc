package rdb_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestLease: one holder at a time; only the holder renews or releases (a
// holder that lost the lease cannot free its successor's); a released
// lease is free at once, an abandoned one after its TTL.
func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	a := rdb.NewLease(c, "quorum:test:lease", "proc-a", 300*time.Millisecond)
	b := rdb.NewLease(c, "quorum:test:lease", "", 300*time.Millisecond)
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
	time.Sleep(200 * time.Millisecond)
	if ok, err := a.Renew(ctx); err != nil || !ok {
		t.Fatalf("a's renewal: %v %v", ok, err)
	}
	time.Sleep(200 * time.Millisecond) // past the first TTL, within the renewed one
	if ok, err := b.Acquire(ctx); err != nil || ok {
		t.Fatalf("b took a renewed lease: %v %v", ok, err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.Acquire(ctx); err != nil || !ok {
		t.Fatalf("b after a's release: %v %v", ok, err)
	}
	// b is abandoned: a gets it after the TTL, and b, late, frees nothing.
	time.Sleep(400 * time.Millisecond)
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

// TestRenewer: a started renewer keeps a lease alive well past its TTL;
// Stop returns once its goroutine has ended (no renewal after it); a lease
// taken from under it is reported once and ends it; it can be started
// again, not twice at once.
func TestRenewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	l := rdb.NewLease(c, "quorum:test:renewed", "", 150*time.Millisecond)
	if ok, err := l.Acquire(ctx); err != nil || !ok {
		t.Fatal(ok, err)
	}
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
	time.Sleep(500 * time.Millisecond)
	if ttl, err := c.PTTL(ctx, l.Key()).Result(); err != nil || ttl <= 0 {
		t.Fatalf("the renewed lease expires in %v (%v)", ttl, err)
	}
	r.Stop()
	n := renewals.Load()
	if n < 3 {
		t.Fatalf("%d renewals in 500ms at every 50ms", n)
	}
	time.Sleep(200 * time.Millisecond)
	if renewals.Load() != n {
		t.Fatal("renewed after Stop returned")
	}
	if ex, _ := c.Exists(ctx, l.Key()).Result(); ex != 0 {
		t.Fatal("the lease outlived its TTL once its renewer stopped")
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
	case <-time.After(2 * time.Second):
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
