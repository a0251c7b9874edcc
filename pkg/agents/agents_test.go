package agents

import (
	"strings"
	"testing"
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
		if len(d.Kinds.List()) == 0 || d.New == nil || d.Doc == "" || d.Load == nil {
			t.Errorf("agent %s: kinds, constructor, doc and load are required", name)
		}
		if _, err := d.CheckOptions(map[string]string{"no-such-option": "1"}); err == nil {
			t.Errorf("agent %s accepted an undeclared option", name)
		}
	}
}
