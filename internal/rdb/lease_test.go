package rdb_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// TestLease: one holder at a time; only the holder renews or releases (a
// holder that lost the lease cannot free its successor's); a released
// lease is free at once, an abandoned one after its TTL. The TTL is an
// hour and its lapse is made by the test (PEXPIRE, PEXPIREAT), so a loaded
// machine's pauses can neither expire a lease the test means to hold nor
// keep one it means to lapse.
func TestLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const ttl = time.Hour
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
	// b is abandoned: its TTL lapses (an expiry in the past: Redis
	// expires the key at once), a gets the lease, and b, late, frees
	// nothing.
	lapse(t, c, b.Key())
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

// lapse ends key's TTL now: an expiry in the past makes Redis expire the
// key at once, with no wait on its clock.
func lapse(t *testing.T, c redis.Cmdable, key string) {
	t.Helper()
	ctx := context.Background()
	if err := c.PExpireAt(ctx, key, time.UnixMilli(1)).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("%s still exists (%d, %v) after its expiry passed", key, n, err)
	}
}

// bubbleHold is a hold whose expiry is kept in a synctest bubble's clock,
// renewed as a Lease is in Redis: extended by ttl if it has not expired.
type bubbleHold struct {
	mu      sync.Mutex
	ttl     time.Duration
	expires time.Time
	taken   bool // another holder has it
	lapsed  bool // it expired before a renewal came
	renewed int
}

func (h *bubbleHold) renew(context.Context) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.taken || !now.Before(h.expires) {
		h.lapsed = h.lapsed || !h.taken
		return false, nil
	}
	h.expires = now.Add(h.ttl)
	h.renewed++
	return true, nil
}

func (h *bubbleHold) state() (renewed int, lapsed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewed, h.lapsed
}

// TestRenewerKeepsTheHold: a renewer renews every third of the TTL, so its
// hold outlives the TTL many times over; Stop returns once its goroutine
// has ended (no renewal after it, and the hold lapses); a hold taken from
// under it is reported once and ends it; it can be started again, not
// twice at once; it ends with its context. In a synctest bubble: the
// renewals are counted against the bubble's clock, exactly, whatever the
// machine's speed. TestRenewer runs one against Redis.
func TestRenewerKeepsTheHold(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const ttl = 3 * time.Second
		h := &bubbleHold{ttl: ttl, expires: time.Now().Add(ttl)}
		var after atomic.Int64
		lost := make(chan struct{}, 2)
		r := &rdb.Renewer{Renew: h.renew, Every: ttl / 3, Timeout: ttl / 3,
			AfterRenew: func(context.Context) { after.Add(1) },
			OnLost:     func() { lost <- struct{}{} }}
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(ctx); !errors.Is(err, rdb.ErrStarted) {
			t.Fatalf("second Start: %v", err)
		}
		// Ten TTLs (and a sixth, clear of a tick): a renewal every third
		// of one, 30 in all, none late.
		time.Sleep(10*ttl + ttl/6)
		synctest.Wait()
		if n, lapsed := h.state(); n != 30 || lapsed || after.Load() != 30 {
			t.Fatalf("after 10 TTLs: %d renewals (%d reported), lapsed %v; want 30, the hold kept", n, after.Load(), lapsed)
		}
		r.Stop()
		n, _ := h.state()
		// No renewal after Stop: the hold lapses at its TTL.
		time.Sleep(10 * ttl)
		synctest.Wait()
		if got, _ := h.state(); got != n {
			t.Fatalf("renewed after Stop returned: %d renewals, %d at Stop", got, n)
		}
		if ok, _ := h.renew(ctx); ok {
			t.Fatal("the hold was still held 10 TTLs after its renewer stopped")
		}
		r.Stop() // a second Stop does nothing

		// Started again, on a hold another has taken: lost, once.
		h.mu.Lock()
		h.taken = true
		h.mu.Unlock()
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl)
		synctest.Wait()
		if len(lost) != 1 {
			t.Fatalf("the lost hold was reported %d times, want once", len(lost))
		}
		select {
		case <-r.Done():
		default:
			t.Fatal("the renewer went on after its hold was lost")
		}
		r.Stop()

		// A renewer ends with its context too; Stop then returns at once.
		ctx2, cancel := context.WithCancel(ctx)
		r2 := &rdb.Renewer{Renew: func(context.Context) (bool, error) { return true, nil }, Every: time.Millisecond}
		if err := r2.Start(ctx2); err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		select {
		case <-r2.Done():
		default:
			t.Fatal("a renewer went on after its context ended")
		}
		r2.Stop()
		if err := (&rdb.Renewer{}).Start(ctx); err == nil {
			t.Fatal("a renewer without Renew started")
		}
	})
}

// TestRenewerGivesUpAnUnrenewedHold: with Expire, a renewer whose
// renewals fail (Redis unreachable: a partition) reports the hold lost
// once it has gone Expire without a successful renewal, counted from the
// last one, and ends; renewals that fail for less than that lose nothing,
// and neither does a renewer without Expire. In a synctest bubble: the
// moments are the bubble clock's, whatever the machine's speed.
func TestRenewerGivesUpAnUnrenewedHold(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	down := errors.New("dial tcp: connection refused")
	for _, tc := range []struct {
		name   string
		expire time.Duration
		// cut is when renewals start failing, heal when they succeed
		// again (0: never).
		cut, heal time.Duration
		lostAt    time.Duration // 0: never lost within 10 TTLs
	}{
		// Renewed at 1, 2, 3 s; failing from 3.5 s: lost at 3 s + TTL.
		{name: "cut for good", expire: ttl, cut: ttl + ttl/6, lostAt: 2 * ttl},
		// Failing from 3.5 s to 4.5 s: the renewal at 4 s fails, the one
		// at 5 s succeeds, before the hold's end at 6 s.
		{name: "cut shorter than the TTL", expire: ttl, cut: ttl + ttl/6, heal: ttl + ttl/2},
		{name: "no Expire", cut: ttl + ttl/6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var lostAt atomic.Int64
				r := &rdb.Renewer{Every: ttl / 3, Timeout: ttl / 3, Expire: tc.expire,
					Renew: func(context.Context) (bool, error) {
						if at := time.Since(start); at >= tc.cut && (tc.heal == 0 || at < tc.heal) {
							return false, down
						}
						return true, nil
					},
					OnLost: func() { lostAt.Store(int64(time.Since(start))) }}
				if err := r.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				defer r.Stop()
				time.Sleep(10 * ttl)
				synctest.Wait()
				if got := time.Duration(lostAt.Load()); got != tc.lostAt {
					t.Fatalf("the hold was lost at %v, want %v (0: never)", got, tc.lostAt)
				}
				select {
				case <-r.Done():
					if tc.lostAt == 0 {
						t.Fatal("the renewer ended with its hold kept")
					}
				default:
					if tc.lostAt != 0 {
						t.Fatal("the renewer went on after its hold was lost")
					}
				}
			})
		})
	}
}

// TestRenewer: a Lease's renewer renews it in Redis (a third of its TTL
// apart), and reports a lease another process has taken. Each is waited
// for as an event (a renewal, a lost report); the lease's TTL is an hour
// and its renewer ticks every 10ms here, so no renewal can come too late
// for it. The renewals' timing, and Stop, are TestRenewerKeepsTheHold's.
func TestRenewer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const ttl = time.Hour
	l := rdb.NewLease(c, "quorum:test:renewed", "", ttl)
	if ok, err := l.Acquire(ctx); err != nil || !ok {
		t.Fatal(ok, err)
	}
	r := l.Renewer()
	if r.Every != ttl/3 || r.Timeout != ttl/3 {
		t.Errorf("a lease's renewer renews every %v, each call bounded by %v; want a third of the TTL (%v) both", r.Every, r.Timeout, ttl/3)
	}
	r.Every = 10 * time.Millisecond
	renewed := make(chan struct{}, 1)
	r.AfterRenew = func(context.Context) {
		select {
		case renewed <- struct{}{}:
		default:
		}
	}
	lost := make(chan struct{}, 1)
	r.OnLost = func() { lost <- struct{}{} }
	// Most of the TTL spent: a renewal gives all of it back, which the
	// TTL alone, only ever falling, could not.
	if err := c.PExpire(ctx, l.Key(), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wait.Recv(t, time.Minute, "the first renewal", renewed)
	r.Stop()
	if left, err := c.PTTL(ctx, l.Key()).Result(); err != nil || left <= time.Minute {
		t.Fatalf("after a renewal the lease expires in %v (%v), want more than the minute it had: its TTL back", left, err)
	}
	if v, err := c.Get(ctx, l.Key()).Result(); err != nil || v != l.Token() {
		t.Fatalf("after a renewal the lease holds %q (%v), want its token", v, err)
	}

	// Started again, on a lease another process has taken: lost.
	if err := c.Set(ctx, l.Key(), "someone else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wait.Recv(t, time.Minute, "the lost lease's report", lost)
	r.Stop()
	if v, _ := c.Get(ctx, l.Key()).Result(); v != "someone else" {
		t.Fatalf("the other holder's lease was touched: %q", v)
	}
}

// TestRenewOrRetake: a lease still ours is renewed; one Redis lost (the
// key gone, as after a failover to a replica that had not seen it) is
// taken back under the same token unless the work is done meanwhile; one
// another holder took is not.
func TestRenewOrRetake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const key, done, task = "quorum:test:retake", "quorum:test:retake:done", "t1"
	for _, tc := range []struct {
		name        string
		before      func()
		ok, retaken bool
		holder      string // "ours": the lease's token; "": none
	}{
		{"still ours: renewed", func() {}, true, false, "ours"},
		{"lost to a failover: taken back", func() { c.Del(ctx, key) }, true, true, "ours"},
		{"lost, the work done meanwhile: left free", func() { c.Del(ctx, key); c.SAdd(ctx, done, task) }, false, false, ""},
		{"taken by another: not ours", func() { c.Set(ctx, key, "other/1", time.Hour) }, false, false, "other/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Del(ctx, key, done)
			l := rdb.NewLease(c, key, "proc", time.Hour)
			if ok, err := l.Acquire(ctx); err != nil || !ok {
				t.Fatalf("acquire: %v %v", ok, err)
			}
			tc.before()
			ok, retaken, err := rdb.RenewOrRetake(ctx, c, l, done, task)
			if err != nil || ok != tc.ok || retaken != tc.retaken {
				t.Fatalf("RenewOrRetake: ok %v retaken %v (%v), want %v %v", ok, retaken, err, tc.ok, tc.retaken)
			}
			v, err := c.Get(ctx, key).Result()
			want := tc.holder
			if want == "ours" {
				want = l.Token()
			}
			if errors.Is(err, redis.Nil) {
				v = ""
			}
			if v != want {
				t.Errorf("the key holds %q, want %q", v, want)
			}
			if want != "" {
				if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 {
					t.Errorf("the key has no expiry (%v)", ttl)
				}
			}
		})
	}
}

// TestTaskLeaseTTLFor: a task lease outlasts the configured failover
// (twice it: renewed every third, it survives one begun just after a
// renewal), never under the default.
func TestTaskLeaseTTLFor(t *testing.T) {
	for _, tc := range []struct{ failover, want time.Duration }{
		{0, rdb.TaskLeaseTTL}, {5 * time.Second, rdb.TaskLeaseTTL}, {30 * time.Second, time.Minute},
	} {
		if got := rdb.TaskLeaseTTLFor(tc.failover); got != tc.want {
			t.Errorf("TaskLeaseTTLFor(%v) = %v, want %v", tc.failover, got, tc.want)
		}
	}
}

// TestLeaseTakeOver: a lease is taken from the holder read from its key,
// and from no one else: if another took it meanwhile, nothing changes.
// Owner reads back the owner a token names.
func TestLeaseTakeOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const key, ttl = "quorum:test:takeover", time.Hour
	dead := rdb.NewLease(c, key, "gen#old", ttl)
	if ok, err := dead.Acquire(ctx); err != nil || !ok {
		t.Fatalf("the first holder: %v %v", ok, err)
	}
	next := rdb.NewLease(c, key, "gen#new", ttl)
	holder, err := next.Holder(ctx)
	if err != nil || rdb.Owner(holder) != "gen#old" {
		t.Fatalf("the holder read: %q (owner %q), %v; want gen#old's token", holder, rdb.Owner(holder), err)
	}
	if ok, err := next.TakeOver(ctx, "gen#old/not-its-token"); err != nil || ok {
		t.Fatalf("taken from a token that does not hold it: %v %v", ok, err)
	}
	if ok, err := next.TakeOver(ctx, holder); err != nil || !ok {
		t.Fatalf("taken from its holder: %v %v", ok, err)
	}
	if ok, err := next.Renew(ctx); err != nil || !ok {
		t.Errorf("the new holder cannot renew: %v %v", ok, err)
	}
	if ok, err := dead.Renew(ctx); err != nil || ok {
		t.Errorf("the old holder still renews: %v %v", ok, err)
	}
	if pttl := c.PTTL(ctx, key).Val(); pttl <= 0 || pttl > ttl {
		t.Errorf("the taken lease expires in %v, want within its TTL %v", pttl, ttl)
	}
	if got, err := rdb.NewLease(c, "quorum:test:none", "x", ttl).Holder(ctx); err != nil || got != "" {
		t.Errorf("the holder of a free lease: %q %v", got, err)
	}
}
