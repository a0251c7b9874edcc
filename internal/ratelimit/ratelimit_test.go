package ratelimit

import (
	"bufio"
	"context"
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
	"github.com/quorumsql/quorum/internal/testutil/wait"
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
	lease, _ := time.ParseDuration(os.Getenv("QUORUM_RL_LEASE"))
	sem, err := l.Semaphore("wh", n, lease)
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

// slowExperiment skips a timing experiment, whose figures depend on the
// machine's speed, unless QUORUM_SLOW is set (make slow sets it).
func slowExperiment(t *testing.T) {
	t.Helper()
	if os.Getenv("QUORUM_SLOW") == "" {
		t.Skip("timing experiment: make slow runs it (QUORUM_SLOW=1)")
	}
}

// TestClusterAdmitsTheBurstOnly: four limiters, each with its own Redis
// client and line (all four processes would share is Redis), drive one
// quota from 16 goroutines each, asking until they are refused. The quota
// refills once a day, so the test's own duration adds nothing: the cluster
// admits exactly the burst, however the calls interleave, and every caller
// refused is told to wait for the next emission, at most a day. This is
// the count that TestClusterRateFromFourProcesses (make slow) measures
// over time.
func TestClusterAdmitsTheBurstOnly(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const procs, goroutines, burst = 4, 16, 10
	rate := Rate{Limit: 1, Period: 24 * time.Hour, Burst: burst}
	claim := Claim{Key: "llm:test:m:rpm", Rate: rate, Units: 1}
	ctx := context.Background()
	var admitted atomic.Int32
	waits := make(chan time.Duration, procs*goroutines)
	var wg sync.WaitGroup
	for range procs {
		l, err := New(Config{Client: srv.Client(t), Reserve: -1})
		if err != nil {
			t.Fatal(err)
		}
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					told, ok, err := l.Try(ctx, "test:m", claim)
					if err != nil {
						t.Error(err)
						return
					}
					if !ok {
						waits <- told
						return
					}
					admitted.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	close(waits)
	if n := admitted.Load(); n != burst {
		t.Errorf("%d callers in %d processes admitted %d calls on an idle quota, want its burst, %d", procs*goroutines, procs, n, burst)
	}
	emission := rate.Period / time.Duration(rate.Limit)
	for w := range waits {
		if w <= 0 || w > emission {
			t.Errorf("a refused caller was told to wait %v, want the time to the next emission, in (0, %v]", w, emission)
		}
	}
}

// TestClusterRateFromFourProcesses: 4 OS processes x 16 goroutines share a
// 600 requests/min limit (burst 10) for 20 s. No window may hold more than
// the limit plus the burst, and the run must use at least 90% of the limit.
// A timing experiment (the times are read after each admission, and the
// share used is the machine's speed): make slow runs it; the default run
// checks the cluster-wide count in TestClusterAdmitsTheBurstOnly.
func TestClusterRateFromFourProcesses(t *testing.T) {
	slowExperiment(t)
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

// slotExpiries reads the semaphore's leases (token: expiry in Redis
// milliseconds) and Redis's time, in one transaction.
func slotExpiries(t *testing.T, c redis.Cmdable, key string) (now int64, leases map[string]int64) {
	t.Helper()
	ctx := context.Background()
	var tm *redis.TimeCmd
	var zs *redis.ZSliceCmd
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		tm = p.Time(ctx)
		zs = p.ZRangeWithScores(ctx, key, 0, -1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	leases = map[string]int64{}
	for _, z := range zs.Val() {
		leases[z.Member.(string)] = int64(z.Score)
	}
	return tm.Val().UnixMilli(), leases
}

// TestKilledHolderReturnsSlots: a process holding every slot is killed with
// SIGKILL; its slots come back within the lease time, not before (a live
// holder renews them). Both are read from the leases' expiries in Redis,
// not from how long the test took: while the holder lives it moves every
// expiry on; once it is killed, every expiry is at most a lease away, and
// the slots are then taken back (waited for as an event).
func TestKilledHolderReturnsSlots(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	l, _ := New(Config{Client: c})
	const slots, lease = 3, 3 * time.Second
	sem, err := l.Semaphore("wh", slots, lease)
	if err != nil {
		t.Fatal(err)
	}
	cmd := helper(t, srv, "hold", "QUORUM_RL_SLOTS="+strconv.Itoa(slots), "QUORUM_RL_LEASE="+lease.String())
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	// The live holder renews: every slot's expiry moves past the one it
	// was taken with, so it outlives its first lease.
	_, first := slotExpiries(t, c, sem.key)
	if len(first) != slots {
		t.Fatalf("%d leases after the helper took every slot, want %d", len(first), slots)
	}
	wait.For(t, time.Minute, "the live holder to renew every slot", func() bool {
		_, now := slotExpiries(t, c, sem.key)
		for tok, exp := range first {
			if now[tok] <= exp {
				return false
			}
		}
		return true
	})
	ctx := context.Background()
	if n, _ := sem.Held(ctx); n != slots {
		t.Fatalf("%d slots held after their renewal by a live holder, want %d", n, slots)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // dead: nothing renews any more
	now, leases := slotExpiries(t, c, sem.key)
	for tok, exp := range leases {
		if left := time.Duration(exp-now) * time.Millisecond; left > lease {
			t.Errorf("after SIGKILL, slot %s expires in %v, want within the lease %v", tok, left, lease)
		}
	}
	var permits []*Permit
	for i := 0; i < slots; i++ {
		// A failure's bound, far above the lease: the slot is waited for.
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		p, err := sem.Acquire(actx)
		cancel()
		if err != nil {
			t.Fatalf("slot %d of a killed holder not back, its lease ending within %v: %v", i, lease, err)
		}
		permits = append(permits, p)
	}
	for _, p := range permits {
		p.Release(ctx)
	}
}

// TestSemaphoreBoundsConcurrency: 12 callers share 2 slots; at most 2 hold
// one at once, and 2 do (the first holder keeps its slot until a second
// caller holds one: an event, not a hold of some milliseconds that a slow
// machine could outlast).
func TestSemaphoreBoundsConcurrency(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	gate, err := l.WarehouseGate("sf", WarehouseQuota{MaxConcurrent: 2, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var inFlight, peak atomic.Int32
	second := make(chan struct{})
	var once sync.Once
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
			if n >= 2 {
				once.Do(func() { close(second) })
			}
			// Hold until two callers have held a slot at once.
			select {
			case <-second:
			case <-time.After(time.Minute): // a failure's bound
				t.Error("waited a minute for a second caller to hold the other slot")
			}
			inFlight.Add(-1)
			release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want exactly 2", p)
	}
}

// TestCancelledWaitRefunds: callers that give up before their turn leave
// nothing booked. Read from the wait the limiter computes for the next
// caller: the one start still ahead, not one per caller that gave up.
func TestCancelledWaitRefunds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	r := PerSecond(0.1, 1) // one start every 10 s
	claim := Claim{Key: "k", Rate: r, Units: 1}
	ctx := context.Background()
	if _, err := l.Wait(ctx, "g", claim); err != nil {
		t.Fatal(err)
	}
	// Three callers give up before their turn (10 s away); had each
	// booked its start, the next caller would wait 40 s.
	for i := 0; i < 3; i++ {
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := l.Wait(cctx, "g", claim)
		cancel()
		if err == nil || cctx.Err() == nil {
			t.Fatalf("caller %d: err %v, want it to give up with its context (%v)", i, err, cctx.Err())
		}
	}
	told, ok, err := l.Try(ctx, "g", claim)
	if err != nil {
		t.Fatal(err)
	}
	if emission := 10 * time.Second; told > emission {
		t.Errorf("after three callers gave up, the next is told to wait %v (admitted %v), want at most one start's %v", told, ok, emission)
	}
}

// TestCooldownDefersEveryone: a cooldown defers every call of its model,
// a shorter one does not replace it, and once it ends calls are admitted;
// other models are not affected. Read from the waits the limiter
// computes, not from how long a call took.
func TestCooldownDefersEveryone(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	b := &LLMBudget{Limiter: l, Scope: "p", Default: LLMQuota{RequestsPerMinute: 6000}}
	ctx := context.Background()
	m := llm.Bucket{Model: "m"}
	if err := b.Cooldown(ctx, m, time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = b.Cooldown(ctx, m, 10*time.Millisecond) // shorter: ignored
	// The wait is the cooldown's remainder: most of an hour, not 10ms.
	if told, ok, err := l.Try(ctx, b.group(m), b.claims(context.Background(), m, 10)...); err != nil || ok || told <= 30*time.Minute || told > time.Hour {
		t.Errorf("a call during m's hour-long cooldown: admitted %v, told to wait %v (err %v); want deferred by the cooldown's remainder", ok, told, err)
	}
	// Another model is not affected: admitted at once.
	other := llm.Bucket{Model: "other"}
	if told, ok, err := l.Try(ctx, b.group(other), b.claims(context.Background(), other, 10)...); err != nil || !ok {
		t.Errorf("another model during m's cooldown: admitted %v, told to wait %v (err %v); want admitted at once", ok, told, err)
	}
	// A call waits a cooldown out and is admitted after it.
	short := llm.Bucket{Model: "short"}
	if err := b.Cooldown(ctx, short, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, time.Minute) // a failure's bound
	defer cancel()
	if _, err := b.Acquire(actx, short, 10); err != nil {
		t.Errorf("a call after a 50ms cooldown: %v", err)
	}
}

// TestTokenSettleRefundsEstimate: settling a call that used fewer tokens
// than estimated refunds the rest, read from the wait the limiter computes
// for the next call.
func TestTokenSettleRefundsEstimate(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t)})
	// 6000 tokens/min = 100/s, with a burst of 1000 tokens.
	b := &LLMBudget{Limiter: l, Scope: "p", Default: LLMQuota{TokensPerMinute: 6000, TokenBurst: 1000}}
	ctx := context.Background()
	m := llm.Bucket{Model: "m"}
	settle, err := b.Acquire(ctx, m, 1000) // admitted at once, on the burst
	if err != nil {
		t.Fatal(err)
	}
	settle(ctx, 100) // the call really used 100 tokens
	// Without the refund of 900 tokens the next call would wait 10 s;
	// with it, 1 s at most (less as time passes).
	told, ok, err := l.Try(ctx, b.group(m), b.claims(context.Background(), m, 1000)...)
	if err != nil {
		t.Fatal(err)
	}
	if told > time.Second {
		t.Errorf("after settling 100 of 1000 tokens the next call is told to wait %v (admitted %v), want at most 1s: the estimate was not refunded", told, ok)
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
	if told, ok, _ := l.reserve(ictx, "m", []Claim{claim}); ok || told <= 0 {
		t.Errorf("a third interactive claim was admitted past the whole burst")
	}
	if _, err := New(Config{Client: srv.Client(t), Reserve: 1}); err == nil {
		t.Error("a reserve of the whole burst was accepted")
	}
}
