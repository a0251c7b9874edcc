package runstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
)

// Retention is how long a finished run's keys stay in Redis. Nothing
// expires before the run finishes: an unfinished run is resumed from them.
type Retention struct {
	// State is the per-example and per-task state (tasks logged and done,
	// candidate results, rounds, the agent's values), which only a resume
	// reads (default DefaultState).
	State time.Duration
	// Answers keeps the manifest and the final answers (what quorum runs
	// list shows and what running a finished run's id again prints) at
	// least as long as State (default DefaultAnswers).
	Answers time.Duration
}

const (
	// DefaultState keeps a finished run's per-task state a week.
	DefaultState = 7 * 24 * time.Hour
	// DefaultAnswers is the lifetime of the blobs holding answers' result
	// tables (internal/blob): an answer kept longer would outlive its rows.
	DefaultAnswers = 14 * 24 * time.Hour
)

// WithDefaults fills in the defaults; Answers is never shorter than State.
func (r Retention) WithDefaults() Retention {
	if r.State <= 0 {
		r.State = DefaultState
	}
	if r.Answers <= 0 {
		r.Answers = DefaultAnswers
	}
	r.Answers = max(r.Answers, r.State)
	return r
}

// batch is how many keys one SSCAN step and one pipeline handle: a large
// batch is few round trips, a small one never blocks Redis long.
const batch = 1000

// eachKey calls fn with run's keys, a batch at a time, as its index
// (rdb.RunIndexKey) lists them: every key the run's writes created, some
// perhaps expired since. It costs what the run holds, whatever else the
// keyspace does.
func (s *Store) eachKey(ctx context.Context, run string, fn func(keys []string) error) error {
	it := s.rdb.SScan(ctx, rdb.RunIndexKey(run), 0, "", batch).Iterator()
	keys := make([]string, 0, batch)
	for it.Next(ctx) {
		if keys = append(keys, it.Val()); len(keys) == batch {
			if err := fn(keys); err != nil {
				return err
			}
			keys = keys[:0]
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("keys of run %s: %w", run, err)
	}
	if len(keys) > 0 {
		return fn(keys)
	}
	return nil
}

// keysOf lists run's keys (its index; some may have expired).
func (s *Store) keysOf(ctx context.Context, run string) ([]string, error) {
	var out []string
	err := s.eachKey(ctx, run, func(keys []string) error { out = append(out, keys...); return nil })
	return out, err
}

// Retire gives every key of a finished run its expiry (the manifest and
// final answers r.Answers, the rest r.State) and drops its round deadlines;
// it returns how many keys its index lists. The run is marked retired
// first (rdb.RetireRun): a key written later, by a task still running at a
// cancel, say, gets the same expiry from the script writing it. A key
// already expiring sooner (the cancel mark) keeps its shorter expiry.
// Calling it again is harmless. It reads the run's index, never the
// keyspace: its cost is the run's size.
func (s *Store) Retire(ctx context.Context, run string, r Retention) (int, error) {
	r = r.WithDefaults()
	stateAt, answersAt, err := rdb.RetireRun(ctx, s.rdb, run, r.State, r.Answers)
	if err != nil {
		return 0, fmt.Errorf("retire run %s: %w", run, err)
	}
	answers := answerKeys(run)
	n := 0
	err = s.eachKey(ctx, run, func(keys []string) error {
		at := make([]time.Time, len(keys))
		for i, k := range keys {
			at[i] = stateAt
			if slices.Contains(answers, k) {
				at[i] = answersAt
			}
		}
		n += len(keys)
		if err := rdb.ExpireAt(ctx, s.rdb, keys, at); err != nil {
			return fmt.Errorf("retire run %s: %w", run, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := s.closeRounds(ctx, run); err != nil {
		return 0, err
	}
	return n, nil
}

// Delete removes every key of run, its index and its round deadlines; it
// returns how many keys it removed.
func (s *Store) Delete(ctx context.Context, run string) (int, error) {
	n := 0
	err := s.eachKey(ctx, run, func(keys []string) error {
		d, err := s.rdb.Unlink(ctx, keys...).Result()
		if err != nil {
			return fmt.Errorf("delete run %s: %w", run, err)
		}
		n += int(d)
		return nil
	})
	if err != nil {
		return n, err
	}
	if err := rdb.ForgetRun(ctx, s.rdb, run); err != nil {
		return n, fmt.Errorf("delete run %s: %w", run, err)
	}
	return n, s.closeRounds(ctx, run)
}

// closeRounds drops a run's round deadlines, so the voter no longer
// watches a run that is gone or over.
func (s *Store) closeRounds(ctx context.Context, run string) error {
	open, err := s.OpenRounds(ctx, run)
	if err != nil {
		return fmt.Errorf("rounds of run %s: %w", run, err)
	}
	for _, r := range open {
		if err := s.CloseRound(ctx, r); err != nil {
			return fmt.Errorf("close round %d of %s in run %s: %w", r.Round, r.Example, run, err)
		}
	}
	return nil
}

// Run statuses (RunInfo.Status).
const (
	// StatusFinished: every example has its final answer.
	StatusFinished = "finished"
	// StatusCancelled: cancelled (a question's run); never resumed.
	StatusCancelled = "cancelled"
	// StatusUnfinished: running now, or interrupted and resumable; the
	// two look the same in Redis.
	StatusUnfinished = "unfinished"
	// StatusOrphaned: keys left without a manifest (written late to a
	// run that expired or was deleted).
	StatusOrphaned = "orphaned"
)

// RunInfo is what Redis holds of one run.
type RunInfo struct {
	Run         string    `json:"run"`
	Status      string    `json:"status"`
	Agent       string    `json:"agent,omitempty"`
	Interactive bool      `json:"interactive,omitempty"`
	Examples    int       `json:"examples"`
	Final       int       `json:"final"`
	Created     time.Time `json:"created,omitzero"`
	Keys        int       `json:"keys"`
	// Bytes is Redis's estimate of the keys' memory (MEMORY USAGE).
	Bytes int64 `json:"bytes"`
	// Persistent counts keys without an expiry (every key of an
	// unfinished run; none of a retired one).
	Persistent int `json:"persistent_keys"`
	// MinTTL and MaxTTL are the shortest and longest expiries of the keys
	// that have one: the per-task state goes at MinTTL (about), the last
	// key at MaxTTL.
	MinTTL time.Duration `json:"min_ttl_ns,omitempty"`
	MaxTTL time.Duration `json:"max_ttl_ns,omitempty"`
}

// Runs describes every run with keys in Redis, oldest first (orphans
// last). The runs are the registry's (rdb.RunsKey), each run's keys its
// index's: no command scans the keyspace (the deployed ACL refuses SCAN).
// Runs retired and expired leave the registry here.
func (s *Store) Runs(ctx context.Context) ([]RunInfo, error) {
	expired := "(" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	if err := s.rdb.ZRemRangeByScore(ctx, rdb.RunsKey, "-inf", expired).Err(); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := s.rdb.ZRange(ctx, rdb.RunsKey, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := make([]RunInfo, 0, len(runs))
	for _, run := range runs {
		keys, err := s.keysOf(ctx, run)
		if err != nil {
			return nil, err
		}
		info, err := s.describe(ctx, run, keys)
		if err != nil {
			return nil, err
		}
		if info.Keys > 0 {
			out = append(out, *info)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Status == StatusOrphaned) != (b.Status == StatusOrphaned) {
			return b.Status == StatusOrphaned
		}
		if !a.Created.Equal(b.Created) {
			return a.Created.Before(b.Created)
		}
		return a.Run < b.Run
	})
	return out, nil
}

// Describe describes one run; ErrNoRun when it has no key at all.
func (s *Store) Describe(ctx context.Context, run string) (*RunInfo, error) {
	keys, err := s.keysOf(ctx, run)
	if err != nil {
		return nil, err
	}
	info, err := s.describe(ctx, run, keys)
	if err != nil {
		return nil, err
	}
	if info.Keys == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoRun, run)
	}
	return info, nil
}

func (s *Store) describe(ctx context.Context, run string, keys []string) (*RunInfo, error) {
	info := &RunInfo{Run: run}
	for chunk := range slices.Chunk(keys, batch) {
		pipe := s.rdb.Pipeline()
		ttls := make([]*redis.DurationCmd, len(chunk))
		mem := make([]*redis.IntCmd, len(chunk))
		for i, k := range chunk {
			ttls[i], mem[i] = pipe.PTTL(ctx, k), pipe.MemoryUsage(ctx, k)
		}
		// Each command's own error is read: a key of the index that
		// expired answers nil (it counts for nothing), and a server
		// refusing MEMORY USAGE leaves the bytes unknown, not the list.
		_, _ = pipe.Exec(ctx)
		for i := range chunk {
			if err := ttls[i].Err(); err != nil && !errors.Is(err, redis.Nil) {
				return nil, fmt.Errorf("describe run %s: %w", run, err)
			}
			ttl := ttls[i].Val()
			if ttl == -2 { // go-redis reports PTTL's -2 (no key) as -2ns
				continue
			}
			info.Keys++
			info.Bytes += mem[i].Val()
			switch {
			case ttl == -1: // and -1 (no expiry) as -1ns
				info.Persistent++
			case ttl > 0:
				if info.MinTTL == 0 || ttl < info.MinTTL {
					info.MinTTL = ttl
				}
				info.MaxTTL = max(info.MaxTTL, ttl)
			}
		}
	}
	m, err := s.Manifest(ctx, run)
	if errors.Is(err, ErrNoRun) {
		info.Status = StatusOrphaned
		return info, nil
	}
	if err != nil {
		return nil, err
	}
	info.Agent, info.Interactive, info.Examples, info.Created = m.Agent, m.Interactive, len(m.Examples), m.Created
	final, err := s.rdb.HLen(ctx, rdb.FinalKey(run)).Result()
	if err != nil {
		return nil, fmt.Errorf("final answers of run %s: %w", run, err)
	}
	info.Final = int(final)
	cancelled, err := s.Cancelled(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	switch {
	case info.Final >= info.Examples:
		info.Status = StatusFinished
	case cancelled:
		info.Status = StatusCancelled
	default:
		info.Status = StatusUnfinished
	}
	return info, nil
}
