package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/toyagent"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// TestRoleProcessFollowsSentinelFailover: a role process given a
// redis+sentinel URL connects to the primary; once the primary is
// SIGKILLed and the sentinels promote the replica, the same process is
// ready again and writes the run state there.
func TestRoleProcessFollowsSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, _ := startToy(t, ctx, toyagent.Config{}, cluster.Config{Role: cluster.RoleVoter, RedisURL: s.URL()})
	if err := cl.Ready(); err != nil {
		t.Fatalf("not ready over the sentinels: %v", err)
	}
	old, err := s.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.Node(old).Kill()
	now := s.WaitFailover(t, old, 60*time.Second)
	wait.For(t, 30*time.Second, "the process ready again on the promoted "+now, func() bool { return cl.Ready() == nil })
	if err := cl.Redis.Set(ctx, "quorum:test:after-failover", "1", time.Minute).Err(); err != nil {
		t.Fatalf("write after the failover: %v", err)
	}
}
