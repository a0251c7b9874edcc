package chromium

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// Browser is headless Chromium driven over the DevTools protocol on
// --remote-debugging-pipe (JSON messages ended by NUL on fds 3 and 4),
// with one page attached: a test loads a page, evaluates, types, clicks
// and waits in real time, and reads the page's errors (exceptions, console
// errors, policy violations). DumpDOM suits a page that only renders.
type Browser struct {
	t       testing.TB
	cmd     *exec.Cmd
	w       io.WriteCloser
	stderr  bytes.Buffer
	session string
	mu      sync.Mutex
	next    int
	pending map[int]chan cdpMessage
	errs    []string
	ignored map[string]bool // log sources whose errors are not the page's
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

// Start starts headless Chromium with one blank page, closed when the
// test ends; it skips the test when Chromium is not installed.
func Start(t testing.TB) *Browser {
	t.Helper()
	tier.Servers(t, "Chromium")
	bin := lookPath(t, "the page is not checked in a browser")
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &Browser{t: t, w: toW, pending: map[int]chan cdpMessage{}, ignored: map[string]bool{}, closed: make(chan struct{})}
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
	// A policy violation is also an event in the page: report it as a
	// console error, whatever the browser's own log says of it.
	b.call(b.session, "Page.addScriptToEvaluateOnNewDocument", map[string]any{"source": `addEventListener("securitypolicyviolation",
		function (e) { console.error("CSP violation: " + e.violatedDirective + " " + e.blockedURI); });`}, nil)
	return b
}

// read dispatches Chromium's messages: answers to their callers, and the
// page's errors to errs.
func (b *Browser) read(r io.ReadCloser) {
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
			// CSP violations arrive here (source "security"), as do
			// other errors the browser logs.
			var p struct {
				Entry struct {
					Source, Level, Text, URL string
				} `json:"entry"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Entry.Level == "error" && !b.ignored[p.Entry.Source] {
				b.errs = append(b.errs, p.Entry.Source+": "+p.Entry.Text)
			}
		}
		b.mu.Unlock()
	}
}

// call sends one command (to the page when session is set) and decodes
// its result into out.
func (b *Browser) call(session, method string, params, out any) {
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

// Eval evaluates a JS expression in the page (awaiting a promise) and
// decodes its value into out (nil: ignore it).
func (b *Browser) Eval(expr string, out any) {
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
	if out != nil && len(r.Result.Value) > 0 {
		if err := json.Unmarshal(r.Result.Value, out); err != nil {
			b.t.Fatalf("evaluating %s: its value %s: %v", expr, r.Result.Value, err)
		}
	}
}

// Bool evaluates a JS expression that is true or false.
func (b *Browser) Bool(expr string) bool {
	b.t.Helper()
	var v bool
	b.Eval(expr, &v)
	return v
}

// String evaluates a JS expression that is a string ("" when it is null
// or undefined).
func (b *Browser) String(expr string) string {
	b.t.Helper()
	var v string
	b.Eval(expr, &v)
	return v
}

// WaitFor waits until a JS expression is true, polling the page; on
// timeout it fails the test with the page's errors and its text.
func (b *Browser) WaitFor(expr string, timeout time.Duration) {
	b.t.Helper()
	if !b.Until(expr, timeout) {
		b.t.Fatalf("waited %s for %s; the page's errors:\n%s\nthe page:\n%s", timeout, expr, strings.Join(b.Errors(), "\n"), b.Text())
	}
}

// Until reports whether expr (a JS expression) became true within
// timeout, for a caller that says itself what went wrong.
func (b *Browser) Until(expr string, timeout time.Duration) bool {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for !b.Bool(expr) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// Open loads u and waits until the page at u has loaded and ready (a JS
// expression) is true. Checking the address keeps a wait that starts
// before the navigation commits from passing on the previous page.
func (b *Browser) Open(u, ready string, timeout time.Duration) {
	b.t.Helper()
	b.call(b.session, "Page.navigate", map[string]any{"url": u}, nil)
	b.WaitFor(`document.readyState === "complete" && location.href === `+JSString(u)+` && (`+ready+`)`, timeout)
}

// OpenFile loads the HTML file at path and waits until ready (a JS
// expression) is true.
func (b *Browser) OpenFile(path, ready string, timeout time.Duration) {
	b.t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		b.t.Fatalf("chromium: %s: %v", path, err)
	}
	b.Open((&url.URL{Scheme: "file", Path: abs}).String(), ready, timeout)
}

// Type focuses the input a CSS selector finds, selects what it holds
// and types text over it as keyboard input.
func (b *Browser) Type(selector, text string) {
	b.t.Helper()
	var found bool
	b.Eval(`(() => { const e = document.querySelector(`+JSString(selector)+`); if (!e) return false;
		e.scrollIntoView({block: "center"}); e.focus(); e.select(); return true; })()`, &found)
	if !found {
		b.t.Fatalf("no element %s to type into", selector)
	}
	b.call(b.session, "Input.insertText", map[string]any{"text": text}, nil)
}

// Click clicks the middle of the element a CSS selector finds, with the
// mouse (so what covers it, or its being hidden, counts).
func (b *Browser) Click(selector string) {
	b.t.Helper()
	var xy []float64
	b.Eval(`(() => { const e = document.querySelector(`+JSString(selector)+`); if (!e) return null; e.scrollIntoView({block: "center"});
		const r = e.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()`, &xy)
	if len(xy) != 2 {
		b.t.Fatalf("no element %s to click", selector)
	}
	for _, typ := range []string{"mouseMoved", "mousePressed", "mouseReleased"} {
		b.call(b.session, "Input.dispatchMouseEvent", map[string]any{"type": typ, "x": xy[0], "y": xy[1], "button": "left", "clickCount": 1}, nil)
	}
}

// Viewport makes the page width px wide, as a phone when narrow.
func (b *Browser) Viewport(width, height int) {
	b.t.Helper()
	b.call(b.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height,
		"deviceScaleFactor": 1, "mobile": width < 600}, nil)
}

// IgnoreLog stops counting errors the browser logs from source (such as
// "network", for a page that meets refused requests by design) as the
// page's.
func (b *Browser) IgnoreLog(source string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ignored[source] = true
}

// Errors are the page's script exceptions, console errors and logged
// errors (CSP violations among them) so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

func (b *Browser) close() {
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

// JSString quotes s as a JS string literal.
func JSString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Call sends a DevTools command to the page and decodes its result into
// out (nil: ignore it), for what the other methods do not cover.
func (b *Browser) Call(method string, params, out any) {
	b.t.Helper()
	b.call(b.session, method, params, out)
}

// Screenshot saves a PNG of the page's viewport as name under
// $QUORUM_SCREENSHOTS, when set, for a person to look at.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	b.screenshot(name, false)
}

// ScreenshotPage is Screenshot of the whole page, beyond the viewport.
func (b *Browser) ScreenshotPage(name string) {
	b.t.Helper()
	b.screenshot(name, true)
}

func (b *Browser) screenshot(name string, whole bool) {
	b.t.Helper()
	dir := os.Getenv("QUORUM_SCREENSHOTS")
	if dir == "" {
		return
	}
	var r struct {
		Data []byte `json:"data"`
	}
	b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": whole}, &r)
	if err := os.WriteFile(filepath.Join(dir, name), r.Data, 0o644); err != nil {
		b.t.Errorf("screenshot: %v", err)
	}
}

// DOM is the page's DOM as serialized now.
func (b *Browser) DOM() string {
	b.t.Helper()
	return b.String(`document.documentElement.outerHTML`)
}

// Text is the page's text now, without styles and scripts, shortened,
// for failure messages.
func (b *Browser) Text() string {
	b.t.Helper()
	return domText(b.DOM())
}

// domText is a DOM's text, shortened to 4000 bytes.
func domText(dom string) string {
	s := regexp.MustCompile(`(?s)<style.*?</style>|<script.*?</script>|<!--.*?-->`).ReplaceAllString(dom, "")
	s = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`[ \t]+`).ReplaceAllString(s, " ")
	s = regexp.MustCompile(`\n\s*\n+`).ReplaceAllString(s, "\n")
	if len(s) > 4000 {
		s = s[:4000] + "…"
	}
	return strings.TrimSpace(s)
}
