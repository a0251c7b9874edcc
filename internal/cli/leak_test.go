package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestMain lets this package's test binary serve as a NATS server process
// (natsProcess).
func TestMain(m *testing.M) {
	if dir := os.Getenv("QUORUM_TEST_NATS_DIR"); dir != "" {
		os.Exit(natsMain(dir))
	}
	code := m.Run()
	// The binary quorumBinary built (without QUORUM_TEST_BIN) is 120 MB a
	// run: left behind, a few hundred runs fill a disk.
	if quorumBin != "" && os.Getenv("QUORUM_TEST_BIN") == "" {
		os.RemoveAll(filepath.Dir(quorumBin))
	}
	os.Exit(code)
}

// natsMain runs an embedded NATS server with JetStream storing in dir,
// prints its URL and serves until its standard input closes.
func natsMain(dir string) int {
	srv, err := queue.StartEmbedded(dir, -1)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(srv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Shutdown()
	return 0
}

// natsProcess starts a NATS server in a process of its own (this test
// binary, through TestMain) and returns its URL; it stops with the test.
func natsProcess(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "QUORUM_TEST_NATS_DIR="+t.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("the NATS server process: %v", err)
	}
	return strings.TrimSpace(line)
}

// lives is how many times each role process starts and stops.
const lives = 20

// TestClusterRoleProcessesLeaveNoGoroutine starts and stops every role
// process 20 times, as its command assembles it (internal/runtime/cluster), and
// checks that no goroutine any of them started is left:
//
//   - the role binaries, each with its health and metrics listener,
//     joining a NATS server and a redis-server: the coordinator,
//     interrupted once it has published the first round of a run of one
//     demo example; the generator and explorer workers, over a simulated
//     LLM; the voter;
//   - quorum run, all in one process over its own embedded NATS and
//     redis-server and its simulated LLM, interrupted as its run starts;
//   - quorum serve, all in one process joining a NATS server and reading
//     the demo's database live (its schema refresher ticking), stopped
//     with a question in flight and its event stream open (the next life
//     adopts the question).
//
// Each role's lives follow one another; the roles run side by side. The
// servers and the simulated LLM the processes join are the test's own and
// outlive it: they are started before the goroutines are counted, the NATS
// servers in processes of their own (they keep the streams and consumers
// the roles made, with their goroutines, as a nats-server would). Nothing
// else is ignored.
func TestClusterRoleProcessesLeaveNoGoroutine(t *testing.T) {
	tier.Servers(t, "every role process 20 times")
	natsSrv, coordNATS, serveNATS := natsProcess(t), natsProcess(t), natsProcess(t)
	redisSrv := redistest.Start(t)
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	llmSrv := httptest.NewServer(sim)
	t.Cleanup(llmSrv.Close)
	state := runstate.New(redisSrv.Client(t))
	start, before := time.Now(), goleak.IgnoreCurrent()
	defer func() {
		goleak.VerifyNone(t, before)
		t.Logf("%d lives of each role process in %s", lives, time.Since(start).Round(100*time.Millisecond)) //clock:ok logged, not asserted
	}()

	join := []string{"--nats-url", natsSrv, "--redis-url", redisSrv.URL(), "--log-level", "error", "--ack-wait", "5s"}
	// The coordinator's tasks and serve's questions each stay on a NATS
	// server of their own: the worker binaries' lives are about starting
	// and stopping, serve's about stopping with work in flight.
	coordJoin := []string{"--nats-url", coordNATS, "--redis-url", redisSrv.URL(), "--log-level", "error"}
	serveJoin := []string{"--nats-url", serveNATS, "--redis-url", redisSrv.URL(), "--log-level", "error", "--ack-wait", "5s"}
	llmArgs := []string{"--llm-base-url", llmSrv.URL + "/v1", "--llm-api-key", "k"}
	out := t.TempDir()
	t.Run("lives", func(t *testing.T) {
		each := func(name string, life func(t *testing.T, i int)) {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				for i := range lives {
					life(t, i)
					if t.Failed() {
						return
					}
				}
			})
		}
		each("coordinator", func(t *testing.T, i int) {
			// Interrupted once its example's first round is published.
			run := fmt.Sprintf("leak-%d", i)
			published := func() {
				if !wait.Until(30*time.Second, func() bool {
					tasks, err := state.Tasks(context.Background(), run, ds.Examples[0].ID, "reforce")
					return err == nil && len(tasks) > 0
				}) {
					t.Errorf("coordinator life %d published no task within 30s", i)
				}
			}
			roleLifeFor(t, published, interrupted, append([]string{"coordinator", "--run-id", run, "--dataset", demo,
				"--limit", "1", "--votes", "2", "--out", filepath.Join(out, "coordinator", fmt.Sprint(i))}, coordJoin...)...)
		})
		each("generator", func(t *testing.T, i int) {
			roleLife(t, clean, append(append([]string{"generator-worker", "--concurrency", "2"}, join...), llmArgs...)...)
		})
		each("explorer", func(t *testing.T, i int) {
			roleLife(t, clean, append(append([]string{"explorer-worker", "--concurrency", "2"}, join...), llmArgs...)...)
		})
		each("voter", func(t *testing.T, i int) {
			roleLife(t, clean, append([]string{"voter"}, join...)...)
		})
		each("run", func(t *testing.T, i int) {
			// Interrupted as its run starts (or, when it is quick, done).
			dir := t.TempDir()
			roleLifeFor(t, func() {}, func(err error) bool { return err == nil || interrupted(err) || exitCode(err) == exitFailedExamples },
				"run", "--dataset", demo, "--limit", "1", "--votes", "1", "--run-id", "leak", "--out", filepath.Join(dir, "out"),
				"--state-dir", filepath.Join(dir, "state"), "--log-level", "error")
		})
		stateDir := t.TempDir()
		each("serve", func(t *testing.T, i int) {
			serveLife(t, append([]string{"--sqlite-dir", filepath.Join(demo, "resource", "databases", "spider2-localdb"), "--no-auth",
				"--listen", "127.0.0.1:0", "--state-dir", stateDir, "--votes", "1", "--schema-refresh", "20ms"}, append(serveJoin, llmArgs...)...),
				ds.Examples[i%len(ds.Examples)].Question)
		})
	})
}

// noKeepAlive is a client whose connections end with their request: none
// outlives the process it talked to.
var noKeepAlive = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// clean is how a role binary's process ends when interrupted.
func clean(err error) bool { return err == nil }

// interrupted is how a run ends when interrupted: exit 3, resumable.
func interrupted(err error) bool { return exitCode(err) == exitAborted }

// roleLife runs a command until its /readyz answers (--http-addr), lets
// it work a moment, interrupts it and checks how it ended (or how it
// ended by itself first).
func roleLife(t *testing.T, ok func(error) bool, args ...string) {
	//clock:ok the scenario: the role works a moment before its interrupt; the check is what it leaves
	roleLifeFor(t, func() { time.Sleep(100 * time.Millisecond) }, ok, args...)
}

// roleLifeFor is roleLife with what the test waits for once the command
// is ready, before interrupting it.
func roleLifeFor(t *testing.T, work func(), ok func(error) bool, args ...string) {
	t.Helper()
	for range 5 {
		if life(t, work, ok, args...) {
			return
		}
		// Another process took the free port before the command listened.
	}
	t.Fatalf("%s: no free port for --http-addr in 5 tries", args[0])
}

// life is one of roleLifeFor's, false when its --http-addr was taken.
func life(t *testing.T, work func(), ok func(error) bool, args ...string) bool {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", killFreePort(t))
	cmd := NewRootCmd()
	var buf syncBuffer
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	cmd.SetArgs(append(args, "--http-addr", addr))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- cmd.ExecuteContext(ctx) }()
	check := func(err error) bool {
		if err != nil && strings.Contains(err.Error(), "--http-addr "+addr) && strings.Contains(err.Error(), "address already in use") {
			return false
		}
		if !ok(err) {
			t.Fatalf("%s ended with %v\n%s", args[0], err, buf.String())
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := noKeepAlive.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-ended:
			return check(err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			<-ended
			t.Fatalf("%s not ready within 30s\n%s", args[0], buf.String())
		}
	}
	work()
	cancel()
	return check(<-ended)
}

// syncBuffer is a bytes.Buffer a command writes to while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// serveLife starts quorum serve, asks a question, opens its event stream,
// and stops serve with both in flight.
func serveLife(t *testing.T, args []string, question string) {
	t.Helper()
	f, err := parseServeFlags(true, args...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := f.start(ctx, io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	body, _ := json.Marshal(map[string]any{"db": "shop", "question": question})
	resp, err := noKeepAlive.Post(s.url+"/v1/questions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var q struct{ ID string }
	err = json.NewDecoder(resp.Body).Decode(&q)
	resp.Body.Close()
	if err != nil || q.ID == "" {
		t.Fatalf("POST /v1/questions: %d, %v", resp.StatusCode, err)
	}
	resp, err = noKeepAlive.Get(s.url + "/v1/questions/" + q.ID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	// serve stops once the stream has sent its first event: it is
	// following the question.
	streamed, first := make(chan error, 1), make(chan struct{})
	go func() {
		defer resp.Body.Close()
		b := make([]byte, 1)
		_, err := io.ReadFull(resp.Body, b)
		close(first)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
		}
		streamed <- err
	}()
	select {
	case <-first:
	case <-time.After(2 * time.Minute): // a hang guard: the stream waits on its first byte
		t.Fatal("the event stream sent nothing within 2 minutes")
	}
	s.close()
	select {
	case err := <-streamed:
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "closed") {
			t.Fatalf("the event stream: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream still open 10s after serve stopped")
	}
}
