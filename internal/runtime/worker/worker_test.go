package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/envtest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// job is the payload of the test agent's tasks.
type job struct {
	SQL string `json:"sql,omitempty"`
	// Fail is "permanent" (fails for good) or "always" (fails on every
	// delivery); Flaky fails the first Flaky deliveries.
	Fail  string `json:"fail,omitempty"`
	Flaky int    `json:"flaky,omitempty"`
	// Hold makes an answer task say it runs (tasker.running) and wait for
	// tasker.release.
	Hold bool `json:"hold,omitempty"`
	// Ref is the blob a fetch task reads (stash writes SQL there).
	Ref string `json:"ref,omitempty"`
}

// tasker is the agent the workers run; it counts each task's executions.
type tasker struct {
	mu      sync.Mutex
	execs   map[string]int
	running chan string
	release chan struct{}
}

func taskerDef() *agent.Definition {
	d := &agent.Definition{Name: "tasker", Doc: "tasks for the worker's tests",
		New: func(agent.Config) (agent.Agent, error) {
			return &tasker{execs: map[string]int{}, running: make(chan string, 16), release: make(chan struct{})}, nil
		}}
	agent.Register(&d.Kinds, "answer", agent.Generator, "run the payload's SQL as the slot's candidate", (*tasker).answer)
	agent.Register(&d.Kinds, "expand", agent.Explorer, "continue into an answer task", (*tasker).expand)
	agent.Register(&d.Kinds, "part", agent.Explorer, "one part of a fan-out", (*tasker).part)
	agent.Register(&d.Kinds, "gather", agent.Generator, "what the fan-out gathered", (*tasker).gather)
	agent.Register(&d.Kinds, "stash", agent.Explorer, "store the SQL as a blob and continue into a fetch", (*tasker).stash)
	agent.Register(&d.Kinds, "fetch", agent.Generator, "answer with the SQL of a stash's blob", (*tasker).fetch)
	return d
}

func (*tasker) Start(context.Context, *agent.Context) (*agent.Dispatch, error) { return nil, nil }
func (*tasker) Decide(context.Context, *agent.Context, int, []*agent.Candidate) (*agent.Decision, error) {
	return nil, errors.New("the worker's tests decide nothing")
}

// executed counts an execution of t and fails it as its payload says.
func (a *tasker) executed(t agent.Task, p job) error {
	a.mu.Lock()
	a.execs[t.ID]++
	n := a.execs[t.ID]
	a.mu.Unlock()
	switch {
	case p.Fail == "permanent":
		return agent.Permanent(fmt.Errorf("task %s cannot run", t.ID))
	case p.Fail == "always" || n <= p.Flaky:
		return fmt.Errorf("task %s failed on delivery %d", t.ID, n)
	}
	return nil
}

func (a *tasker) executions(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.execs[id]
}

func (a *tasker) answer(ctx context.Context, c *agent.Context, t agent.Task, p job) (*agent.Outcome, error) {
	if err := a.executed(t, p); err != nil {
		return nil, err
	}
	return a.query(ctx, c, t, p)
}

// query answers the slot with the payload's SQL.
func (a *tasker) query(ctx context.Context, c *agent.Context, t agent.Task, p job) (*agent.Outcome, error) {
	if p.Hold {
		a.running <- t.ID
		select {
		case <-a.release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	wh, err := c.Warehouse(ctx)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	res, err := wh.Query(ctx, p.SQL, warehouse.Limits{})
	c.Ledger.Stage("answer").Query(time.Millisecond, err != nil)
	if err != nil {
		return nil, agent.Permanent(err)
	}
	return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: p.SQL, Status: agent.StatusOK, Rows: res.RowCount(), CSV: res.CSV()}}}, nil
}

func (a *tasker) expand(_ context.Context, c *agent.Context, t agent.Task, p job) (*agent.Outcome, error) {
	if err := a.executed(t, p); err != nil {
		return nil, err
	}
	c.Ledger.Stage("expand").Call(llmUsage, false)
	next, err := agent.NewTask("answer", t.ID+".answer", t.Round, t.Slots, job{SQL: p.SQL})
	return &agent.Outcome{Next: []agent.Task{next}}, err
}

func (a *tasker) part(_ context.Context, c *agent.Context, t agent.Task, p job) (*agent.Outcome, error) {
	if err := a.executed(t, p); err != nil {
		return nil, err
	}
	c.Ledger.Stage("part").Call(llmUsage, false)
	return &agent.Outcome{Part: json.RawMessage(fmt.Sprint(t.Join.Part))}, nil
}

func (a *tasker) gather(ctx context.Context, c *agent.Context, t agent.Task, p job) (*agent.Outcome, error) {
	if err := a.executed(t, p); err != nil {
		return nil, err
	}
	parts, err := c.Store.Parts(ctx, "fan")
	if err != nil {
		return nil, err
	}
	var got []string
	for _, pt := range parts {
		if pt.Lost != "" {
			got = append(got, "lost")
			continue
		}
		got = append(got, string(pt.Value))
	}
	return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: strings.Join(got, ","), Status: agent.StatusEmpty}}}, nil
}

func (a *tasker) stash(ctx context.Context, c *agent.Context, t agent.Task, p job) (*agent.Outcome, error) {
	if err := a.executed(t, p); err != nil {
		return nil, err
	}
	c.Ledger.Stage("stash").Call(llmUsage, false)
	ref, err := c.Store.PutBlob(ctx, []byte(p.SQL))
	if err != nil {
		return nil, err
	}
	next, err := agent.NewTask("fetch", t.ID+".fetch", t.Round, t.Slots, job{Ref: ref, Hold: p.Hold})
	return &agent.Outcome{Next: []agent.Task{next}}, err
}

// fetch holds on its first run only, when the payload says so.
func (a *tasker) fetch(ctx context.Context, c *agent.Context, t agent.Task, p job) (*agent.Outcome, error) {
	if err := a.executed(t, p); err != nil {
		return nil, err
	}
	if p.Hold && a.executions(t.ID) == 1 {
		a.running <- t.ID
		select {
		case <-a.release:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	b, err := c.Store.GetBlob(ctx, p.Ref)
	if err != nil {
		return nil, err
	}
	return a.query(ctx, c, t, job{SQL: string(b)})
}

// llmUsage is what a handler's one LLM call cost.
var llmUsage = llm.Usage{PromptTokens: 10, CompletionTokens: 5, Attempts: 1}

// fixture is a generator and an explorer worker over real NATS and Redis,
// and the dataset their runs are on.
type fixture struct {
	env   *runenv.Env
	redis *redis.Client
	root  string
}

func start(t *testing.T) *fixture { return startLeasing(t, 0) }

// startLeasing starts the fixture with task leases of ttl (0: the
// default).
func startLeasing(t *testing.T, ttl time.Duration) *fixture {
	t.Helper()
	tier.Servers(t, "NATS and redis-server")
	reg, err := agent.NewRegistry(taskerDef())
	if err != nil {
		t.Fatal(err)
	}
	env, rc := envtest.StartRedis(t, reg, envtest.Options{Queue: queue.Config{MaxDeliver: 2, AckWait: 5 * time.Second}})
	f := &fixture{env: env, redis: rc,
		root: agenttest.NewDataset(t, "shop", "CREATE TABLE t (id INTEGER); INSERT INTO t VALUES (1), (2), (3);",
			agenttest.Question{ID: "local001", Question: "How many?"}).Dataset.Root}
	f.env.TaskLeaseTTL = ttl
	f.env.Incarnation = "this-start" // as the cluster assembly gives each process start
	for _, pool := range []agent.Pool{agent.Generator, agent.Explorer} {
		envtest.Go(t, string(pool)+" worker", func(ctx context.Context) error {
			return worker.Run(ctx, worker.Config{Env: f.env, Pool: pool, Warehouses: []string{"sqlite"}, Concurrency: 4,
				WorkConfig: queue.WorkConfig{RetryBase: 20 * time.Millisecond, DrainTimeout: time.Second}})
		})
	}
	return f
}

// run creates run id and returns it with its results as they are
// published; cancelled, it is an interactive run cancelled before its
// tasks are taken.
func (f *fixture) run(t *testing.T, id string, cancelled bool) (*runenv.Run, <-chan *message.CandidateResult) {
	t.Helper()
	return f.runWith(t, id, cancelled, cancelled)
}

// runWith is run, the run interactive (a question's) or not, cancelled or
// not.
func (f *fixture) runWith(t *testing.T, id string, interactive, cancelled bool) (*runenv.Run, <-chan *message.CandidateResult) {
	t.Helper()
	ctx := context.Background()
	m := &runstate.Manifest{Run: id, Dataset: f.root, Seed: 1, Examples: []string{"local001"}, Agent: "tasker", RoundTimeout: time.Minute,
		Created: time.Now(), Interactive: interactive}
	if _, _, err := f.env.State.CreateManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	if cancelled {
		if err := f.env.State.Cancel(ctx, id, "cancelled by the test"); err != nil {
			t.Fatal(err)
		}
	}
	run, err := f.env.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return run, envtest.Watch[message.CandidateResult](t, f.env, "results-"+id, queue.Subject(id, queue.StageResult, ""))
}

// open publishes tasks as round 0 of the run, as the coordinator does.
func (f *fixture) open(t *testing.T, run *runenv.Run, expect int, tasks ...agent.Task) {
	t.Helper()
	if err := f.env.Open(context.Background(), run, "local001", "tasker", "sqlite", &agent.Dispatch{Expect: expect, Tasks: tasks}); err != nil {
		t.Fatal(err)
	}
}

func task(t *testing.T, kind, id string, slots []int, p job) agent.Task {
	t.Helper()
	tk, err := agent.NewTask(kind, id, 0, slots, p)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestWorkerRunsTasks: a worker runs each task with its kind's handler and
// publishes its results, their rows stored as blobs and what the task
// cost; a task failing for good, or on every delivery, is a failed result
// in each of its slots; a failing delivery is followed by another; a task
// continues on its kind's pool carrying its cost; a join's continuation
// runs once every part is in, a lost part said.
func TestWorkerRunsTasks(t *testing.T) {
	t.Parallel()
	f := start(t)
	ctx := context.Background()
	const count = "SELECT COUNT(*) AS n FROM t"
	fan := func(t *testing.T) []agent.Task {
		then := task(t, "gather", "gather", []int{0}, job{})
		var parts []agent.Task
		for i, fail := range []string{"", "permanent", ""} {
			p := task(t, "part", fmt.Sprintf("part.%d", i), []int{0}, job{Fail: fail})
			p.Join = &agent.Join{Group: "fan", Part: i, Of: 3, Then: then}
			parts = append(parts, p)
		}
		return parts
	}
	for i, tc := range []struct {
		name  string
		tasks func(t *testing.T) []agent.Task
		// the results by slot: "status SQL", or "failed error"
		want   []string
		execs  map[string]int
		stages []string // the cost stages the first result carries
	}{
		{"a result, its rows stored", func(t *testing.T) []agent.Task {
			return []agent.Task{task(t, "answer", "a", []int{0}, job{SQL: count})}
		}, []string{"ok " + count}, map[string]int{"a": 1}, []string{"answer"}},
		{"a permanent failure fails every slot at once", func(t *testing.T) []agent.Task {
			return []agent.Task{task(t, "answer", "p", []int{0, 1}, job{Fail: "permanent"})}
		}, []string{"failed the answer task failed after 1 run (1 delivery): task p cannot run", "failed the answer task failed after 1 run (1 delivery): task p cannot run"},
			map[string]int{"p": 1}, nil},
		{"a task failing every delivery fails after the last", func(t *testing.T) []agent.Task {
			return []agent.Task{task(t, "answer", "f", []int{0}, job{Fail: "always"})}
		}, []string{"failed the answer task failed after 2 runs (2 deliveries): task f failed on delivery 2"}, map[string]int{"f": 2}, nil},
		{"a failed delivery is followed by another", func(t *testing.T) []agent.Task {
			return []agent.Task{task(t, "answer", "r", []int{0}, job{SQL: count, Flaky: 1})}
		}, []string{"ok " + count}, map[string]int{"r": 2}, []string{"answer"}},
		{"a continuation runs on its pool with the cost so far", func(t *testing.T) []agent.Task {
			return []agent.Task{task(t, "expand", "e", []int{0}, job{SQL: count})}
		}, []string{"ok " + count}, map[string]int{"e": 1, "e.answer": 1}, []string{"answer", "expand"}},
		{"a join continues once, with a lost part", fan,
			[]string{"empty 0,lost,2"}, map[string]int{"part.0": 1, "part.1": 1, "part.2": 1, "gather": 1}, []string{"part"}},
	} {
		id := fmt.Sprintf("case%d", i)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run, results := f.run(t, id, false)
			tasks := tc.tasks(t)
			f.open(t, run, len(tc.want), tasks...)
			got := make([]string, len(tc.want))
			var first *message.CandidateResult
			for range tc.want {
				r := wait.Recv(t, time.Minute, "a result", results)
				if r.Index >= len(got) || got[r.Index] != "" {
					t.Fatalf("result %+v: a slot out of range or twice", r)
				}
				if r.Cost != nil && first == nil {
					first = r
				}
				got[r.Index] = r.Status + " " + r.SQL
				if r.Status == agent.StatusFailed {
					got[r.Index] = r.Status + " " + r.Error
				}
				if r.Status == agent.StatusOK {
					if csv, err := f.env.Blobs.GetString(ctx, r.CSVRef); err != nil || csv != "n\n3\n" || r.Rows != 1 || r.Worker != "test" {
						t.Errorf("result %+v: rows %q (%v)", r, csv, err)
					}
				}
			}
			for slot, w := range tc.want {
				if got[slot] != w {
					t.Errorf("slot %d: %q, want %q", slot, got[slot], w)
				}
			}
			if tc.stages != nil && (first == nil || fmt.Sprint(first.Cost.Stages()) != fmt.Sprint(tc.stages)) {
				t.Errorf("the first result's cost %v, want stages %v", first, tc.stages)
			}
			tk := run.Agent.(*tasker)
			for id, n := range tc.execs {
				if got := tk.executions(id); got != n {
					t.Errorf("task %s executed %d times, want %d", id, got, n)
				}
			}
			// Each task is recorded done (just after its results).
			for _, x := range tasks {
				wait.For(t, time.Minute, "task "+x.ID+" recorded done", func() bool {
					done, err := f.env.State.Done(ctx, id, "local001", "tasker", x.ID)
					return err == nil && done
				})
			}
		})
	}
}

// TestWorkerSkipsWhatIsNotToRun: a redelivered task already done is
// acknowledged without running; a task of a question cancelled before it
// was taken is dropped, its slots recorded failed, never run.
func TestWorkerSkipsWhatIsNotToRun(t *testing.T) {
	t.Parallel()
	f := start(t)
	ctx := context.Background()
	t.Run("done", func(t *testing.T) {
		t.Parallel()
		run, results := f.run(t, "done", false)
		if err := f.env.State.MarkDone(ctx, "done", "local001", "tasker", "d"); err != nil {
			t.Fatal(err)
		}
		f.open(t, run, 2, task(t, "answer", "d", []int{0}, job{SQL: "SELECT 1 AS n"}), task(t, "answer", "after", []int{1}, job{SQL: "SELECT 2 AS n"}))
		if r := wait.Recv(t, time.Minute, "a result", results); r.Index != 1 {
			t.Errorf("result %+v, want only the task not done", r)
		}
		wait.For(t, time.Minute, "the done task acknowledged", func() bool {
			n, err := f.env.Queue.Pending(ctx, "generate-sqlite")
			return err == nil && n == 0
		})
		if n := run.Agent.(*tasker).executions("d"); n != 0 {
			t.Errorf("the done task ran %d times", n)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		run, results := f.run(t, "cancelled", true)
		f.open(t, run, 2, task(t, "answer", "c", []int{0, 1}, job{SQL: "SELECT 1 AS n"}))
		for range 2 {
			if r := wait.Recv(t, time.Minute, "a result", results); r.Status != agent.StatusFailed || r.Error != "cancelled by the client" {
				t.Errorf("result %+v, want failed: cancelled by the client", r)
			}
		}
		if n := run.Agent.(*tasker).executions("c"); n != 0 {
			t.Errorf("the cancelled task ran %d times", n)
		}
	})
}

// TestWorkerRefusesAnUnknownPool: a worker is for the generate or the
// explore pool.
func TestWorkerRefusesAnUnknownPool(t *testing.T) {
	t.Parallel()
	err := worker.Run(context.Background(), worker.Config{Pool: agent.Pool("gpu")})
	if err == nil || !strings.Contains(err.Error(), `worker pool "gpu"`) {
		t.Errorf("pool gpu: %v", err)
	}
}

// TestWorkerTakesBackALeaseRedisLost: a running task whose lease Redis
// lost (a failover to a replica that had not seen it) takes it back at its
// next renewal, under the same token, and runs on to its result, once.
func TestWorkerTakesBackALeaseRedisLost(t *testing.T) {
	t.Parallel()
	f := startLeasing(t, 900*time.Millisecond) // renewed every 300 ms
	ctx := context.Background()
	const count = "SELECT COUNT(*) AS n FROM t"
	run, results := f.run(t, "lostlease", false)
	f.open(t, run, 1, task(t, "answer", "h", []int{0}, job{SQL: count, Hold: true}))
	tk := run.Agent.(*tasker)
	wait.Recv(t, time.Minute, "the task running", (<-chan string)(tk.running))
	rc := f.redis
	key := rdb.TaskLeaseKey("lostlease", "local001", "tasker", "h")
	token, err := rc.Get(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Minute, "the lease taken back under its token", func() bool {
		v, err := rc.Get(ctx, key).Result()
		return err == nil && v == token
	})
	close(tk.release)
	r := wait.Recv(t, time.Minute, "the result", results)
	if r.Status != agent.StatusOK || r.Worker != "test" {
		t.Errorf("result %+v, want ok from the worker that held the task", r)
	}
	if n := tk.executions("h"); n != 1 {
		t.Errorf("the task ran %d times, want once: losing its lease to a failover stopped it", n)
	}
}

// TestWorkerRetriesAFailedInteractiveTask: a question's task that fails
// (an LLM error), its run not cancelled, is delivered again and answers,
// as a batch run's does; it was taken for cancelled and dropped, because
// ending the cancel watch cancelled the task's context.
func TestWorkerRetriesAFailedInteractiveTask(t *testing.T) {
	t.Parallel()
	f := start(t)
	run, results := f.runWith(t, "flakyquestion", true, false)
	f.open(t, run, 1, task(t, "answer", "f", []int{0}, job{SQL: "SELECT COUNT(*) AS n FROM t", Flaky: 1}))
	r := wait.Recv(t, time.Minute, "the task's result", results)
	if r.Status != agent.StatusOK {
		t.Errorf("result %s (%q), want ok from the second delivery", r.Status, r.Error)
	}
	if n := run.Agent.(*tasker).executions("f"); n != 2 {
		t.Errorf("the task ran %d times, want twice (one failure, one answer)", n)
	}
}

// TestWorkerTakesOverItsPredecessorsLease: a task whose lease an earlier
// start of the worker's process holds (its name, another incarnation: it
// died holding it) runs at once, not after the lease's TTL (an hour here);
// one held under another name is waited for until that holder lets go.
func TestWorkerTakesOverItsPredecessorsLease(t *testing.T) {
	t.Parallel()
	f := startLeasing(t, time.Hour)
	ctx := context.Background()
	const count = "SELECT COUNT(*) AS n FROM t"
	run, results := f.run(t, "predecessor", false)
	held := func(id, owner string) *rdb.Lease {
		l := rdb.NewLease(f.redis, rdb.TaskLeaseKey("predecessor", "local001", "tasker", id), owner, time.Hour)
		if ok, err := l.Acquire(ctx); err != nil || !ok {
			t.Fatalf("holding task %s's lease as %s: %v %v", id, owner, ok, err)
		}
		return l
	}
	held("p", f.env.Name+"#an-earlier-start")
	other := held("q", "another-process#its-start")
	f.open(t, run, 2, task(t, "answer", "p", []int{0}, job{SQL: count}), task(t, "answer", "q", []int{1}, job{SQL: count}))
	tk := run.Agent.(*tasker)
	r := wait.Recv(t, time.Minute, "task p's result", results)
	if r.Status != agent.StatusOK || r.Index != 0 {
		t.Fatalf("first result %+v, want task p's (slot 0), ok: its predecessor's lease was not taken over", r)
	}
	if n := tk.executions("q"); n != 0 {
		t.Fatalf("task q ran %d times while another process held its lease", n)
	}
	if err := other.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if r := wait.Recv(t, time.Minute, "task q's result", results); r.Status != agent.StatusOK || r.Index != 1 {
		t.Errorf("second result %+v, want task q's (slot 1), ok", r)
	}
	for _, id := range []string{"p", "q"} {
		if n := tk.executions(id); n != 1 {
			t.Errorf("task %s ran %d times, want once", id, n)
		}
	}
}

// TestWorkerRerunsTheProducerOfALostInput: a continuation whose input blob
// Redis lost (a rollback after the continuation was published) does not
// fail its slot: the task that wrote the blob runs again and publishes the
// continuation anew, which answers; the slot gets one result, carrying
// what both runs of the producer cost.
func TestWorkerRerunsTheProducerOfALostInput(t *testing.T) {
	t.Parallel()
	f := start(t)
	ctx := context.Background()
	const count = "SELECT COUNT(*) AS n FROM t"
	run, results := f.run(t, "lostblob", false)
	f.open(t, run, 1, task(t, "stash", "s", []int{0}, job{SQL: count, Hold: true}))
	tk := run.Agent.(*tasker)
	wait.Recv(t, time.Minute, "the continuation running", (<-chan string)(tk.running))
	if err := f.redis.Del(ctx, rdb.BlobKey(blob.Ref([]byte(count)))).Err(); err != nil {
		t.Fatal(err)
	}
	close(tk.release)
	r := wait.Recv(t, time.Minute, "the result", results)
	if r.Status != agent.StatusOK || r.SQL != count || r.Rows != 1 {
		t.Errorf("result %+v, want the stashed query's ok result", r)
	}
	if r.Reissue == 0 {
		t.Errorf("the result carries no reissue stamp: it did not come from the producer's new run")
	}
	if got := r.Cost["stash"]; got == nil || got.LLMCalls != 2 {
		t.Errorf("the result carries the stash stage's cost %+v, want both runs' 2 calls", got)
	}
	for id, want := range map[string]int{"s": 2, "s.fetch": 2} {
		if n := tk.executions(id); n != want {
			t.Errorf("task %s ran %d times, want %d", id, n, want)
		}
	}
	select {
	case extra := <-results:
		t.Errorf("a second result for the slot: %+v", extra)
	default:
	}
}
