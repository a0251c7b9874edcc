package rdb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestDeleteLegacyVerified: the shared verified pairs an older serve kept
// (LegacyVerifiedKey) go, the served databases' by name and the others'
// found by SCAN, more than one SCAN batch of them; the current per-tenant
// and shared pairs and their indexes stay. Under an ACL refusing SCAN, as
// the deployed one does, the named ones still go and the rest stay.
func TestDeleteLegacyVerified(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	c := srv.Client(t)
	current := []string{
		rdb.VerifiedKey("a", "shop", "sqlite"), rdb.VerifiedIndexKey("a", "shop", "sqlite"),
		rdb.VerifiedKey("", "shop", "sqlite"), rdb.VerifiedIndexKey("", "shop", "sqlite"),
	}
	seed := func(t *testing.T, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if err := c.HSet(ctx, k, "how many customers", `{"sql":"SELECT 1"}`).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	served := rdb.LegacyVerifiedKey("shop", "sqlite")
	var others []string
	for i := range 1200 { // past one SCAN batch and one UNLINK
		others = append(others, rdb.LegacyVerifiedKey(fmt.Sprintf("old%d", i), "sqlite"))
	}
	exists := func(t *testing.T, keys ...string) int64 {
		t.Helper()
		n, err := c.Exists(ctx, keys...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("scan allowed", func(t *testing.T) {
		seed(t, current...)
		seed(t, served)
		seed(t, others...)
		n, scanned, err := rdb.DeleteLegacyVerified(ctx, c, []string{served})
		if err != nil || !scanned || n != int64(1+len(others)) {
			t.Fatalf("deleted %d, scanned %v (%v); want %d, scanned", n, scanned, err, 1+len(others))
		}
		if left := exists(t, append(others, served)...); left != 0 {
			t.Errorf("%d legacy keys left, want none", left)
		}
		if kept := exists(t, current...); kept != int64(len(current)) {
			t.Errorf("%d of the %d current keys kept, want all", kept, len(current))
		}
	})

	t.Run("scan refused", func(t *testing.T) {
		seed(t, served, others[0])
		// The deployed user's rights, SCAN among those refused.
		if err := c.Do(ctx, "ACL", "SETUSER", "noscan", "on", ">pw", "~quorum:*", "-@all", "+@read", "+@write", "+@connection", "-scan").Err(); err != nil {
			t.Fatal(err)
		}
		opt := srv.ClientOptions()
		opt.Username, opt.Password = "noscan", "pw"
		limited := redis.NewClient(opt)
		t.Cleanup(func() { limited.Close() })
		n, scanned, err := rdb.DeleteLegacyVerified(ctx, limited, []string{served})
		if err != nil || scanned || n != 1 {
			t.Fatalf("deleted %d, scanned %v (%v); want the served database's key deleted, no scan, no error", n, scanned, err)
		}
		if exists(t, served) != 0 || exists(t, others[0]) != 1 {
			t.Errorf("served database's legacy key left %d, another's %d; want 0, 1", exists(t, served), exists(t, others[0]))
		}
	})

	if _, _, err := rdb.DeleteLegacyVerified(ctx, c, []string{current[0]}); err == nil {
		t.Errorf("deleting a current key as a legacy one: no error")
	}
}
