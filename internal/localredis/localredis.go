// Package localredis starts a redis-server process on a free loopback port:
// `quorum run` uses it when no --redis-url is given, and tests use it
// through redistest. It never fakes Redis.
package localredis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotInstalled means redis-server is not on PATH.
var ErrNotInstalled = errors.New("redis-server is not installed: run `apt-get install -y redis-server` (make test and make demo do it), or pass --redis-url to use a running Redis")

// ErrDirInUse means another redis-server already runs over Options.Dir:
// two servers appending to one append-only file would corrupt it.
var ErrDirInUse = errors.New("another redis-server (another quorum process) is using this folder")

// ErrNoTLS means the redis-server on PATH was built without TLS support.
var ErrNoTLS = errors.New("redis-server was built without TLS (BUILD_TLS=yes); Debian's and the official images' builds have it")

// Server is a running redis-server.
type Server struct {
	Addr string
	// user and password are the credentials Start checked the server
	// with: the default user's password, or the first ACL user's.
	user, password string
	tls            *tls.Config
	cmd            *exec.Cmd
	out            *tail
	exited         chan struct{}
	// urlFile names the server to other processes (see Running).
	urlFile string
}

// URL is the server's URL (rediss:// when it speaks TLS) with the
// credentials Start checked it with.
func (s *Server) URL() string {
	scheme := "redis://"
	if s.tls != nil {
		scheme = "rediss://"
	}
	if s.password == "" {
		return scheme + s.Addr
	}
	return scheme + url.UserPassword(s.user, s.password).String() + "@" + s.Addr
}

// ClientOptions are the options Start checked the server with: its
// address, the credentials of URL and, with TLS, the client TLS
// configuration.
func (s *Server) ClientOptions() *redis.Options {
	o := &redis.Options{Addr: s.Addr, Username: s.user, Password: s.password, ContextTimeoutEnabled: true}
	if s.tls != nil {
		o.TLSConfig = s.tls.Clone()
	}
	return o
}

// Options configure Start.
type Options struct {
	// Dir is the server's working directory (where it would persist). It
	// is made private (0700, its files 0600): the append-only file holds
	// every key the run wrote.
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
	// Users are ACL users, created on standard input like Password. With
	// Users and no Password the default user is off: only they can log in.
	Users []User
	// TLS, when set, makes the server speak TLS only: Port is its TLS
	// port and there is no plaintext one.
	TLS *TLS
}

// User is a Redis ACL user.
type User struct {
	Name, Password string
	// Rules follow the password on the user's line, e.g.
	// "~quorum:* resetchannels -@all +@read".
	Rules string
}

// TLS is the server side of TLS, and how Start itself connects.
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key (PEM).
	CertFile, KeyFile string
	// CAFile, when set, is the CA that clients' certificates must chain
	// to, and clients must present one (tls-auth-clients yes).
	CAFile string
	// Client is how Start checks that the server is up: roots that trust
	// CertFile and, with CAFile, a client certificate.
	Client *tls.Config
}

// config is the configuration fed on standard input: everything secret.
func (opt Options) config() (string, error) {
	var b strings.Builder
	if opt.Password != "" {
		b.WriteString("requirepass " + strconv.Quote(opt.Password) + "\n")
	} else if len(opt.Users) > 0 {
		b.WriteString("user default off resetpass resetkeys resetchannels -@all\n")
	}
	for _, u := range opt.Users {
		if u.Name == "" || strings.ContainsAny(u.Name, " \t\r\n\"'") || u.Password == "" {
			return "", fmt.Errorf("redis ACL user %q: a name without spaces or quotes, and a password, are required", u.Name)
		}
		fmt.Fprintf(&b, "user %s on %s %s\n", u.Name, strconv.Quote(">"+u.Password), u.Rules)
	}
	if t := opt.TLS; t != nil {
		if t.CertFile == "" || t.KeyFile == "" || t.Client == nil {
			return "", errors.New("redis TLS: CertFile, KeyFile and Client are required")
		}
		fmt.Fprintf(&b, "tls-cert-file %s\ntls-key-file %s\n", strconv.Quote(t.CertFile), strconv.Quote(t.KeyFile))
		if t.CAFile != "" {
			fmt.Fprintf(&b, "tls-ca-cert-file %s\ntls-auth-clients yes\n", strconv.Quote(t.CAFile))
		} else {
			b.WriteString("tls-auth-clients no\n")
		}
	}
	return b.String(), nil
}

// Start launches redis-server on a free port and waits until it answers.
func Start(opt Options) (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	conf, err := opt.config()
	if err != nil {
		return nil, err
	}
	if err := private(opt.Dir); err != nil {
		return nil, err
	}
	var lock *os.File
	if opt.Dir != "" {
		// A server being replaced (its quorum just died) may hold the
		// lock for a moment longer.
		if lock, err = lockDir(opt.Dir, 5*time.Second); err != nil {
			return nil, err
		}
		// The server inherits the lock (ExtraFiles) and holds it as long
		// as it lives; this process lets go of its copy.
		defer lock.Close()
	}
	aof := "no"
	if opt.AppendOnly {
		aof = "yes"
	}
	user, password := "", opt.Password
	if password == "" && len(opt.Users) > 0 {
		user, password = opt.Users[0].Name, opt.Users[0].Password
	}
	var lastErr error
	// A fixed port may still be held by the server being replaced: retry
	// for a while. A free port was only free when we looked: retry with
	// another.
	deadline := time.Now().Add(10 * time.Second)
	for attempt := 0; ; attempt++ {
		if opt.Port == 0 && attempt == 5 || opt.Port != 0 && attempt > 0 && time.Now().After(deadline) {
			return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
		}
		if opt.Port != 0 && attempt > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		port := opt.Port
		if port == 0 {
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		ports := []string{"--port", strconv.Itoa(port)}
		var clientTLS *tls.Config
		if opt.TLS != nil {
			ports = []string{"--port", "0", "--tls-port", strconv.Itoa(port)}
			clientTLS = opt.TLS.Client
		}
		// "-" reads the configuration from standard input first.
		args := append([]string{"-"}, ports...)
		args = append(args, "--bind", "127.0.0.1", "--save", "", "--appendonly", aof, "--dir", opt.Dir, "--protected-mode", "yes")
		cmd := exec.Command(path, args...)
		if sh, err := exec.LookPath("sh"); err == nil {
			// redis-server has no umask setting and creates its files
			// 0644: a shell sets umask 077 and becomes the server (same
			// process, so its process group and death signal hold).
			cmd = exec.Command(sh, append([]string{"-c", `umask 077 && exec "$0" "$@"`, path}, args...)...)
		}
		cmd.Stdin = strings.NewReader(conf)
		cmd.SysProcAttr = procAttr()
		if lock != nil {
			cmd.ExtraFiles = []*os.File{lock}
		}
		// Kept (the last lines) to say why the server stopped; Wait copies
		// all of it before it returns.
		out := &tail{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), user: user, password: password, tls: clientTLS,
			cmd: cmd, out: out, exited: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(s.exited) }()
		if err := s.waitReady(10 * time.Second); err != nil {
			lastErr = err
			s.Stop()
			if opt.TLS != nil && out.noTLS() {
				return nil, ErrNoTLS
			}
			continue // the port may have been taken meanwhile
		}
		if opt.Dir != "" {
			s.urlFile = filepath.Join(opt.Dir, urlFile)
			if err := os.WriteFile(s.urlFile, []byte(s.URL()+"\n"), 0o600); err != nil {
				s.Stop()
				return nil, fmt.Errorf("redis dir %s: %w", opt.Dir, err)
			}
		}
		return s, nil
	}
}

// private makes dir 0700 and what it already holds private, files 0600
// and folders 0700 (an earlier version left them 0644 and 0755). Without
// a shell to set the server's umask, the folder's mode alone keeps the
// files it creates from other users.
func private(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("redis dir %s: %w", dir, err)
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil // chmod would follow it out of dir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := info.Mode().Perm() &^ 0o077
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() == want {
			return nil
		}
		return os.Chmod(p, want)
	})
	if err != nil {
		return fmt.Errorf("redis dir %s: make it private: %w", dir, err)
	}
	return nil
}

// tail keeps the last lines redis-server wrote.
type tail struct {
	mu    sync.Mutex
	lines []string
	part  string
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part += string(p)
	for {
		line, rest, ok := strings.Cut(t.part, "\n")
		if !ok {
			break
		}
		t.part = rest
		if line = strings.TrimSpace(line); line != "" {
			t.lines = append(t.lines, line)
		}
		if len(t.lines) > 20 {
			t.lines = t.lines[len(t.lines)-20:]
		}
	}
	return len(p), nil
}

// String is the last lines, without the configuration lines redis-server
// quotes in a configuration error: they may hold a password.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keep []string
	for _, l := range t.lines {
		if !strings.HasPrefix(l, ">>>") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "; ")
}

// noTLS reports whether the server refused to start for lack of TLS:
// before Redis 7.2 the tls-* directives do not exist in such a build;
// from 7.2 the TLS connection type is missing.
func (t *tail) noTLS() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, l := range t.lines {
		if strings.Contains(l, "listener of tls") || strings.Contains(l, "TLS is not supported") {
			return true
		}
		if strings.HasPrefix(l, ">>> 'tls-") && i+1 < len(t.lines) && strings.Contains(t.lines[i+1], "Bad directive") {
			return true
		}
	}
	return false
}

func (s *Server) waitReady(d time.Duration) error {
	c := redis.NewClient(s.ClientOptions())
	defer c.Close()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server on %s exited: %s", s.Addr, s.out)
		default:
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
	if s.urlFile != "" {
		_ = os.Remove(s.urlFile)
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
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

// lockFile and urlFile live in a server's Dir: the lock is held by the
// running server, the URL (with its password, 0600) names it.
const (
	lockFile = "redis.lock"
	urlFile  = "redis.url"
)

// lockDir takes dir's lock, trying for up to wait, or returns ErrDirInUse.
func lockDir(dir string, wait time.Duration) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redis dir %s: %w", dir, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("redis dir %s: lock: %w", dir, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("redis dir %s: %w", dir, ErrDirInUse)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Running returns the URL of the redis-server running over dir (started by
// another process's Start), or "" when none runs there.
func Running(dir string) (string, error) {
	lock, err := lockDir(dir, 0)
	if err == nil {
		lock.Close()
		return "", nil
	}
	if !errors.Is(err, ErrDirInUse) {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, urlFile))
	if err != nil {
		return "", fmt.Errorf("redis dir %s: a server runs there but does not say where: %w", dir, err)
	}
	return strings.TrimSpace(string(b)), nil
}
