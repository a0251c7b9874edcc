package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestRunInterruptedResumes: quorum run interrupted mid-run says what it is
// doing, exits 3 (aborted, resumable), and the same command resumes to the answers an
// undisturbed run writes.
func TestRunInterruptedResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo three times")
	}
	interruptAndResume(t, llmsim.Difficulty{}, "--votes", "4")
}

// TestRunInterruptedResumesWaves: the same with adaptive sampling on
// llmsim's difficulty mix; the resumed run continues each example's
// waves, so every example stops where the undisturbed run stopped.
func TestRunInterruptedResumesWaves(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo three times")
	}
	clean, out := interruptAndResume(t, llmsim.DefaultDifficulty(), "--votes", "8", "--agent-option", "sampling=adaptive")
	want, err := outputs.ReadReport(clean)
	if err != nil {
		t.Fatal(err)
	}
	got, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	stopped := map[string]int{}
	early := 0
	for _, e := range want.Examples {
		stopped[e.InstanceID] = e.StoppedAfter
		if e.StoppedAfter > 0 {
			early++
		}
	}
	for _, e := range got.Examples {
		if s := stopped[e.InstanceID]; s != e.StoppedAfter {
			t.Errorf("%s: the resumed run stopped after %d candidates, the undisturbed one after %d", e.InstanceID, e.StoppedAfter, s)
		}
	}
	if early == 0 {
		t.Error("no example stopped early: the waves were not exercised")
	}
}

// interruptAndResume runs 16 demo examples undisturbed, then interrupted
// and resumed, checks the answers agree, and returns both output folders.
func interruptAndResume(t *testing.T, mix llmsim.Difficulty, extra ...string) (string, string) {
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 3, Latency: llmsim.Latency{FirstToken: 40 * time.Millisecond}, Difficulty: mix})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	defer ts.Close()
	// The tasks the interrupted run held come back to the resumed one
	// after --ack-wait: 10 s, not the default minute the resume would
	// otherwise wait out (a task heartbeats, so a slow machine does not
	// see one redelivered early).
	args := func(runID, out string) []string {
		return append([]string{"run", "--dataset", demo, "--limit", "16", "--run-id", runID, "--out", out,
			"--llm-base-url", ts.URL + "/v1", "--llm-api-key", "test", "--max-in-flight", "4", "--log-level", "error",
			"--ack-wait", "10s"}, extra...)
	}
	clean := filepath.Join(t.TempDir(), "clean")
	if log, err := run(t, args("clean", clean)...); err != nil {
		t.Fatalf("undisturbed run: %v\n%s", err, log)
	} else if !strings.Contains(log, "LLM: SIMULATED LLM (a quorum llmsim server at") {
		t.Errorf("the summary does not say a simulator answered:\n%s", log)
	}

	out := filepath.Join(t.TempDir(), "out")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := NewRootCmd()
	var buf bytes.Buffer
	cmd.SetOut(&buf)
	cmd.SetErr(&buf)
	cmd.SetArgs(args("interrupted", out))
	go func() {
		// Interrupt once some examples are final, others not (or after
		// the wait's bound: the checks below then say what went wrong).
		wait.Until(5*time.Minute, func() bool { entries, _ := os.ReadDir(out); return len(entries) >= 6 })
		cancel()
	}()
	err = cmd.ExecuteContext(ctx)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitAborted || !strings.Contains(err.Error(), "interrupted with") {
		t.Fatalf("interrupted run ended with %v, want exit status 3 and the resume hint\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "Interrupted: stopping.") {
		t.Errorf("no line saying what the interrupted run is doing:\n%s", buf.String())
	}
	if log, err := run(t, args("interrupted", out)...); err != nil || !strings.Contains(log, "Resuming run interrupted") {
		t.Fatalf("resume: %v\n%s", err, log)
	}
	want, got := pin(t, clean), pin(t, out)
	if !equalFiles(want.Files, got.Files) {
		t.Errorf("the resumed run's answers differ from the undisturbed run's")
	}
	for id, d := range want.Decisions {
		// Calls and queries are left out: an interrupted task may have
		// been half done and redone.
		if strings.Join(got.Decisions[id][:6], " ") != strings.Join(d[:6], " ") {
			t.Errorf("%s: resumed %v, undisturbed %v", id, got.Decisions[id], d)
		}
	}
	return clean, out
}

// TestRunAbortsOnBrokenLLM: an endpoint that answers /models but fails
// every chat call makes examples fail with its error text; after 5 in a
// row the run stops with exit 3, naming the error, instead of burning
// through the dataset.
func TestRunAbortsOnBrokenLLM(t *testing.T) {
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Faults: llmsim.Faults{ServerError: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	defer ts.Close()
	out := filepath.Join(t.TempDir(), "out")
	log, err := run(t, "run", "--dataset", demo, "--limit", "12", "--votes", "2", "--llm-base-url", ts.URL+"/v1", "--llm-api-key", "k",
		"--llm-attempts", "1", "--out", out, "--run-id", "broken", "--log-level", "error")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitAborted || !strings.Contains(err.Error(), "5 examples in a row failed on LLM calls") ||
		!strings.Contains(err.Error(), "status 5") {
		t.Fatalf("run against a failing endpoint: %v\n%s", err, log)
	}
	if !strings.Contains(log, "failed") {
		t.Errorf("no failed example reported on the way:\n%s", log)
	}
}
