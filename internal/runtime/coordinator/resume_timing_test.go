package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/voter"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/toyagent"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// TestResumedRunKeepsEveryExamplesTiming (issue 54): a run interrupted
// twice and resumed reports every example's latency from its own recorded
// end, whichever session recorded it (it was 0 for the examples an earlier
// session finished), its finish time from the run's first start, and the
// wall time as the sum of its three sessions, which between them finished
// every example.
func TestResumedRunKeepsEveryExamplesTiming(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	q, err := queue.Connect(ctx, natstest.Start(t).URL(), queue.Config{AckWait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rdb := redistest.Start(t).Client(t)
	reg, err := agent.NewRegistry(toyagent.Definition(toyagent.Config{Hold: 20 * time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), Agents: reg, Cache: runstate.NewCache(rdb),
		Log: zap.NewNop(), Name: "test"}
	defer env.Close()
	abs, _ := filepath.Abs("../../../examples/demo")
	var examples []string
	for i := 1; i <= 12; i++ {
		examples = append(examples, fmt.Sprintf("local%03d", i))
	}
	const run = "timing"
	m := &runstate.Manifest{Run: run, Dataset: abs, Seed: 1, Votes: 3, Examples: examples, Agent: "toy",
		RoundTimeout: 5 * time.Minute, Created: time.Now()}
	out := t.TempDir()
	wc := queue.WorkConfig{DrainTimeout: time.Second, RetryBase: 50 * time.Millisecond}
	vctx, stopVoter := context.WithCancel(ctx)
	defer stopVoter()
	go voter.Run(vctx, voter.Config{Env: env, Concurrency: 4, WorkConfig: wc})
	// workers runs the worker pools until the returned stop, which waits
	// for them: an interrupted session's work stops with it, as in quorum
	// run, so no session can finish the run before it is interrupted.
	workers := func() (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{}, 2)
		for _, pool := range []agent.Pool{agent.Explorer, agent.Generator} {
			go func() {
				defer func() { done <- struct{}{} }()
				_ = worker.Run(wctx, worker.Config{Env: env, Pool: pool, Warehouses: []string{"sqlite"}, Concurrency: 4, WorkConfig: wc})
			}()
		}
		return func() { cancel(); <-done; <-done }
	}
	finals := func() int {
		f, err := env.State.Finals(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		return len(f)
	}
	cfg := coordinator.Config{Env: env, Manifest: m, Out: out, MaxInFlight: 2}

	// Two sessions, each interrupted once the run has this many finals.
	for _, after := range []int{3, 7} {
		stopWorkers := workers()
		ictx, interrupt := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() {
			_, err := coordinator.Run(ictx, cfg)
			stopped <- err
		}()
		wait.For(t, time.Minute, fmt.Sprintf("%d final answers recorded", after), func() bool { return finals() >= after })
		stopWorkers()
		interrupt()
		if err := <-stopped; !errors.Is(err, context.Canceled) {
			t.Fatalf("session interrupted after %d finals ended with %v, want the interruption", after, err)
		}
		if n := finals(); n >= len(examples) {
			t.Fatalf("the interrupted session recorded all %d finals: nothing left to resume", n)
		}
	}
	stopWorkers := workers()
	defer stopWorkers()
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: env, Manifest: &runstate.Manifest{Run: run}, Out: out, MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}

	stored, err := env.State.Sessions(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 3 {
		t.Fatalf("%d sessions recorded, want 3: %+v", len(stored), stored)
	}
	for _, s := range stored {
		if !s.Closed {
			t.Errorf("session %d was interrupted, not killed, but recorded no end: %+v", s.N, s)
		}
	}
	rec, err := env.State.RecordedFinals(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	metas, err := env.State.Metas(ctx, run, examples)
	if err != nil {
		t.Fatal(err)
	}

	if len(rep.Sessions) != 3 {
		t.Fatalf("run.json has %d sessions, want 3: %+v", len(rep.Sessions), rep.Sessions)
	}
	finishedIn := map[int]int{}
	for _, r := range rec {
		finishedIn[r.Session]++
	}
	wall, sum := 0.0, 0
	for i, s := range rep.Sessions {
		st := stored[i]
		if s.Number != i+1 || !s.Started.Equal(st.Start) || !s.Finished.Equal(st.End) || s.EndUnknown ||
			s.Seconds != s.Finished.Sub(s.Started).Seconds() || s.Examples != finishedIn[i+1] || s.Examples == 0 { //clock:ok recorded times against the report; no elapsed time asserted
			t.Errorf("session %d in run.json %+v; recorded %+v with %d finals", i+1, s, st, finishedIn[i+1])
		}
		wall += s.Seconds
		sum += s.Examples
	}
	if sum != len(examples) {
		t.Errorf("the sessions finished %d examples between them, want %d", sum, len(examples))
	}
	if rep.Totals.WallSeconds != wall {
		t.Errorf("wall time %v s, want the sum of the sessions' %v s", rep.Totals.WallSeconds, wall)
	}
	first, last := rep.Sessions[0].Started, rep.Sessions[2].Finished
	//clock:ok the sessions' recorded times, compared with the report's span; no elapsed time asserted
	if !rep.Started.Equal(first) || !rep.Finished.Equal(last) || rep.Totals.SpanSeconds != last.Sub(first).Seconds() ||
		rep.Totals.SpanSeconds < rep.Totals.WallSeconds {
		t.Errorf("run from %v to %v, span %v s, wall %v s; want from the first session's start %v to the last's end %v, span ≥ wall",
			rep.Started, rep.Finished, rep.Totals.SpanSeconds, rep.Totals.WallSeconds, first, last)
	}

	if len(rep.Examples) != len(examples) {
		t.Fatalf("%d examples in run.json, want %d", len(rep.Examples), len(examples))
	}
	for _, e := range rep.Examples {
		r, meta := rec[e.InstanceID], metas[e.InstanceID]
		if r == nil || meta == nil || r.At.IsZero() {
			t.Errorf("%s: recorded final %+v, meta %+v: want both, with the final's time", e.InstanceID, r, meta)
			continue
		}
		//clock:ok recorded timestamps (Redis), compared with the report built from them; no elapsed time asserted
		span := r.At.Sub(meta.Published).Seconds()
		if e.LatencySeconds <= 0 || math.Abs(e.LatencySeconds-span) > 0.01*span {
			t.Errorf("%s (session %d): latency %v s, want its recorded span %v s (end %v − published %v)",
				e.InstanceID, r.Session, e.LatencySeconds, span, r.At, meta.Published)
		}
		//clock:ok recorded timestamps, compared with the report built from them; no elapsed time asserted
		since := r.At.Sub(rep.Started).Seconds()
		if e.Session != r.Session || math.Abs(e.FinishedSeconds-since) > 1e-6 {
			t.Errorf("%s: finished %v s after the run's start in session %d, want %v s in session %d",
				e.InstanceID, e.FinishedSeconds, e.Session, since, r.Session)
		}
	}
	disk, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(disk.Sessions) != 3 || disk.Totals.WallSeconds != rep.Totals.WallSeconds || disk.Totals.SpanSeconds != rep.Totals.SpanSeconds {
		t.Errorf("run.json on disk: %d sessions, wall %v, span %v; want 3, %v, %v",
			len(disk.Sessions), disk.Totals.WallSeconds, disk.Totals.SpanSeconds, rep.Totals.WallSeconds, rep.Totals.SpanSeconds)
	}
}

// TestSessionHeartbeatThenClose: while a session waits for finals it
// records heartbeats (the end a killed session keeps), and an interrupted
// one records its end, closed, after its last heartbeat.
func TestSessionHeartbeatThenClose(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := queue.Connect(ctx, natstest.Start(t).URL(), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	rdb := redistest.Start(t).Client(t)
	reg, err := agent.NewRegistry(toyagent.Definition(toyagent.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), Agents: reg, Cache: runstate.NewCache(rdb),
		Log: zap.NewNop(), Name: "test"}
	defer env.Close()
	abs, _ := filepath.Abs("../../../examples/demo")
	m := &runstate.Manifest{Run: "beat", Dataset: abs, Seed: 1, Votes: 3, Examples: []string{"local001"}, Agent: "toy",
		RoundTimeout: 5 * time.Minute, Created: time.Now()}
	// No worker runs: the session waits, beating, until interrupted.
	ictx, interrupt := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() {
		_, err := coordinator.Run(ictx, coordinator.Config{Env: env, Manifest: m, Out: t.TempDir(), RestoreEvery: 10 * time.Millisecond})
		stopped <- err
	}()
	var beat runstate.Session
	wait.For(t, 30*time.Second, "a heartbeat of session 1", func() bool {
		s, err := env.State.Sessions(ctx, "beat")
		if err != nil || len(s) != 1 {
			return false
		}
		beat = s[0]
		return beat.End.After(beat.Start)
	})
	if beat.N != 1 || beat.Closed {
		t.Errorf("a live session recorded as %+v, want session 1, not closed", beat)
	}
	interrupt()
	if err := <-stopped; !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted session ended with %v", err)
	}
	s, err := env.State.Sessions(ctx, "beat")
	if err != nil || len(s) != 1 || !s[0].Closed || !s[0].Start.Equal(beat.Start) || s[0].End.Before(beat.End) {
		t.Errorf("the interrupted session recorded as %+v (%v), want session 1 closed, from %v, ending no sooner than its heartbeat %v",
			s, err, beat.Start, beat.End)
	}
}
