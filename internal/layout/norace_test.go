package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makeVar returns the words of the Makefile variable name (its ":="
// definition, continuation lines joined).
func makeVar(t *testing.T, makefile, name string) []string {
	t.Helper()
	joined := strings.ReplaceAll(makefile, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			if v, ok := strings.CutPrefix(strings.TrimSpace(rest), ":="); ok {
				return strings.Fields(v)
			}
		}
	}
	t.Fatalf("the Makefile defines no %s :=", name)
	return nil
}

var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)

// TestNoRaceTestsRunPlain guards the Makefile's NORACE list: the race
// step skips those names in every RACE package and the plain step runs
// them only in NORACE_PKGS, so a name defined in a RACE package outside
// NORACE_PKGS would run nowhere, and a name defined nowhere is a list gone
// stale.
func TestNoRaceTestsRunPlain(t *testing.T) {
	root := moduleRoot(t)
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	norace := map[string]bool{}
	for _, n := range makeVar(t, string(mk), "NORACE") {
		norace[n] = true
	}
	plain := map[string]bool{}
	for _, p := range makeVar(t, string(mk), "NORACE_PKGS") {
		plain[filepath.Clean(strings.TrimPrefix(p, "./"))] = true
	}
	found := map[string][]string{}
	for _, dir := range makeVar(t, string(mk), "RACE") {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
				if norace[m[1]] {
					found[m[1]] = append(found[m[1]], rel)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for n := range norace {
		if len(found[n]) == 0 {
			t.Errorf("NORACE names %s, which is no test of a RACE package: remove it from the Makefile", n)
		}
		for _, dir := range found[n] {
			if !plain[dir] {
				t.Errorf("%s (in %s) is in NORACE: the race step skips it, but %s is not in NORACE_PKGS, so the plain step does not run it", n, dir, dir)
			}
		}
	}
}
