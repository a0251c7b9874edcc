// Package local runs an agent's examples in one process, through the same
// seam as the cluster (Start, Execute, Decide, joins, the Store) but with
// the queue and Redis replaced by goroutines and memory: what `quorum
// solve` runs every agent with. Nothing survives the process;
// for durability, quotas shared across machines and resume, use the
// cluster.
package local

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	// The same trace as the cluster records (internal/layout: pkgToInternal).
	"github.com/quorumsql/quorum/pkg/trace"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Config is what Solve runs with.
type Config struct {
	Agent agent.Agent
	// Def is the agent's definition: its kinds run the tasks (unknown
	// kinds are refused as in the cluster).
	Def *agent.Definition
	// Options are the agent's checked options: a gold ablation among them
	// (agent.GoldAblation) is the only way the agent sees any gold.
	Options    map[string]string
	Dataset    *dataset.Dataset
	Warehouses *localdb.Warehouses
	Run        string
	Seed       uint64
	// Tasks is how many tasks of one example run at once (default 8).
	Tasks int
	// Attempts per task before it is given up (default 3), as the queue's
	// deliveries would.
	Attempts int
	// Trace is what the example's trace keeps (Outcome.Trace); its LLM
	// client must be a trace.Client for the calls to be in it.
	Trace trace.Level
	Log   *zap.Logger
}

// Outcome is one example's end: the decision, every candidate, and what
// the example cost.
type Outcome struct {
	Decision   *agent.Decision
	Candidates []*agent.Candidate
	Cost       cost.Ledger
	Rounds     int
	Tasks      int
	// Trace is what the agent did (Config.Trace), in the order recorded.
	Trace []*trace.Entry
}

// Solve runs one example to its decision.
func Solve(ctx context.Context, cfg Config, e *dataset.Example) (*Outcome, error) {
	if cfg.Tasks <= 0 {
		cfg.Tasks = 8
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 3
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	x := &example{cfg: cfg, e: e, view: agent.NewView(cfg.Dataset, cfg.Warehouses, cfg.Options), store: NewStore(), sem: make(chan struct{}, cfg.Tasks), out: &Outcome{Cost: cost.Ledger{}},
		results: map[int]map[int]*agent.Candidate{}, expect: map[int]int{}, decided: make(chan error, 1)}
	began := time.Now()
	rec := trace.NewRecorder(trace.RecorderConfig{Level: cfg.Trace})
	d, err := cfg.Agent.Start(trace.With(ctx, rec), x.context(ctx))
	if err != nil {
		return nil, err
	}
	ts := &trace.Start{Round: d.Round, Expect: d.Expect, Steps: rec.Steps()}
	for _, t := range d.Tasks {
		ts.Tasks = append(ts.Tasks, t.ID)
	}
	x.record(&trace.Entry{Type: trace.TypeStart, Process: "local", At: began, End: time.Now(), Start: ts})
	x.open(ctx, d)
	select {
	case err := <-x.decided:
		x.wg.Wait()
		return x.out, err
	case <-ctx.Done():
		x.wg.Wait()
		return x.out, ctx.Err()
	}
}

type example struct {
	cfg Config
	e   *dataset.Example
	// view hides the gold of cfg.Dataset from the agent.
	view  *agent.View
	store *Store
	sem   chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	out      *Outcome
	round    int
	results  map[int]map[int]*agent.Candidate
	expect   map[int]int
	inflight int
	deciding bool
	done     bool
	decided  chan error
}

func (x *example) context(ctx context.Context) *agent.Context {
	c := x.view.Context(x.e)
	c.Run, c.Seed = x.cfg.Run, x.cfg.Seed
	c.Store, c.Ledger, c.Worker = x.store, cost.Ledger{}, "local"
	c.Warehouse = func(context.Context) (warehouse.Warehouse, error) {
		wh, err := x.cfg.Warehouses.For(x.e)
		if err != nil || x.cfg.Trace == trace.None {
			return wh, err
		}
		return &trace.Warehouse{W: wh}, nil
	}
	c.Log = x.cfg.Log.With(zap.String("example", x.e.ID))
	return c
}

// open starts a round's tasks.
func (x *example) open(ctx context.Context, d *agent.Dispatch) {
	x.mu.Lock()
	x.round, x.deciding = d.Round, false
	x.expect[d.Round] = d.Expect
	x.out.Rounds = d.Round + 1
	// Counted before any starts, so no task ending early sees the round
	// idle.
	x.inflight += len(d.Tasks)
	x.mu.Unlock()
	if len(d.Tasks) == 0 {
		x.settle(ctx)
	}
	for _, t := range d.Tasks {
		x.start(ctx, t)
	}
}

// spawn starts a task that continues another (which is still counted
// in flight, so the count never passes through zero).
func (x *example) spawn(ctx context.Context, t agent.Task) {
	x.mu.Lock()
	x.inflight++
	x.mu.Unlock()
	x.start(ctx, t)
}

func (x *example) start(ctx context.Context, t agent.Task) {
	x.mu.Lock()
	x.out.Tasks++
	x.mu.Unlock()
	if k, ok := x.cfg.Def.Kind(t.Kind); !ok || (k.Pool != agent.Generator && k.Pool != agent.Explorer) {
		x.finish(fmt.Errorf("agent %s dispatched a task of undeclared kind %q", x.cfg.Def.Name, t.Kind))
		return
	}
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		x.run(ctx, t)
		x.mu.Lock()
		x.inflight--
		x.mu.Unlock()
		x.settle(ctx)
	}()
}

// run executes one task with its attempts; a task out of attempts gives up
// its slots (or its join part) as the cluster does.
func (x *example) run(ctx context.Context, t agent.Task) {
	select {
	case x.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-x.sem }()
	var out *agent.Outcome
	var err error
	for attempt := 0; attempt < x.cfg.Attempts; attempt++ {
		ac := x.context(ctx)
		began := time.Now()
		rec := trace.NewRecorder(trace.RecorderConfig{Level: x.cfg.Trace})
		out, err = x.cfg.Def.Execute(trace.With(ctx, rec), x.cfg.Agent, ac, t)
		x.mu.Lock()
		x.out.Cost.Merge(ac.Ledger)
		x.mu.Unlock()
		x.recordTask(t, attempt+1, began, rec, out, err)
		if err == nil || agent.IsPermanent(err) || ctx.Err() != nil {
			break
		}
	}
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		reason := fmt.Sprintf("the %s task failed: %v", t.Kind, err)
		if t.Join != nil {
			x.joined(ctx, t, agent.Part{Index: t.Join.Part, Lost: reason})
			return
		}
		for _, slot := range t.Slots {
			x.recordCandidate(&agent.Candidate{Round: t.Round, Index: slot, Status: agent.StatusFailed, Error: reason})
		}
		return
	}
	for _, r := range out.Results {
		x.recordCandidate(&agent.Candidate{Round: t.Round, Index: r.Index, SQL: r.SQL, Status: r.Status, Error: r.Error, Rows: r.Rows,
			CSV: r.CSV, Payload: r.Payload, Worker: "local"})
	}
	for _, n := range out.Next {
		x.spawn(ctx, n)
	}
	if t.Join != nil {
		x.joined(ctx, t, agent.Part{Index: t.Join.Part, Value: out.Part})
	}
}

// joined records a part; the part that completes the join starts Then.
func (x *example) joined(ctx context.Context, t agent.Task, p agent.Part) {
	if x.store.AddPart(t.Join.Group, p) == t.Join.Of {
		x.spawn(ctx, t.Join.Then)
	}
}

// recordTask adds one attempt of a task to the example's trace.
func (x *example) recordTask(t agent.Task, attempt int, began time.Time, rec *trace.Recorder, out *agent.Outcome, err error) {
	if x.cfg.Trace == trace.None {
		return
	}
	rt := &trace.Task{Kind: t.Kind, ID: t.ID, Round: t.Round, Slots: t.Slots, Delivery: attempt, Outcome: "done", Steps: rec.Steps()}
	if k, ok := x.cfg.Def.Kind(t.Kind); ok {
		rt.Pool = string(k.Pool)
	}
	switch {
	case err != nil && agent.IsPermanent(err):
		rt.Outcome, rt.Error = "failed", err.Error()
	case err != nil:
		rt.Outcome, rt.Error = "retry", err.Error()
	default:
		for _, r := range out.Results {
			rt.Results = append(rt.Results, trace.Result{Index: r.Index, Status: r.Status, Rows: r.Rows, SQL: r.SQL, Error: r.Error})
		}
		for _, n := range out.Next {
			rt.Next = append(rt.Next, n.ID)
		}
		rt.Part = out.Part != nil
	}
	x.record(&trace.Entry{Type: trace.TypeTask, Process: "local", At: began, End: time.Now(), Task: rt})
}

// record adds an entry to the example's trace.
func (x *example) record(e *trace.Entry) {
	if x.cfg.Trace == trace.None {
		return
	}
	x.mu.Lock()
	x.out.Trace = append(x.out.Trace, e)
	x.mu.Unlock()
}

func (x *example) recordCandidate(c *agent.Candidate) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.results[c.Round] == nil {
		x.results[c.Round] = map[int]*agent.Candidate{}
	}
	if _, dup := x.results[c.Round][c.Index]; !dup {
		x.results[c.Round][c.Index] = c
	}
}

// settle decides the current round once its results are in, or once
// nothing is left running (what the cluster's deadline does for a round
// that cannot complete).
func (x *example) settle(ctx context.Context) {
	x.mu.Lock()
	r := x.round
	ready := !x.done && !x.deciding && (len(x.results[r]) >= x.expect[r] || x.inflight == 0)
	if ready {
		x.deciding = true // later settles wait for the next round
	}
	var cands []*agent.Candidate
	for round := 0; ready && round <= r; round++ {
		for _, c := range x.results[round] {
			cands = append(cands, c)
		}
	}
	x.mu.Unlock()
	if !ready {
		return
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Round != cands[j].Round {
			return cands[i].Round < cands[j].Round
		}
		return cands[i].Index < cands[j].Index
	})
	decided := time.Now()
	d, err := x.cfg.Agent.Decide(ctx, x.context(ctx), r, cands)
	if err != nil {
		x.finish(err)
		return
	}
	x.record(&trace.Entry{Type: trace.TypeDecision, Process: "local", At: decided, End: time.Now(), Decision: trace.DecisionOf(r, d, cands)})
	if d.Next == nil {
		now := time.Now()
		x.record(&trace.Entry{Type: trace.TypeFinal, Process: "local", At: now, End: now, Final: trace.FinalOf(d, r+1, len(cands))})
	}
	if d.Next != nil {
		x.open(ctx, d.Next)
		return
	}
	x.mu.Lock()
	x.out.Decision, x.out.Candidates = d, cands
	x.mu.Unlock()
	x.finish(nil)
}

func (x *example) finish(err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.done {
		return
	}
	x.done = true
	x.decided <- err
}
