package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/chromium"
)

// TestBenchComparesAgents: quorum bench --agents runs each agent on the
// same dataset, seed and quota and writes a report whose comparison table
// has one row per agent (the ensemble's members judged against it), drawn
// in headless Chromium where it is installed.
func TestBenchComparesAgents(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	log, err := run(t, "bench", "--agents", "reforce,pexa,raise,ensemble", "--dataset", demo, "--examples", "4", "--votes", "2",
		"--rpm", "6000", "--ttft", "0s", "--tps", "0", "--out", out)
	if err != nil {
		t.Fatalf("bench --agents: %v\n%s", err, log)
	}
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if n := strings.Count(html, `<tr class="agent-row">`); n != 4 {
		t.Errorf("comparison table has %d agent rows, want 4", n)
	}
	for _, want := range []string{"<td>reforce</td>", "<td>pexa</td>", "<td>raise</td>", "<td>ensemble</td>", "its members against its answers", "simulated LLM"} {
		if !strings.Contains(html, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, want := range []string{"reforce", "pexa", "raise", "ensemble", "SIMULATED"} {
		if !strings.Contains(log, want) {
			t.Errorf("summary lacks %q:\n%s", want, log)
		}
	}
	dom := chromium.DumpDOM(t, filepath.Join(out, "report.html"))
	chromium.CheckRendered(t, dom, 4, "comparison", "scenario", "members")
}
