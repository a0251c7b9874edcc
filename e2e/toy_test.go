package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/voter"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/toyagent"
	waitfor "github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// toyEnv connects one process's environment with the toy agent.
func toyEnv(t testing.TB, natsURL, redisURL, name string, hold time.Duration, maxDeliver int) (*runenv.Env, func()) {
	q, err := queue.Connect(context.Background(), natsURL, queue.Config{AckWait: 2 * time.Second, MaxDeliver: maxDeliver})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	reg, err := agent.NewRegistry(toyagent.Definition(toyagent.Config{Hold: hold}))
	if err != nil {
		t.Fatal(err)
	}
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), Agents: reg, Cache: runstate.NewCache(rdb),
		Log: zap.NewNop(), Name: name}
	return env, func() { env.Close(); q.Close(); rdb.Close() }
}

// toyWorkerMain is the body of a re-executed test binary: a generator
// worker running the toy agent until it is killed.
func toyWorkerMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	maxDeliver, _ := strconv.Atoi(os.Getenv("TOY_MAX_DELIVER"))
	env, closeEnv := toyEnv(&exitTB{}, os.Getenv("TOY_NATS_URL"), os.Getenv("TOY_REDIS_URL"), os.Getenv("TOY_WORKER"), 30*time.Second, maxDeliver)
	defer closeEnv()
	if err := worker.Run(ctx, worker.Config{Env: env, Pool: agent.Generator, Warehouses: []string{"sqlite"}, Concurrency: 2}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// exitTB is the testing.TB a re-executed worker uses: failing exits.
type exitTB struct{ testing.TB }

func (exitTB) Fatal(args ...any) { fmt.Fprintln(os.Stderr, args...); os.Exit(2) }

// TestToyAgentThroughTheRuntime runs a second agent (internal/testutil/
// toyagent: two task kinds on both pools, one decision step) through the real runtime (embedded
// NATS JetStream, real redis-server): a generator worker process is
// SIGKILLed inside an answer task, its task is redelivered to the surviving
// worker, and every example ends with exactly one answer from exactly its
// expected candidates.
func TestToyAgentThroughTheRuntime(t *testing.T) {
	natsURL, redisURL := natstest.Start(t).URL(), redistest.Start(t).URL()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The victim: a separate process that holds every answer task it takes.
	victim := startVictim(t, natsURL, redisURL, 0)
	env, closeEnv := toyEnv(t, natsURL, redisURL, "survivor", 50*time.Millisecond, 0)
	defer closeEnv()
	startGenerator := survivor(t, ctx, env)

	examples := []string{"local001", "local002", "local003", "local004", "local005", "local006"}
	m := &runstate.Manifest{Run: "toy", Dataset: demoDir(t), Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: 5 * time.Minute, Created: time.Now()}
	out := filepath.Join(t.TempDir(), "out")
	type result struct {
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, err := coordinator.Run(ctx, coordinator.Config{Env: env, Manifest: m, Out: out})
		done <- result{err}
	}()

	// Kill the victim once it is inside an answer task; only then may the
	// survivor take answer tasks: the victim's must come back by redelivery.
	ex, taskID := killInsideAnswer(t, ctx, env, victim, "toy", examples)
	startGenerator()

	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	got := readOutputs(t, out)
	if len(got.examples) != len(examples) {
		t.Fatalf("%d examples final, want %d", len(got.examples), len(examples))
	}
	for id, s := range got.examples {
		if s != "answered/toy_majority/3" {
			t.Errorf("%s: %s, want answered/toy_majority/3", id, s)
		}
		csv := got.files[id+".csv"]
		if !strings.HasPrefix(csv, "n\n") {
			t.Errorf("%s.csv = %q, want the row count", id, csv)
		}
	}
	// The held task was finished by the survivor, once.
	results, err := env.State.Results(ctx, "toy", ex, "toy", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Errorf("%s has %d recorded results, want 3", ex, len(results))
	}
	var slot int
	fmt.Sscanf(taskID, "answer.%d", &slot)
	for _, res := range results {
		if res.Index == slot && res.Worker != "survivor" {
			t.Errorf("the killed task %s of %s was recorded by %s, want the survivor", taskID, ex, res.Worker)
		}
	}
	t.Logf("victim killed inside %s of %s; every example answered from 3 candidates", taskID, ex)
}

// TestLastDeliveryKilledIsAccountedFor: with one run allowed, a worker
// process SIGKILLed while holding a task leaves no process to give it up;
// the task is delivered again (a run killed is not a failed run, and the
// consumer allows deliveries beyond --max-deliver for those that die), so
// the example is answered from all its candidates at once instead of
// waiting out the round deadline.
func TestLastDeliveryKilledIsAccountedFor(t *testing.T) {
	natsURL, redisURL := natstest.Start(t).URL(), redistest.Start(t).URL()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	victim := startVictim(t, natsURL, redisURL, 1)
	env, closeEnv := toyEnv(t, natsURL, redisURL, "survivor", 50*time.Millisecond, 1)
	defer closeEnv()
	startGenerator := survivor(t, ctx, env)
	examples := []string{"local001", "local002", "local003"}
	// A round deadline far beyond the test's own: only the advisory can
	// complete the round in time.
	m := &runstate.Manifest{Run: "lastdelivery", Dataset: demoDir(t), Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: time.Hour, Created: time.Now()}
	done := make(chan error, 1)
	var rep *outputs.Report
	go func() {
		var err error
		rep, err = coordinator.Run(ctx, coordinator.Config{Env: env, Manifest: m, Out: filepath.Join(t.TempDir(), "out")})
		done <- err
	}()
	held, _ := killInsideAnswer(t, ctx, env, victim, "lastdelivery", examples)
	startGenerator()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Examples {
		if e.Status != "answered" || e.Candidates != 3 || e.ValidCandidates != 3 {
			t.Errorf("%s: %s from %d candidates, %d valid (%s)", e.InstanceID, e.Status, e.Candidates, e.ValidCandidates, e.Error)
		}
	}
	results, err := env.State.Results(ctx, "lastdelivery", held, "toy", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Worker != "survivor" {
			t.Errorf("%s candidate %d recorded by %s: the victim's task was not run again", held, r.Index, r.Worker)
		}
	}
	if open, err := env.State.OpenRounds(ctx, "lastdelivery"); err != nil || len(open) != 0 {
		t.Errorf("rounds left open: %v (%v)", open, err)
	}
}

// TestDeliveriesThatNeverStartSpendNothing: with one delivery per task,
// generator processes SIGKILLed one after another while the answer tasks'
// leases are held by a holder that died (each delivery waits for the
// lease, runs nothing and dies) spend none of the tasks' budget: more
// kills than the old count of deliveries allowed (3, then recorded
// failed) with both tasks held at each, and once the leases are free every candidate is answered, by
// the generator started last.
func TestDeliveriesThatNeverStartSpendNothing(t *testing.T) {
	natsURL, redisURL := natstest.Start(t).URL(), redistest.Start(t).URL()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	env, closeEnv := toyEnv(t, natsURL, redisURL, "survivor", 50*time.Millisecond, 1)
	defer closeEnv()
	startGenerator := survivor(t, ctx, env)
	const run, ex = "unstarted", "local001"
	// Two answer tasks: a generator (of concurrency 2) holds both at once.
	m := &runstate.Manifest{Run: run, Dataset: demoDir(t), Seed: 1, Votes: 2, Examples: []string{ex}, Agent: "toy",
		RoundTimeout: time.Hour, Created: time.Now()}
	done := make(chan error, 1)
	var rep *outputs.Report
	var ended atomic.Bool
	go func() {
		var err error
		rep, err = coordinator.Run(ctx, coordinator.Config{Env: env, Manifest: m, Out: filepath.Join(t.TempDir(), "out")})
		ended.Store(true)
		done <- err
	}()
	// The answer tasks, once the count task continued into them, get a
	// holder that died: their leases held, never renewed by anyone.
	var answers []string
	waitfor.For(t, 2*time.Minute, "the answer tasks logged", func() bool {
		tasks, err := env.State.Tasks(ctx, run, ex, "toy")
		answers = answers[:0]
		for _, x := range tasks {
			if x.Task.Kind == "answer" {
				answers = append(answers, x.Task.ID)
			}
		}
		return err == nil && len(answers) == 2
	})
	rc := redis.NewClient(&redis.Options{Addr: strings.TrimPrefix(redisURL, "redis://")})
	defer rc.Close()
	leases := make([]string, len(answers))
	for i, id := range answers {
		leases[i] = rdb.TaskLeaseKey(run, ex, "toy", id)
		if err := rc.Set(ctx, leases[i], "dead/holder", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const kills = 4
	st := workStream(t, natsURL)
	for k := range kills {
		before := deliveries(t, st, string(agent.Generator)+"-")
		victim := startVictimNamed(t, natsURL, redisURL, 1, fmt.Sprintf("waiter-%d", k))
		waitfor.For(t, 2*time.Minute, "the new generator given both answer tasks", func() bool {
			if ended.Load() {
				t.Fatalf("the run ended after %d generators died waiting for the leases: their deliveries, which never started the tasks, spent the tasks' budget", k)
			}
			return deliveries(t, st, string(agent.Generator)+"-") >= before+2
		})
		if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = victim.Wait()
	}
	for _, id := range answers {
		if n, err := env.State.TaskRuns(ctx, run, ex, "toy", id); err != nil || n != 0 {
			t.Errorf("task %s: %d runs counted (%v), want 0: no delivery started it", id, n, err)
		}
	}
	if err := rc.Del(ctx, leases...).Err(); err != nil {
		t.Fatal(err)
	}
	startGenerator()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Examples {
		if e.Status != "answered" || e.Candidates != 2 || e.ValidCandidates != 2 {
			t.Errorf("%s: %s from %d candidates, %d valid (%s); want answered from 2 valid after %d deliveries each that never started",
				e.InstanceID, e.Status, e.Candidates, e.ValidCandidates, e.Error, kills)
		}
	}
	results, err := env.State.Results(ctx, run, ex, "toy", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Worker != "survivor" {
			t.Errorf("candidate %d recorded by %s (%s), want the survivor's answer", r.Index, r.Worker, r.Error)
		}
	}
}

// deliveries counts the deliveries made by the work stream's consumers
// whose names begin with prefix.
func deliveries(t *testing.T, st jetstream.Stream, prefix string) uint64 {
	t.Helper()
	var n uint64
	for info := range st.ListConsumers(context.Background()).Info() {
		if strings.HasPrefix(info.Name, prefix) {
			n += info.Delivered.Consumer
		}
	}
	return n
}

// startVictim re-executes the test binary as a generator worker running the
// toy agent, holding every answer task it takes, to be SIGKILLed.
func startVictim(t *testing.T, natsURL, redisURL string, maxDeliver int) *exec.Cmd {
	return startVictimNamed(t, natsURL, redisURL, maxDeliver, "victim")
}

func startVictimNamed(t *testing.T, natsURL, redisURL string, maxDeliver int, name string) *exec.Cmd {
	t.Helper()
	victim := exec.Command(os.Args[0], "-test.run=^$")
	victim.Env = append(os.Environ(), "QUORUM_E2E_TOY_WORKER=1", "TOY_NATS_URL="+natsURL, "TOY_REDIS_URL="+redisURL,
		"TOY_WORKER="+name, "TOY_MAX_DELIVER="+strconv.Itoa(maxDeliver))
	logf, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	victim.Stdout, victim.Stderr = logf, logf
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait(); logf.Close() })
	return victim
}

// survivor runs the voter and an explorer worker of env until the test
// ends; the generator worker is started later, when the victim is dead.
func survivor(t *testing.T, ctx context.Context, env *runenv.Env) (startGenerator func()) {
	wctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	wc := queue.WorkConfig{DrainTimeout: time.Second, RetryBase: 100 * time.Millisecond}
	go voter.Run(wctx, voter.Config{Env: env, Concurrency: 4, WorkConfig: wc})
	go worker.Run(wctx, worker.Config{Env: env, Pool: agent.Explorer, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})
	return func() {
		go worker.Run(wctx, worker.Config{Env: env, Pool: agent.Generator, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})
	}
}

// killInsideAnswer waits until the victim holds an answer task of one of
// the examples, SIGKILLs it, and returns the example and the task.
func killInsideAnswer(t *testing.T, ctx context.Context, env *runenv.Env, victim *exec.Cmd, run string, examples []string) (string, string) {
	t.Helper()
	for {
		select {
		case <-ctx.Done():
			t.Fatal("the victim worker never started an answer task")
		case <-time.After(20 * time.Millisecond):
		}
		for _, ex := range examples {
			if task, ok, _ := env.State.Get(ctx, run, ex, "toy", "running:victim"); ok {
				if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				_ = victim.Wait()
				return ex, task
			}
		}
	}
}
