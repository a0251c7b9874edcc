package layout

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/quorumsql/quorum/"

// imports lists every package of the module (tests excluded) with the
// module's packages it imports, paths relative to the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	graph := make(map[string][]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		graph[pkg] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				graph[pkg] = append(graph[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return graph
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

func TestImportRules(t *testing.T) {
	graph := imports(t)
	if len(graph) < 40 {
		t.Fatalf("go list found %d packages of the module; expected the whole module (40 or more)", len(graph))
	}
	rules := []struct {
		name string
		// applies selects the importing packages the rule is about.
		applies func(pkg string) bool
		// forbidden says whether pkg may not import imp.
		forbidden func(pkg, imp string) bool
	}{
		{"a dataset is data: pkg/dataset imports only pkg/sqltext of the module",
			func(p string) bool { return p == "pkg/dataset" },
			func(_, imp string) bool { return imp != "pkg/sqltext" }},
		{"the applications are started only by the commands",
			func(p string) bool { return !under(p, "internal/cli") && !under(p, "internal/app") && !under(p, "e2e") },
			func(_, imp string) bool { return under(imp, "internal/app") }},
		{"libraries import no command",
			func(p string) bool { return !under(p, "cmd") },
			func(_, imp string) bool { return under(imp, "internal/cli") }},
		{"the seam imports no machinery",
			func(p string) bool { return p == "pkg/runtime/agent" },
			func(_, imp string) bool { return under(imp, "internal") || under(imp, "pkg/runtime") }},
		{"an agent reaches the runtime only through the seam",
			func(p string) bool { return under(p, "pkg/agents") && !under(p, "pkg/agents/agenttest") },
			func(_, imp string) bool {
				return under(imp, "internal/runtime") || under(imp, "internal/queue") ||
					(under(imp, "pkg/runtime") && imp != "pkg/runtime/agent")
			}},
		{"pkg/ imports internal/ only where the allowance below says why",
			func(p string) bool { return under(p, "pkg") },
			func(p, imp string) bool { return under(imp, "internal") && pkgToInternal[p+" -> "+imp] == "" }},
		{"nothing under pkg/ imports a test helper",
			func(p string) bool { return under(p, "pkg") },
			func(_, imp string) bool { return under(imp, "internal/testutil") }},
	}
	for _, r := range rules {
		for pkg, imps := range graph {
			if !r.applies(pkg) {
				continue
			}
			for _, imp := range imps {
				if r.forbidden(pkg, imp) {
					t.Errorf("%s imports %s, breaking the rule %q", pkg, imp, r.name)
				}
			}
		}
	}
}

// pkgToInternal are the imports from pkg/ into internal/ that stay, each
// with its reason (issue 56: at most 8). None puts an internal type in an
// exported API.
var pkgToInternal = map[string]string{
	"pkg/agents/dbinfo -> internal/rdb": "the table-information cache is shared through Redis, whose keys all live in internal/rdb",
	"pkg/llm -> internal/redact":        "an endpoint's error names its URL with the credentials hidden, by the one redaction",
}
