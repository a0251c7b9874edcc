package compare

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// example is one example of a run written for a test: its status, its
// answer (SQL and result) and gold's judgement ("" unscored).
type example struct {
	id, status, sql, csv, judged string
	calls                        int
}

// writeRun writes a run folder holding examples and returns it loaded.
func writeRun(t *testing.T, dataset string, examples ...example) *Run {
	t.Helper()
	dir := t.TempDir()
	rep := &outputs.Report{RunID: filepath.Base(dir), Dataset: dataset, Agent: "reforce", Seed: 1, Votes: 8}
	for _, e := range examples {
		ex := outputs.Example{InstanceID: e.id, Dialect: "sqlite", Database: "shop", Status: e.status,
			Cost: cost.Cost{LLMCalls: e.calls}, LatencySeconds: float64(e.calls)}
		if e.judged != "" {
			right := e.judged == "right"
			ex.Correct = &right
		}
		rep.Examples = append(rep.Examples, ex)
		if e.status == "answered" {
			write(t, filepath.Join(dir, e.id+".sql"), e.sql+"\n")
			write(t, filepath.Join(dir, e.id+".csv"), e.csv)
		}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "run.json"), string(b))
	r, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCompare(t *testing.T) {
	base := []example{
		{id: "a", status: "answered", sql: "SELECT name FROM t", csv: "name\nx\n", judged: "right", calls: 4},
		{id: "b", status: "answered", sql: "SELECT n FROM u", csv: "n\n1\n", judged: "wrong", calls: 6},
		{id: "c", status: "no_answer", calls: 10},
	}
	tests := []struct {
		name  string
		other []example
		// want: changed, SQL-only, right→wrong, wrong→right; the rows
		// listed, each "id: what".
		changed, sqlOnly, rightWrong, wrongRight int
		rows                                     []string
	}{
		{name: "the same run", other: base},
		{
			name: "SQL written otherwise, result kept; line endings of the result",
			other: []example{
				{id: "a", status: "answered", sql: "select   name\nfrom t;", csv: "name\r\nx\r\n", judged: "right", calls: 4},
				{id: "b", status: "answered", sql: "SELECT n FROM u WHERE 1", csv: "n\n1", judged: "wrong", calls: 6},
				base[2],
			},
			sqlOnly: 1, rows: []string{"b: SQL differs, same result"},
		},
		{
			name: "a result changed, right to wrong; another wrong to right",
			other: []example{
				{id: "a", status: "answered", sql: "SELECT name FROM t LIMIT 0", csv: "name\n", judged: "wrong", calls: 5},
				{id: "b", status: "answered", sql: "SELECT n + 1 FROM u", csv: "n\n2\n", judged: "right", calls: 6},
				base[2],
			},
			changed: 2, rightWrong: 1, wrongRight: 1,
			rows: []string{"a: result differs; right→wrong", "b: result differs; wrong→right"},
		},
		{
			name: "a status changed",
			other: []example{
				base[0], base[1],
				{id: "c", status: "answered", sql: "SELECT 1", csv: "1\n1\n", calls: 12},
			},
			changed: 1, rows: []string{"c: no_answer→answered"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Compare(writeRun(t, "demo", base...), writeRun(t, "demo", tt.other...))
			if err != nil {
				t.Fatal(err)
			}
			if d.Common != 3 || d.Changed != tt.changed || d.SQLOnly != tt.sqlOnly || d.RightWrong != tt.rightWrong || d.WrongRight != tt.wrongRight {
				t.Errorf("common %d, changed %d, SQL only %d, right→wrong %d, wrong→right %d; want 3, %d, %d, %d, %d",
					d.Common, d.Changed, d.SQLOnly, d.RightWrong, d.WrongRight, tt.changed, tt.sqlOnly, tt.rightWrong, tt.wrongRight)
			}
			var rows []string
			for _, r := range d.Differing() {
				rows = append(rows, r.ID+": "+r.what())
			}
			if strings.Join(rows, "\n") != strings.Join(tt.rows, "\n") {
				t.Errorf("rows that changed:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(tt.rows, "\n"))
			}
			var text strings.Builder
			if err := d.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			for _, r := range tt.rows {
				if id, _, _ := strings.Cut(r, ":"); !strings.Contains(text.String(), "\n"+id+" ") {
					t.Errorf("the text has no line for %s:\n%s", id, text.String())
				}
			}
		})
	}
}

// TestCompareTotals: the cost of each side is summed over the examples
// both runs hold, EX over those gold judged; examples in one run only are
// named and left out of the sums.
func TestCompareTotals(t *testing.T) {
	base := writeRun(t, "demo",
		example{id: "a", status: "answered", sql: "SELECT 1", csv: "1\n1\n", judged: "right", calls: 4},
		example{id: "b", status: "answered", sql: "SELECT 2", csv: "2\n2\n", judged: "wrong", calls: 6},
		example{id: "gone", status: "answered", sql: "SELECT 3", csv: "3\n3\n", judged: "right", calls: 100})
	other := writeRun(t, "demo",
		example{id: "a", status: "answered", sql: "SELECT 1", csv: "1\n1\n", judged: "right", calls: 2},
		example{id: "b", status: "answered", sql: "SELECT 2", csv: "2\n2\n", judged: "right", calls: 3},
		example{id: "new", status: "failed", calls: 1})
	d, err := Compare(base, other)
	if err != nil {
		t.Fatal(err)
	}
	if d.Common != 2 || strings.Join(d.OnlyBase, ",") != "gone" || strings.Join(d.OnlyOther, ",") != "new" {
		t.Errorf("common %d, only base %v, only other %v; want 2, [gone], [new]", d.Common, d.OnlyBase, d.OnlyOther)
	}
	if d.BaseTotals.LLMCalls != 10 || d.OtherTotals.LLMCalls != 5 {
		t.Errorf("calls %d → %d, want 10 → 5 (the examples in both only)", d.BaseTotals.LLMCalls, d.OtherTotals.LLMCalls)
	}
	if be, _ := d.BaseTotals.EX(); be != 0.5 {
		t.Errorf("base EX %v, want 0.5", be)
	}
	if oe, _ := d.OtherTotals.EX(); oe != 1 {
		t.Errorf("other EX %v, want 1", oe)
	}
	// The report's quantile (index p·n): of 4 and 6, both are 6.
	if d.BaseTotals.LatencyP50 != 6 || d.BaseTotals.LatencyP95 != 6 || d.OtherTotals.LatencyP50 != 3 {
		t.Errorf("latency p50 %v p95 %v (base), p50 %v (other); want 6, 6, 3", d.BaseTotals.LatencyP50, d.BaseTotals.LatencyP95, d.OtherTotals.LatencyP50)
	}
}

// TestCompareRefuses: bad input is named with what to do.
func TestCompareRefuses(t *testing.T) {
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no run.json") {
		t.Errorf("a folder without run.json: %v", err)
	}
	a := writeRun(t, "demo", example{id: "a", status: "no_answer"})
	b := writeRun(t, "other", example{id: "z", status: "no_answer"})
	if _, err := Compare(a, b); err == nil || !strings.Contains(err.Error(), "no example in common") {
		t.Errorf("runs with no example in common: %v", err)
	}
	c := writeRun(t, "demo", example{id: "a", status: "answered", sql: "SELECT 1", csv: "1\n1\n"})
	if err := os.Remove(filepath.Join(c.Dir, "a.csv")); err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(a, c); err == nil || !strings.Contains(err.Error(), "the result of a") || !strings.Contains(err.Error(), c.Dir) {
		t.Errorf("an answer without its result: %v, want the example and folder named", err)
	}
	d := writeRun(t, "elsewhere", example{id: "a", status: "no_answer"})
	diff, err := Compare(a, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff.Warnings) != 1 || !strings.Contains(diff.Warnings[0], "different datasets") {
		t.Errorf("runs naming different datasets: warnings %q, want one saying so", diff.Warnings)
	}
}

// TestFind: the run folders under a folder, its hidden folders (a run's
// .state) left out; a folder that does not exist is named.
func TestFind(t *testing.T) {
	a := writeRun(t, "demo", example{id: "a", status: "no_answer"})
	root := t.TempDir()
	for _, sub := range []string{"x", filepath.Join("y", "z"), filepath.Join("x", ".state")} {
		if err := os.CopyFS(filepath.Join(root, sub), os.DirFS(a.Dir)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Find([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, l := range got {
		rel, _ := filepath.Rel(root, l.Dir)
		dirs = append(dirs, rel)
	}
	slices.Sort(dirs)
	if want := []string{"x", filepath.Join("y", "z")}; !slices.Equal(dirs, want) {
		t.Errorf("runs found under %s: %v, want %v", root, dirs, want)
	}
	missing := filepath.Join(root, "nowhere")
	if _, err := Find([]string{missing}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("a folder that does not exist: %v, want it named", err)
	}
}

// TestCompareHTML: the page says what the terminal says — the answers
// changed and each changed example with its transition — links an example
// to a run's trace page where the run has one, and shows a hostile id as
// text.
func TestCompareHTML(t *testing.T) {
	const hostile = `x<img src=x onerror=alert(1)>`
	base := writeRun(t, "demo",
		example{id: "a", status: "answered", sql: "SELECT 1", csv: "n\n1\n", judged: "right", calls: 4},
		example{id: "b", status: "answered", sql: "SELECT 2", csv: "n\n2\n", judged: "wrong", calls: 6},
		example{id: hostile, status: "no_answer", calls: 1})
	other := writeRun(t, "demo",
		example{id: "a", status: "answered", sql: "SELECT 3", csv: "n\n3\n", judged: "wrong", calls: 5},
		example{id: "b", status: "answered", sql: "SELECT 2", csv: "n\n2\n", judged: "wrong", calls: 6},
		example{id: hostile, status: "answered", sql: "SELECT 4", csv: "n\n4\n", calls: 2})
	if err := os.MkdirAll(filepath.Join(other.Dir, outputs.ExamplesDir), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(other.Dir, outputs.ExamplesDir, outputs.PageFile("a")), "<html></html>")
	d, err := Compare(base, other)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var page strings.Builder
	if err := WriteHTML(&page, out, []*Diff{d}, false); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	rel, err := filepath.Rel(out, filepath.Join(other.Dir, outputs.ExamplesDir, outputs.PageFile("a")))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<strong>2 of 3 answers changed</strong>",
		`<tr class="worse"><td>a</td>`,
		"right→wrong",
		`<a href="` + filepath.ToSlash(rel) + `">other&#39;s trace</a>`,
		"x&lt;img src=x onerror=alert(1)&gt;",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q:\n%s", want, html)
		}
	}
	if strings.Contains(html, "<img") || strings.Contains(html, "<td>b</td>") {
		t.Errorf("the page holds a script, or example b that did not change:\n%s", html)
	}
}
