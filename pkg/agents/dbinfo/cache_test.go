package dbinfo

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestRedisLinkCacheExpires: a linking answer in Redis expires, after
// rdb.CacheTTL unless the cache says otherwise.
func TestRedisLinkCacheExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	for _, tc := range []struct {
		ttl, want time.Duration
	}{{0, rdb.CacheTTL}, {time.Hour, time.Hour}} {
		cache := &RedisLinkCache{Client: c, TTL: tc.ttl}
		if err := cache.Put(ctx, "k", LinkAnswer{Table: "t"}); err != nil {
			t.Fatal(err)
		}
		if a, ok, err := cache.Get(ctx, "k"); err != nil || !ok || a.Table != "t" {
			t.Fatalf("get: %+v %v %v", a, ok, err)
		}
		if ttl, err := c.PTTL(ctx, rdb.LinkPrefix+"k").Result(); err != nil || ttl <= tc.want-time.Minute || ttl > tc.want {
			t.Errorf("TTL %v: the answer expires in %v (%v), want %v", tc.ttl, ttl, err, tc.want)
		}
	}
}
