package outputs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/chromium"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
)

const hostile = "<script>alert(1)</script>"

var sections = []string{"scenario", "accuracy", "calibration", "confidence", "cost", "latency", "slowest", "expensive", "failed"}

// sampleReport is a 12-example run: two dialects, three databases, every
// status, one failure whose error text is hostile markup.
func sampleReport() *Report {
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	r := &Report{RunID: "20261121-abc", Dataset: "/data/spider2-lite/", Agent: "reforce",
		AgentOptions: map[string]string{"explore": "true", "rounds": "3"}, Seed: 7, Votes: 4,
		LLM: "SIMULATED LLM (quorum llmsim) — not a real model", Started: start, Finished: start.Add(95 * time.Second)}
	yes, no := true, false
	for i := range 12 {
		e := Example{InstanceID: fmt.Sprintf("local%03d", i), Agent: "reforce", Dialect: []string{"sqlite", "duckdb"}[i%2],
			Database: []string{"bank", "films", "<b>shop</b>"}[i%3], Status: "answered", Confidence: "high", Method: "vote",
			Rounds: 1, Candidates: 4, ValidCandidates: 4, LatencySeconds: float64(3 + i*2), FinishedSeconds: float64(5 + i*7)}
		e.CostByStage = cost.Ledger{}
		for j, stage := range []string{"link", "generate", "vote"} {
			c := e.CostByStage.Stage(stage)
			for range j + 1 + i%3 {
				c.Call(llm.Usage{PromptTokens: 1000 * (j + 1), CompletionTokens: 100 + 10*i}, false)
			}
			c.Query(time.Duration(j+1)*50*time.Millisecond, false)
		}
		e.Cost = e.CostByStage.Total()
		switch {
		case i%5 == 4:
			e.Confidence, e.Method = "low", "fallback"
		case i == 7:
			e.Status, e.Confidence, e.Method = "no_answer", "", ""
		}
		if i == 9 || i == 10 {
			e.Status, e.Confidence, e.Method, e.Error = "failed", "", "", "generate: warehouse said "+hostile
		}
		if e.Status != "failed" {
			c, k := i%3 != 0, i%3 != 0 || i%2 == 0
			e.Correct, e.CorrectAtK = &c, &k
		} else {
			e.Correct, e.CorrectAtK = &no, &yes
		}
		r.Examples = append(r.Examples, e)
	}
	r.Summarize()
	return r
}

// TestWriteHTMLContent checks the markup without a browser, so the content
// is checked where Chromium is absent.
func TestWriteHTMLContent(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleReport(), &Extra{Title: "extra", Rows: []Row{{"my row", "<i>v</i>"}},
		Sections: []Section{{ID: "mine", Heading: "Mine", HTML: "<p>trusted</p>"}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, id := range append(sections, "mine") {
		if !regexp.MustCompile(`<section id="` + id + `"><h2>`).MatchString(page) {
			t.Errorf("no section %q with a heading", id)
		}
	}
	for _, want := range []string{"reforce on spider2-lite — extra", "20261121-abc", "simulated-banner", "explore=true, rounds=3",
		"EX@4", "Accuracy by dialect", "Accuracy by database", "Tokens by stage", "Throughput over time",
		"generate: warehouse said &lt;script&gt;alert(1)&lt;/script&gt;", "&lt;b&gt;shop&lt;/b&gt;", "&lt;i&gt;v&lt;/i&gt;", "<p>trusted</p>"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, hostile) || strings.Contains(page, "<b>shop") {
		t.Error("untrusted text is not escaped")
	}
	if n := strings.Count(page, `<svg class="chart"`); n < 6 {
		t.Errorf("%d charts, want at least 6", n)
	}

	// A run with no failure and no gold has no failed section, and says it
	// was not scored; a real model gets no banner.
	r := sampleReport()
	r.LLM = "gpt-4o at https://api.openai.com/v1"
	for i := range r.Examples {
		r.Examples[i].Status, r.Examples[i].Error, r.Examples[i].Correct, r.Examples[i].CorrectAtK = "answered", "", nil, nil
	}
	r.Summarize()
	b.Reset()
	if err := WriteHTML(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	page = b.String()
	if strings.Contains(page, `id="failed"`) || strings.Contains(page, "simulated-banner") || !strings.Contains(page, "Not scored") {
		t.Errorf("clean unscored run with a real model: failed section, banner or scores shown")
	}
}

// TestReportRendersInChromium writes a run with Writer.Report and checks
// in headless Chromium that every section is there and every chart drew.
func TestReportRendersInChromium(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Report(sampleReport()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"run.json", "report.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
	dom := chromium.DumpDOM(t, filepath.Join(dir, "report.html"))
	chromium.CheckRendered(t, dom, 5, sections...)
	if !strings.Contains(dom, `id="simulated-banner"`) {
		t.Error("no simulated-LLM banner")
	}
	for _, id := range []string{"by-confidence", "by-method"} {
		if !strings.Contains(dom, `<table id="`+id+`">`) {
			t.Errorf("no table %s in the rendered calibration section", id)
		}
	}
	if strings.Contains(dom, "<script>alert") || !strings.Contains(dom, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile error text is not shown escaped")
	}
}

// TestChartAxes checks every chart of a report has an axis with tick
// marks and their values, and the ticks are round and cover the data.
func TestChartAxes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		hi   float64
		want []float64
	}{{0, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}}, {7, []float64{0, 2, 4, 6, 8}}, {100, []float64{0, 20, 40, 60, 80, 100}},
		{83.3, []float64{0, 20, 40, 60, 80, 100}}, {12345, []float64{0, 5000, 10000, 15000}}, {0.37, []float64{0, 0.1, 0.2, 0.3, 0.4}}} {
		if got := ticks(c.hi); !slices.Equal(got, c.want) {
			t.Errorf("ticks(%v) = %v, want %v", c.hi, got, c.want)
		}
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, sampleReport(), nil); err != nil {
		t.Fatal(err)
	}
	charts := regexp.MustCompile(`(?s)<svg class="chart".*?</svg>`).FindAllString(b.String(), -1)
	if len(charts) < 6 {
		t.Fatalf("%d charts, want at least 6", len(charts))
	}
	for _, c := range charts {
		name := regexp.MustCompile(`aria-label="([^"]*)"`).FindStringSubmatch(c)[1]
		ticks, labels := strings.Count(c, `class="tick"`), strings.Count(c, `class="tick-label"`)
		if ticks < 3 || labels != ticks && labels*2 != ticks {
			t.Errorf("chart %q: %d tick marks and %d tick values", name, ticks, labels)
		}
		if !strings.Contains(c, `class="axis`) || !strings.Contains(c, `class="axis-label"`) {
			t.Errorf("chart %q has no axis or no axis name", name)
		}
	}
	line := charts[slices.IndexFunc(charts, func(c string) bool { return strings.Contains(c, "Throughput over time") })]
	for _, want := range []string{">seconds since start</text>", ">examples finished</text>", `text-anchor="end">15</text>`} {
		if !strings.Contains(line, want) {
			t.Errorf("the throughput chart lacks %q", want)
		}
	}
}

// TestCalibrationInReport: report.html shows accuracy by confidence and by
// method, in the totals' order, says how many examples without gold it
// left out, and labels EX@k by the k the examples drew.
func TestCalibrationInReport(t *testing.T) {
	t.Parallel()
	row := func(v string, n, right int, ex string) string {
		return fmt.Sprintf(`<tr><td class="l">%s</td><td>%d</td><td>%d</td><td>%s</td></tr>`, v, n, right, ex)
	}
	for _, tc := range []struct {
		name         string
		edit         func(r *Report)
		want, absent []string
	}{{
		name: "every example scored",
		edit: func(*Report) {},
		want: []string{"over the 12 examples with gold; examples without gold are left out (0 here)",
			`<table id="by-confidence"><tr><th class="l">confidence</th><th>examples</th><th>right</th><th>EX</th></tr>` + "\n" +
				row("high", 8, 5, "0.625") + row("low", 1, 1, "1.000") + row("none", 3, 1, "0.333") + "</table>",
			`<table id="by-method"><tr><th class="l">method</th><th>examples</th><th>right</th><th>EX</th></tr>` + "\n" +
				row("vote", 8, 5, "0.625") + row("fallback", 1, 1, "1.000") + row("none", 3, 1, "0.333") + "</table>",
			"<b>EX@4 ", "k = 4 candidates drawn per example", "(any of an example&#39;s 4 candidates right)"},
	}, {
		name: "two without gold, k differing",
		edit: func(r *Report) {
			r.Examples[0].Correct, r.Examples[0].CorrectAtK = nil, nil
			r.Examples[3].Correct, r.Examples[3].CorrectAtK = nil, nil
			r.Examples[5].Candidates, r.Examples[8].Candidates = 3, 12
		},
		want: []string{"over the 10 examples with gold; examples without gold are left out (2 here)",
			row("high", 6, 5, "0.833"), "<b>EX@k ", "k = 3–12 candidates drawn per example",
			"(any candidate right; k = candidates drawn per example, 3–12)"},
		absent: []string{"EX@12", "EX@3"},
	}, {
		name: "no gold",
		edit: func(r *Report) {
			for i := range r.Examples {
				r.Examples[i].Correct, r.Examples[i].CorrectAtK = nil, nil
			}
		},
		want:   []string{"Not scored: no example has gold, so there is no accuracy by confidence or by method."},
		absent: []string{`id="by-confidence"`, `id="by-method"`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := sampleReport()
			tc.edit(r)
			r.Summarize()
			var b bytes.Buffer
			if err := WriteHTML(&b, r, nil); err != nil {
				t.Fatal(err)
			}
			section := regexp.MustCompile(`(?s)<section id="calibration">.*?</section>`).FindString(b.String())
			if section == "" {
				t.Fatal("no calibration section")
			}
			page := b.String()
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("report lacks %q; its calibration section:\n%s", w, section)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(page, a) {
					t.Errorf("report shows %q", a)
				}
			}
		})
	}
}

// TestReportSaysWhoWroteIt: the scenario names the quorum that wrote the
// report and the dataset's fingerprint, where run.json has them.
func TestReportSaysWhoWroteIt(t *testing.T) {
	r := sampleReport()
	r.QuorumVersion, r.Revision, r.DatasetFingerprint = "v1.2.3", "0123456789ab", "ae6d0923cc53e669"
	var b bytes.Buffer
	if err := WriteHTML(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quorum v1.2.3 (revision 0123456789ab)", "ae6d0923cc53e669"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	r.Revision = ""
	b.Reset()
	if err := WriteHTML(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "quorum v1.2.3<") {
		t.Error("a version without a revision is not shown alone")
	}
	r.QuorumVersion, r.DatasetFingerprint = "", ""
	b.Reset()
	if err := WriteHTML(&b, r, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "written by") || strings.Contains(b.String(), "dataset fingerprint") {
		t.Error("a report without them (an older run.json) shows their rows")
	}
}
