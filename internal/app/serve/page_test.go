package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/cluster"
)

const demo = "../../../examples/demo"

// pageIDs are the elements the page promises (tests and users rely on
// them).
var pageIDs = []string{"db", "question", "ask", "cancel", "progress", "sql", "result", "confidence", "agreed", "cost", "error", "status",
	"intro", "examples", "schema", "chart", "chartkind", "csv", "copysql", "editsql", "permalink", "elapsed", "confline", "history",
	"askfollowup", "followup", "thumbup", "thumbdown", "correction", "notice", "work", "understood", "runsql", "runerror", "rerunmsg"}

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
func TestPageAsksInBrowser(t *testing.T) {
	bin := chromiumBin(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Always right, and slow enough per call that a question can be
	// cancelled while it runs.
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
	t.Logf("cluster and server up in %s", time.Since(start).Round(time.Millisecond))

	b := startBrowser(t, bin)
	b.navigate(ts.URL + "/")

	// The first screen: what quorum is and where the key goes, no error.
	b.waitFor(`!document.getElementById("keyhint").hidden`, 10*time.Second)
	if !b.evalBool(`document.getElementById("keybox").open && document.getElementById("error").hidden && document.body.dataset.state === "idle"`) {
		t.Errorf("without a key: the key box is closed, an error shows (%q), or the page is not idle", b.evalString(`document.getElementById("error").textContent`))
	}
	if got := b.evalString(`document.getElementById("intro").textContent`); !strings.Contains(got, "candidate query") || !strings.Contains(got, "API key") {
		t.Errorf("the first screen does not say what quorum is and where the key goes: %q", got)
	}
	b.typeInto("apikey", key)
	b.click("savekey")
	b.waitFor(`Array.from(document.getElementById("db").options).some(o => o.value === "shop")`, 10*time.Second)
	if !b.evalBool(`sessionStorage.getItem("quorum.apiKey") === ` + jsString(key) + ` && !location.href.includes(` + jsString(key) + `)`) {
		t.Error("the key is not in sessionStorage, or it is in the URL")
	}
	// Example questions (the dataset's: the simulator answers only those)
	// and the schema browser.
	b.waitFor(`document.querySelectorAll("#examples button").length > 0 && document.querySelectorAll("#schema details").length > 0`, 10*time.Second)
	if got := b.evalString(`document.getElementById("exampleshint").textContent`); !strings.Contains(got, "simulated LLM") {
		t.Errorf("the examples do not say they are the simulator's: %q", got)
	}
	if !b.evalBool(`Array.from(document.querySelectorAll("#schema summary")).some(s => s.textContent.startsWith("customers ("))`) {
		t.Errorf("the schema browser has no customers table: %s", b.evalString(`document.getElementById("schema").textContent`))
	}

	// Ask an example: categories with a measure.
	const channels = "How many orders came through each sales channel?"
	b.eval(`Array.from(document.querySelectorAll("#examples button")).find(x => x.textContent === ` + jsString(channels) + `).click()`)
	if got := b.evalString(`document.getElementById("question").value`); got != channels {
		t.Fatalf("clicking the example filled in %q", got)
	}
	asked := time.Now()
	b.click("ask")
	if state := b.waitState(60 * time.Second); state != "answered" {
		t.Fatalf("the question ended %s on the page:\n%s", state, pageText(b.dom()))
	}
	t.Logf("asked and answered through the page in %s", time.Since(asked).Round(time.Millisecond))
	progress := b.evalString(`Array.from(document.querySelectorAll("#progress li")).map(l => l.textContent).join("\n")`)
	steps := strings.Split(progress, "\n")
	order := []string{"Asked", "Writing 2 candidate queries", "Ran 2 of 2 candidate queries", "Compared the results and voted", " of 2 agree", "Answered"}
	at := -1
	for _, want := range order {
		i := slices.IndexFunc(steps, func(s string) bool { return strings.Contains(s, want) })
		if i <= at {
			t.Errorf("progress: %q missing or out of order (want %q in order):\n%s", want, order, progress)
			break
		}
		at = i
	}
	if steps[len(steps)-1] != "Answered" || regexp.MustCompile(`r\d+\.[a-z]+\.\d+`).MatchString(progress) {
		t.Errorf("progress does not end with Answered, or shows task ids:\n%s", progress)
	}
	checkAnswer(t, b)
	if !b.evalBool(`document.getElementById("chartkind").value === "bar" && document.querySelector("#chart canvas") !== null`) {
		t.Errorf("categories with a measure: chart %q, want bars drawn", b.evalString(`document.getElementById("chartkind").value`))
	}
	b.eval(`(() => { const s = document.getElementById("chartkind"); s.value = "none"; s.dispatchEvent(new Event("change")); })()`)
	if !b.evalBool(`document.querySelector("#chart canvas") === null`) {
		t.Error("switching the chart off left it drawn")
	}
	id := b.evalString(`new URLSearchParams(location.search).get("id")`)
	if !regexp.MustCompile(`^q[0-9a-f]{36}$`).MatchString(id) {
		t.Fatalf("the permalink is not in the URL: %s", b.evalString(`location.href`))
	}
	b.click("csv")
	b.waitFor(`document.getElementById("status").textContent.startsWith("Downloaded ")`, 10*time.Second)
	csv := b.evalString(`fetch("/v1/questions/` + id + `/result.csv", {headers: {Authorization: "Bearer ` + key + `"}}).then(r => r.text())`)
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) < 3 || b.evalString(`Array.from(document.querySelectorAll("#result thead th")).map(x => x.textContent).join(",")`) != lines[0] {
		t.Errorf("the CSV %q does not match the table", csv)
	}

	// How the question was understood, in one line read from the SQL.
	if got := b.evalString(`document.getElementById("understood").textContent`); !strings.HasPrefix(got, "Understood as: Counted") || !strings.Contains(got, " per ") {
		t.Errorf("the answer's restatement %q, want \"Understood as: Counted … per …\" (SQL %q)", got, b.evalString(`document.getElementById("sql").textContent`))
	}
	// Edit the SQL and run it: the edited SQL's rows replace the table
	// and chart (one number), marked as not the agents' answer; the CSV is
	// theirs. A write is refused with the guard's reason, on the page.
	b.click("editsql")
	b.typeInto("sqledit", "SELECT COUNT(*) AS customers FROM customers")
	b.click("runsql")
	b.waitFor(`!document.getElementById("rerunmsg").hidden`, 20*time.Second)
	if got := b.evalString(`Array.from(document.querySelectorAll("#result thead th, #result tbody td")).map(x => x.textContent).join(",")`); got != "customers,300" {
		t.Errorf("after running the edited SQL the table reads %q, want customers,300", got)
	}
	if !b.evalBool(`document.getElementById("chartkind").value === "number" && document.getElementById("bignumber").textContent.startsWith("300") && document.getElementById("understood").textContent.includes("Counted rows in customers")`) {
		t.Errorf("after running the edited SQL: chart %q, big number %q, understood %q", b.evalString(`document.getElementById("chartkind").value`),
			b.evalString(`document.getElementById("bignumber").textContent`), b.evalString(`document.getElementById("understood").textContent`))
	}
	b.click("csv")
	b.waitFor(`document.getElementById("status").textContent.includes("-edited.csv")`, 10*time.Second)
	b.typeInto("sqledit", "DELETE FROM customers")
	b.click("runsql")
	b.waitFor(`!document.getElementById("runerror").hidden`, 20*time.Second)
	if got := b.evalString(`document.getElementById("runerror").textContent`); !strings.Contains(got, "quorum refused the statement") {
		t.Errorf("a DELETE run from the page says %q, want the guard's refusal", got)
	}
	if got := b.evalString(`document.querySelector("#result tbody td").textContent`); got != "300" {
		t.Errorf("after the refused DELETE the table shows %q, want the last result (300)", got)
	}
	b.click("editsql") // stop editing

	// A follow-up carries the conversation; its answer is one number.
	b.click("askfollowup")
	if !b.evalBool(`!document.getElementById("followup").hidden && document.getElementById("followupq").textContent.includes(` + jsString(channels) + `)`) {
		t.Error("Ask a follow-up does not show what it follows up")
	}
	b.typeInto("question", "How many customers does the shop have?")
	b.click("ask")
	if state := b.waitState(60 * time.Second); state != "answered" {
		t.Fatalf("the follow-up ended %s:\n%s", state, pageText(b.dom()))
	}
	if got := b.evalString(`document.getElementById("askedq").textContent`); !strings.Contains(got, "(a follow-up)") {
		t.Errorf("the follow-up's answer does not say it is one: %q", got)
	}
	if !b.evalBool(`document.getElementById("chartkind").value === "number" && !document.getElementById("bignumber").hidden && document.getElementById("bignumber").textContent.startsWith("300")`) {
		t.Errorf("a single number is not shown big: %q", b.evalString(`document.getElementById("bignumber").textContent`))
	}
	// Show the work: the question's trace, its LLM calls and the vote.
	if !b.evalBool(`(document.getElementById("work").open = true) && true`) {
		t.Error("the show-the-work panel did not open")
	}
	b.waitFor(`document.querySelectorAll("#worklist li.work-task").length > 0 && document.querySelectorAll("#worklist li.work-decision").length > 0`, 15*time.Second)
	if got := b.evalString(`document.getElementById("worklist").textContent`); !strings.Contains(got, "LLM ") || !strings.Contains(got, "vote on round 0") || !strings.Contains(got, "answer: answered") {
		t.Errorf("the show-the-work panel lists no LLM call, vote or answer: %.600q (%s)", got, b.evalString(`document.getElementById("workmsg").textContent`))
	}
	// Thumbs up, then the history shows both questions.
	b.click("thumbup")
	b.waitFor(`document.getElementById("feedbackmsg").textContent.startsWith("Thanks")`, 10*time.Second)
	b.waitFor(`document.querySelectorAll("#history li").length >= 2 && document.getElementById("history").textContent.includes("marked right")`, 10*time.Second)
	if got := b.evalString(`document.getElementById("history").textContent`); !strings.Contains(got, channels) || !strings.Contains(got, "follow-up") {
		t.Errorf("history: %q", got)
	}

	// A time series is drawn as a line.
	b.click("endfollowup")
	b.typeInto("question", "For each month of 2024, how many orders were placed and what was their total amount? Round the amount to 2 decimals.")
	b.click("ask")
	if state := b.waitState(60 * time.Second); state != "answered" {
		t.Fatalf("the monthly question ended %s:\n%s", state, pageText(b.dom()))
	}
	if !b.evalBool(`document.getElementById("chartkind").value === "line" && document.querySelector("#chart canvas") !== null && Array.from(document.getElementById("chartkind").options).some(o => o.value === "bar")`) {
		t.Errorf("a time series: chart %q of %s, want a line (and bars to switch to)", b.evalString(`document.getElementById("chartkind").value`),
			b.evalString(`Array.from(document.getElementById("chartkind").options).map(o => o.value).join(",")`))
	}
	b.screenshot("page-line.png")

	// A question the simulator has no answer for says so, not as an error.
	b.typeInto("question", "What is the meaning of life?")
	b.click("ask")
	if state := b.waitState(30 * time.Second); state != "failed" {
		t.Fatalf("an unknown question ended %s", state)
	}
	if !b.evalBool(`!document.getElementById("notice").hidden && document.getElementById("notice").textContent.includes("simulator has no answer") && document.getElementById("error").hidden && document.getElementById("answer").hidden`) {
		t.Errorf("an unknown question: notice %q, error %q", b.evalString(`document.getElementById("notice").textContent`), b.evalString(`document.getElementById("error").textContent`))
	}

	// Another question, cancelled while it runs: its LLM calls are held at
	// the gate, so it cannot finish before the click, however slow or
	// fast the machine.
	arrived := gate.hold()
	b.typeInto("question", "Which five products sold the most units, not counting cancelled orders? Give the product name and the units sold.")
	b.click("ask")
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("the question to cancel made no LLM call in 60s:\n%s", pageText(b.dom()))
	}
	b.waitFor(`!document.getElementById("cancel").hidden`, 10*time.Second)
	b.click("cancel")
	if state := b.waitState(30 * time.Second); state != "cancelled" {
		t.Fatalf("cancelled question ended %s:\n%s", state, pageText(b.dom()))
	}
	gate.release()

	// The permalink opens the answer, at desktop and phone width: the
	// elements are there and nothing runs off the screen.
	for _, width := range []int{1200, 390} {
		b.viewport(width, 844)
		b.navigate(ts.URL + "/?id=" + id)
		if state := b.waitState(20 * time.Second); state != "answered" {
			t.Fatalf("the permalink at %d px: %s\n%s", width, state, pageText(b.dom()))
		}
		b.waitFor(`document.querySelector("#chart canvas") !== null`, 10*time.Second)
		for _, el := range []string{"question", "ask", "sql", "result", "chart", "csv", "confidence", "cost", "thumbup", "history"} {
			if !b.evalBool(`(() => { const r = document.getElementById("` + el + `").getBoundingClientRect(); return r.width > 0 && r.height > 0 && r.left >= 0 && r.right <= document.documentElement.clientWidth + 0.5; })()`) {
				t.Errorf("at %d px #%s is not visible within the screen: %s", width, el, b.evalString(`JSON.stringify(document.getElementById("`+el+`").getBoundingClientRect())`))
			}
		}
		if over := b.evalString(`String(document.documentElement.scrollWidth - document.documentElement.clientWidth)`); over != "0" {
			t.Errorf("at %d px the page is %s px wider than the screen", width, over)
		}
		if !b.evalBool(`getComputedStyle(document.querySelector("#result td.num")).textAlign === "right"`) {
			t.Errorf("at %d px numbers are not right-aligned", width)
		}
		b.screenshot(fmt.Sprintf("page-%d.png", width))
	}
	b.checkNoErrors()
	t.Logf("test ran %s", time.Since(start).Round(time.Millisecond))
}

// checkAnswer checks the answer on the page: the SQL formatted and
// highlighted, the table's numbers right-aligned and formatted, the
// confidence in one line, the agreement, the time and the cost.
func checkAnswer(t *testing.T, b *browser) {
	t.Helper()
	sql := b.evalString(`document.getElementById("sql").textContent`)
	if !strings.HasPrefix(sql, "SELECT") && !strings.HasPrefix(sql, "--") || !strings.Contains(sql, "\nFROM") || !b.evalBool(`document.querySelectorAll("#sql span.kw").length > 1`) {
		t.Errorf("#sql is not formatted and highlighted:\n%s", sql)
	}
	if !b.evalBool(`document.querySelectorAll("#result tbody tr").length > 1 && document.querySelectorAll("#result td.num").length > 0 && getComputedStyle(document.querySelector("#result td.num")).textAlign === "right"`) {
		t.Errorf("#result has no right-aligned numbers: %s", b.evalString(`document.getElementById("result").outerHTML`))
	}
	for id, want := range map[string]string{
		"confidence": `^(high|low)$`,
		"confline":   `^(High|Low) confidence: \d+ of 2 `,
		"agreed":     `^[12] of 2 candidates agreed`,
		"elapsed":    `^Took \d+(\.\d)? s$`,
		"cost":       `^Cost: \d+ LLM calls? · [\d,]+ tokens? · \d+ warehouse quer`,
		"status":     `^Answered`,
	} {
		if got := b.evalString(`document.getElementById("` + id + `").textContent`); !regexp.MustCompile(want).MatchString(got) {
			t.Errorf("#%s: %q, want %s", id, got, want)
		}
	}
	if !b.evalBool(`document.getElementById("error").hidden`) {
		t.Errorf("#error shown: %s", b.evalString(`document.getElementById("error").textContent`))
	}
}

// chromiumBin finds Chromium or skips the test.
func chromiumBin(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	t.Skip("chromium not installed (apt-get install -y chromium): the page is not checked in a browser")
	return ""
}

// browser is headless Chromium driven over the DevTools protocol on
// --remote-debugging-pipe (JSON messages ended by NUL on fds 3 and 4), with
// one page attached. internal/testutil/chromium only dumps a file's DOM
// once virtual time runs out, which does not wait for a question that
// takes real time; this waits in real time, types and clicks.
type browser struct {
	t       *testing.T
	cmd     *exec.Cmd
	w       io.WriteCloser
	stderr  bytes.Buffer
	session string
	mu      sync.Mutex
	next    int
	pending map[int]chan cdpMessage
	errs    []string
	closed  chan struct{}
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func startBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{t: t, w: toW, pending: map[int]chan cdpMessage{}, closed: make(chan struct{})}
	// No sandbox (tests run as root in containers), no background
	// services, a fresh profile.
	b.cmd = exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--user-data-dir="+t.TempDir(), "--window-size=1200,900", "--remote-debugging-pipe", "about:blank")
	b.cmd.ExtraFiles = []*os.File{toR, fromW} // fds 3 and 4
	b.cmd.Stderr = &b.stderr
	b.cmd.WaitDelay = 5 * time.Second
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	toR.Close()
	fromW.Close()
	go b.read(fromR)
	t.Cleanup(b.close)

	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	for _, m := range []string{"Runtime.enable", "Log.enable", "Page.enable"} {
		b.call(b.session, m, nil, nil)
	}
	return b
}

// read dispatches Chromium's messages: answers to their callers, and the
// page's errors (exceptions, console errors, CSP violations) to errs.
func (b *browser) read(r io.ReadCloser) {
	defer close(b.closed)
	defer r.Close()
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(line[:len(line)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if ch, ok := b.pending[m.ID]; ok && m.ID != 0 {
			delete(b.pending, m.ID)
			ch <- m
		}
		switch m.Method {
		case "Runtime.exceptionThrown":
			var p struct {
				Details struct {
					Text      string `json:"text"`
					Exception struct {
						Description string `json:"description"`
					} `json:"exception"`
				} `json:"exceptionDetails"`
			}
			_ = json.Unmarshal(m.Params, &p)
			b.errs = append(b.errs, "exception: "+p.Details.Text+" "+p.Details.Exception.Description)
		case "Runtime.consoleAPICalled":
			var p struct {
				Type string            `json:"type"`
				Args []json.RawMessage `json:"args"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Type == "error" || p.Type == "assert" {
				b.errs = append(b.errs, fmt.Sprintf("console.%s: %s", p.Type, p.Args))
			}
		case "Log.entryAdded":
			var p struct {
				Entry struct {
					Source, Level, Text, URL string
				} `json:"entry"`
			}
			_ = json.Unmarshal(m.Params, &p)
			// Failed requests are logged by the network; the 401 before the
			// key is pasted is expected.
			if p.Entry.Level == "error" && p.Entry.Source != "network" {
				b.errs = append(b.errs, p.Entry.Source+": "+p.Entry.Text)
			}
		}
		b.mu.Unlock()
	}
}

// call sends one command (to the page when session is set) and decodes
// its result into out.
func (b *browser) call(session, method string, params, out any) {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	p, _ := json.Marshal(params)
	if params == nil {
		p = []byte("{}")
	}
	msg, _ := json.Marshal(cdpMessage{ID: id, Method: method, Params: p, SessionID: session})
	if _, err := b.w.Write(append(msg, 0)); err != nil {
		b.t.Fatalf("chromium %s: %v\n%s", method, err, b.stderr.String())
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			b.t.Fatalf("chromium %s: %s", method, m.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(m.Result, out); err != nil {
				b.t.Fatalf("chromium %s: %v", method, err)
			}
		}
	case <-b.closed:
		b.t.Fatalf("chromium exited during %s\n%s", method, b.stderr.String())
	case <-time.After(30 * time.Second):
		b.t.Fatalf("chromium %s: no answer in 30s", method)
	}
}

// eval evaluates a JS expression in the page (awaiting a promise) and
// returns its value as JSON.
func (b *browser) eval(expr string) json.RawMessage {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r)
	if r.Exception != nil {
		b.t.Fatalf("evaluating %s: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	return r.Result.Value
}

func (b *browser) evalBool(expr string) bool {
	b.t.Helper()
	var v bool
	_ = json.Unmarshal(b.eval(expr), &v)
	return v
}

func (b *browser) evalString(expr string) string {
	b.t.Helper()
	var v string
	_ = json.Unmarshal(b.eval(expr), &v)
	return v
}

// waitFor waits until a JS expression is true.
func (b *browser) waitFor(expr string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for !b.evalBool(expr) {
		if time.Now().After(deadline) {
			b.mu.Lock()
			errs := strings.Join(b.errs, "\n")
			b.mu.Unlock()
			b.t.Fatalf("waited %s for %s; the page's errors:\n%s\nthe page:\n%s", timeout, expr, errs, pageText(b.dom()))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitState waits until the question on the page ends and returns how.
func (b *browser) waitState(timeout time.Duration) string {
	b.t.Helper()
	b.waitFor(`["answered", "failed", "cancelled"].includes(document.body.dataset.state)`, timeout)
	return b.evalString(`document.body.dataset.state`)
}

// navigate loads u and waits for the page's script to have started.
func (b *browser) navigate(u string) {
	b.t.Helper()
	b.call(b.session, "Page.navigate", map[string]any{"url": u}, nil)
	b.waitFor(`document.readyState === "complete" && location.href === `+jsString(u)+` && !!document.body.dataset.state`, 10*time.Second)
}

// typeInto focuses an input, clears it and types text as keyboard input.
func (b *browser) typeInto(id, text string) {
	b.t.Helper()
	b.eval(`(() => { const e = document.getElementById(` + jsString(id) + `); e.scrollIntoView({block: "center"}); e.focus(); e.select(); })()`)
	b.call(b.session, "Input.insertText", map[string]any{"text": text}, nil)
}

// click clicks the middle of an element with the mouse.
func (b *browser) click(id string) {
	b.t.Helper()
	var xy []float64
	_ = json.Unmarshal(b.eval(`(() => { const e = document.getElementById(`+jsString(id)+`); e.scrollIntoView({block: "center"});
		const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`), &xy)
	if len(xy) != 2 {
		b.t.Fatalf("#%s has no position", id)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		b.call(b.session, "Input.dispatchMouseEvent", map[string]any{"type": typ, "x": xy[0], "y": xy[1], "button": "left", "clickCount": 1}, nil)
	}
}

// viewport makes the page width px wide, as a phone when narrow.
func (b *browser) viewport(width, height int) {
	b.t.Helper()
	b.call(b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height,
		"deviceScaleFactor": 1, "mobile": width < 600}, nil)
}

// screenshot saves a PNG of the page under $QUORUM_SCREENSHOTS, when set,
// for a person to look at.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("QUORUM_SCREENSHOTS")
	if dir == "" {
		return
	}
	var r struct {
		Data []byte `json:"data"`
	}
	b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r)
	if err := os.WriteFile(filepath.Join(dir, name), r.Data, 0o644); err != nil {
		b.t.Errorf("screenshot: %v", err)
	}
}

// dom is the page's DOM as serialized now.
func (b *browser) dom() string {
	b.t.Helper()
	return b.evalString(`document.documentElement.outerHTML`)
}

// checkNoErrors fails the test on the page's script errors, console
// errors and policy violations.
func (b *browser) checkNoErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("page error: %s", e)
	}
}

func (b *browser) close() {
	done := make(chan struct{})
	go func() {
		msg, _ := json.Marshal(cdpMessage{ID: 1 << 30, Method: "Browser.close", Params: json.RawMessage("{}")})
		_, _ = b.w.Write(append(msg, 0))
		_ = b.w.Close()
		_ = b.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pageText is a DOM's text, for failure messages.
func pageText(dom string) string {
	s := regexp.MustCompile(`(?s)<style.*?</style>|<script.*?</script>|<!--.*?-->`).ReplaceAllString(dom, "")
	s = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`[ \t]+`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`\n\s*\n+`).ReplaceAllString(s, "\n")
	if len(s) > 4000 {
		s = s[:4000] + "…"
	}
	return strings.TrimSpace(s)
}

// llmGate passes requests to the simulated LLM, except while held: then
// each request waits until release (or its caller gives up), and the
// first to arrive is signalled, so a test acts while a call is in flight.
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
	if held != nil {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-held:
		case <-r.Context().Done():
			return
		}
	}
	g.h.ServeHTTP(w, r)
}
