package pexa

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"github.com/quorumsql/quorum/pkg/reply"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/golden"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/vote"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

var update = flag.Bool("update", false, "rewrite the golden prompt files")

// byRole is the agent's model in a test: reply answers each request, n
// counting the calls of its role (the planner's turns apart from the
// probes between them); a nil reply is a call that failed. The
// generator's choice turns (D-P24) name the first success listed.
func byRole(reply func(req llm.Request, n int) *llm.Response) *agenttest.Model {
	return byRoleChoosing(reply, nil)
}

// byRoleChoosing is byRole with the generator's choice turns answered by
// choose, n counting them apart from the role's other calls (so a
// script's n is what it was before the choice existed); a nil choose
// names the first success the question lists.
func byRoleChoosing(reply, choose func(req llm.Request, n int) *llm.Response) *agenttest.Model {
	m := agenttest.Script(func(req llm.Request, n int) *llm.Response {
		if !choiceTurn(req) {
			return reply(req, n)
		}
		if choose != nil {
			return choose(req, n)
		}
		first, _ := strconv.Atoi(listedFirst.FindStringSubmatch(agenttest.LastMessage(req).Content)[1])
		return agenttest.ToolCalls(agenttest.Call("cf", ToolChooseFinal, map[string]any{"query": first}))
	})
	m.Count = func(req llm.Request) string {
		if choiceTurn(req) {
			return "choose"
		}
		return string(req.Role)
	}
	return m
}

// listedFirst reads the first number the choice question lists.
var listedFirst = regexp.MustCompile(`^Quer(?:y|ies) ([0-9]+)`)

// choiceTurn reports whether req is the generator's choice turn.
func choiceTurn(req llm.Request) bool {
	for _, t := range req.Tools {
		if t.Name == ToolChooseFinal {
			return req.Role == RoleTestcase
		}
	}
	return false
}

type q struct {
	Description string `json:"description"`
	SQL         string `json:"sql_query"`
	Exploration bool   `json:"exploration"`
}

func queries(qs ...q) map[string]any { return map[string]any{"queries": qs} }

// tSQL is the small database of the step tests (agenttest.SQLite).
const tSQL = `CREATE TABLE t (id INTEGER, name TEXT, v REAL);
	INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'c', 0), (4, 'd', 4), (5, 'e', 5)`

func seeds(int) int64 { return 1 }

// TestPromptsArePinned: the four prompts and the generator's choice
// question, with their slots filled and the dialect blocks swapped
// (D-P10), match their golden files; the planner and proposer repeat the
// question (D-P11).
func TestPromptsArePinned(t *testing.T) {
	t.Parallel()
	ev := []Record{
		{Probe: "p1", SQL: "SELECT 1", Exploration: true, Feedback: "Success: a\n1", OK: true, Class: ClassExploratory},
		{Probe: "p2", SQL: "SELECT x", Feedback: "Compilation Error: no such column: x", Class: ClassFinal + "-not"},
		{Probe: "p2", SQL: "SELECT 2", Feedback: "Success: a\n2", OK: true, Class: ClassFinal},
	}
	ev[1].Class = ClassFailure
	cases := map[string]string{
		"plan":      PlannerPrompt("How many rows?"),
		"verify":    VerifierPrompt("How many rows?", "SELECT COUNT(*) FROM t", "n\n5"),
		"propose.1": ProposerPrompt("How many rows?", warehouse.SQLite, ev),
		// The no-proposer ablation's planner (D-P21).
		"plan.no-proposer":             PlannerPromptNoProposer("How many rows?", true),
		"plan.no-proposer.no-verifier": PlannerPromptNoProposer("How many rows?", false),
		// Sequential planning (D-P22).
		"plan.sequential": PlannerPromptSequential("How many rows?"),
		// The generator's choice of its Final after the results (D-P24).
		"choose":     ChooseFinalPrompt([]int{1, 3}),
		"choose.one": ChooseFinalPrompt([]int{2}),
	}
	for _, d := range []warehouse.Dialect{warehouse.SQLite, warehouse.Snowflake, warehouse.BigQuery} {
		cases["testcase."+string(d)] = TestcasePrompt(TestcaseInput{Dialect: d, TableInfo: "Table full name: t\nColumn name: id Type: INTEGER\n",
			Structure: "The table structure information is (table names): \n['t']\n", ExternalKnowledge: "", Probe: "Retrieve all ids of t"})
		cases["propose."+string(d)] = ProposerPrompt("How many rows?", d, nil)
	}
	golden.Check(t, cases, *update, "go test ./pkg/agents/pexa -run TestPromptsArePinned -update")
	if p := PlannerPrompt("Q?"); !strings.Contains(p, "Question: Q?\nAnother way to say it: Q?") {
		t.Error("the planner does not repeat the question")
	}
	// The no-proposer planner differs from Fig. 3 in its Propose Final SQL
	// and Finish bullets only (D-P21).
	paper, ours := strings.Split(PlannerPrompt("Q?"), "\n"), strings.Split(PlannerPromptNoProposer("Q?", true), "\n")
	if len(paper) != len(ours) {
		t.Fatalf("the no-proposer planner prompt has %d lines, Fig. 3 %d", len(ours), len(paper))
	}
	for i := range paper {
		if changed := paper[i] != ours[i]; changed != (i == 3 || i == 4) {
			t.Errorf("planner prompt line %d: changed %v:\n%s\n%s", i, changed, paper[i], ours[i])
		}
	}
	if !strings.HasPrefix(ours[3], "- Write Final SQL:") || !strings.Contains(ours[3], "execute_sql") || !strings.Contains(ours[3], "semantic_verifier") ||
		!strings.HasPrefix(ours[4], "- Finish:") || !strings.Contains(ours[4], "sql_query") || strings.Contains(PlannerPromptNoProposer("Q?", false), "semantic_verifier") {
		t.Errorf("no-proposer bullets:\n%s\n%s", ours[3], ours[4])
	}
	// The sequential planner adds one guideline after Fig. 3's last and
	// asks for the first probe in the closing line; the rest is Fig. 3's.
	seq := strings.Split(PlannerPromptSequential("Q?"), "\n")
	if len(seq) != len(paper)+1 {
		t.Fatalf("the sequential planner prompt has %d lines, Fig. 3 %d", len(seq), len(paper))
	}
	added := 0
	for i := range paper {
		if i == 9 {
			if !strings.HasPrefix(seq[9], "- Plan one probe at a time:") {
				t.Errorf("sequential guideline: %q", seq[9])
			}
			added = 1
		}
		last := i == len(paper)-1
		if changed := paper[i] != seq[i+added]; changed != last {
			t.Errorf("sequential planner prompt line %d: changed %v:\n%s\n%s", i, changed, paper[i], seq[i+added])
		}
	}
	if !strings.Contains(seq[len(seq)-1], "generate the first probe (using the generate_testcase tool)") {
		t.Errorf("sequential closing line: %q", seq[len(seq)-1])
	}
	if p := ProposerPrompt("Q?", warehouse.SQLite, nil); !strings.Contains(p, "Main Question: Q?\nAnother way to say it: Q?") ||
		!strings.Contains(p, "Exploratory Probes:\nFailure Probes:\nSuccessful Probes:\nFinal SQL queries (pay more attention here):") {
		t.Errorf("proposer prompt: empty clusters must keep their headings in the paper's order:\n%s", p)
	}
}

// TestExecutorFeedback: the three kinds of feedback, 3 rows and 500
// characters shown, and a proposal's result kept whole (D-P8).
func TestExecutorFeedback(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	ctx := context.Background()
	var c cost.Cost
	var mu sync.Mutex
	for _, tt := range []struct {
		sql  string
		lim  warehouse.Limits
		want string
		ok   bool
	}{
		{"SELEC 1", probeLimits, "Compilation Error: ", false},
		{"SELECT * FROM t WHERE id > 99", probeLimits, nullError, false},
		{"SELECT id FROM t ORDER BY id", probeLimits, "Success: id\n1\n2\n3 …(truncated, more than 3 rows)", true},
		{"SELECT id FROM t ORDER BY id", warehouse.Limits{}, "Success: id\n1\n2\n3 …(truncated, 5 rows in total)", true},
		{"SELECT 7 AS n", probeLimits, "Success: n\n7", true},
	} {
		e, err := execute(ctx, db, &c, &mu, tt.sql, tt.lim)
		if err != nil || e.OK != tt.ok || !strings.HasPrefix(e.Feedback, tt.want) {
			t.Errorf("%s: %q ok=%v (%v), want %q", tt.sql, e.Feedback, e.OK, err, tt.want)
		}
	}
	e, _ := execute(ctx, db, &c, &mu, "SELECT id FROM t ORDER BY id", warehouse.Limits{})
	if e.Rows != 5 || !strings.Contains(e.CSV, "5") {
		t.Errorf("the proposal's result must be whole: %d rows", e.Rows)
	}
	long, _ := execute(ctx, db, &c, &mu, "SELECT printf('%.2000c', 'x') AS s", probeLimits)
	if n := len(strings.TrimSuffix(strings.TrimPrefix(long.Feedback, "Success: "), " …(truncated, 1 rows in total)")); n > shownChars {
		t.Errorf("a 2,000-character row is shown as %d characters: %q", n, long.Feedback[:80])
	}
	if c.Queries != 7 {
		t.Errorf("%d queries accounted, want 7", c.Queries)
	}
}

// TestProbeStopRules: a batch with a successful answering SQL is followed
// by the generator's choice, seeing the results, which ends the test case
// (D-P24), or by its revision; exploration-only and all-failed batches go
// back to the model with the feedback; not_enough_information ends it; a
// model that never succeeds stops at the step limit (15 steps = 8 calls)
// (D-P4).
func TestProbeStopRules(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	good, bad := q{"ids", "SELECT id FROM t", false}, q{"bad", "SELECT nope FROM t", false}
	names := q{"names", "SELECT name FROM t", false}
	explore := q{"names", "SELECT DISTINCT name FROM t", true}
	execute := func(qs ...q) *llm.Response {
		return agenttest.ToolCalls(agenttest.Call("c", ToolExecuteSQL, queries(qs...)))
	}
	choose := func(n int) *llm.Response {
		return agenttest.ToolCalls(agenttest.Call("f", ToolChooseFinal, map[string]any{"query": n}))
	}
	for _, tt := range []struct {
		name    string
		replies []*llm.Response // the writing turns', the last repeated
		choices []*llm.Response // the choice turns' (nil: the first listed)
		calls   int
		status  string
		classes string
	}{
		{"two successes: the generator chooses", []*llm.Response{execute(bad, good, names)}, []*llm.Response{choose(3)}, 2, ProbeFinal, "failure successful final"},
		{"one success: its result is checked too", []*llm.Response{execute(bad, good)}, []*llm.Response{choose(2)}, 2, ProbeFinal, "failure final"},
		{"exploration first", []*llm.Response{execute(explore), execute(good)}, nil, 3, ProbeFinal, "exploratory final"},
		{"all failed", []*llm.Response{execute(bad), execute(good)}, nil, 3, ProbeFinal, "failure final"},
		// No result answers the probe: the generator revises in its
		// choice turn and chooses from the revision's results.
		{"revised after the results", []*llm.Response{execute(good)}, []*llm.Response{execute(names), choose(1)}, 3, ProbeFinal, "successful final"},
		{"not enough information", []*llm.Response{agenttest.ToolCalls(agenttest.Call("c1", ToolNotEnoughInfo, map[string]string{"explanation": "no such table"}))},
			nil, 1, ProbeNEI, ""},
		{"not enough information after the results", []*llm.Response{execute(good)},
			[]*llm.Response{agenttest.ToolCalls(agenttest.Call("c1", ToolNotEnoughInfo, map[string]string{"explanation": "no such table"}))}, 2, ProbeNEI, "successful"},
	} {
		m := byRoleChoosing(func(_ llm.Request, n int) *llm.Response { return tt.replies[min(n, len(tt.replies)-1)] },
			func(req llm.Request, n int) *llm.Response {
				if n < len(tt.choices) {
					return tt.choices[n]
				}
				return choose(1)
			})
		if tt.choices == nil {
			m = byRole(func(_ llm.Request, n int) *llm.Response { return tt.replies[min(n, len(tt.replies)-1)] })
		}
		s := &Steps{cfg: DefaultConfig(), llm: m}
		var c cost.Cost
		o, err := s.Probe(context.Background(), db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "ids of t"}, seeds, &c)
		if err != nil {
			t.Fatal(err)
		}
		var classes []string
		for _, r := range o.Records {
			classes = append(classes, r.Class)
		}
		if m.Calls() != tt.calls || o.Status != tt.status || strings.Join(classes, " ") != tt.classes || c.FormatReasks != 0 {
			t.Errorf("%s: %d calls, status %q, classes %v, %d re-asks; want %d, %q, %q, 0", tt.name, m.Calls(), o.Status, classes, c.FormatReasks, tt.calls, tt.status, tt.classes)
		}
		if tt.name == "all failed" {
			last := agenttest.LastMessage(m.Request(1))
			if last.Role != "tool" || !strings.Contains(last.Content, "Query 1 (bad): Compilation Error: ") || !strings.Contains(last.Content, "no such column: nope") {
				t.Errorf("the revision request does not carry the error: %+v", last)
			}
		}
		if strings.HasPrefix(tt.name, "not enough information") && o.Detail != "no such table" {
			t.Errorf("%s: explanation %q lost", tt.name, o.Detail)
		}
	}
	m := byRole(func(llm.Request, int) *llm.Response {
		return agenttest.ToolCalls(agenttest.Call("c", ToolExecuteSQL, queries(bad)))
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	o, err := s.Probe(context.Background(), db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "p"}, seeds, &cost.Cost{})
	if err != nil || m.Calls() != 8 || o.Status != ProbeLimit {
		t.Errorf("always failing: %d calls, %q (%v); want 8 calls and %q", m.Calls(), o.Status, err, ProbeLimit)
	}
	// The single-path cap keeps the first query only (D-P15).
	m = byRole(func(llm.Request, int) *llm.Response {
		return agenttest.ToolCalls(agenttest.Call("c", ToolExecuteSQL, queries(good, good, good, good)))
	})
	s = &Steps{cfg: DefaultConfig(), llm: m}
	s.cfg.MaxSQLsPerTestCase = 1
	var c cost.Cost
	if _, err := s.Probe(context.Background(), db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "p"}, seeds, &c); err != nil || c.Queries != 1 {
		t.Errorf("max-sqls-per-testcase=1: %d queries (%v), want 1", c.Queries, err)
	}
}

// passModel answers a whole pass: k probes in one generate_testcase call,
// 2 SQLs each, then propose, then finish; the proposer executes, verifies
// and answers.
func passModel(k int, answer string) *agenttest.Model {
	return byRole(func(req llm.Request, n int) *llm.Response {
		switch req.Role {
		case RolePlan:
			switch n {
			case 0:
				probes := make([]string, k)
				for i := range probes {
					probes[i] = fmt.Sprintf("probe %d", i)
				}
				return agenttest.ToolCalls(agenttest.Call("g", ToolGenerateTestcase, map[string]any{"probes": probes}))
			case 1:
				return agenttest.ToolCalls(agenttest.Call("p", ToolProposeFinalSQL, map[string]any{}))
			}
			return agenttest.ToolCalls(agenttest.Call("f", ToolFinish, map[string]any{}))
		case RoleTestcase:
			// One of the two succeeds; the choice turn names it (D-P24).
			return agenttest.ToolCalls(agenttest.Call("e", ToolExecuteSQL, queries(q{"a", "SELECT id FROM t", false}, q{"b", "SELECT nope FROM t", false})))
		case RolePropose:
			switch n {
			case 0:
				return agenttest.ToolCalls(agenttest.Call("x", ToolExecuteSQL, map[string]string{"sql_query": answer}))
			case 1:
				return agenttest.ToolCalls(agenttest.Call("v", ToolSemanticVerifier, map[string]string{"sql_query": answer}))
			}
			return &llm.Response{Text: "Final:\n```sql\n" + answer + "\n```"}
		case RoleVerify:
			return &llm.Response{Text: "```json\n{\"correct\": true, \"explanation\": \"same\", \"back_translated_query\": \"count rows\"}\n```"}
		}
		return &llm.Response{Text: "?"}
	})
}

// TestHappyPassCallStructure: with k probes that succeed at once and a
// proposer that executes, verifies and answers, a pass makes 2k + 7 LLM
// calls (plan 3, testcase 2k: each probe's batch and its choice of the
// Final, D-P24; propose 3, verify 1) and Σm + 1 warehouse queries, the
// verifier re-using the proposer's execution (§1.10).
func TestHappyPassCallStructure(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	ctx := context.Background()
	const k, answer = 3, "SELECT COUNT(*) AS n FROM t"
	m := passModel(k, answer)
	s := &Steps{cfg: DefaultConfig(), llm: m}
	ledger := cost.Ledger{}
	st := NewPlanState("How many rows?")
	act, err := s.PlanTurn(ctx, st, nil, seeds, ledger.Stage("plan"))
	if err != nil || len(act.Probes) != k || act.Propose {
		t.Fatalf("first turn: %+v (%v)", act, err)
	}
	outs := make([]*ProbeOutcome, k)
	for i, p := range act.Probes {
		if outs[i], err = s.Probe(ctx, db, TestcaseInput{Dialect: warehouse.SQLite, Probe: p}, seeds, ledger.Stage("probe")); err != nil {
			t.Fatal(err)
		}
	}
	st.Resolve(outs, nil)
	if act, err = s.PlanTurn(ctx, st, nil, seeds, ledger.Stage("plan")); err != nil || !act.Propose || len(act.Probes) != 0 {
		t.Fatalf("second turn: %+v (%v)", act, err)
	}
	prop, err := s.Propose(ctx, db, "How many rows?", warehouse.SQLite, st.Evidence, seeds, ledger.Stage("propose"), ledger.Stage("verify"))
	if err != nil || prop.SQL != answer || !prop.OK || !strings.HasPrefix(prop.Verdict, VerdictPassed) {
		t.Fatalf("proposal %+v (%v)", prop, err)
	}
	st.Resolve(nil, prop)
	if act, err = s.PlanTurn(ctx, st, nil, seeds, ledger.Stage("plan")); err != nil || !act.Finish {
		t.Fatalf("third turn: %+v (%v)", act, err)
	}
	want := map[string]int{"plan": 3, "probe": 2 * k, "propose": 3, "verify": 1}
	for stage, n := range want {
		if got := ledger.Stage(stage).LLMCalls; got != n {
			t.Errorf("stage %s: %d LLM calls, want %d", stage, got, n)
		}
	}
	if tot := ledger.Total(); tot.LLMCalls != 2*k+7 || tot.Queries != k*2+1 {
		t.Errorf("pass: %d calls, %d queries; want %d and %d", tot.LLMCalls, tot.Queries, 2*k+7, k*2+1)
	}
	// The planner saw each probe's block and the proposal's.
	var tools []string
	for _, msg := range st.Messages {
		if msg.Role == "tool" {
			tools = append(tools, msg.Content)
		}
	}
	if len(tools) != 2 || !strings.Contains(tools[0], "Probe 3: probe 2\nStatus: final SQL found\nFinal SQL: SELECT id FROM t") ||
		!strings.Contains(tools[1], "Proposed SQL:\n```sql\n"+answer+"\n```\nExecution: Success: n\n5\nSemantic verification: Semantic check passed: same") {
		t.Errorf("tool results:\n%s", strings.Join(tools, "\n---\n"))
	}
	// The proposer's prompt holds every probe's records in its clusters.
	var proposerPrompt string
	for _, r := range m.Requests() {
		if r.Role == RolePropose {
			proposerPrompt = r.Messages[0].Content
			break
		}
	}
	if strings.Count(proposerPrompt, "Probe: probe") != 2*k || !strings.Contains(proposerPrompt, "Final SQL queries (pay more attention here):\n1. Probe: probe 0 SQL: SELECT id FROM t") {
		t.Errorf("proposer prompt evidence:\n%s", proposerPrompt)
	}
}

// TestPlannerRules: finish before a proposal, and finish with another
// call, get error results and do not end the pass; two generate_testcase
// calls in one message are one batch; the step limit ends the pass.
func TestPlannerRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := byRole(func(_ llm.Request, n int) *llm.Response {
		switch n {
		case 0:
			return agenttest.ToolCalls(agenttest.Call("f0", ToolFinish, map[string]any{}))
		case 1:
			return agenttest.ToolCalls(agenttest.Call("f1", ToolFinish, map[string]any{}), agenttest.Call("p1", ToolProposeFinalSQL, map[string]any{}))
		}
		return agenttest.ToolCalls(agenttest.Call("a", ToolGenerateTestcase, map[string]any{"probes": []string{"x", "y"}}),
			agenttest.Call("b", ToolGenerateTestcase, map[string]any{"probes": []string{"z"}}))
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	st := NewPlanState("Q?")
	act, err := s.PlanTurn(ctx, st, nil, seeds, &cost.Cost{})
	if err != nil || !act.Propose || act.Finish {
		t.Fatalf("finish alone before a proposal then finish+propose: %+v (%v)", act, err)
	}
	if got := st.Messages[2]; got.Role != "tool" || got.Content != errNoProposal {
		t.Errorf("finish without a proposal answered %+v", got)
	}
	st.Resolve(nil, &Proposal{SQL: "SELECT 1", Feedback: "Success: 1", OK: true})
	last := st.Messages[len(st.Messages)-2:]
	if last[0].Content != errFinishAlone || !strings.HasPrefix(last[1].Content, "Proposed SQL:") {
		t.Errorf("finish mixed with propose: %+v", last)
	}
	act, err = s.PlanTurn(ctx, st, nil, seeds, &cost.Cost{})
	if err != nil || strings.Join(act.Probes, ",") != "x,y,z" || len(st.Pending) != 2 || st.Pending[1].From != 2 {
		t.Errorf("two generate_testcase calls: %+v, pending %+v (%v)", act, st.Pending, err)
	}
	// A planner that never finishes stops at the step limit.
	m = byRole(func(llm.Request, int) *llm.Response {
		return agenttest.ToolCalls(agenttest.Call("f", ToolFinish, map[string]any{}))
	})
	s = &Steps{cfg: DefaultConfig(), llm: m}
	st = NewPlanState("Q?")
	if act, err = s.PlanTurn(ctx, st, nil, seeds, &cost.Cost{}); err != nil || act.Stop != "planner_recursion" || m.Calls() != 10 {
		t.Errorf("never finishing: %+v after %d calls (%v); want planner_recursion after 10", act, m.Calls(), err)
	}
	if r := passResult(0, 9, &PlanState{}, act.Stop); r.Status != agent.StatusGaveUp || !strings.Contains(r.Error, "planner_recursion") {
		t.Errorf("a pass with no proposal: %+v", r)
	}
	// Probes are capped by truncation (D-P15).
	m = byRole(func(llm.Request, int) *llm.Response {
		return agenttest.ToolCalls(agenttest.Call("g", ToolGenerateTestcase, map[string]any{"probes": []string{"1", "2", "3", "4", "5"}}))
	})
	s = &Steps{cfg: DefaultConfig(), llm: m}
	s.cfg.MaxProbesPerPlan = 2
	if act, err = s.PlanTurn(ctx, NewPlanState("Q?"), nil, seeds, &cost.Cost{}); err != nil || len(act.Probes) != 2 {
		t.Errorf("max-probes-per-plan=2: %d probes (%v)", len(act.Probes), err)
	}
}

// TestNoProposerPlanner: with no proposer the Planner gets execute_sql,
// semantic_verifier and finish(sql_query) instead of propose_final_sql; a
// finish whose SQL fails gets the executor's feedback and the pass goes
// on; a finish whose SQL executed with rows ends the pass with it and its
// whole result; queries are the plan stage's, verifier calls the verify
// stage's, and a SQL runs once per pass (D-P21).
func TestNoProposerPlanner(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	ctx := context.Background()
	const bad, answer = "SELECT nope FROM t", "SELECT id FROM t ORDER BY id"
	sqlArgs := func(sql string) map[string]string { return map[string]string{"sql_query": sql} }
	m := byRole(func(req llm.Request, n int) *llm.Response {
		switch req.Role {
		case RolePlan:
			switch n {
			case 0:
				return agenttest.ToolCalls(agenttest.Call("g", ToolGenerateTestcase, map[string]any{"probes": []string{"ids of t"}}))
			case 1:
				return agenttest.ToolCalls(agenttest.Call("f1", ToolFinish, sqlArgs(bad)))
			case 2:
				return agenttest.ToolCalls(agenttest.Call("x", ToolExecuteSQL, sqlArgs(answer)))
			case 3:
				return agenttest.ToolCalls(agenttest.Call("v", ToolSemanticVerifier, sqlArgs(answer)))
			}
			return agenttest.ToolCalls(agenttest.Call("f2", ToolFinish, sqlArgs(answer)))
		case RoleTestcase:
			return agenttest.ToolCalls(agenttest.Call("e", ToolExecuteSQL, queries(q{"a", "SELECT id FROM t", false})))
		case RoleVerify:
			return &llm.Response{Text: "{\"correct\": true, \"explanation\": \"same\", \"back_translated_query\": \"ids\"}"}
		}
		return &llm.Response{Text: "?"}
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	s.cfg.NoProposer = true
	if _, err := s.PlanTurn(ctx, s.OpenPass("Q?"), nil, seeds, &cost.Cost{}); err == nil {
		t.Error("a no-proposer turn without a warehouse did not fail")
	}
	ledger := cost.Ledger{}
	env := &PlanEnv{Warehouse: db, Question: "Which ids?", Verify: ledger.Stage("verify")}
	st := s.OpenPass("Which ids?")
	if st.Messages[0].Content != PlannerPromptNoProposer("Which ids?", true) {
		t.Error("the pass does not open with the no-proposer planner prompt")
	}
	act, err := s.PlanTurn(ctx, st, env, seeds, ledger.Stage("plan"))
	if err != nil || len(act.Probes) != 1 || act.Propose {
		t.Fatalf("first turn: %+v (%v)", act, err)
	}
	offered := map[string]string{}
	for _, tool := range m.Request(0).Tools {
		offered[tool.Name] = string(tool.Parameters)
	}
	if _, ok := offered[ToolProposeFinalSQL]; ok || len(offered) != 4 || !strings.Contains(offered[ToolFinish], `"required":["sql_query"]`) ||
		offered[ToolExecuteSQL] == "" || offered[ToolSemanticVerifier] == "" || offered[ToolGenerateTestcase] == "" {
		t.Errorf("planner tools: %v", offered)
	}
	o, err := s.Probe(ctx, db, TestcaseInput{Dialect: warehouse.SQLite, Probe: act.Probes[0]}, seeds, ledger.Stage("probe"))
	if err != nil {
		t.Fatal(err)
	}
	st.Resolve([]*ProbeOutcome{o}, nil)
	if act, err = s.PlanTurn(ctx, st, env, seeds, ledger.Stage("plan")); err != nil || !act.Finish {
		t.Fatalf("second turn: %+v (%v)", act, err)
	}
	var tools []string
	for _, msg := range st.Messages {
		if msg.Role == "tool" {
			tools = append(tools, msg.Content)
		}
	}
	if len(tools) != 4 || !strings.HasPrefix(tools[1], "Compilation Error: ") || tools[2] != "Success: id\n1\n2\n3 …(truncated, 5 rows in total)" ||
		tools[3] != VerdictPassed+"same" {
		t.Errorf("tool results:\n%s", strings.Join(tools, "\n---\n"))
	}
	p := st.Proposal
	if p == nil || p.SQL != answer || !p.OK || p.Rows != 5 || p.CSV != "id\n1\n2\n3\n4\n5\n" || p.Verdict != VerdictPassed+"same" {
		t.Fatalf("the pass's proposal: %+v", p)
	}
	if r := passResult(0, 1, &PlanState{Proposal: p}, ""); r.Status != agent.StatusOK || r.SQL != answer || r.Rows != 5 {
		t.Errorf("pass result %+v", r)
	}
	want := map[string][2]int{"plan": {5, 2}, "probe": {2, 1}, "verify": {1, 0}, "propose": {0, 0}}
	for stage, w := range want {
		if got := ledger.Stage(stage); got.LLMCalls != w[0] || got.Queries != w[1] {
			t.Errorf("stage %s: %d LLM calls, %d queries; want %d and %d", stage, got.LLMCalls, got.Queries, w[0], w[1])
		}
	}
	if m.CallsOf(RolePropose) != 0 {
		t.Errorf("%d proposer calls", m.CallsOf(RolePropose))
	}

	// propose_final_sql is an unknown tool; finish mixed with execute_sql
	// is refused while the SQL still runs; a pass that stops before finish
	// answers with its last SQL that executed with rows (D-P13).
	m = byRole(func(_ llm.Request, n int) *llm.Response {
		switch n {
		case 0:
			return agenttest.ToolCalls(agenttest.Call("p", ToolProposeFinalSQL, map[string]any{}))
		case 1:
			return agenttest.ToolCalls(agenttest.Call("x", ToolExecuteSQL, sqlArgs(answer)), agenttest.Call("f", ToolFinish, sqlArgs(answer)))
		}
		return agenttest.ToolCalls(agenttest.Call("y", ToolExecuteSQL, sqlArgs(bad)))
	})
	s = &Steps{cfg: DefaultConfig(), llm: m}
	s.cfg.NoProposer, s.cfg.NoVerifier = true, true
	var c cost.Cost
	st = s.OpenPass("Q?")
	if act, err = s.PlanTurn(ctx, st, &PlanEnv{Warehouse: db, Question: "Q?"}, seeds, &c); err != nil || act.Stop != "planner_recursion" {
		t.Fatalf("never finishing: %+v (%v)", act, err)
	}
	if got := st.Messages[2].Content; got != `Unknown tool "propose_final_sql": use generate_testcase, execute_sql or finish.` {
		t.Errorf("propose_final_sql answered %q", got)
	}
	if got := st.Messages[4:6]; !strings.HasPrefix(got[0].Content, "Success: ") || got[1].Content != errFinishAlone {
		t.Errorf("finish mixed with execute_sql: %+v", got)
	}
	for _, tool := range m.Request(0).Tools {
		if tool.Name == ToolSemanticVerifier {
			t.Error("no-verifier still offers the planner the semantic verifier")
		}
	}
	if p := st.Proposal; p == nil || p.SQL != answer || !p.OK || c.Queries != 2 || c.LLMCalls != 10 {
		t.Errorf("stopped pass: proposal %+v, %d queries, %d calls; want %q, 2 queries (each SQL once), 10 calls", p, c.Queries, c.LLMCalls, answer)
	}
	// The state survives the blob between turns.
	b, _ := json.Marshal(st)
	var back PlanState
	if err := json.Unmarshal(b, &back); err != nil || back.Runs[reply.Key(answer)].CSV != "id\n1\n2\n3\n4\n5\n" || back.Proposal.SQL != answer {
		t.Errorf("state round trip: %+v (%v)", back.Runs, err)
	}
}

// TestProposerGuardAndVerifier: an answer never executed is executed and,
// failing, fed back; with no verifier the tool is not offered.
func TestProposerGuardAndVerifier(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	m := byRole(func(_ llm.Request, n int) *llm.Response {
		if n == 0 {
			return &llm.Response{Text: "```sql\nSELECT nope FROM t\n```"}
		}
		return &llm.Response{Text: "```sql\nSELECT COUNT(*) FROM t\n```"}
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	s.cfg.NoVerifier = true
	p, err := s.Propose(context.Background(), db, "Q?", warehouse.SQLite, nil, seeds, &cost.Cost{}, &cost.Cost{})
	if err != nil || !p.OK || p.SQL != "SELECT COUNT(*) FROM t" || m.Calls() != 2 {
		t.Fatalf("guard: %+v after %d calls (%v)", p, m.Calls(), err)
	}
	if fb := agenttest.LastMessage(m.Request(1)); fb.Role != "user" || !strings.HasPrefix(fb.Content, "Compilation Error:") {
		t.Errorf("the failing answer was not fed back: %+v", fb)
	}
	for _, tool := range m.Request(0).Tools {
		if tool.Name == ToolSemanticVerifier {
			t.Error("no-verifier still offers the semantic verifier")
		}
	}
}

// TestVoteOverPasses: the majority of 4 passes wins high; a 2-2 tie is a
// seeded choice; one valid pass is the lone candidate (D-P12).
func TestVoteOverPasses(t *testing.T) {
	t.Parallel()
	cand := func(i int, csv string) *agent.Candidate {
		if csv == "" {
			return &agent.Candidate{Index: i, Status: agent.StatusGaveUp}
		}
		return &agent.Candidate{Index: i, Status: agent.StatusOK, SQL: "q" + csv, CSV: "n\n" + csv + "\n", Rows: 1}
	}
	for _, tt := range []struct {
		csvs   []string
		method string
		conf   string
		winner string
	}{
		{[]string{"1", "1", "2", "3"}, "majority", "high", "n\n1\n"},
		{[]string{"1", "", "", ""}, "lone_candidate", "low", "n\n1\n"},
		{[]string{"1", "1", "2", "2"}, "random_tie_break", "low", ""},
	} {
		var cs []*agent.Candidate
		for i, c := range tt.csvs {
			cs = append(cs, cand(i, c))
		}
		d := vote.Once(cs, 7)
		again := vote.Once(cs, 7)
		if d.Method != tt.method || d.Confidence != tt.conf || d.Winner == nil || (tt.winner != "" && d.Winner.CSV != tt.winner) || again.Winner.Index != d.Winner.Index {
			t.Errorf("%v: %+v", tt.csvs, d)
		}
	}
}
