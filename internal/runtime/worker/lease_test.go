package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/envtest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// holder is an agent whose one task kind is held at a gate until the test
// opens it, counting its executions: an LLM call in flight.
type holder struct {
	mu      sync.Mutex
	execs   int
	started chan struct{}
	gate    chan struct{}
}

func (*holder) Start(context.Context, *agent.Context) (*agent.Dispatch, error) { return nil, nil }
func (*holder) Decide(context.Context, *agent.Context, int, []*agent.Candidate) (*agent.Decision, error) {
	return nil, errors.New("the lease test decides nothing")
}

func (h *holder) held(ctx context.Context, _ *agent.Context, t agent.Task, _ struct{}) (*agent.Outcome, error) {
	h.mu.Lock()
	h.execs++
	h.mu.Unlock()
	h.started <- struct{}{}
	select {
	case <-h.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: "SELECT 1", Status: agent.StatusEmpty}}}, nil
}

func (h *holder) executions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.execs
}

// TestATaskRunsOnceAtATime delivers one task twice at once to two workers
// (real NATS and Redis), as a NATS restart redelivers a task still in
// flight beside the original: the second delivery waits for the first's
// lease instead of running the task beside it, and once the first is done
// it is acknowledged without running at all.
func TestATaskRunsOnceAtATime(t *testing.T) {
	tier.Servers(t, "NATS and redis-server")
	t.Parallel()
	h := &holder{started: make(chan struct{}, 2), gate: make(chan struct{})}
	def := &agent.Definition{Name: "holder", Doc: "a task held at a gate",
		New: func(agent.Config) (agent.Agent, error) { return h, nil }}
	agent.Register(&def.Kinds, "held", agent.Generator, "held until the test opens the gate", (*holder).held)
	reg, err := agent.NewRegistry(def)
	if err != nil {
		t.Fatal(err)
	}
	env := envtest.Start(t, reg, envtest.Options{Queue: queue.Config{AckWait: 5 * time.Second}})
	core, logs := observer.New(zap.InfoLevel)
	env.Log = zap.New(core)
	for _, name := range []string{"worker a", "worker b"} {
		envtest.Go(t, name, func(ctx context.Context) error {
			return worker.Run(ctx, worker.Config{Env: env, Pool: agent.Generator, Warehouses: []string{"sqlite"}, Concurrency: 1,
				WorkConfig: queue.WorkConfig{RetryBase: 20 * time.Millisecond, DrainTimeout: time.Second}})
		})
	}
	// Registered after the workers, so it runs before they are stopped:
	// a failing test does not leave a task at the gate.
	var opened sync.Once
	open := func() { opened.Do(func() { close(h.gate) }) }
	t.Cleanup(open)
	ctx := context.Background()
	run, results := startRun(t, env, "twice", "holder")
	tk, err := agent.NewTask("held", "h", 0, []int{0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Open(ctx, run, "local001", "holder", "sqlite", &agent.Dispatch{Expect: 1, Tasks: []agent.Task{tk}}); err != nil {
		t.Fatal(err)
	}
	wait.Recv(t, time.Minute, "the first delivery running", h.started)
	// The same task again under another message id: JetStream delivers
	// it as a second message, to the idle worker.
	again := runenv.Envelopes(run.Manifest, "local001", "holder", "sqlite", []agent.Task{tk})[0]
	if err := env.Queue.Publish(ctx, queue.Subject("twice", string(agent.Generator), "sqlite"), again.ID()+".again", again); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Minute, "the second delivery waiting for the lease, or running the task", func() bool {
		return logs.FilterMessageSnippet("waiting for it").Len() > 0 || h.executions() > 1
	})
	if n := h.executions(); n != 1 {
		t.Fatalf("the task ran %d times at once", n)
	}
	open()
	if r := wait.Recv(t, time.Minute, "the result", results); r.Index != 0 || r.SQL != "SELECT 1" {
		t.Errorf("result %+v", r)
	}
	wait.For(t, time.Minute, "both deliveries acknowledged", func() bool {
		n, err := env.Queue.Pending(ctx, "generate-sqlite")
		return err == nil && n == 0
	})
	if n := h.executions(); n != 1 {
		t.Errorf("the task ran %d times, want once", n)
	}
}
