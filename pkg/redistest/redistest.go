// Package redistest starts real redis-server processes for tests. There are
// no in-memory fakes: limiter scripts and voter state run against the real
// server, as in production.
package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a running redis-server.
type Server struct {
	Addr string
	cmd  *exec.Cmd
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr }

// Client returns a new client for the server, closed at cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// Start launches redis-server on a free loopback port with persistence off,
// waits until it answers PING and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed: run `make test` (it installs it) or `apt-get install -y redis-server`")
	}
	s, err := start(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func start(path, dir string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--protected-mode", "yes")
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
		go drain(out)
		if err := s.waitReady(10 * time.Second); err != nil {
			lastErr = err
			s.Stop()
			continue // the port may have been taken meanwhile
		}
		return s, nil
	}
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

func drain(r interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
	}
}

func (s *Server) waitReady(d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || (s.cmd.ProcessState != nil && s.cmd.ProcessState.Exited()) {
			return fmt.Errorf("redis-server at %s: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, port, _ := strings.Cut(l.Addr().String(), ":")
	return strconv.Atoi(port)
}
