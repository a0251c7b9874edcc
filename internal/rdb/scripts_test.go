package rdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestRunKeysAreTracked: a run's writes list their keys in its index and
// register the run; retiring it again never lengthens what an earlier
// retirement set; a key written after it takes its time.
func TestRunKeysAreTracked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	const run = "r"
	if ok, err := rdb.CreateRunKey(ctx, c, run, rdb.ManifestKey(run), rdb.AnswerKey, "{}"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if ok, err := rdb.CreateRunKey(ctx, c, run, rdb.ManifestKey(run), rdb.AnswerKey, "{}"); err != nil || ok {
		t.Fatal("created twice", err)
	}
	if err := rdb.SAddRunKey(ctx, c, run, rdb.ExampleKey(run, "a", "x", "done"), "t1", "t2"); err != nil {
		t.Fatal(err)
	}
	if added, n, err := rdb.HSetOnceRunKey(ctx, c, run, rdb.ExampleKey(run, "a", "x", "round", "0"), 1, "r"); err != nil || !added || n != 1 {
		t.Fatal(added, n, err)
	}
	keys, err := c.SMembers(ctx, rdb.RunIndexKey(run)).Result()
	if err != nil || len(keys) != 3 {
		t.Fatalf("index %v (%v)", keys, err)
	}
	if s, err := c.ZScore(ctx, rdb.RunsKey, run).Result(); err != nil || s < 1e300 {
		t.Fatalf("an unfinished run's registration %v (%v), want +inf", s, err)
	}

	state1, answers1, err := rdb.RetireRun(ctx, c, run, time.Hour, 2*time.Hour)
	//clock:ok the expiries RetireRun computed: a slow machine only shortens time.Until's hour
	if err != nil || answers1.Sub(state1) != time.Hour || time.Until(state1) > time.Hour {
		t.Fatalf("retired: state %v, answers %v (%v)", state1, answers1, err)
	}
	state2, answers2, err := rdb.RetireRun(ctx, c, run, 3*time.Hour, 90*time.Minute)
	if err != nil || !state2.Equal(state1) || !answers2.Before(answers1) {
		t.Fatalf("retired again: state %v (first %v), answers %v (first %v) (%v)", state2, state1, answers2, answers1, err)
	}
	if s, err := c.ZScore(ctx, rdb.RunsKey, run).Result(); err != nil || int64(s) != answers2.UnixMilli() {
		t.Fatalf("a retired run's registration %v (%v), want %v", s, err, answers2.UnixMilli())
	}
	late := rdb.ExampleKey(run, "a", "x", "state", "late")
	if err := rdb.SetRunKey(ctx, c, run, late, rdb.StateKey, "v", 0); err != nil {
		t.Fatal(err)
	}
	at, err := c.PExpireTime(ctx, late).Result()
	if err != nil || at != time.Duration(state1.UnixMilli())*time.Millisecond {
		t.Fatalf("a late key expires at %v (%v), want %v", at, err, state1.UnixMilli())
	}
	if ok, _ := c.SIsMember(ctx, rdb.RunIndexKey(run), late).Result(); !ok {
		t.Fatal("a late key is not in the index")
	}
}

// TestChargeOnce: charging a question twice, or less, adds to its tenant's
// day only the tokens and money it had not been charged; every key expires.
func TestChargeOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	for _, tc := range []struct {
		tokens, added int64
		money         float64
	}{{100, 100, 0.25}, {100, 0, 0.25}, {150, 50, 0.5}, {120, -30, 0.4}} {
		added, err := rdb.Charge(ctx, c, "acme", "q1", int(tc.tokens), tc.money)
		if err != nil || added != tc.added {
			t.Fatalf("charge %d: added %d (%v), want %d", tc.tokens, added, err, tc.added)
		}
	}
	day := rdb.TokensKey("acme", time.Now())
	if n, err := c.Get(ctx, day).Int64(); err != nil || n != 150 {
		t.Fatalf("the day's tokens: %d (%v)", n, err)
	}
	// The money as the tokens: the most charged, the question counted once.
	money := rdb.MoneyKey("acme", time.Now())
	if v, err := c.HGetAll(ctx, money).Result(); err != nil || v["micro"] != "500000" || v["n"] != "1" {
		t.Fatalf("the day's money: %v (%v), want micro 500000 over n 1", v, err)
	}
	for _, k := range []string{day, rdb.ChargedKey("q1"), money, rdb.ChargedMoneyKey("q1")} {
		if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > rdb.TokensTTL {
			t.Errorf("%s expires in %v (%v)", k, ttl, err)
		}
	}
}
