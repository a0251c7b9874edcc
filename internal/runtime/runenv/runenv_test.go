package runenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/envtest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// echo is an agent of a kind on each pool that is never run here: the
// environment only builds it, routes its tasks and lends it a store.
type echo struct{ votes int }

func echoDef() *agent.Definition {
	d := &agent.Definition{Name: "echo", Doc: "the environment's test agent",
		Options: []agent.Option{{Name: agent.OptVotes, Default: "2", Usage: "candidates"}},
		New: func(c agent.Config) (agent.Agent, error) {
			r := agent.OptionReader{Agent: "echo", Opts: c.Options}
			a := &echo{}
			r.Int(agent.OptVotes, &a.votes, 1)
			return a, r.Err()
		}}
	noop := func(*echo, context.Context, *agent.Context, agent.Task, struct{}) (*agent.Outcome, error) {
		return nil, nil
	}
	agent.Register(&d.Kinds, "gen", agent.Generator, "on the generate pool", noop)
	agent.Register(&d.Kinds, "look", agent.Explorer, "on the explore pool", noop)
	return d
}

func (*echo) Start(context.Context, *agent.Context) (*agent.Dispatch, error) { return nil, nil }
func (*echo) Decide(context.Context, *agent.Context, int, []*agent.Candidate) (*agent.Decision, error) {
	return nil, nil
}

// newEnv is an environment running echo over real NATS and Redis, and the
// dataset its runs are on.
func newEnv(t *testing.T) (*runenv.Env, string) {
	t.Helper()
	tier.Servers(t, "NATS and redis-server")
	reg, err := agent.NewRegistry(echoDef())
	if err != nil {
		t.Fatal(err)
	}
	env := envtest.Start(t, reg, envtest.Options{})
	f := agenttest.NewDataset(t, "shop", "CREATE TABLE t (id INTEGER); INSERT INTO t VALUES (1), (2);",
		agenttest.Question{ID: "local001", Question: "How many?"}, agenttest.Question{ID: "local002", Question: "Which?"})
	return env, f.Dataset.Root
}

func manifest(t *testing.T, env *runenv.Env, m *runstate.Manifest) {
	t.Helper()
	if m.Agent == "" {
		m.Agent = "echo"
	}
	if m.RoundTimeout == 0 {
		m.RoundTimeout = time.Minute
	}
	if _, _, err := env.State.CreateManifest(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// TestRunIsBuiltFromItsManifest: a run's agent is built with the
// manifest's options, its votes filling the votes option they leave
// unset; what the manifest gets wrong is an error naming it, and what no
// redelivery can fix (a run or example that does not exist, another
// agent's task) is permanent.
func TestRunIsBuiltFromItsManifest(t *testing.T) {
	t.Parallel()
	env, root := newEnv(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		m         *runstate.Manifest
		votes     int
		err       string
		permanent bool
	}{
		{"defaults", &runstate.Manifest{Run: "defaults"}, 2, "", false},
		{"the run's votes", &runstate.Manifest{Run: "votes", Votes: 5}, 5, "", false},
		{"the option over the run's votes", &runstate.Manifest{Run: "option", Votes: 5, AgentOptions: map[string]string{agent.OptVotes: "3"}}, 3, "", false},
		{"an unknown agent", &runstate.Manifest{Run: "unknown", Agent: "nosuch"}, 0, `run unknown: unknown agent "nosuch": the agents are echo`, false},
		{"an undeclared option", &runstate.Manifest{Run: "undeclared", AgentOptions: map[string]string{"x": "1"}}, 0, `agent echo has no option "x"`, false},
		{"a bad option", &runstate.Manifest{Run: "bad", AgentOptions: map[string]string{agent.OptVotes: "0"}}, 0, "run bad: agent echo: echo option votes=0: use 1 or more", false},
	} {
		tc.m.Dataset, tc.m.Examples = root, []string{"local001"}
		manifest(t, env, tc.m)
		run, ex, err := env.Example(ctx, tc.m.Run, "local001")
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && (run.Agent.(*echo).votes != tc.votes || ex.ID != "local001" || run.Def.Name != "echo"):
			t.Errorf("%s: votes %d, example %s; want %d", tc.name, run.Agent.(*echo).votes, ex.ID, tc.votes)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"a run that does not exist", func() error { _, _, err := env.Example(ctx, "ghost", "local001"); return err }()},
		{"an example not in the dataset", func() error { _, _, err := env.Example(ctx, "defaults", "local999"); return err }()},
		{"another agent's task", func() error {
			run, _ := env.Run(ctx, "defaults")
			_, _, err := run.AgentFor("reforce")
			return err
		}()},
	} {
		if !queue.IsPermanent(tc.err) {
			t.Errorf("%s: %v, want a permanent error", tc.name, tc.err)
		}
	}
	env.Forget("defaults")
	if env.Cached("defaults") {
		t.Error("a forgotten run is still cached")
	}
	if _, err := env.Run(ctx, "defaults"); err != nil || !env.Cached("defaults") {
		t.Errorf("a forgotten run is not built again: %v", err)
	}
}

// TestWarehouseAndRoute: a run opens its examples' warehouses (with the
// manifest's query timeout) and routes their tasks by dialect.
func TestWarehouseAndRoute(t *testing.T) {
	t.Parallel()
	env, root := newEnv(t)
	ctx := context.Background()
	manifest(t, env, &runstate.Manifest{Run: "wh", Dataset: root, Examples: []string{"local001"}, QueryTimeout: 5 * time.Second})
	run, ex, err := env.Example(ctx, "wh", "local001")
	if err != nil {
		t.Fatal(err)
	}
	wh, err := run.Warehouse(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := wh.(*warehouse.WithTimeout); !ok || w.Timeout != 5*time.Second {
		t.Errorf("warehouse %T, want the query timeout applied", wh)
	}
	if res, err := wh.Query(ctx, "SELECT COUNT(*) AS n FROM t", warehouse.Limits{}); err != nil || res.CSV() != "n\n2\n" {
		t.Errorf("query: %v", err)
	}
	// A run's timeout is its pools' own, so one longer than SQLite's
	// default of 60 s is not capped by it.
	for _, m := range []*runstate.Manifest{{Run: "wh-long", QueryTimeout: 5 * time.Minute}, {Run: "wh", QueryTimeout: 5 * time.Second}} {
		if m.Run != "wh" {
			m.Dataset, m.Examples = root, []string{"local001"}
			manifest(t, env, m)
		}
		r, e, err := env.Example(ctx, m.Run, "local001")
		if err != nil {
			t.Fatal(err)
		}
		w, err := r.Warehouse(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		wt, ok := w.(*warehouse.WithTimeout)
		if !ok {
			t.Fatalf("run %s: warehouse %T, want the query timeout applied", m.Run, w)
		}
		db, ok := wt.W.(*sqlite.DB)
		if !ok {
			t.Fatalf("run %s: warehouse under the timeout %T, want the SQLite pool", m.Run, wt.W)
		}
		if got := db.QueryTimeout(); got != m.QueryTimeout {
			t.Errorf("run %s (--query-timeout %s): its SQLite pool bounds a query at %s, want the run's timeout", m.Run, m.QueryTimeout, got)
		}
	}
	if route, err := run.Route(ex); err != nil || route != "sqlite" {
		t.Errorf("route %q, %v", route, err)
	}
	c := env.Context(run, ex, "echo")
	if w, err := c.Warehouse(ctx); err != nil || w == nil {
		t.Errorf("the context's warehouse: %v", err)
	}
	if c.Run != "wh" || c.Worker != "test" || c.Ledger == nil || c.Log == nil {
		t.Errorf("context %+v", c)
	}
}

// TestStoreIsScoped: the store an agent gets is its example's and
// agent's within its run (Once computing once), blobs are shared.
func TestStoreIsScoped(t *testing.T) {
	t.Parallel()
	env, root := newEnv(t)
	ctx := context.Background()
	for _, id := range []string{"s1", "s2"} {
		manifest(t, env, &runstate.Manifest{Run: id, Dataset: root, Examples: []string{"local001", "local002"}})
	}
	store := func(run, ex string) agent.Store {
		r, e, err := env.Example(ctx, run, ex)
		if err != nil {
			t.Fatal(err)
		}
		return env.Context(r, e, "echo").Store
	}
	a := store("s1", "local001")
	if err := a.Set(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := store("s1", "local001").Get(ctx, "k"); v != "v" || !ok || err != nil {
		t.Errorf("the same example's store: %q %v %v", v, ok, err)
	}
	for _, other := range []agent.Store{store("s1", "local002"), store("s2", "local001")} {
		if _, ok, _ := other.Get(ctx, "k"); ok {
			t.Error("another example's or run's store sees the value")
		}
	}
	calls := 0
	for range 2 {
		v, err := a.Once(ctx, "info", func(context.Context) (string, error) { calls++; return "built", nil })
		if err != nil || v != "built" {
			t.Errorf("Once: %q, %v", v, err)
		}
	}
	if calls != 1 {
		t.Errorf("Once computed %d times", calls)
	}
	ref, err := a.PutBlob(ctx, []byte("a\n1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := store("s2", "local002").GetBlob(ctx, ref); err != nil || string(b) != "a\n1\n" {
		t.Errorf("a blob from another store: %q, %v", b, err)
	}
}

// TestRoundsAndTasks: Open records a round and publishes its tasks, each
// to its kind's pool (an interactive run's to the pool's urgent lane); an
// undeclared kind is refused; a join's last part publishes its
// continuation once, with every part's cost; a task given up is a failed
// result in each slot, its cost carried once, or a lost part of its join.
func TestRoundsAndTasks(t *testing.T) {
	t.Parallel()
	env, root := newEnv(t)
	ctx := context.Background()
	manifest(t, env, &runstate.Manifest{Run: "batch", Dataset: root, Examples: []string{"local001"}})
	manifest(t, env, &runstate.Manifest{Run: "asked", Dataset: root, Examples: []string{"local001"}, Interactive: true})
	gen := envtest.Watch[message.Task](t, env, "gen", queue.Subject("batch", string(agent.Generator), "sqlite"))
	look := envtest.Watch[message.Task](t, env, "look", queue.Subject("batch", string(agent.Explorer), "sqlite"))
	urgent := envtest.Watch[message.Task](t, env, "urgent", queue.Subject("asked", queue.Urgent(string(agent.Generator)), "sqlite"))
	results := envtest.Watch[message.CandidateResult](t, env, "results", queue.Subject("batch", queue.StageResult, ""))
	task := func(kind, id string, slots ...int) agent.Task {
		tk, err := agent.NewTask(kind, id, 0, slots, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	batch, err := env.Run(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Open(ctx, batch, "local001", "echo", "sqlite", &agent.Dispatch{Expect: 2, Tasks: []agent.Task{task("gen", "g", 0), task("look", "l", 1)}}); err != nil {
		t.Fatal(err)
	}
	if g, l := wait.Recv(t, time.Minute, "the generate task", gen), wait.Recv(t, time.Minute, "the explore task", look); g.Task.ID != "g" || l.Task.ID != "l" || g.Seed != batch.Manifest.Seed {
		t.Errorf("tasks %+v and %+v", g, l)
	}
	if n, err := env.State.Expected(ctx, "batch", "local001", "echo", 0); err != nil || n != 2 {
		t.Errorf("expected %d, %v", n, err)
	}
	if rounds, err := env.State.OpenRounds(ctx, "batch"); err != nil || len(rounds) != 1 {
		t.Errorf("open rounds %v, %v", rounds, err)
	}
	asked, err := env.Run(ctx, "asked")
	if err != nil {
		t.Fatal(err)
	}
	if err := env.PublishTasks(ctx, asked, runenv.Envelopes(asked.Manifest, "local001", "echo", "sqlite", []agent.Task{task("gen", "u", 0)})); err != nil {
		t.Fatal(err)
	}
	if u := wait.Recv(t, time.Minute, "the interactive task", urgent); u.Task.ID != "u" {
		t.Errorf("urgent task %+v", u)
	}
	if err := env.PublishTasks(ctx, batch, runenv.Envelopes(batch.Manifest, "local001", "echo", "sqlite", []agent.Task{task("nosuch", "x", 0)})); err == nil ||
		!strings.Contains(err.Error(), `undeclared kind "nosuch"`) {
		t.Errorf("an undeclared kind: %v", err)
	}

	// A join of three parts: the last in publishes the continuation with
	// every part's cost; a part given up is lost, not a failure.
	then := task("gen", "then", 0)
	part := func(i int) *message.Task {
		tk := task("look", fmt.Sprintf("part.%d", i), 0)
		tk.Join = &agent.Join{Group: "fan", Part: i, Of: 3, Then: then}
		return runenv.Envelopes(batch.Manifest, "local001", "echo", "sqlite", []agent.Task{tk})[0]
	}
	for i := range 2 {
		if err := env.Join(ctx, batch, part(i), message.Part{Value: []byte(fmt.Sprint(i)), Cost: cost.Ledger{"look": {LLMCalls: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	lost := part(2)
	lost.Upstream = cost.Ledger{"look": {LLMCalls: 4}}
	if err := env.GiveUp(ctx, lost, "the look task failed after 3 deliveries"); err != nil {
		t.Fatal(err)
	}
	next := wait.Recv(t, time.Minute, "the join's continuation", gen)
	if next.Task.ID != "then" || next.Upstream.Total().LLMCalls != 1+1+4 {
		t.Errorf("continuation %+v, upstream %v; want then with 6 calls", next.Task, next.Upstream.Total())
	}
	r, e, _ := env.Example(ctx, "batch", "local001")
	parts, err := env.Context(r, e, "echo").Store.Parts(ctx, "fan")
	if err != nil || len(parts) != 3 || string(parts[1].Value) != "1" || parts[2].Lost != "the look task failed after 3 deliveries" {
		t.Errorf("parts %+v, %v", parts, err)
	}
	if done, _ := env.State.Done(ctx, "batch", "local001", "echo", "part.2"); !done {
		t.Error("the lost part's task is not recorded done")
	}

	// A lone task given up: a failed result per slot, its cost once.
	lone := runenv.Envelopes(batch.Manifest, "local001", "echo", "sqlite", []agent.Task{task("gen", "lone", 3, 4)})[0]
	lone.Upstream = cost.Ledger{"gen": {LLMCalls: 2}}
	if err := env.GiveUp(ctx, lone, "cancelled by the client"); err != nil {
		t.Fatal(err)
	}
	calls := 0
	for range 2 {
		res := wait.Recv(t, time.Minute, "a failed result", results)
		calls += res.Cost.Total().LLMCalls
		if res.Status != agent.StatusFailed || res.Error != "cancelled by the client" || (res.Index != 3 && res.Index != 4) {
			t.Errorf("result %+v", res)
		}
	}
	if calls != 2 {
		t.Errorf("the given-up task's cost counted %d calls, want 2 once", calls)
	}
}

// TestTransient: the infrastructure's failures are waited out; a task's
// own, an LLM call's included, count against its deliveries.
func TestTransient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("no such column: x"), false},
		{&llm.CallError{Model: "m", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, false},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{fmt.Errorf("record: %w", syscall.ECONNREFUSED), true},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{io.EOF, true},
		{io.ErrUnexpectedEOF, true},
		{fmt.Errorf("take: %w", redis.ErrClosed), true},
		{redis.ErrPoolTimeout, true},
		{nats.ErrConnectionClosed, true},
		{fmt.Errorf("publish: %w", nats.ErrTimeout), true},
		{nats.ErrNoResponders, true},
		{context.Canceled, false},
	} {
		if got := runenv.Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestServeAndWaitReady: serving needs a warehouse; an environment whose
// Redis and NATS answer is ready at once; Resilient sets a loop to wait
// out outages.
func TestServeAndWaitReady(t *testing.T) {
	t.Parallel()
	env, _ := newEnv(t)
	if err := env.Serve(context.Background(), "generate", nil, queue.WorkConfig{}); err == nil || !strings.Contains(err.Error(), "no warehouses to serve") {
		t.Errorf("serving nothing: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.WaitReady(ctx); err != nil {
		t.Errorf("WaitReady: %v", err)
	}
	wc := env.Resilient(queue.WorkConfig{Consumer: "c"})
	if wc.Transient == nil || wc.WaitReady == nil || wc.Consumer != "c" || !wc.Transient(io.EOF) {
		t.Errorf("resilient %+v", wc)
	}
	// Bracketed by the clock read before and after: exact at any speed.
	m := &runstate.Manifest{RoundTimeout: time.Hour}
	before := time.Now()
	dl := env.Deadline(m)
	if after := time.Now(); dl.Before(before.Add(time.Hour)) || dl.After(after.Add(time.Hour)) {
		t.Errorf("deadline %s, want an hour after the call (between %s and %s)", dl, before.Add(time.Hour), after.Add(time.Hour))
	}
}

// TestCheckpoints: a task's checkpoint is its example's and agent's, a
// save replaces it, a large one round-trips (through the blob store), and
// a dropped one is gone.
func TestCheckpoints(t *testing.T) {
	t.Parallel()
	env, root := newEnv(t)
	ctx := context.Background()
	manifest(t, env, &runstate.Manifest{Run: "cp", Dataset: root, Examples: []string{"local001", "local002"}})
	store := func(ex string) agent.Store {
		r, e, err := env.Example(ctx, "cp", ex)
		if err != nil {
			t.Fatal(err)
		}
		return env.Context(r, e, "echo").Store
	}
	a := store("local001")
	large := []byte(strings.Repeat("x", 200<<10))
	for _, v := range [][]byte{[]byte(`{"step":1}`), large} {
		if err := a.SaveCheckpoint(ctx, "r0.agent", v); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := store("local001").Checkpoint(ctx, "r0.agent"); err != nil || !ok || string(got) != string(v) {
			t.Errorf("a checkpoint of %d bytes read back as %d bytes (%v, %v)", len(v), len(got), ok, err)
		}
	}
	if _, ok, _ := store("local002").Checkpoint(ctx, "r0.agent"); ok {
		t.Error("another example's store sees the checkpoint")
	}
	if err := a.DropCheckpoint(ctx, "r0.agent"); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Checkpoint(ctx, "r0.agent"); ok || err != nil {
		t.Errorf("a dropped checkpoint: %v, %v", ok, err)
	}
}
