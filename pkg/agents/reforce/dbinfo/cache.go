package dbinfo

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
	// Prefix defaults to "quorum:link:"; TTL 0 keeps answers forever.
	Prefix string
	TTL    time.Duration
}

func (c *RedisLinkCache) key(k string) string {
	if c.Prefix == "" {
		return "quorum:link:" + k
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
	return c.Client.Set(ctx, c.key(key), b, c.TTL).Err()
}
