package agenttest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// TestModelScripts: a rule sees the calls counted (per role with
// ByRole), its replies get a finish reason and the model's usage where
// they have none, a nil reply is a failed call, and every request is
// kept as it was sent.
func TestModelScripts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := agenttest.Script(func(req llm.Request, n int) *llm.Response {
		if req.Role == llm.RoleVote {
			return nil
		}
		if n == 1 {
			return &llm.Response{Text: "cut", FinishReason: "length", Usage: llm.Usage{CompletionTokens: 99}}
		}
		return &llm.Response{Text: fmt.Sprintf("%s %d", req.Role, n)}
	})
	m.Count = agenttest.ByRole
	msgs := []llm.Message{llm.User("first")}
	r, err := m.Chat(ctx, llm.Request{Role: llm.RoleGenerate, Messages: msgs})
	if err != nil || r.Text != "generate 0" || r.FinishReason != "stop" || r.Usage != (llm.Usage{PromptTokens: 10, CompletionTokens: 5, Attempts: 1}) {
		t.Errorf("first reply %+v, %v", r, err)
	}
	msgs[0].Content = "changed by the agent afterwards"
	if r, _ := m.Chat(ctx, llm.Request{Role: llm.RolePlan, Messages: []llm.Message{llm.User("plan")}}); r.Text != "plan 0" {
		t.Errorf("a role's first call saw n = %s", r.Text)
	}
	if r, _ := m.Chat(ctx, llm.Request{Role: llm.RoleGenerate}); r.FinishReason != "length" || r.Usage.CompletionTokens != 99 || r.Usage.PromptTokens != 10 {
		t.Errorf("a reply's own finish reason and usage: %+v", r)
	}
	var ce *llm.CallError
	if r, err := m.Chat(ctx, llm.Request{Role: llm.RoleVote}); r != nil || !errors.As(err, &ce) {
		t.Errorf("a nil reply: %v, %v; want a *llm.CallError", r, err)
	}
	if m.Calls() != 4 || m.CallsOf(llm.RoleGenerate) != 2 || len(m.Responses()) != 4 || m.Responses()[3] != nil {
		t.Errorf("%d calls, %d generate, responses %v", m.Calls(), m.CallsOf(llm.RoleGenerate), m.Responses())
	}
	if got := m.Asked(); got[0] != "first" || got[1] != "plan" || got[2] != "" {
		t.Errorf("asked %q: the first request must be kept as it was sent", got)
	}
	m.Reset()
	if r, _ := m.Chat(ctx, llm.Request{Role: llm.RoleGenerate}); m.Calls() != 1 || r.Text != "generate 0" {
		t.Errorf("after Reset: %d calls, %q", m.Calls(), r.Text)
	}
}

// TestModelSequencesAndRecords: Replies goes through its texts, the last
// repeated, and is safe for parallel calls; Down fails every call;
// Record forwards and keeps what came back untouched.
func TestModelSequencesAndRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := agenttest.Replies("a", "b")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.Chat(ctx, llm.Request{Messages: []llm.Message{llm.User("q")}})
		}()
	}
	wg.Wait()
	texts := map[string]int{}
	for _, r := range m.Responses() {
		texts[r.Text]++
	}
	if texts["a"] != 1 || texts["b"] != 7 {
		t.Errorf("replies %v, want a once then b", texts)
	}
	down := errors.New("endpoint down")
	if _, err := agenttest.Down(down).Chat(ctx, llm.Request{}); !errors.Is(err, down) {
		t.Errorf("Down: %v", err)
	}
	rec := agenttest.Record(agenttest.Texts(func(n int, last string) string { return "echo " + last }))
	r, err := rec.Chat(ctx, llm.Request{Messages: []llm.Message{llm.System("s"), llm.User("hello")}})
	if err != nil || r.Text != "echo hello" || rec.Calls() != 1 || rec.Responses()[0] != r || rec.Request(0).Messages[1].Content != "hello" {
		t.Errorf("recorded %+v, %v", r, err)
	}
}

// TestShapesReadAsTheirSQL: every readable shape reads as its SQL with
// pkg/reply, every unreadable one gets its re-ask.
func TestShapesReadAsTheirSQL(t *testing.T) {
	t.Parallel()
	const q = "SELECT name, COUNT(*) AS n FROM t GROUP BY name"
	for _, s := range agenttest.Shapes(q) {
		if got, err := reply.SQL(s.Reply.Text, s.Reply.FinishReason); err != nil || got != q || s.Reask != "" {
			t.Errorf("%s: read %q, %v", s.Name, got, err)
		}
	}
	for _, s := range agenttest.Unreadable(q) {
		var u *reply.Unreadable
		if _, err := reply.SQL(s.Reply.Text, s.Reply.FinishReason); !errors.As(err, &u) || u.Reask != s.Reask {
			t.Errorf("%s: %v, want the re-ask %q", s.Name, err, s.Reask)
		}
	}
}

// TestNewDataset: the dataset loads as a run loads it, its database read-
// only, gold and documents where the runtime finds them, and the agents'
// context without gold.
func TestNewDataset(t *testing.T) {
	t.Parallel()
	f := agenttest.NewDataset(t, "zoo", "CREATE TABLE animals (name TEXT, legs INTEGER); INSERT INTO animals VALUES ('ant', 6), ('bee', 6), ('cat', 4);",
		agenttest.Question{ID: "local001", Question: "How many animals have six legs?", Gold: "SELECT COUNT(*) AS n FROM animals WHERE legs = 6"},
		agenttest.Question{ID: "local002", Question: "Which animal is a pet?", Knowledge: "Pets have four legs."})
	if len(f.Examples) != 2 {
		t.Fatalf("%d examples", len(f.Examples))
	}
	e := f.Example(t, "local001")
	if e.Dialect != warehouse.SQLite || e.Gold.SQL == "" || len(e.Gold.Results) != 1 {
		t.Errorf("example %+v", e)
	}
	if b, err := os.ReadFile(e.Gold.Results[0]); err != nil || string(b) != "n\n2\n" {
		t.Errorf("gold result %q, %v", b, err)
	}
	if k := f.Example(t, "local002").ExternalKnowledge; k != "Pets have four legs." {
		t.Errorf("external knowledge %q", k)
	}
	wh := f.Warehouse(t, "local002")
	if res, err := wh.Query(context.Background(), "SELECT name FROM animals WHERE legs = 4", warehouse.Limits{}); err != nil || res.CSV() != "name\ncat\n" {
		t.Errorf("query: %v", err)
	}
	if _, err := wh.Query(context.Background(), "DELETE FROM animals", warehouse.Limits{}); err == nil {
		t.Error("the fixture database is writable")
	}
	c := agenttest.Context(t, f, e)
	if c.Example.Gold.SQL != "" || c.Dataset.GoldDir != "" || c.Store == nil || c.Ledger == nil || c.Warehouse == nil {
		t.Errorf("the agents' context %+v", c)
	}
	if only := f.Only(t, "local002"); len(only.Examples) != 1 || only.Examples[0].ID != "local002" || len(f.Examples) != 2 {
		t.Errorf("Only: %d examples", len(only.Examples))
	}
	if filepath.Base(agenttest.Demo(t).Dataset.Root) != "demo" {
		t.Error("Demo is not examples/demo")
	}
}

// TestCache: what is set is got and listed.
func TestCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var c agenttest.Cache
	if _, ok, _ := c.Get(ctx, "k"); ok {
		t.Error("an empty cache has k")
	}
	_ = c.Set(ctx, "k", "v")
	_ = c.Set(ctx, "a", "b")
	if v, ok, err := c.Get(ctx, "k"); v != "v" || !ok || err != nil || strings.Join(c.Keys(), ",") != "a,k" {
		t.Errorf("got %q %v %v, keys %v", v, ok, err, c.Keys())
	}
}

// recorder is a testing.TB that keeps what a check reports.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

type nop struct{}

func (nop) Start(context.Context, *agent.Context) (*agent.Dispatch, error) {
	return &agent.Dispatch{}, nil
}
func (nop) Decide(context.Context, *agent.Context, int, []*agent.Candidate) (*agent.Decision, error) {
	return &agent.Decision{}, nil
}

// TestCheckDefinition: a complete definition passes; each thing the
// runtime needs, missing, is reported.
func TestCheckDefinition(t *testing.T) {
	t.Parallel()
	good := func() *agent.Definition {
		d := &agent.Definition{Name: "good", Doc: "a test agent", Options: []agent.Option{{Name: "x", Default: "1", Usage: "an option"}},
			New: func(agent.Config) (agent.Agent, error) { return nop{}, nil }, Load: func(map[string]string) agent.Load { return agent.Load{Width: 1, Calls: 1} }}
		agent.Register(&d.Kinds, "k", agent.Generator, "a kind", func(nop, context.Context, *agent.Context, agent.Task, struct{}) (*agent.Outcome, error) {
			return nil, nil
		})
		return d
	}
	for _, tc := range []struct {
		name  string
		spoil func(d *agent.Definition)
		want  string
	}{
		{"complete", func(*agent.Definition) {}, ""},
		{"a name with a dot", func(d *agent.Definition) { d.Name = "a.b" }, "want a word"},
		{"no load", func(d *agent.Definition) { d.Load = nil }, "load estimate"},
		{"no kinds", func(d *agent.Definition) { d.Kinds = agent.Kinds{} }, "registers no task kind"},
		{"a kind twice", func(d *agent.Definition) {
			agent.Register(&d.Kinds, "k", agent.Explorer, "again", func(nop, context.Context, *agent.Context, agent.Task, struct{}) (*agent.Outcome, error) {
				return nil, nil
			})
		}, "task kind k registered twice"},
		{"an option without usage", func(d *agent.Definition) { d.Options[0].Usage = "" }, "option x has no usage line"},
	} {
		d := good()
		tc.spoil(d)
		r := &recorder{TB: t}
		agenttest.CheckDefinition(r, d)
		got := strings.Join(r.errs, "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: reported %q, want %q", tc.name, got, tc.want)
		}
	}
}
