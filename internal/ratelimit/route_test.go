package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
)

// TestAcquireAnyUsesEveryDeploymentsQuota: callers competing for three
// deployments get the sum of their quotas, and no deployment more than
// its own. Counted, not timed: the quotas refill once every 100 minutes,
// so 24 callers routing at once are admitted exactly the three bursts
// (30, 20 and 10), each deployment its own, and are then told to wait.
// The deployments' figures over time (how close to the sum a run comes)
// are TestAcquireAnyQuotaOverTime's (make slow) and the bench's.
func TestAcquireAnyUsesEveryDeploymentsQuota(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t), Prefix: "t:", Reserve: -1})
	// A burst is set by model (an endpoint's own quota takes none), so
	// each deployment serves a model of its own here.
	bursts := []float64{30, 20, 10}
	b := &LLMBudget{Limiter: l, Scope: "s", Quotas: map[string]LLMQuota{}}
	cands := make([]llm.Candidate, len(bursts))
	for i, burst := range bursts {
		ep := []string{"east", "west", "north"}[i]
		b.Quotas["m-"+ep] = LLMQuota{RequestsPerMinute: 0.01, RequestBurst: burst}
		cands[i] = llm.Candidate{Bucket: llm.Bucket{Endpoint: ep, Model: "m-" + ep}, Weight: 1}
	}
	sum := 0
	for _, burst := range bursts {
		sum += int(burst)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	got := make([]int, len(bursts))
	total := 0
	var wg sync.WaitGroup
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, _, err := b.AcquireAny(ctx, cands, 100)
				if err != nil {
					return
				}
				mu.Lock()
				got[i]++
				total++
				if total == sum {
					stop() // every burst taken: the rest would wait 100 minutes
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i, burst := range bursts {
		if got[i] != int(burst) {
			t.Errorf("deployment %s admitted %d calls, want its burst, %.0f (all: %v)", cands[i].Endpoint, got[i], burst, got)
		}
		// Drained: told to wait for its next emission, at most 100 minutes.
		if told, ok, err := l.Try(context.Background(), b.group(cands[i].Bucket), b.claims(context.Background(), cands[i].Bucket, 100)...); err != nil || ok || told <= 0 || told > 100*time.Minute {
			t.Errorf("deployment %s after its burst: admitted %v, told to wait %v (err %v); want a wait of at most 100 minutes", cands[i].Endpoint, ok, told, err)
		}
	}
}

// TestAcquireAnyQuotaOverTime: callers competing for three deployments of
// one model for 4 s get more than any one could give, and no deployment
// more than its own quota over the window. A timing experiment (how many
// calls a loaded machine makes in 4 s): make slow runs it; the default run
// counts the same in TestAcquireAnyUsesEveryDeploymentsQuota.
func TestAcquireAnyQuotaOverTime(t *testing.T) {
	slowExperiment(t)
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t), Prefix: "t:", Reserve: -1})
	b := &LLMBudget{Limiter: l, Scope: "s"}
	rpm := []float64{3000, 2000, 1000}
	cands := make([]llm.Candidate, len(rpm))
	for i, r := range rpm {
		cands[i] = llm.Candidate{Bucket: llm.Bucket{Endpoint: []string{"east", "west", "north"}[i], Model: "m",
			Quota: llm.Quota{RequestsPerMinute: r}}, Weight: 1}
	}
	const window = 4 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var mu sync.Mutex
	got := make([]int, len(rpm))
	var wg sync.WaitGroup
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, _, err := b.AcquireAny(ctx, cands, 100)
				if err != nil {
					return
				}
				mu.Lock()
				got[i]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total, capacity, largest := 0, 0.0, 0.0
	for i, r := range rpm {
		// Each deployment's share: its rate over the window plus its burst.
		limit := r*window.Minutes() + b.rpmBurst(r) + 1
		if got[i] == 0 || float64(got[i]) > limit {
			t.Errorf("deployment %s admitted %d calls in %s; want some, at most its quota's %.0f", cands[i].Endpoint, got[i], window, limit)
		}
		total += got[i]
		capacity += r * window.Minutes()
		largest = max(largest, limit)
	}
	// Together they admit more than any one could: the quotas add up.
	if float64(total) <= largest {
		t.Errorf("three deployments admitted %d calls in %s (%v), no more than the largest alone (%.0f)", total, window, got, largest)
	}
	t.Logf("admitted %d of the %.0f the three quotas allow together (%.2f)", total, capacity, float64(total)/capacity)
}

func (b *LLMBudget) rpmBurst(rpm float64) float64 {
	r, _ := LLMQuota{RequestsPerMinute: rpm}.rates()
	return r.Burst
}

// TestDeploymentHealth: failures in a row cool a deployment down for
// every process; the others take its calls; it comes back after the
// cooldown, and a failed probe cools it again at once.
func TestDeploymentHealth(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	l, _ := New(Config{Client: srv.Client(t), Prefix: "t:"})
	var events []time.Duration
	b := &LLMBudget{Limiter: l, Scope: "s", OnHealth: func(_, _ string, d time.Duration) { events = append(events, d) }}
	other := &LLMBudget{Limiter: l, Scope: "s"} // another process
	ctx := context.Background()
	a := llm.Candidate{Bucket: llm.Bucket{Endpoint: "a", Model: "m"}, Weight: 1}
	z := llm.Candidate{Bucket: llm.Bucket{Endpoint: "z", Model: "m"}, Weight: 1}
	// Long enough that no pause of a slow machine ends it before the
	// test does (below).
	const cooldown = time.Hour
	for n := 1; n <= 3; n++ {
		cooled, err := b.Failed(ctx, a.Bucket, 3, cooldown)
		if err != nil {
			t.Fatal(err)
		}
		if cooled != (n == 3) {
			t.Fatalf("failure %d: cooled %v, want %v", n, cooled, n == 3)
		}
	}
	if d, _ := other.Down(ctx, a.Bucket); d <= 0 || d > cooldown {
		t.Fatalf("another process sees the deployment down for %s, want (0, %s]", d, cooldown)
	}
	if cooled, _ := other.Failed(ctx, a.Bucket, 3, cooldown); cooled {
		t.Error("a failure during the cooldown cooled it again (an in-flight call's failure must not extend it)")
	}
	for range 5 {
		i, _, err := other.AcquireAny(ctx, []llm.Candidate{a, z}, 10)
		if err != nil || i != 1 {
			t.Fatalf("with a down: got candidate %d, err %v; want 1 (z)", i, err)
		}
	}
	if _, _, err := other.AcquireAny(ctx, []llm.Candidate{a}, 10); !errors.Is(err, llm.ErrAllDown) {
		t.Fatalf("only a, which is down: err %v, want ErrAllDown", err)
	}
	// The cooldown ends: its key's TTL lapses, made now by the test
	// (PEXPIREAT in the past expires the key at once) rather than waited
	// for, so a slow machine cannot outlast it before the checks above.
	down := l.key(rdb.DeploymentDownName(b.group(a.Bucket)))
	if err := l.rdb.PExpireAt(ctx, down, time.UnixMilli(1)).Err(); err != nil {
		t.Fatal(err)
	}
	if d, err := other.Down(ctx, a.Bucket); err != nil || d != 0 {
		t.Fatalf("after its cooldown lapsed the deployment is down for %s (err %v), want back", d, err)
	}
	if i, _, err := other.AcquireAny(ctx, []llm.Candidate{a}, 10); err != nil || i != 0 {
		t.Fatalf("after the cooldown: candidate %d, err %v; want a back", i, err)
	}
	if cooled, _ := b.Failed(ctx, a.Bucket, 3, cooldown); !cooled {
		t.Error("the failed probe after the cooldown did not cool it down again")
	}
	if len(events) != 2 || events[0] != cooldown {
		t.Errorf("health events %v, want two cooldowns of %s", events, cooldown)
	}
}
