package serve

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
)

// leakRig is a question API assembled as quorum serve assembles it (Start
// on a cluster of every role, with a listener), a client of it, and a
// JetStream view of its stream to count consumers exactly.
type leakRig struct {
	t    *testing.T
	cl   *cluster.Cluster
	s    *Server
	base string
	hc   *http.Client
	js   jetstream.JetStream
	ds   *dataset.Dataset
}

// startLeakRig starts a cluster over llm, and serve on it with stateDir;
// both stop when the test ends. opts change serve's Config.
func startLeakRig(ctx context.Context, t *testing.T, llm http.Handler, stateDir string, opts ...func(*Config)) *leakRig {
	t.Helper()
	ds, err := dataset.Load(openAPIDemo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cl := startCluster(ctx, t, llm, 16, 8)
	return serveOn(t, cl, ds, stateDir, opts...)
}

// serveOn starts serve in cl through Start, the command's assembly.
func serveOn(t *testing.T, cl *cluster.Cluster, ds *dataset.Dataset, stateDir string, opts ...func(*Config)) *leakRig {
	t.Helper()
	tenants, err := ParseKeys(strings.NewReader("a:"+keyA), "test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dataset: openAPIDemo, Votes: 1, StateDir: stateDir, RoundTimeout: time.Minute, Tenants: tenants, CacheTTL: -1}
	for _, o := range opts {
		o(&cfg)
	}
	s, err := Start(cl, cfg, Process{Listener: ln})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	nc, err := nats.Connect(cl.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	return &leakRig{t: t, cl: cl, s: s, base: "http://" + ln.Addr().String(), hc: hc, js: js, ds: ds}
}

func (r *leakRig) do(method, path, body string) (int, []byte) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, r.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := r.hc.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// ask posts the i-th question (a new one each time: a new run, not a
// cached answer) and returns its id.
func (r *leakRig) ask(i int) string {
	r.t.Helper()
	q := r.ds.Examples[i%len(r.ds.Examples)]
	body, _ := json.Marshal(map[string]any{"db": q.DB, "question": fmt.Sprintf("%s (%d)", q.Question, i), "cache": false})
	code, out := r.do("POST", "/v1/questions", string(body))
	var a accepted
	if code != http.StatusAccepted || json.Unmarshal(out, &a) != nil || a.ID == "" {
		r.t.Fatalf("POST question %d: %d %s", i, code, out)
	}
	return a.ID
}

func (r *leakRig) cancel(id string) {
	r.t.Helper()
	if code, out := r.do("DELETE", "/v1/questions/"+id, ""); code != http.StatusOK {
		r.t.Fatalf("DELETE %s: %d %s", id, code, out)
	}
}

func (r *leakRig) status(id string) string {
	r.t.Helper()
	rec, err := r.s.store.get(context.Background(), id)
	if err != nil {
		r.t.Fatalf("question %s: %v", id, err)
	}
	return rec.Status
}

// consumers lists the coordinators' consumers on the stream, read from
// JetStream itself.
func (r *leakRig) consumers() map[string]bool {
	r.t.Helper()
	return natstest.Consumers(r.t, r.js, coordinator.ConsumerName(""))
}

func (r *leakRig) hasConsumer(id string) bool {
	r.t.Helper()
	return r.consumers()[coordinator.ConsumerName(id)]
}

// questionMessages counts the messages on the questions' subjects.
func (r *leakRig) questionMessages() uint64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := r.js.Stream(ctx, queue.Stream)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("quorum.*.>"))
	if err != nil {
		r.t.Fatal(err)
	}
	var n uint64
	for subject, c := range info.State.Subjects {
		if isQuestionID(strings.Split(subject, ".")[1]) {
			n += c
		}
	}
	return n
}

// idle waits until this process drives no question: every driver has
// returned, its cleanup done.
func (r *leakRig) idle() {
	r.t.Helper()
	wait.For(r.t, time.Minute, "every question's driver to return", func() bool {
		r.s.mu.Lock()
		defer r.s.mu.Unlock()
		return len(r.s.running) == 0
	})
}

// settled waits until no cancelled question is left to settle (its
// running tasks stopped, its subjects purged).
func (r *leakRig) settled() {
	r.t.Helper()
	wait.For(r.t, 3*time.Minute, "every cancelled question to be settled", func() bool {
		n, err := r.cl.Redis.ZCard(context.Background(), settleKey).Result()
		return err == nil && n == 0
	})
}

// goroutines returns the goroutine count once it is at most want, or
// after a minute's wait for what is ending (connections closing, fetches
// returning, stopped tasks) to end; it does not fail: the caller compares,
// with goroutineSlack. A negative want reads it at once. The minute is a
// failure's bound only (a leak waits it out, a clean run returns as soon as
// the count settles), so a slow machine does not fail a clean run.
func (r *leakRig) goroutines(want int) int {
	r.hc.CloseIdleConnections()
	n := runtime.NumGoroutine()
	if want >= 0 {
		wait.Until(time.Minute, func() bool { n = runtime.NumGoroutine(); return n <= want })
	}
	return n
}

// goroutineSlack is how many goroutines more than at the start still count
// as flat: a worker's fetch or a closing connection may be on its way out.
// A consumer left behind is four goroutines of the embedded NATS server.
const goroutineSlack = 12

// cancelBatch is how many questions cancelCycles has in flight at once.
const cancelBatch = 50

// cancelCycles asks k questions from the from-th and cancels each: a
// fifth at once after its POST (usually before its run started), the
// others once their run's consumer exists (the run waits for the LLM);
// every other one of those twice.
func (r *leakRig) cancelCycles(from, k int) {
	r.t.Helper()
	var running []string
	for i := range k {
		id := r.ask(from + i)
		if i%5 == 0 {
			r.cancel(id)
			continue
		}
		running = append(running, id)
	}
	wait.For(r.t, time.Minute, "the running questions' coordinator consumers", func() bool {
		have := r.consumers()
		for _, id := range running {
			if !have[coordinator.ConsumerName(id)] {
				return false
			}
		}
		return true
	})
	for i, id := range running {
		r.cancel(id)
		if i%2 == 1 {
			r.cancel(id) // twice: the second finds it ended
		}
	}
}

// cancels runs n cycles in batches from the from-th question.
func (r *leakRig) cancels(from, n int) {
	for i := 0; i < n; i += cancelBatch {
		r.cancelCycles(from+i, min(cancelBatch, n-i))
	}
}

// cycles is how many cycles TestCancelLeavesNothing runs:
// QUORUM_CANCEL_CYCLES (make slow: the 1,000), else 100: a
// consumer left by any one cancel fails the test, and so do the goroutines
// of a leak in one cancel of ten (four each, against goroutineSlack); under
// the race detector each cycle costs about a tenth of a CPU-second.
func cycles() int {
	if v, err := strconv.Atoi(os.Getenv("QUORUM_CANCEL_CYCLES")); err == nil && v > 0 {
		return v
	}
	return 100
}

// TestCancelLeavesNothing asks questions and cancels them, again and again,
// through the real serve assembly, with an LLM that never answers (each
// question is still running at its cancel; cancelCycles says when each is
// cancelled). Once every driver has returned, the stream has exactly the
// coordinators' consumers it had before, and the process about the
// goroutines it had. Before, each cancel of a running question left its
// coordinator's durable consumer, and the four goroutines of the embedded
// NATS server serving it.
func TestCancelLeavesNothing(t *testing.T) {
	n := cycles()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, sim := demoSim(t)
	h := &hold{sim: sim, open: make(chan struct{})}
	r := startLeakRig(ctx, t, h, t.TempDir())
	t.Cleanup(h.release) // before the cluster's cleanup: held calls end
	r.cancels(0, 5)      // warm: datasets, pools, connections
	r.idle()
	consumersBefore := len(r.consumers())
	before := r.goroutines(-1)
	start := time.Now()
	r.cancels(100, n)
	r.idle()
	took := time.Since(start) //clock:ok logged, not asserted
	consumersAfter := r.consumers()
	after := r.goroutines(before)
	t.Logf("%d POST+DELETE cycles in %s: goroutines %d -> %d, coordinator consumers %d -> %d",
		n, took.Round(time.Millisecond), before, after, consumersBefore, len(consumersAfter))
	if len(consumersAfter) != consumersBefore {
		t.Errorf("%d cancels left %d coordinator consumers (had %d)", n, len(consumersAfter), consumersBefore)
	}
	if after > before+goroutineSlack {
		t.Errorf("%d cancels left %d goroutines more (%d -> %d)", n, after-before, before, after)
	}
}

// TestCancelInEveryOrder cancels questions before their run starts, while
// it runs, twice at once, and after it finished, and checks that each
// leaves no coordinator consumer and no files under the state directory.
func TestCancelInEveryOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, sim := demoSim(t)
	h := &hold{sim: sim, open: make(chan struct{})}
	state := t.TempDir()
	r := startLeakRig(ctx, t, h, state)
	t.Cleanup(h.release)
	left := func(order, id string) {
		t.Helper()
		r.idle()
		if r.hasConsumer(id) {
			t.Errorf("%s: the question's coordinator consumer is still there", order)
		}
		if _, err := os.Stat(r.s.questionDir(id)); !os.IsNotExist(err) {
			t.Errorf("%s: the question run's files are still there (%v)", order, err)
		}
	}
	running := func(id string) {
		t.Helper()
		wait.For(t, time.Minute, "the running question's coordinator consumer", func() bool { return r.hasConsumer(id) })
	}

	// Before its run starts: stored as a POST stores it, cancelled, then
	// offered to a driver (as adopt offers a pending question).
	id, err := r.s.ids.mint(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	q := &Question{ID: id, Status: Queued, DB: "shop", Dialect: "sqlite", Question: "How many customers does the shop have?",
		Agent: r.s.cfg.DefaultAgent, Votes: 1, Tenant: "a", Example: ExampleID("shop", "How many customers does the shop have?", ""), Created: time.Now().UTC()}
	if err := r.s.store.put(ctx, q); err != nil {
		t.Fatal(err)
	}
	r.cancel(id)
	r.s.start(r.s.baseCtx(), id)
	left("before its run starts", id)

	// While it runs: its tasks are held at the LLM.
	id = r.ask(1)
	running(id)
	r.cancel(id)
	left("while it runs", id)

	// Twice at once, while it runs.
	id = r.ask(2)
	running(id)
	done := make(chan struct{})
	go func() { defer close(done); r.cancel(id) }()
	r.cancel(id)
	<-done
	left("twice at once", id)

	// After it finished.
	h.release()
	id = r.ask(3)
	wait.For(t, time.Minute, "the question's answer", func() bool { s := r.status(id); return s != Queued && s != Running })
	r.cancel(id)
	left("after it finished", id)
	if s := r.status(id); s != Answered {
		t.Errorf("a cancel after the answer made the question %s", s)
	}
}

// clusterIn starts every role in process over the LLM at llmURL, its
// embedded NATS and redis-server keeping their data under dir: a cluster
// started again on dir finds the stream's consumers and Redis's keys.
func clusterIn(ctx context.Context, t *testing.T, llmURL, dir string) *cluster.Cluster {
	t.Helper()
	tier.Servers(t, "a cluster")
	cl, err := cluster.Start(ctx, cluster.Config{StateDir: dir, Agents: agents.Builtin(), Grace: time.Second,
		LLM:        llm.Config{BaseURL: llmURL + "/v1", APIKey: "sim", Default: llm.ModelConfig{Name: "gpt-4o"}},
		Generators: 1, GeneratorConcurrency: 8, Explorers: 1, ExplorerConcurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestRestartSweepsOrphans: a serve process stopped dead while its
// questions ran, whose questions were then cancelled (through a process
// that did not drive them, or before cancels released anything), leaves
// their coordinators' consumers on the stream and their folders in its
// state directory. The next start's sweep deletes those of the cancelled
// questions and of a question whose record is gone, and retires their
// runs; it keeps those of a question still pending (the next driver
// resumes it), of a cancelled one another live process still drives, and
// of a batch run that merely looks like a question.
func TestRestartSweepsOrphans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, sim := demoSim(t)
	h := &hold{sim: sim, open: make(chan struct{})}
	llmSrv := httptest.NewServer(h)
	t.Cleanup(llmSrv.Close)
	t.Cleanup(h.release) // before the LLM server closes: held calls end
	clusterDir, state := t.TempDir(), t.TempDir()

	// Life 1: questions running, their consumers made by their runs.
	cl1 := clusterIn(ctx, t, llmSrv.URL, clusterDir)
	r1 := serveOn(t, cl1, ds, state)
	var ids []string
	for i := range 5 {
		ids = append(ids, r1.ask(i))
	}
	wait.For(t, time.Minute, "the questions' coordinator consumers", func() bool {
		have := r1.consumers()
		for _, id := range ids {
			if !have[coordinator.ConsumerName(id)] {
				return false
			}
		}
		return true
	})
	// Its drivers stop as a killed process's do, releasing nothing: the
	// questions are only interrupted.
	r1.s.Stop()
	cancelled, gone, pending, leased := ids[:2], ids[2], ids[3], ids[4]
	over := append([]string{gone, leased}, cancelled...)
	for _, id := range over {
		r1.cancel(id) // no driver here to stop, nor loop to settle it
	}
	// Settled long ago, by a serve that never released anything: only the
	// sweep can find them now.
	if err := cl1.Redis.ZRem(ctx, settleKey, over).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl1.Redis.Del(ctx, questionKey(gone)).Err(); err != nil { // its record expired
		t.Fatal(err)
	}
	if ok, err := r1.s.store.lease(leased, "another-process", time.Hour).Acquire(ctx); err != nil || !ok {
		t.Fatalf("taking the lease of %s for another process: %v %v", leased, ok, err)
	}
	// A batch run named like a question, with its coordinator's consumer.
	batch, err := r1.s.ids.mint(ctx, "batch")
	if err != nil {
		t.Fatal(err)
	}
	m := &runstate.Manifest{Run: batch, Dataset: openAPIDemo, Examples: []string{"local001"}, Agent: r1.s.cfg.DefaultAgent, Votes: 1}
	if _, _, err := cl1.Env.State.CreateManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := cl1.Env.Queue.Consumer(ctx, coordinator.ConsumerName(batch), queue.Subject(batch, queue.StageFinal, "")); err != nil {
		t.Fatal(err)
	}
	// A question whose every key expired long ago, its consumer left by a
	// serve from before consumers were released: only NATS knows it.
	forgotten, err := r1.s.ids.mint(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl1.Env.Queue.Consumer(ctx, coordinator.ConsumerName(forgotten), queue.Subject(forgotten, queue.StageFinal, "")); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := os.Stat(r1.s.questionDir(id)); err != nil {
			t.Fatalf("question %s's folder before the restart: %v", id, err)
		}
	}
	cl1.Close()

	// Life 2, on the same servers' data and state directory.
	cl2 := clusterIn(ctx, t, llmSrv.URL, clusterDir)
	r2 := serveOn(t, cl2, ds, state)
	orphans := append([]string{gone, forgotten}, cancelled...)
	wait.For(t, time.Minute, "the sweep to delete the cancelled questions' consumers", func() bool {
		have := r2.consumers()
		for _, id := range orphans {
			if have[coordinator.ConsumerName(id)] {
				return false
			}
		}
		return true
	})
	<-r2.s.sweep.Done()
	for _, id := range orphans {
		if _, err := os.Stat(r2.s.questionDir(id)); !os.IsNotExist(err) {
			t.Errorf("question %s's folder is still there (%v)", id, err)
		}
		if n, err := cl2.Redis.Exists(ctx, rdb.RetiredKey(id)).Result(); err != nil || n != 1 {
			t.Errorf("question %s's run is not retired (%v)", id, err)
		}
	}
	have := r2.consumers()
	for what, id := range map[string]string{"a pending question": pending, "a question another process drives": leased, "a batch run": batch} {
		if !have[coordinator.ConsumerName(id)] {
			t.Errorf("the sweep deleted the consumer of %s", what)
		}
	}
	if _, err := os.Stat(r2.s.questionDir(leased)); err != nil {
		t.Errorf("the sweep removed the folder of a question another process drives: %v", err)
	}
}

// hold is llmsim whose chat calls wait until release (or until their
// client gives up): a question's run stays running, its consumer there.
type hold struct {
	sim  http.Handler
	once sync.Once
	open chan struct{}
}

func (h *hold) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		// Read first: the server notices a client that gave up only once
		// the request's body has been read.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-h.open:
		case <-r.Context().Done():
			return
		}
	}
	h.sim.ServeHTTP(w, r)
}

func (h *hold) release() { h.once.Do(func() { close(h.open) }) }

// keyCounts counts Redis's keys by pattern (ids, hashes and numbers as
// *), SCANning the keyspace; persistent counts those without an expiry.
func keyCounts(ctx context.Context, t *testing.T, r *leakRig) (byPattern map[string]int, persistent int) {
	t.Helper()
	byPattern = map[string]int{}
	iter := r.cl.Redis.Scan(ctx, 0, rdb.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		byPattern[keyPattern(k)]++
		ttl, err := r.cl.Redis.PTTL(ctx, k).Result()
		if err == nil && ttl == -1 {
			persistent++
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return byPattern, persistent
}

// keyPattern is k with its ids, hashes and numbers as *.
func keyPattern(k string) string {
	parts := strings.Split(k, ":")
	for i, p := range parts {
		_, err := strconv.Atoi(p)
		_, herr := hex.DecodeString(strings.TrimPrefix(p, "q"))
		if err == nil || (len(p) >= 12 && herr == nil) || strings.HasPrefix(p, "r0.") || strings.HasPrefix(p, "r1.") {
			parts[i] = "*"
		}
	}
	return strings.Join(parts, ":")
}

// grown lists the patterns whose count grew from before to after.
func grown(before, after map[string]int) []string {
	var out []string
	for p, n := range after {
		if n > before[p] {
			out = append(out, fmt.Sprintf("%s %d -> %d", p, before[p], n))
		}
	}
	sort.Strings(out)
	return out
}
