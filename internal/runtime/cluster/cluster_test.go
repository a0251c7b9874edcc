package cluster_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/toyagent"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

const demo = "../../../examples/demo"

// startToy starts an in-process cluster running the toy agent with cfg's
// workers and queue settings (a registry and an unused LLM filled in), and
// returns it with the demo's absolute path.
func startToy(t *testing.T, ctx context.Context, toy toyagent.Config, cfg cluster.Config) (*cluster.Cluster, string) {
	t.Helper()
	tier.Servers(t, "a cluster")
	reg, err := agent.NewRegistry(toyagent.Definition(toy))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir == "" {
		cfg.StateDir = t.TempDir()
	}
	cfg.Agents = reg
	cfg.LLM = llm.Config{BaseURL: "http://127.0.0.1:9/v1", APIKey: "unused", Default: llm.ModelConfig{Name: "none"}}
	cl, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	abs, _ := filepath.Abs(demo)
	return cl, abs
}

// TestRuntimeRunsAnyAgent runs the toy agent through the in-process
// cluster (embedded NATS JetStream, a spawned redis-server): continuations
// cross pools, every task runs exactly once, a task that fails for good is
// recorded failed in each slot it owed so its example ends failed with the
// reason, and a second coordinator over the finished run redoes nothing.
func TestRuntimeRunsAnyAgent(t *testing.T) {
	var execs atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, abs := startToy(t, ctx, toyagent.Config{FailExample: "local003", Executions: &execs}, cluster.Config{Generators: 2,
		GeneratorConcurrency: 3, Explorers: 1, ExplorerConcurrency: 2, Queue: queue.Config{AckWait: 5 * time.Second}})
	examples := []string{"local001", "local002", "local003", "local004"}
	m := &runstate.Manifest{Run: "toy", Dataset: abs, Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: time.Minute, Created: time.Now()}
	out := filepath.Join(t.TempDir(), "out")
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Examples {
		switch {
		case e.InstanceID == "local003":
			if e.Status != "failed" || e.Candidates != 3 || !strings.Contains(e.Error, "3 of 3 candidates failed: the answer task failed after 1 run (1 delivery): toy: local003 always fails") {
				t.Errorf("local003: %s, %d candidates, error %q", e.Status, e.Candidates, e.Error)
			}
		case e.Status != "answered" || e.Confidence != "high" || e.Method != "toy_majority" || e.Candidates != 3 || len(e.AgreedCandidates) != 3:
			t.Errorf("%s: %+v", e.InstanceID, e)
		case e.Agent != "toy" || e.Cost.Queries != 4:
			t.Errorf("%s: agent %q, %d queries (want toy, 1 count + 3 answers)", e.InstanceID, e.Agent, e.Cost.Queries)
		}
	}
	// 4 count tasks + 12 answer tasks, each executed once.
	if n := execs.Load(); n != 16 {
		t.Errorf("%d task executions, want 16 (each task once)", n)
	}
	if rep.Agent != "toy" {
		t.Errorf("run.json agent %q", rep.Agent)
	}
	if open, err := cl.Env.State.OpenRounds(ctx, "toy"); err != nil || len(open) != 0 {
		t.Errorf("rounds left open after the run: %v (%v)", open, err)
	}
	// A finished task delivered again (as after a crash between recording
	// it done and acknowledging it) is acknowledged without running.
	tasks, err := cl.Env.State.Tasks(ctx, "toy", "local001", "toy")
	if err != nil || len(tasks) != 4 {
		t.Fatalf("local001 logged %d tasks (%v), want 4", len(tasks), err)
	}
	for _, tk := range tasks {
		pool := agent.Explorer
		if tk.Task.Kind == "answer" {
			pool = agent.Generator
		}
		if err := cl.Env.Queue.Publish(ctx, queue.Subject("toy", string(pool), "sqlite"), "again."+tk.ID(), tk); err != nil {
			t.Fatal(err)
		}
	}
	waitDrained(t, ctx, cl, "generate-sqlite", "explore-sqlite")
	if n := execs.Load(); n != 16 {
		t.Errorf("%d task executions after finished tasks were delivered again, want 16", n)
	}
	// Forged tasks (anyone who can publish to the stream can send one) are
	// terminated without running: their names would become keys and paths.
	forged := *tasks[0]
	forged.Example = "../../escape"
	badKind := *tasks[1]
	badKind.Task.Kind = "answer\nFLUSHALL"
	badRun := *tasks[2]
	badRun.Run = "toy:*"
	for i, tk := range []*message.Task{&forged, &badKind, &badRun} {
		if err := cl.Env.Queue.Publish(ctx, queue.Subject("toy", string(agent.Generator), "sqlite"), fmt.Sprintf("forged.%d", i), tk); err != nil {
			t.Fatal(err)
		}
	}
	waitDrained(t, ctx, cl, "generate-sqlite")
	if n := execs.Load(); n != 16 {
		t.Errorf("%d task executions after forged tasks, want 16", n)
	}
	ropt, err := redis.ParseURL(cl.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	if keys, err := rdb.Keys(ctx, "*escape*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("a forged task wrote Redis keys: %v (%v)", keys, err)
	}
	// Resuming the finished run publishes nothing and redoes nothing.
	again, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: &runstate.Manifest{Run: "toy"}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if n := execs.Load(); n != 16 || len(again.Examples) != 4 {
		t.Errorf("after a resume of the finished run: %d executions, %d examples", n, len(again.Examples))
	}
}

// waitDrained waits until the consumers have nothing pending (ctx, the
// test's, bounds the wait: Pending fails once it ends).
func waitDrained(t *testing.T, ctx context.Context, cl *cluster.Cluster, consumers ...string) {
	t.Helper()
	for _, consumer := range consumers {
		wait.For(t, 2*time.Minute, consumer+" to have nothing pending", func() bool {
			n, err := cl.Env.Queue.Pending(ctx, consumer)
			if err != nil {
				t.Fatal(err)
			}
			return n == 0
		})
	}
}

// TestJoinGathersAFanOut: each slot fans out into 3 probe tasks on the
// explore pool whose parts one continuation gathers; a probe that fails for
// good is a lost part, not a failed slot; the continuation runs once per
// slot and carries every part's cost.
func TestJoinGathersAFanOut(t *testing.T) {
	var execs atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, abs := startToy(t, ctx, toyagent.Config{FanOut: 3, LoseProbe: 2, Executions: &execs}, cluster.Config{Generators: 1,
		GeneratorConcurrency: 2, Explorers: 2, ExplorerConcurrency: 3, Queue: queue.Config{AckWait: 5 * time.Second}})
	examples := []string{"local001", "local002"}
	m := &runstate.Manifest{Run: "fan", Dataset: abs, Seed: 1, Votes: 2, Examples: examples, Agent: "toy",
		RoundTimeout: time.Minute, Created: time.Now()}
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Examples {
		// 1 count + per slot 2 probes that ran their query + 1 answer.
		if e.Status != "answered" || e.Candidates != 2 || e.Cost.Queries != 1+2*(2+1) {
			t.Errorf("%s: %s, %d candidates, %d queries (want answered, 2, 7)", e.InstanceID, e.Status, e.Candidates, e.Cost.Queries)
		}
		res, err := cl.Env.State.Results(ctx, "fan", e.InstanceID, "toy", 0)
		if err != nil || len(res) != 2 {
			t.Fatalf("%s: %d results (%v)", e.InstanceID, len(res), err)
		}
		for _, r := range res {
			if !strings.Contains(string(r.Payload), `"parts":3,"lost":1`) {
				t.Errorf("%s slot %d: payload %s, want 3 parts with 1 lost", e.InstanceID, r.Index, r.Payload)
			}
		}
	}
	// Per example: 1 count, 2 slots x (3 probes + 1 answer).
	if n := execs.Load(); n != 2*(1+2*4) {
		t.Errorf("%d executions, want %d (each task once, the lost probe once)", n, 2*(1+2*4))
	}
}

// TestQueuedTasksAreNotStalls: with a round timeout far shorter than the
// queue (one generator slot, every example published at once), no round
// is decided short: a deadline measures stalls, and tasks waiting in the
// queue are not stalled.
func TestQueuedTasksAreNotStalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, abs := startToy(t, ctx, toyagent.Config{Hold: 150 * time.Millisecond}, cluster.Config{Generators: 1, GeneratorConcurrency: 1,
		Explorers: 1, ExplorerConcurrency: 1})
	examples := []string{"local001", "local002", "local003", "local004", "local005", "local006"}
	// 18 answer tasks of 150 ms through one slot: ~2.7 s of queue against
	// a 1 s round timeout.
	m := &runstate.Manifest{Run: "queued", Dataset: abs, Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: time.Second, Created: time.Now()}
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Examples {
		if e.Status != "answered" || e.Candidates != 3 {
			t.Errorf("%s: %s from %d candidates (%s), want answered from 3", e.InstanceID, e.Status, e.Candidates, e.Error)
		}
	}
	if open, err := cl.Env.State.OpenRounds(ctx, "queued"); err != nil || len(open) != 0 {
		t.Errorf("rounds left open after the run: %v (%v)", open, err)
	}
}

// TestAdmissionWindow: with MaxInFlight 2, never more than two examples
// are started and unfinished at once, and they are admitted in dataset
// order.
func TestAdmissionWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, abs := startToy(t, ctx, toyagent.Config{Hold: 30 * time.Millisecond}, cluster.Config{Generators: 1, GeneratorConcurrency: 8,
		Explorers: 1, ExplorerConcurrency: 4})
	examples := []string{"local001", "local002", "local003", "local004", "local005", "local006", "local007", "local008"}
	m := &runstate.Manifest{Run: "window", Dataset: abs, Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: time.Minute, Created: time.Now()}
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: filepath.Join(t.TempDir(), "out"), MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ from, to time.Time }
	spans := map[string]span{}
	for _, e := range rep.Examples {
		meta, err := cl.Env.State.Meta(ctx, "window", e.InstanceID)
		if err != nil {
			t.Fatal(err)
		}
		spans[e.InstanceID] = span{meta.Published, meta.Published.Add(time.Duration(e.LatencySeconds * float64(time.Second)))}
	}
	for i, id := range examples {
		s := spans[id]
		inFlight := 0
		for _, other := range spans {
			if !other.from.After(s.from) && other.to.After(s.from) {
				inFlight++
			}
		}
		if inFlight > 2 {
			t.Errorf("%d examples in flight when %s started, window 2", inFlight, id)
		}
		if i > 0 && s.from.Before(spans[examples[i-1]].from) {
			t.Errorf("%s admitted before %s", id, examples[i-1])
		}
	}
}

// TestRedisOutageSpendsNoDeliveries: Redis goes down for 6 s mid-run (with
// two deliveries allowed per task). Workers, voter and coordinator hold
// their messages until it is back instead of spending deliveries on it:
// every example is answered from all its candidates, none failed, none
// dropped.
func TestRedisOutageSpendsNoDeliveries(t *testing.T) {
	tier.Servers(t, "redis-server")
	dir := t.TempDir()
	srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(srv.Addr[strings.LastIndexByte(srv.Addr, ':')+1:])
	t.Cleanup(func() { srv.Stop() }) // after the cluster closes (cleanups run last first)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The client does not retry by itself, so that the outage reaches the
	// runtime within its 6 s.
	cl, abs := startToy(t, ctx, toyagent.Config{Hold: 200 * time.Millisecond}, cluster.Config{
		RedisURL: srv.URL() + "?max_retries=-1&dial_timeout=500ms", Generators: 1, GeneratorConcurrency: 2,
		Explorers: 1, ExplorerConcurrency: 2, Queue: queue.Config{MaxDeliver: 2, AckWait: 3 * time.Second}})
	examples := []string{"local001", "local002", "local003", "local004", "local005", "local006"}
	m := &runstate.Manifest{Run: "outage", Dataset: abs, Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: time.Hour, Created: time.Now()}
	out := filepath.Join(t.TempDir(), "out")
	done := make(chan error, 1)
	var rep *outputs.Report
	go func() {
		var err error
		rep, err = coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: out})
		done <- err
	}()
	// Take Redis away once work is under way, bring it back on its port
	// with its append-only file.
	wait.For(t, time.Minute, "work under way (2 entries in the output folder)", func() bool {
		entries, _ := os.ReadDir(out)
		return len(entries) >= 2
	})
	srv.Stop()
	time.Sleep(6 * time.Second) //clock:ok the scenario: Redis down 6 s; the checks are the answers and deliveries
	if srv, err = localredis.Start(localredis.Options{Dir: dir, AppendOnly: true, Port: port}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Examples {
		if e.Status != "answered" || e.Candidates != 3 || e.ValidCandidates != 3 {
			t.Errorf("%s: %s, %d candidates, %d valid (%s): the outage cost it candidates", e.InstanceID, e.Status, e.Candidates, e.ValidCandidates, e.Error)
		}
	}
}

// TestEmbeddedServersRequireCredentials: the NATS server and redis-server
// a cluster starts for itself refuse clients without the per-start
// credentials its own roles were given.
func TestEmbeddedServersRequireCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, _ := startToy(t, ctx, toyagent.Config{}, cluster.Config{Generators: 1, GeneratorConcurrency: 1, Explorers: 1, ExplorerConcurrency: 1})
	natsURL, err := url.Parse(cl.NATSURL)
	if err != nil || natsURL.User == nil {
		t.Fatalf("the embedded NATS URL carries no credentials: %v", err)
	}
	bare := "nats://" + natsURL.Host
	if nc, err := nats.Connect(bare, nats.Timeout(2*time.Second)); err == nil {
		nc.Close()
		t.Error("the embedded NATS accepted a client without credentials")
	}
	nc, err := nats.Connect(cl.NATSURL, nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("with the credentials: %v", err)
	}
	nc.Close()
	ropt, err := redis.ParseURL(cl.RedisURL)
	if err != nil || ropt.Password == "" {
		t.Fatalf("the local Redis URL carries no password: %v", err)
	}
	anon := redis.NewClient(&redis.Options{Addr: ropt.Addr})
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("the local Redis answered a client without the password: %v", err)
	}
	if err := anon.Set(ctx, "quorum:probe", "x", 0).Err(); err == nil {
		t.Error("a client without the password wrote to Redis")
	}
}
