package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/redisconn"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// natsNode is one nats-server of a three-node JetStream cluster, on its
// own file store, so it can be SIGKILLed and rejoin where it was. (Its
// own type rather than chaos_test.go's natsProcess, which runs one
// server alone.)
type natsNode struct {
	t           *testing.T
	name        string
	port, route int
	routes      string
	store, logs string
	cmd         *exec.Cmd
	starts      int
}

func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startNATSCluster starts three clustered nats-servers with JetStream and
// waits until the cluster has a JetStream meta leader.
func startNATSCluster(t *testing.T, logs string) []*natsNode {
	t.Helper()
	nodes := make([]*natsNode, 3)
	var routes []string
	for i := range nodes {
		nodes[i] = &natsNode{t: t, name: fmt.Sprintf("n%d", i+1), port: freeLoopbackPort(t), route: freeLoopbackPort(t), store: t.TempDir(), logs: logs}
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(nodes[i].route))
	}
	for _, n := range nodes {
		n.routes = strings.Join(routes, ",")
		n.start()
		t.Cleanup(n.kill)
	}
	waitJetStream(t, nodes)
	return nodes
}

func (n *natsNode) url() string { return "nats://127.0.0.1:" + strconv.Itoa(n.port) }

func (n *natsNode) start() {
	n.t.Helper()
	n.starts++
	logf, err := os.Create(filepath.Join(n.logs, fmt.Sprintf("nats-%s-%d.log", n.name, n.starts)))
	if err != nil {
		n.t.Fatal(err)
	}
	n.cmd = exec.Command(filepath.Join(binDir, "nats-server"), "-js", "-sd", n.store, "-a", "127.0.0.1", "-p", strconv.Itoa(n.port),
		"-n", n.name, "--cluster_name", "quorum", "--cluster", "nats://127.0.0.1:"+strconv.Itoa(n.route), "--routes", n.routes)
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	waitFor(n.t, 20*time.Second, "nats-server "+n.name+" to accept connections", func() bool {
		nc, err := nats.Connect(n.url())
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
}

func (n *natsNode) kill() {
	if n.cmd != nil && n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		_ = n.cmd.Wait()
	}
}

func (n *natsNode) alive() bool { return n.cmd != nil && n.cmd.ProcessState == nil }

// waitJetStream waits until every live node answers JetStream requests
// (the cluster has elected its meta leader).
func waitJetStream(t *testing.T, nodes []*natsNode) {
	t.Helper()
	for _, n := range nodes {
		if !n.alive() {
			continue
		}
		waitFor(t, 60*time.Second, "JetStream on "+n.name, func() bool {
			nc, err := nats.Connect(n.url())
			if err != nil {
				return false
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
			return err == nil
		})
	}
}

// streamInfo asks a live node about quorum's stream.
func streamInfo(t *testing.T, nodes []*natsNode) (*jetstream.StreamInfo, error) {
	t.Helper()
	var last error
	for _, n := range nodes {
		if !n.alive() {
			continue
		}
		nc, err := nats.Connect(n.url())
		if err != nil {
			last = err
			continue
		}
		js, _ := jetstream.New(nc)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := js.Stream(ctx, queue.Stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ctx)
		}
		cancel()
		nc.Close()
		if err == nil {
			return info, nil
		}
		last = err
	}
	return nil, last
}

// streamLeader waits until the stream has a leader other than not and
// returns its node.
func streamLeader(t *testing.T, nodes []*natsNode, not string) *natsNode {
	t.Helper()
	var leader *natsNode
	waitFor(t, 60*time.Second, "a stream leader other than "+not, func() bool {
		info, err := streamInfo(t, nodes)
		if err != nil || info.Cluster == nil || info.Cluster.Leader == "" || info.Cluster.Leader == not {
			return false
		}
		for _, n := range nodes {
			if n.name == info.Cluster.Leader && n.alive() {
				leader = n
			}
		}
		return leader != nil
	})
	return leader
}

// TestClusterChaos runs the demo with every role a process over a
// three-node JetStream cluster with R3 streams and a Redis primary with a
// replica and three sentinels (the roles given all three NATS servers and
// a redis+sentinel:// URL), and while tasks are in flight SIGKILLs the
// stream's leader and then the Redis primary, which the sentinels replace
// by the replica. With QUORUM_CHAOS_LONG=1 (make chaos) the killed NATS
// server rejoins and the new leader is killed too, three times. The
// answers and decisions must equal an undisturbed run's (none lost, none
// twice) and nothing may be left in the stream or among the open rounds.
func TestClusterChaos(t *testing.T) {
	leaderKills := 1
	if os.Getenv("QUORUM_CHAOS_LONG") != "" {
		leaderKills = 3
	}
	want, _ := undisturbed(t)

	base := newCluster(t) // llmsim, its gate and the logs folder
	logs := base.logs
	nodes := startNATSCluster(t, logs)
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.url()
	}
	sentinel := redistest.StartSentinel(t)
	c := &cluster{t: t, natsURL: strings.Join(urls, ","), redisURL: sentinel.URL(), llmURL: base.llmURL, sim: base.sim, gate: base.gate, logs: logs}

	procs := map[string]*exec.Cmd{}
	bins := map[string]string{"voter": "voter", "generator-1": "generator-worker", "generator-2": "generator-worker", "explorer": "explorer-worker"}
	restarts := map[string]int{}
	role := func(name string) {
		restarts[name]++
		procs[name] = c.start(fmt.Sprintf("%s-%d", name, restarts[name]), bins[name], "--stream-replicas", "3")
	}
	// The voter creates the R3 streams first: the cluster takes a while
	// to place three replicas, and roles asking for them all at once may
	// time out (in production they restart).
	role("voter")
	waitFor(t, 60*time.Second, "the R3 stream", func() bool {
		info, err := streamInfo(t, nodes)
		return err == nil && info.Cluster != nil && info.Cluster.Leader != ""
	})
	for _, name := range []string{"generator-1", "generator-2", "explorer"} {
		role(name)
	}
	// The process names the gate knows are the started ones (name-N).
	// Each generator's first LLM request is held until it is killed: its
	// task stays in flight through a fault.
	held := c.inFlight("generator-1-1")
	heldRedis := c.inFlight("generator-2-1")
	out := filepath.Join(t.TempDir(), "out")
	coord := c.start("coordinator", "coordinator", "--run-id", "cluster-chaos", "--dataset", demoDir(t), "--votes", "8", "--seed", "3", "--out", out, "--stream-replicas", "3")
	finished := make(chan error, 1)
	go func() { finished <- coord.Wait() }()

	// Tasks are in flight (both generators' LLM requests held): kill the
	// stream's leader under them.
	for name, ch := range map[string]<-chan struct{}{"generator-1": held, "generator-2": heldRedis} {
		select {
		case <-ch:
		case err := <-finished:
			t.Fatalf("the coordinator ended (%v) before %s had a task in flight (logs in %s)", err, name, logs)
		case <-time.After(2 * time.Minute):
			t.Fatalf("no task in flight on %s within 2 minutes (logs in %s)", name, logs)
		}
	}
	info, err := streamInfo(t, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != 3 {
		t.Fatalf("the stream has %d replicas, want 3 (--stream-replicas 3)", info.Config.Replicas)
	}
	var killed []string
	leader := streamLeader(t, nodes, "")
	for i := range leaderKills {
		leader.kill()
		killed = append(killed, leader.name)
		next := streamLeader(t, nodes, leader.name)
		t.Logf("stream leader %s SIGKILLed; %s leads now", leader.name, next.name)
		if i+1 < leaderKills {
			// The killed server rejoins before the next leader goes,
			// so two of three stay up.
			leader.start()
			waitJetStream(t, nodes)
			waitFor(t, 60*time.Second, leader.name+" back among the stream's current replicas", func() bool {
				info, err := streamInfo(t, nodes)
				if err != nil || info.Cluster == nil {
					return false
				}
				for _, r := range info.Cluster.Replicas {
					if r.Name == leader.name && r.Current {
						return true
					}
				}
				return false
			})
		}
		leader = next
	}
	// The held task's worker dies; its task is redelivered.
	_ = procs["generator-1"].Process.Signal(syscall.SIGKILL)
	_ = procs["generator-1"].Wait()
	role("generator-1")

	// Generator-2's task still in flight: the Redis primary dies and the
	// sentinels promote the replica.
	select {
	case err := <-finished:
		t.Fatalf("the coordinator ended (%v) before the Redis failover (logs in %s)", err, logs)
	default:
	}
	ctx := context.Background()
	old, err := sentinel.Primary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sentinel.Node(old).Kill()
	primary := sentinel.WaitFailover(t, old, 90*time.Second)
	t.Logf("Redis primary %s SIGKILLed; the sentinels promoted %s", old, primary)
	_ = procs["generator-2"].Process.Signal(syscall.SIGKILL)
	_ = procs["generator-2"].Wait()
	role("generator-2")

	select {
	case err := <-finished:
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(logs, "coordinator.log"))
			t.Fatalf("coordinator: %v\n%s\n(logs in %s)", err, tail(string(b), 3000), logs)
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("the disturbed run did not finish (logs in %s)", logs)
	}
	got := readOutputs(t, out)
	compare(t, "cluster chaos", got, want)

	opt, err := redisconn.Parse(sentinel.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := opt.Client()
	defer rc.Close()
	if left, err := rc.ZRange(ctx, rdb.RoundsKey, 0, -1).Result(); err != nil || len(left) != 0 {
		t.Errorf("rounds left open: %v (%v)", left, err)
	}
	info, err = streamInfo(t, nodes)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Errorf("%d messages left in the stream", info.State.Msgs)
	}
	survivors := ""
	for _, name := range []string{"generator-1-2", "generator-2-1", "generator-2-2", "explorer-1"} {
		b, _ := os.ReadFile(filepath.Join(logs, name+".log"))
		survivors += string(b)
	}
	if !strings.Contains(survivors, "redelivered message") {
		t.Error("no task of the killed workers was redelivered: the kills interrupted nothing")
	}
	t.Logf("cluster chaos: stream leaders %v SIGKILLed, Redis primary %s failed over to %s, the held tasks' workers SIGKILLed; %d examples equal to the undisturbed run's",
		killed, old, primary, len(got.examples))
}
