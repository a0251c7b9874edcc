package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
)

// Semaphore bounds concurrent holders across the cluster. Slots are leases
// in a sorted set scored by expiry: a holder renews its lease while it works,
// and a holder that dies stops renewing, so its slot is free again within the
// lease time.
type Semaphore struct {
	l        *Limiter
	key      string
	capacity int
	lease    time.Duration
	// freed wakes this process's waiting head when one of its permits is
	// released, rather than at its next poll; held counts those permits.
	freed chan struct{}
	held  atomic.Int32
	// maxPoll is the const maxPoll; tests lengthen it to count only the
	// asks releases cause, not those a slow machine's longer holds add.
	maxPoll time.Duration
}

// Semaphore returns the semaphore named key with the given capacity.
func (l *Limiter) Semaphore(key string, capacity int, lease time.Duration) (*Semaphore, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("semaphore %s: capacity %d must be at least 1", key, capacity)
	}
	if lease < 100*time.Millisecond {
		return nil, fmt.Errorf("semaphore %s: lease %v is too short (minimum 100ms)", key, lease)
	}
	return &Semaphore{l: l, key: l.key(rdb.SemaphoreName(key)), capacity: capacity, lease: lease, freed: make(chan struct{}, 1), maxPoll: maxPoll}, nil
}

// Permit is one held slot. Release it when done.
type Permit struct {
	s      *Semaphore
	token  string
	keeper *rdb.Renewer
	once   sync.Once
	lost   chan struct{}
}

// ErrLeaseLost is reported by Permit.Err when a renewal found the slot gone
// (the holder stalled longer than the lease).
var ErrLeaseLost = errors.New("semaphore lease lost")

// Acquire waits for a slot. The permit renews its lease every lease/3 until
// Release. This process's callers wait in a line (see Limiter.Wait) whose
// head alone polls Redis; a release in this process wakes it at once.
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
	leave, err := s.l.lines.wait(ctx, lineKey(ctx, "semaphore\x00"+s.key))
	if err != nil {
		return nil, err
	}
	defer leave()
	var b [12]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	poll := 5 * time.Millisecond
	for {
		ok, untilExpiry, err := rdb.AcquireSlot(ctx, s.l.rdb, s.key, s.capacity, s.lease, token)
		if err != nil {
			return nil, fmt.Errorf("acquire %s: %w", s.key, err)
		}
		if ok {
			return s.permit(token), nil
		}
		// Wait for a release, polling with jittered backoff (another
		// process's release is seen only so); never past the earliest
		// lease expiry.
		if s.held.Load() > 0 {
			// A release here wakes the head: polling is for other
			// processes' releases, at the slowest rate.
			poll = s.maxPoll
		}
		d := time.Duration(float64(poll) * (0.5 + mrand.Float64()))
		if e := untilExpiry; e > 0 && e < d {
			d = e
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-s.freed:
			t.Stop()
			poll = 5 * time.Millisecond
			continue
		case <-t.C:
		}
		poll = min(poll*2, s.maxPoll)
	}
}

// maxPoll is the longest a waiting head goes without asking Redis.
const maxPoll = 100 * time.Millisecond

// permit is the held slot of token, renewed every third of the lease
// until Release.
func (s *Semaphore) permit(token string) *Permit {
	p := &Permit{s: s, token: token, lost: make(chan struct{})}
	s.held.Add(1)
	p.keeper = &rdb.Renewer{
		Renew:   func(ctx context.Context) (bool, error) { return rdb.RenewSlot(ctx, s.l.rdb, s.key, s.lease, token) },
		Every:   s.lease / 3,
		Timeout: s.lease / 3,
		OnLost:  func() { close(p.lost) },
	}
	// The permit outlives Acquire's context: it renews until Release.
	_ = p.keeper.Start(context.Background()) // a new renewer, with Renew and Every, starts
	return p
}

// Lost is closed if the lease expired before Release.
func (p *Permit) Lost() <-chan struct{} { return p.lost }

// Release frees the slot.
func (p *Permit) Release(ctx context.Context) error {
	var err error
	p.once.Do(func() {
		p.keeper.Stop()
		err = p.s.l.rdb.ZRem(ctx, p.s.key, p.token).Err()
		p.s.held.Add(-1)
		select {
		case p.s.freed <- struct{}{}:
		default: // a wake is already pending
		}
	})
	return err
}

// Held reports how many slots are held now (expired leases excluded).
func (s *Semaphore) Held(ctx context.Context) (int, error) {
	now, err := s.l.rdb.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	n, err := s.l.rdb.ZCount(ctx, s.key, fmt.Sprint(now.UnixMilli()+1), "+inf").Result()
	return int(n), err
}
