package majority_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestTheDocQuotesTheAgent: every Go block of
// docs/agents/writing-an-agent.md is in this folder's files, so the page
// shows the agent as it is; the registration into pkg/agents.Builtin is
// Builtin's registry with the one line added.
func TestTheDocQuotesTheAgent(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/agents/writing-an-agent.md")
	if err != nil {
		t.Fatal(err)
	}
	builtin, err := os.ReadFile("../../../pkg/agents/agents.go")
	if err != nil {
		t.Fatal(err)
	}
	var sources strings.Builder
	for _, f := range []string{"majority.go", "majority_test.go", "example_test.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources.Write(b)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 8 {
		t.Fatalf("%d Go blocks in the page", len(blocks))
	}
	for _, b := range blocks {
		if without, added := strings.CutSuffix(b[1], ",\n\t\tmajority.Definition())\n"); added && strings.Contains(without, "ensemble.Definition(") {
			if !strings.Contains(string(builtin), without+")\n") {
				t.Errorf("the page's Builtin, less its added line, is not pkg/agents.Builtin's:\n%s", b[1])
			}
			continue
		}
		if !strings.Contains(sources.String(), b[1]) {
			t.Errorf("the page's block is not in examples/agents/majority:\n%s", b[1])
		}
	}
}
