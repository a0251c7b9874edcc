package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"sync"
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
}

// Semaphore returns the semaphore named key with the given capacity.
func (l *Limiter) Semaphore(key string, capacity int, lease time.Duration) (*Semaphore, error) {
	if capacity < 1 {
		return nil, fmt.Errorf("semaphore %s: capacity %d must be at least 1", key, capacity)
	}
	if lease < 100*time.Millisecond {
		return nil, fmt.Errorf("semaphore %s: lease %v is too short (minimum 100ms)", key, lease)
	}
	return &Semaphore{l: l, key: l.key(rdb.SemaphoreName(key)), capacity: capacity, lease: lease}, nil
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
// Release.
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
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
		// Wait for a release, polling with jittered backoff; never past
		// the earliest lease expiry.
		d := time.Duration(float64(poll) * (0.5 + mrand.Float64()))
		if e := untilExpiry; e > 0 && e < d {
			d = e
		}
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
		poll = time.Duration(math.Min(float64(poll*2), float64(100*time.Millisecond)))
	}
}

// permit is the held slot of token, renewed every third of the lease
// until Release.
func (s *Semaphore) permit(token string) *Permit {
	p := &Permit{s: s, token: token, lost: make(chan struct{})}
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
