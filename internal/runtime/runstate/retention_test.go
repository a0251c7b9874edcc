package runstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// noScan is a Redis whose only user may not SCAN or KEYS (nor may the
// deployed ACL's): what retention, description and deletion do must
// address a run's keys directly.
func noScan(t *testing.T) *redis.Client {
	t.Helper()
	return redistest.StartWith(t, localredis.Options{Users: []localredis.User{
		{Name: "quorum", Password: "retention-test-password", Rules: "~quorum:* resetchannels +@all -scan -keys"}}}).Client(t)
}

// TestRetireDescribeDelete: retiring gives every key of the run, and no
// other run's, an expiry (answers the longer one; a shorter lease stays
// shorter); a late overwrite keeps it; Describe reports it; Delete removes
// only the run's keys. None of it scans the keyspace.
func TestRetireDescribeDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := noScan(t)
	s := runstate.New(rdb)
	for _, run := range []string{"r1", "r10"} {
		if _, _, err := s.CreateManifest(ctx, &runstate.Manifest{Run: run, Examples: []string{"a"}, Agent: "x"}); err != nil {
			t.Fatal(err)
		}
		for _, err := range []error{
			s.SetMeta(ctx, run, "a", runstate.ExampleMeta{Warehouse: "sqlite"}),
			s.Set(ctx, run, "a", "x", "plan", "v1"),
			s.MarkDone(ctx, run, "a", "x", "t1"),
			s.OpenDeadline(ctx, runstate.Round{Run: run, Example: "a", Agent: "x"}, time.Now().Add(time.Hour)),
			s.SetFinal(ctx, &message.FinalAnswer{V: message.Version, Run: run, Example: "a", Status: "answered"}),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	lease := "quorum:run:r1:ex:a:x:once:plan:lock"
	if err := rdb.Set(ctx, lease, "tok", 15*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	r := runstate.Retention{State: time.Hour, Answers: 2 * time.Hour}
	if n, err := s.Retire(ctx, "r1", r); err != nil || n != 5 {
		t.Fatalf("retired %d keys (%v), want r1's 5", n, err)
	}
	// A late write to the finished run keeps the expiry.
	if err := s.Set(ctx, "r1", "a", "x", "plan", "v2"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key    string
		lo, hi time.Duration // -1: no expiry
	}{
		{"quorum:run:r1:manifest", time.Hour, 2 * time.Hour},
		{"quorum:run:r1:final", time.Hour, 2 * time.Hour},
		{"quorum:run:r1:meta", 0, time.Hour},
		{"quorum:run:r1:ex:a:x:state:plan", 0, time.Hour},
		{"quorum:run:r1:ex:a:x:done", 0, time.Hour},
		{lease, 0, 15 * time.Second},
		{"quorum:run:r10:manifest", -1, -1},
		{"quorum:run:r10:ex:a:x:done", -1, -1},
	} {
		ttl, err := rdb.PTTL(ctx, tc.key).Result()
		if tc.lo == -1 && ttl != -1 || tc.lo >= 0 && (ttl <= tc.lo || ttl > tc.hi) || err != nil {
			t.Errorf("%s expires in %v (%v), want in (%v, %v]", tc.key, ttl, err, tc.lo, tc.hi)
		}
	}
	if open, err := s.OpenRounds(ctx, "r1"); err != nil || len(open) != 0 {
		t.Errorf("r1's rounds still open: %v (%v)", open, err)
	}
	for _, tc := range []struct {
		run        string
		status     string
		persistent int
	}{{"r1", runstate.StatusFinished, 0}, {"r10", runstate.StatusFinished, 5}} {
		info, err := s.Describe(ctx, tc.run)
		if err != nil || info.Status != tc.status || info.Persistent != tc.persistent || info.Final != 1 || info.Bytes <= 0 {
			t.Errorf("describe %s: %+v (%v)", tc.run, info, err)
		}
	}
	if n, err := s.Delete(ctx, "r1"); err != nil || n != 5 {
		t.Errorf("deleted %d keys (%v), want 5", n, err)
	}
	for _, k := range []string{"quorum:run:r1:manifest", "quorum:runkeys:r1", "quorum:retired:r1"} {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Errorf("%s is left after delete (%v)", k, err)
		}
	}
	if _, err := s.Describe(ctx, "r1"); !errors.Is(err, runstate.ErrNoRun) {
		t.Errorf("r1 after delete: %v", err)
	}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].Run != "r10" || runs[0].Keys != 5 {
		t.Errorf("runs after delete: %+v (%v)", runs, err)
	}
}

// TestLateWritesToARetiredRunExpire: a key first written after its run was
// retired (a result, a done mark or a join's part from a task still
// running at a cancel, a final answer, an agent's value) gets the run's
// expiry from the script that writes it, an answer key the answers' one;
// a cancel mark's own longer expiry is shortened to the state's; and an
// unretired run's keys still never expire.
func TestLateWritesToARetiredRunExpire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := noScan(t)
	s := runstate.New(c)
	for _, run := range []string{"done", "live"} {
		if _, _, err := s.CreateManifest(ctx, &runstate.Manifest{Run: run, Examples: []string{"a"}, Agent: "x"}); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkDone(ctx, run, "a", "x", "t0"); err != nil {
			t.Fatal(err)
		}
	}
	r := runstate.Retention{State: time.Hour, Answers: 3 * time.Hour}
	if _, err := s.Retire(ctx, "done", r); err != nil {
		t.Fatal(err)
	}
	task := &message.Task{Run: "done", Example: "a", Agent: "x"}
	task.Task.ID = "t9"
	for _, run := range []string{"done", "live"} {
		for _, err := range []error{
			func() error {
				_, _, err := s.AddResult(ctx, &message.CandidateResult{Run: run, Example: "a", Agent: "x", Round: 3, Index: 1})
				return err
			}(),
			func() error { _, err := s.AddPart(ctx, run, "a", "x", "g", 0, []byte("p")); return err }(),
			s.MarkDone(ctx, run, "a", "x", "t9"),
			s.MarkDecided(ctx, runstate.Round{Run: run, Example: "a", Agent: "x", Round: 3}, runstate.OutcomeFinal),
			s.Set(ctx, run, "a", "x", "plan", "late"),
			s.Open(ctx, run, "a", "x", 4, 2, []*message.Task{task}),
			s.Progress(ctx, runstate.Round{Run: run, Example: "a", Agent: "x", Round: 4}, "t9", time.Now().Add(time.Hour)),
			s.SetMeta(ctx, run, "a", runstate.ExampleMeta{Warehouse: "sqlite"}),
			s.SetFinal(ctx, &message.FinalAnswer{V: message.Version, Run: run, Example: "a", Status: "cancelled"}),
			s.Cancel(ctx, run, "asked"),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Once(ctx, run, "a", "x", "info", func(context.Context) (string, error) { return "v", nil }); err != nil {
			t.Fatal(err)
		}
	}
	state := []string{"ex:a:x:round:3", "ex:a:x:join:g", "ex:a:x:done", "ex:a:x:decided:3", "ex:a:x:state:plan", "ex:a:x:expect:4",
		"ex:a:x:tasks", "ex:a:x:current", "ex:a:x:taken", "meta", "ex:a:x:once:info", "cancelled"}
	for _, k := range state {
		ttl, err := c.PTTL(ctx, rdb.RunKey("done", k)).Result()
		if err != nil || ttl <= 0 || ttl > r.State {
			t.Errorf("%s, written after the run was retired, expires in %v (%v), want within %v", rdb.RunKey("done", k), ttl, err, r.State)
		}
		if ttl, err := c.PTTL(ctx, rdb.RunKey("live", k)).Result(); k != "cancelled" && (err != nil || ttl != -1) {
			t.Errorf("%s, of a run not retired, expires in %v (%v)", rdb.RunKey("live", k), ttl, err)
		}
	}
	for _, k := range []string{rdb.FinalKey("done"), rdb.ManifestKey("done"), rdb.RunIndexKey("done"), rdb.RetiredKey("done")} {
		if ttl, err := c.PTTL(ctx, k).Result(); err != nil || ttl <= r.State || ttl > r.Answers {
			t.Errorf("%s expires in %v (%v), want in (%v, %v]", k, ttl, err, r.State, r.Answers)
		}
	}
	// Every late key is in the run's index: Describe sees no persistent
	// key, and Delete removes them all.
	info, err := s.Describe(ctx, "done")
	if err != nil || info.Persistent != 0 || info.Keys != len(state)+2 {
		t.Errorf("describe: %+v (%v), want %d keys, none persistent", info, err, len(state)+2)
	}
	if n, err := s.Delete(ctx, "done"); err != nil || n != len(state)+2 {
		t.Errorf("deleted %d keys (%v), want %d", n, err, len(state)+2)
	}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].Run != "live" || runs[0].Persistent != runs[0].Keys-1 {
		t.Errorf("runs: %+v (%v), want live alone, every key but its cancel mark persistent", runs, err)
	}
}

// TestLateWriteAfterTheStateExpired: once a retired run's state has
// expired, a late state write does not bring it back (it expires at once),
// while the answers, kept longer, are still there.
func TestLateWriteAfterTheStateExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := noScan(t)
	s := runstate.New(c)
	if _, _, err := s.CreateManifest(ctx, &runstate.Manifest{Run: "r", Examples: []string{"a"}, Agent: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDone(ctx, "r", "a", "x", "t0"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Retire(ctx, "r", runstate.Retention{State: 50 * time.Millisecond, Answers: time.Hour}); err != nil {
		t.Fatal(err)
	}
	wait.For(t, time.Minute, "the retired run's state to expire", func() bool {
		done, err := s.Done(ctx, "r", "a", "x", "t0")
		return err == nil && !done
	})
	if err := s.MarkDone(ctx, "r", "a", "x", "t1"); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Done(ctx, "r", "a", "x", "t1"); err != nil || done {
		t.Errorf("a state key written after the state expired is there: %v (%v)", done, err)
	}
	if _, err := s.Manifest(ctx, "r"); err != nil {
		t.Errorf("the manifest is gone: %v", err)
	}
}

// TestCacheExpires: a value of the agents' shared cache expires.
func TestCacheExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	if err := runstate.NewCache(c).Set(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if ttl, err := c.PTTL(ctx, rdb.CacheKey("k")).Result(); err != nil || ttl <= rdb.CacheTTL-time.Minute || ttl > rdb.CacheTTL {
		t.Errorf("a cached value expires in %v (%v), want %v", ttl, err, rdb.CacheTTL)
	}
}
