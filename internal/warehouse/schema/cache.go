package schema

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// KeyPrefix starts every key the cache writes.
const KeyPrefix = rdb.SchemaPrefix

// Cache keeps schemas in Redis, shared by every process of a cluster, and
// re-reads a schema only when its fingerprint has moved. Every Get runs
// the warehouse's Fingerprint query (one row); a full Read happens on a
// miss or a change. Concurrent Gets of one key read once: in a process
// they share one call, across processes a short lease (rdb.Lease) lets one
// read while the others wait for its entry.
//
// Schemas returned are shared between callers: treat them as read-only.
type Cache struct {
	Client redis.UniversalClient
	// TTL bounds how long an entry lives (default 24h). Fingerprints see
	// only the schema, so the TTL is also what refreshes sample rows.
	TTL time.Duration
	// LockTTL bounds how long other processes wait for one process's
	// read before reading themselves (default 2m); the lock expires then
	// even if its holder died.
	LockTTL time.Duration
	// Poll is how often a waiting process looks for the entry (default
	// 100ms).
	Poll time.Duration

	mu    sync.Mutex
	calls map[string]*call
}

type call struct {
	done chan struct{}
	s    *dataset.Schema
	err  error
}

// entry is what Redis holds under a key.
type entry struct {
	Fingerprint string          `json:"fingerprint"`
	Schema      *dataset.Schema `json:"schema"`
}

func (c *Cache) ttl() time.Duration     { return orDefault(c.TTL, 24*time.Hour) }
func (c *Cache) lockTTL() time.Duration { return orDefault(c.LockTTL, 2*time.Minute) }
func (c *Cache) poll() time.Duration    { return orDefault(c.Poll, 100*time.Millisecond) }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Key is the Redis key of (key, dialect, db, opt): the caller's key (a
// warehouse name, say) plus a digest of what was read, so that two
// callers asking for different tables or sample sizes never take each
// other's entry.
func Key(key string, d warehouse.Dialect, db string, opt Options) string {
	b, _ := json.Marshal(struct {
		D   warehouse.Dialect `json:"d"`
		DB  string            `json:"db"`
		Opt Options           `json:"opt"`
	}{d, db, opt})
	sum := sha256.Sum256(b)
	return rdb.SchemaKey(key, hex.EncodeToString(sum[:8]))
}

// Get returns db's schema: the stored one when its fingerprint equals the
// live one, otherwise a fresh Read, stored with the TTL.
func (c *Cache) Get(ctx context.Context, key string, wh warehouse.Warehouse, db string, opt Options) (*dataset.Schema, error) {
	rk := Key(key, wh.Dialect(), db, opt)
	c.mu.Lock()
	if cl, ok := c.calls[rk]; ok {
		c.mu.Unlock()
		select {
		case <-cl.done:
			return cl.s, cl.err
		case <-ctx.Done():
			return nil, fmt.Errorf("schema of %s: %w", db, ctx.Err())
		}
	}
	if c.calls == nil {
		c.calls = map[string]*call{}
	}
	cl := &call{done: make(chan struct{})}
	c.calls[rk] = cl
	c.mu.Unlock()

	cl.s, cl.err = c.get(ctx, rk, wh, db, opt)

	c.mu.Lock()
	delete(c.calls, rk)
	c.mu.Unlock()
	close(cl.done)
	return cl.s, cl.err
}

func (c *Cache) get(ctx context.Context, rk string, wh warehouse.Warehouse, db string, opt Options) (*dataset.Schema, error) {
	fp, err := Fingerprint(ctx, wh, db)
	if err != nil {
		return nil, err
	}
	if s, err := c.load(ctx, rk, fp); s != nil || err != nil {
		return s, err
	}
	lock := rdb.NewLease(c.Client, rdb.LockKey(rk), "", c.lockTTL())
	deadline := time.Now().Add(c.lockTTL())
	for {
		ok, err := lock.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("schema cache lock %s: %w", lock.Key(), err)
		}
		if ok {
			defer unlock(lock)
			// Another process may have stored it between our look and
			// the lock.
			if s, err := c.load(ctx, rk, fp); s != nil || err != nil {
				return s, err
			}
			return c.readAndStore(ctx, rk, fp, wh, db, opt)
		}
		select {
		case <-time.After(c.poll()):
		case <-ctx.Done():
			return nil, fmt.Errorf("schema of %s: %w", db, ctx.Err())
		}
		if s, err := c.load(ctx, rk, fp); s != nil || err != nil {
			return s, err
		}
		if time.Now().After(deadline) {
			// The holder is slow or stuck; read rather than wait on.
			return c.readAndStore(ctx, rk, fp, wh, db, opt)
		}
	}
}

func (c *Cache) readAndStore(ctx context.Context, rk, fp string, wh warehouse.Warehouse, db string, opt Options) (*dataset.Schema, error) {
	s, err := Read(ctx, wh, db, opt)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(entry{Fingerprint: fp, Schema: s})
	if err != nil {
		return nil, fmt.Errorf("schema of %s: encode for the cache: %w", db, err)
	}
	if err := c.Client.Set(ctx, rk, b, c.ttl()).Err(); err != nil {
		return nil, fmt.Errorf("schema cache store %s: %w", rk, err)
	}
	return s, nil
}

// load returns the stored schema when its fingerprint is fp; nil, nil
// when there is none or it is stale.
func (c *Cache) load(ctx context.Context, rk, fp string) (*dataset.Schema, error) {
	b, err := c.Client.Get(ctx, rk).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("schema cache get %s: %w", rk, err)
	}
	var e entry
	if err := json.Unmarshal(b, &e); err != nil || e.Schema == nil {
		return nil, nil // unreadable (an older format): read again and overwrite
	}
	if e.Fingerprint != fp {
		return nil, nil
	}
	return e.Schema, nil
}

// unlock releases the lock if it is still ours (after LockTTL it may be
// another process's).
func unlock(lock *rdb.Lease) {
	// The caller's context may be done; the lock must go anyway.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = lock.Release(ctx) // it expires by itself otherwise
}
