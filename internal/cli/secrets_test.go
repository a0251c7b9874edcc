package cli

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestSecretsNeverWritten: a run configured with a password in the LLM base
// URL and an API key writes neither into its output, its log, run.json,
// report.html, nor the state it keeps (NATS store, Redis AOF).
func TestSecretsNeverWritten(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	const password, key = "pw-Zq81xVv", "sk-KEY-77QQxx"
	base := strings.Replace(ts.URL, "http://", "http://alice:"+password+"@", 1) + "/v1"
	out := filepath.Join(t.TempDir(), "out")
	// The real binary, so that the zap logs on stderr are read too.
	cmd := exec.Command(quorumBinary(t), "run", "--dataset", demo, "--limit", "2", "--llm-base-url", base, "--llm-api-key", key,
		"--out", out, "--run-id", "secrets", "--log-level", "debug")
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=", "OPENAI_BASE_URL=")
	logb, err := cmd.CombinedOutput()
	log := string(logb)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	if !strings.Contains(log, `"level":"debug"`) && !strings.Contains(log, `"level":"info"`) {
		t.Errorf("no zap log line was read: the check would miss them\n%.2000s", log)
	}
	for _, s := range []string{password, key} {
		if strings.Contains(log, s) {
			t.Errorf("the run's output shows %q", s)
		}
	}
	// out holds run.json, the answers, report.html and, in .state, the
	// embedded Redis's append-only file: everything the run stored.
	aof := false
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		aof = aof || strings.Contains(p, "appendonly")
		b, _ := os.ReadFile(p)
		for _, s := range []string{password, key} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q", p, s)
			}
		}
		return nil
	})
	if !aof {
		t.Error("no Redis append-only file under the run's folder: what Redis stored was not checked")
	}
}

// TestRunServesHTTPAddr: quorum run honours --http-addr like every role:
// /healthz, /readyz and /metrics with the run's counters while it runs,
// and the listener stops with it.
func TestRunServesHTTPAddr(t *testing.T) {
	// Before the goroutine below: a skip must come from the test's own.
	tier.Servers(t, "quorum run")
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	type result struct {
		log string
		err error
	}
	done := make(chan result, 1)
	go func() {
		log, err := run(t, "run", "--dataset", demo, "--limit", "1", "--votes", "2", "--http-addr", addr,
			"--out", filepath.Join(t.TempDir(), "out"), "--run-id", "httpaddr", "--log-level", "error")
		done <- result{log, err}
	}()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string, error) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	for {
		if code, _, err := get("/healthz"); err == nil && code == 200 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("the run ended before its listener answered: %v\n%s", r.err, r.log)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if code, body, err := get("/metrics"); err != nil || code != 200 || !strings.Contains(body, "quorum_") {
		t.Errorf("GET /metrics: %d %v\n%.300s", code, err, body)
	}
	if r := <-done; r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.log)
	}
	if _, _, err := get("/healthz"); err == nil {
		t.Error("the listener still answers after the run ended")
	}
}
