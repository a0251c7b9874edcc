package raise

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

func agentCalls(req llm.Request) bool { return req.Role == RoleAgent }

// TestTrajectoryResumesFromItsCheckpoint stops a trajectory's delivery at
// its (N+1)th LLM segment, as a worker killed there, and delivers the task
// again: the redelivery makes only the segments that were left (not the
// whole chain again) and writes the same trajectory as an uninterrupted
// run, and the checkpoint is gone once the trajectory is stored.
func TestTrajectoryResumesFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	def := Definition()
	_, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 3}, "r1")
	e := demo.Example(t, "local001")
	task, err := agent.NewTask(KindAgent, "r0.agent", 0, agent.Range(0, 4), payload{Round: 0})
	if err != nil {
		t.Fatal(err)
	}
	opts, _ := def.CheckOptions(nil)
	deliver := func(c llm.Client, ac *agent.Context) (*agent.Outcome, error) {
		ag, err := def.New(agent.Config{Options: opts, LLM: c, Log: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		return def.Execute(context.Background(), ag, ac, task)
	}
	// Uninterrupted.
	whole := agenttest.Record(client)
	want, err := deliver(whole, agenttest.Context(t, demo, e))
	if err != nil {
		t.Fatal(err)
	}
	total := len(whole.Asked())
	const n = 2
	if total <= n+1 {
		t.Fatalf("the trajectory made %d calls: too few to stop it after %d", total, n)
	}
	// Stopped after n segments, then delivered again with the same store.
	stop := &agenttest.Interrupter{Client: client, N: n, Match: agentCalls}
	ac := agenttest.Context(t, demo, e)
	if _, err := deliver(stop, ac); !errors.Is(err, agenttest.ErrInterrupted) {
		t.Fatalf("the stopped delivery: %v, want the interruption", err)
	}
	if names, saves := agenttest.Checkpoints(ac); len(names) != 1 || names[0] != "r0.agent" || saves != n {
		t.Fatalf("after %d steps the store keeps checkpoints %v after %d saves, want [r0.agent] after %d", n, names, saves, n)
	}
	retry := *ac
	retry.Ledger = cost.Ledger{}
	got, err := deliver(stop, &retry)
	if err != nil {
		t.Fatal(err)
	}
	before, after, _ := stop.Calls()
	if before != n || after != total-n {
		t.Errorf("calls: %d before the stop and %d after, want %d and the %d left (the uninterrupted trajectory made %d)", before, after, n, total-n, total)
	}
	if names, _ := agenttest.Checkpoints(ac); len(names) != 0 {
		t.Errorf("checkpoints kept after the trajectory was stored: %v", names)
	}
	// The trajectory blob is content-addressed: equal references are
	// equal trajectories (every command and output).
	ref := func(o *agent.Outcome) string {
		var p payload
		_ = json.Unmarshal(o.Next[0].Payload, &p)
		return p.OpsRef
	}
	if ref(got) != ref(want) {
		wb, _ := ac.Store.GetBlob(context.Background(), ref(got))
		t.Errorf("the resumed trajectory differs from the uninterrupted one:\n%s", wb)
	}
}

// TestResumedRunAnswersAsAnUninterruptedOne runs a round through the seam
// in process (local retries a failed task as the queue redelivers it)
// with the trajectory stopped after three segments: every candidate's SQL
// is the uninterrupted run's, and the calls after the stop are what the
// trajectory had left.
func TestResumedRunAnswersAsAnUninterruptedOne(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t).Only(t, "local010")
	_, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 5}, "r1")
	opt := func(c llm.Client) agenttest.Options {
		return agenttest.Options{LLM: c, Agent: map[string]string{OptRounds: "1"}, Seed: 7}
	}
	whole := agenttest.Record(client)
	want := agenttest.Run(t, Definition(), demo, opt(whole))["local010"]
	total := 0
	for _, r := range whole.Requests() {
		if agentCalls(r) {
			total++
		}
	}
	const n = 3
	if total <= n+1 {
		t.Fatalf("the trajectory made %d calls: too few to stop it after %d", total, n)
	}
	stop := &agenttest.Interrupter{Client: client, N: n, Match: agentCalls}
	got := agenttest.Run(t, Definition(), demo, opt(stop))["local010"]
	if before, after, stopped := stop.Calls(); !stopped || after != total-n {
		t.Errorf("agent calls: %d before the stop, %d after (stopped: %v), want %d after", before, after, stopped, total-n)
	}
	if len(got.Candidates) != len(want.Candidates) {
		t.Fatalf("%d candidates resumed, %d uninterrupted", len(got.Candidates), len(want.Candidates))
	}
	for i, w := range want.Candidates {
		if g := got.Candidates[i]; g.Index != w.Index || g.SQL != w.SQL || g.Status != w.Status {
			t.Errorf("candidate %d: resumed %s %q, uninterrupted %s %q", w.Index, g.Status, g.SQL, w.Status, w.SQL)
		}
	}
	if got.Decision.Winner == nil || want.Decision.Winner == nil || got.Decision.Winner.SQL != want.Decision.Winner.SQL {
		t.Errorf("the winners differ: resumed %+v, uninterrupted %+v", got.Decision.Winner, want.Decision.Winner)
	}
}
