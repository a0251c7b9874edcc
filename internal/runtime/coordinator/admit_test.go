package coordinator

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/agents"
)

// TestAdmitRetriesAFailedStart: admission starts an example while Redis
// is down, and the start fails; once Redis is back, the next admission
// (the redelivered final answer that called it) starts that example, not
// the one after it. Skipping it left it never started and the run waiting
// for its answer forever (seen after Redis restarted from a snapshot).
func TestAdmitRetriesAFailedStart(t *testing.T) {
	tier.Servers(t, "redis-server")
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	port, err := strconv.Atoi(srv.Addr[strings.LastIndex(srv.Addr, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	opts := srv.ClientOptions()
	opts.MaxRetries = -1 // fail at once while the server is down
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	q, err := queue.Connect(ctx, natstest.Start(t).URL(), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), Log: zap.NewNop(), Name: "test",
		Agents: agents.Builtin(), Cache: runstate.NewCache(rdb)}
	t.Cleanup(env.Close)
	examples := []string{"local001", "local002"}
	m, _, err := env.State.CreateManifest(ctx, &runstate.Manifest{Run: "r1", Dataset: "../../../examples/demo", Seed: 1, Votes: 2,
		Examples: examples, RoundTimeout: time.Minute, Agent: "reforce", Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	run, err := env.Run(ctx, m.Run)
	if err != nil {
		t.Fatal(err)
	}
	c := &coord{env: env, run: run, m: m, log: zap.NewNop(), window: 1,
		finals: map[string]*message.FinalAnswer{}, ends: map[string]finalEnd{}, flying: map[string]bool{}, began: map[string]time.Time{},
		inRun: map[string]bool{"local001": true, "local002": true}}

	srv.Stop()
	if err := c.admit(ctx); err == nil {
		t.Fatal("admitting with Redis stopped: no error, want the failed start's")
	}
	if c.flying["local001"] {
		t.Fatal("local001 counts as in flight though its start failed")
	}
	if srv, err = localredis.Start(localredis.Options{Dir: dir, AppendOnly: true, Port: port}); err != nil {
		t.Fatal(err)
	}
	if err := c.admit(ctx); err != nil {
		t.Fatalf("admitting with Redis back: %v", err)
	}
	for _, tc := range []struct {
		id      string
		flying  bool
		current int
	}{
		{"local001", true, 0}, // started by the second admission
		{"local002", false, -1},
	} {
		cur, err := env.State.Current(ctx, m.Run, tc.id, "reforce")
		if err != nil {
			t.Fatal(err)
		}
		if c.flying[tc.id] != tc.flying || cur != tc.current {
			t.Errorf("%s: in flight %v with current round %d, want %v with %d (window 1: the example whose start failed goes first)",
				tc.id, c.flying[tc.id], cur, tc.flying, tc.current)
		}
	}
}
