package serve

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// A question of a tenant with a token limit runs capped at its token
// reservation (tenants.go): its run's MaxTokens. The workers count each
// answered LLM call of the run in Redis and, once the count reaches the
// cap, mark the run cancelled with the token limit's reason and stop its
// tasks before another call starts (internal/runtime/worker, tokens.go).
// The question's driver sees the mark (its lease keeper, keeper) and ends
// the question failed, saying so; it is then accounted as a cancelled
// one is: charged what its recorded results cost, and what its stopping
// tasks spent as they stop (settle.go), which releases its reservation.

// tokenCap is the cap on question q's run: the tokens it reserved when it
// was admitted (0, no cap: its tenant has no token limit, or it holds no
// reservation, its admission's having lapsed before it was stored).
func (s *Server) tokenCap(ctx context.Context, q *Question) (int64, error) {
	if s.cfg.Tenants == nil || s.cfg.Tenants.LimitsOf(q.Tenant).TokensPerDay <= 0 {
		return 0, nil
	}
	return rdb.QuestionTokenHold(ctx, s.cfg.Redis, q.Tenant, q.ID)
}

// stoppedForTokens ends question id failed if its run was stopped at its
// token cap (its driver has stopped), and accounts it.
func (s *Server) stoppedForTokens(ctx context.Context, id string) {
	st := s.cfg.Env.State
	reason, err := st.CancelReason(ctx, id)
	if err != nil || !runstate.StoppedForTokens(reason) {
		return
	}
	m, err := st.Manifest(ctx, id)
	if err != nil {
		s.cfg.Log.Warn("reading the manifest of a question stopped at its tokens", zap.String("question", id), zap.Error(err))
		return // the next driver sees the mark again
	}
	rec, err := s.store.get(ctx, id)
	if err != nil || rec.Terminal() {
		return
	}
	s.awaitTasksStopped(ctx, &rec.Question)
	used, _ := st.TokensUsed(ctx, id) // unread: the error names the cap alone
	q, applied, err := s.store.update(ctx, id, func(q *Question) {
		q.Status, q.Finished = Failed, time.Now().UTC()
		q.Error = s.tokenCapError(q.Tenant, m.MaxTokens, used)
		q.Cost = s.spent(ctx, q)
	})
	if err != nil || !applied {
		return // already ended (a cancel came first)
	}
	s.cfg.Log.Info("question stopped at its token reservation", zap.String("question", id), zap.String("tenant", q.Tenant),
		zap.Int64("reserved", m.MaxTokens), zap.Int64("used", used))
	s.stopped(ctx, q)
}

// tokenStopWait bounds how long the driver of a question stopped at its
// tokens waits for the question's tasks to stop (each ends with its call
// in flight): then its record shows, and its tenant is charged, what they
// spent at once, rather than at a later settling. It is shorter than the
// question's lease's TTL, which nothing renews meanwhile; a task whose
// worker died is left to the settling.
const tokenStopWait = 5 * time.Second

// awaitTasksStopped returns once q's tasks have all stopped, after
// tokenStopWait, or when the server stops.
func (s *Server) awaitTasksStopped(ctx context.Context, q *Question) {
	deadline := time.NewTimer(tokenStopWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	base := s.baseCtx()
	for {
		if stopped, err := s.tasksStopped(ctx, q); err != nil || stopped {
			return
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-base.Done():
			return
		}
	}
}

// tokenCapError is the error of a question of tenant stopped at its
// reservation of reserved tokens, its calls having used used (0: unknown).
func (s *Server) tokenCapError(tenant string, reserved, used int64) string {
	var limit int64
	if s.cfg.Tenants != nil {
		limit = s.cfg.Tenants.LimitsOf(tenant).TokensPerDay
	}
	spent := ""
	if used > 0 {
		spent = fmt.Sprintf(" (its LLM calls had used %d)", used)
	}
	return fmt.Sprintf("stopped at its token reservation: the question reached the %d tokens reserved for it%s under tenant %s's daily limit of %d tokens; no answer",
		reserved, spent, tenant, limit)
}
