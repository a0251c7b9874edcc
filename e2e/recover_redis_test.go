package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/voter"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	twait "github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// finalsSeen is a coordinator's progress writer: one write per final
// answer it accepted, counted on a channel.
type finalsSeen chan struct{}

func (f finalsSeen) Write(p []byte) (int, error) {
	f <- struct{}{}
	return len(p), nil
}

// toyRun runs the toy agent's run id over natsURL and redisURL with the
// roles in this process (a voter, a generator and an explorer worker, a
// coordinator admitting two examples at a time), reconciling every
// second; during is called with the coordinator's finals as they come,
// and the run's report is returned.
func toyRun(t *testing.T, ctx context.Context, natsURL, redisURL, id string, during func(finals finalsSeen)) *outputs.Report {
	t.Helper()
	env, closeEnv := toyEnv(t, natsURL, redisURL, "worker", 300*time.Millisecond, 0)
	defer closeEnv()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	wc := queue.WorkConfig{DrainTimeout: time.Second, RetryBase: 100 * time.Millisecond}
	roles := make(chan error, 3)
	go func() {
		roles <- voter.Run(wctx, voter.Config{Env: env, Concurrency: 4, SweepEvery: 200 * time.Millisecond, ReconcileEvery: time.Second, WorkConfig: wc})
	}()
	for _, pool := range []agent.Pool{agent.Generator, agent.Explorer} {
		go func() {
			roles <- worker.Run(wctx, worker.Config{Env: env, Pool: pool, Warehouses: []string{"sqlite"}, Concurrency: 2, WorkConfig: wc})
		}()
	}
	examples := []string{"local001", "local002", "local003", "local004", "local005", "local006"}
	m := &runstate.Manifest{Run: id, Dataset: demoDir(t), Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: 5 * time.Minute, Created: time.Now()}
	finals := make(finalsSeen, len(examples))
	type result struct {
		rep *outputs.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := coordinator.Run(ctx, coordinator.Config{Env: env, Manifest: m, Out: filepath.Join(t.TempDir(), "out"), Progress: finals,
			MaxInFlight: 2, RestoreEvery: time.Second})
		done <- result{rep, err}
	}()
	if during != nil {
		during(finals)
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		// Say where the run stands: a rare hang needs more than "it hung".
		got, ferr := env.State.Finals(ctx, id)
		open, oerr := env.State.OpenRounds(ctx, id)
		var held []string
		herr := env.Queue.Held(ctx, queue.RunSubjects(id), func(subject string, _ []byte) { held = append(held, subject) })
		// Progress lines the coordinator wrote and no one read yet: with
		// those during read, how many finals it accepted.
		t.Fatalf("waited 2m0s for the run to finish: %d of %d finals in Redis (%v), %d accepted by the coordinator and unread, open rounds %+v (%v), the stream holds %d messages %v (%v)",
			len(got), len(examples), ferr, len(finals), open, oerr, len(held), held, herr)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	stop()
	for range 3 {
		if err := <-roles; err != nil {
			t.Errorf("a role stopped: %v", err)
		}
	}
	return r.rep
}

// TestRedisLosesItsLastWrites: Redis (no append-only file) is snapshotted
// mid-run, the run goes on for two more final answers, then Redis is
// SIGKILLed and restarted from the older snapshot, as when a lagging
// replica is promoted: the work recorded since (finished tasks, recorded
// results, decisions, a newly admitted example's round) is gone from Redis
// while JetStream has acknowledged it. The run must finish, every example
// with the undisturbed run's answer and all its candidates.
func TestRedisLosesItsLastWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	summary := func(rep *outputs.Report) map[string]string {
		out := map[string]string{}
		for _, e := range rep.Examples {
			out[e.InstanceID] = fmt.Sprintf("%s/%s/%d/%d", e.Status, e.Method, e.Candidates, e.ValidCandidates)
		}
		return out
	}
	clean := redisProcess(t, t.TempDir(), 0)
	want := summary(toyRun(t, ctx, natstest.Start(t).URL(), clean.URL(), "clean", nil))
	for id, s := range want {
		if s != "answered/toy_majority/3/3" {
			t.Fatalf("undisturbed run: %s: %s", id, s)
		}
	}

	dir := t.TempDir()
	srv := redisProcess(t, dir, 0)
	port, _ := strconv.Atoi(srv.Addr[strings.LastIndex(srv.Addr, ":")+1:])
	snapshot := filepath.Join(t.TempDir(), "snapshot.rdb")
	var lostFinals, accepted int
	rep := toyRun(t, ctx, natstest.Start(t).URL(), srv.URL(), "lossy", func(finals finalsSeen) {
		twait.Recv(t, time.Minute, "the first final answer", (<-chan struct{})(finals))
		accepted = 1
		c := redis.NewClient(srv.ClientOptions())
		if err := c.Save(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
		copyFile(t, filepath.Join(dir, "dump.rdb"), snapshot)
		// Finals already accepted (some may have been recorded before the
		// snapshot); the run goes on: what it records from now on will be
		// lost.
		accepted += len(finals)
		for range len(finals) {
			<-finals
		}
		for range 2 {
			twait.Recv(t, time.Minute, "two more final answers", (<-chan struct{})(finals))
			accepted++
		}
		sigkill(t, ctx, c0(srv))
		copyFile(t, snapshot, filepath.Join(dir, "dump.rdb"))
		srv = redisProcess(t, dir, port)
		c = redis.NewClient(srv.ClientOptions())
		defer c.Close()
		known, err := runstate.New(c).Finals(ctx, "lossy")
		if err != nil {
			t.Fatal(err)
		}
		lostFinals = accepted - len(known)
	})
	// Two finals were accepted after the snapshot (a third may have been
	// recorded just before it, and told just after).
	if lostFinals < 1 {
		t.Errorf("Redis came back with %d of the %d final answers accepted lost: the snapshot was not older", lostFinals, accepted)
	}
	if got := summary(rep); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after Redis lost its last writes: %v\nundisturbed: %v", got, want)
	}
	c := redis.NewClient(srv.ClientOptions())
	defer c.Close()
	if open, err := runstate.New(c).OpenRounds(ctx, "lossy"); err != nil || len(open) != 0 {
		t.Errorf("rounds left open: %v (%v)", open, err)
	}
	t.Logf("Redis restored from a snapshot %d final answers old; the run finished with the undisturbed answers", lostFinals)
}

// redisProcess starts redis-server in dir (no append-only file: a restart
// loads dir's dump.rdb) on port (0: a free one), stopped at cleanup.
func redisProcess(t *testing.T, dir string, port int) *localredis.Server {
	t.Helper()
	tier.Servers(t, "redis-server")
	s, err := localredis.Start(localredis.Options{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// c0 is a client of srv, closed at cleanup.
func c0(srv *localredis.Server) *redis.Client { return redis.NewClient(srv.ClientOptions()) }

// sigkill SIGKILLs the redis-server c is connected to (its pid from INFO),
// as a crashed machine would stop it: nothing is flushed.
func sigkill(t *testing.T, ctx context.Context, c *redis.Client) {
	t.Helper()
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(info, "process_id:")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if err != nil {
		t.Fatalf("no process_id in INFO server: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Gone once it no longer answers.
	twait.For(t, 30*time.Second, "redis-server to die", func() bool { return c.Ping(ctx).Err() != nil })
}
