package worker

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/slot"
)

// beat moves the round's deadline while a task runs (a task waiting for
// the LLM quota is alive, not stalled), every quarter of the round
// timeout, until the returned stop is called; stop returns once the beat
// has ended. It is a renewer whose hold cannot be lost.
func (w *worker) beat(ctx context.Context, r runstate.Round, m *runstate.Manifest) func() {
	b := &rdb.Renewer{Every: max(time.Second, m.RoundTimeout/4), Renew: func(ctx context.Context) (bool, error) {
		return true, w.env.State.Progress(ctx, r, "", w.env.Deadline(m))
	}}
	_ = b.Start(ctx) // a new renewer, with Renew and Every, starts
	return b.Stop
}

// watchCancel returns a context that ends, with cause errRunCancelled,
// when an interactive run is cancelled (checked every second), so a
// cancelled question stops its running tasks; the redelivery then finds
// the run cancelled and drops it. The returned stop ends the watch and
// returns once it has ended; the context it then ends has another cause.
func (w *worker) watchCancel(ctx context.Context, run *runenv.Run) (context.Context, func()) {
	if !run.Manifest.Interactive {
		return ctx, func() {}
	}
	wctx, cancel := context.WithCancelCause(ctx)
	watch := &service.Func{Run: func(ctx context.Context) error {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if c, _ := w.env.State.Cancelled(ctx, run.Manifest.Run); c {
					cancel(errRunCancelled)
					return nil
				}
			}
		}
	}}
	_ = watch.Start(wctx) // a new component starts
	return wctx, func() { watch.Stop(); cancel(nil) }
}

// errRunCancelled ends the context of a task whose question was cancelled
// while it ran.
var errRunCancelled = errors.New("the task's run was cancelled")

// errLeaseLost ends a task whose lease another delivery took (this
// worker stalled past its TTL), or which went a TTL unrenewed (Redis
// unreachable: another delivery may have it now).
var errLeaseLost = errors.New("the task's lease was lost: another delivery took it, or it went unrenewed past its TTL")

// leaseWait is how often a delivery waiting for a held task asks again.
const leaseWait = 250 * time.Millisecond

// lease takes the task's lease, waiting while another delivery holds it
// (its message is kept meanwhile, heartbeating, so no delivery is spent);
// done when the holder finished the task meanwhile. A holder that died
// frees it within its TTL (Env.TaskLeaseTTL).
func (w *worker) lease(ctx context.Context, t *message.Task) (l *rdb.Lease, done bool, err error) {
	owner := w.env.Name
	if w.env.Incarnation != "" {
		owner += "#" + w.env.Incarnation
	}
	l = w.env.State.TaskLease(t.Run, t.Example, t.Agent, t.Task.ID, owner, w.env.TaskLeaseTTL)
	logged := false
	// Waiting for the holder leaves this delivery's slot to others: the
	// holder may be in this process, needing one to finish.
	wctx, back := ctx, func() {}
	defer func() { back() }()
	for {
		got, err := l.Acquire(wctx)
		if err != nil || got {
			return l, false, err
		}
		if took, err := w.takeOverFromPredecessor(wctx, l, t); err != nil || took {
			return l, false, err
		}
		if done, err := w.env.State.Done(wctx, t.Run, t.Example, t.Agent, t.Task.ID); err != nil || done {
			return nil, done, err
		}
		if wctx == ctx {
			wctx, back = slot.Idle(ctx)
		}
		if !logged {
			w.env.Log.Info("another delivery of the task is running; waiting for it", zap.String("run", t.Run),
				zap.String("example", t.Example), zap.String("agent", t.Agent), zap.String("task", t.Task.ID))
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(leaseWait):
		}
	}
}

// keepLease renews the task's lease while it runs, taking it again if
// Redis lost it (a failover: no other holder exists then); the returned
// context ends with errLeaseLost if another delivery took it, or if no
// renewal succeeded for the lease's TTL: a worker cut off from Redis
// stops its running tasks once another may run them, instead of making
// LLM calls another delivery makes again. stop ends the renewal and
// returns once it has ended.
func (w *worker) keepLease(ctx context.Context, l *rdb.Lease, t *message.Task) (context.Context, func()) {
	lctx, cancel := context.WithCancelCause(ctx)
	r := l.Renewer()
	r.Expire = l.TTL()
	r.Renew = func(ctx context.Context) (bool, error) {
		return w.env.State.RenewTaskLease(ctx, l, t.Run, t.Example, t.Agent, t.Task.ID)
	}
	r.OnLost = func() {
		w.env.Log.Warn("a task's lease was lost, or went unrenewed past its TTL, while it ran; stopping it", zap.String("run", t.Run),
			zap.String("example", t.Example), zap.String("task", t.Task.ID))
		cancel(errLeaseLost)
	}
	_ = r.Start(lctx) // a new renewer, with Renew and Every, starts
	return lctx, func() { r.Stop(); cancel(nil) }
}

// takeOverFromPredecessor takes the task's lease if an earlier run of this
// process holds it (runenv.Env.Incarnation): that holder is dead, and its
// delivery waiting out the lease's TTL would only cost time.
func (w *worker) takeOverFromPredecessor(ctx context.Context, l *rdb.Lease, t *message.Task) (bool, error) {
	holder, err := l.Holder(ctx)
	if err != nil || !predecessor(rdb.Owner(holder), w.env.Name, w.env.Incarnation) {
		return false, err
	}
	took, err := l.TakeOver(ctx, holder)
	if took {
		w.env.Log.Info("took over a task's lease from an earlier run of this process", zap.String("run", t.Run),
			zap.String("example", t.Example), zap.String("agent", t.Agent), zap.String("task", t.Task.ID), zap.String("holder", holder))
	}
	return took, err
}

// predecessor reports whether a lease's owner ("name#incarnation") is an
// earlier run of the process called name, now at incarnation.
func predecessor(owner, name, incarnation string) bool {
	i := strings.LastIndexByte(owner, '#')
	if incarnation == "" || i < 0 {
		return false
	}
	return owner[:i] == name && owner[i+1:] != "" && owner[i+1:] != incarnation
}
