package check

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// The password start.sh is given; the shape openssl rand -hex 32 makes.
const redisPassword = "9c1f4e2a7b3d8c6e0f5a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6"

// scriptRedis is a redis-server started by deploy/redis/start.sh, as
// docker-compose.yml and base/redis.yaml start it.
type scriptRedis struct {
	addr    string
	cmd     *exec.Cmd
	out     *bytes.Buffer
	exited  chan error
	stopped bool
}

// startScript runs deploy/redis/start.sh with password and redis-server
// arguments; it returns once the script has exited or redis-server is
// listening.
func startScript(t *testing.T, password string, args ...string) (*scriptRedis, error) {
	t.Helper()
	port := freePort(t)
	args = append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir()}, args...)
	return runScript(t, "../redis/start.sh", port, []string{"QUORUM_REDIS_PASSWORD=" + password}, args...)
}

// freePort is a loopback TCP port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runScript runs one of deploy/redis's scripts with env added to this
// process's environment and args for redis-server; it returns once the
// script has exited or the server listens on port. The test's cleanup
// stops it.
func runScript(t *testing.T, script string, port int, env []string, args ...string) (*scriptRedis, error) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed: apt-get install -y redis-server (make deps does it)")
	}
	cmd := exec.Command("sh", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s := &scriptRedis{addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, out: out, exited: exited}
	t.Cleanup(func() { s.stop(syscall.SIGTERM) })
	failed := false
	wait.For(t, time.Minute, script+"'s redis-server to listen on "+s.addr+" (or exit)", func() bool {
		select {
		case err := <-exited:
			exited <- err // for stop
			failed = true
			return true
		default:
		}
		c, err := net.Dial("tcp", s.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if failed {
		return nil, errors.New(strings.TrimSpace(out.String()))
	}
	return s, nil
}

// stop signals the server and waits for it to exit (SIGKILL after 5 s);
// a second stop does nothing.
func (s *scriptRedis) stop(sig syscall.Signal) {
	if s.stopped {
		return
	}
	s.stopped = true
	_ = s.cmd.Process.Signal(sig)
	select {
	case err := <-s.exited:
		s.exited <- err
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		s.exited <- <-s.exited
	}
}

func (s *scriptRedis) client(t *testing.T, user, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr, Username: user, Password: password, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRedisACLAllowsTheRoles: logged in as quorum with the committed ACL,
// quorum's own stores do all they do: the run state (pipelines,
// transactions, Lua scripts), the limiter (scripts reading the server's
// clock, semaphores, budgets), blobs and caches.
func TestRedisACLAllowsTheRoles(t *testing.T) {
	s, err := startScript(t, redisPassword)
	if err != nil {
		t.Fatal(err)
	}
	rdb := s.client(t, "quorum", redisPassword)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	st := runstate.New(rdb)
	const run, ex, ag = "acl", "ex1", "toy"
	_, created, err := st.CreateManifest(ctx, &runstate.Manifest{Run: run, Dataset: "d", Votes: 2, Examples: []string{ex}, Created: time.Now()})
	must("CreateManifest", err)
	if !created {
		t.Fatal("manifest not created")
	}
	_, err = st.Manifest(ctx, run)
	must("Manifest", err)
	must("SetMeta", st.SetMeta(ctx, run, ex, runstate.ExampleMeta{Warehouse: "sqlite", Published: time.Now()}))
	_, err = st.Meta(ctx, run, ex)
	must("Meta", err)
	task := &message.Task{Run: run, Example: ex, Agent: ag, Warehouse: "sqlite", Task: agent.Task{Kind: "generate", ID: "t1", Round: 0}}
	must("Open", st.Open(ctx, run, ex, ag, 0, 2, []*message.Task{task}))
	must("LogTasks", st.LogTasks(ctx, run, ex, ag, []*message.Task{task}))
	r := runstate.Round{Run: run, Example: ex, Agent: ag, Round: 0}
	must("OpenDeadline", st.OpenDeadline(ctx, r, time.Now().Add(time.Minute)))
	_, err = st.Waiting(ctx, r)
	must("Waiting", err)
	_, err = st.Take(ctx, r, "t1", time.Now().Add(time.Minute))
	must("Take", err)
	must("Progress", st.Progress(ctx, r, "t1", time.Now().Add(time.Minute)))
	added, n, err := st.AddResult(ctx, &message.CandidateResult{Run: run, Example: ex, Agent: ag, Index: 0, SQL: "select 1", Status: "ok"})
	must("AddResult", err)
	if !added || n != 1 {
		t.Fatalf("AddResult: added %v, %d results", added, n)
	}
	_, err = st.Results(ctx, run, ex, ag, 0)
	must("Results", err)
	_, err = st.AddPart(ctx, run, ex, ag, "g", 0, []byte("part"))
	must("AddPart", err)
	_, err = st.Parts(ctx, run, ex, ag, "g")
	must("Parts", err)
	must("MarkDone", st.MarkDone(ctx, run, ex, ag, "t1"))
	if done, err := st.Done(ctx, run, ex, ag, "t1"); err != nil || !done {
		t.Fatalf("Done = %v, %v", done, err)
	}
	_, err = st.Expected(ctx, run, ex, ag, 0)
	must("Expected", err)
	_, err = st.Current(ctx, run, ex, ag)
	must("Current", err)
	_, err = st.Tasks(ctx, run, ex, ag)
	must("Tasks", err)
	_, err = st.DueRounds(ctx, time.Now().Add(time.Hour))
	must("DueRounds", err)
	_, err = st.OpenRounds(ctx, run)
	must("OpenRounds", err)
	must("MarkDecided", st.MarkDecided(ctx, r, runstate.OutcomeFinal))
	_, err = st.Decided(ctx, r)
	must("Decided", err)
	must("CloseRound", st.CloseRound(ctx, r))
	must("Set", st.Set(ctx, run, ex, ag, "k", "v"))
	_, _, err = st.Get(ctx, run, ex, ag, "k")
	must("Get", err)
	must("SetFinal", st.SetFinal(ctx, &message.FinalAnswer{Run: run, Example: ex, Status: "answered"}))
	_, err = st.Finals(ctx, run)
	must("Finals", err)
	v, err := st.Once(ctx, run, ex, ag, "plan", func(context.Context) (string, error) { return "planned", nil })
	must("Once", err)
	if v != "planned" {
		t.Fatalf("Once = %q", v)
	}
	must("Cancel", st.Cancel(ctx, run, "asked"))
	// Retention, listing and deletion address a run's keys through its
	// index: the ACL refuses SCAN and KEYS.
	_, err = st.Retire(ctx, run, runstate.Retention{State: time.Hour, Answers: 2 * time.Hour})
	must("Retire", err)
	must("MarkDone after Retire", st.MarkDone(ctx, run, ex, ag, "t2"))
	info, err := st.Describe(ctx, run)
	must("Describe", err)
	if info.Persistent != 0 || info.Keys < 10 {
		t.Fatalf("Describe: %+v, want every key expiring", info)
	}
	runs, err := st.Runs(ctx)
	must("Runs", err)
	if len(runs) != 1 || runs[0].Run != run {
		t.Fatalf("Runs: %+v", runs)
	}
	cache := runstate.NewCache(rdb)
	must("Cache.Set", cache.Set(ctx, "k", "v"))
	_, _, err = cache.Get(ctx, "k")
	must("Cache.Get", err)
	must("Ping", st.Ping(ctx))

	lim, err := ratelimit.New(ratelimit.Config{Client: rdb})
	must("ratelimit.New", err)
	rate := ratelimit.PerSecond(1000, 10)
	_, err = lim.Wait(ctx, "g", ratelimit.Claim{Key: "k", Rate: rate, Units: 1})
	must("Wait", err)
	must("Adjust", lim.Adjust(ctx, "k", rate, -1))
	must("Cooldown", lim.Cooldown(ctx, "g", 5*time.Millisecond))
	sem, err := lim.Semaphore("wh", 2, 300*time.Millisecond)
	must("Semaphore", err)
	p, err := sem.Acquire(ctx)
	must("Acquire", err)
	// The scenario: time for the permit to renew its lease (a script, every
	// 100ms) twice.
	//clock:ok the scenario's length; the check is that no renewal was refused
	time.Sleep(250 * time.Millisecond)
	select {
	case <-p.Lost():
		t.Fatal("the semaphore lease was lost: its renewal was refused")
	default:
	}
	if held, err := sem.Held(ctx); err != nil || held != 1 {
		t.Fatalf("Held = %d, %v", held, err)
	}
	must("Release", p.Release(ctx))
	must("Spend", (&ratelimit.ByteBudget{Limiter: lim, Limit: 1 << 20}).Spend(ctx, run, 100))

	blobs := blob.New(rdb, time.Hour)
	ref, err := blobs.PutString(ctx, "a blob")
	must("blob.Put", err)
	_, err = blobs.GetString(ctx, ref)
	must("blob.Get", err)
	links := &dbinfo.RedisLinkCache{Client: rdb}
	must("link.Put", links.Put(ctx, "k", dbinfo.LinkAnswer{Table: "t"}))
	_, _, err = links.Get(ctx, "k")
	must("link.Get", err)
	if n, err := st.Delete(ctx, run); err != nil || n != info.Keys {
		t.Fatalf("Delete: %d keys (%v), want %d", n, err, info.Keys)
	}
}

// TestRedisACLRefuses: the default user cannot log in, a wrong password
// is refused, and the quorum user can touch neither other keys nor the
// server.
func TestRedisACLRefuses(t *testing.T) {
	s, err := startScript(t, redisPassword)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ name, user, password, want string }{
		{"no login", "", "", "NOAUTH"},
		{"default user", "default", "anything", "WRONGPASS"},
		{"default user with the password", "default", redisPassword, "WRONGPASS"},
		{"wrong password", "quorum", "wrong", "WRONGPASS"},
	} {
		err := s.client(t, tc.user, tc.password).Ping(ctx).Err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: PING = %v, want %s", tc.name, err, tc.want)
		}
	}
	rdb := s.client(t, "quorum", redisPassword)
	if err := rdb.Set(ctx, "other:key", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET other:key = %v, want NOPERM", err)
	}
	for _, cmd := range [][]any{
		{"get", "other:key"}, {"del", "other:key"}, {"eval", "return redis.call('GET', 'other:key')", "0"},
		{"flushall"}, {"flushdb"}, {"swapdb", "0", "1"}, {"keys", "*"}, {"scan", "0"}, {"randomkey"},
		{"config", "set", "appendonly", "no"}, {"config", "get", "*"}, {"acl", "setuser", "x", "on"}, {"acl", "list"},
		{"shutdown", "nosave"}, {"debug", "sleep", "0"}, {"save"}, {"bgsave"}, {"replicaof", "127.0.0.1", "1"},
		{"module", "list"}, {"info"}, {"client", "list"}, {"client", "kill", "127.0.0.1:1"}, {"monitor"},
		{"function", "flush"}, {"function", "load", "#!lua name=x\nredis.register_function('f', function() return 1 end)"},
		{"script", "flush"}, {"publish", "quorum:c", "x"}, {"subscribe", "quorum:c"},
		{"sort", "quorum:list"}, {"migrate", "127.0.0.1", "1", "quorum:k", "0", "1"},
	} {
		err := rdb.Do(ctx, cmd...).Err()
		// A script's own refusal, and DEBUG's (refused before the ACL
		// unless enable-debug-command is set), say it in their own words.
		if err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "can't access") &&
			!strings.Contains(err.Error(), "DEBUG command not allowed") {
			t.Errorf("%v = %v, want NOPERM", cmd, err)
		}
	}
}

// TestRedisPasswordStaysOffTheProcess: the password is neither on
// redis-server's command line (ps shows it to every user) nor in its
// environment.
func TestRedisPasswordStaysOffTheProcess(t *testing.T) {
	s, err := startScript(t, redisPassword)
	if err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid // start.sh execs redis-server: same process
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no /proc")
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cmdline), "redis-server") {
		t.Fatalf("process %d is %q, not redis-server: start.sh must exec it", pid, cmdline)
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"command line": cmdline, "environment": environ} {
		if bytes.Contains(b, []byte(redisPassword)) {
			t.Errorf("the password is in redis-server's %s", what)
		}
	}
}

// TestRedisStartScriptRefusesBadPasswords: start.sh refuses to start
// without a password, with a short one, or with one a redis:// URL would
// have to escape.
func TestRedisStartScriptRefusesBadPasswords(t *testing.T) {
	for _, pw := range []string{"", "short-123", "has spaces in it 123456", "p@ss/word:1234567890", "quote\"1234567890123"} {
		_, err := startScript(t, pw)
		if err == nil || !strings.Contains(err.Error(), "QUORUM_REDIS_PASSWORD") {
			t.Errorf("password %q: %v, want start.sh to refuse it", pw, err)
		}
	}
}
