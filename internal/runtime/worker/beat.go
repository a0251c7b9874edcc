package worker

import (
	"context"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
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

// watchCancel returns a context that ends when an interactive run is
// cancelled (checked every second), so a cancelled question stops its
// running tasks; the redelivery then finds the run cancelled and drops it.
// The returned stop ends the watch and returns once it has ended.
func (w *worker) watchCancel(ctx context.Context, run *runenv.Run) (context.Context, func()) {
	if !run.Manifest.Interactive {
		return ctx, func() {}
	}
	wctx, cancel := context.WithCancel(ctx)
	watch := &service.Func{Run: func(ctx context.Context) error {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				if c, _ := w.env.State.Cancelled(ctx, run.Manifest.Run); c {
					cancel()
					return nil
				}
			}
		}
	}}
	_ = watch.Start(wctx) // a new component starts
	return wctx, func() { watch.Stop(); cancel() }
}
