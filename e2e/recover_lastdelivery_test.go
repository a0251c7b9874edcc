package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
)

// TestLastDeliveryKilledKeepsTheAnswers: with one run per task
// (--max-deliver 1), a generator process SIGKILLed while its LLM requests
// are held (no process is left to give its tasks up) leaves them queued
// in JetStream, free of their dead holder's leases, while no generator is
// left to take them, and their rounds are not decided short even with a
// round timeout far shorter than the wait; a generator started then runs
// them, and every example ends with the undisturbed run's answers and
// candidates. (The voter's new generation after JetStream's last delivery
// is TestDeliveriesThatNeverStartSpendNothing's.)
func TestLastDeliveryKilledKeepsTheAnswers(t *testing.T) {
	flags := []string{"--max-deliver", "1", "--ack-wait", "6s"}
	run := []string{"--limit", "3", "--votes", "4", "--seed", "3"}
	want := lastDeliveryRun(t, flags, run, false)
	if len(want.examples) != 3 {
		t.Fatalf("undisturbed run finished %d examples, want 3", len(want.examples))
	}
	for _, tc := range []struct{ name, timeout string }{{"a 2s round timeout", "2s"}, {"the default round timeout", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			args := run
			if tc.timeout != "" {
				args = append(append([]string{}, run...), "--round-timeout", tc.timeout)
			}
			compare(t, "generator killed on its tasks' last delivery", lastDeliveryRun(t, flags, args, true), want)
		})
	}
}

// lastDeliveryRun runs the demo over a voter, an explorer and one
// generator; with kill, the generator is SIGKILLed with requests in
// flight, and a second generator starts only once the voter has
// published its tasks again and they count as queued.
func lastDeliveryRun(t *testing.T, flags, args []string, kill bool) snapshot {
	t.Helper()
	c := newCluster(t)
	c.start("voter", "voter", flags...)
	c.start("explorer", "explorer-worker", flags...)
	gen := c.start("generator-1", "generator-worker", flags...)
	var held map[string]<-chan struct{}
	if kill {
		held = map[string]<-chan struct{}{"generator-1": c.inFlight("generator-1")}
	}
	out := filepath.Join(t.TempDir(), "out")
	coord := c.start("coordinator", "coordinator", append(append([]string{"--run-id", "last", "--dataset", demoDir(t), "--out", out}, flags...), args...)...)
	if kill {
		c.killInFlight(held, map[string]*exec.Cmd{"generator-1": gen})
		c.requeued(t, "last")
		c.start("generator-2", "generator-worker", flags...)
	}
	wait(t, coord, c.logs, "coordinator", 3*time.Minute)
	return readOutputs(t, out)
}

// requeued finds the generate-pool tasks the killed generator held (taken,
// not done) and waits until they are queued again: their dead holder's
// leases expired and JetStream holds them, to deliver again (their
// deliveries were not their last: --max-deliver counts runs, and a
// delivery may die before its run) or published again by the voter as a
// new generation. Their rounds must then be undecided whatever the round
// timeout.
func (c *cluster) requeued(t *testing.T, runID string) {
	t.Helper()
	ctx := context.Background()
	opt, err := redis.ParseURL(c.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	defer rc.Close()
	st := runstate.New(rc)
	m, err := st.Manifest(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	// The killed generator's tasks: taken, not done, on the generate pool.
	killed := map[runstate.Round][]string{}
	for _, ex := range m.Examples {
		cur, err := st.Current(ctx, runID, ex, m.Agent)
		if err != nil || cur < 0 {
			continue
		}
		r := runstate.Round{Run: runID, Example: ex, Agent: m.Agent, Round: cur}
		tasks, err := st.Tasks(ctx, runID, ex, m.Agent)
		if err != nil {
			t.Fatal(err)
		}
		taken, err := rc.SMembersMap(ctx, rdb.ExampleKey(runID, ex, m.Agent, "taken")).Result()
		if err != nil {
			t.Fatal(err)
		}
		done, err := st.DoneSet(ctx, runID, ex, m.Agent)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			_, isTaken := taken[tk.Task.ID]
			_, isDone := done[tk.Task.ID]
			if tk.Task.Round == cur && isTaken && !isDone && tk.Task.Kind != reforce.KindExplore {
				killed[r] = append(killed[r], tk.Task.ID)
			}
		}
	}
	if len(killed) == 0 {
		t.Fatal("the killed generator held no task: nothing was in flight")
	}
	q, err := queue.Connect(ctx, c.natsURL, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for r, ids := range killed {
		waitFor(t, time.Minute, fmt.Sprintf("the killed tasks %v of %s free of their dead holder and queued again", ids, r.Example), func() bool {
			held := map[string]bool{}
			err := q.Held(ctx, queue.RunSubjects(runID), func(_ string, data []byte) {
				var tk message.Task
				if queue.Decode(data, &tk) == nil && tk.Example == r.Example {
					held[tk.Task.ID] = true
				}
			})
			if err != nil {
				return false
			}
			for _, id := range ids {
				if n, err := rc.Exists(ctx, rdb.TaskLeaseKey(runID, r.Example, m.Agent, id)).Result(); err != nil || n != 0 || !held[id] {
					return false
				}
			}
			return true
		})
	}
	// No generator is alive: with a short round timeout, the sweep has
	// had rounds past their deadline to hold off.
	for r, ids := range killed {
		if outcome, err := st.Decided(ctx, r); err != nil || outcome != "" {
			t.Errorf("round %d of %s decided (%q, %v) while its tasks %v waited in the queue", r.Round, r.Example, outcome, err, ids)
		}
	}
	t.Logf("the killed generator's tasks, queued again: %v", killed)
}
