package voter_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/voter"
	"github.com/quorumsql/quorum/internal/testutil/envtest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// decider is the agent the voter decides for: it opens round r+1 (two
// answer tasks) until its rounds option is reached, then votes over
// every candidate; it records the candidates each decision saw.
type decider struct {
	rounds int
	mu     sync.Mutex
	saw    map[int]int // round → candidates
}

func deciderDef() *agent.Definition {
	d := &agent.Definition{Name: "decider", Doc: "decides rounds for the voter's tests",
		Options: []agent.Option{{Name: "rounds", Default: "1", Usage: "rounds before the final vote"}},
		New: func(c agent.Config) (agent.Agent, error) {
			n, err := agent.OptionInt(c.Options, "rounds")
			return &decider{rounds: n, saw: map[int]int{}}, err
		}}
	agent.Register(&d.Kinds, "answer", agent.Generator, "never run: the voter's tests publish the results", func(*decider, context.Context, *agent.Context, agent.Task, struct{}) (*agent.Outcome, error) {
		return nil, nil
	})
	return d
}

func (*decider) Start(context.Context, *agent.Context) (*agent.Dispatch, error) { return nil, nil }

func (a *decider) Decide(_ context.Context, c *agent.Context, round int, cands []*agent.Candidate) (*agent.Decision, error) {
	a.mu.Lock()
	a.saw[round] = len(cands)
	a.mu.Unlock()
	if round+1 < a.rounds {
		return &agent.Decision{Next: dispatch(round+1, 2)}, nil
	}
	return vote.Once(cands, agent.Seed(c.Seed, c.Example.ID, round, 0, "tie")), nil
}

// dispatch is a round of n answer tasks, slots from round*10.
func dispatch(round, n int) *agent.Dispatch {
	d := &agent.Dispatch{Round: round, Expect: n}
	for i := range n {
		t, _ := agent.NewTask("answer", fmt.Sprintf("r%d.answer.%d", round, i), round, []int{round*10 + i}, nil)
		d.Tasks = append(d.Tasks, t)
	}
	return d
}

// fixture is a voter over real NATS and Redis, and the dataset its runs
// are on.
type fixture struct {
	env  *runenv.Env
	root string
}

func start(t *testing.T, sweep time.Duration) *fixture {
	t.Helper()
	return startWith(t, sweep, 0)
}

// startWith is start with the voter reconciling every reconcile (0: its
// default).
func startWith(t *testing.T, sweep, reconcile time.Duration) *fixture {
	t.Helper()
	tier.Servers(t, "NATS and redis-server")
	reg, err := agent.NewRegistry(deciderDef())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{env: envtest.Start(t, reg, envtest.Options{Queue: queue.Config{AckWait: 5 * time.Second}}),
		root: agenttest.NewDataset(t, "shop", "CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1);",
			agenttest.Question{ID: "local001", Question: "How many?"}).Dataset.Root}
	envtest.Go(t, "voter", func(ctx context.Context) error {
		return voter.Run(ctx, voter.Config{Env: f.env, Concurrency: 1, SweepEvery: sweep, ReconcileEvery: reconcile,
			WorkConfig: queue.WorkConfig{RetryBase: 20 * time.Millisecond, DrainTimeout: time.Second}})
	})
	return f
}

// open creates run id (rounds rounds, its deadline timeout) and opens its
// round 0 of n tasks, as the coordinator does; it returns the run's
// final answers as they are published.
func (f *fixture) open(t *testing.T, id string, rounds, n int, timeout time.Duration) (*runenv.Run, <-chan *message.FinalAnswer) {
	t.Helper()
	ctx := context.Background()
	m := &runstate.Manifest{Run: id, Dataset: f.root, Seed: 1, Examples: []string{"local001"}, Agent: "decider",
		AgentOptions: map[string]string{"rounds": strconv.Itoa(rounds)}, RoundTimeout: timeout, Created: time.Now()}
	if _, _, err := f.env.State.CreateManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := f.env.State.SetMeta(ctx, id, "local001", runstate.ExampleMeta{Warehouse: "sqlite", Published: time.Now()}); err != nil {
		t.Fatal(err)
	}
	finals := envtest.Watch[message.FinalAnswer](t, f.env, "finals-"+id, queue.Subject(id, queue.StageFinal, ""))
	run, err := f.env.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.env.Open(ctx, run, "local001", "decider", "sqlite", dispatch(0, n)); err != nil {
		t.Fatal(err)
	}
	return run, finals
}

// result publishes a worker's candidate result: status, and the rows of
// its answer csv (stored as a blob), as a worker does.
func (f *fixture) result(t *testing.T, run string, round, index int, status, csv string) {
	t.Helper()
	ctx := context.Background()
	r := &message.CandidateResult{V: message.Version, Run: run, Example: "local001", Agent: "decider", Round: round, Index: index,
		SQL: fmt.Sprintf("SELECT %d", index), Status: status, Worker: "w", Cost: cost.Ledger{"answer": {LLMCalls: 1}}}
	switch status {
	case agent.StatusOK:
		ref, err := f.env.Blobs.PutString(ctx, csv)
		if err != nil {
			t.Fatal(err)
		}
		r.CSVRef, r.Rows = ref, 1
	case agent.StatusFailed:
		// As the runtime records a task that ran out of deliveries.
		r.SQL, r.Error = "", "the answer task failed after 3 deliveries: boom"
	}
	if err := f.env.PublishResult(ctx, r); err != nil {
		t.Fatal(err)
	}
}

// TestVoterDecides: a round is decided once its expected results are in,
// its final answer carrying the vote's winner, every candidate's SQL and
// what they cost; a decision that opens a round publishes its tasks, and
// the final decision sees every round's candidates; a result delivered
// twice counts once; a result of no run is dropped and the voter goes on.
func TestVoterDecides(t *testing.T) {
	t.Parallel()
	f := start(t, time.Second)
	ctx := context.Background()
	const three, four = "n\n3\n", "n\n4\n"
	for i, tc := range []struct {
		name    string
		expect  int
		publish func(t *testing.T, run string)
		// the final answer: status, candidates, agreed, valid, LLM
		// calls, candidates' SQL, error
		status                         string
		cands, agreed, valid, lc, sqls int
		error                          string
	}{
		{"the majority wins", 3, func(t *testing.T, run string) {
			// A result of a run that does not exist first.
			f.result(t, "ghost", 0, 0, agent.StatusOK, three)
			f.result(t, run, 0, 0, agent.StatusOK, three)
			f.result(t, run, 0, 1, agent.StatusOK, four)
			f.result(t, run, 0, 2, agent.StatusOK, three)
		}, "answered", 3, 2, 3, 3, 3, ""},
		{"a result delivered twice counts once", 2, func(t *testing.T, run string) {
			f.result(t, run, 0, 0, agent.StatusOK, three)
			// The same result under another message id: past JetStream's
			// deduplication, so the voter's own must drop it.
			dup := &message.CandidateResult{V: message.Version, Run: run, Example: "local001", Agent: "decider", Index: 0, SQL: "SELECT dup",
				Status: agent.StatusEmpty, Worker: "w2", Cost: cost.Ledger{"answer": {LLMCalls: 1}}}
			if err := f.env.Queue.Publish(ctx, queue.Subject(run, queue.StageResult, ""), "dup", dup); err != nil {
				t.Fatal(err)
			}
			f.result(t, run, 0, 1, agent.StatusOK, three)
		}, "answered", 2, 2, 2, 2, 2, ""},
		{"every candidate failed", 2, func(t *testing.T, run string) {
			f.result(t, run, 0, 0, agent.StatusFailed, "")
			f.result(t, run, 0, 1, agent.StatusFailed, "")
		}, "failed", 2, 0, 0, 2, 0, "2 of 2 candidates failed: the answer task failed after 3 deliveries: boom"},
		{"none produced rows", 2, func(t *testing.T, run string) {
			f.result(t, run, 0, 0, agent.StatusEmpty, "")
			f.result(t, run, 0, 1, agent.StatusError, "")
		}, "no_answer", 2, 0, 0, 2, 2, "no candidate produced rows"},
	} {
		id := fmt.Sprintf("case%d", i)
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, finals := f.open(t, id, 1, tc.expect, time.Minute)
			tc.publish(t, id)
			a := wait.Recv(t, time.Minute, "the final answer", finals)
			if a.Status != tc.status || a.Candidates != tc.cands || len(a.Agreed) != tc.agreed || a.Valid != tc.valid || a.Rounds != 1 ||
				a.Cost.Total().LLMCalls != tc.lc || a.Error != tc.error {
				t.Errorf("final %+v; want %s, %d candidates, %d agreed, %d valid, %d calls, error %q", a, tc.status, tc.cands, tc.agreed, tc.valid, tc.lc, tc.error)
			}
			if tc.status == "answered" {
				if csv, err := f.env.Blobs.GetString(ctx, a.CSVRef); err != nil || csv != three {
					t.Errorf("the answer's result %q (%v), want %q", csv, err, three)
				}
			}
			if len(a.CandidateSQL) != tc.sqls {
				t.Errorf("candidate SQL %+v, want %d", a.CandidateSQL, tc.sqls)
			}
			// The round is recorded decided (just after its answer is
			// published), so a late result cannot reopen it.
			wait.For(t, time.Minute, "round 0 recorded decided", func() bool {
				decided, err := f.env.State.Decided(ctx, runstate.Round{Run: id, Example: "local001", Agent: "decider"})
				return err == nil && decided == runstate.OutcomeFinal
			})
		})
	}
	t.Run("a decision opens the next round", func(t *testing.T) {
		t.Parallel()
		run, finals := f.open(t, "next", 2, 1, time.Minute)
		tasks := envtest.Watch[message.Task](t, f.env, "tasks-next", queue.Subject("next", string(agent.Generator), "sqlite"))
		// Round 0's task, published by the open, then round 1's two.
		first := wait.Recv(t, time.Minute, "round 0's task", tasks)
		f.result(t, "next", 0, 0, agent.StatusOK, three)
		var round1 []string
		for range 2 {
			tk := wait.Recv(t, time.Minute, "a task of round 1", tasks)
			round1 = append(round1, fmt.Sprintf("%d/%s", tk.Task.Round, tk.Task.ID))
		}
		if first.Task.Round != 0 || fmt.Sprint(round1) != "[1/r1.answer.0 1/r1.answer.1]" && fmt.Sprint(round1) != "[1/r1.answer.1 1/r1.answer.0]" {
			t.Errorf("tasks: round 0 %+v, then %v", first.Task, round1)
		}
		f.result(t, "next", 1, 10, agent.StatusOK, three)
		f.result(t, "next", 1, 11, agent.StatusOK, four)
		a := wait.Recv(t, time.Minute, "the final answer", finals)
		d := run.Agent.(*decider)
		d.mu.Lock()
		saw := fmt.Sprint(d.saw)
		d.mu.Unlock()
		if a.Status != "answered" || a.Rounds != 2 || a.Candidates != 3 || saw != "map[0:1 1:3]" {
			t.Errorf("final %+v, the decisions saw %s candidates; want 2 rounds, 3 candidates, map[0:1 1:3]", a, saw)
		}
	})
}

// TestVoterDecidesARoundPastItsDeadline: a round whose tasks were taken
// and then left the stream without their results (a worker acknowledged
// them, Redis lost the rest) has them reissued under new message ids: one
// whose reissue yields its result completes the round's candidates; one
// that never does is reissued voter.Reissues times, then the round is
// decided with what is in once it made no progress for the run's round
// timeout.
func TestVoterDecidesARoundPastItsDeadline(t *testing.T) {
	t.Parallel()
	f := startWith(t, 20*time.Millisecond, 100*time.Millisecond)
	ctx := context.Background()
	// The timeout is the scenario: the round stalls for this long.
	const timeout = 300 * time.Millisecond
	_, finals := f.open(t, "late", 1, 3, timeout)
	r := runstate.Round{Run: "late", Example: "local001", Agent: "decider"}
	// A "worker" that takes every task and acknowledges it: task 0 yields
	// its result, task 1 only when reissued, task 2 never.
	tasks := envtest.Watch[message.Task](t, f.env, "lose", queue.Subject("late", string(agent.Generator), "sqlite"))
	seen := map[string]int{}
	var final *message.FinalAnswer
	for final == nil {
		select {
		case tk := <-tasks:
			seen[tk.Task.ID]++
			if _, err := f.env.State.Take(ctx, r, tk.Task.ID, time.Now().Add(timeout)); err != nil {
				t.Fatal(err)
			}
			if tk.Task.ID == "r0.answer.0" || tk.Task.ID == "r0.answer.1" && tk.Reissue != 0 {
				if tk.Task.ID == "r0.answer.1" && !strings.HasSuffix(tk.ID(), fmt.Sprintf(".r%d", tk.Reissue)) {
					t.Errorf("a reissued task's message id %s does not carry its reissue", tk.ID())
				}
				f.result(t, "late", 0, tk.Task.Slots[0], agent.StatusOK, "n\n3\n")
			}
		case final = <-finals:
		case <-time.After(time.Minute):
			t.Fatalf("no final answer within a minute; tasks seen %v", seen)
		}
	}
	if final.Status != "answered" || final.Candidates != 2 {
		t.Errorf("final %+v; want the two candidates in, answered", final)
	}
	want := map[string]int{"r0.answer.0": 1, "r0.answer.1": 2, "r0.answer.2": 1 + voter.Reissues}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("tasks published %v, want %v (the lost ones reissued, the one that never answers %d times)", seen, want, voter.Reissues)
	}
}

// TestVoterResumesFromRedis: a voter stopped with a round half recorded
// and another started in its place decide it with every result: the
// round's state is in Redis, not in the voter.
func TestVoterResumesFromRedis(t *testing.T) {
	tier.Servers(t, "NATS and redis-server")
	t.Parallel()
	reg, err := agent.NewRegistry(deciderDef())
	if err != nil {
		t.Fatal(err)
	}
	env := envtest.Start(t, reg, envtest.Options{Queue: queue.Config{AckWait: 5 * time.Second}})
	f := &fixture{env: env, root: agenttest.NewDataset(t, "shop", "CREATE TABLE t (n INTEGER);",
		agenttest.Question{ID: "local001", Question: "How many?"}).Dataset.Root}
	ctx := context.Background()
	_, finals := f.open(t, "resume", 1, 2, time.Minute)
	cfg := voter.Config{Env: env, Concurrency: 1, WorkConfig: queue.WorkConfig{RetryBase: 20 * time.Millisecond, DrainTimeout: time.Second}}
	vctx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- voter.Run(vctx, cfg) }()
	f.result(t, "resume", 0, 0, agent.StatusOK, "n\n3\n")
	// No event says a result is recorded: its record in Redis is looked for.
	wait.For(t, time.Minute, "the first result recorded", func() bool {
		rs, err := env.State.Results(ctx, "resume", "local001", "decider", 0)
		return err == nil && len(rs) == 1
	})
	stop()
	wait.Recv(t, time.Minute, "the first voter to stop", stopped)
	envtest.Go(t, "the second voter", func(ctx context.Context) error { return voter.Run(ctx, cfg) })
	f.result(t, "resume", 0, 1, agent.StatusOK, "n\n3\n")
	if a := wait.Recv(t, time.Minute, "the final answer", finals); a.Status != "answered" || a.Candidates != 2 || len(a.Agreed) != 2 {
		t.Errorf("final %+v; want both results, agreeing", a)
	}
}

// TestVoterPublishesNothingForACancelledRun: a run cancelled (and its
// subjects purged, as serve's settle does) with a round half recorded
// gets its late result recorded — serve charges what it cost — but the
// decision it completes publishes no final answer: the round is closed
// and the run's final subject stays empty.
func TestVoterPublishesNothingForACancelledRun(t *testing.T) {
	t.Parallel()
	f := start(t, time.Second)
	ctx := context.Background()
	const id = "cancelled"
	m := &runstate.Manifest{Run: id, Dataset: f.root, Seed: 1, Examples: []string{"local001"}, Agent: "decider",
		AgentOptions: map[string]string{"rounds": "1"}, RoundTimeout: time.Minute, Created: time.Now()}
	if _, _, err := f.env.State.CreateManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := f.env.State.SetMeta(ctx, id, "local001", runstate.ExampleMeta{Warehouse: "sqlite", Published: time.Now()}); err != nil {
		t.Fatal(err)
	}
	run, err := f.env.Run(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// No consumer reads the final subject: whatever the voter publishes
	// there stays in the stream, where the test looks for it.
	if err := f.env.Open(ctx, run, "local001", "decider", "sqlite", dispatch(0, 2)); err != nil {
		t.Fatal(err)
	}
	f.result(t, id, 0, 0, agent.StatusOK, "n\n3\n")
	wait.For(t, time.Minute, "the first result recorded", func() bool {
		rs, err := f.env.State.Results(ctx, id, "local001", "decider", 0)
		return err == nil && len(rs) == 1
	})
	if err := f.env.State.Cancel(ctx, id, "cancelled by the client"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Queue.PurgeRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	if open, err := f.env.State.OpenRounds(ctx, id); err != nil || len(open) != 1 {
		t.Fatalf("open rounds %v (%v) before the late result, want round 0", open, err)
	}
	f.result(t, id, 0, 1, agent.StatusOK, "n\n3\n")
	// The voter closes the round once it has handled the last result: a
	// final it published would be in the stream by then.
	wait.For(t, time.Minute, "the round closed", func() bool {
		open, err := f.env.State.OpenRounds(ctx, id)
		return err == nil && len(open) == 0
	})
	if rs, err := f.env.State.Results(ctx, id, "local001", "decider", 0); err != nil || len(rs) != 2 {
		t.Errorf("recorded results %d (%v), want the late one recorded too: 2", len(rs), err)
	}
	var finals []string
	if err := f.env.Queue.Held(ctx, queue.Subject(id, queue.StageFinal, ""), func(_ string, data []byte) {
		finals = append(finals, string(data))
	}); err != nil {
		t.Fatal(err)
	}
	if len(finals) != 0 {
		t.Errorf("the cancelled run's decision published %d final answers (the first: %.200s), want none", len(finals), finals[0])
	}
	if outcome, err := f.env.State.Decided(ctx, runstate.Round{Run: id, Example: "local001", Agent: "decider"}); err != nil || outcome != "" {
		t.Errorf("round 0 recorded decided %q (%v), want no outcome: nothing was published", outcome, err)
	}
}
