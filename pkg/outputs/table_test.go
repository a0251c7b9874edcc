package outputs

import (
	"bytes"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/chromium"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/llm"
)

// bigReport is a synthetic run of n examples written into dir as quorum
// run writes one: answers (<id>.sql, <id>.csv), trace pages for the
// examples the report names, run.json and report.html. Example i has a
// distinct latency; every 7th is wrong, every 13th failed, every 11th
// low-confidence; example 5's question and a cell are hostile markup.
func bigReport(t testing.TB, dir string, n int) *Report {
	t.Helper()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC)
	r := &Report{RunID: "big", Dataset: "/data/spider2-lite", Agent: "pexa", Votes: 8, LLM: "gpt-4o at https://api.example.com/v1",
		Started: start, Finished: start.Add(time.Hour)}
	for i := range n {
		id := fmt.Sprintf("ex%04d", i)
		e := Example{InstanceID: id, Question: fmt.Sprintf("How many orders did customer %d place in 2024?", i),
			Dialect: []string{"sqlite", "snowflake", "bigquery"}[i%3], Database: fmt.Sprintf("db%02d", i%17),
			Status: "answered", Confidence: "high", Method: "vote", Rounds: 1, Candidates: 8,
			LatencySeconds: 1 + float64((i*37)%n) + float64(i)/1e4, FinishedSeconds: float64(i) * 6}
		if i == 5 {
			e.Question = hostile
		}
		for range 3 + i%4 {
			e.Cost.Call(llm.Usage{PromptTokens: 900 + i, CompletionTokens: 80, Money: 0.0021}, false)
		}
		right := i%7 != 0
		atK := right || i%2 == 0
		switch {
		case i%13 == 0:
			e.Status, e.Confidence, e.Method, e.Error = "failed", "", "", fmt.Sprintf("generate: the endpoint said 500 (%s)", id)
		case i%11 == 0:
			e.Confidence, e.Method = "low", "fallback"
		}
		e.Correct, e.CorrectAtK = &right, &atK
		if e.Status == "failed" {
			no := false
			e.Correct = &no
		}
		if e.Status == "answered" && !right {
			e.Gold = &GoldDiff{SQL: "SELECT COUNT(*) AS orders FROM orders -- " + hostile, RowDiff: &eval.RowDiff{GoldRows: 4, AnswerRows: 3 + i%6,
				Columns: []string{"orders", "customer"}, Found: []string{"orders", ""}, Missing: [][]string{{hostile}}, MissingCount: 1}}
		}
		if e.Status == "answered" {
			sql := fmt.Sprintf("SELECT COUNT(*) AS orders FROM orders WHERE customer_id = %d AND year = 2024 -- %s", i, id)
			csv := "orders,customer\n"
			for j := range 3 + i%6 {
				cell := fmt.Sprint(j)
				if i == 5 && j == 0 {
					cell = hostile
				}
				csv += fmt.Sprintf("%d,%s\n", i*10+j, cell)
			}
			if err := w.Answer(id, sql, csv); err != nil {
				t.Fatal(err)
			}
		}
		r.Examples = append(r.Examples, e)
	}
	r.Summarize()
	for _, id := range Linked(r) {
		if err := w.Page(id, []byte("<!doctype html><title>"+id+"</title><p>trace of "+id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Report(r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestExampleTable checks the table's data: every example once, in the
// report's order, with its figures, SQL, result preview, gold comparison
// and trace page as the run's folder holds them.
func TestExampleTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := bigReport(t, dir, 60)
	pages := map[string]bool{}
	for _, id := range Linked(r) {
		pages[id] = true
	}
	d := exampleTable(r, dir, pages)
	if !d.Priced {
		t.Error("a run whose calls cost money: the table shows no money")
	}
	if len(d.Rows) != len(r.Examples) {
		t.Fatalf("%d rows for %d examples", len(d.Rows), len(r.Examples))
	}
	for i, row := range d.Rows {
		e := r.Examples[i]
		if row.ID != e.InstanceID || row.Question != e.Question || row.Database != e.Database || row.Dialect != e.Dialect ||
			row.Status != e.Status || row.Confidence != e.Confidence || row.Method != e.Method || row.Latency != e.LatencySeconds ||
			row.Calls != e.Cost.LLMCalls || row.Tokens != e.Cost.Tokens() || row.Money != e.Cost.Money() || row.Error != e.Error {
			t.Errorf("row %d = %+v, not example %+v", i, row, e)
		}
		if row.Correct == nil || *row.Correct != *e.Correct {
			t.Errorf("%s: correct %v, want %v", e.InstanceID, row.Correct, *e.Correct)
		}
		wantPage := ""
		if pages[e.InstanceID] {
			wantPage = "examples/" + e.InstanceID + ".html"
		}
		if row.Page != wantPage {
			t.Errorf("%s: page %q, want %q", e.InstanceID, row.Page, wantPage)
		}
		if e.Status != "answered" {
			if row.SQL != "" || row.Columns != nil {
				t.Errorf("%s (%s): SQL %q and columns %v, want none", e.InstanceID, e.Status, row.SQL, row.Columns)
			}
			continue
		}
		if !strings.HasSuffix(row.SQL, "-- "+e.InstanceID) {
			t.Errorf("%s: SQL %q is not its answer's", e.InstanceID, row.SQL)
		}
		written := 3 + i%6
		if !slices.Equal(row.Columns, []string{"orders", "customer"}) || len(row.Rows) != min(written, previewRows) ||
			row.More != (written > previewRows) || row.Rows[0][0] != fmt.Sprint(i*10) {
			t.Errorf("%s: preview %v %v more=%v, want the first %d of %d rows of its CSV", e.InstanceID, row.Columns, row.Rows, row.More, previewRows, written)
		}
		switch {
		case *e.Correct && !strings.HasPrefix(row.Gold, "Right:"):
			t.Errorf("%s right: gold says %q", e.InstanceID, row.Gold)
		case !*e.Correct && *e.CorrectAtK && !(strings.HasPrefix(row.Gold, "Wrong:") && strings.Contains(row.Gold, "One of the 8 candidates did match")):
			t.Errorf("%s wrong, right at k: gold says %q", e.InstanceID, row.Gold)
		case !*e.Correct && !*e.CorrectAtK && !strings.Contains(row.Gold, "None of the 8 candidates"):
			t.Errorf("%s wrong at k: gold says %q", e.InstanceID, row.Gold)
		}
	}

	// Without the run's folder (a benchmark's report) the rows stand,
	// without SQL; without gold the comparison is empty.
	r.Examples[1].Correct, r.Examples[1].CorrectAtK = nil, nil
	d = exampleTable(r, "", nil)
	if len(d.Rows) != len(r.Examples) || d.Rows[1].SQL != "" || d.Rows[1].Gold != "" || d.Rows[1].Page != "" {
		t.Errorf("no folder, no gold for example 1: %+v", d.Rows[1])
	}

	// The page holds the table's JSON with markup escaped, and a policy
	// naming the hashes of exactly the style and script it holds.
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if strings.Contains(page, hostile) || !strings.Contains(page, `\u003cscript\u003ealert(1)\u003c/script\u003e`) {
		t.Error("the hostile question is not escaped in the table's JSON")
	}
	for _, want := range []string{"<script>" + reportJS + "</script>", "<style>" + reportCSS + "</style>",
		`content="` + html.EscapeString(reportCSP) + `"`} {
		if !strings.Contains(html.UnescapeString(page), html.UnescapeString(want)) {
			t.Errorf("the page lacks %.120q", want)
		}
	}
	if n := strings.Count(page, "<script"); n != 2 {
		t.Errorf("%d script elements, want 2 (the data and the hashed script)", n)
	}
}

// TestReportTableInBrowser loads a 547-example report in headless
// Chromium, measures its time to interactive, filters to the wrong
// answers, sorts them by latency, opens one and reads its SQL, and checks
// there is no error, policy violation or sideways scrolling on a desktop
// and a phone.
func TestReportTableInBrowser(t *testing.T) {
	t.Parallel()
	const n = 547
	dir := t.TempDir()
	r := bigReport(t, dir, n)
	st, err := os.Stat(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	b := chromium.Start(t)
	b.Viewport(1200, 900)
	began := time.Now()
	b.OpenFile(filepath.Join(dir, "report.html"), `document.body.dataset.ready === "yes"`, 60*time.Second)
	wall := time.Since(began) //clock:ok logged, not asserted
	var tti float64
	b.Eval(`performance.getEntriesByName("quorum-table-ready")[0].startTime`, &tti)
	t.Logf("%d examples, a %d KB page: time to interactive %.0f ms from navigation (the table built, laid out, its handlers attached); %s until the test saw the page ready",
		n, st.Size()>>10, tti, wall.Round(time.Millisecond))
	if tti <= 0 {
		t.Errorf("time to interactive %.0f ms: the page did not mark its table ready", tti)
	}
	// How soon depends on the machine's load: make slow (QUORUM_SLOW)
	// holds it to 10 s.
	if os.Getenv("QUORUM_SLOW") != "" && tti > 10000 {
		t.Errorf("time to interactive %.0f ms, want under 10 s", tti)
	}
	rowsShown := func() []string {
		var ids []string
		b.Eval(`Array.from(document.querySelectorAll("#ex-body > tr:not(.detail) button.open"), e => e.textContent)`, &ids)
		return ids
	}
	if got := rowsShown(); len(got) != n || got[0] != "ex0000" || got[n-1] != fmt.Sprintf("ex%04d", n-1) {
		t.Fatalf("%d rows shown (first %v), want all %d in id order", len(got), got[:min(3, len(got))], n)
	}

	// Wrong: answered (or no answer) but not the gold result.
	var wrong []Example
	for _, e := range r.Examples {
		if !*e.Correct && e.Status != "failed" {
			wrong = append(wrong, e)
		}
	}
	var filterMS float64
	b.Eval(`(() => { const t = performance.now(), s = document.getElementById("ex-show"); s.value = "wrong";
		s.dispatchEvent(new Event("change")); return performance.now() - t; })()`, &filterMS)
	var want []string
	for _, e := range wrong {
		want = append(want, e.InstanceID)
	}
	if got := rowsShown(); !slices.Equal(got, want) {
		t.Fatalf("filtered to wrong: %d rows %v…, want %d %v…", len(got), got[:min(3, len(got))], len(want), want[:3])
	}
	var count string
	b.Eval(`document.getElementById("ex-count").textContent`, &count)
	if wantCount := fmt.Sprintf("%d of %d examples.", len(want), n); count != wantCount {
		t.Errorf("count says %q, want %q", count, wantCount)
	}

	// Latency: the slowest first at the first click, reversed at the second.
	began = time.Now()
	b.Click(`#ex-table button[data-key="latency"]`)
	sort.SliceStable(wrong, func(i, j int) bool { return wrong[i].LatencySeconds > wrong[j].LatencySeconds })
	want = want[:0]
	for _, e := range wrong {
		want = append(want, e.InstanceID)
	}
	b.WaitFor(`document.querySelector("#ex-body button.open").textContent === `+chromium.JSString(want[0]), 10*time.Second)
	sorted := time.Since(began) //clock:ok logged, not asserted
	if got := rowsShown(); !slices.Equal(got, want) {
		t.Fatalf("sorted by latency: %v…, want %v…", got[:min(5, len(got))], want[:5])
	}
	if !b.Bool(`document.querySelector('#ex-table button[data-key="latency"]').parentNode.getAttribute("aria-sort") === "descending"`) {
		t.Error("the latency column does not say it sorts descending")
	}
	t.Logf("filter to wrong: %.1f ms in the page; sort by latency: %s from click to the first row seen", filterMS, sorted.Round(time.Millisecond))

	// Open the slowest wrong example: its SQL, result, gold and trace page.
	e := wrong[0]
	b.Click(`#ex-body button.open`)
	b.WaitFor(`!!document.querySelector("#ex-body tr.detail pre.sql")`, 10*time.Second)
	var got struct {
		SQL, Gold, Link string
		Cells           []string
	}
	b.Eval(`(() => { const d = document.querySelector("#ex-body tr.detail");
		return {SQL: d.querySelector("pre.sql").textContent, Gold: Array.from(d.querySelectorAll("p"), p => p.textContent).join("\n"),
			Link: (d.querySelector("a") || {}).getAttribute?.("href") || "",
			Cells: Array.from(d.querySelectorAll("table.preview td"), c => c.textContent)}; })()`, &got)
	sqlWritten, err := os.ReadFile(filepath.Join(dir, e.InstanceID+".sql"))
	if err != nil {
		t.Fatal(err)
	}
	if got.SQL != strings.TrimSpace(string(sqlWritten)) {
		t.Errorf("opened %s: SQL %q, want %q", e.InstanceID, got.SQL, sqlWritten)
	}
	if !strings.Contains(got.Gold, "Wrong: the answer's result differs from the gold result") {
		t.Errorf("opened %s: no gold comparison in %q", e.InstanceID, got.Gold)
	}
	// Its rows against gold's, and the gold SQL, as text.
	for _, want := range []string{"Gold has 4 row(s), the answer " + fmt.Sprint(e.Gold.AnswerRows) + ". Gold's columns found in the answer: orders; not found: customer.",
		"Gold rows the answer lacks: 1."} {
		if !strings.Contains(got.Gold, want) {
			t.Errorf("opened %s: the gold diff lacks %q in %q", e.InstanceID, want, got.Gold)
		}
	}
	if !b.Bool(`Array.from(document.querySelectorAll("#ex-body tr.detail pre.sql"), p => p.textContent).includes(`+chromium.JSString(e.Gold.SQL)+`)`) ||
		!b.Bool(`Array.from(document.querySelectorAll("#ex-body tr.detail table.preview td"), c => c.textContent).includes(`+chromium.JSString(hostile)+`)`) {
		t.Errorf("opened %s: the gold SQL or the missing row is not shown as its text", e.InstanceID)
	}
	if got.Link != "examples/"+e.InstanceID+".html" {
		t.Errorf("opened %s: trace link %q", e.InstanceID, got.Link)
	}
	if len(got.Cells) < 2 || got.Cells[0] != fmt.Sprint(mustIndex(t, r, e.InstanceID)*10) {
		t.Errorf("opened %s: result preview %v", e.InstanceID, got.Cells)
	}
	checkNoOverflow(t, b, "1200 px, an example open")
	b.Eval(`document.getElementById("examples").scrollIntoView()`, nil)
	b.Screenshot("report-table-1200.png")

	// Free text finds the hostile question, shown as text.
	b.Eval(`(() => { const s = document.getElementById("ex-show"); s.value = "all"; s.dispatchEvent(new Event("change"));
		const i = document.getElementById("ex-text"); i.value = "alert(1)"; i.dispatchEvent(new Event("input")); })()`, nil)
	if ids := rowsShown(); !slices.Equal(ids, []string{"ex0005"}) {
		t.Errorf("text alert(1): rows %v, want ex0005", ids)
	}
	if !b.Bool(`document.querySelector("#ex-body td.q").textContent === ` + chromium.JSString(hostile)) {
		t.Error("the hostile question is not shown as its text")
	}

	b.Viewport(390, 844)
	b.WaitFor(`document.documentElement.clientWidth === 390`, 10*time.Second)
	checkNoOverflow(t, b, "390 px")
	b.Eval(`document.getElementById("examples").scrollIntoView()`, nil)
	b.Screenshot("report-table-390.png")
	for _, err := range b.Errors() {
		t.Errorf("page error: %s", err)
	}
}

func mustIndex(t *testing.T, r *Report, id string) int {
	t.Helper()
	for i, e := range r.Examples {
		if e.InstanceID == id {
			return i
		}
	}
	t.Fatalf("no example %s", id)
	return -1
}

// checkNoOverflow fails when the page scrolls sideways.
func checkNoOverflow(t *testing.T, b *chromium.Browser, at string) {
	t.Helper()
	var w struct{ Scroll, Client int }
	b.Eval(`({Scroll: document.documentElement.scrollWidth, Client: document.documentElement.clientWidth})`, &w)
	if w.Scroll > w.Client {
		t.Errorf("at %s the page is %d px wide in a %d px window: it scrolls sideways", at, w.Scroll, w.Client)
	}
}

// TestReportPolicyCatchesScripts shows the browser check can fail: a
// script the report's policy does not name is blocked and reported.
func TestReportPolicyCatchesScripts(t *testing.T) {
	t.Parallel()
	var page bytes.Buffer
	if err := WriteHTML(&page, sampleReport(), nil); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	evil := strings.Replace(page.String(), "</body>", `<script>document.body.dataset.evil = "ran"</script></body>`, 1)
	if err := os.WriteFile(path, []byte(evil), 0o600); err != nil {
		t.Fatal(err)
	}
	b := chromium.Start(t)
	b.OpenFile(path, `document.body.dataset.ready === "yes"`, 60*time.Second)
	if b.Bool(`document.body.dataset.evil === "ran"`) {
		t.Error("a script the policy does not name ran")
	}
	// The report of the violation arrives on its own, after the page.
	reported := func() bool {
		return slices.ContainsFunc(b.Errors(), func(s string) bool { return strings.Contains(s, "CSP violation") })
	}
	if !wait.Until(10*time.Second, reported) {
		t.Fatalf("the blocked script was not reported in 10 s; the page's errors: %q", b.Errors())
	}
}
