package cluster_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/agents"
)

// stopRecorder is a component that records its Stop and whether the
// process's Redis still answered then.
type stopRecorder struct {
	name string
	cl   **cluster.Cluster
	log  *[]string
	mu   *sync.Mutex
}

func (r *stopRecorder) Start(context.Context) error { return nil }

func (r *stopRecorder) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entry := r.name
	if err := (*r.cl).Redis.Ping(ctx).Err(); err != nil {
		entry += " (redis gone: " + err.Error() + ")"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.log = append(*r.log, entry)
}

// TestCloseStopsInTheDeclaredOrder: Close stops the components stage by
// stage (intake, workers, deciders), then runs what was deferred, all
// while the connections are up; a closed process takes no component.
func TestCloseStopsInTheDeclaredOrder(t *testing.T) {
	tier.Servers(t, "a cluster")
	ctx := context.Background()
	cl, err := cluster.Start(ctx, cluster.Config{Role: cluster.RoleCoordinator, StateDir: t.TempDir(), Agents: agents.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log []string
	add := func(st cluster.Stage, name string) {
		if err := cl.Add(st, &stopRecorder{name: name, cl: &cl, log: &log, mu: &mu}); err != nil {
			t.Fatal(err)
		}
	}
	add(cluster.Deciders, "deciders")
	add(cluster.Workers, "workers")
	add(cluster.Intake, "intake")
	cl.Defer(func() {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, "deferred")
	})
	cl.Close()
	if got := strings.Join(log, ", "); got != "intake, workers, deciders, deferred" {
		t.Fatalf("stopped in the order %s", got)
	}
	if err := cl.Add(cluster.Intake, &stopRecorder{}); err == nil {
		t.Fatal("a closed process took a component")
	}
	cl.Close() // a second Close does nothing
}
