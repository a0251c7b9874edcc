package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// TestRollbackLosesAContinuationsInput runs the demo with ReFoRCE, every
// role a process over a nats-server and a redis-server process, and makes
// Redis lose what an exploration wrote for the task it continues into:
// while the explorer's LLM requests are held (explorations under way, none
// ended), the generators are SIGKILLed and Redis is snapshotted; the
// explorations then end, writing its transcript blob and publishing its regeneration
// to a generator pool with no one to run it; Redis is SIGKILLed and
// restarted from the snapshot, as when a lagging replica is promoted. The
// regeneration, still in the stream, finds its input gone when a new
// generator takes it: the runtime must run the exploration again rather
// than fail the slot, and every example must end with the undisturbed
// run's answer and decision.
func TestRollbackLosesAContinuationsInput(t *testing.T) {
	want, _ := undisturbed(t)
	ctx := context.Background()

	dir := t.TempDir()
	srv := redisProcess(t, dir, 0)
	port, _ := strconv.Atoi(srv.Addr[strings.LastIndex(srv.Addr, ":")+1:])
	c := newCluster(t)
	c.redisURL = srv.URL()

	c.start("voter", "voter")
	gen := c.start("generator-1", "generator-worker")
	held := c.pause("explorer")
	explorer := c.start("explorer", "explorer-worker")
	out := filepath.Join(t.TempDir(), "out")
	const run = "rollback"
	coord := c.coordinator("coordinator", run, out)
	finished := make(chan error, 1)
	go func() { finished <- coord.Wait() }()
	select {
	case <-held:
	case err := <-finished:
		t.Fatalf("the run ended (%v) before any exploration called the LLM (logs in %s)", err, c.logs)
	case <-time.After(3 * time.Minute):
		t.Fatalf("no exploration called the LLM within 3 minutes (logs in %s)", c.logs)
	}

	// No generator from here until the rollback: what the exploration
	// continues into waits in the stream.
	if err := gen.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = gen.Wait()
	rc := c0(srv)
	exploring := leasedBy(ctx, t, rc, run, explorer.Process.Pid)
	if len(exploring) == 0 {
		t.Fatalf("the explorer holds no task lease with a request in flight (logs in %s)", c.logs)
	}
	if err := rc.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	snapshot := filepath.Join(t.TempDir(), "snapshot.rdb")
	copyFile(t, filepath.Join(dir, "dump.rdb"), snapshot)

	c.resume("explorer")
	rc = c0(srv)
	st := runstate.New(rc)
	waitFor(t, 2*time.Minute, "the explorations under way at the snapshot to finish", func() bool {
		return allDone(ctx, t, st, run, exploring)
	})
	lost := blobs(ctx, t, rc)
	// The rollback: every write since the snapshot is gone, the
	// explorations' transcripts among them.
	sigkill(t, ctx, rc)
	copyFile(t, snapshot, filepath.Join(dir, "dump.rdb"))
	srv = redisProcess(t, dir, port)
	rc = c0(srv)
	defer rc.Close()
	left := blobs(ctx, t, rc)
	gone := 0
	for k := range lost {
		if !left[k] {
			gone++
		}
	}
	if gone == 0 {
		t.Fatalf("Redis came back with every blob it held before the rollback (%d): the snapshot was not older than the transcripts", len(lost))
	}

	c.start("generator-2", "generator-worker")
	select {
	case err := <-finished:
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(c.logs, "coordinator.log"))
			t.Fatalf("coordinator exited with %v:\n%s\n(logs in %s)", err, tail(string(b), 3000), c.logs)
		}
	case <-time.After(4 * time.Minute):
		t.Fatalf("the run did not finish within 4 minutes of the rollback (logs in %s)", c.logs)
	}
	compare(t, "Redis rolled back past an exploration's transcript", readOutputs(t, out), want)
	b, _ := os.ReadFile(filepath.Join(c.logs, "generator-2.log"))
	reissued := strings.Count(string(b), "a task's inputs are lost")
	if reissued == 0 {
		t.Errorf("generator-2 never found a continuation's input lost, though %d blobs were rolled back (logs in %s)", gone, c.logs)
	}
	t.Logf("explorations under way at the snapshot: %v; %d blobs lost in the rollback; generator-2 reran the producer of a lost input %d times", exploring, gone, reissued)
}

// blobs is the set of blob keys Redis holds (content-addressed, shared by
// runs: the test's Redis holds only its run's).
func blobs(ctx context.Context, t *testing.T, rc *redis.Client) map[string]bool {
	t.Helper()
	keys, err := rc.Keys(ctx, rdb.BlobPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	for _, k := range keys {
		set[k] = true
	}
	return set
}
