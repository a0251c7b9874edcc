// Package localredis starts a redis-server process on a free loopback port:
// `quorum run` uses it when no --redis-url is given, and tests use it
// through redistest. It never fakes Redis.
package localredis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled means redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server is not installed: run `apt-get install -y redis-server` (make test and make demo do it), or pass --redis-url to use a running Redis")

// Server is a running redis-server.
type Server struct {
	Addr     string
	password string
	cmd      *exec.Cmd
}

// URL is the server's redis:// URL, with its password when it has one.
func (s *Server) URL() string {
	if s.password == "" {
		return "redis://" + s.Addr
	}
	return "redis://" + url.UserPassword("", s.password).String() + "@" + s.Addr
}

// Options configure Start.
type Options struct {
	// Dir is the server's working directory (where it would persist).
	Dir string
	// AppendOnly keeps an AOF in Dir, so a restarted server resumes.
	AppendOnly bool
	// Port, when set, is used instead of a free one (to restart a server
	// where its clients expect it).
	Port int
	// Password, when set, is required of every client (requirepass). It
	// reaches the server on its standard input, never its command line,
	// which other users of the machine can read.
	Password string
}

// Start launches redis-server on a free port and waits until it answers.
func Start(opt Options) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	aof := "no"
	if opt.AppendOnly {
		aof = "yes"
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := opt.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		// "-" reads the configuration from standard input first.
		cmd := exec.Command(path, "-", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", aof, "--dir", opt.Dir, "--protected-mode", "yes")
		conf := ""
		if opt.Password != "" {
			conf = "requirepass " + strconv.Quote(opt.Password) + "\n"
		}
		cmd.Stdin = strings.NewReader(conf)
		// Its own process group: a terminal's Ctrl-C must reach quorum, which
		// stops its workers first, not the server they still write to.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), password: opt.Password, cmd: cmd}
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

func drain(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
	}
}

func (s *Server) waitReady(d time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.password})
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the server down (SIGTERM: it flushes its append-only file
// first) and waits for it, killing it if it takes more than 5 seconds.
func (s *Server) Stop() {
	if s.cmd.Process == nil {
		return
	}
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
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
