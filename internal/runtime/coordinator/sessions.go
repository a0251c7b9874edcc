package coordinator

import (
	"context"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// A run's sessions: the stretches a coordinator drove it, from its start
// to its interruption, crash or end. Each final keeps when it was recorded
// and in which session, so a later session reports every example's
// latency and the run's wall time, not only its own.

// finalEnd is when an example's final answer was recorded, in which
// session of the run.
type finalEnd struct {
	at      time.Time
	session int
}

// closeSession records this session's end, once.
func (c *coord) closeSession(ctx context.Context, at time.Time) {
	if c.session == 0 || c.closed {
		return
	}
	c.closed = true
	err := c.env.State.SetSession(ctx, c.m.Run, runstate.Session{N: c.session, Start: c.started, End: at, Closed: true})
	if err != nil {
		c.log.Warn("the session's end is not recorded: later reports end it at its last heartbeat or final answer", zap.Error(err))
	}
}

// heartbeat records that this session is alive now: the end a later
// report gives it if its process is killed. Not cancelled with the loop
// calling it, so it never lands after closeSession's record; bounded by
// the heartbeat's period, so a Redis away does not hold up the loop's stop.
func (c *coord) heartbeat(ctx context.Context) {
	if c.session == 0 {
		return
	}
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.restoreEvery)
	defer cancel()
	err := c.env.State.SetSession(hctx, c.m.Run, runstate.Session{N: c.session, Start: c.started, End: time.Now()})
	if err != nil {
		c.log.Warn("recording the session's heartbeat", zap.Error(err))
	}
}

// sessions are the run's sessions for its report, this one ending at now.
// Without them readable it is this one alone, said in the log.
func (c *coord) sessions(ctx context.Context, now time.Time) []outputs.Session {
	stored, err := c.env.State.Sessions(ctx, c.m.Run)
	if err != nil {
		c.log.Warn("run.json with this session's timings only: the run's sessions cannot be read", zap.Error(err))
		stored = nil
	}
	if c.session > 0 {
		stored = slices.DeleteFunc(stored, func(s runstate.Session) bool { return s.N == c.session })
		stored = append(stored, runstate.Session{N: c.session, Start: c.started, End: now, Closed: true})
	}
	return sessionsOf(stored, c.ends)
}

// sessionsOf numbers the sessions' finished examples from ends. A session
// whose process died ends at the later of its last heartbeat and its last
// final answer; a final's session that was never recorded (Redis lost it)
// is rebuilt from its finals alone.
func sessionsOf(stored []runstate.Session, ends map[string]finalEnd) []outputs.Session {
	byN := map[int]*outputs.Session{}
	for _, s := range stored {
		byN[s.N] = &outputs.Session{Number: s.N, Started: s.Start, Finished: s.End, EndUnknown: !s.Closed}
	}
	for _, e := range ends {
		if e.session == 0 {
			continue // recorded before sessions were kept
		}
		s := byN[e.session]
		if s == nil {
			s = &outputs.Session{Number: e.session, Started: e.at, Finished: e.at, EndUnknown: true}
			byN[e.session] = s
		}
		s.Examples++
		if e.at.Before(s.Started) {
			s.Started = e.at
		}
		if e.at.After(s.Finished) {
			s.Finished = e.at
		}
	}
	out := make([]outputs.Session, 0, len(byN))
	for _, n := range slices.Sorted(maps.Keys(byN)) {
		s := byN[n]
		s.Seconds = s.Finished.Sub(s.Started).Seconds()
		out = append(out, *s)
	}
	return out
}
