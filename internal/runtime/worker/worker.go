// Package worker is a pool's worker: generator workers take the LLM-bound
// task kinds, explorer workers the warehouse-heavy ones, each for the
// warehouses it serves. A worker hands each task to its agent by kind and
// owns everything around it: skipping a task already done, carrying the
// cost ledger, storing result tables, publishing results and the tasks
// that continue the work, and recording a failed result for every slot of
// a task that will not be delivered again.
package worker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Config configures a worker.
type Config struct {
	Env  *runenv.Env
	Pool agent.Pool
	// Warehouses this worker serves (subject tokens, e.g. sqlite).
	Warehouses  []string
	Concurrency int
	queue.WorkConfig
}

// Worker is a pool's worker as a component: from Start until Stop it
// takes tasks, one consumer per warehouse it serves; Stop stops taking
// tasks, lets those in flight finish within the drain time (handing the
// rest back) and returns once every goroutine has ended.
type Worker struct {
	cfg Config
	service.Loop
}

// New returns a worker, not started.
func New(cfg Config) (*Worker, error) {
	if cfg.Pool != agent.Generator && cfg.Pool != agent.Explorer {
		return nil, fmt.Errorf("worker pool %q: want %s or %s", cfg.Pool, agent.Generator, agent.Explorer)
	}
	return &Worker{cfg: cfg}, nil
}

// Start starts taking tasks.
func (wk *Worker) Start(ctx context.Context) error { return wk.Go(ctx, wk.run) }

func (wk *Worker) run(ctx context.Context) error {
	cfg := wk.cfg
	wc := cfg.WorkConfig
	if wc.MaxDeliver == 0 {
		wc.MaxDeliver = cfg.Env.Queue.Config().MaxDeliver
	}
	if wc.MaxDeliver > 0 && wc.Unstarted == 0 {
		wc.Unstarted = Unstarted(wc.MaxDeliver)
	}
	w := &worker{env: cfg.Env, pool: cfg.Pool, runs: wc.MaxDeliver}
	wc.Concurrency, wc.Handler, wc.OnGiveUp = cfg.Concurrency, w.handle, w.giveUp
	return cfg.Env.Serve(ctx, string(cfg.Pool), cfg.Warehouses, wc)
}

// Run works until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	wk, err := New(cfg)
	if err != nil {
		return err
	}
	return wk.run(ctx)
}

type worker struct {
	env  *runenv.Env
	pool agent.Pool
	// runs is how many times a task may run and fail before it is given
	// up (the queue's MaxDeliver; 0 or less: without limit).
	runs int
}

// Unstarted is how many deliveries beyond maxDeliver a task may have
// that never started it: each worker killed while it waited for a dead
// holder's lease (rdb.TaskLeaseTTL) spends a delivery that ran nothing.
// Past them JetStream gives the message up and the voter's advisory
// reader accounts for it, by runs too.
func Unstarted(maxDeliver int) int { return 2 * maxDeliver }

func (w *worker) handle(ctx context.Context, d queue.Delivery) (err error) {
	start := time.Now()
	m := w.env.Metrics
	var t message.Task
	if err := queue.Decode(d.Msg.Data(), &t); err != nil {
		return queue.Permanent(err)
	}
	m.Since("decode", start)
	run, e, err := w.env.Example(ctx, t.Run, t.Example)
	if err != nil {
		return err
	}
	def, ag, err := run.AgentFor(t.Agent)
	if err != nil {
		return err
	}
	if run.Manifest.Interactive || run.Manifest.MaxTokens > 0 {
		// A question can be cancelled, or stopped at its token cap, while
		// its tasks wait: drop them.
		reason, err := w.env.State.CancelReason(ctx, t.Run)
		if err != nil {
			return err
		}
		if reason != "" {
			// What the tasks it continues cost is still charged.
			return w.dropCancelled(ctx, &t, nil, reason)
		}
	}
	kind, ok := def.Kind(t.Task.Kind)
	if !ok || kind.Pool != w.pool {
		return queue.Permanent(fmt.Errorf("agent %s has no %s task kind %q", def.Name, w.pool, t.Task.Kind))
	}
	defer m.Begin(def.Name+"."+kind.Name, t.Warehouse)()
	// The task's lease before any work: a delivery beside a live holder
	// (a NATS restart redelivers what is in flight) waits for it rather
	// than running the task twice at once.
	leased := time.Now()
	lease, done, err := w.lease(ctx, &t)
	m.Since("redis", leased)
	if err != nil || done {
		return err // done: the holder finished it, acknowledged
	}
	defer func() { _ = lease.Release(context.WithoutCancel(ctx)) }()
	lctx, stopLease := w.keepLease(ctx, lease, &t)
	defer stopLease()
	// The round's deadline measures stalls: taking the task, and every
	// beat while it runs, is progress.
	round := runstate.Round{Run: t.Run, Example: t.Example, Agent: t.Agent, Round: t.Task.Round}
	took := time.Now()
	done, err = w.env.State.Take(ctx, round, t.Task.ID, w.env.Deadline(run.Manifest))
	m.Since("redis", took)
	if err != nil || done {
		return err // done: a redelivery of finished work, acknowledged
	}
	// Only a delivery that runs the task spends its budget.
	ran, err := w.env.State.Ran(ctx, t.Run, t.Example, t.Agent, t.Task.ID)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil && w.runs > 0 && ran >= w.runs && !queue.IsPermanent(err) && !errors.Is(err, errLeaseLost) {
			err = queue.Permanent(err) // its last run: giveUp records it
		}
	}()
	stopBeat := w.beat(ctx, round, run.Manifest)
	ac := w.env.Context(run, e, t.Agent)
	executed := time.Now()
	ectx, stopWatch := w.watchCancel(lctx, run)
	ectx, stopTask := context.WithCancelCause(ectx)
	used := w.meter(ctx, run, stopTask) // tokens.go
	tr := w.startTrace(ctx, d, run, &t, kind.Name)
	out, err := def.Execute(llm.WithMeter(run.Priority(tr.context(ectx)), used), ag, ac, t.Task)
	stopped := stoppedByMeter(context.Cause(ectx))
	// Read before the watch's stop ends ectx too: only the cancel's cause
	// says the question was cancelled, not any error of an interactive task.
	cancelled := errors.Is(context.Cause(ectx), errRunCancelled)
	stopTask(nil)
	stopWatch()
	// The task's own spans parent what it publishes.
	ctx = tr.context(ctx)
	defer func() { tr.end(ctx, out, err) }()
	executing := time.Since(executed)
	m.Since("execute", executed)
	defer m.ObserveRuntime(start, executing)
	stopBeat()
	if err != nil && errors.Is(context.Cause(lctx), errLeaseLost) && ctx.Err() == nil {
		// Another delivery holds the task now: this one stops, and its
		// redelivery finds the task done or still held.
		return fmt.Errorf("task %s: %w", t.Task.ID, errLeaseLost)
	}
	if err != nil && (stopped || cancelled) && ctx.Err() == nil {
		// Stopped by the question's cancel or its run's token cap: what
		// the task spent is still charged to its tenant.
		// The agent's ledger loses the calls of the step that failed; the
		// meter has every call the LLM answered.
		calls, usage := used.Total()
		tr.outcome = "cancelled"
		reason, _ := w.env.State.CancelReason(ctx, t.Run) // unread: a client's cancel
		return w.dropCancelled(ctx, &t, cost.Ledger{"cancelled": &cost.Cost{LLMCalls: calls, LLM: usage}}, reason)
	}
	if errors.Is(err, agent.ErrBlobLost) && t.Parent != nil && ctx.Err() == nil {
		if rerr := w.rerunParent(ctx, &t, err); rerr != errNoRerun {
			return rerr
		}
	}
	if agent.IsPermanent(err) {
		return queue.Permanent(err)
	}
	if err != nil {
		return err
	}
	for _, s := range ac.Ledger.Stages() {
		m.ObserveCost(s, *ac.Ledger[s])
	}
	// The task's record is in its example's trace before its results can
	// end the example (and the trace be exported).
	tr.end(ctx, out, nil)
	if err := w.publish(ctx, run, &t, ac.Ledger, out, start); err != nil {
		return err
	}
	ac.Log.Debug("task done", zap.String("kind", kind.Name), zap.String("task", t.Task.ID),
		zap.Int("results", len(out.Results)), zap.Int("next", len(out.Next)))
	marked := time.Now()
	defer m.Since("redis", marked)
	return w.env.State.MarkDone(ctx, t.Run, t.Example, t.Agent, t.Task.ID)
}

// errNoRerun: the parent may not run again; the task fails as any other.
var errNoRerun = errors.New("the parent is not run again")

// rerunParent answers a continuation whose inputs the blob store lost
// (Redis lost its last writes after they were published): the task that
// wrote them runs again, as a reissue, and publishes the continuation
// anew, so the continuation ends here without a result and is not marked
// done. The dropped continuation's inherited cost moves to the parent's
// new run. Its siblings finding the same loss publish the same reissue
// (one stamp per loss), which JetStream's deduplication keeps to one.
func (w *worker) rerunParent(ctx context.Context, t *message.Task, cause error) error {
	p := *t.Parent
	reissued, err := w.env.State.Reissues(ctx, t.Run, t.Example, t.Agent)
	if err != nil {
		return err
	}
	if reissued[p.Task.ID] >= runenv.Reissues {
		return errNoRerun
	}
	p.Upstream, p.UpstreamSeconds = t.Upstream, t.UpstreamSeconds
	w.env.Log.Warn("a task's inputs are lost (Redis lost its last writes): running the task that wrote them again",
		zap.String("run", t.Run), zap.String("example", t.Example), zap.String("task", t.Task.ID),
		zap.String("parent", p.Task.ID), zap.Error(cause))
	round := runstate.Round{Run: t.Run, Example: t.Example, Agent: t.Agent, Round: p.Task.Round}
	if err := w.env.Reissue(ctx, string(w.pool), round, []*message.Task{&p}, lostInputStamp(t)); err != nil {
		return fmt.Errorf("task %s: running its parent %s again: %w", t.Task.ID, p.Task.ID, err)
	}
	return w.env.State.Untake(ctx, t.Run, t.Example, t.Agent, false, t.Task.ID)
}

// lostInputStamp is the reissue stamp of the parent of t: the same for
// every continuation of one run of the parent, so they publish one
// message, and never the stamp the parent ran under.
func lostInputStamp(t *message.Task) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%s|%s|%d", t.Run, t.Example, t.Agent, t.Parent.Task.ID, t.Reissue)
	return int64(h.Sum64()>>1) | 1
}

// dropCancelled ends a task of a cancelled question (or a run stopped at
// its token cap: reason is the run's cancel reason) as failed results in
// its slots, carrying the cost it inherited and spent (own): serve counts
// what the question cost from its results, and knows its tasks have all
// stopped when every slot has one.
func (w *worker) dropCancelled(ctx context.Context, t *message.Task, own cost.Ledger, reason string) error {
	ledger := cost.Ledger{}
	ledger.Merge(t.Upstream)
	ledger.Merge(own)
	t.Upstream = ledger
	return w.env.GiveUp(ctx, t, dropReason(reason))
}

// publish stores and sends a task's results, then logs and sends the tasks
// that continue it. What the task cost, with what it inherited, travels
// with its first result, else its first continuation.
func (w *worker) publish(ctx context.Context, run *runenv.Run, t *message.Task, own cost.Ledger, out *agent.Outcome, start time.Time) error {
	m := w.env.Metrics
	ledger := cost.Ledger{}
	ledger.Merge(t.Upstream)
	ledger.Merge(own)
	mine := own.Total()
	chain := (mine.LLM.Latency + mine.QueryTime).Seconds() + t.UpstreamChain
	elapsed := time.Since(start).Seconds() + t.UpstreamSeconds
	carried := false
	for _, r := range out.Results {
		res := &message.CandidateResult{V: message.Version, Run: t.Run, Example: t.Example, Agent: t.Agent, Round: t.Task.Round,
			Index: r.Index, SQL: r.SQL, Status: r.Status, Error: r.Error, Rows: r.Rows, Payload: r.Payload, Cost: cost.Ledger{},
			Worker: w.env.Name, ChainSeconds: chain, Started: start, Reissue: t.Reissue}
		if !carried {
			res.Cost, res.ElapsedSeconds, carried = ledger, elapsed, true
		}
		if r.Status == agent.StatusOK {
			put := time.Now()
			ref, err := w.env.Blobs.PutString(ctx, r.CSV)
			m.Since("blob", put)
			if err != nil {
				return err
			}
			res.CSVRef = ref
		}
		sent := time.Now()
		err := w.env.PublishResult(ctx, res)
		m.Since("nats", sent)
		if err != nil {
			return err
		}
	}
	if len(out.Next) > 0 {
		next := runenv.Envelopes(run.Manifest, t.Example, t.Agent, t.Warehouse, out.Next)
		if !carried {
			next[0].Upstream, next[0].UpstreamSeconds, carried = ledger, elapsed, true
		}
		parent := t.AsParent()
		for _, n := range next {
			// A reissued task's continuations are reissued with it: the
			// originals' ids may still be in JetStream's memory.
			n.UpstreamChain, n.Reissue, n.Parent = chain, t.Reissue, parent
		}
		if err := w.publishNext(ctx, run, t, next); err != nil {
			return err
		}
	}
	if t.Task.Join == nil {
		return nil
	}
	part := message.Part{Value: out.Part, ElapsedSeconds: elapsed, ChainSeconds: chain}
	if !carried {
		part.Cost = ledger
	}
	joined := time.Now()
	defer m.Since("redis", joined)
	return w.env.Join(ctx, run, t, part)
}

// publishNext logs and sends the tasks that continue a task.
func (w *worker) publishNext(ctx context.Context, run *runenv.Run, t *message.Task, next []*message.Task) error {
	m := w.env.Metrics
	logged := time.Now()
	err := w.env.State.LogTasks(ctx, t.Run, t.Example, t.Agent, next)
	m.Since("redis", logged)
	if err != nil {
		return err
	}
	sent := time.Now()
	defer m.Since("nats", sent)
	return w.env.PublishTasks(ctx, run, next)
}

// giveUp records a task that will not run again as a failed result in each
// of its slots, so its round completes.
func (w *worker) giveUp(ctx context.Context, d queue.Delivery, cause error) {
	var t message.Task
	if queue.Decode(d.Msg.Data(), &t) != nil {
		return
	}
	ran, _ := w.env.State.TaskRuns(ctx, t.Run, t.Example, t.Agent, t.Task.ID)
	if err := w.env.GiveUp(ctx, &t, fmt.Sprintf("the %s task failed after %s (%s): %v", t.Task.Kind, count(ran, "run", "runs"), count(d.Attempt, "delivery", "deliveries"), cause)); err != nil {
		w.env.Log.Error("recording a failed task", zap.String("run", t.Run), zap.String("example", t.Example),
			zap.String("task", t.Task.ID), zap.Error(err))
	}
}

// count is n with its noun, singular or plural.
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
