package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/queue"
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
	for i := 0; i < 100; i++ {
		if nc, err := nats.Connect(n.url()); err == nil {
			nc.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.t.Fatal("nats-server did not start")
}

func (n *natsProcess) kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		_ = n.cmd.Wait()
	}
}

// TestChaos runs the demo with every role a process over a nats-server
// process and a redis-server with AOF, two deliveries per task, while
// workers and the voter are SIGKILLed and restarted over and over, Redis
// goes away for 4 s (40 s with QUORUM_CHAOS_LONG=1, make chaos), and NATS is SIGKILLed and restarted along with the
// coordinator. The answers and decisions must equal an undisturbed run's,
// and nothing may be left in the stream or among the open rounds.
func TestChaos(t *testing.T) {
	// make chaos: a 40 s Redis outage, as users' outages are.
	outage := 4 * time.Second
	if os.Getenv("QUORUM_CHAOS_LONG") != "" {
		outage = 40 * time.Second
	}
	want, _ := undisturbed(t)

	base := newCluster(t) // llmsim and the logs folder
	logs := base.logs
	nproc := startNATS(t, logs)
	rdir := t.TempDir()
	rsrv, err := localredis.Start(localredis.Options{Dir: rdir, AppendOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rport, _ := strconv.Atoi(rsrv.Addr[len("127.0.0.1:"):])
	t.Cleanup(func() { rsrv.Stop() })
	c := &cluster{t: t, natsURL: nproc.url(), redisURL: rsrv.URL(), llmURL: base.llmURL, sim: base.sim, gate: base.gate, logs: logs}

	restarts := map[string]int{}
	procs := map[string]*exec.Cmd{}
	role := func(name, bin string) {
		restarts[name]++
		procs[name] = c.start(fmt.Sprintf("%s-%d", name, restarts[name]), bin, "--max-deliver", "2")
	}
	for _, r := range [][2]string{{"voter", "voter"}, {"generator-1", "generator-worker"}, {"generator-2", "generator-worker"}, {"explorer", "explorer-worker"}} {
		role(r[0], r[1])
	}
	out := filepath.Join(t.TempDir(), "out")
	coord := c.start("coordinator-1", "coordinator", "--run-id", "chaos", "--dataset", demoDir(t), "--votes", "8", "--seed", "3", "--out", out, "--max-deliver", "2")
	finished := make(chan error, 1)
	watch := func(cmd *exec.Cmd) { go func() { finished <- cmd.Wait() }() }
	watch(coord)

	rng := rand.New(rand.NewPCG(7, 7))
	victims := []string{"voter", "generator-1", "generator-2", "explorer"}
	bins := map[string]string{"voter": "voter", "generator-1": "generator-worker", "generator-2": "generator-worker", "explorer": "explorer-worker"}
	start := time.Now()
	redisDown, natsDone := false, false
	deadline := time.After(4 * time.Minute)
	for done := false; !done; {
		select {
		case err := <-finished:
			if err != nil {
				t.Fatalf("coordinator: %v (logs in %s)", err, logs)
			}
			done = true
			continue
		case <-deadline:
			t.Fatalf("the disturbed run did not finish (logs in %s)", logs)
		case <-time.After(1200 * time.Millisecond):
		}
		// A random worker or the voter dies and comes back.
		v := victims[rng.IntN(len(victims))]
		_ = procs[v].Process.Signal(syscall.SIGKILL)
		_ = procs[v].Wait()
		role(v, bins[v])
		switch el := time.Since(start); {
		case el > 3*time.Second && !redisDown:
			redisDown = true
			rsrv.Stop()
			time.Sleep(outage)
			if rsrv, err = localredis.Start(localredis.Options{Dir: rdir, AppendOnly: true, Port: rport}); err != nil {
				t.Fatal(err)
			}
		case el > outage+5*time.Second && !natsDone:
			natsDone = true
			nproc.kill()
			_ = coord.Process.Signal(syscall.SIGKILL)
			<-finished
			time.Sleep(time.Second)
			nproc.start()
			coord = c.start("coordinator-2", "coordinator", "--run-id", "chaos", "--out", out, "--max-deliver", "2")
			watch(coord)
		}
	}
	if !redisDown || !natsDone {
		t.Logf("the run ended before every disturbance (redis down %v, nats restarted %v)", redisDown, natsDone)
	}
	got := readOutputs(t, out)
	compare(t, "chaos", got, want)

	rdb := redis.NewClient(&redis.Options{Addr: rsrv.Addr})
	defer rdb.Close()
	if left, err := rdb.ZRange(context.Background(), "quorum:rounds", 0, -1).Result(); err != nil || len(left) != 0 {
		t.Errorf("rounds left open: %v (%v)", left, err)
	}
	nc, err := nats.Connect(nproc.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(context.Background(), queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d messages left in the stream", info.State.Msgs)
	}
	kills := 0
	for _, n := range restarts {
		kills += n - 1
	}
	t.Logf("chaos: %d workers/voter SIGKILLed and restarted, redis down %v, nats and the coordinator SIGKILLed and restarted; %d examples compared with the undisturbed run",
		kills, outage, len(got.examples))
}
