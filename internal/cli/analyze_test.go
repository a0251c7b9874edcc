package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestAnalyzeSamplingAgreesWithLiveRun runs the demo with fixed and with
// adaptive sampling at one seed on llmsim's difficulty mix, then replays
// the fixed run's recorded candidates offline: for every example the
// replay stops where the live adaptive run stopped (or draws every
// candidate where it did), and where it stopped the two answered the
// same.
func TestAnalyzeSamplingAgreesWithLiveRun(t *testing.T) {
	dir := t.TempDir()
	fixed, adaptive := filepath.Join(dir, "fixed"), filepath.Join(dir, "adaptive")
	for _, r := range []struct{ out, policy string }{{fixed, "fixed"}, {adaptive, "adaptive"}} {
		if log, err := run(t, "run", "--dataset", demo, "--sim-difficulty", "default", "--sim-seed", "5", "--seed", "3",
			"--agent-option", "sampling="+r.policy, "--out", r.out, "--run-id", r.policy, "--log-level", "error"); err != nil {
			t.Fatalf("run with %s sampling: %v\n%s", r.policy, err, log)
		}
	}
	out, err := run(t, "analyze", "sampling", "--run", fixed, "--json")
	if err != nil {
		t.Fatalf("analyze sampling: %v\n%s", err, out)
	}
	var rep samplingReplay
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("analyze sampling --json: %v\n%s", err, out)
	}
	live, err := outputs.ReadReport(adaptive)
	if err != nil {
		t.Fatal(err)
	}
	f, err := outputs.ReadReport(fixed)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]outputs.Example{}
	for _, e := range live.Examples {
		byID[e.InstanceID] = e
	}
	if len(f.Examples) != len(live.Examples) {
		t.Fatalf("the fixed run has %d examples, the adaptive %d", len(f.Examples), len(live.Examples))
	}
	if rep.Replayed != len(live.Examples) || rep.Stopped == 0 {
		t.Fatalf("replayed %d examples (%d stopped early); the live run has %d", rep.Replayed, rep.Stopped, len(live.Examples))
	}
	var liveCalls int
	for _, e := range live.Examples {
		liveCalls += e.Cost.LLMCalls
	}
	for _, e := range rep.Examples {
		l, ok := byID[e.ID]
		switch {
		case !ok:
			t.Errorf("%s: replayed, not in the live run", e.ID)
		case l.StoppedAfter != e.StoppedAfter:
			t.Errorf("%s: the replay stopped after %d, the live run after %d (posterior %.3f live, %.3f replayed)", e.ID, e.StoppedAfter, l.StoppedAfter, l.Posterior, e.Posterior)
		case e.StoppedAfter > 0 && !agrees(filepath.Join(adaptive, e.ID+".csv"), readFile(t, filepath.Join(fixed, e.ID+".csv"))) != e.Changed:
			t.Errorf("%s: the replay says the answer changed=%v; the live run's answer disagrees", e.ID, e.Changed)
		}
	}
	t.Logf("replay: %d of %d stopped early, %d answers changed, %d of %d calls saved; live adaptive run: %d calls",
		rep.Stopped, rep.Replayed, rep.Changed, rep.CallsSaved, rep.Calls, liveCalls)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAnalyzeSamplingRefusesRuns checks that the replay names the run and
// what is wrong with it when it cannot replay it.
func TestAnalyzeSamplingRefusesRuns(t *testing.T) {
	for _, tc := range []struct{ name, report, want string }{
		{"other agent", `{"agent":"pexa","votes":4}`, "agent pexa; the replay reads the first round of a reforce run"},
		{"adaptive run", `{"agent":"reforce","votes":8,"agent_options":{"sampling":"adaptive"}}`, "sampled adaptive: the replay needs a run that drew every candidate (fixed)"},
		{"no candidate count", `{"agent":"reforce"}`, "names no candidate count"},
		{"no run.json", "", "run report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.report != "" {
				if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte(tc.report), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, err := run(t, "analyze", "sampling", "--run", dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("analyze sampling of a run with %s: error %v, want one saying %q\n%s", tc.report, err, tc.want, out)
			}
		})
	}
}
