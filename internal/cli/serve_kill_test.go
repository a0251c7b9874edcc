package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// killDemo is the demo dataset, relative to this package.
const killDemo = "../../examples/demo"

// TestServeKillAnswersEveryQuestionOnce SIGKILLs a `quorum serve` process
// (and the redis-server it spawned, as an OOM kill of its container or a
// power cut would) while questions are in flight, starts it again on the
// same --state-dir, and checks that every question accepted before the kill
// is answered exactly once: each id still resolves, each ends answered with
// SQL and rows, and the question log has exactly one line per id.
func TestServeKillAnswersEveryQuestionOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds quorum and SIGKILLs a serve process mid-question (over a minute)")
	}
	bin := quorumBinary(t)
	demoDS, err := dataset.Load(killDemo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The simulated LLM lives in the test, so it outlives both serve
	// processes. It always answers the gold SQL (the test is about
	// recovery, not accuracy) and slowly enough that questions are
	// mid-run when serve dies.
	llmURL, calls := killSim(t, demoDS)

	stateDir := t.TempDir()
	logs := t.TempDir()
	port := killFreePort(t)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	args := []string{"serve", "--dataset", killDemo, "--no-auth", "--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--state-dir", stateDir, "--votes", "2", "--log-level", "warn", "--llm-base-url", llmURL, "--llm-api-key", "k"}
	hc := &http.Client{Timeout: 20 * time.Second}

	// Life 1: ask 8 questions at once.
	first := startKillServe(t, bin, args, filepath.Join(logs, "serve-1.log"))
	first.waitReady(t, hc, base)
	questions := killQuestions(t, 8)
	ids := make([]string, len(questions))
	errs := make([]error, len(questions))
	asked := time.Now()
	var wg sync.WaitGroup
	for i, q := range questions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], errs[i] = killAsk(hc, base, q)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("POST question %d (%q): %v\n%s", i, questions[i]["question"], err, first.logTail())
		}
		if slices.Contains(ids[:i], ids[i]) {
			t.Fatalf("two questions got the id %s", ids[i])
		}
	}

	// Kill once the questions are mid-run: every one past queued and the
	// LLM called about half as often as the questions need undisturbed
	// (about 28 calls), so that some rounds are done and others in flight.
	const killAfterCalls = 12
	var before map[string]*serve.Question
	if !wait.Until(2*time.Minute, func() bool {
		before = killGetAll(t, hc, base, ids)
		running, finished := killCount(before)
		if finished > 0 && running == 0 {
			t.Fatalf("every question finished before serve could be killed (%d LLM calls): the simulated LLM is too fast for this test", calls.Load())
		}
		return running > 0 && running+finished == len(ids) && calls.Load() >= int64(killAfterCalls)
	}) {
		running, finished := killCount(before)
		t.Fatalf("questions did not start within 2 minutes (%d running, %d finished, %d LLM calls)\n%s", running, finished, calls.Load(), first.logTail())
	}
	callsAtKill := calls.Load()
	killedAfter := time.Since(asked) //clock:ok logged, not asserted
	orphans := first.kill(t)
	running, finished := killCount(before)
	loggedAtKill := killLogLines(t, filepath.Join(stateDir, "questions.jsonl"))
	t.Logf("SIGKILLed serve %v after asking: %d questions running, %d finished, %d LLM calls, %d lines in the question log; also killed its children %v",
		killedAfter.Round(time.Millisecond), running, finished, callsAtKill, len(loggedAtKill), orphans)

	// Life 2: the same flags, the same --state-dir. It adopts the
	// questions once their leases lapse (10 s), but the tasks the dead
	// process had taken come back only after --ack-wait (60 s by default):
	// recovery takes over a minute.
	restarted := time.Now()
	second := startKillServe(t, bin, args, filepath.Join(logs, "serve-2.log"))
	second.waitReady(t, hc, base)
	readyAfter := time.Since(restarted) //clock:ok logged, not asserted
	var after map[string]*serve.Question
	if !wait.Until(3*time.Minute, func() bool {
		after = killGetAll(t, hc, base, ids)
		_, fin := killCount(after)
		return fin == len(ids)
	}) {
		var pending []string
		for _, id := range ids {
			if !after[id].Terminal() {
				pending = append(pending, id+" "+after[id].Status)
			}
		}
		t.Fatalf("%d of %d questions still unfinished 3 minutes after the restart: %v\n%s", len(pending), len(ids), pending, second.logTail())
	}
	recovered := time.Since(restarted) //clock:ok logged, not asserted
	t.Logf("restarted serve ready in %v; every question finished %v after the restart (%v after they were asked); %d LLM calls after the kill",
		readyAfter.Round(time.Millisecond), recovered.Round(time.Millisecond), time.Since(asked).Round(time.Millisecond), calls.Load()-callsAtKill) //clock:ok logged, not asserted

	// Every question answered, with SQL and rows.
	for i, id := range ids {
		q := after[id]
		switch {
		case q.ID != id:
			t.Errorf("GET %s returned question %q", id, q.ID)
		case q.Status != serve.Answered:
			t.Errorf("question %s (%q) ended %s: %s", id, questions[i]["question"], q.Status, q.Error)
		case q.SQL == "" || len(q.Columns) == 0 || len(q.Rows) == 0:
			t.Errorf("question %s (%q) answered without SQL or rows: sql %q, columns %v, %d rows", id, questions[i]["question"], q.SQL, q.Columns, len(q.Rows))
		case q.Question != questions[i]["question"] || q.DB != "shop":
			t.Errorf("question %s is now %q on %q, asked %q on shop", id, q.Question, q.DB, questions[i]["question"])
		}
		// An answer given before the kill is the one kept.
		if b := before[id]; b.Status == serve.Answered && (b.SQL != q.SQL || !b.Finished.Equal(q.Finished)) {
			t.Errorf("question %s was answered before the kill (%q at %v) and again after (%q at %v)", id, b.SQL, b.Finished, q.SQL, q.Finished)
		}
	}
	// The answers stay put: a second look gives the same.
	again := killGetAll(t, hc, base, ids)
	for _, id := range ids {
		a, b := after[id], again[id]
		if a.Status != b.Status || a.SQL != b.SQL || !a.Finished.Equal(b.Finished) || fmt.Sprint(a.Rows) != fmt.Sprint(b.Rows) {
			t.Errorf("question %s changed between two GETs: %s %q at %v, then %s %q at %v", id, a.Status, a.SQL, a.Finished, b.Status, b.SQL, b.Finished)
		}
	}
	// Answered exactly once: one question log line per id, none missing,
	// none twice, nothing else. A line is written just after the answer
	// is stored: wait for every id's, then stop serve so that nothing more
	// can be written, and count.
	logPath := filepath.Join(stateDir, "questions.jsonl")
	missing := 0
	if !wait.Until(time.Minute, func() bool {
		count := map[string]int{}
		for _, l := range killLogLines(t, logPath) {
			count[l.ID]++
		}
		missing = 0
		for _, id := range ids {
			if count[id] == 0 {
				missing++
			}
		}
		return missing == 0
	}) {
		t.Errorf("%d of %d answered questions are still not in the question log a minute after their answer", missing, len(ids))
	}
	second.stop()
	logged := killLogLines(t, logPath)
	count := map[string]int{}
	for _, l := range logged {
		count[l.ID]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("question %s has %d lines in the question log, want 1", id, count[id])
		}
	}
	for id, n := range count {
		if !slices.Contains(ids, id) {
			t.Errorf("the question log has %d lines for %q, which was never asked", n, id)
		}
	}
	for _, l := range logged {
		if q := after[l.ID]; q != nil && (l.Status != q.Status || l.SQL != q.SQL) {
			t.Errorf("question %s is logged %s %q but answers %s %q", l.ID, l.Status, l.SQL, q.Status, q.SQL)
		}
	}
	if t.Failed() {
		t.Logf("serve logs:\n--- first life ---\n%s\n--- second life ---\n%s", first.logTail(), second.logTail())
	}
}

// killSim serves llmsim over the demo, always with the gold answer and with
// latency that stretches a question over seconds, counting chat calls.
func killSim(t *testing.T, ds *dataset.Dataset) (string, *atomic.Int64) {
	t.Helper()
	noise := llmsim.DefaultNoise()
	noise.Gold, noise.Fix, noise.Link, noise.ExploreRight, noise.ExploreError = 1, 1, 1, 1, 0
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1, Noise: noise,
		Latency: llmsim.Latency{FirstToken: 700 * time.Millisecond, TokensPerSecond: 400, Sigma: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			calls.Add(1)
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/v1", &calls
}

// killQuestions are n distinct demo questions on shop without external
// knowledge.
func killQuestions(t *testing.T, n int) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(killDemo, "demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && len(out) < n {
		var l struct {
			DB                string  `json:"db"`
			Question          string  `json:"question"`
			ExternalKnowledge *string `json:"external_knowledge"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("demo.jsonl: %v", err)
		}
		if l.DB != "shop" || l.ExternalKnowledge != nil || seen[l.Question] {
			continue
		}
		seen[l.Question] = true
		out = append(out, map[string]any{"db": "shop", "question": l.Question})
	}
	if len(out) < n {
		t.Fatalf("demo.jsonl has %d shop questions without external knowledge, want %d", len(out), n)
	}
	return out
}

func killAsk(hc *http.Client, base string, q map[string]any) (string, error) {
	b, _ := json.Marshal(q)
	resp, err := hc.Post(base+"/v1/questions", "application/json", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var a struct{ ID, Status string }
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(body, &a) != nil || a.ID == "" {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	return a.ID, nil
}

// killGetAll GETs every question; each must resolve.
func killGetAll(t *testing.T, hc *http.Client, base string, ids []string) map[string]*serve.Question {
	t.Helper()
	out := map[string]*serve.Question{}
	for _, id := range ids {
		resp, err := hc.Get(base + "/v1/questions/" + id)
		if err != nil {
			t.Fatalf("GET %s: %v", id, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var q serve.Question
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d: %s", id, resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &q); err != nil {
			t.Fatalf("GET %s: %v: %s", id, err, body)
		}
		out[id] = &q
	}
	return out
}

// killCount counts questions running and finished.
func killCount(qs map[string]*serve.Question) (running, finished int) {
	for _, q := range qs {
		switch {
		case q.Terminal():
			finished++
		case q.Status == serve.Running:
			running++
		}
	}
	return running, finished
}

type killLogLine struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	SQL    string `json:"sql"`
}

// killLogLines reads the question log's whole lines (no file yet: none).
func killLogLines(t *testing.T, path string) []killLogLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	// Only whole lines: one may be being written.
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	} else {
		b = nil
	}
	var out []killLogLine
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		var l killLogLine
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.ID == "" {
			t.Fatalf("question log line %d is not a question: %q (%v)", i+1, line, err)
		}
		out = append(out, l)
	}
	return out
}

func killFreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// killServe is a quorum serve process in a process group of its own.
type killServe struct {
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

// startKillServe starts quorum serve with an environment that names no
// LLM, Redis, NATS or API keys of the machine's.
func startKillServe(t *testing.T, bin string, args []string, log string) *killServe {
	t.Helper()
	logf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "AZURE_OPENAI_") || strings.HasPrefix(k, "QUORUM_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	s := &killServe{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.exited) }()
	t.Cleanup(s.stop)
	return s
}

// waitReady polls until the API answers, failing early if serve exits.
func (s *killServe) waitReady(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	var err error
	if !wait.Until(90*time.Second, func() bool {
		select {
		case <-s.exited:
			t.Fatalf("quorum serve exited before it was ready: %v\n%s", s.cmd.ProcessState, s.logTail())
		default:
		}
		var resp *http.Response
		if resp, err = hc.Get(base + "/readyz"); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) {
		t.Fatalf("quorum serve not ready after 90 s (last: %v)\n%s", err, s.logTail())
	}
}

// kill SIGKILLs serve's process group and every process it started (the
// redis-server is in a process group of its own, so it is found by parent
// id first): nothing gets to shut down or flush. It returns the children
// killed.
func (s *killServe) kill(t *testing.T) []string {
	t.Helper()
	pid := s.cmd.Process.Pid
	kids := killDescendants(pid)
	var names []string
	for _, k := range kids {
		names = append(names, fmt.Sprintf("%s[%d]", killComm(k), k))
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("quorum serve did not die of SIGKILL within 30 s")
	}
	// The children are reparented on serve's death: wait until they are
	// gone (or zombies, which hold no port or file).
	for _, k := range kids {
		if !wait.Until(30*time.Second, func() bool { return !killAlive(k) }) {
			t.Fatalf("process %d did not die of SIGKILL within 30 s", k)
		}
	}
	return names
}

// stop ends serve gracefully (its redis-server flushes and stops), killing
// whatever is left after 60 s.
func (s *killServe) stop() {
	pid := s.cmd.Process.Pid
	select {
	case <-s.exited:
	default:
		kids := killDescendants(pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			for _, k := range kids {
				_ = syscall.Kill(k, syscall.SIGKILL)
			}
			<-s.exited
		}
	}
}

// logTail is the end of serve's output.
func (s *killServe) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 8000 {
		b = append([]byte("…"), b[len(b)-8000:]...)
	}
	return string(b)
}

// killDescendants lists the live descendants of pid from /proc.
func killDescendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, ok := killPPid(p); ok {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// killStat is /proc/PID/stat's fields after the command name.
func killStat(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

func killPPid(pid int) (int, bool) {
	f, ok := killStat(pid)
	if !ok || len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(f[1])
	return pp, err == nil
}

// killAlive reports whether pid runs (a zombie does not).
func killAlive(pid int) bool {
	f, ok := killStat(pid)
	return ok && len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func killComm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}
