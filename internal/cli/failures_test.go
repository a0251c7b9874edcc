package cli

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// brokenEndpoint lists gpt-4o on /models and answers every chat call with
// fail.
func brokenEndpoint(t *testing.T, fail http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"gpt-4o","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", fail)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/v1"
}

func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// TestLLMFailureKindsReachRunJSON: for each way an endpoint can fail once
// the run is under way, the examples fail with the endpoint's own error
// text in run.json and the summary, and quorum run exits 1.
func TestLLMFailureKindsReachRunJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		fail http.HandlerFunc
		want []string // any of
	}{
		{"server errors", status(500, `{"error":{"message":"upstream exploded","type":"server_error"}}`), []string{"500", "upstream exploded"}},
		{"key revoked", status(401, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`), []string{"401", "Incorrect API key"}},
		{"context length", status(400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens.","code":"context_length_exceeded"}}`),
			[]string{"maximum context length"}},
		{"connection dropped", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, []string{"EOF", "connection reset", "connection refused"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := brokenEndpoint(t, tt.fail)
			out := filepath.Join(t.TempDir(), "out")
			log, err := run(t, "run", "--dataset", demo, "--limit", "2", "--votes", "2", "--llm-base-url", url, "--llm-api-key", "k",
				"--llm-attempts", "2", "--out", out, "--run-id", "broken", "--log-level", "error")
			if exitCode(err) != exitFailedExamples || err == nil || !strings.Contains(err.Error(), "2 of 2 examples failed") {
				t.Fatalf("exit %d, %v; want exit 1 naming 2 failed examples\n%s", exitCode(err), err, log)
			}
			rep, rerr := outputs.ReadReport(out)
			if rerr != nil {
				t.Fatal(rerr)
			}
			for _, e := range rep.Examples {
				if e.Status != "failed" || !containsAny(e.Error, tt.want) {
					t.Errorf("%s: status %s, error %q; want failed with one of %q", e.InstanceID, e.Status, e.Error, tt.want)
				}
			}
			if !strings.Contains(log, "failed "+rep.Examples[0].InstanceID+": ") || !containsAny(log, tt.want) {
				t.Errorf("the summary does not show the error:\n%s", log)
			}
		})
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestPreflightRefusesAnUnservedModel: an endpoint whose model list lacks
// the model asked for stops the run before any work, naming both.
func TestPreflightRefusesAnUnservedModel(t *testing.T) {
	t.Parallel()
	url := brokenEndpoint(t, status(500, "{}"))
	for _, cmd := range []string{"run", "solve"} {
		out, err := run(t, cmd, "--dataset", demo, "--llm-base-url", url, "--llm-api-key", "k", "--model", "gpt-5-nano",
			"--out", filepath.Join(t.TempDir(), "out"))
		if exitCode(err) != exitUsage || err == nil || !strings.Contains(err.Error(), `does not serve model "gpt-5-nano" (it lists: gpt-4o)`) ||
			!strings.Contains(err.Error(), strings.TrimPrefix(url, "http://")) {
			t.Errorf("quorum %s: exit %d, %v\n%s", cmd, exitCode(err), err, out)
		}
	}
}

// TestSolveChecksItsInput: solve refuses what it cannot run with exit 2,
// like run, and refuses an endpoint where nothing listens before any work.
func TestSolveChecksItsInput(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/v1"
	l.Close()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"solve", "--dataset", demo, "--votes", "0"}, "--votes 0"},
		{[]string{"solve", "--dataset", demo, "--examples-at-once", "0"}, "--examples-at-once 0"},
		{[]string{"solve", "--dataset", demo, "--llm-rpm", "-5"}, "--llm-rpm -5"},
		{[]string{"solve", "--dataset", demo, "--only-dialect", "oracle"}, "--only-dialect"},
		{[]string{"solve", "--dataset", demo, "--agent", "nope"}, "--agent"},
		{[]string{"solve"}, "--dataset is required"},
		{[]string{"solve", "--dataset", demo, "--llm-base-url", dead, "--llm-api-key", "k"}, "is unreachable"},
	} {
		out, err := run(t, append(tt.args, "--out", filepath.Join(t.TempDir(), "out"))...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != exitUsage {
			t.Errorf("quorum %s: error %v (exit %d), want %q with exit 2\n%s", strings.Join(tt.args, " "), err, exitCode(err), tt.want, out)
		}
	}
}

// TestEveryCommandHasAWorkingExample: each command's --help shows an
// example, and every flag the example uses is one the command takes.
func TestEveryCommandHasAWorkingExample(t *testing.T) {
	tier.Servers(t, "every command, run and solve among them")
	t.Parallel()
	root := NewRootCmd()
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Example == "" {
			t.Errorf("quorum %s has no example in --help", c.Name())
			continue
		}
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			fields := strings.Fields(line)
			if len(fields) < 2 || fields[0] != "quorum" || (fields[1] != c.Name() && !strings.HasPrefix(fields[1], "--")) {
				t.Errorf("quorum %s: example %q does not run this command", c.Name(), line)
				continue
			}
			// A command with subcommands (runs, limits): the example's
			// flags are its subcommand's.
			cmd, args := c, fields[2:]
			if len(args) > 0 {
				for _, sub := range c.Commands() {
					if sub.Name() == args[0] {
						cmd, args = sub, args[1:]
					}
				}
			}
			fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
			fs.AddFlagSet(cmd.Flags())
			fs.AddFlagSet(root.PersistentFlags())
			fs.Bool("version", false, "")
			fs.SetOutput(io.Discard)
			if err := fs.Parse(args); err != nil {
				t.Errorf("quorum %s: example %q: %v", c.Name(), line, err)
			}
		}
	}
	out, err := run(t, "--version")
	if err != nil || !strings.HasPrefix(out, "quorum ") {
		t.Errorf("quorum --version: %q, %v", out, err)
	}
	var ee *exitError
	if _, err := run(t, "run", "--no-such-flag"); !errors.As(err, &ee) || ee.code != exitUsage {
		t.Errorf("unknown flag: %v, want exit 2", err)
	}
}
