package majority_test

import (
	"context"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"

	"github.com/quorumsql/quorum/examples/agents/majority"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Example registers the agent in a registry of one's own, beside shipped
// ones (its one registration line), and solves a demo question in
// process, as quorum solve does, with a model that writes two agreeing
// queries in different shapes and a third that disagrees.
func Example() {
	reg, err := agent.NewRegistry(reforce.Definition(), pexa.Definition(), majority.Definition())
	if err != nil {
		panic(err)
	}
	def, err := reg.Lookup("majority")
	if err != nil {
		panic(err)
	}
	opts, err := def.RunOptions(nil, 3) // --votes 3
	if err != nil {
		panic(err)
	}
	model := agenttest.Replies(
		"Here is the query.\n```sql\nSELECT COUNT(*) AS n FROM customers\n```",
		"<think>\nCount the rows.\n</think>\n\nSELECT COUNT(*) AS n FROM customers;",
		"```sqlite\nSELECT COUNT(*) AS n FROM products\n```")
	ag, err := def.New(agent.Config{Options: opts, LLM: model})
	if err != nil {
		panic(err)
	}
	ds, err := dataset.Load("../../demo", dataset.Options{})
	if err != nil {
		panic(err)
	}
	set := &sqlite.Set{}
	defer set.Close()
	e, _ := ds.Example("local001")
	out, err := local.Solve(context.Background(), local.Config{Agent: ag, Def: def, Options: opts, Dataset: ds,
		Warehouses: &localdb.Warehouses{DS: ds, SQLite: set}, Run: "example", Seed: 1}, e)
	if err != nil {
		panic(err)
	}
	d := out.Decision
	fmt.Printf("%s: %s\n", e.Question, d.Winner.SQL)
	fmt.Printf("%s, %s confidence: %d of %d candidates agree; %d LLM calls\n", d.Method, d.Confidence, len(d.Agreed), d.Valid,
		out.Cost.Total().LLMCalls)
	fmt.Print(d.Winner.CSV)
	// Output:
	// How many customers does the shop have?: SELECT COUNT(*) AS n FROM customers
	// majority, high confidence: 2 of 3 candidates agree; 3 LLM calls
	// n
	// 300
}
