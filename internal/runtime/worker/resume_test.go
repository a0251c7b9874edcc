package worker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/envtest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// chainSteps is how long the chain agent's one task is.
const chainSteps = 5

// chain is an agent whose one task is a chain of steps (each an LLM call
// in a real agent), checkpointed after each; step stopAt is held until the
// worker running it stops.
type chain struct {
	stopAt int
	held   chan struct{}

	mu      sync.Mutex
	calls   []int // the steps made, in order, across deliveries
	stopped bool
}

func (*chain) Start(context.Context, *agent.Context) (*agent.Dispatch, error) { return nil, nil }
func (*chain) Decide(context.Context, *agent.Context, int, []*agent.Candidate) (*agent.Decision, error) {
	return nil, errors.New("the chain test decides nothing")
}

func (a *chain) run(ctx context.Context, c *agent.Context, t agent.Task, _ struct{}) (*agent.Outcome, error) {
	var done []int // the steps' outputs so far
	if _, err := agent.LoadCheckpoint(ctx, c.Store, t.ID, &done); err != nil {
		return nil, err
	}
	for step := len(done); step < chainSteps; step++ {
		a.mu.Lock()
		held := step == a.stopAt && !a.stopped
		a.stopped = a.stopped || held
		a.mu.Unlock()
		if held {
			a.held <- struct{}{}
			<-ctx.Done() // the worker is stopping: this delivery dies here
			return nil, ctx.Err()
		}
		a.mu.Lock()
		a.calls = append(a.calls, step)
		a.mu.Unlock()
		done = append(done, step*step)
		if err := agent.SaveCheckpoint(ctx, c.Store, t.ID, done); err != nil {
			return nil, err
		}
	}
	if err := c.Store.DropCheckpoint(ctx, t.ID); err != nil {
		return nil, err
	}
	return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: fmt.Sprint(done), Status: agent.StatusEmpty}}}, nil
}

// TestAStoppedChainResumesOnTheNextWorker stops a worker while its task is
// held at step 3 of a 5-step chain (real NATS and Redis): the task is
// handed back, the next worker continues from the checkpoint the first
// saved (steps 3 and 4 only, not the chain again) and the answer is an
// uninterrupted chain's; the checkpoint is gone afterwards.
func TestAStoppedChainResumesOnTheNextWorker(t *testing.T) {
	tier.Servers(t, "NATS and redis-server")
	t.Parallel()
	a := &chain{stopAt: 3, held: make(chan struct{}, 1)}
	def := &agent.Definition{Name: "chain", Doc: "a checkpointed chain",
		New: func(agent.Config) (agent.Agent, error) { return a, nil }}
	agent.Register(&def.Kinds, "chain", agent.Generator, "a chain of steps", (*chain).run)
	reg, err := agent.NewRegistry(def)
	if err != nil {
		t.Fatal(err)
	}
	env := envtest.Start(t, reg, envtest.Options{Queue: queue.Config{AckWait: 5 * time.Second}})
	ctx := context.Background()
	run, results := startRun(t, env, "chain", "chain")
	cfg := worker.Config{Env: env, Pool: agent.Generator, Warehouses: []string{"sqlite"}, Concurrency: 1,
		WorkConfig: queue.WorkConfig{RetryBase: 20 * time.Millisecond, DrainTimeout: time.Second}}
	first, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(first.Stop)
	tk, err := agent.NewTask("chain", "c", 0, []int{0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Open(ctx, run, "local001", "chain", "sqlite", &agent.Dispatch{Expect: 1, Tasks: []agent.Task{tk}}); err != nil {
		t.Fatal(err)
	}
	wait.Recv(t, time.Minute, "the chain held at step 3", a.held)
	first.Stop() // hands the task back once its drain time is over
	envtest.Go(t, "the second worker", func(ctx context.Context) error { return worker.Run(ctx, cfg) })
	r := wait.Recv(t, time.Minute, "the chain's result", results)
	if want := fmt.Sprint([]int{0, 1, 4, 9, 16}); r.SQL != want {
		t.Errorf("the resumed chain answered %s, want %s", r.SQL, want)
	}
	a.mu.Lock()
	calls := fmt.Sprint(a.calls)
	a.mu.Unlock()
	if want := fmt.Sprint([]int{0, 1, 2, 3, 4}); calls != want {
		t.Errorf("steps made across the deliveries: %s, want each once: %s", calls, want)
	}
	wait.For(t, time.Minute, "the checkpoint dropped", func() bool {
		r, e, err := env.Example(ctx, "chain", "local001")
		if err != nil {
			return false
		}
		_, ok, err := env.Context(r, e, "chain").Store.Checkpoint(ctx, "c")
		return err == nil && !ok
	})
}
