package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/service"
)

// Lease is a key held by one owner at a time: acquired with SET NX PX and
// a random token, renewed and released only by the holder of that token
// (compare-and-expire, compare-and-delete), so a holder that lost it (it
// stalled past its TTL and another took it) can neither extend nor free
// the new holder's. A holder that dies stops renewing, and the key is free
// again within its TTL.
//
// Leases: the process driving a question (serve), the process computing a
// Store.Once value (runstate), the process reading a schema (schema.Cache).
type Lease struct {
	c     redis.Cmdable
	key   string
	token string
	ttl   time.Duration
}

// NewLease returns a lease on key held for ttl at a time, not yet
// acquired. owner, if not "", starts its token, so that whoever reads the
// key sees who holds it.
func NewLease(c redis.Cmdable, key, owner string, ttl time.Duration) *Lease {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	token := hex.EncodeToString(b[:])
	if owner != "" {
		token = owner + "/" + token
	}
	return &Lease{c: c, key: key, token: token, ttl: ttl}
}

// Key is the lease's key.
func (l *Lease) Key() string { return l.key }

// Token is what the key holds while this lease has it.
func (l *Lease) Token() string { return l.token }

// TTL is how long the lease lasts without a renewal.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Acquire takes the lease if no one holds it, and says whether it did.
// Taking a lease one already holds fails (call Renew).
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	return l.c.SetNX(ctx, l.key, l.token, l.ttl).Result()
}

// Holder is the token of whoever holds the lease now ("" if no one).
func (l *Lease) Holder(ctx context.Context) (string, error) {
	v, err := l.c.Get(ctx, l.key).Result()
	if err == redis.Nil {
		return "", nil
	}
	return v, err
}

// Owner is the owner a lease's token names ("" if none): what NewLease
// was given.
func Owner(token string) string {
	if i := strings.LastIndexByte(token, '/'); i >= 0 {
		return token[:i]
	}
	return ""
}

// Renew extends the lease by its TTL if it is still ours; false when it
// is not (it expired, and maybe another took it).
func (l *Lease) Renew(ctx context.Context) (bool, error) {
	return ExpireIfEquals(ctx, l.c, l.key, l.token, l.ttl)
}

// Release frees the lease if it is still ours.
func (l *Lease) Release(ctx context.Context) error {
	_, err := DeleteIfEquals(ctx, l.c, l.key, l.token)
	return err
}

// Renewer renews the lease every third of its TTL; set its hooks before
// Start.
func (l *Lease) Renewer() *Renewer {
	return &Renewer{Renew: l.Renew, Every: l.ttl / 3, Timeout: l.ttl / 3}
}

// Renewer keeps a hold (a Lease, a semaphore's slot) alive in the
// background from Start until Stop, renewing it every Every. It is a
// component with one goroutine (a service.Loop): Stop returns once that
// goroutine has ended, so nothing renews a hold its owner has released.
type Renewer struct {
	// Renew extends the hold; false: it was lost.
	Renew func(ctx context.Context) (bool, error)
	// Every is how often Renew is called.
	Every time.Duration
	// Timeout, when positive, bounds each Renew call.
	Timeout time.Duration
	// Expire, when positive, is how long the hold lasts unrenewed (a
	// lease's TTL): when no renewal has succeeded for that long, counted
	// from Start, the hold is lost as far as its holder can know (the
	// key expired; another may hold it now), so OnLost is called and the
	// renewer ends, even if Redis has not answered since. Without it a
	// holder cut off from Redis keeps working on what others redo.
	Expire time.Duration
	// OnLost, when set, is called from the renewer's goroutine when Renew
	// finds the hold lost; the renewer then ends. It must not call Stop.
	OnLost func()
	// AfterRenew, when set, is called from the renewer's goroutine after
	// each renewal that did not find the hold lost (one that failed on a
	// Redis error included: it is tried again at the next tick). It must
	// not call Stop.
	AfterRenew func(ctx context.Context)

	service.Loop
}

// ErrStarted is returned by Start on a renewer already started.
var ErrStarted = service.ErrStarted

// Start starts renewing until Stop is called or ctx ends. Stopping a
// renewer not started (or already stopped) does nothing; a stopped
// renewer may be started again.
func (r *Renewer) Start(ctx context.Context) error {
	if r.Renew == nil || r.Every <= 0 {
		return errors.New("rdb: a renewer needs Renew and a positive Every")
	}
	return r.Go(ctx, r.run)
}

func (r *Renewer) run(ctx context.Context) error {
	t := time.NewTicker(r.Every)
	defer t.Stop()
	// expired fires when the hold has gone Expire unrenewed; never without Expire.
	var expired <-chan time.Time
	var lapse *time.Timer
	if r.Expire > 0 {
		lapse = time.NewTimer(r.Expire)
		defer lapse.Stop()
		expired = lapse.C
	}
	lost := func() error {
		if r.OnLost != nil {
			r.OnLost()
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-expired:
			return lost()
		case <-t.C:
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if r.Timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, r.Timeout)
		}
		start := time.Now()
		ok, err := r.Renew(cctx)
		cancel()
		if ctx.Err() != nil {
			return nil // stopped meanwhile: the hold is being let go
		}
		if err == nil && !ok {
			return lost()
		}
		if err == nil && lapse != nil {
			// The renewal extended the hold from when it was sent, at the latest.
			lapse.Reset(r.Expire - time.Since(start))
		}
		if r.AfterRenew != nil {
			r.AfterRenew(ctx)
		}
	}
}
