// Package e2e runs quorum's role binaries as real OS processes over a real
// NATS JetStream server, a real redis-server and llmsim, and disturbs them:
// a generator killed with SIGKILL mid-run, a voter restarted, a coordinator
// killed and resumed. The outputs must equal an undisturbed run's.
package e2e

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	twait "github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// binDir holds nats-server; quorumBin is the quorum binary whose
// subcommands are the role binaries.
var binDir, quorumBin string

func TestMain(m *testing.M) {
	if os.Getenv("QUORUM_E2E_TOY_WORKER") != "" {
		os.Exit(toyWorkerMain())
	}
	flag.Parse()
	if testing.Short() {
		// Every test here runs the roles as processes over real servers.
		fmt.Println("e2e: every test starts processes and servers: skipped under -short (make check); make test runs them")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "quorum-e2e-bin")
	if err != nil {
		panic(err)
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	// Every role binary (cmd/coordinator, …) is `quorum <role>`: one
	// link of the big binary instead of four. make test builds it once
	// for every package (QUORUM_TEST_BIN).
	pkgs := []string{"github.com/nats-io/nats-server/v2"}
	quorum := os.Getenv("QUORUM_TEST_BIN")
	if quorum == "" {
		pkgs = append(pkgs, "./cmd/quorum")
		quorum = filepath.Join(dir, "quorum")
	}
	build := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building quorum and nats-server: %v\n%s", err, out)
		os.Exit(1)
	}
	binDir, quorumBin = dir, quorum
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func demoDir(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs("../examples/demo")
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// cluster is one NATS, one Redis and one llmsim, shared by the processes
// of a scenario.
type cluster struct {
	t        *testing.T
	natsURL  string
	redisURL string
	// llmURL is the simulator's root: each process calls it under its own
	// path (/w/<name>/v1), so the gate knows who is calling.
	llmURL string
	sim    *llmsim.Server
	gate   *gate
	logs   string
	// coordExtra are more flags for the coordinator (agent options).
	coordExtra []string
}

// gate sits in front of the simulator and can hold a process's next LLM
// request until that process dies: a kill test then kills while a task is
// surely in flight, never on a timer.
type gate struct {
	sim  http.Handler
	mu   sync.Mutex
	hold map[string]chan struct{}
	// once holds the bodies of the requests held so far. A task killed with
	// its request held makes the same request when it is redelivered; the
	// gate lets it pass, so the gate never kills one task twice and a task's
	// bounded deliveries (--max-deliver) are not used up by the test.
	once map[[sha256.Size]byte]bool
	// freed[name] lets name's held request through (release): a partition
	// test lets the cut-off worker finish its task late.
	freed map[string]*freed
	// paused[name] holds every request of name's, not only the next one,
	// until the test resumes it (pause).
	paused map[string]*paused
	stop   chan struct{}
}

// paused is a pause: arrived closes at its first held request, resume is
// closed by the test.
type paused struct {
	arrived, resume chan struct{}
	once            sync.Once
}

// freed is a held request's release (free), closed by the test, and its
// two ends, closed by the gate: answered, or abandoned by its caller.
type freed struct{ free, answered, abandoned chan struct{} }

// freedLocked returns name's release, made on first use; g.mu is held.
func (g *gate) freedLocked(name string) *freed {
	f, ok := g.freed[name]
	if !ok {
		f = &freed{free: make(chan struct{}), answered: make(chan struct{}), abandoned: make(chan struct{})}
		g.freed[name] = f
	}
	return f
}

// headersSent is a ResponseWriter whose headers are already out: the
// simulator's are dropped, its body streams on.
type headersSent struct{ http.ResponseWriter }

func (h headersSent) WriteHeader(int) {}

func (h headersSent) Flush() {
	if f, ok := h.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func newGate(sim http.Handler) *gate {
	return &gate{sim: sim, hold: map[string]chan struct{}{}, once: map[[sha256.Size]byte]bool{}, freed: map[string]*freed{}, paused: map[string]*paused{}, stop: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/w/")
	if !ok {
		g.sim.ServeHTTP(w, r)
		return
	}
	name, path, _ := strings.Cut(rest, "/")
	r.URL.Path = "/" + path
	g.mu.Lock()
	if p := g.paused[name]; p != nil && strings.HasSuffix(path, "chat/completions") {
		g.mu.Unlock()
		p.once.Do(func() { close(p.arrived) })
		select {
		case <-p.resume:
			g.sim.ServeHTTP(w, r)
		case <-r.Context().Done():
		case <-g.stop:
		}
		return
	}
	held, armed := g.hold[name]
	if !armed || !strings.HasSuffix(path, "chat/completions") {
		g.mu.Unlock()
		g.sim.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		g.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.Sum256(body)
	if g.once[sum] {
		g.mu.Unlock()
		g.sim.ServeHTTP(w, r)
		return
	}
	g.once[sum] = true
	delete(g.hold, name)
	close(held)
	rel := g.freedLocked(name)
	g.mu.Unlock()
	// The headers go at once, as a live endpoint's do, so the caller's
	// header timeout does not abandon the request before the kill; the
	// stream then stays silent until the caller's connection goes (its
	// process was killed) or the test ends.
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	select {
	case <-r.Context().Done():
		close(rel.abandoned)
	case <-g.stop:
	case <-rel.free:
		g.sim.ServeHTTP(headersSent{w}, r)
		close(rel.answered)
	}
}

// inFlight arms the gate for process name: the returned channel closes
// when the process has an LLM request held (a task in flight).
func (c *cluster) inFlight(name string) <-chan struct{} {
	ch := make(chan struct{})
	c.gate.mu.Lock()
	c.gate.hold[name] = ch
	c.gate.mu.Unlock()
	return ch
}

// release lets name's held LLM request through to the simulator; the
// returned channel closes once it has been answered. Call it once.
func (c *cluster) release(name string) <-chan struct{} {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	rel := c.gate.freedLocked(name)
	close(rel.free)
	return rel.answered
}

// pause holds every LLM request of name's from now until resume: the
// returned channel closes when the first arrives.
func (c *cluster) pause(name string) <-chan struct{} {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	p := &paused{arrived: make(chan struct{}), resume: make(chan struct{})}
	c.gate.paused[name] = p
	return p.arrived
}

// resume lets name's paused requests through, and those to come.
func (c *cluster) resume(name string) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	close(c.gate.paused[name].resume)
	delete(c.gate.paused, name)
}

// abandoned closes when name's held LLM request is given up by its
// caller (its context ended, or its process died) before its release.
func (c *cluster) abandoned(name string) <-chan struct{} {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	return c.gate.freedLocked(name).abandoned
}

// disarm takes back inFlight(name); it reports whether the gate had
// already held a request of name's (which then waits for name's kill).
func (c *cluster) disarm(name string) (held bool) {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	_, armed := c.gate.hold[name]
	delete(c.gate.hold, name)
	return !armed
}

// killInFlight waits until each named process has an LLM request in flight
// (armed before with inFlight) and SIGKILLs it.
func (c *cluster) killInFlight(held map[string]<-chan struct{}, procs map[string]*exec.Cmd) {
	c.t.Helper()
	for name, ch := range held {
		select {
		case <-ch:
		case <-time.After(2 * time.Minute):
			c.t.Fatalf("%s made no LLM request within 2 minutes: nothing to kill it in", name)
		}
		if err := procs[name].Process.Signal(syscall.SIGKILL); err != nil {
			c.t.Fatal(err)
		}
		procs[name].Wait()
	}
}

// waitFor polls cond (a state another process changes) until it holds.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	twait.For(t, d, what, cond)
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	sim, g, url := newSim(t, llmsim.Faults{})
	return &cluster{t: t, natsURL: natstest.Start(t).URL(), redisURL: redistest.Start(t).URL(), llmURL: url, sim: sim, gate: g, logs: t.TempDir()}
}

// newSim serves the simulator over the demo, with faults, behind a gate.
func newSim(t *testing.T, faults llmsim.Faults) (*llmsim.Server, *gate, string) {
	t.Helper()
	ds, err := dataset.Load(demoDir(t), dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Latency stretches the run so that processes die mid-way.
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 5, Latency: llmsim.Latency{FirstToken: 40 * time.Millisecond}, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	g := newGate(sim)
	ts := httptest.NewServer(g)
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(g.stop) }) // first: held requests end, then the server closes
	return sim, g, ts.URL
}

// start runs one role (quorum's subcommand bin, what the role binary of
// that name runs) with the cluster's connection flags.
func (c *cluster) start(name, bin string, args ...string) *exec.Cmd {
	c.t.Helper()
	base := []string{"--nats-url", c.natsURL, "--redis-url", c.redisURL, "--ack-wait", "3s", "--log-level", "info"}
	if bin == "generator-worker" || bin == "explorer-worker" {
		base = append(base, "--llm-base-url", c.llmURL+"/w/"+name+"/v1", "--llm-api-key", "test", "--concurrency", "4")
	}
	cmd := exec.Command(quorumBin, append(append([]string{bin}, base...), args...)...)
	logf, err := os.Create(filepath.Join(c.logs, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=")
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
			}
		}
		logf.Close()
	})
	return cmd
}

func (c *cluster) coordinator(name, run, out string) *exec.Cmd {
	return c.start(name, "coordinator", append([]string{"--run-id", run, "--dataset", demoDir(c.t), "--votes", "8", "--seed", "3", "--out", out}, c.coordExtra...)...)
}

func (c *cluster) workers() (gens []*exec.Cmd, voter *exec.Cmd) {
	voter = c.start("voter", "voter")
	gens = append(gens, c.start("generator-1", "generator-worker"), c.start("generator-2", "generator-worker"))
	c.start("explorer", "explorer-worker")
	return gens, voter
}

func wait(t *testing.T, cmd *exec.Cmd, logs, name string, d time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
			t.Fatalf("%s exited with %v:\n%s\n(logs in %s)", name, err, tail(string(b), 3000), logs)
		}
	case <-time.After(d):
		b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
		t.Fatalf("%s did not finish within %v:\n%s", name, d, tail(string(b), 3000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// snapshot is a run's answer files and run.json's per-example decisions.
type snapshot struct {
	files    map[string]string
	examples map[string]string // instance -> status/method/candidates
	calls    int
}

func readOutputs(t *testing.T, dir string) snapshot {
	t.Helper()
	o := snapshot{files: map[string]string{}, examples: map[string]string{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") || strings.HasSuffix(e.Name(), ".csv") {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			o.files[e.Name()] = string(b)
		}
	}
	rep, err := outputs.ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rep.Examples {
		if _, dup := o.examples[e.InstanceID]; dup {
			t.Errorf("%s has two final answers", e.InstanceID)
		}
		o.examples[e.InstanceID] = fmt.Sprintf("%s/%s/%d", e.Status, e.Method, e.Candidates)
	}
	o.calls = rep.Totals.Cost.LLMCalls
	return o
}

func compare(t *testing.T, what string, got, want snapshot) {
	t.Helper()
	if len(got.examples) != len(want.examples) {
		t.Errorf("%s: %d examples in run.json, want %d", what, len(got.examples), len(want.examples))
	}
	var diffs []string
	for id, w := range want.examples {
		if g := got.examples[id]; g != w {
			diffs = append(diffs, fmt.Sprintf("%s: %s, undisturbed %s", id, g, w))
		}
	}
	for name, w := range want.files {
		if g, ok := got.files[name]; !ok || !bytes.Equal([]byte(g), []byte(w)) {
			diffs = append(diffs, name+" differs")
		}
	}
	if len(got.files) != len(want.files) {
		diffs = append(diffs, fmt.Sprintf("%d answer files, undisturbed %d", len(got.files), len(want.files)))
	}
	sort.Strings(diffs)
	for _, d := range diffs {
		t.Errorf("%s: %s", what, d)
	}
}

// cleanRun is the undisturbed run, made by the first test that asks for
// it: the run is deterministic (the simulator's seed, the coordinator's),
// so every test compares with the same one instead of making its own.
var cleanRun struct {
	sync.Once
	ok    bool
	snap  snapshot
	calls int64
}

// undisturbed returns the demo run once, cleanly, and the LLM calls it
// made; the run is made once per test process.
func undisturbed(t *testing.T) (snapshot, int64) {
	t.Helper()
	cleanRun.Do(func() {
		cleanRun.snap, cleanRun.calls = runUndisturbed(t)
		cleanRun.ok = !t.Failed()
	})
	if !cleanRun.ok {
		t.Fatal("the undisturbed run failed (in the first test that made it)")
	}
	return cleanRun.snap, cleanRun.calls
}

func runUndisturbed(t *testing.T) (snapshot, int64) {
	t.Helper()
	c := newCluster(t)
	c.workers()
	out := filepath.Join(t.TempDir(), "out")
	coord := c.coordinator("coordinator", "clean", out)
	wait(t, coord, c.logs, "coordinator", 3*time.Minute)
	o := readOutputs(t, out)
	if len(o.examples) != 44 {
		t.Fatalf("undisturbed run finished %d examples, want 44", len(o.examples))
	}
	for id, s := range o.examples {
		// Exactly the expected candidates: 8, or 16 after exploration.
		if !strings.HasSuffix(s, "/8") && !strings.HasSuffix(s, "/16") {
			t.Errorf("%s: %s", id, s)
		}
	}
	return o, c.sim.Stats().Requests
}

func TestKilledGeneratorAndRestartedVoter(t *testing.T) {
	want, _ := undisturbed(t)

	c := newCluster(t)
	gens, voter := c.workers()
	held := c.inFlight("generator-1")
	out := filepath.Join(t.TempDir(), "out")
	coord := c.coordinator("coordinator", "disturbed", out)
	c.killInFlight(map[string]<-chan struct{}{"generator-1": held}, map[string]*exec.Cmd{"generator-1": gens[0]})
	// The voter dies once results are flowing to it.
	served := c.sim.Stats().Requests
	waitFor(t, 2*time.Minute, "20 more LLM calls after the kill", func() bool { return c.sim.Stats().Requests >= served+20 })
	if err := voter.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	voter.Wait()
	c.start("voter-restarted", "voter")
	wait(t, coord, c.logs, "coordinator", 3*time.Minute)
	got := readOutputs(t, out)
	compare(t, "killed generator + restarted voter", got, want)
	// The kill must really have interrupted work: the survivor took over
	// the killed worker's unacknowledged tasks.
	survivor, _ := os.ReadFile(filepath.Join(c.logs, "generator-2.log"))
	redelivered := strings.Count(string(survivor), "redelivered message")
	if redelivered == 0 {
		t.Error("no task of the killed generator was redelivered: the kill interrupted nothing")
	}
	t.Logf("undisturbed: %d LLM calls; disturbed: %d recorded, %d served by the simulator; %d tasks of the killed generator redelivered to the survivor",
		want.calls, got.calls, c.sim.Stats().Requests, redelivered)
}

// TestKilledGeneratorAdaptive is the kill test under adaptive sampling:
// a generator killed while a task is in flight, its tasks redelivered,
// gives the answers an undisturbed adaptive run gives, each example
// stopping after the same wave.
func TestKilledGeneratorAdaptive(t *testing.T) {
	adaptive := []string{"--agent-option", "sampling=adaptive"}
	clean := newCluster(t)
	clean.coordExtra = adaptive
	clean.workers()
	cleanOut := filepath.Join(t.TempDir(), "out")
	wait(t, clean.coordinator("coordinator", "clean", cleanOut), clean.logs, "coordinator", 3*time.Minute)
	want := readOutputs(t, cleanOut)
	stops := stoppedAfter(t, cleanOut)
	early := 0
	for _, s := range stops {
		if s > 0 {
			early++
		}
	}
	if early == 0 {
		t.Fatal("no example stopped early under adaptive sampling: the waves were not exercised")
	}

	c := newCluster(t)
	c.coordExtra = adaptive
	gens, _ := c.workers()
	held := c.inFlight("generator-1")
	out := filepath.Join(t.TempDir(), "out")
	coord := c.coordinator("coordinator", "disturbed", out)
	c.killInFlight(map[string]<-chan struct{}{"generator-1": held}, map[string]*exec.Cmd{"generator-1": gens[0]})
	wait(t, coord, c.logs, "coordinator", 3*time.Minute)
	compare(t, "adaptive sampling, killed generator", readOutputs(t, out), want)
	for id, s := range stoppedAfter(t, out) {
		if stops[id] != s {
			t.Errorf("%s: stopped after %d candidates with a generator killed, %d undisturbed", id, s, stops[id])
		}
	}
	survivor, _ := os.ReadFile(filepath.Join(c.logs, "generator-2.log"))
	if strings.Count(string(survivor), "redelivered message") == 0 {
		t.Error("no task of the killed generator was redelivered: the kill interrupted nothing")
	}
	t.Logf("%d of %d examples stopped early", early, len(stops))
}

func stoppedAfter(t *testing.T, dir string) map[string]int {
	t.Helper()
	rep, err := outputs.ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range rep.Examples {
		out[e.InstanceID] = e.StoppedAfter
	}
	return out
}

func TestCoordinatorKilledAndResumed(t *testing.T) {
	want, wantServed := undisturbed(t)

	c := newCluster(t)
	c.workers()
	out := filepath.Join(t.TempDir(), "out")
	coord := c.coordinator("coordinator", "resumed", out)
	// Killed mid-run: after a fifth of the undisturbed run's LLM calls.
	waitFor(t, 2*time.Minute, "a fifth of the run's LLM calls", func() bool { return c.sim.Stats().Requests >= wantServed/5 })
	if err := coord.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	coord.Wait()
	before, _ := os.ReadDir(out)
	resumed := c.start("coordinator-resumed", "coordinator", "--run-id", "resumed", "--out", out)
	wait(t, resumed, c.logs, "coordinator-resumed", 3*time.Minute)
	got := readOutputs(t, out)
	compare(t, "coordinator killed and resumed", got, want)
	served := c.sim.Stats().Requests
	t.Logf("coordinator killed with %d files written; resumed to %d examples; LLM calls served %d, undisturbed %d",
		len(before), len(got.examples), served, wantServed)
	if served != wantServed {
		t.Errorf("the resumed run made %d LLM calls, the undisturbed one %d: finished work was redone", served, wantServed)
	}
}
