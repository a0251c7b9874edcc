package serve

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// TestStartDeletesLegacyVerifiedPairs: the verified pairs an older serve
// kept shared by every tenant, without expiry, are gone once a serve's
// start sweep has run — even one sharing verified examples by the
// operator's choice, whose shared pool has keys of its own — for a served
// database and for one no longer served; the current pairs, the tenant's
// and the shared pool's, stay.
func TestStartDeletesLegacyVerifiedPairs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, sim := demoSim(t)
	cl := startCluster(ctx, t, sim, 1, 1)
	legacy := []string{rdb.LegacyVerifiedKey("shop", "sqlite"), rdb.LegacyVerifiedKey("retired_db", "sqlite")}
	current := []string{
		rdb.VerifiedKey("a", "shop", "sqlite"), rdb.VerifiedIndexKey("a", "shop", "sqlite"),
		rdb.VerifiedKey("", "shop", "sqlite"), rdb.VerifiedIndexKey("", "shop", "sqlite"),
	}
	for _, k := range append(legacy, current...) {
		if err := cl.Redis.HSet(ctx, k, "how many customers", `{"question":"How many customers?","sql":"SELECT 1"}`).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r := serveOn(t, cl, ds, t.TempDir(), func(c *Config) { c.VerifiedExamples, c.SharedVerifiedExamples = true, true })
	wait.For(t, time.Minute, "the start sweep to end", func() bool {
		select {
		case <-r.s.sweep.Done():
			return true
		default:
			return false
		}
	})
	for _, k := range legacy {
		if n, err := cl.Redis.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Errorf("legacy key %s still there after the start sweep (%v)", k, err)
		}
	}
	for _, k := range current {
		if n, err := cl.Redis.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("current key %s gone after the start sweep (%v)", k, err)
		}
	}
}
