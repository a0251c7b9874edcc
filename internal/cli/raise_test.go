package cli

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestRAISEOnThreeEndpoints: quorum run --agent raise with the agent and
// final_a on one simulated provider, final_b and the column post-process
// on a second, final_c on a third, each with its own requests-per-minute
// quota: every example is answered, each server receives only its roles'
// calls, and run.json shows the three stages, the calls per endpoint and
// the limit each provider stated.
// That no server answers 429 (each endpoint's quota kept by the
// cluster-wide limiter) depends on the machine keeping up with the pace
// the limiter admits calls at: make slow (QUORUM_SLOW) asserts it, make
// test logs it; the limiter's admission is internal/ratelimit's tests.
func TestRAISEOnThreeEndpoints(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rpm := map[string]int{"default": 600, "openai": 300, "anthropic": 240}
	sims := map[string]*llmsim.Server{}
	var yaml strings.Builder
	yaml.WriteString("endpoints:\n")
	for _, name := range []string{"default", "openai", "anthropic"} {
		sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 9, Limits: llmsim.Limits{RequestsPerMinute: rpm[name]}})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(sim)
		t.Cleanup(ts.Close)
		sims[name] = sim
		fmt.Fprintf(&yaml, "  - {name: %s, base_url: %s/v1, rpm: %d}\n", name, ts.URL, rpm[name])
	}
	yaml.WriteString(`roles:
  agent: {endpoint: default, model: r1-distill}
  final_a: {endpoint: default, model: r1-distill}
  final_b: {endpoint: openai, model: o3-mini}
  columns: {endpoint: openai, model: o3-mini}
  final_c: {endpoint: anthropic, model: claude-3-7-sonnet}
`)
	cfg := filepath.Join(t.TempDir(), "llm.yaml")
	if err := os.WriteFile(cfg, []byte(yaml.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	log, err := run(t, "run", "--dataset", demo, "--agent", "raise", "--agent-option", "rounds=2", "--limit", "6",
		"--llm-config", cfg, "--out", out, "--run-id", "raise", "--log-level", "error")
	if err != nil {
		t.Fatalf("quorum run --agent raise: %v\n%s", err, log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.Answered != 6 {
		t.Errorf("%d of 6 examples answered:\n%s", rep.Totals.Answered, log)
	}
	for _, e := range rep.Examples {
		for _, stage := range []string{"agent", "final", "columns"} {
			if c := e.CostByStage[stage]; c == nil || c.LLMCalls == 0 {
				t.Errorf("%s: no %s calls in cost_by_stage", e.InstanceID, stage)
			}
		}
		if e.Candidates != 8 {
			t.Errorf("%s: %d candidates, want 2 rounds x 4", e.InstanceID, e.Candidates)
		}
	}
	want := map[string][]llmsim.Kind{
		"default":   {llmsim.KindRAISEAgent, llmsim.KindRAISEFinal},
		"openai":    {llmsim.KindRAISEFinal, llmsim.KindRAISEColumns},
		"anthropic": {llmsim.KindRAISEFinal},
	}
	for name, sim := range sims {
		st := sim.Stats()
		t.Logf("endpoint %s: %d requests, %d answered 429", name, st.Requests, st.RateLimited)
		if st.RateLimited != 0 && os.Getenv("QUORUM_SLOW") != "" {
			t.Errorf("endpoint %s answered %d requests with 429", name, st.RateLimited)
		}
		allowed := map[llmsim.Kind]bool{llmsim.KindRAISERefine: true}
		for _, k := range want[name] {
			allowed[k] = true
			if st.ByKind[k] == 0 {
				t.Errorf("endpoint %s received no %s request: %v", name, k, st.ByKind)
			}
		}
		for k, n := range st.ByKind {
			if n > 0 && !allowed[k] {
				t.Errorf("endpoint %s received %d %s requests, which belong to another role", name, n, k)
			}
		}
	}
	// Each provider stated its limit in its headers: run.json says what
	// the limiter heard of each, beside what it was configured with.
	stated := map[string]outputs.LimitLearned{}
	for _, l := range rep.Limits {
		stated[l.Endpoint] = l
	}
	for name, n := range rpm {
		if l := stated[name]; l.StatedRPM != float64(n) || l.ConfiguredRPM != float64(n) {
			t.Errorf("run.json limits of endpoint %s: %+v, want %d req/min configured and stated (all: %+v)", name, l, n, rep.Limits)
		}
	}
	byEndpoint := map[string]int{}
	for key, m := range rep.Totals.Cost.ByModel {
		ep, _, _ := strings.Cut(key, "/")
		byEndpoint[ep] += m.Calls
	}
	if byEndpoint["default"] == 0 || byEndpoint["openai"] == 0 || byEndpoint["anthropic"] == 0 {
		t.Errorf("run.json calls by endpoint: %v", byEndpoint)
	}
}
