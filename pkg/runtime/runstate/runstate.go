// Package runstate keeps a run's durable state in Redis: its manifest, what
// each example's tasks need, the candidate results the voter records (once
// per run, example, round and candidate), round deadlines, and the final
// answers. A restarted voter or coordinator carries on from it.
package runstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/pkg/queue"
)

// Manifest describes a run; resuming a run reuses it.
type Manifest struct {
	Run       string    `json:"run"`
	Dataset   string    `json:"dataset"`
	TaskFile  string    `json:"task_file,omitempty"`
	SQLiteDir string    `json:"sqlite_dir,omitempty"`
	Seed      uint64    `json:"seed"`
	Votes     int       `json:"votes"`
	Examples  []string  `json:"examples"`
	Created   time.Time `json:"created"`
	// Agent options.
	NoExploration     bool `json:"no_exploration,omitempty"`
	FormatRestriction bool `json:"format_restriction,omitempty"`
	SelfConsistency   bool `json:"self_consistency,omitempty"`
	CTERefine         bool `json:"cte_refine,omitempty"`
	// RoundTimeout bounds how long the voter waits for a round's results.
	RoundTimeout time.Duration `json:"round_timeout"`
	LLM          string        `json:"llm"`
}

// ExampleMeta is what the voter and workers need about a published example.
type ExampleMeta struct {
	Warehouse string    `json:"warehouse"`
	InfoRef   string    `json:"info_ref"`
	Published time.Time `json:"published"`
	// Linking is set while the example's schema linking is pending; the
	// link task's worker clears it with the linked prompt.
	Linking bool `json:"linking,omitempty"`
}

// Store is the run state in Redis.
type Store struct {
	rdb redis.UniversalClient
}

// New returns a store.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

func runKey(run string, parts ...string) string {
	return "quorum:run:" + run + ":" + strings.Join(parts, ":")
}

// ErrNoRun is returned for a run id without a manifest.
var ErrNoRun = errors.New("no such run")

// CreateManifest stores m unless the run exists; it returns the stored
// manifest and whether it was created now.
func (s *Store) CreateManifest(ctx context.Context, m *Manifest) (*Manifest, bool, error) {
	b, _ := json.Marshal(m)
	ok, err := s.rdb.SetNX(ctx, runKey(m.Run, "manifest"), b, 0).Result()
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
	b, err := s.rdb.Get(ctx, runKey(run, "manifest")).Bytes()
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

// SetMeta records an example's meta.
func (s *Store) SetMeta(ctx context.Context, run, ex string, m ExampleMeta) error {
	b, _ := json.Marshal(m)
	return s.rdb.HSet(ctx, runKey(run, "meta"), ex, b).Err()
}

// Meta returns an example's meta.
func (s *Store) Meta(ctx context.Context, run, ex string) (*ExampleMeta, error) {
	b, err := s.rdb.HGet(ctx, runKey(run, "meta"), ex).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("example %s of run %s was never published", ex, run)
	}
	if err != nil {
		return nil, err
	}
	var m ExampleMeta
	return &m, json.Unmarshal(b, &m)
}

var addResult = redis.NewScript(`
local added = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
return {added, redis.call('HLEN', KEYS[1])}
`)

// AddResult records a candidate result once: a redelivered or duplicated
// result does not count twice. It returns whether it was new and how many
// results the round has.
func (s *Store) AddResult(ctx context.Context, r *queue.CandidateResult) (bool, int, error) {
	b, _ := json.Marshal(r)
	res, err := addResult.Run(ctx, s.rdb, []string{runKey(r.Run, "ex", r.Example, "round", strconv.Itoa(r.Round))}, r.Index, b).Slice()
	if err != nil {
		return false, 0, fmt.Errorf("record candidate %d of %s: %w", r.Index, r.Example, err)
	}
	return res[0].(int64) == 1, int(res[1].(int64)), nil
}

// Results returns a round's recorded results, by candidate index.
func (s *Store) Results(ctx context.Context, run, ex string, round int) ([]*queue.CandidateResult, error) {
	m, err := s.rdb.HGetAll(ctx, runKey(run, "ex", ex, "round", strconv.Itoa(round))).Result()
	if err != nil {
		return nil, err
	}
	out := make([]*queue.CandidateResult, 0, len(m))
	for _, v := range m {
		var r queue.CandidateResult
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, err
		}
		out = append(out, &r)
	}
	// By index, so votes and tie-breaks do not depend on arrival order.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Index < out[j-1].Index; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// RoundCount is how many results a round has.
func (s *Store) RoundCount(ctx context.Context, run, ex string, round int) (int, error) {
	n, err := s.rdb.HLen(ctx, runKey(run, "ex", ex, "round", strconv.Itoa(round))).Result()
	return int(n), err
}

// Round outcomes recorded by the voter.
const (
	OutcomeFinal   = "final"   // the final answer was published
	OutcomeExplore = "explore" // exploration tasks were published
)

// MarkDecided records how a round was decided, after the messages it
// implies were published.
func (s *Store) MarkDecided(ctx context.Context, run, ex string, round int, outcome string) error {
	return s.rdb.Set(ctx, runKey(run, "ex", ex, "decided", strconv.Itoa(round)), outcome, 0).Err()
}

// Decided returns a round's outcome, "" while it is undecided.
func (s *Store) Decided(ctx context.Context, run, ex string, round int) (string, error) {
	v, err := s.rdb.Get(ctx, runKey(run, "ex", ex, "decided", strconv.Itoa(round))).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

const roundsKey = "quorum:rounds"

// OpenRound sets a round's deadline (the first deadline set wins).
func (s *Store) OpenRound(ctx context.Context, run, ex string, round int, deadline time.Time) error {
	return s.rdb.ZAddNX(ctx, roundsKey, redis.Z{Score: float64(deadline.UnixMilli()), Member: run + "|" + ex + "|" + strconv.Itoa(round)}).Err()
}

// Round names a round of an example.
type Round struct {
	Run, Example string
	Round        int
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
		if len(p) != 3 {
			continue
		}
		r, _ := strconv.Atoi(p[2])
		out = append(out, Round{Run: p[0], Example: p[1], Round: r})
	}
	return out, nil
}

// CloseRound removes a round's deadline.
func (s *Store) CloseRound(ctx context.Context, r Round) error {
	return s.rdb.ZRem(ctx, roundsKey, r.Run+"|"+r.Example+"|"+strconv.Itoa(r.Round)).Err()
}

// SetFinal records an example's final answer.
func (s *Store) SetFinal(ctx context.Context, f *queue.FinalAnswer) error {
	b, _ := json.Marshal(f)
	return s.rdb.HSet(ctx, runKey(f.Run, "final"), f.Example, b).Err()
}

// Finals returns every final answer of a run.
func (s *Store) Finals(ctx context.Context, run string) (map[string]*queue.FinalAnswer, error) {
	m, err := s.rdb.HGetAll(ctx, runKey(run, "final")).Result()
	if err != nil {
		return nil, err
	}
	out := map[string]*queue.FinalAnswer{}
	for k, v := range m {
		var f queue.FinalAnswer
		if err := json.Unmarshal([]byte(v), &f); err != nil {
			return nil, err
		}
		out[k] = &f
	}
	return out, nil
}

// Once returns the value stored under name for the example, computing it
// with fn at most once across the cluster: the first caller takes a lock
// and computes; the others wait for its value.
func (s *Store) Once(ctx context.Context, run, ex, name string, fn func(ctx context.Context) (string, error)) (string, error) {
	key := runKey(run, "ex", ex, "once", name)
	lock := key + ":lock"
	for {
		v, err := s.rdb.Get(ctx, key).Result()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, redis.Nil) {
			return "", err
		}
		got, err := s.rdb.SetNX(ctx, lock, "1", 5*time.Minute).Result()
		if err != nil {
			return "", err
		}
		if got {
			v, err := fn(ctx)
			if err != nil {
				s.rdb.Del(context.WithoutCancel(ctx), lock)
				return "", err
			}
			if err := s.rdb.Set(ctx, key, v, 0).Err(); err != nil {
				return "", err
			}
			return v, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
