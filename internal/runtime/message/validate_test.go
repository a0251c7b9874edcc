package message

import (
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

func TestValidateRefusesHostileFields(t *testing.T) {
	t.Parallel()
	good := func() *Task {
		return &Task{V: queue.Version, Run: "r1", Example: "local001", Agent: "reforce", Warehouse: "sqlite",
			Task: agent.Task{Kind: "generate", ID: "r0.c1"}}
	}
	ref := blob.Ref([]byte("x"))
	for _, tt := range []struct {
		name string
		msg  interface{ Validate() error }
		want string // "" = valid
	}{
		{"a good task", good(), ""},
		{"example escapes", func() *Task { t := good(); t.Example = "../../x"; return t }(), "example"},
		{"absolute example", func() *Task { t := good(); t.Example = "/etc/passwd"; return t }(), "example"},
		{"run with a wildcard", func() *Task { t := good(); t.Run = "r1.*"; return t }(), "run"},
		{"run with a key separator", func() *Task { t := good(); t.Run = "r1:x"; return t }(), "run"},
		{"kind with a newline", func() *Task { t := good(); t.Task.Kind = "gen\nFLUSHALL"; return t }(), "task kind"},
		{"empty task id", func() *Task { t := good(); t.Task.ID = ""; return t }(), "task id"},
		{"huge task id", func() *Task { t := good(); t.Task.ID = strings.Repeat("a", 300); return t }(), "task id"},
		{"negative round", func() *Task { t := good(); t.Task.Round = -1; return t }(), "negative"},
		{"bad join", func() *Task { t := good(); t.Task.Join = &agent.Join{Group: "g", Part: 3, Of: 2}; return t }(), "join part"},
		{"a task with its parent", func() *Task { t := good(); t.Parent = good(); return t }(), ""},
		{"parent of another run", func() *Task { t := good(); t.Parent = good(); t.Parent.Run = "r2"; return t }(), "parent"},
		{"parent of another example", func() *Task { t := good(); t.Parent = good(); t.Parent.Example = "local002"; return t }(), "parent"},
		{"hostile parent", func() *Task { t := good(); t.Parent = good(); t.Parent.Task.Kind = "a b"; return t }(), "parent: invalid task: task kind"},
		{"too many parents", func() *Task {
			t := good()
			for p, i := t, 0; i <= MaxAncestors; i++ {
				p.Parent = good()
				p = p.Parent
			}
			return t
		}(), "parents"},
		{"warehouse with a dot", func() *Task { t := good(); t.Warehouse = "a.b"; return t }(), "warehouse"},
		{"a good result", &CandidateResult{Run: "r1", Example: "local001", Agent: "reforce", Status: agent.StatusOK, CSVRef: ref}, ""},
		{"an agent's own status", &CandidateResult{Run: "r1", Example: "local001", Agent: "reforce", Status: "vote"}, ""},
		{"result status not a word", &CandidateResult{Run: "r1", Example: "local001", Agent: "reforce", Status: "ok; DROP"}, "status"},
		{"result ref is a key", &CandidateResult{Run: "r1", Example: "local001", Agent: "reforce", Status: agent.StatusOK, CSVRef: "quorum:run:r1:manifest"}, "blob reference"},
		{"a good final", &FinalAnswer{Run: "r1", Example: "local001", Status: "answered", CSVRef: ref}, ""},
		{"final escapes", &FinalAnswer{Run: "r1", Example: "../x", Status: "answered"}, "example"},
		{"final candidate ref", &FinalAnswer{Run: "r1", Example: "local001", Status: "answered", CandidateRefs: []string{"sha256:zz"}}, "blob reference"},
		{"a final with its candidates' SQL", &FinalAnswer{Run: "r1", Example: "local001", Status: "answered",
			CandidateSQL: []CandidateSQL{{Index: 1, Status: agent.StatusOK, SQL: "SELECT 1", CSVRef: ref}, {Index: 2, Status: agent.StatusError, SQL: "SELEC"}}}, ""},
		{"final candidate SQL ref", &FinalAnswer{Run: "r1", Example: "local001", Status: "answered",
			CandidateSQL: []CandidateSQL{{Status: agent.StatusOK, SQL: "SELECT 1", CSVRef: "quorum:run:r1:manifest"}}}, "blob reference"},
		{"final candidate negative index", &FinalAnswer{Run: "r1", Example: "local001", Status: "answered",
			CandidateSQL: []CandidateSQL{{Round: 0, Index: -1, Status: agent.StatusOK, SQL: "SELECT 1"}}}, "negative"},
	} {
		err := tt.msg.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error about %s", tt.name, err, tt.want)
		}
	}
}

// TestAsParentKeepsFewAncestors: a continuation carries its parent with at
// most MaxAncestors generations in all, and the parent it was given is
// not changed.
func TestAsParentKeepsFewAncestors(t *testing.T) {
	t.Parallel()
	depth := func(t *Task) int {
		n := 0
		for ; t != nil; t = t.Parent {
			n++
		}
		return n
	}
	for _, n := range []int{1, 2, MaxAncestors, MaxAncestors + 3} {
		var chain *Task
		for i := range n {
			chain = &Task{Run: "r1", Example: "local001", Agent: "a", Task: agent.Task{Kind: "k", ID: "t" + strings.Repeat("x", i)}, Parent: chain}
		}
		p := chain.AsParent()
		if got, want := depth(p), min(n, MaxAncestors); got != want {
			t.Errorf("a chain of %d: the parent carries %d generations, want %d", n, got, want)
		}
		if got := depth(chain); got != n {
			t.Errorf("a chain of %d: AsParent changed the task's own chain to %d", n, got)
		}
	}
}
