// Package chromium renders pages in headless Chromium for tests, so a test
// can check what a browser drew rather than only the markup it was given.
package chromium

import (
	"bytes"
	"context"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// DumpDOM loads the HTML file at path in headless Chromium, lets its
// scripts run, and returns the DOM as serialized after them. It skips the
// test when Chromium is not installed.
func DumpDOM(t testing.TB, path string) string {
	t.Helper()
	bin := lookPath(t, "report rendering not checked")
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatalf("chromium: %s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// No sandbox (tests run as root in containers), no network or
	// background services (the page must stand alone), a fresh profile.
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000",
		"--dump-dom", (&url.URL{Scheme: "file", Path: abs}).String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Chromium's helper processes can hold the pipes after it is killed.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", abs, err, stderr.String())
	}
	return stdout.String()
}

// CheckRendered checks a DOM DumpDOM returned for a quorum report: the page's script ran, each section
// is there with a heading, and at least minCharts charts all drew.
func CheckRendered(t testing.TB, dom string, minCharts int, ids ...string) {
	t.Helper()
	if !regexp.MustCompile(`<body[^>]*data-ready="yes"`).MatchString(dom) {
		t.Fatalf("the page's script did not finish (no data-ready on body):\n%.2000s", dom)
	}
	for _, id := range ids {
		if !regexp.MustCompile(`<section id="` + id + `"[^>]*><h2>`).MatchString(dom) {
			t.Errorf("no section %q with a heading", id)
		}
	}
	charts := regexp.MustCompile(`<svg[^>]*class="chart"[^>]*>`).FindAllString(dom, -1)
	if len(charts) < minCharts {
		t.Errorf("%d charts, want at least %d", len(charts), minCharts)
	}
	for _, c := range charts {
		if !strings.Contains(c, `data-drawn="yes"`) {
			t.Errorf("chart not drawn: %s", c)
		}
	}
}

// lookPath finds Chromium, or skips the test saying what goes unchecked.
func lookPath(t testing.TB, unchecked string) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if bin, err := exec.LookPath(name); err == nil {
			return bin
		}
	}
	t.Skip("chromium not installed (apt-get install -y chromium): " + unchecked)
	return ""
}
