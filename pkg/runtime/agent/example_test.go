package agent_test

import (
	"context"
	"fmt"

	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// counter is an agent of one task kind: count, whose payload names a
// table.
type counter struct{}

type countTable struct {
	Table string `json:"table"`
}

func (counter) Start(_ context.Context, c *agent.Context) (*agent.Dispatch, error) {
	t, err := agent.NewTask("count", "count.0", 0, []int{0}, countTable{Table: "customers"})
	return &agent.Dispatch{Round: 0, Expect: 1, Tasks: []agent.Task{t}}, err
}

func (counter) Decide(_ context.Context, _ *agent.Context, _ int, cands []*agent.Candidate) (*agent.Decision, error) {
	return &agent.Decision{Winner: cands[0], Confidence: "low", Method: "first"}, nil
}

// count is the kind's handler: it gets its payload decoded.
func (counter) count(_ context.Context, _ *agent.Context, t agent.Task, p countTable) (*agent.Outcome, error) {
	sql := "SELECT COUNT(*) FROM " + p.Table
	return &agent.Outcome{Results: []agent.Result{{Index: t.Slots[0], SQL: sql, Status: agent.StatusOK}}}, nil
}

// ExampleRegister registers a task kind with its pool, payload type and
// handler; the runtime decodes each task's payload and calls the handler
// (Definition.Execute), and a payload that does not decode fails for
// good.
func ExampleRegister() {
	def := &agent.Definition{Name: "counter", Doc: "counts a table", New: func(agent.Config) (agent.Agent, error) { return counter{}, nil }}
	agent.Register(&def.Kinds, "count", agent.Explorer, "count a table's rows", counter.count)

	ag, _ := def.New(agent.Config{})
	d, _ := ag.Start(context.Background(), &agent.Context{})
	out, err := def.Execute(context.Background(), ag, &agent.Context{}, d.Tasks[0])
	fmt.Println(out.Results[0].SQL, err)

	bad := agent.Task{Kind: "count", ID: "count.1", Payload: []byte(`{"table": 7}`)}
	_, err = def.Execute(context.Background(), ag, &agent.Context{}, bad)
	fmt.Println("permanent:", agent.IsPermanent(err))
	for _, k := range def.Kinds.List() {
		fmt.Printf("%s on %s: %s\n", k.Name, k.Pool, k.Doc)
	}
	// Output:
	// SELECT COUNT(*) FROM customers <nil>
	// permanent: true
	// count on explore: count a table's rows
}

// ExampleNewRegistry builds the registry a process runs agents from: one
// line per agent, the first the default (pkg/agents.Builtin is the
// shipped one).
func ExampleNewRegistry() {
	counterDef := &agent.Definition{Name: "counter"}
	agent.Register(&counterDef.Kinds, "count", agent.Explorer, "count a table's rows", counter.count)
	reg, err := agent.NewRegistry(
		counterDef,
		&agent.Definition{Name: "another"},
	)
	fmt.Println(reg.Names(), reg.Default(), err)
	_, err = reg.Lookup("reforce")
	fmt.Println(err)
	// Output:
	// [another counter] counter <nil>
	// unknown agent "reforce": the agents are another, counter
}
