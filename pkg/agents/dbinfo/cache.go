package dbinfo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	// Every Redis key lives in internal/rdb (internal/layout: pkgToInternal).
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/dataset"
)

// MemoryLinkCache keeps linking answers in this process.
type MemoryLinkCache struct {
	mu sync.Mutex
	m  map[string]LinkAnswer
}

// Get implements LinkCache.
func (c *MemoryLinkCache) Get(_ context.Context, key string) (LinkAnswer, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.m[key]
	return a, ok, nil
}

// Put implements LinkCache.
func (c *MemoryLinkCache) Put(_ context.Context, key string, a LinkAnswer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]LinkAnswer{}
	}
	c.m[key] = a
	return nil
}

// RedisLinkCache shares linking answers across the cluster.
type RedisLinkCache struct {
	Client redis.UniversalClient
	// Prefix defaults to rdb.LinkPrefix; TTL 0 keeps answers
	// rdb.CacheTTL.
	Prefix string
	TTL    time.Duration
}

func (c *RedisLinkCache) key(k string) string {
	if c.Prefix == "" {
		return rdb.LinkPrefix + k
	}
	return c.Prefix + k
}

// Get implements LinkCache.
func (c *RedisLinkCache) Get(ctx context.Context, key string) (LinkAnswer, bool, error) {
	b, err := c.Client.Get(ctx, c.key(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return LinkAnswer{}, false, nil
	}
	if err != nil {
		return LinkAnswer{}, false, err
	}
	var a LinkAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return LinkAnswer{}, false, err
	}
	return a, true, nil
}

// Put implements LinkCache.
func (c *RedisLinkCache) Put(ctx context.Context, key string, a LinkAnswer) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = rdb.CacheTTL
	}
	return c.Client.Set(ctx, c.key(key), b, ttl).Err()
}

// InfoCache keeps each database's compressed information once per process
// (agents share a database across many examples).
type InfoCache struct {
	Options Options
	mu      sync.Mutex
	infos   map[string]*Info
}

// For returns e's database information, building it on first use.
func (c *InfoCache) For(ctx context.Context, ds *dataset.Dataset, e *dataset.Example, open Opener) (*Info, error) {
	db, ok := ds.Database(e)
	if !ok {
		return nil, fmt.Errorf("%s: database %q is not in the dataset", e.ID, e.DB)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i, ok := c.infos[db.Key()]; ok {
		return i, nil
	}
	i, err := ForExample(ctx, ds, e, open, c.Options)
	if err != nil {
		return nil, err
	}
	if c.infos == nil {
		c.infos = map[string]*Info{}
	}
	c.infos[db.Key()] = i
	return i, nil
}
