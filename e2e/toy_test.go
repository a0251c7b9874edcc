package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/blob"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/coordinator"
	"github.com/quorumsql/quorum/pkg/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/runtime/voter"
	"github.com/quorumsql/quorum/pkg/runtime/worker"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// toy is a test-only agent that proves the seam carries any agent: a
// "count" task on the explore pool counts a table's rows, then continues
// into one "answer" task per slot on the generate pool, which writes the
// SQL and runs it; one decision step picks the answer most candidates agree
// on.
type toy struct {
	votes int
	// hold is how long an answer task runs, so that a worker can be killed
	// in the middle of one.
	hold time.Duration
}

func toyDefinition(hold time.Duration) *agent.Definition {
	return &agent.Definition{Name: "toy", Doc: "test agent: count, then answer",
		Kinds: []agent.Kind{{Name: "count", Pool: agent.Explorer}, {Name: "answer", Pool: agent.Generator}},
		New:   func(c agent.Config) (agent.Agent, error) { return &toy{votes: c.Votes, hold: hold}, nil }}
}

type toyPayload struct {
	Table string `json:"table"`
	Rows  string `json:"rows,omitempty"`
}

func (a *toy) Start(_ context.Context, c *agent.Context) (*agent.Dispatch, error) {
	t, err := agent.NewTask("count", "count", 0, agent.Range(0, a.votes), toyPayload{Table: "customers"})
	return &agent.Dispatch{Round: 0, Expect: a.votes, Tasks: []agent.Task{t}}, err
}

func (a *toy) Execute(ctx context.Context, c *agent.Context, t agent.Task) (*agent.Outcome, error) {
	var p toyPayload
	if err := t.Decode(&p); err != nil {
		return nil, agent.Permanent(err)
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	sql := "SELECT COUNT(*) AS n FROM " + p.Table
	start := time.Now()
	res, err := wh.Query(ctx, sql, warehouse.Limits{MaxRows: 10})
	c.Ledger.Stage(t.Kind).Query(time.Since(start), err != nil)
	if err != nil {
		return nil, err
	}
	if t.Kind == "count" {
		out := &agent.Outcome{}
		for _, slot := range t.Slots {
			n, err := agent.NewTask("answer", fmt.Sprintf("answer.%d", slot), 0, []int{slot}, toyPayload{Table: p.Table, Rows: res.CSV()})
			if err != nil {
				return nil, err
			}
			out.Next = append(out.Next, n)
		}
		return out, nil
	}
	// Tell the test this worker is inside an answer task, then hold it.
	if err := c.Store.Set(ctx, "running:"+c.Worker, t.ID); err != nil {
		return nil, err
	}
	select {
	case <-time.After(a.hold):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: sql, Status: agent.StatusOK, Rows: res.RowCount(),
		CSV: res.CSV(), Payload: json.RawMessage(`{"worker":"` + c.Worker + `"}`)}}}, nil
}

func (a *toy) Decide(_ context.Context, _ *agent.Context, _ int, cands []*agent.Candidate) (*agent.Decision, error) {
	votes := map[string][]int{}
	best := ""
	for _, c := range cands {
		if c.Status != agent.StatusOK {
			continue
		}
		votes[c.CSV] = append(votes[c.CSV], c.Index)
		if len(votes[c.CSV]) > len(votes[best]) {
			best = c.CSV
		}
	}
	d := &agent.Decision{Confidence: "low", Method: "toy_majority", Agreed: votes[best]}
	for _, c := range cands {
		d.Valid += map[bool]int{true: 1}[c.Status == agent.StatusOK]
		if d.Winner == nil && c.Status == agent.StatusOK && c.CSV == best {
			d.Winner = c
		}
	}
	if len(votes[best]) >= 2 {
		d.Confidence = "high"
	}
	return d, nil
}

// toyEnv connects one process's environment with the toy agent.
func toyEnv(t testing.TB, natsURL, redisURL, name string, hold time.Duration) (*runenv.Env, func()) {
	q, err := queue.Connect(context.Background(), natsURL, queue.Config{AckWait: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	reg, err := agent.NewRegistry(toyDefinition(hold))
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
	env, closeEnv := toyEnv(&exitTB{}, os.Getenv("TOY_NATS_URL"), os.Getenv("TOY_REDIS_URL"), os.Getenv("TOY_WORKER"), 30*time.Second)
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

// TestToyAgentThroughTheRuntime runs a second agent, with two task kinds on
// both pools and one decision step, through the real runtime (embedded
// NATS JetStream, real redis-server): a generator worker process is
// SIGKILLed inside an answer task, its task is redelivered to the surviving
// worker, and every example ends with exactly one answer from exactly its
// expected candidates.
func TestToyAgentThroughTheRuntime(t *testing.T) {
	natsURL, redisURL := natstest.Start(t).URL(), redistest.Start(t).URL()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The victim: a separate process that holds every answer task it takes.
	victim := exec.Command(os.Args[0], "-test.run=^$")
	victim.Env = append(os.Environ(), "QUORUM_E2E_TOY_WORKER=1", "TOY_NATS_URL="+natsURL, "TOY_REDIS_URL="+redisURL, "TOY_WORKER=victim")
	logs := t.TempDir()
	logf, _ := os.Create(filepath.Join(logs, "victim.log"))
	defer logf.Close()
	victim.Stdout, victim.Stderr = logf, logf
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })

	env, closeEnv := toyEnv(t, natsURL, redisURL, "survivor", 50*time.Millisecond)
	defer closeEnv()
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	wc := queue.WorkConfig{DrainTimeout: time.Second, RetryBase: 100 * time.Millisecond}
	go voter.Run(wctx, voter.Config{Env: env, Concurrency: 4, WorkConfig: wc})
	go worker.Run(wctx, worker.Config{Env: env, Pool: agent.Explorer, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})

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

	// Kill the victim once it is inside an answer task.
	held := ""
	for held == "" {
		select {
		case <-ctx.Done():
			t.Fatal("the victim worker never started an answer task")
		case <-time.After(20 * time.Millisecond):
		}
		for _, ex := range examples {
			if v, ok, _ := env.State.Get(ctx, "toy", ex, "toy", "running:victim"); ok {
				held = ex + "/" + v
			}
		}
	}
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	// Only now may the survivor take answer tasks: the victim's unacked
	// ones must come back to it by redelivery.
	go worker.Run(wctx, worker.Config{Env: env, Pool: agent.Generator, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})

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
	ex, taskID, _ := strings.Cut(held, "/")
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
