package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestDeadEndpointFailsFastThenRetryFailedAnswers, through the binary: a
// run against an LLM endpoint that always answers 500, or hangs on every
// completion, fails each example within seconds under short
// --llm-attempt-timeout / --llm-call-timeout, exits 1 and names
// --retry-failed; --llm-api-key is warned about without showing the key.
// A plain resume keeps the failures; a resume with --retry-failed against
// a working endpoint (the simulator) answers them. Everything the runs
// left in --out, --state-dir and Redis's folder is private to its owner.
func TestDeadEndpointFailsFastThenRetryFailedAnswers(t *testing.T) {
	t.Parallel()
	bin := quorumBinary(t)
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds})
	if err != nil {
		t.Fatal(err)
	}
	working := httptest.NewServer(sim)
	t.Cleanup(working.Close)
	const key = "sk-FLAG-KEY-93xQ"

	for _, tc := range []struct {
		name string
		hang bool
	}{
		{"always 500", false},
		{"hangs on completions", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stop := make(chan struct{})
			dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// Read: the server notices a client that went away only then.
				io.Copy(io.Discard, r.Body)
				switch {
				case !tc.hang:
					http.Error(w, `{"error":{"message":"boom","type":"server_error"}}`, http.StatusInternalServerError)
				case strings.HasSuffix(r.URL.Path, "/models"):
					w.Write([]byte(`{"object":"list","data":[{"id":"gpt-4o"}]}`)) // the preflight passes
				default:
					select { // until the client gives up
					case <-r.Context().Done():
					case <-stop:
					}
				}
			}))
			t.Cleanup(func() { close(stop); dead.Close() })
			dir := t.TempDir()
			out, state := filepath.Join(dir, "out"), filepath.Join(dir, "state")
			quorum := func(base string, extra ...string) (string, string, int) {
				t.Helper()
				// A hang guard, not a bound asserted: the run's end is
				// checked by its exit code and recorded reasons below.
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				args := append([]string{"run", "--dataset", demo, "--limit", "2", "--votes", "2", "--llm-base-url", base + "/v1",
					"--out", out, "--state-dir", state, "--run-id", "failfast", "--log-level", "error"}, extra...)
				cmd := exec.CommandContext(ctx, bin, args...)
				cmd.Env = append(os.Environ(), "OPENAI_API_KEY=", "OPENAI_BASE_URL=")
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				_ = cmd.Run()
				if ctx.Err() != nil {
					t.Fatalf("quorum %s did not end in 90s\n%s\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
				}
				return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
			}
			errs := map[string]string{} // each example's recorded error, from the last statuses()
			statuses := func() map[string]string {
				t.Helper()
				b, err := os.ReadFile(filepath.Join(out, "run.json"))
				if err != nil {
					t.Fatal(err)
				}
				var rep struct {
					Examples []struct {
						InstanceID string `json:"instance_id"`
						Status     string `json:"status"`
						Error      string `json:"error"`
					} `json:"examples"`
				}
				if err := json.Unmarshal(b, &rep); err != nil {
					t.Fatal(err)
				}
				m := map[string]string{}
				for _, e := range rep.Examples {
					m[e.InstanceID] = e.Status
					errs[e.InstanceID] = e.Error
				}
				return m
			}
			want := func(stage, status string) {
				t.Helper()
				got := statuses()
				if len(got) != 2 {
					t.Fatalf("%s: run.json has %d examples, want 2: %v", stage, len(got), got)
				}
				for id, s := range got {
					if s != status {
						t.Errorf("%s: %s is %s, want %s", stage, id, s, status)
					}
				}
			}

			stdout, stderr, code := quorum(dead.URL, "--llm-api-key", key, "--llm-attempts", "3",
				"--llm-attempt-timeout", "1s", "--llm-call-timeout", "2s")
			if code != exitFailedExamples || !strings.Contains(stderr, "--retry-failed") {
				t.Fatalf("against the dead endpoint: exit %d, want 1 with a message naming --retry-failed\n%s\n%s", code, stdout, stderr)
			}
			want("dead endpoint", "failed")
			// Seconds per example, not the minutes 5-minute attempts took:
			// the recorded reason is a limit the flags set, the 2s call
			// limit (a hung attempt) or the 3 attempts (server errors).
			for id, e := range errs {
				if !strings.Contains(e, "llm call") || !strings.Contains(e, "time limit ran out (2s") && !strings.Contains(e, "failed after 3 attempts") {
					t.Errorf("%s failed with %q, want the LLM call ended by --llm-call-timeout 2s or --llm-attempts 3", id, e)
				}
			}
			if !strings.Contains(stderr, "warning: --llm-api-key") || !strings.Contains(stderr, "OPENAI_API_KEY") || strings.Contains(stdout+stderr, key) {
				t.Errorf("want a warning about --llm-api-key pointing to OPENAI_API_KEY, without the key\n%s", stderr)
			}

			if stdout, stderr, code := quorum(working.URL); code != exitFailedExamples {
				t.Errorf("a plain resume: exit %d, want 1 (failures are kept)\n%s\n%s", code, stdout, stderr)
			}
			want("plain resume", "failed")

			if stdout, stderr, code := quorum(working.URL, "--retry-failed"); code != 0 {
				t.Fatalf("--retry-failed against the simulator: exit %d, want 0\n%s\n%s", code, stdout, stderr)
			}
			want("--retry-failed", "answered")
			for _, id := range []string{"local001", "local002"} {
				if _, err := os.Stat(filepath.Join(out, id+".sql")); err != nil {
					t.Errorf("retried %s has no answer: %v", id, err)
				}
			}

			// Finding 7: nothing the runs wrote is open to other users.
			redisDir := filepath.Join(state, "redis")
			aof := false
			for _, root := range []string{out, state, redisDir} {
				err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
					if err != nil {
						return err
					}
					info, err := d.Info()
					if err != nil {
						return err
					}
					aof = aof || strings.Contains(p, "appendonly")
					if perm := info.Mode().Perm(); perm&0o077 != 0 {
						t.Errorf("%s is %v: group or others can read or enter it", p, perm)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if !aof {
				t.Errorf("no Redis append-only file under %s: Redis's files were not checked", redisDir)
			}
		})
	}
}
