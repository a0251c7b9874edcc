// Package envtest builds the environment the runtime's roles share
// (runenv.Env) over a real NATS server with JetStream and a real
// redis-server, both started for the test and stopped when it ends, for
// the tests of the roles themselves (voter, worker) and of runenv.
package envtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Options shape the environment.
type Options struct {
	Queue queue.Config
	// LLM is the workers' client (nil: the agents make no calls).
	LLM llm.Client
}

// Start returns an environment running agents over servers of its own.
func Start(t testing.TB, agents *agent.Registry, opt Options) *runenv.Env {
	t.Helper()
	env, _ := StartRedis(t, agents, opt)
	return env
}

// StartRedis is Start, also returning a client of the environment's Redis,
// for a test that changes what it holds (a failover's lost keys).
func StartRedis(t testing.TB, agents *agent.Registry, opt Options) (*runenv.Env, *redis.Client) {
	t.Helper()
	q, err := queue.Connect(context.Background(), natstest.Start(t).URL(), opt.Queue)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	rdb := redistest.Start(t).Client(t)
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), LLM: opt.LLM, Agents: agents,
		Cache: runstate.NewCache(rdb), Log: zap.NewNop(), Name: "test"}
	t.Cleanup(env.Close)
	return env, rdb
}

// Go runs a role (voter.Run, worker.Run, a watcher) until the test ends:
// its context is cancelled at cleanup, which waits for it to return. A
// role that stops before then with an error fails the test.
func Go(t testing.TB, role string, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			t.Errorf("%s stopped: %v", role, err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Errorf("%s did not stop within a minute of its context's end", role)
		}
	})
}

// Watch delivers the messages published on subject from now on (final
// answers, results, tasks of a pool), decoded, through a consumer of its
// own called name: subjects no role of the test consumes.
func Watch[T any](t testing.TB, env *runenv.Env, name, subject string) <-chan *T {
	t.Helper()
	ch := make(chan *T, 64)
	Go(t, "watching "+subject, func(ctx context.Context) error {
		return env.Queue.Work(ctx, queue.WorkConfig{Consumer: name, Filters: []string{subject}, Concurrency: 1, DrainTimeout: time.Second,
			Handler: func(ctx context.Context, d queue.Delivery) error {
				v := new(T)
				if err := queue.Decode(d.Msg.Data(), v); err != nil {
					t.Errorf("a message on %s: %v", subject, err)
					return queue.Permanent(err)
				}
				select {
				case ch <- v:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}})
	})
	return ch
}
