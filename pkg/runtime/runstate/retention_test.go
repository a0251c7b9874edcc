package runstate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/runtime/message"
	"github.com/quorumsql/quorum/pkg/runtime/runstate"
)

// TestRetireDescribeDelete: retiring gives every key of the run, and no
// other run's, an expiry (answers the longer one; a shorter lease stays
// shorter); a late overwrite keeps it; Describe reports it; Delete removes
// only the run's keys.
func TestRetireDescribeDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
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
	if n, err := s.Retire(ctx, "r1", r); err != nil || n != 6 {
		t.Fatalf("retired %d keys (%v), want r1's 6", n, err)
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
	if n, err := s.Delete(ctx, "r1"); err != nil || n != 6 {
		t.Errorf("deleted %d keys (%v), want 6", n, err)
	}
	if _, err := s.Describe(ctx, "r1"); !errors.Is(err, runstate.ErrNoRun) {
		t.Errorf("r1 after delete: %v", err)
	}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].Run != "r10" || runs[0].Keys != 5 {
		t.Errorf("runs after delete: %+v (%v)", runs, err)
	}
}
