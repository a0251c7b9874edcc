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

	"github.com/redis/go-redis/v9"
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
	return &Semaphore{l: l, key: l.key("sem:" + key), capacity: capacity, lease: lease}, nil
}

var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return {1, 0}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(first[2]) - now}
`)

var renewScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not s or tonumber(s) < now then redis.call('ZREM', KEYS[1], ARGV[2]) return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1
`)

// Permit is one held slot. Release it when done.
type Permit struct {
	s     *Semaphore
	token string
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	lost  chan struct{}
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
		res, err := acquireScript.Run(ctx, s.l.rdb, []string{s.key}, s.capacity, s.lease.Milliseconds(), token).Slice()
		if err != nil {
			return nil, fmt.Errorf("acquire %s: %w", s.key, err)
		}
		if ok, _ := res[0].(int64); ok == 1 {
			p := &Permit{s: s, token: token, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
			go p.renew()
			return p, nil
		}
		// Wait for a release, polling with jittered backoff; never past
		// the earliest lease expiry.
		untilExpiry, _ := res[1].(int64)
		d := time.Duration(float64(poll) * (0.5 + mrand.Float64()))
		if e := time.Duration(untilExpiry) * time.Millisecond; e > 0 && e < d {
			d = e
		}
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
		poll = time.Duration(math.Min(float64(poll*2), float64(100*time.Millisecond)))
	}
}

func (p *Permit) renew() {
	defer close(p.done)
	t := time.NewTicker(p.s.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), p.s.lease/3)
			n, err := renewScript.Run(ctx, p.s.l.rdb, []string{p.s.key}, p.s.lease.Milliseconds(), p.token).Int()
			cancel()
			if err == nil && n == 0 {
				close(p.lost)
				return
			}
		}
	}
}

// Lost is closed if the lease expired before Release.
func (p *Permit) Lost() <-chan struct{} { return p.lost }

// Release frees the slot.
func (p *Permit) Release(ctx context.Context) error {
	var err error
	p.once.Do(func() {
		close(p.stop)
		<-p.done
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
