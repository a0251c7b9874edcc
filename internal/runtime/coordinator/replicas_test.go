package coordinator_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/agents"
)

// TestManifestRecordsStreamReplicas: a new run's manifest records the
// streams' replicas; resuming a run created with R3 refuses
// --stream-replicas 1, and without the flag asks for the run's three
// replicas again (which one server refuses, saying a cluster is needed).
func TestManifestRecordsStreamReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := queue.Connect(ctx, natstest.Start(t).URL(), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	env := &runenv.Env{Queue: q, State: runstate.New(rdb), Log: zap.NewNop(), Name: "test", Agents: agents.Builtin(), Cache: runstate.NewCache(rdb)}

	// An empty run ends at once; its manifest stays.
	if _, err := coordinator.Run(ctx, coordinator.Config{Env: env, Out: t.TempDir(), Manifest: &runstate.Manifest{Run: "r1", Dataset: "../../../examples/demo",
		Seed: 1, Votes: 1, Examples: []string{}, Agent: "reforce", RoundTimeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	m, err := env.State.Manifest(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if m.StreamReplicas != 1 {
		t.Errorf("the manifest records %d stream replicas, want the streams' 1", m.StreamReplicas)
	}

	// A run created on an R3 cluster, resumed here.
	if _, _, err := env.State.CreateManifest(ctx, &runstate.Manifest{Run: "r3", Dataset: "../../../examples/demo", Seed: 1, Votes: 1,
		Examples: []string{}, Agent: "reforce", RoundTimeout: time.Minute, StreamReplicas: 3}); err != nil {
		t.Fatal(err)
	}
	_, err = coordinator.Run(ctx, coordinator.Config{Env: env, Out: t.TempDir(), Manifest: &runstate.Manifest{Run: "r3"}, StreamReplicas: 1})
	if err == nil || !strings.Contains(err.Error(), "--stream-replicas 3") {
		t.Errorf("resume with --stream-replicas 1: %v, want a refusal naming --stream-replicas 3", err)
	}
	_, err = coordinator.Run(ctx, coordinator.Config{Env: env, Out: t.TempDir(), Manifest: &runstate.Manifest{Run: "r3"}})
	if err == nil || !strings.Contains(err.Error(), "cluster of at least 3") {
		t.Errorf("resume without the flag on one server: %v, want the streams raised to 3, which one server refuses", err)
	}
}
