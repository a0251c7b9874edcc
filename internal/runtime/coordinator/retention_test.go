package coordinator_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/voter"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/toyagent"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// TestFinishedRunExpiresUnfinishedDoesNot: a run interrupted before any
// worker ran keeps every key without an expiry and its queued tasks; it
// resumes, and once finished every key expires within the retention (the
// manifest and final answers within the longer one) and its subjects are
// empty.
func TestFinishedRunExpiresUnfinishedDoesNot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := queue.Connect(ctx, natstest.Start(t).URL(), queue.Config{AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rdb := redistest.Start(t).Client(t)
	reg, err := agent.NewRegistry(toyagent.Definition(toyagent.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), Agents: reg, Cache: runstate.NewCache(rdb),
		Log: zap.NewNop(), Name: "test"}
	defer env.Close()
	abs, _ := filepath.Abs("../../../examples/demo")
	examples := []string{"local001", "local002", "local003"}
	m := &runstate.Manifest{Run: "ret", Dataset: abs, Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: 5 * time.Minute, Created: time.Now()}
	retain := runstate.Retention{State: time.Hour, Answers: 3 * time.Hour}
	out := t.TempDir()

	// Interrupted once every example's first round is published, no
	// worker running.
	ictx, interrupt := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		_, err := coordinator.Run(ictx, coordinator.Config{Env: env, Manifest: m, Out: out, Retain: retain})
		stopped <- err
	}()
	wait.For(t, time.Minute, "every example's first round published", func() bool {
		for _, ex := range examples {
			if n, err := env.State.Current(ctx, "ret", ex, "toy"); err != nil || n < 0 {
				return false
			}
		}
		return true
	})
	interrupt()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v", err)
	}
	ttls := keyTTLs(t, rdb, "ret")
	for k, ttl := range ttls {
		if ttl != -1 {
			t.Errorf("unfinished run: %s expires in %v", k, ttl)
		}
	}
	if n, err := q.RunMessages(ctx, "ret"); err != nil || n == 0 {
		t.Errorf("unfinished run: %d queued messages (%v); its tasks were purged", n, err)
	}

	// Resumed with workers: it finishes.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	wc := queue.WorkConfig{DrainTimeout: time.Second, RetryBase: 50 * time.Millisecond}
	go voter.Run(wctx, voter.Config{Env: env, Concurrency: 4, WorkConfig: wc})
	for _, pool := range []agent.Pool{agent.Explorer, agent.Generator} {
		go worker.Run(wctx, worker.Config{Env: env, Pool: pool, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})
	}
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: env, Manifest: &runstate.Manifest{Run: "ret"}, Out: out, Retain: retain})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.Answered != len(examples) {
		t.Fatalf("totals %+v", rep.Totals)
	}
	ttls = keyTTLs(t, rdb, "ret")
	if len(ttls) < 10 {
		t.Fatalf("the finished run has %d keys: %v", len(ttls), ttls)
	}
	answers := []string{"quorum:run:ret:manifest", "quorum:run:ret:final"}
	for k, ttl := range ttls {
		lo, hi := time.Duration(0), retain.State
		if slices.Contains(answers, k) {
			lo, hi = retain.State, retain.Answers
		}
		if ttl <= lo || ttl > hi {
			t.Errorf("finished run: %s expires in %v, want in (%v, %v]", k, ttl, lo, hi)
		}
	}
	info, err := env.State.Describe(ctx, "ret")
	if err != nil || info.Status != runstate.StatusFinished || info.Persistent != 0 || info.Keys != len(ttls) || info.Bytes <= 0 ||
		info.MaxTTL > retain.Answers || info.MinTTL > retain.State {
		t.Errorf("describe: %+v (%v)", info, err)
	}
	if n, err := q.RunMessages(ctx, "ret"); err != nil || n != 0 {
		t.Errorf("finished run: %d messages left on its subjects (%v)", n, err)
	}
}

// keyTTLs is every key of run with its PTTL (-1: no expiry).
func keyTTLs(t *testing.T, rdb *redis.Client, run string) map[string]time.Duration {
	t.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "quorum:run:"+run+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Duration{}
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = ttl
	}
	return out
}
