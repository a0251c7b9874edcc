package redistest

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

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// SentinelMaster is the name the sentinels of StartSentinel monitor the
// primary under.
const SentinelMaster = "quorum"

// Sentinel is a Redis primary, one replica and three sentinels on
// loopback, as a production set-up with failover has them: the sentinels
// agree (quorum 2) that the primary is down and promote the replica.
type Sentinel struct {
	Password string
	// Nodes are the primary (Nodes[0] at the start) and the replica.
	Nodes     []*Node
	Sentinels []*Node
}

// Node is one redis-server process.
type Node struct {
	Addr   string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Kill SIGKILLs the process (no shutdown, nothing flushed) and waits for
// it to exit.
func (n *Node) Kill() {
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
}

// URL is the redis+sentinel URL that reaches the primary, whichever node
// it is.
func (s *Sentinel) URL() string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr
	}
	return "redis+sentinel://:" + s.Password + "@" + strings.Join(addrs, ",") + "/" + SentinelMaster
}

// StartSentinel starts the primary, its replica and three sentinels and
// waits until the replica is in sync and every sentinel knows the
// replica and the two other sentinels (so a failover can be agreed).
// Everything is killed when the test ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	tier.Servers(t, "redis-server with sentinels")
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed")
	}
	dir := t.TempDir()
	s := &Sentinel{Password: "sentinel-test-pw"}
	primary := s.start(t, path, filepath.Join(dir, "primary"), "")
	s.Nodes = append(s.Nodes, primary)
	s.Nodes = append(s.Nodes, s.start(t, path, filepath.Join(dir, "replica"), "replicaof 127.0.0.1 "+port(primary.Addr)+"\n"))
	for i := range 3 {
		sd := filepath.Join(dir, fmt.Sprintf("sentinel%d", i))
		s.Sentinels = append(s.Sentinels, s.startSentinel(t, path, sd, primary.Addr))
	}
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: s.Nodes[1].Addr, Password: s.Password})
	defer rc.Close()
	wait.For(t, 30*time.Second, "the replica in sync with the primary", func() bool {
		info, _ := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	for _, sn := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr})
		wait.For(t, 60*time.Second, "sentinel "+sn.Addr+" to know the replica and the other sentinels", func() bool {
			m, err := sc.Master(ctx, SentinelMaster).Result()
			return err == nil && m["num-other-sentinels"] == "2" && m["num-slaves"] == "1" && !strings.Contains(m["flags"], "down")
		})
		sc.Close()
	}
	return s
}

// Primary asks the sentinels for the primary's address.
func (s *Sentinel) Primary(ctx context.Context) (string, error) {
	var last error
	for _, sn := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, MaxRetries: -1})
		hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
		sc.Close()
		if err == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		last = err
	}
	return "", fmt.Errorf("no sentinel names the primary: %v", last)
}

// Node returns the node at addr.
func (s *Sentinel) Node(addr string) *Node {
	for _, n := range s.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// WaitFailover waits until every sentinel names a primary other than old
// and that node says it is the primary.
func (s *Sentinel) WaitFailover(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	var now string
	wait.For(t, timeout, "the sentinels to promote the replica of "+old, func() bool {
		for _, sn := range s.Sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr, MaxRetries: -1})
			hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
			sc.Close()
			if err != nil || len(hp) != 2 || net.JoinHostPort(hp[0], hp[1]) == old {
				return false
			}
			now = net.JoinHostPort(hp[0], hp[1])
		}
		rc := redis.NewClient(&redis.Options{Addr: now, Password: s.Password, MaxRetries: -1})
		defer rc.Close()
		info, _ := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "role:master")
	})
	return now
}

func (s *Sentinel) start(t testing.TB, path, dir, extra string) *Node {
	t.Helper()
	conf := "requirepass " + s.Password + "\nmasterauth " + s.Password + "\n" + extra
	// The configuration (with the password) on standard input, not the
	// command line.
	return s.run(t, path, dir, []string{"-"}, conf)
}

func (s *Sentinel) startSentinel(t testing.TB, path, dir, primary string) *Node {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A sentinel rewrites its configuration file: it needs its own.
	file := filepath.Join(dir, "sentinel.conf")
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s 2\nsentinel auth-pass %[1]s %[3]s\n"+
		"sentinel down-after-milliseconds %[1]s 1000\nsentinel failover-timeout %[1]s 5000\nsentinel parallel-syncs %[1]s 1\n",
		SentinelMaster, port(primary), s.Password)
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return s.run(t, path, dir, []string{file, "--sentinel"}, "")
}

// run starts a server on a free port, retrying when the port was taken
// meanwhile, and waits until it answers PING.
func (s *Sentinel) run(t testing.TB, path, dir string, args []string, stdin string) *Node {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var last string
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		a := append(append([]string{}, args...), "--port", port(addr), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
		cmd := exec.Command(path, a...)
		cmd.Stdin = strings.NewReader(stdin)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server %v: %v", a, err)
		}
		n := &Node{Addr: addr, cmd: cmd, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(n.exited) }()
		t.Cleanup(n.Kill)
		pw := s.Password
		if strings.Contains(strings.Join(args, " "), "--sentinel") {
			pw = ""
		}
		c := redis.NewClient(&redis.Options{Addr: addr, Password: pw, MaxRetries: -1})
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-n.exited:
				deadline = time.Time{}
				continue
			default:
			}
			if c.Ping(context.Background()).Err() == nil {
				c.Close()
				return n
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
		n.Kill()
		last = out.String()
	}
	t.Fatalf("redis-server %v did not start: %s", args, last)
	return nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	if _, err := strconv.Atoi(p); err != nil {
		panic("no port in " + addr)
	}
	return p
}
