package agenttest_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/llm"
)

// ExampleScript scripts a model by role: the planner's first turn calls a
// tool, its second answers; each role's calls are counted apart.
func ExampleScript() {
	m := agenttest.Script(func(req llm.Request, n int) *llm.Response {
		switch {
		case req.Role == llm.RolePlan && n == 0:
			return agenttest.ToolCalls(agenttest.Call("c1", "execute_sql", map[string]string{"sql": "SELECT 1"}))
		case req.Role == llm.RolePlan:
			return agenttest.Text(agenttest.Fence("sql", "SELECT 1"))
		}
		return agenttest.Cut("SELECT na") // any other role: cut by the token limit
	})
	m.Count = agenttest.ByRole
	for _, role := range []llm.Role{llm.RolePlan, llm.RoleVerify, llm.RolePlan} {
		r, _ := m.Chat(context.Background(), llm.Request{Role: role, Messages: []llm.Message{llm.User("...")}})
		fmt.Printf("%s: %s %q %v\n", role, r.FinishReason, r.Text, r.ToolCalls)
	}
	fmt.Println(m.Calls(), "calls,", m.CallsOf(llm.RolePlan), "by the planner")
	// Output:
	// plan: tool_calls "" [{c1 execute_sql {"sql":"SELECT 1"}}]
	// verify: length "SELECT na" []
	// plan: stop "```sql\nSELECT 1\n```" []
	// 3 calls, 2 by the planner
}

// ExampleShapes lists the shapes real models write an answer in; an
// agent's test runs each through the agent (see Shapes).
func ExampleShapes() {
	for _, s := range agenttest.Shapes("SELECT 1 AS x") {
		fmt.Println(s.Name)
	}
	var reasks []string
	for _, s := range agenttest.Unreadable("SELECT 1 AS x") {
		reasks = append(reasks, s.Name)
	}
	fmt.Println("unreadable:", strings.Join(reasks, "; "))
	// Output:
	// canonical (llmsim)
	// ```SQL and prose after (gpt-4o)
	// inline fence in prose (gpt-4o)
	// markdown heading (claude)
	// dialect fence (qwen-coder)
	// bare fence (qwen-coder)
	// tilde fence
	// no fence (o3)
	// <think> with a draft (deepseek-r1)
	// <think> opened in the prompt (deepseek-r1 template)
	// reasoning_content (deepseek-reasoner)
	// unreadable: cut inside the query (truncating); cut after a draft (truncating); cut while thinking (deepseek-r1); prose only; empty
}
