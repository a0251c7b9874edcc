package ratelimit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/priority"
)

// The helper processes of the multi-process tests are this test binary run
// again with QUORUM_RL_HELPER set.
func TestMain(m *testing.M) {
	switch os.Getenv("QUORUM_RL_HELPER") {
	case "":
		os.Exit(m.Run())
	case "rate":
		helperRate()
	case "hold":
		helperHold()
	}
	os.Exit(0)
}

func helperLimiter() *Limiter {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("QUORUM_RL_REDIS"), ContextTimeoutEnabled: true, PoolSize: 32})
	l, err := New(Config{Client: rdb})
	if err != nil {
		panic(err)
	}
	return l
}

// helperRate drives the 600 requests/min budget from 16 goroutines and
// prints the time of every admitted request.
func helperRate() {
	l := helperLimiter()
	b := &LLMBudget{Limiter: l, Scope: "test", Default: LLMQuota{RequestsPerMinute: 600, RequestBurst: 10}}
	dur, _ := time.ParseDuration(os.Getenv("QUORUM_RL_DURATION"))
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	var times []int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := b.Acquire(ctx, llm.Bucket{Model: "m"}, 0); err != nil {
					return
				}
				mu.Lock()
				times = append(times, time.Now().UnixNano())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	w := bufio.NewWriter(os.Stdout)
	for _, t := range times {
		fmt.Fprintln(w, t)
	}
	w.Flush()
}

// helperHold takes every slot of a semaphore, says so, and keeps renewing
// until it is killed.
func helperHold() {
	l := helperLimiter()
	n, _ := strconv.Atoi(os.Getenv("QUORUM_RL_SLOTS"))
	sem, err := l.Semaphore("wh", n, 2*time.Second)
	if err != nil {
		panic(err)
	}
	for i := 0; i < n; i++ {
		if _, err := sem.Acquire(context.Background()); err != nil {
			panic(err)
		}
	}
	fmt.Println("held")
	select {}
}

func helper(t *testing.T, srv *redistest.Server, mode string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"QUORUM_RL_HELPER=" + mode, "QUORUM_RL_REDIS=" + srv.Addr}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// maxInWindow is the largest number of sorted times within any window of
// length w.
func maxInWindow(times []int64, w time.Duration) int {
	best, j := 0, 0
	for i := range times {
		for times[i]-times[j] >= int64(w) {
			j++
		}
		if n := i - j + 1; n > best {
			best = n
		}
	}
	return best
}

// TestClusterRateFromFourProcesses: 4 OS processes x 16 goroutines share a
// 600 requests/min limit (burst 10) for 20 s. No window may hold more than
// the limit plus the burst, and the run must use at least 90% of the limit.
func TestClusterRateFromFourProcesses(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const procs, dur = 4, 20 * time.Second
	var all []int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := 0; p < procs; p++ {
		cmd := helper(t, srv, "rate", "QUORUM_RL_DURATION="+dur.String())
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			var mine []int64
			for sc.Scan() {
				n, err := strconv.ParseInt(strings.TrimSpace(sc.Text()), 10, 64)
				if err == nil {
					mine = append(mine, n)
				}
			}
			cmd.Wait()
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) == 0 {
		t.Fatal("no requests were admitted")
	}
	const rate, burst = 10.0, 10 // per second
	span := time.Duration(all[len(all)-1] - all[0])
	// A time is recorded just after its reservation's start, a few
	// milliseconds late at most, which can move one extra request into a
	// window; hence the +1.
	for _, w := range []time.Duration{time.Second, 5 * time.Second, 20 * time.Second} {
		limit := int(rate*w.Seconds()) + burst + 1
		if got := maxInWindow(all, w); got > limit {
			t.Errorf("%d requests within %v, limit plus burst is %d", got, w, limit-1)
		}
	}
	used := float64(len(all)) / (rate * dur.Seconds())
	t.Logf("%d requests from %d processes in %v: %.1f%% of the limit", len(all), procs, span.Round(time.Millisecond), 100*used)
	if used < 0.9 {
		t.Errorf("used %.1f%% of the limit, want at least 90%%", 100*used)
	}
}

// TestKilledHolderReturnsSlots: a process holding every slot is killed with
// SIGKILL; its slots come back within the lease time, not before (a live
// holder renews them).
func TestKilledHolderReturnsSlots(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	const slots, lease = 3, 2 * time.Second
	sem, err := l.Semaphore("wh", slots, lease)
	if err != nil {
		t.Fatal(err)
	}
	cmd := helper(t, srv, "hold", "QUORUM_RL_SLOTS="+strconv.Itoa(slots))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	// Past the lease time the live holder still has every slot. The
	// scenario is the time passing: a lease and a half of it.
	time.Sleep(lease + lease/2)
	ctx := context.Background()
	if n, _ := sem.Held(ctx); n != slots {
		t.Fatalf("%d slots held after %v with a live holder, want %d (renewal failed)", n, lease+lease/2, slots)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var permits []*Permit
	for i := 0; i < slots; i++ {
		actx, cancel := context.WithTimeout(ctx, 2*lease)
		p, err := sem.Acquire(actx)
		cancel()
		if err != nil {
			t.Fatalf("slot %d not back after %v: %v", i, time.Since(killed), err)
		}
		permits = append(permits, p)
	}
	back := time.Since(killed)
	t.Logf("all %d slots back %v after SIGKILL (lease %v)", slots, back.Round(time.Millisecond), lease)
	if back > lease+500*time.Millisecond {
		t.Errorf("slots came back after %v, want within the lease %v", back, lease)
	}
	for _, p := range permits {
		p.Release(ctx)
	}
}

func TestSemaphoreBoundsConcurrency(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	gate, err := l.WarehouseGate("sf", WarehouseQuota{MaxConcurrent: 2, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var inFlight, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := gate.Acquire(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			n := inFlight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond) // the scenario: each holder keeps its slot a while, so the callers contend
			inFlight.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want exactly 2", p)
	}
}

func TestCancelledWaitRefunds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	r := PerSecond(2, 1) // one start every 500ms
	ctx := context.Background()
	if _, err := l.Wait(ctx, "g", Claim{Key: "k", Rate: r, Units: 1}); err != nil {
		t.Fatal(err)
	}
	// Three callers give up before their turn; their reservations must not
	// push the next caller back by 1.5 s.
	for i := 0; i < 3; i++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		_, err := l.Wait(cctx, "g", Claim{Key: "k", Rate: r, Units: 1})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
	}
	waited, err := l.Wait(ctx, "g", Claim{Key: "k", Rate: r, Units: 1})
	if err != nil {
		t.Fatal(err)
	}
	if waited > 600*time.Millisecond {
		t.Errorf("waited %v after refunds, want about 500ms", waited)
	}
}

func TestCooldownDefersEveryone(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	b := &LLMBudget{Limiter: l, Scope: "p", Default: LLMQuota{RequestsPerMinute: 6000}}
	ctx := context.Background()
	if err := b.Cooldown(ctx, llm.Bucket{Model: "m"}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	_ = b.Cooldown(ctx, llm.Bucket{Model: "m"}, 10*time.Millisecond) // shorter: ignored
	start := time.Now()
	if _, err := b.Acquire(ctx, llm.Bucket{Model: "m"}, 10); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Errorf("acquired after %v during a 300ms cooldown", d)
	}
	// Another model is not affected: admitted at once (asked without
	// waiting, so a slow machine cannot make it look deferred).
	other := llm.Bucket{Model: "other"}
	if wait, ok, err := l.Try(ctx, b.group(other), b.claims(other, 10)...); err != nil || !ok {
		t.Errorf("another model during m's cooldown: admitted %v, told to wait %v (err %v); want admitted at once", ok, wait, err)
	}
}

func TestTokenSettleRefundsEstimate(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	// 6000 tokens/min = 100/s, with a burst of 1000 tokens.
	b := &LLMBudget{Limiter: l, Scope: "p", Default: LLMQuota{TokensPerMinute: 6000, TokenBurst: 1000}}
	ctx := context.Background()
	settle, err := b.Acquire(ctx, llm.Bucket{Model: "m"}, 1000) // admitted at once, on the burst
	if err != nil {
		t.Fatal(err)
	}
	settle(ctx, 100) // the call really used 100 tokens
	start := time.Now()
	if _, err := b.Acquire(ctx, llm.Bucket{Model: "m"}, 1000); err != nil {
		t.Fatal(err)
	}
	// Without the refund of 900 tokens this call would wait about 10 s;
	// with it, about 1 s.
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("waited %v after settling; the estimate was not refunded", d)
	}
}

func TestRateValidation(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	if _, err := l.Wait(context.Background(), "g", Claim{Key: "k", Rate: Rate{Limit: 0, Period: time.Second, Burst: 1}, Units: 1}); err == nil {
		t.Error("zero limit accepted")
	}
	if _, err := l.Semaphore("s", 0, time.Second); err == nil {
		t.Error("zero capacity accepted")
	}
	if _, err := New(Config{}); err == nil {
		t.Error("no client accepted")
	}
}

func TestByteBudget(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	b := &ByteBudget{Limiter: l, Limit: 1000}
	ctx := context.Background()
	if err := b.Spend(ctx, "r1", 600); err != nil {
		t.Fatal(err)
	}
	if err := b.Spend(ctx, "r1", 500); err == nil || !strings.Contains(err.Error(), "600 already scanned") {
		t.Errorf("over budget: %v", err)
	}
	if err := b.Spend(ctx, "r1", 400); err != nil {
		t.Errorf("a refused spend must not count: %v", err)
	}
	if err := b.Spend(ctx, "r2", 1000); err != nil {
		t.Errorf("budgets are per run: %v", err)
	}
}

// BenchmarkLimiterAcquire is one reservation of a request and its tokens
// (one Lua call to a real redis-server), with a quota high enough never to
// wait.
func BenchmarkLimiterAcquire(b *testing.B) {
	srv := redistest.Start(b)
	l, _ := New(Config{Client: srv.Client(b)})
	budget := &LLMBudget{Limiter: l, Scope: "bench", Default: LLMQuota{RequestsPerMinute: 1e9, TokensPerMinute: 1e12, RequestBurst: 1e9, TokenBurst: 1e12}}
	ctx := context.Background()
	for b.Loop() {
		settle, err := budget.Acquire(ctx, llm.Bucket{Model: "m"}, 2000)
		if err != nil {
			b.Fatal(err)
		}
		settle(ctx, 1500)
	}
}

// TestBatchLeavesTheReserveToQuestions: batch work that drains a quota
// stops short of the reserved part of its burst; an interactive claim is
// admitted at once from it, while the next batch claim must wait.
func TestBatchLeavesTheReserveToQuestions(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, err := New(Config{Client: srv.Client(t), Reserve: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claim := Claim{Key: "llm:req", Rate: PerMinute(6, 8), Units: 1} // one per 10 s, burst 8
	batch := 0
	for {
		_, ok, err := l.reserve(ctx, "m", []Claim{claim})
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		batch++
	}
	if batch != 6 {
		t.Errorf("batch took %d of the burst of 8, want 6 (a quarter kept back)", batch)
	}
	ictx := priority.Interactive(ctx)
	for i := range 2 {
		if _, ok, err := l.reserve(ictx, "m", []Claim{claim}); err != nil || !ok {
			t.Fatalf("interactive claim %d waited (%v) although the reserve was free", i+1, err)
		}
	}
	if wait, ok, _ := l.reserve(ictx, "m", []Claim{claim}); ok || wait <= 0 {
		t.Errorf("a third interactive claim was admitted past the whole burst")
	}
	if _, err := New(Config{Client: srv.Client(t), Reserve: 1}); err == nil {
		t.Error("a reserve of the whole burst was accepted")
	}
}
