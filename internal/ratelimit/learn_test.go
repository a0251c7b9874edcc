package ratelimit

import (
	"context"
	"math"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
)

// TestLearnTheProvidersLimit walks one model's learned limit through what
// its provider says, on a real redis-server, read back through the claims
// of two processes' budgets: a stated limit below the configured quota
// caps it, pauses the cluster while the provider's window drains and
// holds off cuts for the 429s of calls sent before it; a 429 cuts the rate in force by learnFactor, once per hold-off;
// while callers wait on the limiter, each second of answers without 429
// adds the step (1% of the stated quota) and the learned rate, back at the
// stated one, is dropped; with nothing configured and nothing heard, calls
// claim nothing and read nothing, and the first 429 starts from the rate
// the process sent at. The time a step covers is set in Redis, not waited
// for.
func TestLearnTheProvidersLimit(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	red := srv.Client(t)
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	l, err := New(Config{Client: red, Prefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	l.clock = clk
	gpt := llm.Bucket{Model: "gpt-4o"}
	group := LLMGroup("llm", "", "gpt-4o")
	key := l.key(rdb.LLMLearnedName(group))
	told := LLMQuota{RequestsPerMinute: 3000}
	a := &LLMBudget{Limiter: l, Scope: "llm", Default: told, Learning: &Learning{HoldOff: time.Hour}}
	b := &LLMBudget{Limiter: l, Scope: "llm", Default: told, Learning: &Learning{HoldOff: time.Hour}}
	rpm := func(bg *LLMBudget) float64 {
		for _, c := range bg.claims(ctx, gpt, 100) {
			if c.Units == 1 {
				return c.Rate.Limit
			}
		}
		return 0
	}
	want := func(when string, w float64) {
		t.Helper()
		for i, bg := range []*LLMBudget{a, b} {
			if got := rpm(bg); math.Abs(got-w) > 0.01 {
				t.Errorf("%s: process %d claims at %.2f rpm, want %.2f", when, i+1, got, w)
			}
		}
	}
	// stepped moves the learned rate's last move a second back, as a
	// second of answers would.
	stepped := func() {
		t.Helper()
		now, err := red.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := red.HSet(ctx, key, "up:rpm", strconv.FormatInt(now.UnixMilli()-1000, 10)).Err(); err != nil {
			t.Fatal(err)
		}
	}

	want("told 3000, nothing heard", 3000)
	a.Learn(ctx, gpt, llm.LimitSignal{RequestsLimit: 1500, Reset: 700 * time.Millisecond})
	want("the provider states 1500", 1500)
	if d := red.PTTL(ctx, l.key(rdb.CooldownName(group))).Val(); d <= 0 || d > 700*time.Millisecond {
		t.Errorf("a stated limit below the rate in force paused the cluster for %v, want the 700ms its window takes to drain", d)
	}
	a.Learn(ctx, gpt, llm.LimitSignal{RateLimited: true, RequestsLimit: 1500})
	want("a 429 of a call sent before the stated limit", 1500)

	if err := red.HSet(ctx, key, "dec:rpm", "0").Err(); err != nil {
		t.Fatal(err)
	}
	a.Learn(ctx, gpt, llm.LimitSignal{RateLimited: true, RequestsLimit: 1500})
	want("a 429", 1125)
	b.Learn(ctx, gpt, llm.LimitSignal{RateLimited: true})
	want("another process's 429 within the hold-off", 1125)

	stepped()
	b.Learn(ctx, gpt, llm.LimitSignal{})
	want("a second of answers, nobody waiting on the limiter", 1125)
	b.Learning.called(group, clk.now(), true)
	b.Learn(ctx, gpt, llm.LimitSignal{})
	want("a second of answers while callers wait", 1140)

	if err := red.HSet(ctx, key, "rpm", "1499").Err(); err != nil {
		t.Fatal(err)
	}
	stepped()
	b.Learn(ctx, gpt, llm.LimitSignal{})
	want("the learned rate back at the stated one", 1500)
	if n, err := red.HExists(ctx, key, "rpm").Result(); err != nil || n {
		t.Errorf("the learned rate at the ceiling is still kept (%v, %v)", n, err)
	}

	a.Learning.HoldOff = time.Millisecond
	if err := red.HSet(ctx, key, "dec:rpm", "0").Err(); err != nil {
		t.Fatal(err)
	}
	a.Learn(ctx, gpt, llm.LimitSignal{RateLimited: true})
	want("a 429 after the hold-off", 1125)
	if ttl := red.PTTL(ctx, key).Val(); ttl <= 0 || ttl > rdb.LearnedTTL {
		t.Errorf("the learned limits' key expires in %v, want within %v", ttl, rdb.LearnedTTL)
	}
	seen, err := a.LearnedLimits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Learned{{Model: "gpt-4o", ConfiguredRPM: 3000, StatedRPM: 1500, LearnedRPM: 1125, Cuts: 2, Lowest: 1125}}; !reflect.DeepEqual(seen, want) {
		t.Errorf("process 1 learned %+v, want %+v", seen, want)
	}
}

// TestLearnWithNoQuota: told no limit, a call claims nothing and reads
// nothing of Redis until the provider says something; its first 429
// starts the learned rate at learnFactor of the rate this process sent
// at, which every process then claims at.
func TestLearnWithNoQuota(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	counted := &countingHook{}
	red := srv.Client(t)
	red.AddHook(counted)
	l, err := New(Config{Client: red, Prefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	l.clock = clk
	gpt := llm.Bucket{Model: "gpt-4o"}
	a := &LLMBudget{Limiter: l, Scope: "llm", Learning: NewLearning()}
	b := &LLMBudget{Limiter: l, Scope: "llm", Learning: NewLearning()}
	for range 40 { // 40 calls in the last 10 seconds: 240 a minute
		if _, err := a.Acquire(ctx, gpt, 100); err != nil {
			t.Fatal(err)
		}
	}
	if counted.n != 0 {
		t.Errorf("40 calls with no quota and nothing heard made %d Redis commands, want none", counted.n)
	}
	a.Learn(ctx, gpt, llm.LimitSignal{RateLimited: true})
	b.Learn(ctx, gpt, llm.LimitSignal{RateLimited: true}) // b has heard too; held off
	for i, bg := range []*LLMBudget{a, b} {
		claims := bg.claims(ctx, gpt, 100)
		if len(claims) != 1 || math.Abs(claims[0].Rate.Limit-180) > 0.01 {
			t.Errorf("process %d claims %+v after the first 429, want requests at 180 a minute (0.75 x 240)", i+1, claims)
		}
	}
}

// countingHook counts the commands a client sends.
type countingHook struct{ n int }

func (h *countingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n++; return next(ctx, cmd) }
}
func (h *countingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n += len(cmds); return next(ctx, cmds) }
}

// TestWaitReadsTheClaimsAtEachTry: a caller refused (here by a 429's
// cooldown) asks for its claims again before it tries again, so a rate
// cut while it waited applies to it; one that kept its first claims would
// be admitted on them.
func TestWaitReadsTheClaimsAtEachTry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	red := srv.Client(t)
	ctx := context.Background()
	l, err := New(Config{Client: red, Prefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Cooldown(ctx, "g", 30*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	asked := 0
	claims := func() []Claim {
		asked++
		key := "before"
		if asked > 1 {
			key = "after"
		}
		return []Claim{{Key: key, Rate: PerMinute(60, 1), Units: 1}}
	}
	_, refused, err := l.wait(ctx, "g", claims)
	if err != nil {
		t.Fatal(err)
	}
	before, after := red.Exists(ctx, l.key("before")).Val(), red.Exists(ctx, l.key("after")).Val()
	if !refused || asked < 2 || before != 0 || after != 1 {
		t.Errorf("refused %v, claims asked %d times, reserved on the first claims %d, on the later ones %d; want refused, asked again, reserved on the later ones only",
			refused, asked, before, after)
	}
}
