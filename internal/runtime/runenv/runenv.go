// Package runenv is what every role process shares: the queue, the blob
// store, the run state, the LLM client, the registered agents, and per run
// the dataset, its warehouses and the run's agent built from its manifest.
// Workers serve many runs; each run's dataset is loaded once. It also holds
// the runtime's side of the agent seam: the context a task or decision
// sees, and publishing a round, its tasks, results and final answers.
package runenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/metrics"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/warehouse/registry"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/priority"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Env is one process's shared environment.
type Env struct {
	Queue *queue.Queue
	Blobs *blob.Store
	State *runstate.Store
	// LLM is nil in roles that make no calls (coordinator, voter).
	LLM llm.Client
	// Agents are the agents this process can run.
	Agents *agent.Registry
	// Cache is shared by every run (e.g. schema linking answers).
	Cache   agent.Cache
	Log     *zap.Logger
	Metrics *metrics.Metrics
	// Name identifies the process in results and logs.
	Name string
	// Incarnation tells this process from an earlier one of the same Name
	// (random at its start; "": it never takes a lease over). Name is
	// unique among live processes (the default host-pid is; --name must
	// be), so a task lease held under Name by another incarnation is a
	// dead predecessor's: a process restarted under its name (a container
	// restarted in its pod) takes those over at once rather than waiting
	// out their TTL.
	Incarnation string
	// TaskLeaseTTL is how long a task's lease lasts without a renewal
	// (rdb.TaskLeaseTTLFor the Redis failover time; 0: rdb.TaskLeaseTTL).
	TaskLeaseTTL time.Duration
	// Warehouses routes examples to the configured warehouses and opens
	// them within their quotas; nil serves SQLite files only.
	Warehouses *registry.Registry
	// MaxRuns bounds the runs this process keeps built (default
	// DefaultMaxRuns). A worker is never told that a run ended, so the
	// least recently used run is dropped beyond it; a later task of that
	// run loads it again from its manifest.
	MaxRuns int
	// Traces stores examples' traces; nil records none.
	Traces *trace.Store
	// Exporter exports spans over OTLP; nil exports none.
	Exporter *trace.Exporter

	mu   sync.Mutex
	runs map[string]*Run
	// uses counts lookups: a run's last use orders eviction.
	uses     uint64
	datasets map[string]*loaded
}

type loaded struct {
	ds  *dataset.Dataset
	set *sqlite.Set
}

// Run is one run as this process sees it.
type Run struct {
	Manifest *runstate.Manifest
	DS       *dataset.Dataset
	whs      *localdb.Warehouses
	// Def and Agent are the run's agent, built from the manifest's options.
	Def   *agent.Definition
	Agent agent.Agent
	reg   *registry.Registry
	// view is what the agent sees of DS: no gold (DS keeps it for
	// scoring).
	view *agent.View
	// used is the Env's use count at the run's last lookup (under Env.mu).
	used uint64
}

// DefaultMaxRuns is Env.MaxRuns's default: well above the runs a
// cluster works on at once, far below a long-lived worker's thousands
// of serve questions (each holds its agent and a copy of the questions).
const DefaultMaxRuns = 64

// Warehouse returns the warehouse of an example, within its quota.
func (r *Run) Warehouse(ctx context.Context, e *dataset.Example) (warehouse.Warehouse, error) {
	var wh warehouse.Warehouse
	var err error
	if r.reg == nil {
		wh, err = r.whs.For(e)
	} else {
		wh, err = r.reg.Open(ctx, e, r.whs)
	}
	if err != nil || r.Manifest.QueryTimeout <= 0 {
		return wh, err
	}
	return &warehouse.WithTimeout{W: wh, Timeout: r.Manifest.QueryTimeout}, nil
}

// TraceLevel is what the run's trace keeps.
func (r *Run) TraceLevel() trace.Level {
	l, err := trace.ParseLevel(r.Manifest.Trace)
	if err != nil {
		return trace.None // a run recorded before traces
	}
	return l
}

// Recorder is the recorder of one task of the run: nil when the run keeps
// no trace and the process exports no spans.
func (e *Env) Recorder(r *Run) *trace.Recorder {
	return trace.NewRecorder(trace.RecorderConfig{Level: r.TraceLevel(), Tracer: e.Exporter.Tracer(), Content: e.Exporter.Content()})
}

// WriteTrace appends entries to an example's trace when the run keeps
// one. A trace that cannot be written is logged, not the task's failure:
// the answer matters more than its record.
func (e *Env) WriteTrace(ctx context.Context, r *Run, ex string, entries ...*trace.Entry) {
	if e.Traces == nil || r.TraceLevel() == trace.None {
		return
	}
	if err := e.Traces.Write(ctx, r.Manifest.Run, ex, entries...); err != nil {
		e.Log.Warn("writing the trace", zap.String("run", r.Manifest.Run), zap.String("example", ex), zap.Error(err))
	}
}

// Priority marks ctx for the run's class of work: an interactive run's LLM
// calls may use the part of each quota batch work leaves free.
func (r *Run) Priority(ctx context.Context) context.Context {
	if r.Manifest.Interactive {
		return priority.Interactive(ctx)
	}
	return ctx
}

// Route names the warehouse (subject token) of an example.
func (r *Run) Route(e *dataset.Example) (string, error) {
	if r.reg == nil {
		return string(e.Dialect), nil
	}
	return r.reg.File.Route(e)
}

// Warehouses is the run's warehouse opener (for live schema reads).
func (r *Run) Warehouses() *localdb.Warehouses { return r.whs }

// AgentFor returns the run's agent called name: a task or result naming
// another agent is permanently bad.
func (r *Run) AgentFor(name string) (*agent.Definition, agent.Agent, error) {
	if name != r.Def.Name {
		return nil, nil, queue.Permanent(fmt.Errorf("run %s runs agent %s, not %s", r.Manifest.Run, r.Def.Name, name))
	}
	return r.Def, r.Agent, nil
}

// Run returns a run's environment, loading its dataset and building its
// agent on first use.
func (e *Env) Run(ctx context.Context, id string) (*Run, error) {
	e.mu.Lock()
	if r, ok := e.runs[id]; ok {
		e.uses++
		r.used = e.uses
		e.mu.Unlock()
		return r, nil
	}
	e.mu.Unlock()
	m, err := e.State.Manifest(ctx, id)
	if err != nil {
		return nil, err
	}
	if e.Agents == nil {
		return nil, errors.New("this process has no agents registered")
	}
	def, err := e.Agents.Lookup(m.Agent)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	// The manifest's Votes fills an agent's votes option that its options
	// leave unset (a question's votes; a run recorded before the option).
	opts, err := def.RunOptions(m.AgentOptions, m.Votes)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	var client llm.Client
	if e.LLM != nil {
		// Every call an agent makes lands in its task's trace.
		client = trace.Client{LLM: e.LLM}
	}
	ag, err := def.New(agent.Config{Options: opts, LLM: client, Cache: e.Cache, Log: e.Log})
	if err != nil {
		return nil, fmt.Errorf("run %s: agent %s: %w", id, m.Agent, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.runs[id]; ok {
		e.uses++
		r.used = e.uses
		return r, nil
	}
	// Questions may ask about any database of the dataset's catalogue.
	catalogue := len(m.Questions) > 0
	// A run's query timeout is its SQLite pools' own: SQLite's default of
	// 60 s would otherwise cap a longer --query-timeout (Warehouse's
	// WithTimeout only shortens). Runs with other timeouts get pools of
	// their own.
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%v\x00%s", m.Dataset, m.TaskFile, m.SQLiteDir, catalogue, m.QueryTimeout)
	l, ok := e.datasets[key]
	if !ok {
		ds, err := dataset.Load(m.Dataset, dataset.Options{TaskFile: m.TaskFile, SQLiteDir: m.SQLiteDir, Catalogue: catalogue})
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", id, err)
		}
		l = &loaded{ds: ds, set: &sqlite.Set{Base: sqlite.Config{QueryTimeout: m.QueryTimeout}}}
		if e.datasets == nil {
			e.datasets = map[string]*loaded{}
		}
		e.datasets[key] = l
	}
	ds := l.ds
	if len(m.Questions) > 0 {
		if ds, err = ds.WithQuestions(m.Questions...); err != nil {
			return nil, queue.Permanent(fmt.Errorf("run %s: %w", id, err))
		}
	}
	whs := &localdb.Warehouses{DS: ds, SQLite: l.set}
	r := &Run{Manifest: m, DS: ds, whs: whs, Def: def, Agent: ag, reg: e.Warehouses, view: agent.NewView(ds, whs, opts)}
	if e.runs == nil {
		e.runs = map[string]*Run{}
	}
	e.uses++
	r.used = e.uses
	e.runs[id] = r
	e.evict()
	return r, nil
}

// evict drops the least recently used runs beyond MaxRuns (under e.mu).
// Tasks holding a dropped run keep using it; only the cache lets go.
func (e *Env) evict() {
	max := e.MaxRuns
	if max <= 0 {
		max = DefaultMaxRuns
	}
	for len(e.runs) > max {
		oldest := ""
		for id, r := range e.runs {
			if oldest == "" || r.used < e.runs[oldest].used {
				oldest = id
			}
		}
		delete(e.runs, oldest)
	}
}

// Cached reports whether the process holds run id built (for tests and
// diagnostics).
func (e *Env) Cached(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.runs[id]
	return ok
}

// Forget drops a finished run from the process's cache of runs: serve
// runs a run per question, and each cached run holds its agent and a
// copy of the dataset's questions. A later use loads it again.
func (e *Env) Forget(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.runs, id)
}

// Close closes the warehouses opened by the process.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.datasets {
		_ = l.set.Close()
	}
	if e.Warehouses != nil {
		_ = e.Warehouses.Close()
	}
}

// Example finds a task's run and example. A run or example that does not
// exist is a permanent error: redelivering the task cannot help.
func (e *Env) Example(ctx context.Context, runID, exampleID string) (*Run, *dataset.Example, error) {
	run, err := e.Run(ctx, runID)
	if errors.Is(err, runstate.ErrNoRun) {
		return nil, nil, queue.Permanent(err)
	}
	if err != nil {
		return nil, nil, err
	}
	ex, ok := run.DS.Example(exampleID)
	if !ok {
		return nil, nil, queue.Permanent(fmt.Errorf("example %s is not in dataset %s", exampleID, run.Manifest.Dataset))
	}
	return run, ex, nil
}

// Context is what the agent sees of one example of a run, in this process:
// no gold, unless the run's options turn on a gold ablation (agent.View).
func (e *Env) Context(run *Run, ex *dataset.Example, agentName string) *agent.Context {
	c := run.view.Context(ex)
	c.Run, c.Seed = run.Manifest.Run, run.Manifest.Seed
	c.Warehouse = func(ctx context.Context) (warehouse.Warehouse, error) {
		wh, err := run.Warehouse(ctx, ex)
		if err != nil {
			return nil, err
		}
		// Every query an agent runs lands in its task's trace.
		return &trace.Warehouse{W: wh}, nil
	}
	c.Store = &store{env: e, run: run.Manifest.Run, ex: ex.ID, agent: agentName}
	c.Ledger, c.Worker = cost.Ledger{}, e.Name
	c.Log = e.Log.With(zap.String("run", run.Manifest.Run), zap.String("example", ex.ID), zap.String("agent", agentName))
	return c
}

// store is agent.Store over the run state and the blob store.
type store struct {
	env            *Env
	run, ex, agent string
}

func (s *store) Once(ctx context.Context, name string, fn func(context.Context) (string, error)) (string, error) {
	return s.env.State.Once(ctx, s.run, s.ex, s.agent, name, fn)
}

func (s *store) Get(ctx context.Context, name string) (string, bool, error) {
	return s.env.State.Get(ctx, s.run, s.ex, s.agent, name)
}

func (s *store) Set(ctx context.Context, name, value string) error {
	return s.env.State.Set(ctx, s.run, s.ex, s.agent, name, value)
}

func (s *store) PutBlob(ctx context.Context, b []byte) (string, error) {
	return s.env.Blobs.Put(ctx, b)
}
func (s *store) GetBlob(ctx context.Context, ref string) ([]byte, error) {
	b, err := s.env.Blobs.Get(ctx, ref)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", agent.ErrBlobLost, err)
	}
	return b, err
}

// inlineCheckpoint is the largest checkpoint kept in its Redis key; a
// larger one (a long trajectory's conversation) goes to the blob store
// and the key holds its reference.
const inlineCheckpoint = 64 << 10

// A checkpoint's key holds 'v' and the state, or 'b' and a blob reference.
const (
	checkpointInline = "v"
	checkpointBlob   = "b"
)

func (s *store) Checkpoint(ctx context.Context, name string) ([]byte, bool, error) {
	v, ok, err := s.env.State.Checkpoint(ctx, s.run, s.ex, s.agent, name)
	if err != nil || !ok {
		return nil, false, err
	}
	switch {
	case strings.HasPrefix(v, checkpointInline):
		return []byte(v[len(checkpointInline):]), true, nil
	case strings.HasPrefix(v, checkpointBlob):
		b, err := s.env.Blobs.Get(ctx, v[len(checkpointBlob):])
		if err != nil {
			return nil, false, fmt.Errorf("checkpoint %s of %s: %w", name, s.ex, err)
		}
		return b, true, nil
	}
	return nil, false, fmt.Errorf("checkpoint %s of %s: unknown form %.10q", name, s.ex, v)
}

func (s *store) SaveCheckpoint(ctx context.Context, name string, state []byte) error {
	v := checkpointInline + string(state)
	if len(state) > inlineCheckpoint {
		ref, err := s.env.Blobs.Put(ctx, state)
		if err != nil {
			return fmt.Errorf("checkpoint %s of %s: %w", name, s.ex, err)
		}
		v = checkpointBlob + ref
	}
	return s.env.State.SaveCheckpoint(ctx, s.run, s.ex, s.agent, name, v)
}

func (s *store) DropCheckpoint(ctx context.Context, name string) error {
	return s.env.State.DropCheckpoint(ctx, s.run, s.ex, s.agent, name)
}

func (s *store) Parts(ctx context.Context, group string) ([]agent.Part, error) {
	raw, err := s.env.State.Parts(ctx, s.run, s.ex, s.agent, group)
	if err != nil {
		return nil, err
	}
	out := make([]agent.Part, 0, len(raw))
	for i, b := range raw {
		var p message.Part
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("join %s of %s: part %d: %w", group, s.ex, i, err)
		}
		out = append(out, agent.Part{Index: i, Value: p.Value, Lost: p.Lost})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

// Join records t's part of its join and, when the join is complete,
// publishes its continuation with the cost of every part. Whoever sees the
// join complete publishes (a crash between the two steps is repaired by
// the redelivery); the continuation's message id makes it one task.
func (e *Env) Join(ctx context.Context, run *Run, t *message.Task, part message.Part) error {
	j := t.Task.Join
	b, err := json.Marshal(part)
	if err != nil {
		return err
	}
	n, err := e.State.AddPart(ctx, t.Run, t.Example, t.Agent, j.Group, j.Part, b)
	if err != nil || n < j.Of {
		return err
	}
	raw, err := e.State.Parts(ctx, t.Run, t.Example, t.Agent, j.Group)
	if err != nil {
		return err
	}
	next := Envelopes(run.Manifest, t.Example, t.Agent, t.Warehouse, []agent.Task{j.Then})
	next[0].Upstream, next[0].Reissue = cost.Ledger{}, t.Reissue
	for _, b := range raw {
		var p message.Part
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("join %s of %s: %w", j.Group, t.Example, err)
		}
		next[0].Upstream.Merge(p.Cost)
		next[0].UpstreamSeconds = max(next[0].UpstreamSeconds, p.ElapsedSeconds)
		next[0].UpstreamChain = max(next[0].UpstreamChain, p.ChainSeconds)
	}
	if err := e.State.LogTasks(ctx, t.Run, t.Example, t.Agent, next); err != nil {
		return err
	}
	return e.PublishTasks(ctx, run, next)
}

// Envelopes wraps an agent's tasks for the queue.
func Envelopes(m *runstate.Manifest, ex, agentName, wh string, tasks []agent.Task) []*message.Task {
	out := make([]*message.Task, len(tasks))
	for i, t := range tasks {
		out[i] = &message.Task{V: message.Version, Run: m.Run, Example: ex, Agent: agentName, Warehouse: wh, Task: t, Seed: m.Seed}
	}
	return out
}

// Reissues bounds how often one task is reissued: a task that finishes
// without the results its slots owe (an agent's bug) looks as if Redis
// lost them, and one whose inputs stay lost would lose them again; neither
// may run forever. Past it, the task fails, or the round's deadline
// decides the round with what is in.
const Reissues = 2

// Reissue publishes tasks of round r again, queued and unfinished, under
// new message ids (stamp, unique per reissue, becomes their Reissue), so
// JetStream's deduplication, which may remember the originals' ids, lets
// them through; role labels the metric. Each reissue is counted
// (runstate.CountReissue) and the round's deadline moved on.
func (e *Env) Reissue(ctx context.Context, role string, r runstate.Round, tasks []*message.Task, stamp int64) error {
	if len(tasks) == 0 {
		return nil
	}
	run, err := e.Run(ctx, r.Run)
	if err != nil {
		return err
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.Task.ID
		t.Reissue = stamp
		if t.Warehouse == "" {
			meta, err := e.State.Meta(ctx, r.Run, r.Example)
			if err != nil {
				return err
			}
			t.Warehouse = meta.Warehouse
		}
	}
	for _, id := range ids {
		if _, err := e.State.CountReissue(ctx, r.Run, r.Example, r.Agent, id); err != nil {
			return err
		}
	}
	if err := e.State.LogTasks(ctx, r.Run, r.Example, r.Agent, tasks); err != nil {
		return err
	}
	if err := e.State.Untake(ctx, r.Run, r.Example, r.Agent, true, ids...); err != nil {
		return err
	}
	if err := e.PublishTasks(ctx, run, tasks); err != nil {
		return err
	}
	if e.Metrics != nil {
		e.Metrics.Tasks.WithLabelValues(role, tasks[0].Warehouse, "reissued").Add(float64(len(tasks)))
	}
	return e.State.Progress(ctx, r, "", e.Deadline(run.Manifest))
}

// Open records a round (its expected results, its tasks, its deadline)
// and publishes its tasks. Recording first lets a resume publish whatever
// a crash left unpublished.
func (e *Env) Open(ctx context.Context, run *Run, ex, agentName, wh string, d *agent.Dispatch) error {
	m := run.Manifest
	tasks := Envelopes(m, ex, agentName, wh, d.Tasks)
	if err := e.State.Open(ctx, m.Run, ex, agentName, d.Round, d.Expect, tasks); err != nil {
		return err
	}
	if err := e.State.OpenDeadline(ctx, runstate.Round{Run: m.Run, Example: ex, Agent: agentName, Round: d.Round}, e.Deadline(m)); err != nil {
		return err
	}
	return e.PublishTasks(ctx, run, tasks)
}

// Deadline is when a round with no progress from now on is decided with
// the results that are in. Every task start, heartbeat and result moves it;
// tasks still queued hold it off (see voter's sweep).
func (e *Env) Deadline(m *runstate.Manifest) time.Time {
	return time.Now().Add(m.RoundTimeout)
}

// PublishTasks publishes task envelopes to their kind's pool on the
// example's warehouse.
func (e *Env) PublishTasks(ctx context.Context, run *Run, tasks []*message.Task) error {
	for _, t := range tasks {
		k, ok := run.Def.Kind(t.Task.Kind)
		if !ok {
			return fmt.Errorf("agent %s dispatched a task of undeclared kind %q", run.Def.Name, t.Task.Kind)
		}
		stage := string(k.Pool)
		if run.Manifest.Interactive {
			stage = queue.Urgent(stage)
		}
		if err := e.Queue.Publish(ctx, queue.Subject(t.Run, stage, t.Warehouse), t.ID(), t); err != nil {
			return err
		}
	}
	return nil
}

// PublishResult sends a candidate result to the voter; its message id makes
// a redelivered task's result a duplicate.
func (e *Env) PublishResult(ctx context.Context, r *message.CandidateResult) error {
	id := fmt.Sprintf("%s.%s.%s.%d.%d.result", r.Run, r.Example, r.Agent, r.Round, r.Index) + message.ReissueSuffix(r.Reissue)
	return e.Queue.Publish(ctx, queue.Subject(r.Run, queue.StageResult, ""), id, r)
}

// PublishFinal sends an example's final answer to its coordinator.
func (e *Env) PublishFinal(ctx context.Context, f *message.FinalAnswer) error {
	return e.Queue.Publish(ctx, queue.Subject(f.Run, queue.StageFinal, ""), f.Run+"."+f.Example+".final", f)
}

// GiveUp records a task that will not run again as a failed result in
// each of its slots, so its round completes, and marks it done.
func (e *Env) GiveUp(ctx context.Context, t *message.Task, reason string) error {
	if t.Task.Join != nil {
		// One lost part does not fail the fan-out: its continuation
		// learns which part is missing and why.
		run, err := e.Run(ctx, t.Run)
		if err != nil {
			return err
		}
		if err := e.Join(ctx, run, t, message.Part{Lost: reason, Cost: t.Upstream, ElapsedSeconds: t.UpstreamSeconds, ChainSeconds: t.UpstreamChain}); err != nil {
			return err
		}
		return e.State.MarkDone(ctx, t.Run, t.Example, t.Agent, t.Task.ID)
	}
	var errs []error
	for _, slot := range t.Task.Slots {
		r := &message.CandidateResult{V: message.Version, Run: t.Run, Example: t.Example, Agent: t.Agent, Round: t.Task.Round,
			Index: slot, Status: agent.StatusFailed, Worker: e.Name, Cost: t.Upstream, Error: reason, Reissue: t.Reissue}
		t.Upstream = nil // accounted once
		errs = append(errs, e.PublishResult(ctx, r))
	}
	errs = append(errs, e.State.MarkDone(ctx, t.Run, t.Example, t.Agent, t.Task.ID))
	return errors.Join(errs...)
}

// Transient tells the infrastructure's failures (Redis or NATS
// unreachable, a connection reset) from a task's own: they are waited out,
// not counted against the task's deliveries. An LLM call's failure is the
// task's: the client has already retried it.
func Transient(err error) bool {
	var ce *llm.CallError
	if err == nil || errors.As(err, &ce) {
		return false
	}
	var op *net.OpError
	switch {
	case errors.As(err, &op), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return true
	}
	return false
}

// WaitReady returns once Redis and NATS answer again (or after a minute,
// or when ctx ends).
func (e *Env) WaitReady(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := e.State.Ping(pctx)
		cancel()
		if err == nil && e.Queue.Connected() {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Resilient sets a work loop to wait out infrastructure outages rather
// than spend its tasks' deliveries on them.
func (e *Env) Resilient(wc queue.WorkConfig) queue.WorkConfig {
	wc.Transient, wc.WaitReady = Transient, e.WaitReady
	return wc
}

// Serve works one consumer per warehouse, <pool>-<warehouse>, over the
// pool's subjects, until ctx ends. Outcomes are counted in the metrics.
func (e *Env) Serve(ctx context.Context, pool string, warehouses []string, base queue.WorkConfig) error {
	if len(warehouses) == 0 {
		return fmt.Errorf("%s worker: no warehouses to serve", pool)
	}
	errc := make(chan error, len(warehouses))
	for _, wh := range warehouses {
		wc := e.Resilient(base)
		wc.Consumer = pool + "-" + wh
		wc.Filters = []string{queue.Subject("*", pool, wh)}
		wc.Urgent = &queue.Lane{Consumer: queue.Urgent(pool) + "-" + wh, Filters: []string{queue.Subject("*", queue.Urgent(pool), wh)}}
		wc.Logger = e.Log
		wc.Observe = func(outcome string, redelivered bool) {
			if e.Metrics == nil {
				return
			}
			e.Metrics.Tasks.WithLabelValues(pool, wh, outcome).Inc()
			if redelivered {
				e.Metrics.Redeliveries.WithLabelValues(pool, wh).Inc()
			}
		}
		go func() { errc <- e.Queue.Work(ctx, wc) }()
	}
	var errs []error
	for range warehouses {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}
