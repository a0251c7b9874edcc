package runstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
)

// Checkpoint returns the chain state a task saved last (SaveCheckpoint).
func (s *Store) Checkpoint(ctx context.Context, run, ex, agentName, task string) (string, bool, error) {
	v, err := s.rdb.Get(ctx, rdb.CheckpointKey(run, ex, agentName, task)).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("checkpoint of task %s of %s: %w", task, ex, err)
	}
	return v, true, nil
}

// SaveCheckpoint replaces a task's checkpoint; it lives rdb.CheckpointTTL
// from this save.
func (s *Store) SaveCheckpoint(ctx context.Context, run, ex, agentName, task, value string) error {
	if err := s.rdb.Set(ctx, rdb.CheckpointKey(run, ex, agentName, task), value, rdb.CheckpointTTL).Err(); err != nil {
		return fmt.Errorf("save checkpoint of task %s of %s: %w", task, ex, err)
	}
	return nil
}

// DropCheckpoint deletes a task's checkpoint: its chain is done.
func (s *Store) DropCheckpoint(ctx context.Context, run, ex, agentName, task string) error {
	if err := s.rdb.Del(ctx, rdb.CheckpointKey(run, ex, agentName, task)).Err(); err != nil {
		return fmt.Errorf("drop checkpoint of task %s of %s: %w", task, ex, err)
	}
	return nil
}

// TaskLease is the lease of the process (owner) running a task, held for
// ttl at a time (rdb.TaskLeaseTTL when 0), not yet acquired.
func (s *Store) TaskLease(run, ex, agentName, task, owner string, ttl time.Duration) *rdb.Lease {
	if ttl <= 0 {
		ttl = rdb.TaskLeaseTTL
	}
	return rdb.NewLease(s.rdb, rdb.TaskLeaseKey(run, ex, agentName, task), owner, ttl)
}

// RenewTaskLease renews a task's lease l, or takes it again when Redis
// lost it (a failover to a replica that had not seen it) and the task is
// not done: no other holder exists then. False: another holds it.
func (s *Store) RenewTaskLease(ctx context.Context, l *rdb.Lease, run, ex, agentName, task string) (bool, error) {
	ok, _, err := rdb.RenewOrRetake(ctx, s.rdb, l, exKey(run, ex, agentName, "done"), task)
	return ok, err
}
