package agents

import (
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
)

func TestBuiltinRegistry(t *testing.T) {
	r := Builtin()
	if _, err := r.Lookup(Default); err != nil || r.Default() != Default {
		t.Fatalf("the registry's default is %q, want %s (%v)", r.Default(), Default, err)
	}
	_, err := r.Lookup("nosuch")
	if err == nil || !strings.Contains(err.Error(), "reforce") {
		t.Fatalf("unknown agent error %v, want the list of agents", err)
	}
	for _, name := range r.Names() {
		d, _ := r.Lookup(name)
		agenttest.CheckDefinition(t, d)
	}
}
