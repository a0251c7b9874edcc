package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/testutil/chromium"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

const demo = "../../../examples/demo"

// pageIDs are the elements the page promises (tests and users rely on
// them).
var pageIDs = []string{"db", "question", "ask", "cancel", "progress", "sql", "result", "confidence", "agreed", "cost", "error", "status",
	"intro", "examples", "schema", "chart", "chartkind", "csv", "copysql", "editsql", "permalink", "elapsed", "confline", "history",
	"askfollowup", "followup", "thumbup", "thumbdown", "correction", "notice", "work", "understood", "runsql", "runerror", "rerunmsg",
	"goldline", "followupfail"}

// TestPageServed: GET / is the page, as HTML, under a Content-Security-
// Policy that allows nothing from elsewhere, with every element the page
// promises. No runtime is needed to serve it.
func TestPageServed(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:9"}) // never dialled
	defer rdb.Close()
	srv, err := serve.New(serve.Config{Env: &runenv.Env{Agents: agents.Builtin()}, Redis: rdb, Dataset: demo, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	res, err := http.Get(ts.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s", res.Status)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type %q", ct)
	}
	csp := res.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "http") || strings.Contains(csp, "*") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	page := string(body)
	for _, id := range pageIDs {
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("no element #%s", id)
		}
	}
	if !strings.Contains(page, `<table id="result"`) {
		t.Error("#result is not a table")
	}
	// Everything is in the page: nothing fetched from another origin.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`).FindString(page); m != "" {
		t.Errorf("the page loads an external resource: %s", m)
	}
	// Server data is written as text, never as markup.
	if strings.Contains(page, "innerHTML") || strings.Contains(page, "outerHTML") || strings.Contains(page, "insertAdjacentHTML") {
		t.Error("the page writes HTML from strings")
	}
}

// TestPageAsksInBrowser drives the page in headless Chromium, as a user
// would, against the real thing in process: an in-process cluster
// (embedded NATS, a spawned redis-server, the workers) whose LLM is
// llmsim, and the serve API over it with one tenant, told its LLM is the
// simulator. The first screen explains itself and asks for the key (no
// error); an example question is clicked and asked; the progress reads in
// words, in order, "Answered" last; the answer has formatted SQL, a table
// with numbers right-aligned, a chart chosen from the result's shape (the
// user can switch), a CSV download, a permalink; a follow-up carries the
// conversation; the SQL is edited and run (and a write refused, with the
// reason shown); a thumbs-up is recorded; the history lists it all; a
// question the simulator cannot answer says so; a running question is
// cancelled; and at 390 px wide nothing runs off the screen. No script
// error, console error or CSP violation at any point.
//
// The page says what it knows and no more: a wrong key is told as refused;
// the schema browser shows the columns' descriptions; the confidence says
// what was measured (candidates agreeing, which is not a check against the
// truth); an answer to one of the dataset's questions says how it fared
// against the dataset's gold answer; a follow-up that gets no answer
// leaves the answer it follows on screen and says why; dates on a chart's
// axis are ticked at the data's own grain with labels that never touch
// (27 days), and several measures as bars stand side by side.
func TestPageAsksInBrowser(t *testing.T) {
	tier.Servers(t, "a cluster")
	b := chromium.Start(t)
	// Failed requests are logged by the network; the 401 before the key
	// is pasted is expected.
	b.IgnoreLog("network")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Mostly right (Noise.Gold scales each question's drawn skill, so some
	// answers are wrong, and candidates can agree on them), and slow
	// enough per call that a question can be cancelled while it runs.
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1, Noise: llmsim.Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1},
		Latency: llmsim.Latency{FirstToken: 150 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	gate := &llmGate{h: sim}
	simSrv := httptest.NewServer(gate)
	defer simSrv.Close()
	defer gate.release()
	cl, err := cluster.Start(ctx, cluster.Config{StateDir: t.TempDir(), Agents: agents.Builtin(), Grace: time.Second,
		LLM:        llm.Config{BaseURL: simSrv.URL + "/v1", APIKey: "sim", Default: llm.ModelConfig{Name: "gpt-4o"}},
		Generators: 1, GeneratorConcurrency: 4, Explorers: 1, ExplorerConcurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ropt, err := redis.ParseURL(cl.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	const key = "page-test-key-0123456789"
	tenants, err := serve.ParseKeys(strings.NewReader("acme:"+key), "test")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serve.New(serve.Config{Env: cl.Env, Redis: rdb, Dataset: demo, Votes: 2, StateDir: t.TempDir(),
		RoundTimeout: time.Minute, Tenants: tenants, Simulated: true, VerifiedExamples: true})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Run(rctx) }()
	defer func() { stop(); <-done }()
	t.Logf("cluster and server up in %s", time.Since(start).Round(time.Millisecond)) //clock:ok logged, not asserted

	// A page is open once its script has started: it sets its state.
	const started = `!!document.body.dataset.state`
	b.Open(ts.URL+"/", started, 10*time.Second)

	// The first screen: what quorum is and where the key goes, no error.
	b.WaitFor(`!document.getElementById("keyhint").hidden`, 10*time.Second)
	if !b.Bool(`document.getElementById("keybox").open && document.getElementById("error").hidden && document.body.dataset.state === "idle"`) {
		t.Errorf("without a key: the key box is closed, an error shows (%q), or the page is not idle", b.String(`document.getElementById("error").textContent`))
	}
	if got := b.String(`document.getElementById("intro").textContent`); !strings.Contains(got, "candidate query") || !strings.Contains(got, "API key") {
		t.Errorf("the first screen does not say what quorum is and where the key goes: %q", got)
	}
	// A wrong key is told as refused, not left to look like no key.
	b.Type("#apikey", "not-the-key-0123456789")
	b.Click("#savekey")
	b.WaitFor(`!document.getElementById("error").hidden`, 10*time.Second)
	if got := b.String(`document.getElementById("error").textContent + " " + document.getElementById("keystate").textContent`); !strings.Contains(got, "refused the API key") || !strings.Contains(got, "(refused)") {
		t.Errorf("a wrong key: the page says %q, want that the server refused the key", got)
	}
	b.Type("#apikey", key)
	b.Click("#savekey")
	b.WaitFor(`Array.from(document.getElementById("db").options).some(o => o.value === "shop")`, 10*time.Second)
	if !b.Bool(`document.getElementById("error").hidden`) {
		t.Errorf("the right key after a wrong one left the error: %q", b.String(`document.getElementById("error").textContent`))
	}
	if !b.Bool(`sessionStorage.getItem("quorum.apiKey") === ` + chromium.JSString(key) + ` && !location.href.includes(` + chromium.JSString(key) + `)`) {
		t.Error("the key is not in sessionStorage, or it is in the URL")
	}
	// Example questions (the dataset's: the simulator answers only those)
	// and the schema browser.
	b.WaitFor(`document.querySelectorAll("#examples button").length > 0 && document.querySelectorAll("#schema details").length > 0`, 10*time.Second)
	if got := b.String(`document.getElementById("exampleshint").textContent`); !strings.Contains(got, "simulated LLM") {
		t.Errorf("the examples do not say they are the simulator's: %q", got)
	}
	if !b.Bool(`Array.from(document.querySelectorAll("#schema summary")).some(s => s.textContent.startsWith("customers ("))`) {
		t.Errorf("the schema browser has no customers table: %s", b.String(`document.getElementById("schema").textContent`))
	}
	// The columns' descriptions the schema endpoint returns are shown.
	if !b.Bool(`Array.from(document.querySelectorAll("#schema li")).some(li => li.textContent.startsWith("customer_id") && li.querySelector(".desc") && li.querySelector(".desc").textContent === "Unique customer identifier.")`) {
		t.Errorf("the schema browser does not show the column descriptions: %.300q", b.String(`document.querySelector("#schema details").textContent`))
	}

	// Ask an example: categories with a measure.
	const channels = "How many orders came through each sales channel?"
	b.Eval(`Array.from(document.querySelectorAll("#examples button")).find(x => x.textContent === `+chromium.JSString(channels)+`).click()`, nil)
	if got := b.String(`document.getElementById("question").value`); got != channels {
		t.Fatalf("clicking the example filled in %q", got)
	}
	asked := time.Now()
	b.Click("#ask")
	if state := waitState(t, b, "the first question", 2*time.Minute); state != "answered" {
		t.Fatalf("the question ended %s on the page:\n%s", state, b.Text())
	}
	t.Logf("asked and answered through the page in %s", time.Since(asked).Round(time.Millisecond)) //clock:ok logged, not asserted
	progress := b.String(`Array.from(document.querySelectorAll("#progress li")).map(l => l.textContent).join("\n")`)
	steps := strings.Split(progress, "\n")
	// The candidates may agree at once or, disagreeing, explore for a
	// round of their own first: either way these steps come in order.
	order := []*regexp.Regexp{regexp.MustCompile(`^Asked$`), regexp.MustCompile(`^Writing 2 candidate queries`), regexp.MustCompile(`^Ran 2 of 2 candidate queries`),
		regexp.MustCompile(`^Compared the results and voted`), regexp.MustCompile(`^\d+ of \d+ agree`), regexp.MustCompile(`^Answered$`)}
	at := -1
	for _, want := range order {
		i := slices.IndexFunc(steps[at+1:], want.MatchString)
		if i < 0 {
			t.Errorf("progress: %s missing or out of order (want %q in order):\n%s", want, order, progress)
			break
		}
		at += 1 + i
	}
	if steps[len(steps)-1] != "Answered" || regexp.MustCompile(`r\d+\.[a-z]+\.\d+`).MatchString(progress) {
		t.Errorf("progress does not end with Answered, or shows task ids:\n%s", progress)
	}
	checkAnswer(t, b)
	if !b.Bool(`document.getElementById("chartkind").value === "bar" && document.querySelector("#chart canvas") !== null`) {
		t.Errorf("categories with a measure: chart %q, want bars drawn", b.String(`document.getElementById("chartkind").value`))
	}
	b.Eval(`(() => { const s = document.getElementById("chartkind"); s.value = "none"; s.dispatchEvent(new Event("change")); })()`, nil)
	if !b.Bool(`document.querySelector("#chart canvas") === null`) {
		t.Error("switching the chart off left it drawn")
	}
	id := b.String(`new URLSearchParams(location.search).get("id")`)
	if !regexp.MustCompile(`^q[0-9a-f]{36}$`).MatchString(id) {
		t.Fatalf("the permalink is not in the URL: %s", b.String(`location.href`))
	}
	b.Click("#csv")
	b.WaitFor(`document.getElementById("status").textContent.startsWith("Downloaded ")`, 10*time.Second)
	csv := b.String(`fetch("/v1/questions/` + id + `/result.csv", {headers: {Authorization: "Bearer ` + key + `"}}).then(r => r.text())`)
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) < 3 || b.String(`Array.from(document.querySelectorAll("#result thead th")).map(x => x.textContent).join(",")`) != lines[0] {
		t.Errorf("the CSV %q does not match the table", csv)
	}
	// The example is one of the dataset's, with a gold answer: the page
	// says how the answer fared against it, right exactly when its rows
	// are the gold rows. The simulator is not always right, and its
	// candidates can agree on a wrong answer (a query that skips the
	// first row, say): high confidence, checked wrong.
	goldCSV, err := os.ReadFile(filepath.Join(demo, "evaluation_suite", "gold", "exec_result", "local005_a.csv"))
	if err != nil {
		t.Fatal(err)
	}
	verdict := "wrong"
	if sameRows(string(goldCSV), csv) {
		verdict = "right"
	}
	if got, want := b.String(`document.getElementById("goldline").hidden ? "" : document.getElementById("goldline").textContent`), "Checked against the dataset's gold answer (local005): "+verdict+"."; got != want {
		t.Errorf("the gold check reads %q, want %q (the answer's rows %q, gold's %q)", got, want, csv, goldCSV)
	}
	// What changes the answer is said: an OFFSET that drops a row too.
	if sql := b.String(`document.getElementById("sql").textContent`); strings.Contains(sql, "OFFSET 1") && !strings.Contains(b.String(`document.getElementById("understood").textContent`), "skipping the first row") {
		t.Errorf("the SQL skips a row, the restatement does not say so: %q\n%s", b.String(`document.getElementById("understood").textContent`), sql)
	}
	b.Eval(`document.getElementById("understood").scrollIntoView()`, nil)
	b.Screenshot("page-confidence-gold.png")

	// How the question was understood, in one line read from the SQL.
	if got := b.String(`document.getElementById("understood").textContent`); !strings.HasPrefix(got, "Understood as: Counted") || !strings.Contains(got, " per ") {
		t.Errorf("the answer's restatement %q, want \"Understood as: Counted … per …\" (SQL %q)", got, b.String(`document.getElementById("sql").textContent`))
	}
	// Edit the SQL and run it: the edited SQL's rows replace the table
	// and chart (one number), marked as not the agents' answer; the CSV is
	// theirs. A write is refused with the guard's reason, on the page.
	b.Click("#editsql")
	b.Type("#sqledit", "SELECT COUNT(*) AS customers FROM customers")
	b.Click("#runsql")
	b.WaitFor(`!document.getElementById("rerunmsg").hidden`, 20*time.Second)
	if got := b.String(`Array.from(document.querySelectorAll("#result thead th, #result tbody td")).map(x => x.textContent).join(",")`); got != "customers,300" {
		t.Errorf("after running the edited SQL the table reads %q, want customers,300", got)
	}
	if !b.Bool(`document.getElementById("chartkind").value === "number" && document.getElementById("bignumber").textContent.startsWith("300") && document.getElementById("understood").textContent.includes("Counted rows in customers")`) {
		t.Errorf("after running the edited SQL: chart %q, big number %q, understood %q", b.String(`document.getElementById("chartkind").value`),
			b.String(`document.getElementById("bignumber").textContent`), b.String(`document.getElementById("understood").textContent`))
	}
	b.Click("#csv")
	b.WaitFor(`document.getElementById("status").textContent.includes("-edited.csv")`, 10*time.Second)
	b.Type("#sqledit", "DELETE FROM customers")
	b.Click("#runsql")
	b.WaitFor(`!document.getElementById("runerror").hidden`, 20*time.Second)
	if got := b.String(`document.getElementById("runerror").textContent`); !strings.Contains(got, "quorum refused the statement") {
		t.Errorf("a DELETE run from the page says %q, want the guard's refusal", got)
	}
	if got := b.String(`document.querySelector("#result tbody td").textContent`); got != "300" {
		t.Errorf("after the refused DELETE the table shows %q, want the last result (300)", got)
	}
	b.Click("#editsql") // stop editing

	// A follow-up carries the conversation; its answer is one number.
	b.Click("#askfollowup")
	if !b.Bool(`!document.getElementById("followup").hidden && document.getElementById("followupq").textContent.includes(` + chromium.JSString(channels) + `)`) {
		t.Error("Ask a follow-up does not show what it follows up")
	}
	// A follow-up that gets no answer (the simulator knows only its
	// dataset's questions) leaves the answer on screen and says why.
	const table = `Array.from(document.querySelectorAll("#result th, #result td")).map(x => x.textContent).join(",")`
	before := b.String(table)
	b.Type("#question", "And only for 2024?")
	b.Click("#ask")
	if state := waitState(t, b, "the follow-up without an answer", 2*time.Minute); state != "failed" {
		t.Fatalf("the follow-up without an answer ended %s:\n%s", state, b.Text())
	}
	if got := b.String(`document.getElementById("followupfail").hidden ? "" : document.getElementById("followupfail").textContent`); !strings.Contains(got, "“And only for 2024?” got no answer") || !strings.Contains(got, channels) {
		t.Errorf("the failed follow-up says %q, want that it got no answer and the answer shown is still the one to %q", got, channels)
	}
	if !b.Bool(`!document.getElementById("answer").hidden && !document.getElementById("notice").hidden && document.getElementById("notice").textContent.includes("simulator has no answer")`) || b.String(table) != before {
		t.Errorf("after the failed follow-up: answer shown %v, notice %q, table %q (before %q)", b.Bool(`!document.getElementById("answer").hidden`),
			b.String(`document.getElementById("notice").textContent`), b.String(table), before)
	}
	b.Eval(`document.getElementById("error").scrollIntoView()`, nil)
	b.Screenshot("page-followup-failed.png")
	b.Type("#question", "How many customers does the shop have?")
	b.Click("#ask")
	if state := waitState(t, b, "the follow-up", 2*time.Minute); state != "answered" {
		t.Fatalf("the follow-up ended %s:\n%s", state, b.Text())
	}
	if got := b.String(`document.getElementById("askedq").textContent`); !strings.Contains(got, "(a follow-up)") {
		t.Errorf("the follow-up's answer does not say it is one: %q", got)
	}
	if !b.Bool(`document.getElementById("chartkind").value === "number" && !document.getElementById("bignumber").hidden && document.getElementById("bignumber").textContent.startsWith("300")`) {
		t.Errorf("a single number is not shown big: %q", b.String(`document.getElementById("bignumber").textContent`))
	}
	// Show the work: the question's trace, its LLM calls and the vote.
	if !b.Bool(`(document.getElementById("work").open = true) && true`) {
		t.Error("the show-the-work panel did not open")
	}
	b.WaitFor(`document.querySelectorAll("#worklist li.work-task").length > 0 && document.querySelectorAll("#worklist li.work-decision").length > 0`, 15*time.Second)
	if got := b.String(`document.getElementById("worklist").textContent`); !strings.Contains(got, "LLM ") || !strings.Contains(got, "vote on round 0") || !strings.Contains(got, "answer: answered") {
		t.Errorf("the show-the-work panel lists no LLM call, vote or answer: %.600q (%s)", got, b.String(`document.getElementById("workmsg").textContent`))
	}
	// Thumbs up, then the history shows both questions.
	b.Click("#thumbup")
	b.WaitFor(`document.getElementById("feedbackmsg").textContent.startsWith("Thanks")`, 10*time.Second)
	b.WaitFor(`document.querySelectorAll("#history li").length >= 2 && document.getElementById("history").textContent.includes("marked right")`, 10*time.Second)
	if got := b.String(`document.getElementById("history").textContent`); !strings.Contains(got, channels) || !strings.Contains(got, "follow-up") {
		t.Errorf("history: %q", got)
	}

	// A time series is drawn as a line.
	b.Click("#endfollowup")
	b.Type("#question", "For each month of 2024, how many orders were placed and what was their total amount? Round the amount to 2 decimals.")
	b.Click("#ask")
	if state := waitState(t, b, "the monthly question", 2*time.Minute); state != "answered" {
		t.Fatalf("the monthly question ended %s:\n%s", state, b.Text())
	}
	if !b.Bool(`document.getElementById("chartkind").value === "line" && document.querySelector("#chart canvas") !== null && Array.from(document.getElementById("chartkind").options).some(o => o.value === "bar")`) {
		t.Errorf("a time series: chart %q of %s, want a line (and bars to switch to)", b.String(`document.getElementById("chartkind").value`),
			b.String(`Array.from(document.getElementById("chartkind").options).map(o => o.value).join(",")`))
	}
	b.ScreenshotPage("page-line.png")
	checkDateAxis(t, b, "months", "month", 12)
	// Two measures as bars: side by side in each month, never over one
	// another.
	chartKind(b, "bar")
	checkGroupedBars(t, b, "months", 12)

	// 27 days: a time axis ticked on days, its labels thinned until none
	// touches; as bars, the two measures side by side.
	b.Type("#question", "For each day of March 2024, give the order amount of that day and the running total since March 1, both rounded to 2 decimals.")
	b.Click("#ask")
	if state := waitState(t, b, "the daily question", 2*time.Minute); state != "answered" {
		t.Fatalf("the daily question ended %s:\n%s", state, b.Text())
	}
	if got := b.String(`String(document.querySelectorAll("#result tbody tr").length) + " " + document.getElementById("chartkind").value`); got != "27 line" {
		t.Errorf("the daily question: %s rows and chart, want 27 line", got)
	}
	checkDateAxis(t, b, "days", "day", 27)
	b.Eval(`document.getElementById("chartsection").scrollIntoView()`, nil)
	b.Screenshot("page-chart-days.png")
	chartKind(b, "bar")
	checkDateAxis(t, b, "days as bars", "day", 27)
	checkGroupedBars(t, b, "days", 27)
	b.Eval(`document.getElementById("chartsection").scrollIntoView()`, nil)
	b.Screenshot("page-chart-bars.png")

	// A question the simulator has no answer for says so, not as an error.
	b.Type("#question", "What is the meaning of life?")
	b.Click("#ask")
	if state := waitState(t, b, "the question the simulator cannot answer", 2*time.Minute); state != "failed" {
		t.Fatalf("an unknown question ended %s", state)
	}
	if !b.Bool(`!document.getElementById("notice").hidden && document.getElementById("notice").textContent.includes("simulator has no answer") && document.getElementById("error").hidden && document.getElementById("answer").hidden`) {
		t.Errorf("an unknown question: notice %q, error %q", b.String(`document.getElementById("notice").textContent`), b.String(`document.getElementById("error").textContent`))
	}

	// Another question, cancelled while it runs: its LLM calls are held at
	// the gate, so it cannot finish before the click, however slow or
	// fast the machine.
	arrived := gate.hold()
	b.Type("#question", "Which five products sold the most units, not counting cancelled orders? Give the product name and the units sold.")
	b.Click("#ask")
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("the question to cancel made no LLM call in 60s:\n%s", b.Text())
	}
	b.WaitFor(`!document.getElementById("cancel").hidden`, 10*time.Second)
	// A mouse click lands where the button was measured: one that missed
	// (the page moved in between, the progress lines arriving) is clicked
	// again, as a user would.
	clickUntil(t, b, "#cancel", `document.getElementById("cancel").disabled || document.getElementById("cancel").hidden`, "the cancel to be sent")
	if state := waitState(t, b, "the cancelled question", time.Minute); state != "cancelled" {
		t.Fatalf("cancelled question ended %s:\n%s", state, b.Text())
	}
	gate.release()

	// The permalink opens the answer, at desktop and phone width: the
	// elements are there and nothing runs off the screen.
	for _, width := range []int{1200, 390} {
		b.Viewport(width, 844)
		b.Open(ts.URL+"/?id="+id, started, 10*time.Second)
		if state := waitState(t, b, "the permalink's answer", time.Minute); state != "answered" {
			t.Fatalf("the permalink at %d px: %s\n%s", width, state, b.Text())
		}
		b.WaitFor(`document.querySelector("#chart canvas") !== null`, 10*time.Second)
		for _, el := range []string{"question", "ask", "sql", "result", "chart", "csv", "confidence", "cost", "thumbup", "history"} {
			if !b.Bool(`(() => { const r = document.getElementById("` + el + `").getBoundingClientRect(); return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth + 0.5; })()`) {
				t.Errorf("at %d px #%s is not visible within the screen: %s", width, el, b.String(`JSON.stringify(document.getElementById("`+el+`").getBoundingClientRect())`))
			}
		}
		if over := b.String(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
			t.Errorf("at %d px the page is %s px wider than the screen", width, over)
		}
		if !b.Bool(`getComputedStyle(document.querySelector("#result td.num")).textAlign === "right"`) {
			t.Errorf("at %d px numbers are not right-aligned", width)
		}
		b.ScreenshotPage(fmt.Sprintf("page-%d.png", width))
	}
	// A link with ask=1 fills the form and waits for a click: another
	// site's link must not spend the quota of the key kept in this tab.
	b.Open(ts.URL+"/?db=shop&q="+url.QueryEscape(channels)+"&ask=1", started, 10*time.Second)
	b.WaitFor(`!document.getElementById("notice").hidden`, 10*time.Second)
	if st, q := b.String(`document.body.dataset.state`), b.String(`document.getElementById("question").value`); st != "idle" || q != channels {
		t.Errorf("a link with ask=1: the page is %q with question %q, want idle with the link's question and a click to ask", st, q)
	}
	for _, e := range b.Errors() {
		t.Errorf("page error: %s", e)
	}
	t.Logf("test ran %s", time.Since(start).Round(time.Millisecond)) //clock:ok logged, not asserted
}

// checkAnswer checks the answer on the page: the SQL formatted and
// highlighted, the table's numbers right-aligned and formatted, the
// confidence in one line, the agreement, the time and the cost.
func checkAnswer(t *testing.T, b *chromium.Browser) {
	t.Helper()
	sql := b.String(`document.getElementById("sql").textContent`)
	if !strings.HasPrefix(sql, "SELECT") && !strings.HasPrefix(sql, "--") || !strings.Contains(sql, "\nFROM") || !b.Bool(`document.querySelectorAll("#sql span.kw").length > 1`) {
		t.Errorf("#sql is not formatted and highlighted:\n%s", sql)
	}
	if !b.Bool(`document.querySelectorAll("#result tbody tr").length > 1 && document.querySelectorAll("#result td.num").length > 0 && getComputedStyle(document.querySelector("#result td.num")).textAlign === "right"`) {
		t.Errorf("#result has no right-aligned numbers: %s", b.String(`document.getElementById("result").outerHTML`))
	}
	for id, want := range map[string]string{
		"confidence": `^(high|low)$`,
		"confline":   `^(High confidence: \d+ of \d+ |Low confidence: .*\(\d+ of \d+ returned this result\))`,
		"agreed":     `^\d+ of \d+ candidates agreed`,
		"elapsed":    `^Took \d+(\.\d)? s$`,
		"cost":       `^Cost: \d+ LLM calls? · [\d,]+ tokens? · \d+ warehouse quer`,
		"status":     `^Answered`,
	} {
		if got := b.String(`document.getElementById("` + id + `").textContent`); !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("#%s: %q, want %s", id, got, want)
		}
	}
	if !b.Bool(`document.getElementById("error").hidden`) {
		t.Errorf("#error shown: %s", b.String(`document.getElementById("error").textContent`))
	}
	// The confidence says what was measured: candidates that agree, never
	// "independent", and never as if agreeing made it right.
	conf := b.String(`document.getElementById("confline").textContent`)
	if strings.Contains(strings.ToLower(conf), "independ") || strings.HasPrefix(conf, "High") && !strings.Contains(conf, "candidate queries returned this same result. Agreement between candidates is not a check against the truth.") {
		t.Errorf("#confline: %q, want candidate queries that agree, said not to be a check against the truth", conf)
	}
}

// sameRows reports whether two CSV texts hold the same data rows in any
// order (their headers aside).
func sameRows(a, b string) bool {
	rows := func(s string) []string {
		lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n")), "\n")
		out := slices.Clone(lines[1:])
		slices.Sort(out)
		return out
	}
	return slices.Equal(rows(a), rows(b))
}

// chartKind switches the page's chart to kind, as a user would.
func chartKind(b *chromium.Browser, kind string) {
	b.Eval(`(() => { const s = document.getElementById("chartkind"); s.value = `+chromium.JSString(kind)+`; s.dispatchEvent(new Event("change")); })()`, nil)
	b.WaitFor(`document.querySelector("#chart canvas") !== null && document.getElementById("chart").dataset.xticks !== undefined`, 10*time.Second)
}

// checkDateAxis checks the chart's x axis over n dates at grain (what):
// every tick is one of the data's dates (daily rows: midnight UTC, never
// an hour), in order; more than one is labelled; and no two labels touch
// or run off the canvas, measured here in the axis' font at the places
// the chart drew them.
func checkDateAxis(t *testing.T, b *chromium.Browser, what, grain string, n int) {
	t.Helper()
	var axis struct {
		Grain  string    `json:"grain"`
		Labels []string  `json:"labels"`
		Values []any     `json:"values"`
		Pos    []float64 `json:"pos"`
		Widths []float64 `json:"widths"`
		Canvas float64   `json:"canvas"`
		Rows   []string  `json:"rows"`
	}
	b.Eval(`(() => {
		const c = document.getElementById("chart"), ctx = document.createElement("canvas").getContext("2d");
		ctx.font = "12px system-ui, sans-serif";
		const labels = JSON.parse(c.dataset.xticks || "[]");
		return {grain: c.dataset.xgrain, labels: labels, values: JSON.parse(c.dataset.xtickvals || "[]"), pos: JSON.parse(c.dataset.xtickpos || "[]"),
			widths: labels.map(l => ctx.measureText(l).width), canvas: c.querySelector("canvas").getBoundingClientRect().width,
			rows: Array.from(document.querySelectorAll("#result tbody tr")).map(r => r.cells[0].textContent)};
	})()`, &axis)
	if axis.Grain != grain || len(axis.Labels) < 2 || len(axis.Labels) > n || len(axis.Values) != len(axis.Labels) || len(axis.Pos) != len(axis.Labels) {
		t.Fatalf("%s: the x axis is %+v, want %s ticks, 2 to %d of them", what, axis, grain, n)
	}
	dates := map[string]bool{}
	for _, r := range axis.Rows {
		dates[r] = true
	}
	for i, l := range axis.Labels {
		var date string
		switch v := axis.Values[i].(type) {
		case float64: // seconds (a time axis)
			if grain == "day" && int64(v)%86400 != 0 {
				t.Errorf("%s: tick %q at %v is not at midnight: the data is daily", what, l, v)
			}
			date = time.Unix(int64(v), 0).UTC().Format(map[string]string{"day": "2006-01-02", "month": "2006-01"}[grain])
		case string: // a category's value
			date = v
		}
		if !dates[date] {
			t.Errorf("%s: tick %q (%s) is not one of the data's dates %v", what, l, date, axis.Rows)
		}
		if strings.Contains(l, ":") {
			t.Errorf("%s: tick %q shows a time of day", what, l)
		}
		left, right := axis.Pos[i]-axis.Widths[i]/2, axis.Pos[i]+axis.Widths[i]/2
		if left < 0 || right > axis.Canvas {
			t.Errorf("%s: label %q (%.0f to %.0f px) runs off the %.0f px chart", what, l, left, right, axis.Canvas)
		}
		if i > 0 && left < axis.Pos[i-1]+axis.Widths[i-1]/2+2 {
			t.Errorf("%s: labels %q and %q overlap (at %.0f and %.0f px)", what, axis.Labels[i-1], l, axis.Pos[i-1], axis.Pos[i])
		}
		if i > 0 && axis.Pos[i] <= axis.Pos[i-1] {
			t.Errorf("%s: ticks out of order: %v", what, axis.Labels)
		}
	}
	t.Logf("%s: x labels %q", what, axis.Labels)
}

// checkGroupedBars checks a bar chart of n categories and two measures:
// in each category the first measure's bar ends before the second's
// starts.
func checkGroupedBars(t *testing.T, b *chromium.Browser, what string, n int) {
	t.Helper()
	var bars map[string][][2]float64
	b.Eval(`JSON.parse(document.getElementById("chart").dataset.bars || "{}")`, &bars)
	first, second := bars["1"], bars["2"]
	if len(first) != n || len(second) != n {
		t.Fatalf("%s: bars drawn %v, want %d of each of two measures", what, bars, n)
	}
	for i := range n {
		if first[i][1] <= 0 || second[i][1] <= 0 || first[i][0]+first[i][1] > second[i][0] {
			t.Errorf("%s: in category %d the bars [left, width] %v and %v are not side by side", what, i, first[i], second[i])
		}
	}
}

// waitState waits until the question on the page ends and returns how.
// waitState waits for the question on the page (what) to end; the
// limits are far above a healthy question's seconds, for -race on a
// loaded machine.
func waitState(t *testing.T, b *chromium.Browser, what string, timeout time.Duration) string {
	t.Helper()
	t.Logf("waiting for %s to end", what)
	if !b.Until(`["answered", "failed", "cancelled"].includes(document.body.dataset.state)`, timeout) {
		t.Fatalf("waited %s for %s to end: %s; the page's errors: %q", timeout, what, b.String(pageSummary), b.Errors())
	}
	return b.String(`document.body.dataset.state`)
}

// pageSummary is what a failure needs of the page (its whole text is
// mostly the schema browser): its state, status line, error, notice,
// progress lines and cancel button.
const pageSummary = `JSON.stringify({state: document.body.dataset.state, status: document.getElementById("status").textContent,
	error: document.getElementById("error").hidden ? "" : document.getElementById("error").textContent,
	notice: document.getElementById("notice").hidden ? "" : document.getElementById("notice").textContent,
	progress: Array.from(document.querySelectorAll("#progress li")).map(l => l.textContent),
	cancel: {hidden: document.getElementById("cancel").hidden, disabled: document.getElementById("cancel").disabled}})`

// clickUntil clicks selector until done (a JS expression) holds, up to
// three times, each given 5 s to take effect.
func clickUntil(t *testing.T, b *chromium.Browser, selector, done, what string) {
	t.Helper()
	for range 3 {
		b.Click(selector)
		if b.Until(done, 5*time.Second) {
			return
		}
	}
	t.Fatalf("clicked %s three times and waited for %s in vain: %s", selector, what, b.String(pageSummary))
}

// llmGate passes requests to the simulated LLM, except while held: then
// each request waits until release (or its caller gives up), and the
// first to arrive is signalled, so a test acts while a call is in flight.
// A held streamed request gets its headers at once and a keep-alive
// comment every half second, as a provider's stream does while a model
// thinks, so the client's header and dead-endpoint limits (an interactive
// call's are 5 s and 12 s) cannot fail it however long the test takes to
// act; the simulator's stream follows on release.
type llmGate struct {
	h       http.Handler
	mu      sync.Mutex
	held    chan struct{}
	arrived chan struct{}
}

// hold makes requests wait; the channel receives when one arrives.
func (g *llmGate) hold() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held, g.arrived = make(chan struct{}), make(chan struct{}, 1)
	return g.arrived
}

// release lets the held requests through and stops holding.
func (g *llmGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

func (g *llmGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	held, arrived := g.held, g.arrived
	g.mu.Unlock()
	if held == nil {
		g.h.ServeHTTP(w, r)
		return
	}
	select {
	case arrived <- struct{}{}:
	default:
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	flusher, canFlush := w.(http.Flusher)
	if !req.Stream || !canFlush {
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
		g.h.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-held:
			waiting = false
		case <-r.Context().Done():
			return
		case <-tick.C:
			_, _ = w.Write([]byte(": held\n\n"))
			flusher.Flush()
		}
	}
	g.h.ServeHTTP(streamBody{w, flusher}, r)
}

// streamBody passes a response's body on after its headers were sent.
type streamBody struct {
	w http.ResponseWriter
	f http.Flusher
}

func (s streamBody) Header() http.Header         { return http.Header{} }
func (s streamBody) WriteHeader(int)             {}
func (s streamBody) Write(b []byte) (int, error) { return s.w.Write(b) }
func (s streamBody) Flush()                      { s.f.Flush() }
