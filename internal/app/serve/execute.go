package serve

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/trace"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// leaseTTL is how soon another process takes over a question whose driver
// died; the driver renews at a third of it.
const leaseTTL = 10 * time.Second

// start drives question id in this process unless it already does or
// another live process holds its lease.
func (s *Server) start(ctx context.Context, id string) {
	s.mu.Lock()
	if _, ok := s.running[id]; ok {
		s.mu.Unlock()
		return
	}
	lease := s.store.lease(id, s.owner, leaseTTL)
	ok, err := lease.Acquire(ctx)
	if err != nil || !ok {
		s.mu.Unlock()
		return
	}
	qctx, cancel := context.WithCancel(ctx)
	s.running[id] = cancel
	s.drivers.Add(1)
	s.mu.Unlock()
	if m := s.cfg.Metrics; m != nil {
		m.QuestionsRunning.Inc()
	}
	go func() {
		defer s.drivers.Done()
		keeper := s.keeper(lease, cancel, id)
		defer func() {
			cancel()
			keeper.Stop() // before the release: nothing renews a lease let go
			if m := s.cfg.Metrics; m != nil {
				m.QuestionsRunning.Dec()
			}
			s.mu.Lock()
			delete(s.running, id)
			s.mu.Unlock()
			_ = lease.Release(context.WithoutCancel(ctx))
			// Else every question's run stays cached in this process.
			s.cfg.Env.Forget(id)
		}()
		if err := keeper.Start(qctx); err != nil {
			s.cfg.Log.Error("keeping the lease of a question", zap.String("question", id), zap.Error(err))
			return
		}
		s.drive(qctx, id)
	}()
}

// keeper renews the question's lease while this process drives it, and
// stops the question here (stop) when the lease is lost (a partition let
// another process take it) or the question was cancelled through another
// process.
func (s *Server) keeper(lease *rdb.Lease, stop context.CancelFunc, id string) *rdb.Renewer {
	r := lease.Renewer()
	r.OnLost = func() {
		s.cfg.Log.Warn("lost the lease of a question; another process drives it", zap.String("question", id))
		stop()
	}
	r.AfterRenew = func(ctx context.Context) {
		if q, err := s.store.get(ctx, id); err == nil && q.Status == Cancelled {
			stop()
			return
		}
		// A worker stops the run at the question's token reservation
		// (tokens.go): its coordinator would wait for an answer that
		// never comes.
		if reason, err := s.cfg.Env.State.CancelReason(ctx, id); err == nil && runstate.StoppedForTokens(reason) {
			stop()
		}
	}
	return r
}

// manifest is the question's one-example interactive run, its LLM tokens
// capped at maxTokens (0: no cap).
func (s *Server) manifest(q *Question, maxTokens int64) *runstate.Manifest {
	return &runstate.Manifest{Run: q.ID, Dataset: s.cfg.Dataset, SQLiteDir: s.cfg.SQLiteDir, Seed: s.cfg.Seed, Votes: q.Votes, MaxTokens: maxTokens,
		Examples: []string{q.Example}, Created: q.Created, Agent: q.Agent, AgentOptions: q.Options,
		RoundTimeout: s.cfg.RoundTimeout, QueryTimeout: s.cfg.QueryTimeout, LLM: s.cfg.LLM, Interactive: true,
		VerifiedExamples: s.cfg.VerifiedExamples, Trace: cmp.Or(s.cfg.Trace, trace.NameSummary), TraceParent: q.TraceParent,
		Questions: []dataset.Question{{ID: q.Example, DB: q.DB, Dialect: warehouse.Dialect(q.Dialect), Question: q.Question,
			ExternalKnowledge: q.context()}}}
}

// drive runs the question to its answer and records it. A question whose
// run is interrupted (ctx ends: shutdown, lost lease) stays pending for the
// next driver; the run resumes where it was.
func (s *Server) drive(ctx context.Context, id string) {
	r, err := s.store.get(ctx, id)
	if err != nil {
		s.cfg.Log.Warn("reading a pending question", zap.String("question", id), zap.Error(err))
		return
	}
	q := &r.Question
	if q.Terminal() {
		return
	}
	if q.Status == Queued {
		if q, _, err = s.store.update(ctx, id, func(q *Question) { q.Status, q.Started = Running, time.Now().UTC() }); err != nil || q.Terminal() {
			return
		}
	}
	maxTokens, err := s.tokenCap(ctx, q) // tokens.go
	if err != nil {
		// Never run without its cap: the next adoption tries again.
		s.cfg.Log.Warn("reading a question's token reservation", zap.String("question", id), zap.Error(err))
		return
	}
	out := filepath.Join(s.cfg.StateDir, "questions", id)
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: s.cfg.Env, Manifest: s.manifest(q, maxTokens), Out: out, AbortAfter: -1, MaxInFlight: 1, Retain: s.cfg.Retain})
	if ctx.Err() != nil {
		s.stoppedForTokens(context.WithoutCancel(ctx), id)
		s.afterStop(context.WithoutCancel(ctx), id, out)
		return // cancelled, stopped at its tokens, shutting down or taken over: the record says which
	}
	fin := func(q *Question) {
		q.Finished = time.Now().UTC()
		if err != nil {
			q.Status, q.Error = Failed, err.Error()
			return
		}
		s.answer(q, rep, out)
	}
	cache := func(p redis.Pipeliner, q *Question) { s.cacheIn(context.WithoutCancel(ctx), p, q) }
	q, applied, uerr := s.store.updateWith(context.WithoutCancel(ctx), id, fin, cache)
	if uerr != nil {
		s.cfg.Log.Error("recording an answer", zap.String("question", id), zap.Error(uerr))
		return
	}
	if applied { // else it was cancelled meanwhile, and accounted then
		s.finished(context.WithoutCancel(ctx), q)
	}
	s.cleanUp(context.WithoutCancel(ctx), id, out, err == nil)
}

// answer copies the run's decision, SQL and result rows into q.
func (s *Server) answer(q *Question, rep *outputs.Report, out string) {
	if len(rep.Examples) != 1 {
		q.Status, q.Error = Failed, fmt.Sprintf("the run reported %d examples", len(rep.Examples))
		return
	}
	e := rep.Examples[0]
	q.Cost, q.Timing = costOf(e.Cost), timingOf(e)
	q.Confidence, q.Method, q.Candidates, q.Valid, q.Agreed = e.Confidence, e.Method, e.Candidates, e.ValidCandidates, e.AgreedCandidates
	switch e.Status {
	case "answered":
	case "no_answer":
		q.Status, q.Error = Failed, "no candidate produced a result"+suffix(e.Error)
		return
	default:
		q.Status, q.Error = Failed, e.Error
		if q.Error == "" {
			q.Error = "the question's run failed"
		}
		return
	}
	sql, err := os.ReadFile(filepath.Join(out, q.Example+".sql"))
	if err != nil {
		q.Status, q.Error = Failed, fmt.Sprintf("reading the answer's SQL: %v", err)
		return
	}
	q.SQL = strings.TrimSpace(string(sql))
	if (s.cfg.Simulated || s.cfg.SimulatorEndpoint) && llmsim.IsNoAnswer(q.SQL) {
		// The simulator did not recognise the question and said so: its
		// candidates all agree on that, which is no answer and no
		// confidence. What the calls cost stays.
		q.SQL, q.Confidence, q.Method, q.Candidates, q.Valid, q.Agreed = "", "", "", 0, 0, nil
		noAnswer(q, "(its dataset's questions)")
		return
	}
	q.Understood = Understood(q.SQL, warehouse.Dialect(q.Dialect))
	if err := s.readRows(q, filepath.Join(out, q.Example+".csv")); err != nil {
		q.Status, q.Error = Failed, fmt.Sprintf("reading the answer's rows: %v", err)
		return
	}
	q.Gold = s.goldCheck(q, filepath.Join(out, q.Example+".csv"))
	q.Status = Answered
}

func suffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// readRows reads the result CSV, keeping the first MaxRows rows.
func (s *Server) readRows(q *Question, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	head, err := r.Read()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	q.Columns = head
	q.Rows = [][]string{}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		q.RowCount++
		if len(q.Rows) < s.cfg.MaxRows {
			q.Rows = append(q.Rows, rec)
		} else {
			q.Truncated = true
		}
	}
}

// finished accounts a finished question: the tenant's tokens and the
// question log (an answer's cache entry is written with its record).
func (s *Server) finished(ctx context.Context, q *Question) {
	s.logQuestion(q) // first: the smallest window for a crash to lose it
	s.count(q)
	if !q.Cached {
		s.quota.spend(ctx, q.Tenant, q.Cost.Tokens(), q.Cost.Money)
	}
}

// logQuestion writes the question log line: who asked what, the SQL, what
// it cost and how it ended (never a key).
func (s *Server) logQuestion(q *Question) {
	if s.cfg.QuestionLog == nil {
		return
	}
	line, _ := json.Marshal(map[string]any{
		"time": time.Now().UTC(), "id": q.ID, "tenant": q.Tenant, "db": q.DB, "agent": q.Agent, "question": q.Question,
		"status": q.Status, "sql": q.SQL, "confidence": q.Confidence, "cost": q.Cost, "cached": q.Cached, "error": q.Error,
		"seconds": q.Finished.Sub(q.Created).Seconds(),
	})
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = s.cfg.QuestionLog.Write(append(line, '\n'))
}

// cancel stops a question: its record says cancelled, its run's queued
// tasks are dropped and its running ones stopped by the workers.
func (s *Server) cancel(ctx context.Context, id string) (*Question, error) {
	if err := s.cfg.Env.State.Cancel(ctx, id, "cancelled by the client"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if stop, ok := s.running[id]; ok {
		stop()
	}
	s.mu.Unlock()
	q, applied, err := s.store.update(ctx, id, func(q *Question) {
		q.Status, q.Finished, q.Error = Cancelled, time.Now().UTC(), "cancelled by the client"
		// What its finished tasks cost is charged like any answer's.
		q.Cost = s.spent(ctx, q)
	})
	if err != nil || !applied {
		return q, err // already ended: nothing to stop
	}
	s.stopped(ctx, q)
	return q, nil
}

// stopped accounts a question whose run was stopped before its answer (a
// cancel, its token reservation reached), once its record says so: what
// its recorded results cost is charged now, its running tasks' costs as
// they stop (settle.go).
func (s *Server) stopped(ctx context.Context, q *Question) {
	if err := s.charge(ctx, q.Tenant, q.ID, q.Cost); err != nil {
		s.cfg.Log.Warn("charging a stopped question", zap.String("question", q.ID), zap.Error(err))
	}
	s.toSettle(ctx, q.ID)
	s.logQuestion(q)
	s.count(q)
	s.retireRun(ctx, q.ID)
}

// count adds a finished question to the aggregate metrics.
func (s *Server) count(q *Question) {
	if m := s.cfg.Metrics; m != nil {
		m.Questions.WithLabelValues(q.Status, strconv.FormatBool(q.Cached)).Inc()
	}
}

// spent adds up what a question's recorded results cost (each carries the
// cost of the tasks it continued).
func (s *Server) spent(ctx context.Context, q *Question) Cost {
	st := s.cfg.Env.State
	current, err := st.Current(ctx, q.ID, q.Example, q.Agent)
	if err != nil {
		return Cost{}
	}
	var total cost.Cost
	for round := 0; round <= current; round++ {
		results, err := st.Results(ctx, q.ID, q.Example, q.Agent, round)
		if err != nil {
			break
		}
		for _, r := range results {
			total.Add(r.Cost.Total())
		}
	}
	return costOf(total)
}

func costOf(c cost.Cost) Cost {
	return Cost{LLMCalls: c.LLMCalls, PromptTokens: c.LLM.PromptTokens, CompletionTokens: c.LLM.CompletionTokens,
		CachedTokens: c.LLM.CachedTokens, Money: c.LLM.Money, WarehouseQueries: c.Queries}
}
