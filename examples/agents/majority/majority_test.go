package majority_test

import (
	"testing"

	"github.com/quorumsql/quorum/examples/agents/majority"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// shop is the test's database: three customers.
const shop = `CREATE TABLE customers (id INTEGER, name TEXT);
INSERT INTO customers VALUES (1, 'ann'), (2, 'bob'), (3, 'cy');`

const count = "SELECT COUNT(*) AS n FROM customers"

func TestDefinition(t *testing.T) {
	agenttest.CheckDefinition(t, majority.Definition())
}

// TestMajority: the answer most candidates agree on wins, with high
// confidence when two or more do; a query that fails or returns nothing
// is a candidate that does not count; a model that is down leaves no
// answer; every call is in the cost ledger.
func TestMajority(t *testing.T) {
	t.Parallel()
	f := agenttest.NewDataset(t, "shop", shop, agenttest.Question{ID: "local001", Question: "How many customers are there?", Gold: count})
	for _, tt := range []struct {
		name     string
		model    *agenttest.Model
		winner   string // "" for none
		conf     string
		statuses map[string]int
	}{
		{"two of three agree", agenttest.Replies(agenttest.Fence("sql", count), agenttest.Fence("sql", count), agenttest.Fence("sql", "SELECT 7 AS n")),
			count, "high", map[string]int{agent.StatusOK: 3}},
		{"an error and an empty result do not count", agenttest.Replies(agenttest.Fence("sql", "SELECT nope FROM customers"),
			agenttest.Fence("sql", "SELECT id FROM customers WHERE id > 9"), agenttest.Fence("sql", count)),
			count, "low", map[string]int{agent.StatusError: 1, agent.StatusEmpty: 1, agent.StatusOK: 1}},
		{"the model is down", agenttest.Down(nil), "", "low", map[string]int{agent.StatusGaveUp: 3}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := agenttest.Run(t, majority.Definition(), f, agenttest.Options{LLM: tt.model, Votes: 3})["local001"]
			got := map[string]int{}
			for _, c := range out.Candidates {
				got[c.Status]++
			}
			d := out.Decision
			if (d.Winner == nil) != (tt.winner == "") || (d.Winner != nil && d.Winner.SQL != tt.winner) || d.Confidence != tt.conf || len(got) != len(tt.statuses) {
				t.Fatalf("decision %+v, candidates %v; want %q with %s confidence, %v", d, got, tt.winner, tt.conf, tt.statuses)
			}
			for s, n := range tt.statuses {
				if got[s] != n {
					t.Errorf("%d candidates %s, want %d", got[s], s, n)
				}
			}
			if calls := out.Cost.Total().LLMCalls; calls != 3 || tt.model.Calls() != 3 {
				t.Errorf("%d calls in the ledger, %d made; want 3", calls, tt.model.Calls())
			}
		})
	}
}

// TestReadsWhatModelsWrite: the query is read in every shape real models
// write it, and a reply with no query to run is a candidate given up,
// never a query run.
func TestReadsWhatModelsWrite(t *testing.T) {
	t.Parallel()
	f := agenttest.NewDataset(t, "shop", shop, agenttest.Question{ID: "local001", Question: "How many customers are there?"})
	shapes := append(agenttest.Shapes(count), agenttest.Unreadable(count)...)
	for _, s := range shapes {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			m := agenttest.Script(func(llm.Request, int) *llm.Response { return s.Reply })
			out := agenttest.Run(t, majority.Definition(), f, agenttest.Options{LLM: m, Votes: 1})["local001"]
			c := out.Candidates[0]
			switch {
			case s.Reask == "" && (c.Status != agent.StatusOK || c.SQL != count || c.CSV != "n\n3\n"):
				t.Errorf("candidate %+v; want %q read and run", c, count)
			case s.Reask != "" && (c.Status != agent.StatusGaveUp || out.Cost.Total().Queries != 0):
				t.Errorf("candidate %+v after %d queries; want it given up, nothing run", c, out.Cost.Total().Queries)
			}
		})
	}
}
