package serve

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// TestAnsweredQuestionLeavesOnlyExpiringState: once a question is
// answered its run's files under the state directory are gone, its record
// keeps where the run's time went (what quorum bench --mixed reads), and
// every key of its run, and its record, expire within the retention.
func TestAnsweredQuestionLeavesOnlyExpiringState(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, sim := demoSim(t)
	cl := startCluster(ctx, t, sim, 4, 2)
	rdb := cl.Redis
	stateDir := t.TempDir()
	retain := runstate.Retention{State: time.Hour}
	s, err := New(Config{Env: cl.Env, Redis: rdb, Dataset: openAPIDemo, Votes: 2, StateDir: stateDir, RoundTimeout: time.Minute,
		CacheTTL: -1, Retain: retain})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(rctx) }()

	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v1/questions", strings.NewReader(`{"db":"shop","question":"How many customers does the shop have?"}`)))
	if w.Code != http.StatusAccepted {
		t.Fatalf("ask: %d %s", w.Code, w.Body)
	}
	var asked Question
	if err := json.Unmarshal(w.Body.Bytes(), &asked); err != nil {
		t.Fatal(err)
	}
	id := asked.ID
	for {
		r, err := s.store.get(ctx, id)
		if err == nil && r.Terminal() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the question was never answered")
		case <-time.After(20 * time.Millisecond):
		}
	}
	// Serve stopped, its drivers' clean-up done.
	stop()
	<-done
	s.Wait()

	r, err := s.store.get(ctx, id)
	if err != nil || r.Status != Answered || r.Timing == nil || r.Timing.CriticalPathSeconds <= 0 || r.Timing.LatencySeconds < r.Timing.ServiceSeconds {
		t.Fatalf("record %+v, timing %+v (%v)", r, r.Timing, err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "questions", id)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the question run's files are still there: %v", err)
	}
	keys, err := rdb.Keys(ctx, "quorum:run:"+id+":*").Result()
	if err != nil || len(keys) < 5 {
		t.Fatalf("the question run's keys: %v (%v)", keys, err)
	}
	for _, k := range append(keys, questionKey(id)) {
		if ttl, err := rdb.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > retain.State {
			t.Errorf("%s expires in %v (%v), want within %v", k, ttl, err, retain.State)
		}
	}
}
