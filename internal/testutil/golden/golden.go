// Package golden pins generated text (the agents' prompts) to files under
// testdata/, so that a change of wording shows as a diff.
package golden

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Check compares each case with testdata/<name>.golden, or rewrites the
// files when update is set. Every golden file must belong to a case (none
// left behind by a rename). how says how to update, e.g.
// "go test ./pkg/agents/pexa -update".
func Check(t *testing.T, cases map[string]string, update bool, how string) {
	t.Helper()
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		got := cases[name]
		path := filepath.Join("testdata", name+".golden")
		if update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run %s to create it)", err, how)
		}
		if got != string(want) {
			t.Errorf("%s differs from %s (run %s if the change is intended):\n%s", name, path, how, got)
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.golden"))
	for _, f := range files {
		if _, ok := cases[strings.TrimSuffix(filepath.Base(f), ".golden")]; !ok {
			t.Errorf("%s pins nothing", f)
		}
	}
}
