package rdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestSpendRunTokens: a run's token count grows with each call's tokens;
// the step that reaches the cap marks the run cancelled with its reason,
// and later steps (still reached) leave that reason; a run a cancel
// marked first keeps the cancel's reason. Both keys are the run's: in its
// index, and given its retirement's expiry when written after it.
func TestSpendRunTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const run, limit = "r", 100
	mark := func(run string) string {
		v, _ := c.Get(ctx, rdb.CancelledKey(run)).Result()
		return v
	}
	steps := []struct {
		tokens, count int64
		reached       bool
		reason        string // the reason passed
		mark          string // the mark after the step
	}{
		{40, 40, false, "cap", ""},
		{59, 99, false, "cap", ""},
		{1, 100, true, "cap", "cap"}, // at the cap: reached
		{30, 130, true, "later", "cap"},
	}
	for i, st := range steps {
		n, reached, err := rdb.SpendRunTokens(ctx, c, run, st.tokens, limit, st.reason)
		if err != nil || n != st.count || reached != st.reached || mark(run) != st.mark {
			t.Fatalf("step %d (+%d): count %d, reached %v, mark %q (%v); want %d, %v, %q", i, st.tokens, n, reached, mark(run), err, st.count, st.reached, st.mark)
		}
	}
	if ttl, err := c.PTTL(ctx, rdb.CancelledKey(run)).Result(); err != nil || ttl <= 0 || ttl > rdb.CancelTTL {
		t.Errorf("the cap's cancel mark expires in %v (%v), want within CancelTTL", ttl, err)
	}
	for _, k := range []string{rdb.RunTokensKey(run), rdb.CancelledKey(run)} {
		if ok, _ := c.SIsMember(ctx, rdb.RunIndexKey(run), k).Result(); !ok {
			t.Errorf("%s is not in the run's index", k)
		}
	}

	// A run cancelled first keeps the cancel's reason.
	const other = "s"
	if err := rdb.SetRunKey(ctx, c, other, rdb.CancelledKey(other), rdb.StateKey, "cancelled by the client", rdb.CancelTTL); err != nil {
		t.Fatal(err)
	}
	if n, reached, err := rdb.SpendRunTokens(ctx, c, other, 500, limit, "cap"); err != nil || n != 500 || !reached || mark(other) != "cancelled by the client" {
		t.Errorf("a cancelled run over its cap: count %d, reached %v, mark %q (%v); want 500, true, the cancel's", n, reached, mark(other), err)
	}

	// Written after the retirement, the count expires with the run's state.
	stateAt, _, err := rdb.RetireRun(ctx, c, run, time.Hour, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rdb.SpendRunTokens(ctx, c, run, 1, limit, "cap"); err != nil {
		t.Fatal(err)
	}
	if at, err := c.PExpireTime(ctx, rdb.RunTokensKey(run)).Result(); err != nil || at != time.Duration(stateAt.UnixMilli())*time.Millisecond {
		t.Errorf("the count written after the retirement expires at %v (%v), want %v", at, err, stateAt.UnixMilli())
	}

	if _, _, err := rdb.SpendRunTokens(ctx, c, run, 1, 0, "cap"); err == nil {
		t.Error("a cap of 0 was taken; want an error (0 is no cap: nothing to count)")
	}
}
