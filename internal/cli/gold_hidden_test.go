package cli

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestAgentsNeverSeeGold runs every agent over a copy of the demo twice,
// through quorum run (coordinator, workers and voter over NATS and Redis)
// and quorum solve (in process): once with the gold on disk, once with the
// gold folder deleted.
// The simulated LLM answers from its own copy of the gold both times, so
// only what the agents could read differs; the LLM requests and the
// answers must not. Both runs use the same folder, so paths in prompts
// cannot differ either. The control case turns ReFoRCE's gold-tables
// ablation on: its prompts must then differ, which shows the comparison
// sees gold that reaches an agent (and that the ablation still gets it).
func TestAgentsNeverSeeGold(t *testing.T) {
	t.Parallel()
	sim, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cluster := []string{"run", "--run-id", "gold", "--log-level", "error"}
	for _, tc := range []struct {
		name     string
		args     []string
		goldSeen bool
	}{
		{"run reforce", slices.Concat(cluster, []string{"--agent", "reforce", "--votes", "4"}), false},
		{"run pexa", slices.Concat(cluster, []string{"--agent", "pexa", "--agent-option", "passes=2"}), false},
		{"run raise", slices.Concat(cluster, []string{"--agent", "raise", "--agent-option", "rounds=2"}), false},
		{"run ensemble", slices.Concat(cluster, []string{"--agent", "ensemble", "--votes", "2", "--agent-option", "pexa.passes=2", "--agent-option", "raise.rounds=2"}), false},
		{"run reforce gold-tables (control)", slices.Concat(cluster, []string{"--agent", "reforce", "--votes", "4", "--agent-option", "gold-tables=true"}), true},
		// solve runs ReFoRCE by its own path and the others through
		// the runtime's seam in memory.
		{"solve reforce", []string{"solve", "--agent", "reforce", "--votes", "4"}, false},
		{"solve raise", []string{"solve", "--agent", "raise", "--agent-option", "rounds=2"}, false},
		{"solve reforce gold-schema (control)", []string{"solve", "--agent", "reforce", "--votes", "4", "--gold-schema"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "demo")
			if err := os.CopyFS(dir, os.DirFS(demo)); err != nil {
				t.Fatal(err)
			}
			gold := goldRun(t, sim, dir, filepath.Join(t.TempDir(), "gold"), tc.args)
			if gold.report.Totals.EX == nil {
				t.Fatal("the run with gold on disk was not scored: the gold was not there to hide")
			}
			if err := os.RemoveAll(filepath.Join(dir, "evaluation_suite", "gold")); err != nil {
				t.Fatal(err)
			}
			blind := goldRun(t, sim, dir, filepath.Join(t.TempDir(), "blind"), tc.args)
			if blind.report.Totals.EX != nil {
				t.Fatal("the run without gold on disk was scored: the gold was not removed")
			}
			calls, answers := diffBodies(gold.requests, blind.requests), diffAnswers(gold.answers, blind.answers)
			if tc.goldSeen {
				if calls == "" {
					t.Errorf("with the gold-tables ablation, the %d LLM requests were the same with and without gold on disk: the ablation got no gold", len(gold.requests))
				}
				return
			}
			if calls != "" {
				t.Errorf("the LLM requests differ with and without gold on disk:\n%s", calls)
			}
			if answers != "" {
				t.Errorf("the answers differ with and without gold on disk:\n%s", answers)
			}
		})
	}
}

// goldRunResult is what one run sent the LLM and answered.
type goldRunResult struct {
	requests []string
	// answers are the written .sql and .csv files by path, and each
	// example's status, method and confidence.
	answers map[string]string
	report  *outputs.Report
}

// goldRun runs quorum (args: run or solve, and their flags) over dir against a fresh llmsim over sim (the
// original demo, gold included), recording every chat request body.
func goldRun(t *testing.T, sim *dataset.Dataset, dir, out string, args []string) goldRunResult {
	t.Helper()
	s, err := llmsim.New(llmsim.Config{Dataset: sim, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		s.ServeHTTP(w, r)
	}))
	defer ts.Close()
	full := append(slices.Clone(args), "--dataset", dir, "--limit", "4", "--out", out, "--llm-base-url", ts.URL+"/v1", "--llm-api-key", "x")
	log, err := run(t, full...)
	if err != nil {
		t.Fatalf("quorum %s: %v\n%s", strings.Join(full, " "), err, log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	res := goldRunResult{answers: map[string]string{}, report: rep}
	for _, e := range rep.Examples {
		res.answers["example "+e.InstanceID] = fmt.Sprintf("status %s, method %s, confidence %s", e.Status, e.Method, e.Confidence)
	}
	err = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == ".state":
			return filepath.SkipDir
		case d.IsDir() || (filepath.Ext(path) != ".sql" && filepath.Ext(path) != ".csv"):
			return nil
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(out, path)
		res.answers[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(bodies) == 0 || rep.Totals.Answered == 0 {
		t.Fatalf("quorum %s made %d LLM requests and answered %d examples: nothing to compare\n%s", args[0], len(bodies), rep.Totals.Answered, log)
	}
	mu.Lock()
	defer mu.Unlock()
	res.requests = slices.Clone(bodies)
	return res
}

// diffBodies compares two runs' requests as multisets (tasks run
// concurrently, so their order is not fixed); "" when they are the same.
func diffBodies(a, b []string) string {
	count := map[string]int{}
	for _, x := range a {
		count[x]++
	}
	for _, x := range b {
		count[x]--
	}
	var onlyA, onlyB []string
	for x, n := range count {
		for ; n > 0; n-- {
			onlyA = append(onlyA, x)
		}
		for ; n < 0; n++ {
			onlyB = append(onlyB, x)
		}
	}
	if len(onlyA) == 0 && len(onlyB) == 0 {
		return ""
	}
	slices.Sort(onlyA)
	slices.Sort(onlyB)
	msg := fmt.Sprintf("%d requests with gold, %d without; %d only with gold, %d only without", len(a), len(b), len(onlyA), len(onlyB))
	if len(onlyA) > 0 && len(onlyB) > 0 {
		msg += "\nfirst difference: " + firstDifference(onlyA[0], onlyB[0])
	} else {
		msg += "\nfor example: " + clip(append(onlyA, onlyB...)[0], 0)
	}
	return msg
}

// diffAnswers lists the answers that differ; "" when none do.
func diffAnswers(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, fmt.Sprintf("%s: with gold %q, without %q", k, clip(v, 0), clip(w, 0)))
		}
	}
	for k, w := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s: only without gold: %q", k, clip(w, 0)))
		}
	}
	slices.Sort(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("… and %d more", len(out)-10))
	}
	return strings.Join(out, "\n")
}

// firstDifference shows where two request bodies part.
func firstDifference(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return fmt.Sprintf("at byte %d: with gold …%s…, without …%s…", i, clip(a, i), clip(b, i))
}

// clip is about 200 bytes of s from around at.
func clip(s string, at int) string {
	from, to := max(0, at-60), min(len(s), at+140)
	return s[from:to]
}
