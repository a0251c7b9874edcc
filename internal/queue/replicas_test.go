package queue_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// jsCluster starts three JetStream servers in one cluster in the test
// process and returns their client URLs, once the cluster has a leader.
func jsCluster(t *testing.T) string {
	t.Helper()
	ports := make([]int, 3)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	var urls []string
	for i := range ports {
		opts := &server.Options{ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
			NoLog: true, NoSigs: true, Cluster: server.ClusterOpts{Name: "quorum", Host: "127.0.0.1", Port: ports[i]},
			Routes: server.RoutesFromStr(strings.Join(routes, ","))}
		srv, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go srv.Start()
		t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
		if !srv.ReadyForConnections(10 * time.Second) {
			t.Fatalf("NATS server n%d did not start", i+1)
		}
		urls = append(urls, srv.ClientURL())
	}
	url := strings.Join(urls, ",")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster answers JetStream requests once it has elected a leader.
	var last error
	if !wait.Until(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, last = js.AccountInfo(ctx)
		return last == nil
	}) {
		t.Fatalf("the JetStream cluster has no leader after 30s: %v", last)
	}
	return url
}

// TestStreamReplicasNeverLowered: the coordinator creates the streams with
// the replicas asked for; a role that asks for none (a worker) or for fewer
// leaves them as they are; one that asks for more scales them up; a single
// server refuses replicas it cannot hold, saying what they need.
func TestStreamReplicasNeverLowered(t *testing.T) {
	tier.Servers(t, "a NATS server")
	t.Parallel()
	ctx := context.Background()
	url := jsCluster(t)
	for _, step := range []struct {
		name      string
		ask, want int
	}{
		{"a worker first creates R1", 0, 1},
		{"the coordinator asks for R3", 3, 3},
		{"a worker asks for nothing", 0, 3},
		{"an old role asks for R1", 1, 3},
	} {
		q, err := queue.Connect(ctx, url, queue.Config{Replicas: step.ask})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := q.Config().Replicas
		nc, _ := nats.Connect(url)
		js, _ := jetstream.New(nc)
		for _, name := range []string{queue.Stream, queue.AdvisoryStream} {
			st, err := js.Stream(ctx, name)
			if err != nil {
				t.Fatalf("%s: stream %s: %v", step.name, name, err)
			}
			if r := st.CachedInfo().Config.Replicas; r != step.want || got != step.want {
				t.Errorf("%s: stream %s has %d replicas (the queue says %d), want %d", step.name, name, r, got, step.want)
			}
		}
		nc.Close()
		q.Close()
	}

	single := t.TempDir()
	e, err := queue.StartEmbedded(single, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	if _, err := queue.Connect(ctx, e.URL(), queue.Config{Replicas: 3}); err == nil || !strings.Contains(err.Error(), "cluster of at least 3 servers") {
		t.Errorf("R3 on one server: %v, want an error saying a cluster of 3 is needed", err)
	}
}

// TestRaiseReplicas: a resumed run's coordinator gives recreated R1
// streams the replicas its manifest records, and asking for fewer leaves
// them as they are.
func TestRaiseReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q, err := queue.Connect(ctx, jsCluster(t), queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, step := range []struct{ ask, want int }{{3, 3}, {1, 3}} {
		got, err := q.RaiseReplicas(ctx, step.ask)
		if err != nil || got != step.want {
			t.Fatalf("RaiseReplicas(%d) = %d, %v; want %d", step.ask, got, err, step.want)
		}
	}
	if q.Config().Replicas != 1 {
		t.Errorf("the connection's config changed to %d replicas: it keeps what Connect found", q.Config().Replicas)
	}
}
