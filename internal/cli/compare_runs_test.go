package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareRuns: quorum compare over a real run's folder: against itself
// nothing changed (exit 0); against a copy with one example's result table
// changed, that example alone is listed, --json names it, and
// --fail-on-change exits 1; a folder with no run exits 2 naming it.
func TestCompareRuns(t *testing.T) {
	t.Parallel()
	a := filepath.Join(t.TempDir(), "a")
	if log, err := run(t, "solve", "--dataset", demo, "--examples", "6", "--votes", "2", "--out", a); err != nil {
		t.Fatalf("solve: %v\n%s", err, log)
	}
	out, err := run(t, "compare", a, a)
	if err != nil || !strings.Contains(out, "answers: 0 of 6 changed") || !strings.Contains(out, "no example's answer, SQL or judgement changed") {
		t.Fatalf("a run against itself: %v\n%s", err, out)
	}

	b := filepath.Join(t.TempDir(), "b")
	if err := os.CopyFS(b, os.DirFS(a)); err != nil {
		t.Fatal(err)
	}
	var changed string
	for _, id := range []string{"local001", "local002", "local003", "local004", "local005", "local006"} {
		if _, err := os.Stat(filepath.Join(b, id+".csv")); err == nil {
			changed = id
			break
		}
	}
	if changed == "" {
		t.Fatal("no answered example among the six")
	}
	if err := os.WriteFile(filepath.Join(b, changed+".csv"), []byte("x\n42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(t, "compare", a, b, "--fail-on-change")
	if exitCode(err) != 1 || !strings.Contains(out, "answers: 1 of 6 changed") || !strings.Contains(out, "\n"+changed+" ") {
		t.Errorf("one result changed, --fail-on-change: exit %d (%v), want 1 and %s listed\n%s", exitCode(err), err, changed, out)
	}
	page := filepath.Join(t.TempDir(), "compare.html")
	if _, err := run(t, "compare", a, b, "--html", page); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	// Both runs have the example's trace page (b is a's copy): linked
	// from where the page is.
	if rel, _ := filepath.Rel(filepath.Dir(page), filepath.Join(b, "examples", changed+".html")); !strings.Contains(string(html), "<td>"+changed+"</td>") || !strings.Contains(string(html), `href="`+rel+`"`) {
		t.Errorf("--html: the page does not list %s linked to its trace %s:\n%s", changed, rel, html)
	}
	out, err = run(t, "compare", a, b, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var diffs []struct {
		Changed  int `json:"answers_changed"`
		Examples []struct {
			ID      string `json:"instance_id"`
			Changed bool   `json:"answer_changed"`
		} `json:"examples"`
	}
	if err := json.Unmarshal([]byte(out), &diffs); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	var ids []string
	for _, e := range diffs[0].Examples {
		if e.Changed {
			ids = append(ids, e.ID)
		}
	}
	if len(diffs) != 1 || diffs[0].Changed != 1 || len(diffs[0].Examples) != 6 || strings.Join(ids, ",") != changed {
		t.Errorf("--json: %d comparisons, changed %v of %d examples; want 1, [%s] of 6", len(diffs), ids, len(diffs[0].Examples), changed)
	}

	out, err = run(t, "runs", "list", filepath.Dir(a), filepath.Dir(b))
	if err != nil || !strings.Contains(out, a+" ") || !strings.Contains(out, b+" ") || !strings.Contains(out, "/6 ") {
		t.Errorf("runs list over the two folders: %v\n%s", err, out)
	}

	empty := t.TempDir()
	if _, err := run(t, "compare", a, empty); exitCode(err) != 2 || !strings.Contains(err.Error(), empty) || !strings.Contains(err.Error(), "no run.json") {
		t.Errorf("a folder with no run: exit %d, %v; want 2 naming it", exitCode(err), err)
	}
}
