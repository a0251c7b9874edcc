package voter

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
)

// sweeper decides rounds that made no progress for the run's RoundTimeout
// with results still missing, unless some of their tasks or results are
// still in the stream (queued, running, awaiting redelivery) or are lost
// and being reissued; and every reconcile interval it reconciles the open
// rounds with the stream (reconcile.go). It looks every every, from Start
// until Stop.
type sweeper struct {
	v     *Voter
	every time.Duration
	rc    *reconciler
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
		if now := time.Now(); now.Sub(s.rc.last) >= s.rc.every {
			s.rc.pass(ctx, now)
		}
		due, err := v.env.State.DueRounds(ctx, time.Now())
		if err != nil {
			continue
		}
		// The stream is read once per run and tick.
		helds := map[string]*held{}
		for _, r := range due {
			if ctx.Err() != nil {
				return nil
			}
			if s.holdOff(ctx, r, helds) {
				continue
			}
			if err := v.Decide(ctx, r); err != nil && ctx.Err() == nil {
				v.env.Log.Warn("deciding a round past its deadline failed", zap.String("run", r.Run), zap.String("example", r.Example), zap.Error(err))
			}
		}
	}
}

// holdOff re-arms the deadline of a round past it whose missing results
// may still come: a task of it that JetStream still holds (queued behind
// the quota or other examples, running, awaiting its redelivery or its
// advisory) or a result on its way, or a lost task, which it reissues as
// the reconcile does (re-arming counts as progress, which keeps the round
// from the reconcile's passes). Only a round with nothing on its way is
// decided with the results that are in. It reports whether it held off;
// when the stream cannot be read, it holds off (nothing is known lost).
func (s *sweeper) holdOff(ctx context.Context, r runstate.Round, helds map[string]*held) bool {
	v := s.v
	run, err := v.env.Run(ctx, r.Run)
	if err != nil {
		return false
	}
	rearm := func() bool { return v.env.State.Progress(ctx, r, "", v.env.Deadline(run.Manifest)) == nil }
	h, ok := helds[r.Run]
	if !ok {
		if h, err = v.held(ctx, r.Run); err != nil {
			return rearm()
		}
		helds[r.Run] = h
	}
	st, err := v.examine(ctx, r, h)
	if err != nil {
		return rearm()
	}
	if st.decided != "" || st.complete {
		return false
	}
	if len(st.lost) > 0 {
		if err := s.rc.settle(ctx, st, time.Now()); err != nil && ctx.Err() == nil {
			v.env.Log.Warn("reissuing a round's lost tasks failed", zap.String("run", r.Run), zap.String("example", r.Example), zap.Error(err))
		}
	}
	if st.pending || len(st.lost) > 0 {
		return rearm()
	}
	return false
}
