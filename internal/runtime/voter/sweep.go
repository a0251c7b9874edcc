package voter

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
)

// sweeper decides rounds that made no progress for the run's RoundTimeout
// with results still missing (a task lost beyond its deliveries, a worker
// that never came back), unless some of their tasks are still queued. It
// looks every every, from Start until Stop.
type sweeper struct {
	v     *Voter
	every time.Duration
	service.Loop
}

func (s *sweeper) Start(ctx context.Context) error { return s.Go(ctx, s.run) }

func (s *sweeper) run(ctx context.Context) error {
	v := s.v
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		due, err := v.env.State.DueRounds(ctx, time.Now())
		if err != nil {
			continue
		}
		for _, r := range due {
			if ctx.Err() != nil {
				return nil
			}
			if v.holdOff(ctx, r) {
				continue
			}
			if err := v.Decide(ctx, r); err != nil && ctx.Err() == nil {
				v.env.Log.Warn("deciding a round past its deadline failed", zap.String("run", r.Run), zap.String("example", r.Example), zap.Error(err))
			}
		}
	}
}

// holdOff re-arms the deadline of a round that still has tasks no worker
// has taken: they wait in the queue (behind the quota or other examples),
// which is not a stall. It reports whether it did.
func (v *Voter) holdOff(ctx context.Context, r runstate.Round) bool {
	waiting, err := v.env.State.Waiting(ctx, r)
	if err != nil || len(waiting) == 0 {
		return false
	}
	run, err := v.env.Run(ctx, r.Run)
	if err != nil {
		return false
	}
	return v.env.State.Progress(ctx, r, "", v.env.Deadline(run.Manifest)) == nil
}
