package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// docPages are the README and the docs pages it links to (docs/*.md and
// docs/agents/*.md), relative to the repository, README first.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "docs/agents/*.md"} {
		found, err := filepath.Glob(filepath.Join("../..", pattern))
		if err != nil {
			t.Fatal(err)
		}
		sort.Strings(found)
		for _, f := range found {
			rel, _ := filepath.Rel("../..", f)
			pages = append(pages, filepath.ToSlash(rel))
		}
	}
	if len(pages) < 2 {
		t.Fatal("no docs/*.md page found")
	}
	return pages
}

var fenceLine = regexp.MustCompile("^\\s*(```|~~~)")

// TestREADMERenders: the README's and every docs page's code fences are
// balanced (an odd one turns the rest of a section into code), each docs
// page starts with a one-line title, and the README starts with the two
// commands a new user types.
func TestREADMERenders(t *testing.T) {
	for _, page := range docPages(t) {
		b, err := os.ReadFile(filepath.Join("../..", page))
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for i, line := range strings.Split(string(b), "\n") {
			if fenceLine.MatchString(line) {
				if open == 0 {
					open = i + 1
				} else {
					open = 0
				}
			}
		}
		if open != 0 {
			t.Errorf("%s: the code fence opened at line %d is never closed", page, open)
		}
		if first, _, _ := strings.Cut(string(b), "\n"); !strings.HasPrefix(first, "# ") {
			t.Errorf("%s:1 does not start with a one-line title (# …): %q", page, first)
		}
		if page == "README.md" {
			head := string(b[:min(len(b), 300)])
			if !strings.Contains(head, "make demo") || !strings.Contains(head, "make test") {
				t.Errorf("README.md does not start with make demo and make test:\n%s", head)
			}
		}
	}
}

// TestDocLinksResolve: every relative link of the README and the docs
// pages names a file or folder of the repository, and a link to a heading
// (page.md#heading, #heading) names one that page has, so moving a section
// between pages cannot leave a link behind.
func TestDocLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{} // page (slash path from the root) → its headings' anchors
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join("../..", filepath.FromSlash(page)))
		if err != nil {
			return nil
		}
		anchors[page] = headingAnchors(string(b))
		return anchors[page]
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code := regexp.MustCompile("`[^`]*`")
	for _, page := range docPages(t) {
		b, err := os.ReadFile(filepath.Join("../..", page))
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if fenceLine.MatchString(line) {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				dest := page
				if file != "" {
					dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
					if _, err := os.Stat(filepath.Join("../..", filepath.FromSlash(dest))); err != nil {
						t.Errorf("%s:%d links to %s, which does not exist (%s from the repository's root)", page, i+1, target, dest)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d links to %s: %s has no heading with the anchor #%s", page, i+1, target, dest, anchor)
				}
			}
		}
	}
}

// headingAnchors gives the anchors GitHub makes of a page's headings
// (outside code fences): lower case, punctuation dropped, spaces as
// hyphens, a repeated one numbered -1, -2, ….
func headingAnchors(page string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	linkText := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	inFence := false
	for _, line := range strings.Split(page, "\n") {
		if fenceLine.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if len(text) == len(line) || (text != "" && text[0] != ' ') {
			continue // "#tag", not a heading
		}
		text = linkText.ReplaceAllString(strings.TrimSpace(text), "$1")
		var slug strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}
