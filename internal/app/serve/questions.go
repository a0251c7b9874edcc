package serve

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// Question statuses.
const (
	Queued    = "queued"
	Running   = "running"
	Answered  = "answered"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// Cost is what one answer cost.
type Cost struct {
	LLMCalls         int `json:"llm_calls"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// CachedTokens are the prompt tokens the provider served from its
	// prompt cache; Money what the calls cost at the endpoints' prices.
	CachedTokens     int     `json:"cached_tokens"`
	Money            float64 `json:"money"`
	WarehouseQueries int     `json:"warehouse_queries"`
}

// Tokens is the answer's LLM tokens, what tenants' daily limits count.
func (c Cost) Tokens() int { return c.PromptTokens + c.CompletionTokens }

// Question is one question and, once it has one, its answer: what GET
// /v1/questions/{id} returns. It is kept in Redis, so any serve process
// can answer for it and a restarted one resumes it.
type Question struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Tenant string `json:"-"`
	// What was asked.
	DB                string            `json:"db"`
	Dialect           string            `json:"dialect"`
	Question          string            `json:"question"`
	ExternalKnowledge string            `json:"external_knowledge,omitempty"`
	Agent             string            `json:"agent"`
	Votes             int               `json:"votes"`
	Options           map[string]string `json:"options,omitempty"`
	// The answer.
	SQL string `json:"sql,omitempty"`
	// Understood restates in one line how the question was taken, read
	// from SQL (Understood).
	Understood string     `json:"understood,omitempty"`
	Columns    []string   `json:"columns,omitempty"`
	Rows       [][]string `json:"rows,omitzero"`
	RowCount   int        `json:"row_count,omitempty"`
	Truncated  bool       `json:"truncated,omitempty"`
	Confidence string     `json:"confidence,omitempty"`
	Method     string     `json:"method,omitempty"`
	Candidates int        `json:"candidates,omitempty"`
	Valid      int        `json:"valid_candidates,omitempty"`
	Agreed     []int      `json:"agreed_candidates,omitempty"`
	Cost       Cost       `json:"cost"`
	Cached     bool       `json:"cached,omitempty"`
	Error      string     `json:"error,omitempty"`
	Created    time.Time  `json:"created"`
	Started    time.Time  `json:"started,omitzero"`
	Finished   time.Time  `json:"finished,omitzero"`
	// NoAnswer says the simulated LLM has no answer for the question (it
	// answers only its dataset's questions): the question was not run,
	// or (a standalone simulator) its agents were told so by it.
	NoAnswer bool `json:"no_answer,omitempty"`
	// FollowUpOf is the earlier question this one follows up; Turns the
	// conversation it carries to the agent (at most MaxTurns).
	FollowUpOf string `json:"follow_up_of,omitempty"`
	Turns      []Turn `json:"turns,omitempty"`
	// Examples are the verified pairs offered to the agent
	// (Config.VerifiedExamples).
	Examples []VerifiedPair `json:"examples,omitempty"`
	// Feedback is the user's verdict on the answer.
	Feedback *Feedback `json:"feedback,omitempty"`
	// Gold is the answer checked against the dataset's gold answer, when
	// the question is one of its examples that has one (gold.go).
	Gold *GoldCheck `json:"gold,omitempty"`
	// Example is the question's example id within its run, derived from
	// what was asked so that its seeds (and so its answer) are those of
	// the same question in a dataset run.
	Example string `json:"-"`
	// NoCache skips the answer cache for this question.
	NoCache bool `json:"-"`
	// TraceParent is the W3C trace context of the request that asked it:
	// the question's trace continues it.
	TraceParent string `json:"trace_parent,omitempty"`
	// Fingerprint is the database schema's when the question was asked.
	Fingerprint string `json:"-"`
	// Timing is where its run spent its time, once it has an answer.
	Timing *RunTiming `json:"-"`
}

// RunTiming is where a question's run spent its time. The record keeps it
// because the run's files (run.json) are removed once the answer is
// recorded; quorum bench --mixed reads it.
type RunTiming struct {
	// CriticalPathSeconds is the LLM and warehouse time of the slowest
	// candidate chain per round.
	CriticalPathSeconds float64 `json:"critical_path_seconds"`
	// LatencySeconds runs from the run publishing the question to its
	// final answer; ServiceSeconds is the part of it its tasks were in
	// service.
	LatencySeconds float64 `json:"latency_seconds"`
	ServiceSeconds float64 `json:"service_seconds"`
	// LimiterWaitSeconds is its calls' time waiting for the LLM quota;
	// RateLimited the 429s its LLM client saw and retried.
	LimiterWaitSeconds float64 `json:"limiter_wait_seconds"`
	RateLimited        int     `json:"rate_limited"`
}

// timingOf reads a question run's example from its report.
func timingOf(e outputs.Example) *RunTiming {
	return &RunTiming{CriticalPathSeconds: e.CriticalPathSeconds, LatencySeconds: e.LatencySeconds, ServiceSeconds: e.ServiceSeconds,
		LimiterWaitSeconds: e.Cost.LLM.LimiterWait.Seconds(), RateLimited: e.Cost.LLM.RateLimited}
}

// Timing returns where question id's run spent its time: nil until it has
// an answer, and for an answer from the cache.
func (s *Server) Timing(ctx context.Context, id string) (*RunTiming, error) {
	r, err := s.store.get(ctx, id)
	if err != nil {
		return nil, err
	}
	return r.Timing, nil
}

// cleanUp ends what a finished question leaves behind: its run's
// coordinator consumer goes (a finished run's coordinator deleted it, a
// failed or cancelled one's did not, and each one left keeps its state and
// goroutines in the NATS servers, and comes back with them after a
// restart), its run's files under the state directory go (its answer and
// Timing are in the record), and unless its run finished (the coordinator
// then retired it) its run is retired here. It is called once no
// coordinator of this process runs the question, and only for a question
// no driver will run again (terminal, or being cancelled).
func (s *Server) cleanUp(ctx context.Context, id, out string, retired bool) {
	if !retired {
		s.retireRun(ctx, id)
	}
	s.release(ctx, id, out)
}

// release deletes a question run's consumer and its files here: what a
// question no driver runs any more still holds outside Redis.
func (s *Server) release(ctx context.Context, id, out string) {
	if err := coordinator.DeleteConsumer(ctx, s.cfg.Env, id); err != nil {
		s.cfg.Log.Warn("deleting a question run's consumer", zap.String("question", id), zap.Error(err))
	}
	if err := os.RemoveAll(out); err != nil {
		s.cfg.Log.Warn("removing a question run's files", zap.String("question", id), zap.Error(err))
	}
}

// questionDir is where question id's run writes its files here.
func (s *Server) questionDir(id string) string { return filepath.Join(s.cfg.StateDir, "questions", id) }

// afterStop cleans up after a question whose run was stopped: when it was
// cancelled (not merely interrupted by a shutdown or a lost lease, when
// the next driver resumes it), nothing of its run is needed again. A
// cancel marks the run before it stops the driver and records the
// question cancelled only after, so the record may not say so yet: the
// mark does.
func (s *Server) afterStop(ctx context.Context, id, out string) {
	if s.ended(ctx, id) {
		s.cleanUp(ctx, id, out, false)
	}
}

// ended reports whether question id is over for good: its record is
// terminal, or its run is marked cancelled (a cancel under way).
func (s *Server) ended(ctx context.Context, id string) bool {
	if r, err := s.store.get(ctx, id); err == nil && r.Terminal() {
		return true
	}
	cancelled, err := s.cfg.Env.State.Cancelled(ctx, id)
	return err == nil && cancelled
}

// retireRun gives a question run's keys their expiry. Its subjects are
// not purged: a cancelled run's queued tasks are dropped by the workers,
// which record their costs for settling.
func (s *Server) retireRun(ctx context.Context, id string) {
	if _, err := s.cfg.Env.State.Retire(ctx, id, s.cfg.Retain); err != nil {
		s.cfg.Log.Warn("retiring a question run's keys", zap.String("question", id), zap.Error(err))
	}
}

// record is the stored form: the public fields and the private ones.
type record struct {
	Question
	Tenant      string     `json:"tenant"`
	Example     string     `json:"example"`
	NoCache     bool       `json:"no_cache,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"`
	Timing      *RunTiming `json:"timing,omitempty"`
}

// Terminal reports whether the question is finished one way or another.
func (q *Question) Terminal() bool {
	return q.Status == Answered || q.Status == Failed || q.Status == Cancelled
}

// newID is a question id: a run id and a Redis key token, unguessable so
// that one tenant cannot read another's questions by counting.
func newID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "q" + hex.EncodeToString(b[:])
}

// ExampleID names the question within its run after what was asked.
func ExampleID(db, question, knowledge string) string {
	h := sha256.Sum256([]byte(db + "\x00" + question + "\x00" + knowledge))
	return "q" + hex.EncodeToString(h[:6])
}

// normalize makes equal questions equal for the cache: case, spacing and
// trailing punctuation do not change what is asked.
func normalize(q string) string {
	q = strings.ToLower(strings.Join(strings.Fields(q), " "))
	return strings.TrimRightFunc(q, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
}

// store keeps questions in Redis.
type store struct {
	rdb redis.UniversalClient
	ttl time.Duration
}

const pendingKey = rdb.PendingKey

var questionKey = rdb.QuestionKey

var errNoQuestion = errors.New("no such question")

func (s *store) get(ctx context.Context, id string) (*record, error) {
	return getWith(ctx, s.rdb, id)
}

// getter is a client or a transaction.
type getter interface {
	Get(ctx context.Context, key string) *redis.StringCmd
}

func getWith(ctx context.Context, c getter, id string) (*record, error) {
	b, err := c.Get(ctx, questionKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, errNoQuestion
	}
	if err != nil {
		return nil, fmt.Errorf("read question %s: %w", id, err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("question %s: %w", id, err)
	}
	r.Question.Tenant, r.Question.Example, r.Question.NoCache, r.Question.Fingerprint = r.Tenant, r.Example, r.NoCache, r.Fingerprint
	r.Question.Timing = r.Timing
	return &r, nil
}

func (s *store) put(ctx context.Context, q *Question) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error { return s.queue(ctx, p, q) })
	if err != nil {
		return fmt.Errorf("store question %s: %w", q.ID, err)
	}
	return nil
}

// queue adds the writes of q to a transaction.
func (s *store) queue(ctx context.Context, p redis.Pipeliner, q *Question) error {
	b, err := json.Marshal(record{Question: *q, Tenant: q.Tenant, Example: q.Example, NoCache: q.NoCache, Fingerprint: q.Fingerprint, Timing: q.Timing})
	if err != nil {
		return err
	}
	p.Set(ctx, questionKey(q.ID), b, s.ttl)
	if q.Terminal() {
		p.ZRem(ctx, pendingKey, q.ID)
	} else {
		p.ZAdd(ctx, pendingKey, redis.Z{Score: float64(q.Created.UnixMilli()), Member: q.ID})
	}
	return nil
}

// update applies fn to the stored question unless it is already
// terminal, atomically: a cancel is never overwritten by a late answer,
// nor an answer by a late cancel. applied says whether fn's change was
// stored (false: the question had already ended).
func (s *store) update(ctx context.Context, id string, fn func(q *Question)) (q *Question, applied bool, err error) {
	return s.updateWith(ctx, id, fn, nil)
}

// updateWith is update that also writes what also queues, in the same
// transaction as the changed question: whoever sees the change sees that.
func (s *store) updateWith(ctx context.Context, id string, fn func(q *Question), also func(p redis.Pipeliner, q *Question)) (q *Question, applied bool, err error) {
	for range 10 {
		applied = false
		err = s.rdb.Watch(ctx, func(tx *redis.Tx) error {
			r, err := getWith(ctx, tx, id)
			if err != nil {
				return err
			}
			q = &r.Question
			if q.Terminal() {
				return nil
			}
			fn(q)
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				if also != nil {
					also(p, q)
				}
				return s.queue(ctx, p, q)
			})
			applied = err == nil
			return err
		}, questionKey(id))
		if errors.Is(err, redis.TxFailedErr) {
			continue // changed meanwhile: read it again
		}
		return q, applied, err
	}
	return nil, false, fmt.Errorf("question %s: too many concurrent updates", id)
}

// pending lists the questions accepted and not finished, oldest first.
func (s *store) pending(ctx context.Context) ([]string, error) {
	return s.rdb.ZRange(ctx, pendingKey, 0, -1).Result()
}

// claimIdempotent maps a tenant's Idempotency-Key to id, or returns the
// id it already maps to.
func (s *store) claimIdempotent(ctx context.Context, tenant, key, id string) (string, bool, error) {
	k := rdb.IdempotencyKey(hashKey(tenant, key))
	ok, err := s.rdb.SetNX(ctx, k, id, s.ttl).Result()
	if err != nil {
		return "", false, fmt.Errorf("idempotency key: %w", err)
	}
	if ok {
		return id, true, nil
	}
	prev, err := s.rdb.Get(ctx, k).Result()
	return prev, false, err
}

// releaseIdempotent frees a tenant's Idempotency-Key that still maps to
// id, when the question could not be stored: a retry then starts afresh.
func (s *store) releaseIdempotent(ctx context.Context, tenant, key, id string) {
	_, _ = rdb.DeleteIfEquals(ctx, s.rdb, rdb.IdempotencyKey(hashKey(tenant, key)), id)
}

func hashKey(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// lease is the lease that makes one serve process at a time drive a
// question; a process that dies loses it within ttl, and another (or its
// restart) takes over.
func (s *store) lease(id, owner string, ttl time.Duration) *rdb.Lease {
	return rdb.NewLease(s.rdb, rdb.QuestionLeaseKey(id), owner, ttl)
}
