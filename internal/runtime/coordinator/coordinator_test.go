package coordinator_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/voter"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"go.uber.org/zap"
)

// TestExhaustedTaskFailsItsExampleAndTheRunGoesOn: one example was started
// before a crash with tasks whose prompt blob is gone. The resumed
// coordinator publishes them again; after MaxDeliver deliveries each becomes
// a failed candidate, the example ends failed with the reason, and the
// other examples finish normally.
func TestExhaustedTaskFailsItsExampleAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ds, err := dataset.Load("../../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, _ := llmsim.New(llmsim.Config{Dataset: ds, Noise: llmsim.Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1}})
	ts := httptest.NewServer(sim)
	defer ts.Close()
	client, _ := llm.New(llm.Config{BaseURL: ts.URL + "/v1", APIKey: "x", Default: llm.ModelConfig{Name: "gpt-4o"}})
	q, err := queue.Connect(ctx, natstest.Start(t).URL(), queue.Config{MaxDeliver: 2, AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), LLM: client, Log: zap.NewNop(), Name: "test",
		Agents: agents.Builtin(), Cache: runstate.NewCache(rdb)}
	defer env.Close()

	abs := "../../../examples/demo"
	m := &runstate.Manifest{Run: "r1", Dataset: abs, Seed: 1, Votes: 4, Examples: []string{"local001", "local002", "local003"},
		RoundTimeout: time.Minute, Agent: "reforce"}
	// local002 was started with a prompt that no longer exists.
	if err := env.State.SetMeta(ctx, "r1", "local002", runstate.ExampleMeta{Warehouse: "sqlite", Published: time.Now()}); err != nil {
		t.Fatal(err)
	}
	var tasks []agent.Task
	for i := range 4 {
		tk, _ := agent.NewTask("generate", fmt.Sprintf("r0.generate.%d", i), 0, []int{i}, map[string]string{"info_ref": blob.Ref([]byte("gone"))})
		tasks = append(tasks, tk)
	}
	if err := env.State.Open(ctx, "r1", "local002", "reforce", 0, 4, runenv.Envelopes(m, "local002", "reforce", "sqlite", tasks)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wc := queue.WorkConfig{RetryBase: 50 * time.Millisecond, DrainTimeout: time.Second}
	go voter.Run(wctx, voter.Config{Env: env, Concurrency: 2, WorkConfig: wc})
	go worker.Run(wctx, worker.Config{Env: env, Pool: agent.Generator, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})
	go worker.Run(wctx, worker.Config{Env: env, Pool: agent.Explorer, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	rep, err := coordinator.Run(rctx, coordinator.Config{Env: env, Manifest: m, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range rep.Examples {
		got[e.InstanceID] = e.Status
		if e.InstanceID == "local002" && (!strings.Contains(e.Error, "4 of 4 candidates failed") || !strings.Contains(e.Error, "after 2 runs (2 deliveries)")) {
			t.Errorf("local002 error %q", e.Error)
		}
	}
	if got["local001"] != "answered" || got["local003"] != "answered" || got["local002"] != "failed" || rep.Totals.Failed != 1 {
		t.Errorf("statuses %v, totals %+v", got, rep.Totals)
	}
}
