// Package runstate keeps a run's durable state in Redis: its manifest, where
// each example runs, per example and agent the tasks dispatched and those
// finished, the candidate results the voter records (once per round and
// candidate), round expectations, outcomes and deadlines, the agent's own
// values, and the final answers. A restarted voter, worker or coordinator
// carries on from it.
package runstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/slot"
)

// Manifest describes a run; resuming a run, and every worker joining it,
// reuse it.
type Manifest struct {
	Run       string    `json:"run"`
	Dataset   string    `json:"dataset"`
	TaskFile  string    `json:"task_file,omitempty"`
	SQLiteDir string    `json:"sqlite_dir,omitempty"`
	Seed      uint64    `json:"seed"`
	Votes     int       `json:"votes"`
	Examples  []string  `json:"examples"`
	Created   time.Time `json:"created"`
	// Agent runs every example, with AgentOptions (every option the agent
	// declares, defaults filled in).
	Agent        string            `json:"agent"`
	AgentOptions map[string]string `json:"agent_options,omitempty"`
	// RoundTimeout bounds how long the voter waits for a round's results.
	RoundTimeout time.Duration `json:"round_timeout"`
	// QueryTimeout interrupts any one warehouse query of the run
	// (candidates, exploration, checks); 0 leaves each warehouse's own.
	QueryTimeout time.Duration `json:"query_timeout,omitempty"`
	LLM          string        `json:"llm"`
	// Questions, when set, are the run's examples, asked online (quorum
	// serve) on the dataset's databases instead of read from its task file.
	Questions []dataset.Question `json:"questions,omitempty"`
	// Interactive runs' tasks go to the pools' urgent lane, which workers
	// drain before batch work.
	Interactive bool `json:"interactive,omitempty"`
	// VerifiedExamples says the run's questions were offered question–SQL
	// pairs users verified (quorum serve --verified-examples; the pairs
	// are in each question's external knowledge). Batch runs never are,
	// so their EX stays comparable with the papers'.
	VerifiedExamples bool `json:"verified_examples,omitempty"`
	// Skipped are the task lines left out with --skip-invalid.
	Skipped []string `json:"skipped,omitempty"`
	// StreamReplicas is how many JetStream servers kept a copy of the
	// streams when the run was created (--stream-replicas): a resumed
	// coordinator gives the streams as many again, and refuses a flag
	// asking for fewer.
	StreamReplicas int `json:"stream_replicas,omitempty"`
	// Trace is what the run's trace keeps (pkg/trace: none, summary,
	// full); empty, a run recorded before traces, keeps none.
	Trace string `json:"trace,omitempty"`
	// TraceParent is the W3C traceparent the run's examples' traces
	// continue (a serve question's HTTP request), if any.
	TraceParent string `json:"trace_parent,omitempty"`
	// MaxTokens caps the LLM tokens (prompt and completion) the run's
	// calls may use; 0 is no cap. Workers count each answered call
	// (SpendTokens) and, once the count reaches it, the run is cancelled
	// (StoppedForTokens tells its reason) and its tasks stopped: it passes
	// the cap by at most the calls in flight then. quorum serve sets a
	// question's token reservation.
	MaxTokens int64 `json:"max_tokens,omitempty"`
}

// ExampleMeta is what the runtime needs about a published example.
type ExampleMeta struct {
	Warehouse string    `json:"warehouse"`
	Published time.Time `json:"published"`
}

// Store is the run state in Redis. Every write goes through a script of
// internal/rdb that records the key in the run's index and, once the run
// is retired, gives it the run's expiry: a late write to a finished run (a
// redelivered task's, or one still running at a cancel) never leaves a key
// that lives forever, whether it creates the key or overwrites it.
type Store struct {
	rdb redis.UniversalClient
}

// New returns a store.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

// answerKeys are the keys retention keeps for Retention.Answers: what
// describes the run and what it answered.
func answerKeys(run string) []string { return []string{rdb.ManifestKey(run), rdb.FinalKey(run)} }

// ErrNoRun is returned for a run id without a manifest.
var ErrNoRun = errors.New("no such run")

// CreateManifest stores m unless the run exists; it returns the stored
// manifest and whether it was created now.
func (s *Store) CreateManifest(ctx context.Context, m *Manifest) (*Manifest, bool, error) {
	b, _ := json.Marshal(m)
	ok, err := rdb.CreateRunKey(ctx, s.rdb, m.Run, rdb.ManifestKey(m.Run), rdb.AnswerKey, b)
	if err != nil {
		return nil, false, fmt.Errorf("store manifest of run %s: %w", m.Run, err)
	}
	if ok {
		return m, true, nil
	}
	got, err := s.Manifest(ctx, m.Run)
	return got, false, err
}

// Manifest loads a run's manifest.
func (s *Store) Manifest(ctx context.Context, run string) (*Manifest, error) {
	b, err := s.rdb.Get(ctx, rdb.ManifestKey(run)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("%w: %s", ErrNoRun, run)
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest of run %s: %w", run, err)
	}
	return &m, nil
}

// Cancel marks a run cancelled: workers drop its queued tasks and stop
// its running ones.
func (s *Store) Cancel(ctx context.Context, run, reason string) error {
	return rdb.SetRunKey(ctx, s.rdb, run, rdb.CancelledKey(run), rdb.StateKey, reason, rdb.CancelTTL)
}

// Cancelled reports whether a run was cancelled.
func (s *Store) Cancelled(ctx context.Context, run string) (bool, error) {
	n, err := s.rdb.Exists(ctx, rdb.CancelledKey(run)).Result()
	return n > 0, err
}

// CancelReason returns why run was cancelled, "" if it was not.
func (s *Store) CancelReason(ctx context.Context, run string) (string, error) {
	r, err := s.rdb.Get(ctx, rdb.CancelledKey(run)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cancel mark of run %s: %w", run, err)
	}
	return r, nil
}

// tokenLimitPrefix starts the cancel reason of a run stopped at its
// MaxTokens, which is how StoppedForTokens tells it from a cancel.
const tokenLimitPrefix = "token limit: "

// TokenLimitReason is the cancel reason of a run stopped at its cap of
// limit tokens.
func TokenLimitReason(limit int64) string {
	return fmt.Sprintf("%sits LLM calls reached the run's cap of %d tokens", tokenLimitPrefix, limit)
}

// StoppedForTokens reports whether a cancel reason (CancelReason) is that
// of a run stopped at its MaxTokens.
func StoppedForTokens(reason string) bool { return strings.HasPrefix(reason, tokenLimitPrefix) }

// SpendTokens adds an answered call's tokens to what run's calls have
// used and reports whether they have reached limit (the run's MaxTokens,
// > 0). The call that reaches it marks the run cancelled
// (TokenLimitReason), in the same step, unless a cancel marked it first.
func (s *Store) SpendTokens(ctx context.Context, run string, tokens, limit int64) (used int64, reached bool, err error) {
	return rdb.SpendRunTokens(ctx, s.rdb, run, tokens, limit, TokenLimitReason(limit))
}

// TokensUsed is what run's answered calls have used (SpendTokens; 0 for a
// run without a cap).
func (s *Store) TokensUsed(ctx context.Context, run string) (int64, error) {
	n, err := s.rdb.Get(ctx, rdb.RunTokensKey(run)).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("tokens used by run %s: %w", run, err)
	}
	return n, nil
}

// SetMeta records an example's meta.
func (s *Store) SetMeta(ctx context.Context, run, ex string, m ExampleMeta) error {
	b, _ := json.Marshal(m)
	return rdb.HSetRunKey(ctx, s.rdb, run, rdb.MetaKey(run), rdb.StateKey, ex, b)
}

// Meta returns an example's meta.
func (s *Store) Meta(ctx context.Context, run, ex string) (*ExampleMeta, error) {
	b, err := s.rdb.HGet(ctx, rdb.MetaKey(run), ex).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("example %s of run %s was never published", ex, run)
	}
	if err != nil {
		return nil, err
	}
	var m ExampleMeta
	return &m, json.Unmarshal(b, &m)
}

// Metas returns the metas of the examples ids that were published, by
// id, a thousand to a round trip: a report over a whole run reads them
// all, and one round trip each made that the longest part of its output.
func (s *Store) Metas(ctx context.Context, run string, ids []string) (map[string]*ExampleMeta, error) {
	out := make(map[string]*ExampleMeta, len(ids))
	for chunk := range slices.Chunk(ids, 1000) {
		vals, err := s.rdb.HMGet(ctx, rdb.MetaKey(run), chunk...).Result()
		if err != nil {
			return nil, fmt.Errorf("metas of run %s: %w", run, err)
		}
		for i, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // never published
			}
			var m ExampleMeta
			if err := json.Unmarshal([]byte(str), &m); err != nil {
				return nil, fmt.Errorf("meta of example %s of run %s: %w", chunk[i], run, err)
			}
			out[chunk[i]] = &m
		}
	}
	return out, nil
}

var exKey = rdb.ExampleKey

// AddResult records a candidate result once: a redelivered or duplicated
// result does not count twice. It returns whether it was new and how many
// results the round has.
func (s *Store) AddResult(ctx context.Context, r *message.CandidateResult) (bool, int, error) {
	b, _ := json.Marshal(r)
	added, n, err := rdb.HSetOnceRunKey(ctx, s.rdb, r.Run, exKey(r.Run, r.Example, r.Agent, "round", strconv.Itoa(r.Round)), r.Index, b)
	if err != nil {
		return false, 0, fmt.Errorf("record candidate %d of %s: %w", r.Index, r.Example, err)
	}
	return added, n, nil
}

// AddPart records one part of a join once and returns how many parts the
// join has.
func (s *Store) AddPart(ctx context.Context, run, ex, agentName, group string, part int, value []byte) (int, error) {
	_, n, err := rdb.HSetOnceRunKey(ctx, s.rdb, run, exKey(run, ex, agentName, "join", group), part, value)
	if err != nil {
		return 0, fmt.Errorf("record part %d of join %s of %s: %w", part, group, ex, err)
	}
	return n, nil
}

// Parts returns a join's recorded parts by index.
func (s *Store) Parts(ctx context.Context, run, ex, agentName, group string) (map[int][]byte, error) {
	m, err := s.rdb.HGetAll(ctx, exKey(run, ex, agentName, "join", group)).Result()
	if err != nil {
		return nil, fmt.Errorf("parts of join %s of %s: %w", group, ex, err)
	}
	out := make(map[int][]byte, len(m))
	for k, v := range m {
		i, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("join %s of %s: part %q: %w", group, ex, k, err)
		}
		out[i] = []byte(v)
	}
	return out, nil
}

// Results returns a round's recorded results, by candidate index.
func (s *Store) Results(ctx context.Context, run, ex, agentName string, round int) ([]*message.CandidateResult, error) {
	m, err := s.rdb.HGetAll(ctx, exKey(run, ex, agentName, "round", strconv.Itoa(round))).Result()
	if err != nil {
		return nil, err
	}
	out := make([]*message.CandidateResult, 0, len(m))
	for _, v := range m {
		var r message.CandidateResult
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, err
		}
		out = append(out, &r)
	}
	// By index, so votes and tie-breaks do not depend on arrival order.
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

// Open records a round before its tasks are published: how many results
// it awaits, every task (so a resume can publish what is unfinished), and
// that it is now the example's current round.
func (s *Store) Open(ctx context.Context, run, ex, agentName string, round, expect int, tasks []*message.Task) error {
	vals, err := taskFields(tasks)
	if err != nil {
		return err
	}
	if err := rdb.OpenRound(ctx, s.rdb, run, exKey(run, ex, agentName, "expect", strconv.Itoa(round)), exKey(run, ex, agentName, "tasks"),
		exKey(run, ex, agentName, "current"), expect, round, vals...); err != nil {
		return fmt.Errorf("open round %d of %s: %w", round, ex, err)
	}
	return nil
}

// LogTasks records tasks a task continues into, before they are published.
func (s *Store) LogTasks(ctx context.Context, run, ex, agentName string, tasks []*message.Task) error {
	vals, err := taskFields(tasks)
	if err != nil || len(vals) == 0 {
		return err
	}
	return rdb.HSetRunKey(ctx, s.rdb, run, exKey(run, ex, agentName, "tasks"), rdb.StateKey, vals...)
}

// taskFields is the tasks' hash fields: id, envelope, id, envelope….
func taskFields(tasks []*message.Task) ([]any, error) {
	vals := make([]any, 0, 2*len(tasks))
	for _, t := range tasks {
		b, err := json.Marshal(t)
		if err != nil {
			return nil, err
		}
		vals = append(vals, t.Task.ID, b)
	}
	return vals, nil
}

// Expected returns how many results a round awaits (0 when it was never
// opened).
func (s *Store) Expected(ctx context.Context, run, ex, agentName string, round int) (int, error) {
	n, err := s.rdb.Get(ctx, exKey(run, ex, agentName, "expect", strconv.Itoa(round))).Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// Current returns the example's latest opened round, or -1 when none was.
func (s *Store) Current(ctx context.Context, run, ex, agentName string) (int, error) {
	n, err := s.rdb.Get(ctx, exKey(run, ex, agentName, "current")).Int()
	if errors.Is(err, redis.Nil) {
		return -1, nil
	}
	return n, err
}

// Currents is Current for each of the examples ids, pipelined a thousand
// to a round trip: a coordinator that starts or resumes a run asks it of
// every example, and one round trip each grew its start with the run.
func (s *Store) Currents(ctx context.Context, run, agentName string, ids []string) (map[string]int, error) {
	out := make(map[string]int, len(ids))
	for chunk := range slices.Chunk(ids, 1000) {
		cmds := make([]*redis.StringCmd, len(chunk))
		_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, ex := range chunk {
				cmds[i] = p.Get(ctx, exKey(run, ex, agentName, "current"))
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("current rounds of run %s: %w", run, err)
		}
		for i, cmd := range cmds {
			n, err := cmd.Int()
			switch {
			case errors.Is(err, redis.Nil):
				n = -1
			case err != nil:
				return nil, fmt.Errorf("current round of %s in run %s: %w", chunk[i], run, err)
			}
			out[chunk[i]] = n
		}
	}
	return out, nil
}

// Tasks returns every task logged for the example.
func (s *Store) Tasks(ctx context.Context, run, ex, agentName string) ([]*message.Task, error) {
	m, err := s.rdb.HGetAll(ctx, exKey(run, ex, agentName, "tasks")).Result()
	if err != nil {
		return nil, err
	}
	out := make([]*message.Task, 0, len(m))
	for _, v := range m {
		var t message.Task
		if err := json.Unmarshal([]byte(v), &t); err != nil {
			return nil, err
		}
		out = append(out, &t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task.ID < out[j].Task.ID })
	return out, nil
}

// MarkDone records that a task finished: what it produced is published.
// A redelivery of it is then acknowledged without running it again.
func (s *Store) MarkDone(ctx context.Context, run, ex, agentName, taskID string) error {
	return rdb.SAddRunKey(ctx, s.rdb, run, exKey(run, ex, agentName, "done"), taskID)
}

// Ran counts a delivery that starts running a task (it holds the task's
// lease and has taken it) and returns how many have, this one included.
// A delivery that died before that (its worker killed while it waited
// for a dead holder's lease) is not counted: the task's give-up budget
// is spent by runs, not by deliveries.
func (s *Store) Ran(ctx context.Context, run, ex, agentName, taskID string) (int, error) {
	n, err := rdb.HIncrRunKey(ctx, s.rdb, run, exKey(run, ex, agentName, "ran"), taskID, 1)
	if err != nil {
		return 0, fmt.Errorf("count a run of task %s of %s: %w", taskID, ex, err)
	}
	return int(n), nil
}

// TaskRuns is how many deliveries of a task have started running it (Ran).
func (s *Store) TaskRuns(ctx context.Context, run, ex, agentName, taskID string) (int, error) {
	n, err := s.rdb.HGet(ctx, exKey(run, ex, agentName, "ran"), taskID).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("runs of task %s of %s: %w", taskID, ex, err)
	}
	return n, nil
}

// Done reports whether a task finished.
func (s *Store) Done(ctx context.Context, run, ex, agentName, taskID string) (bool, error) {
	return s.rdb.SIsMember(ctx, exKey(run, ex, agentName, "done"), taskID).Result()
}

// Round outcomes recorded by the voter.
const (
	OutcomeFinal = "final" // the final answer was published
	OutcomeNext  = "next"  // the next round's tasks were published
)

// MarkDecided records how a round was decided, after the messages it
// implies were published.
func (s *Store) MarkDecided(ctx context.Context, r Round, outcome string) error {
	return rdb.SetRunKey(ctx, s.rdb, r.Run, exKey(r.Run, r.Example, r.Agent, "decided", strconv.Itoa(r.Round)), rdb.StateKey, outcome, 0)
}

// Decided returns a round's outcome, "" while it is undecided.
func (s *Store) Decided(ctx context.Context, r Round) (string, error) {
	v, err := s.rdb.Get(ctx, exKey(r.Run, r.Example, r.Agent, "decided", strconv.Itoa(r.Round))).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

const roundsKey = rdb.RoundsKey

// Round names a round of an example's agent.
type Round struct {
	Run, Example, Agent string
	Round               int
}

func (r Round) member() string {
	return r.Run + "|" + r.Example + "|" + r.Agent + "|" + strconv.Itoa(r.Round)
}

// Progress records that a task of a round was taken, is alive or
// finished: the task is marked taken and the round's deadline moves to
// deadline. A round already decided (its deadline removed) stays closed.
func (s *Store) Progress(ctx context.Context, r Round, taskID string, deadline time.Time) error {
	_, err := rdb.Progress(ctx, s.rdb, r.Run, exKey(r.Run, r.Example, r.Agent, "done"), exKey(r.Run, r.Example, r.Agent, "taken"), taskID, r.member(), deadline)
	return err
}

// Take records that a worker took a task (progress: the round's deadline
// moves to deadline) and reports whether the task is already done, in one
// round trip.
func (s *Store) Take(ctx context.Context, r Round, taskID string, deadline time.Time) (done bool, err error) {
	done, err = rdb.Progress(ctx, s.rdb, r.Run, exKey(r.Run, r.Example, r.Agent, "done"), exKey(r.Run, r.Example, r.Agent, "taken"), taskID, r.member(), deadline)
	if err != nil {
		return false, fmt.Errorf("take task %s of %s: %w", taskID, r.Example, err)
	}
	return done, nil
}

// Waiting lists a round's logged tasks that no worker has taken yet and
// that are not done: they are queued (behind the quota, or other work).
func (s *Store) Waiting(ctx context.Context, r Round) ([]string, error) {
	tasks, err := s.Tasks(ctx, r.Run, r.Example, r.Agent)
	if err != nil {
		return nil, err
	}
	pipe := s.rdb.Pipeline()
	taken := pipe.SMembersMap(ctx, exKey(r.Run, r.Example, r.Agent, "taken"))
	done := pipe.SMembersMap(ctx, exKey(r.Run, r.Example, r.Agent, "done"))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tasks {
		id := t.Task.ID
		if t.Task.Round != r.Round {
			continue
		}
		if _, ok := taken.Val()[id]; ok {
			continue
		}
		if _, ok := done.Val()[id]; ok {
			continue
		}
		out = append(out, id)
	}
	return out, nil
}

// Untake forgets that workers took tasks of an example's agent, and that
// they finished (reopen): a task published again after its last holder
// died is queued, not taken, until a worker takes it; one reissued after
// Redis lost its result must run again. Untake runs before the publish,
// so a worker taking the new message marks it taken afresh.
func (s *Store) Untake(ctx context.Context, run, ex, agentName string, reopen bool, taskIDs ...string) error {
	if len(taskIDs) == 0 {
		return nil
	}
	ids := make([]any, len(taskIDs))
	for i, id := range taskIDs {
		ids[i] = id
	}
	pipe := s.rdb.TxPipeline()
	pipe.SRem(ctx, exKey(run, ex, agentName, "taken"), ids...)
	if reopen {
		pipe.SRem(ctx, exKey(run, ex, agentName, "done"), ids...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("untake tasks %v of %s: %w", taskIDs, ex, err)
	}
	return nil
}

// CountReissue records that a lost task was published again (see the
// voter's reconcile) and returns how many times it was.
func (s *Store) CountReissue(ctx context.Context, run, ex, agentName, taskID string) (int, error) {
	n, err := rdb.HIncrRunKey(ctx, s.rdb, run, exKey(run, ex, agentName, "reissued"), taskID, 1)
	return int(n), err
}

// Reissues returns how many times each of the example's agent's tasks was
// reissued.
func (s *Store) Reissues(ctx context.Context, run, ex, agentName string) (map[string]int, error) {
	m, err := s.rdb.HGetAll(ctx, exKey(run, ex, agentName, "reissued")).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k], _ = strconv.Atoi(v)
	}
	return out, nil
}

// DoneSet returns the example's agent's finished tasks.
func (s *Store) DoneSet(ctx context.Context, run, ex, agentName string) (map[string]struct{}, error) {
	return s.rdb.SMembersMap(ctx, exKey(run, ex, agentName, "done")).Result()
}

// RoundDeadline is an open round and its deadline.
type RoundDeadline struct {
	Round
	Deadline time.Time
}

// AllOpenRounds lists every open round of every run, with its deadline.
func (s *Store) AllOpenRounds(ctx context.Context) ([]RoundDeadline, error) {
	zs, err := s.rdb.ZRangeWithScores(ctx, roundsKey, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	var out []RoundDeadline
	for _, z := range zs {
		m, _ := z.Member.(string)
		p := strings.Split(m, "|")
		if len(p) != 4 {
			continue
		}
		r, _ := strconv.Atoi(p[3])
		out = append(out, RoundDeadline{Round: Round{Run: p[0], Example: p[1], Agent: p[2], Round: r}, Deadline: time.UnixMilli(int64(z.Score))})
	}
	return out, nil
}

// OpenDeadline sets a round's deadline (the first deadline set wins).
func (s *Store) OpenDeadline(ctx context.Context, r Round, deadline time.Time) error {
	return s.rdb.ZAddNX(ctx, roundsKey, redis.Z{Score: float64(deadline.UnixMilli()), Member: r.member()}).Err()
}

// DueRounds lists rounds whose deadline has passed.
func (s *Store) DueRounds(ctx context.Context, now time.Time) ([]Round, error) {
	ms, err := s.rdb.ZRangeByScore(ctx, roundsKey, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now.UnixMilli(), 10)}).Result()
	if err != nil {
		return nil, err
	}
	var out []Round
	for _, m := range ms {
		p := strings.Split(m, "|")
		if len(p) != 4 {
			continue
		}
		r, _ := strconv.Atoi(p[3])
		out = append(out, Round{Run: p[0], Example: p[1], Agent: p[2], Round: r})
	}
	return out, nil
}

// OpenRounds lists a run's rounds that still have a deadline (undecided).
func (s *Store) OpenRounds(ctx context.Context, run string) ([]Round, error) {
	ms, err := s.rdb.ZRange(ctx, roundsKey, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	var out []Round
	for _, m := range ms {
		p := strings.Split(m, "|")
		if len(p) == 4 && p[0] == run {
			r, _ := strconv.Atoi(p[3])
			out = append(out, Round{Run: p[0], Example: p[1], Agent: p[2], Round: r})
		}
	}
	return out, nil
}

// CloseRound removes a round's deadline.
func (s *Store) CloseRound(ctx context.Context, r Round) error {
	return s.rdb.ZRem(ctx, roundsKey, r.member()).Err()
}

// Get and Set keep an agent's own values for an example.
func (s *Store) Get(ctx context.Context, run, ex, agentName, name string) (string, bool, error) {
	v, err := s.rdb.Get(ctx, exKey(run, ex, agentName, "state", name)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return v, err == nil, err
}

// Set stores an agent's value for an example.
func (s *Store) Set(ctx context.Context, run, ex, agentName, name, value string) error {
	return rdb.SetRunKey(ctx, s.rdb, run, exKey(run, ex, agentName, "state", name), rdb.StateKey, value, 0)
}

// SetFinal records an example's final answer.
func (s *Store) SetFinal(ctx context.Context, f *message.FinalAnswer) error {
	b, _ := json.Marshal(f)
	return rdb.HSetRunKey(ctx, s.rdb, f.Run, rdb.FinalKey(f.Run), rdb.AnswerKey, f.Example, b)
}

// AppendTrace appends encoded trace entries to an example's trace.
func (s *Store) AppendTrace(ctx context.Context, run, ex string, entries ...[]byte) error {
	vals := make([]any, len(entries))
	for i, e := range entries {
		vals[i] = e
	}
	return rdb.RPushRunKey(ctx, s.rdb, run, rdb.TraceKey(run, ex), vals...)
}

// Trace returns an example's encoded trace entries, in the order they were
// written.
func (s *Store) Trace(ctx context.Context, run, ex string) ([][]byte, error) {
	vals, err := s.rdb.LRange(ctx, rdb.TraceKey(run, ex), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("trace of %s in run %s: %w", ex, run, err)
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// Finals returns every final answer of a run (RecordedFinals without
// their times).
func (s *Store) Finals(ctx context.Context, run string) (map[string]*message.FinalAnswer, error) {
	rec, err := s.RecordedFinals(ctx, run)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*message.FinalAnswer, len(rec))
	for k, r := range rec {
		out[k] = r.FinalAnswer
	}
	return out, nil
}

// Once returns the value stored under name for the example, computing it
// with fn at most once across the cluster: the first caller takes a lease
// and computes; the others wait for its value.
func (s *Store) Once(ctx context.Context, run, ex, agentName, name string, fn func(ctx context.Context) (string, error)) (string, error) {
	key := exKey(run, ex, agentName, "once", name)
	lease := rdb.NewLease(s.rdb, rdb.LockKey(key), "", onceLease)
	// Waiting for another task's value leaves this task's slot to others
	// (the holder may need one to finish); it is taken again to compute.
	wctx, back := ctx, func() {}
	defer func() { back() }()
	for {
		v, err := s.rdb.Get(wctx, key).Result()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, redis.Nil) {
			return "", err
		}
		got, err := lease.Acquire(wctx)
		if err != nil {
			return "", err
		}
		if got {
			// The holder before us may have stored the value and let go
			// between our read and our lease.
			if v, err := s.rdb.Get(wctx, key).Result(); err == nil {
				_ = lease.Release(context.WithoutCancel(ctx))
				return v, nil
			}
			back()
			back = func() {}
			return s.computeOnce(ctx, run, key, lease, fn)
		}
		if wctx == ctx {
			wctx, back = slot.Idle(ctx)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// onceLease is how long a Once computation holds its lease without
// renewing it: the holder renews it while it works (a planner turn or a
// proposer loop can run for many minutes), so only a holder that died
// lets another process take over, within this time.
const onceLease = 15 * time.Second

func (s *Store) computeOnce(ctx context.Context, run, key string, lease *rdb.Lease, fn func(ctx context.Context) (string, error)) (string, error) {
	renewer := lease.Renewer()
	if err := renewer.Start(ctx); err != nil {
		return "", err
	}
	v, err := fn(ctx)
	renewer.Stop()
	if err == nil {
		err = rdb.SetRunKey(ctx, s.rdb, run, key, rdb.StateKey, v, 0)
	}
	_ = lease.Release(context.WithoutCancel(ctx))
	if err != nil {
		return "", err
	}
	return v, nil
}

// Ping checks that Redis answers.
func (s *Store) Ping(ctx context.Context) error { return s.rdb.Ping(ctx).Err() }

// Cache is a cluster-wide key-value cache (rdb.CacheKey), shared by every
// run (agent.Cache). A value lives rdb.CacheTTL after its last write.
type Cache struct {
	rdb redis.UniversalClient
}

// NewCache returns the cache.
func NewCache(rdb redis.UniversalClient) *Cache { return &Cache{rdb: rdb} }

// Get returns a cached value.
func (c *Cache) Get(ctx context.Context, key string) (string, bool, error) {
	v, err := c.rdb.Get(ctx, rdb.CacheKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	return v, err == nil, err
}

// Set stores a value for rdb.CacheTTL.
func (c *Cache) Set(ctx context.Context, key, value string) error {
	return c.rdb.Set(ctx, rdb.CacheKey(key), value, rdb.CacheTTL).Err()
}
