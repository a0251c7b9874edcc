package serve

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/rdb"
)

// A cancelled question is charged what its finished tasks cost at the
// cancel, and then, as its running tasks stop, what they cost too (their
// workers record it as the tasks' failed results): a question asked and
// cancelled at once costs its tenant what the LLM served, not nothing.
// The questions still to settle are in Redis, so any serve process
// settles them, and a process that dies leaves them to the next.
const settleKey = rdb.SettleKey

// charge brings the tokens and money charged for question id up to what
// it spent: run twice, or by two processes at once, it charges once
// (rdb.Charge). The money counts against --tenant-budget as an answer's.
func (s *Server) charge(ctx context.Context, tenant, id string, spent Cost) error {
	tokens := spent.Tokens()
	if _, err := rdb.Charge(ctx, s.cfg.Redis, tenant, id, tokens, spent.Money); err != nil {
		return fmt.Errorf("charging question %s: %w", id, err)
	}
	// Its token reservation now holds only what it may still cost
	// (tenants.go's quota.settled).
	if err := s.quota.settled(ctx, tenant, id, tokens, s.settleWindow()); err != nil {
		return fmt.Errorf("reconciling question %s's token reservation: %w", id, err)
	}
	return nil
}

// settleWindow is how long after its cancel a question's late costs are
// still looked for: a task stops within a second of the cancel, but one
// whose worker died comes back only after its ack wait.
func (s *Server) settleWindow() time.Duration { return s.cfg.RoundTimeout + time.Minute }

// toSettle records that a cancelled question's running tasks may still add
// costs.
func (s *Server) toSettle(ctx context.Context, id string) {
	deadline := time.Now().Add(s.settleWindow()).UnixMilli()
	if err := s.cfg.Redis.ZAdd(ctx, settleKey, redis.Z{Score: float64(deadline), Member: id}).Err(); err != nil {
		s.cfg.Log.Warn("recording a cancelled question to settle", zap.String("question", id), zap.Error(err))
	}
}

// settle charges the cancelled questions' late costs, and forgets each
// whose tasks have all stopped (or whose window passed).
func (s *Server) settle(ctx context.Context) {
	// Each question run registers itself among the runs; once its keys
	// expired, nothing else would drop it.
	if _, err := rdb.PruneRuns(ctx, s.cfg.Redis, time.Now()); err != nil && ctx.Err() == nil {
		s.cfg.Log.Warn("settling", zap.Error(err))
	}
	ids, err := s.cfg.Redis.ZRangeWithScores(ctx, settleKey, 0, -1).Result()
	if err != nil {
		return
	}
	for _, z := range ids {
		id, _ := z.Member.(string)
		if ctx.Err() != nil {
			return
		}
		rec, err := s.store.get(ctx, id)
		if err != nil {
			if err == errNoQuestion {
				s.releaseOrphan(ctx, id)
				s.cfg.Redis.ZRem(ctx, settleKey, id)
			}
			continue
		}
		// A driver that died before it released its run's consumer and
		// files (its process killed as the cancel came in through
		// another) leaves them to whoever settles the question.
		s.releaseOrphan(ctx, id)
		q := &rec.Question
		stopped, err := s.tasksStopped(ctx, q)
		if err != nil {
			continue
		}
		spent := s.spent(ctx, q)
		if err := s.charge(ctx, q.Tenant, q.ID, spent); err != nil {
			s.cfg.Log.Warn("settling a cancelled question", zap.String("question", id), zap.Error(err))
			continue
		}
		expired := time.Now().UnixMilli() > int64(z.Score)
		if !stopped && !expired {
			continue
		}
		if spent != q.Cost {
			// The record shows what the question cost in the end.
			q.Cost = spent
			if err := s.store.put(ctx, q); err != nil {
				continue
			}
		}
		if n, err := s.cfg.Redis.ZRem(ctx, settleKey, id).Result(); err == nil && n == 1 {
			s.purge(ctx, id)
			s.cfg.Log.Info("cancelled question settled", zap.String("question", id), zap.Int("tokens", spent.Tokens()), zap.Bool("expired", expired))
			if s.onSettle != nil {
				s.onSettle(id)
			}
		}
	}
}

// purge removes what is left on a settled question run's subjects (the
// voter publishes no decision for a cancelled run, but one it published
// just before the cancel mark, or a duplicate, may be there), which no
// coordinator reads any more and which would otherwise stay on the stream
// until its max age. Its tasks have all stopped (or its window passed),
// so none of them is dropped.
func (s *Server) purge(ctx context.Context, id string) {
	if _, err := s.cfg.Env.Queue.PurgeRun(ctx, id); err != nil {
		s.cfg.Log.Warn("purging a settled question run's subjects", zap.String("question", id), zap.Error(err))
	}
}

// tasksStopped reports whether every task the question's run published
// has finished (done, given up, or stopped with its cost recorded) and
// every slot a task owed has its result recorded: a stopped task's cost
// travels with its results, which the voter records after the task is
// marked done.
func (s *Server) tasksStopped(ctx context.Context, q *Question) (bool, error) {
	st := s.cfg.Env.State
	tasks, err := st.Tasks(ctx, q.ID, q.Example, q.Agent)
	if err != nil {
		return false, err
	}
	recorded := map[int]map[int]bool{} // round → indices with a result
	for _, t := range tasks {
		done, err := st.Done(ctx, q.ID, q.Example, q.Agent, t.Task.ID)
		if err != nil || !done {
			return false, err
		}
		round := t.Task.Round
		if _, ok := recorded[round]; !ok && len(t.Task.Slots) > 0 {
			results, err := st.Results(ctx, q.ID, q.Example, q.Agent, round)
			if err != nil {
				return false, err
			}
			recorded[round] = map[int]bool{}
			for _, r := range results {
				recorded[round][r.Index] = true
			}
		}
		for _, slot := range t.Task.Slots {
			if !recorded[round][slot] {
				return false, nil
			}
		}
	}
	return true, nil
}
