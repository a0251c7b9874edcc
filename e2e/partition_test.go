package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/redisconn"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/netcut"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// behind returns rawURL with its host:port replaced by a netcut proxy's
// to the same address.
func behind(t *testing.T, rawURL string) (string, *netcut.Proxy) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parsing %q: %v", rawURL, err)
	}
	p := netcut.Start(t, netcut.Config{Target: u.Host})
	u.Host = p.Addr()
	return u.String(), p
}

// slowCluster is newCluster with an LLM five times slower: the run then
// outlasts a partition longer than a task lease (rdb.TaskLeaseTTL), so
// the partitioned worker comes back to a run still going. The answers
// do not depend on the latency.
func slowCluster(t *testing.T) *cluster {
	t.Helper()
	ds, err := dataset.Load(demoDir(t), dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 5, Latency: llmsim.Latency{FirstToken: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(sim)
	ts := httptest.NewServer(g)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(g.stop) })
	return &cluster{t: t, natsURL: natstest.Start(t).URL(), redisURL: redistest.Start(t).URL(), llmURL: ts.URL, sim: sim, gate: g, logs: t.TempDir()}
}

// task is one task of a run's example.
type task struct{ ex, agent, id string }

// leasedBy lists the tasks of run whose lease the process with pid holds
// (a lease's token starts with its holder's name, role-host-pid).
func leasedBy(ctx context.Context, t *testing.T, rc *redis.Client, run string, pid int) []task {
	t.Helper()
	prefix := rdb.RunKey(run, "ex") + ":"
	keys, err := rc.Keys(ctx, rdb.RunKey(run, "ex", "*", "*", "lease", "*")).Result()
	if err != nil {
		t.Fatal(err)
	}
	var held []task
	for _, k := range keys {
		token, err := rc.Get(ctx, k).Result()
		// The token names its holder: "<role>-<host>-<pid>#<incarnation>/…".
		name, _, _ := strings.Cut(rdb.Owner(token), "#")
		if err != nil || !strings.HasSuffix(name, fmt.Sprintf("-%d", pid)) {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(k, prefix), ":") // ex, agent, "lease", task
		if len(parts) != 4 || parts[2] != "lease" {
			t.Fatalf("lease key %q is not %s<ex>:<agent>:lease:<task>", k, prefix)
		}
		held = append(held, task{ex: parts[0], agent: parts[1], id: parts[3]})
	}
	return held
}

// allDone reports whether every task of tasks is in its example's done set.
func allDone(ctx context.Context, t *testing.T, st *runstate.Store, run string, tasks []task) bool {
	t.Helper()
	for _, tk := range tasks {
		done, err := st.DoneSet(ctx, run, tk.ex, tk.agent)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := done[tk.id]; !ok {
			return false
		}
	}
	return true
}

// stoppedOf counts the tasks of stranded a worker's log says it stopped
// on losing their lease.
func stoppedOf(log string, stranded []task) int {
	n := 0
	for _, tk := range stranded {
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "while it ran; stopping it") && strings.Contains(line, fmt.Sprintf(`"example":%q,"task":%q`, tk.ex, tk.id)) {
				n++
				break
			}
		}
	}
	return n
}

// TestWorkerPartition runs the demo with every role a process over one
// nats-server and one redis-server; one generator reaches both only
// through netcut proxies. While that generator has an LLM request held
// (a task surely in flight), both links are cut: its unacknowledged tasks
// must go to the other generator after --ack-wait (3 s), which runs them
// to the end once their leases expire, and the run must go on. The cut-off
// generator, unable to renew its leases, stops its tasks a lease's TTL
// after the last renewal and gives up its held request. Then the links
// heal, delivering what was written meanwhile, which must change nothing,
// and it takes new tasks. The answers and decisions must equal an
// undisturbed run's, the LLM calls beyond its may be at most the cut-off
// generator's concurrency, and nothing may be left in the stream or among
// the open rounds.
func TestWorkerPartition(t *testing.T) {
	want, wantCalls := undisturbed(t)

	c := slowCluster(t)
	natsURL, natsCut := behind(t, c.natsURL)
	redisURL, redisCut := behind(t, c.redisURL)
	cut := *c
	cut.natsURL, cut.redisURL = natsURL, redisURL

	c.start("voter", "voter", "--log-level", "debug")
	c.start("explorer", "explorer-worker")
	// The survivor holds four tasks at a time (its last --concurrency
	// wins): alone it cannot finish the run while the other is cut off,
	// so the healed generator comes back to work still to do.
	survivor := c.start("generator-2", "generator-worker", "--concurrency", "1", "--max-held", "4")
	island := cut.start("generator-1", "generator-worker", "--log-level", "debug")
	held := c.inFlight("generator-1")
	out := filepath.Join(t.TempDir(), "out")
	const run = "partition"
	coord := c.coordinator("coordinator", run, out)
	finished := make(chan error, 1)
	go func() { finished <- coord.Wait() }()
	notFinished := func(what string) {
		select {
		case err := <-finished:
			t.Fatalf("the run ended (%v) %s (logs in %s)", err, what, c.logs)
		default:
		}
	}

	select {
	case <-held:
	case err := <-finished:
		t.Fatalf("the coordinator ended (%v) before generator-1 had a task in flight (logs in %s)", err, c.logs)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no task in flight on generator-1 within 2 minutes (logs in %s)", c.logs)
	}
	natsCut.Cut()
	redisCut.Cut()
	cutAt := c.sim.Stats().Requests

	ctx := context.Background()
	opt, err := redisconn.Parse(c.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rc := opt.Client()
	defer rc.Close()
	// What the partitioned generator was running: the tasks it holds the
	// lease of (the held one among them).
	stranded := leasedBy(ctx, t, rc, run, island.Process.Pid)
	if len(stranded) == 0 {
		t.Fatalf("generator-1 holds no task lease with a request in flight (logs in %s)", c.logs)
	}
	t.Logf("generator-1 partitioned from NATS and Redis after %d LLM calls, running %v", cutAt, stranded)

	// Its tasks go to the survivor once --ack-wait passes; once their
	// leases expire the survivor runs them to the end, and the run goes
	// on without generator-1.
	survivorLog := filepath.Join(c.logs, "generator-2.log")
	waitFor(t, 2*time.Minute, "a task of the partitioned generator redelivered to generator-2", func() bool {
		notFinished("before a redelivery")
		b, _ := os.ReadFile(survivorLog)
		return strings.Contains(string(b), "redelivered message")
	})
	st := runstate.New(rc)
	waitFor(t, 2*time.Minute, fmt.Sprintf("the partitioned generator's tasks %v done by another", stranded), func() bool {
		notFinished("while generator-1 was cut off")
		return allDone(ctx, t, st, run, stranded)
	})
	notFinished("while generator-1 was cut off")

	// Cut off from Redis, generator-1 cannot renew its leases: once one
	// has gone its TTL unrenewed another delivery may run the task, so
	// generator-1 stops it, and gives up the LLM request it holds, while
	// the links are still cut.
	islandLog := filepath.Join(c.logs, "generator-1.log")
	select {
	case <-c.abandoned("generator-1"):
	case <-time.After(2 * time.Minute):
		t.Fatalf("generator-1 still holds its LLM request 2 minutes after the cut: a task whose lease went unrenewed past its TTL kept running (logs in %s)", c.logs)
	}
	before, _ := os.ReadFile(islandLog)
	// Given up because the task was stopped (its line is written first),
	// not because the request's stream stalled (--llm-stall-timeout, 2m).
	if n := stoppedOf(string(before), stranded); n == 0 {
		t.Fatalf("generator-1 gave up its held request without stopping any of its stranded tasks %v (logs in %s)", stranded, c.logs)
	}
	natsCut.Heal()
	redisCut.Heal()
	healedAt := c.sim.Stats().Requests
	t.Logf("healed after %d LLM calls", healedAt)
	// It comes back: it finishes tasks again.
	waitFor(t, 2*time.Minute, "generator-1 to finish a task after the heal", func() bool {
		b, _ := os.ReadFile(islandLog)
		return len(b) > len(before) && strings.Contains(string(b[len(before):]), `"task done"`)
	})

	select {
	case err := <-finished:
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(c.logs, "coordinator.log"))
			t.Fatalf("coordinator: %v\n%s\n(logs in %s)", err, tail(string(b), 3000), c.logs)
		}
	case <-time.After(4 * time.Minute):
		t.Fatalf("the partitioned run did not finish (logs in %s)", c.logs)
	}
	got := readOutputs(t, out)
	compare(t, "one generator partitioned away and back", got, want)

	if left, err := rc.ZRange(ctx, rdb.RoundsKey, 0, -1).Result(); err != nil || len(left) != 0 {
		t.Errorf("rounds left open: %v (%v)", left, err)
	}
	nc, err := nats.Connect(c.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := js.Stream(sctx, queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d messages left in the stream", info.State.Msgs)
	}
	// The partition is not a kill: both generators lived through it.
	for name, p := range map[string]*os.Process{"generator-1": island.Process, "generator-2": survivor.Process} {
		if err := p.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("%s is gone after the partition (%v): logs in %s", name, err, c.logs)
		}
	}
	b, _ := os.ReadFile(islandLog)
	whole, after := string(b), string(b[len(before):])
	// generator-1 stopped its stranded tasks while cut off, or ended them
	// after the heal, both harmless: a late result is dropped as a
	// duplicate.
	late, stopped := 0, stoppedOf(whole, stranded)
	for _, tk := range stranded {
		if strings.Contains(after, fmt.Sprintf(`"example":%q,"agent":%q,"kind":"generate","task":%q`, tk.ex, tk.agent, tk.id)) {
			late++
		}
	}
	// What the partition cost: the LLM calls beyond the undisturbed run's
	// (the abandoned one, which the simulator never saw, among them) are
	// at most what generator-1 was running, not what it held.
	const concurrency = 8 // generator-worker's --concurrency default
	if extra := c.sim.Stats().Requests + 1 - wantCalls; extra > concurrency {
		t.Errorf("the partition cost %d LLM calls beyond the undisturbed run's %d: more than generator-1's %d tasks at once (logs in %s)", extra, wantCalls, concurrency, c.logs)
	}
	vb, _ := os.ReadFile(filepath.Join(c.logs, "voter.log"))
	var ids []string
	for _, tk := range stranded {
		ids = append(ids, tk.ex+"/"+tk.id)
	}
	sort.Strings(ids)
	t.Logf("partitioned run: %d examples equal to the undisturbed run's; stranded %v; after the heal generator-1 finished %d tasks (%d of them stranded ones: late results) and stopped %d on finding their lease lost; the voter ignored %d duplicate results; LLM calls: cut at %d, healed at %d, served %d (undisturbed %d), recorded %d (undisturbed %d)",
		len(got.examples), ids, strings.Count(after, `"task done"`), late, stopped,
		strings.Count(string(vb), "duplicate candidate result ignored"), cutAt, healedAt, c.sim.Stats().Requests, wantCalls, got.calls, want.calls)
}
