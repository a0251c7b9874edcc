package ratelimit

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

func isOpen(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestLineHandsTheTurnOn(t *testing.T) {
	var ls lines
	a, leaveA := ls.join("k")
	b, leaveB := ls.join("k")
	c, leaveC := ls.join("k")
	other, leaveOther := ls.join("other")
	if !isOpen(a) || isOpen(b) || isOpen(c) {
		t.Fatalf("turns after three joins: a %v, b %v, c %v; want only the first's", isOpen(a), isOpen(b), isOpen(c))
	}
	if !isOpen(other) {
		t.Fatal("the first caller of another key waits behind k's line")
	}
	leaveB() // a caller behind the head gives up
	if isOpen(c) {
		t.Fatal("c's turn came while the head a still holds it")
	}
	leaveA()
	leaveA() // leaving twice hands nothing on twice
	if !isOpen(c) {
		t.Fatal("the head left and c, next in line, did not get its turn")
	}
	leaveC()
	leaveOther()
	if len(ls.m) != 0 {
		t.Errorf("%d lines left after everyone left, want none", len(ls.m))
	}
}

func TestLineWaitEndsWithItsContext(t *testing.T) {
	var ls lines
	leave, err := ls.wait(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := ls.wait(ctx, "k"); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose context ended: err %v, want context.Canceled", err)
	}
	leave()
	if len(ls.m) != 0 {
		t.Errorf("%d lines left, want none: the cancelled waiter did not leave", len(ls.m))
	}
}

// evalCalls is how many scripts redis-server ran (EVALSHA and EVAL).
func evalCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info, err := srv.Client(t).Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_eval(?:sha)?:calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		c, _ := strconv.Atoi(m[1])
		n += c
	}
	return n
}

// scriptCalls runs each in n goroutines at once and returns how many
// scripts redis-server ran meanwhile.
func scriptCalls(t *testing.T, srv *redistest.Server, n int, each func()) int {
	t.Helper()
	before := evalCalls(t, srv)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			each()
		}()
	}
	wg.Wait()
	return evalCalls(t, srv) - before
}

// TestWaitingCallersAskRedisOncePerAdmission: 40 callers of one process
// wait on a saturated quota (100 a second, burst 1). Told "not before T",
// they used to all wake at T and all but one ask again, about one Redis call
// per waiting caller per admission (~800 here); in a line only the head
// asks. A slow machine can only make the head ask less often: it sleeps
// the wait it was told, then asks.
func TestWaitingCallersAskRedisOncePerAdmission(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t), Reserve: -1})
	rate := PerSecond(100, 1)
	ctx := context.Background()
	const callers = 40
	calls := scriptCalls(t, srv, callers, func() {
		if _, err := l.Wait(ctx, "g", Claim{Key: "k", Rate: rate, Units: 1}); err != nil {
			t.Error(err)
		}
	})
	t.Logf("%d callers admitted with %d reservation calls", callers, calls)
	if calls > 3*callers {
		t.Errorf("%d reservation calls for %d admissions, want at most %d: waiting callers poll Redis", calls, callers, 3*callers)
	}
}

// lineLen is how many callers wait in key's line.
func (ls *lines) lineLen(key string) int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if q := ls.m[key]; q != nil {
		return q.Len()
	}
	return 0
}

// TestSemaphoreWaitersAskRedisOncePerSlot: 60 callers of one process share
// 2 warehouse slots. Polling with backoff, every waiter asked Redis several
// times a slot (569 calls when each held its slot 20 ms). Now they wait in
// a line, and only its head asks (TestLineHandsTheTurnOn): the first two
// holders keep their slots until the other 58 callers are all in it. A
// release in this process wakes the head, so the slots are taken with
// about one call each. The head's poll for other processes' releases is
// lengthened past the test: the count is the calls the releases cause,
// not the polls a slow machine's longer holds would add.
func TestSemaphoreWaitersAskRedisOncePerSlot(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	sem, err := l.Semaphore("wh", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	sem.maxPoll = time.Hour
	ctx := context.Background()
	const callers = 60
	before := evalCalls(t, srv)
	var taken atomic.Int32
	allWaiting := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := sem.Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if taken.Add(1) <= 2 {
				<-allWaiting
			}
			if err := p.Release(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wait.For(t, time.Minute, "the callers without a slot to wait in one line", func() bool {
		return l.lines.lineLen(lineKey(ctx, "semaphore\x00"+sem.key)) == callers-2
	})
	close(allWaiting)
	wg.Wait()
	calls := evalCalls(t, srv) - before
	t.Logf("%d callers took a slot with %d acquire calls", callers, calls)
	if calls > 3*callers {
		t.Errorf("%d acquire calls for %d slots taken, want at most %d: waiting callers poll Redis", calls, callers, 3*callers)
	}
}
