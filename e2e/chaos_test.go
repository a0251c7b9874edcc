package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	twait "github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// natsProcess is a nats-server process with JetStream on a file store, so
// that it can be SIGKILLed and restarted where it was.
type natsProcess struct {
	t         *testing.T
	port      int
	store     string
	cmd       *exec.Cmd
	logs      string
	generated int
}

func startNATS(t *testing.T, logs string) *natsProcess {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	n := &natsProcess{t: t, port: port, store: t.TempDir(), logs: logs}
	n.start()
	t.Cleanup(func() { n.kill() })
	return n
}

func (n *natsProcess) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsProcess) start() {
	n.t.Helper()
	n.generated++
	logf, _ := os.Create(filepath.Join(n.logs, fmt.Sprintf("nats-%d.log", n.generated)))
	n.cmd = exec.Command(filepath.Join(binDir, "nats-server"), "-js", "-sd", n.store, "-a", "127.0.0.1", "-p", strconv.Itoa(n.port))
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	if !twait.Until(30*time.Second, func() bool {
		nc, err := nats.Connect(n.url())
		if err == nil {
			nc.Close()
		}
		return err == nil
	}) {
		n.t.Fatal("nats-server did not start within 30 s")
	}
}

func (n *natsProcess) kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		_ = n.cmd.Wait()
	}
}

// chaosAgent is one agent of the chaos suite and the coordinator flags
// that size its run.
type chaosAgent struct {
	name     string
	args     []string
	examples int
}

// chaosAgents are the suite's agents: small runs for go test, the demo's
// size in make chaos (QUORUM_CHAOS_LONG=1).
func chaosAgents(long bool) []chaosAgent {
	if long {
		return []chaosAgent{
			{"reforce", []string{"--agent", "reforce", "--votes", "8"}, 44},
			{"pexa", []string{"--agent", "pexa", "--limit", "16"}, 16},
			{"raise", []string{"--agent", "raise", "--agent-option", "rounds=3", "--limit", "10"}, 10},
			{"ensemble", []string{"--agent", "ensemble", "--agent-option", "raise.rounds=2", "--agent-option", "pexa.passes=2", "--votes", "4", "--limit", "8"}, 8},
		}
	}
	return []chaosAgent{
		{"reforce", []string{"--agent", "reforce", "--votes", "8", "--limit", "8"}, 8},
		{"pexa", []string{"--agent", "pexa", "--limit", "6"}, 6},
		{"raise", []string{"--agent", "raise", "--agent-option", "rounds=3", "--limit", "5"}, 5},
		{"ensemble", []string{"--agent", "ensemble", "--agent-option", "raise.rounds=2", "--agent-option", "pexa.passes=2", "--votes", "4", "--limit", "4"}, 4},
	}
}

// chaosFaults are the disturbed runs' LLM faults: 5xx replies and
// endpoints that send nothing (hangs), retried by the workers' LLM client.
// With a 10 s header timeout a call fails as a dead endpoint's only after
// three hangs in a row or six 5xx (30 s of no life): never in a run of a few
// thousand calls, so every fault is retried away, as a live endpoint's are.
func chaosFaults() llmsim.Faults {
	return llmsim.Faults{ServerError: 0.05, Hang: 0.01, HangFor: time.Minute}
}

// TestChaos runs ReFoRCE, PExA, RAISE and the ensemble with every role a
// process over a nats-server process and a redis-server with AOF, and
// compares each with an undisturbed run of the same agent and seed. The
// disturbed run's LLM answers 5xx and hangs at random, and four times, each
// once a worker has a task in flight (its LLM request held at the gate):
// that worker is SIGKILLed, then the voter too, then Redis goes away for
// 4 s (40 s in make chaos), then NATS and the coordinator are SIGKILLed,
// then the coordinator and the voter are frozen (SIGSTOP) as long; every
// role comes back. make chaos goes on killing workers in flight
// until the run ends. Every example must be answered once, with the same
// SQL, result files and decisions; nothing may be left in the stream or
// among the open rounds.
func TestChaos(t *testing.T) {
	long := os.Getenv("QUORUM_CHAOS_LONG") != ""
	outage := 4 * time.Second
	if long {
		outage = 40 * time.Second // as users' outages are
	}
	for _, ag := range chaosAgents(long) {
		t.Run(ag.name, func(t *testing.T) {
			t.Parallel()
			want := runChaos(t, ag, nil)
			if len(want.examples) != ag.examples {
				t.Fatalf("undisturbed %s run finished %d examples, want %d", ag.name, len(want.examples), ag.examples)
			}
			for id, s := range want.examples {
				if !strings.HasPrefix(s, "answered/") {
					t.Errorf("undisturbed %s run: %s %s, want answered", ag.name, id, s)
				}
			}
			got := runChaos(t, ag, &chaosPlan{long: long, outage: outage, spread: want.served / 10, faults: chaosFaults()})
			compare(t, ag.name+" under chaos", got.snapshot, want.snapshot)
		})
	}
}

// chaosPlan is how a run is disturbed; spread is how many LLM requests the
// run serves between two disturbances.
type chaosPlan struct {
	long   bool
	outage time.Duration
	spread int64
	faults llmsim.Faults
}

type chaosResult struct {
	snapshot
	served int64
}

// chaosRoles are a run's role processes; a role restarted gets a new
// process name (the gate knows a process by it).
type chaosRoles struct {
	c        *cluster
	procs    map[string]*exec.Cmd
	restarts map[string]int
}

var chaosBins = map[string]string{"voter": "voter", "generator-1": "generator-worker", "generator-2": "generator-worker", "explorer-1": "explorer-worker", "explorer-2": "explorer-worker"}

var chaosWorkers = []string{"generator-1", "generator-2", "explorer-1", "explorer-2"}

func (r *chaosRoles) name(role string) string { return fmt.Sprintf("%s-%d", role, r.restarts[role]) }

func (r *chaosRoles) start(role string) {
	r.restarts[role]++
	args := []string{"--max-deliver", "4"}
	if role != "voter" {
		args = append(args, "--llm-header-timeout", "10s")
	}
	r.procs[role] = r.c.start(r.name(role), chaosBins[role], args...)
}

func (r *chaosRoles) kill(role string) {
	_ = r.procs[role].Process.Signal(syscall.SIGKILL)
	_ = r.procs[role].Wait()
}

// runChaos runs ag once over its own nats-server, redis-server and
// simulator; plan nil is the undisturbed run.
func runChaos(t *testing.T, ag chaosAgent, plan *chaosPlan) chaosResult {
	t.Helper()
	tier.Servers(t, "redis-server")
	var faults llmsim.Faults
	if plan != nil {
		faults = plan.faults
	}
	sim, g, llmURL := newSim(t, faults)
	logs := t.TempDir()
	nproc := startNATS(t, logs)
	rdir := t.TempDir()
	rsrv, err := localredis.Start(localredis.Options{Dir: rdir, AppendOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rport, _ := strconv.Atoi(rsrv.Addr[len("127.0.0.1:"):])
	t.Cleanup(func() { rsrv.Stop() })
	c := &cluster{t: t, natsURL: nproc.url(), redisURL: rsrv.URL(), llmURL: llmURL, sim: sim, gate: g, logs: logs}
	r := &chaosRoles{c: c, procs: map[string]*exec.Cmd{}, restarts: map[string]int{}}
	r.start("voter")
	for _, w := range chaosWorkers {
		r.start(w)
	}
	out := filepath.Join(t.TempDir(), "out")
	coords := 1
	coord := c.start("coordinator-1", "coordinator", append([]string{"--run-id", "chaos", "--dataset", demoDir(t), "--seed", "3", "--out", out, "--max-deliver", "4"}, ag.args...)...)
	finished := make(chan error, 1)
	watch := func(cmd *exec.Cmd) { go func() { finished <- cmd.Wait() }() }
	watch(coord)
	var done bool
	var doneErr error
	// progress waits until the run has served spread more LLM requests
	// (or ended), so that the disturbances fall across the run.
	progress := func(spread int64) {
		from := sim.Stats().Requests
		for !done && sim.Stats().Requests < from+spread {
			select {
			case doneErr = <-finished:
				done = true
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	// killInFlight arms every worker, waits until one has a task in flight
	// (its LLM request held) and SIGKILLs it and any other the gate holds by
	// then. It returns the roles killed, none when the run ended first.
	killInFlight := func() []string {
		armed := map[string]<-chan struct{}{}
		for _, w := range chaosWorkers {
			armed[w] = c.inFlight(r.name(w))
		}
		deadline := time.Now().Add(3 * time.Minute)
		var killed []string
		for len(killed) == 0 && !done {
			for _, w := range chaosWorkers {
				select {
				case <-armed[w]:
					killed = append(killed, w)
				default:
				}
			}
			if len(killed) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no worker made an LLM request within 3 minutes (logs in %s)", ag.name, logs)
			}
			select {
			case doneErr = <-finished:
				done = true
			case <-time.After(20 * time.Millisecond):
			}
		}
		for _, w := range chaosWorkers {
			if !slices.Contains(killed, w) && c.disarm(r.name(w)) {
				killed = append(killed, w)
			}
		}
		for _, w := range killed {
			r.kill(w)
		}
		return killed
	}
	restart := func(roles []string) {
		for _, role := range roles {
			r.start(role)
		}
	}

	heldKills, steps := 0, 0
	if plan != nil {
		// Each step acts while a task is in flight, after a tenth of the
		// undisturbed run's LLM requests since the step before.
		for step := 1; !done && (step <= 5 || plan.long); step++ {
			progress(plan.spread)
			killed := killInFlight()
			if len(killed) == 0 {
				break
			}
			heldKills += len(killed)
			steps = step
			switch step {
			case 2:
				r.kill("voter")
				killed = append(killed, "voter")
			case 3:
				rsrv.Stop()
				time.Sleep(plan.outage) //clock:ok the scenario: Redis down this long; the check is the answers
				if rsrv, err = localredis.Start(localredis.Options{Dir: rdir, AppendOnly: true, Port: rport}); err != nil {
					t.Fatal(err)
				}
			case 4:
				nproc.kill()
				_ = coord.Process.Signal(syscall.SIGKILL)
				<-finished
				nproc.start()
				coords++
				coord = c.start(fmt.Sprintf("coordinator-%d", coords), "coordinator", "--run-id", "chaos", "--out", out, "--max-deliver", "4")
				watch(coord)
			case 5:
				// Frozen, not dead (a stalled VM, a GC pause, SIGSTOP):
				// their leases and consumers lapse while the workers go on.
				frozen := []*os.Process{coord.Process, r.procs["voter"].Process}
				for _, p := range frozen {
					_ = p.Signal(syscall.SIGSTOP)
				}
				time.Sleep(plan.outage) //clock:ok the scenario: frozen this long; the check is the answers
				for _, p := range frozen {
					_ = p.Signal(syscall.SIGCONT)
				}
			default:
				if step%3 == 2 {
					r.kill("voter")
					killed = append(killed, "voter")
				}
			}
			restart(killed)
		}
	}
	if !done {
		select {
		case doneErr = <-finished:
		case <-time.After(6 * time.Minute):
			// Say where the run stands, and keep the logs past the
			// test's cleanup: a rare hang needs more than "it hung".
			t.Fatalf("%s: the run did not finish within 6 minutes after %d disturbances; %s", ag.name, steps, standing(t, logs, rsrv.Addr, nproc.url(), fmt.Sprintf("coordinator-%d", coords), r.name("voter")))
		}
	}
	if doneErr != nil {
		t.Fatalf("%s: coordinator: %v; %s", ag.name, doneErr, standing(t, logs, rsrv.Addr, nproc.url(), fmt.Sprintf("coordinator-%d", coords), r.name("voter")))
	}
	res := chaosResult{snapshot: readOutputs(t, out), served: sim.Stats().Requests}

	rdb := redis.NewClient(&redis.Options{Addr: rsrv.Addr})
	defer rdb.Close()
	if left, err := rdb.ZRange(context.Background(), "quorum:rounds", 0, -1).Result(); err != nil || len(left) != 0 {
		t.Errorf("%s: rounds left open: %v (%v)", ag.name, left, err)
	}
	if n := streamMessages(t, nproc.url()); n != 0 {
		t.Errorf("%s: %d messages left in the stream", ag.name, n)
	}
	if plan == nil {
		return res
	}
	if steps < 5 {
		t.Errorf("%s: the run ended after %d of the 5 disturbances: it is too short to prove them", ag.name, steps)
	}
	// Every task killed in flight must have come back to a worker.
	redelivered := 0
	entries, _ := os.ReadDir(logs)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(logs, e.Name()))
		redelivered += strings.Count(string(b), "redelivered message")
	}
	if redelivered < heldKills {
		t.Errorf("%s: %d tasks redelivered, fewer than the %d killed in flight", ag.name, redelivered, heldKills)
	}
	faultsSeen := sim.Stats().Faults
	if faultsSeen == 0 {
		t.Errorf("%s: the simulator injected no fault in %d requests", ag.name, res.served)
	}
	workerKills := 0
	for _, n := range r.restarts {
		workerKills += n - 1
	}
	t.Logf("%s under chaos: %d disturbances, %d processes SIGKILLed and restarted (%d workers with a task in flight), redis down %v, nats and the coordinator restarted, the coordinator and the voter frozen %[5]v; %d LLM faults in %d requests; %d redeliveries; %d examples compared with the undisturbed run",
		ag.name, steps, workerKills, heldKills, plan.outage, faultsSeen, res.served, redelivered, len(res.examples))
	return res
}

// standing says where a run that failed stands: the rounds Redis holds
// open, the messages left in the stream, a copy of every log kept past the
// test's cleanup and the last lines of the logs of tails (role names).
func standing(t *testing.T, logs, redisAddr, natsURL string, tails ...string) string {
	t.Helper()
	var b strings.Builder
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	open, err := rdb.ZRangeWithScores(context.Background(), "quorum:rounds", 0, -1).Result()
	fmt.Fprintf(&b, "open rounds %v (%v); ", open, err)
	if nc, err := nats.Connect(natsURL); err == nil {
		js, _ := jetstream.New(nc)
		if st, err := js.Stream(context.Background(), queue.Stream); err == nil {
			if info, err := st.Info(context.Background()); err == nil {
				fmt.Fprintf(&b, "the stream holds %d messages; ", info.State.Msgs)
			}
		}
		nc.Close()
	}
	kept, err := os.MkdirTemp("", "quorum-chaos-logs-")
	if err == nil {
		entries, _ := os.ReadDir(logs)
		for _, e := range entries {
			if data, err := os.ReadFile(filepath.Join(logs, e.Name())); err == nil {
				_ = os.WriteFile(filepath.Join(kept, e.Name()), data, 0o644)
			}
		}
		fmt.Fprintf(&b, "logs kept in %s", kept)
	}
	for _, name := range tails {
		data, _ := os.ReadFile(filepath.Join(logs, name+".log"))
		fmt.Fprintf(&b, "\n--- %s.log (last lines) ---\n%s", name, tail(string(data), 2500))
	}
	return b.String()
}

// workStream is the work stream on the NATS server at url, over a
// connection closed when the test ends.
func workStream(t *testing.T, url string) jetstream.Stream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// streamMessages counts the messages left in the work stream.
func streamMessages(t *testing.T, url string) uint64 {
	t.Helper()
	info, err := workStream(t, url).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
