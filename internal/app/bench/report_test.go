package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/chromium"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestReportRendersInChromium renders bench's report.html in headless
// Chromium: the run's sections, the bench rows, the scaling section, and
// every chart drawn.
func TestReportRendersInChromium(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	run := &outputs.Report{RunID: "bench", Dataset: "/tmp/work/dataset", Agent: "reforce", Votes: 4,
		LLM: "SIMULATED LLM (llmsim) — not a real model", Started: start, Finished: start.Add(40 * time.Second)}
	for i, id := range []string{"localbench00000", "localbench00001", "localbench00002", "localbench00003"} {
		ok := i != 2
		run.Examples = append(run.Examples, outputs.Example{InstanceID: id, Dialect: []string{"sqlite", "duckdb"}[i%2],
			Database: []string{"bank", "films"}[i/2], Status: "answered", Confidence: "high", Method: "vote",
			Cost: cost.Cost{LLMCalls: 8 + i}, LatencySeconds: 3.5 + float64(i), FinishedSeconds: 10 + 8*float64(i), Correct: &ok, CorrectAtK: &ok})
	}
	run.Summarize()
	rep := &Report{Scenario: Standard(), QuotaBound: 30, Wall: 40, QuotaRatio: 0.75, BindingLimit: "llm requests/min", BindsAt: 8,
		Scaling: []ScalingPoint{{Generators: 1, Wall: 20, CallsPerMinute: 600, ExamplesPerMinute: 12}, {Generators: 2, Wall: 11, CallsPerMinute: 1100, ExamplesPerMinute: 22}}}
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, run, rep); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dom := chromium.DumpDOM(t, path)
	chromium.CheckRendered(t, dom, 5, "scenario", "accuracy", "examples", "confidence", "cost", "latency", "scaling")
	if n := strings.Count(dom, `<button class="open"`); n != len(run.Examples) {
		t.Errorf("the table of examples shows %d rows, want %d", n, len(run.Examples))
	}
	for _, want := range []string{"reforce on dataset — benchmark spider2-size", "quota ratio", "request quota binds from", "1100", "simulated-banner"} {
		if !strings.Contains(dom, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
