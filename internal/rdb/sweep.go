package rdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sweeping what questions left behind: internal/app/serve (sweep.go). No
// key of its own: it reads the questions' (PendingKey, QuestionLeaseKey,
// QuestionKey, SettleKey) and the runs' (RunsKey, RetiredKey), and deletes
// an older serve's shared verified pairs (LegacyVerifiedKey).

// QuestionState is what Redis says of a question a sweep found.
type QuestionState struct {
	// Pending: the question is unfinished (in PendingKey); Driven: a
	// process holds its lease (QuestionLeaseKey); Recorded: its record
	// exists (QuestionKey); Retired: its run is (RetiredKey).
	Pending, Driven, Recorded, Retired bool
}

// QuestionStates reads the state of each question of ids in one round
// trip; out is parallel to ids.
func QuestionStates(ctx context.Context, c redis.Cmdable, ids []string) ([]QuestionState, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := c.Pipeline()
	pending := make([]*redis.FloatCmd, len(ids))
	exists := make([][3]*redis.IntCmd, len(ids))
	for i, id := range ids {
		pending[i] = pipe.ZScore(ctx, PendingKey, id)
		exists[i] = [3]*redis.IntCmd{pipe.Exists(ctx, QuestionLeaseKey(id)), pipe.Exists(ctx, QuestionKey(id)), pipe.Exists(ctx, RetiredKey(id))}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading the state of %d questions: %w", len(ids), err)
	}
	out := make([]QuestionState, len(ids))
	for i := range ids {
		_, err := pending[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("question %s: %w", ids[i], err)
		}
		out[i].Pending = err == nil
		out[i].Driven = exists[i][0].Val() > 0
		out[i].Recorded = exists[i][1].Val() > 0
		out[i].Retired = exists[i][2].Val() > 0
	}
	return out, nil
}

// PruneRuns drops from the registry of runs (RunsKey) the runs whose last
// key expired before now, as quorum runs list does: a process that runs a
// run a question, and never lists them, would otherwise keep one member
// per question forever. It returns how many it dropped.
func PruneRuns(ctx context.Context, c redis.Cmdable, now time.Time) (int64, error) {
	n, err := c.ZRemRangeByScore(ctx, RunsKey, "-inf", "("+strconv.FormatInt(now.UnixMilli(), 10)).Result()
	if err != nil {
		return 0, fmt.Errorf("pruning the registry of runs %s: %w", RunsKey, err)
	}
	return n, nil
}

// RegisteredRuns lists the runs of the registry (RunsKey).
func RegisteredRuns(ctx context.Context, c redis.Cmdable) ([]string, error) {
	runs, err := c.ZRange(ctx, RunsKey, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("listing the registry of runs %s: %w", RunsKey, err)
	}
	return runs, nil
}

// legacyBatch is how many keys one SCAN step asks for and one UNLINK
// deletes.
const legacyBatch = 500

// DeleteLegacyVerified deletes the verified pairs an older serve kept
// shared by every tenant (LegacyVerifiedKey): they hold tenants' question
// texts and SQL with no expiry, and nothing reads them now. It deletes the
// keys named in known (the served databases' LegacyVerifiedKey) first,
// then SCANs for those of databases no longer served. scanned is false
// when the server refused SCAN: the deployed ACL does (it would list keys
// outside quorum:*), and then only known's keys are gone. deleted counts
// the keys deleted.
func DeleteLegacyVerified(ctx context.Context, c redis.UniversalClient, known []string) (deleted int64, scanned bool, err error) {
	for _, k := range known {
		if !isLegacyVerified(k) {
			return 0, false, fmt.Errorf("deleting legacy verified pairs: %s is not a legacy key", k)
		}
	}
	unlink := func(keys []string) error {
		if len(keys) == 0 {
			return nil
		}
		n, err := c.Unlink(ctx, keys...).Result()
		if err != nil {
			return fmt.Errorf("deleting legacy verified pairs %s…: %w", keys[0], err)
		}
		deleted += n
		return nil
	}
	for chunk := range slices.Chunk(known, legacyBatch) {
		if err := unlink(chunk); err != nil {
			return deleted, false, err
		}
	}
	var found []string
	iter := c.Scan(ctx, 0, verifiedPrefix+"*", legacyBatch).Iterator()
	for iter.Next(ctx) {
		if k := iter.Val(); isLegacyVerified(k) {
			found = append(found, k)
		}
		if len(found) >= legacyBatch {
			if err := unlink(found); err != nil {
				return deleted, false, err
			}
			found = found[:0]
		}
	}
	if err := iter.Err(); err != nil {
		if redis.HasErrorPrefix(err, "NOPERM") {
			return deleted, false, nil
		}
		return deleted, false, fmt.Errorf("scanning for legacy verified pairs %s*: %w", verifiedPrefix, err)
	}
	if err := unlink(found); err != nil {
		return deleted, false, err
	}
	return deleted, true, nil
}
