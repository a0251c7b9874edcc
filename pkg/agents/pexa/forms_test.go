package pexa

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// The replies below are shaped as real model families write them (see
// pkg/reply's tests); each goes through the agent's own loops with a
// scripted model and a SQLite warehouse.

const (
	answerSQL = "SELECT COUNT(*) AS n FROM t"
	draftSQL  = "SELECT id FROM t"
)

// raw is a tool call whose arguments are written as the model wrote them.
func raw(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}

// TestProposerReadsEveryForm: the Proposer's final answer is read with
// reply.SQL in every fence spelling, the last of a draft and a final,
// inline, plain and after <think>; a reply that cannot be read gets the
// reader's own re-ask, counted, and is never executed (a cut one
// included).
func TestProposerReadsEveryForm(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	var shapes []agenttest.Shape
	for _, tt := range []struct {
		name, text, finish string
		reask              string // "" = read at once
	}{
		{"canonical", "Final:\n```sql\n" + answerSQL + "\n```", "stop", ""},
		{"upper-case fence", "```SQL\n" + answerSQL + "\n```", "stop", ""},
		{"sqlite fence", "```sqlite\n" + answerSQL + "\n```", "stop", ""},
		{"bigquery fence", "```bigquery\n" + answerSQL + "\n```", "stop", ""},
		{"bare fence", "The query:\n```\n" + answerSQL + "\n```", "stop", ""},
		{"draft then final", "A first try:\n```sql\n" + draftSQL + "\n```\nBut the question wants the count:\n```sql\n" + answerSQL + "\n```", "stop", ""},
		{"inline fence", "The answer is ```sql " + answerSQL + "``` which counts the rows.", "stop", ""},
		{"plain SQL", "The final query is:\n\n" + answerSQL + ";\n\nIt counts the rows of t.", "stop", ""},
		{"think with a draft", "<think>\nMaybe ```sql\n" + draftSQL + "\n``` no, count them.\n</think>\n```sql\n" + answerSQL + "\n```", "stop", ""},
		{"cut inside the query", "Here it is:\n```sql\nSELECT COUNT(*) AS n FR", reply.FinishLength, reply.ReaskCut},
		{"cut after a draft", "```sql\n" + draftSQL + "\n```\nBetter:\n```sql\nSELECT COU", reply.FinishLength, reply.ReaskCut},
		{"prose only", "The probes show that table t holds the rows.", "stop", reply.ReaskNoSQL},
		{"empty", "", "stop", reply.ReaskEmpty},
	} {
		shapes = append(shapes, agenttest.Shape{Name: tt.name, Reply: &llm.Response{Text: tt.text, FinishReason: tt.finish}, Reask: tt.reask})
	}
	// And every shape of the kit's.
	shapes = append(append(shapes, agenttest.Shapes(answerSQL)...), agenttest.Unreadable(answerSQL)...)
	for _, tt := range shapes {
		t.Run(tt.Name, func(t *testing.T) {
			t.Parallel()
			m := byRole(func(_ llm.Request, n int) *llm.Response {
				if n == 0 {
					return tt.Reply
				}
				return &llm.Response{Text: "```sql\n" + answerSQL + "\n```", FinishReason: "stop"}
			})
			s := &Steps{cfg: DefaultConfig(), llm: m}
			var c cost.Cost
			p, err := s.Propose(context.Background(), db, "How many rows?", warehouse.SQLite, nil, seeds, &c, &cost.Cost{})
			if err != nil {
				t.Fatal(err)
			}
			wantCalls, wantReasks := 1, 0
			if tt.Reask != "" {
				wantCalls, wantReasks = 2, 1
				if got := agenttest.LastMessage(m.Request(1)); got.Role != "user" || got.Content != tt.Reask {
					t.Errorf("re-ask %q (%s), want %q", got.Content, got.Role, tt.Reask)
				}
			}
			// One query: the answer's; an unreadable reply never runs.
			if p.SQL != answerSQL || !p.OK || m.Calls() != wantCalls || c.Queries != 1 || c.FormatReasks != wantReasks {
				t.Errorf("proposal %q ok=%v after %d calls, %d queries, %d re-asks; want %q, %d calls, 1 query, %d re-asks",
					p.SQL, p.OK, m.Calls(), c.Queries, c.FormatReasks, answerSQL, wantCalls, wantReasks)
			}
		})
	}
}

// TestProposerToolArgs: execute_sql and semantic_verifier arguments are
// read leniently (sql for sql_query, a fenced query, a namespaced tool
// name); unreadable ones get a result saying what was wrong, counted.
func TestProposerToolArgs(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	for _, tt := range []struct {
		name   string
		call   llm.ToolCall
		result string // prefix of the tool result the model reads
		reasks int
	}{
		{"sql key", raw("x", ToolExecuteSQL, `{"sql": "SELECT id FROM t"}`), "Success: id\n1", 0},
		{"fenced query", raw("x", ToolExecuteSQL, `{"sql_query": "`+"```sql\\nSELECT id FROM t\\n```"+`"}`), "Success: id\n1", 0},
		{"namespaced name", raw("x", "functions.execute_sql", `{"sql_query": "SELECT id FROM t", "reason": "check"}`), "Success: id\n1", 0},
		{"python literal", raw("x", ToolExecuteSQL, `{'sql_query': 'SELECT id FROM t'}`), "Success: id\n1", 0},
		{"no sql", raw("x", ToolExecuteSQL, `{"table": "t"}`), "The arguments were not understood: the arguments have no sql_query.", 1},
		{"broken JSON", raw("x", ToolExecuteSQL, `{"sql_query": "SELECT id FROM t`), "The arguments were not understood: the arguments could not be read (", 1},
	} {
		m := byRole(func(_ llm.Request, n int) *llm.Response {
			if n == 0 {
				return agenttest.ToolCalls(tt.call)
			}
			return &llm.Response{Text: "```sql\n" + answerSQL + "\n```"}
		})
		s := &Steps{cfg: DefaultConfig(), llm: m}
		var c cost.Cost
		if _, err := s.Propose(context.Background(), db, "Q?", warehouse.SQLite, nil, seeds, &c, &cost.Cost{}); err != nil {
			t.Fatal(err)
		}
		if got := agenttest.LastMessage(m.Request(1)); got.Role != "tool" || !strings.HasPrefix(got.Content, tt.result) || c.FormatReasks != tt.reasks {
			t.Errorf("%s: tool result %q, %d re-asks; want prefix %q, %d re-asks", tt.name, got.Content, c.FormatReasks, tt.result, tt.reasks)
		}
	}
}

// TestVerifierVerdictForms: verdicts as models write them are read, never
// failing open: "false" as a string, Python literals, a trailing comma,
// JSON inside prose or after <think>. An unreadable verdict is re-asked
// with what was wrong, and after its attempts reported as not verified and
// counted; a verifier that cannot be reached is "not run" (D-P7).
func TestVerifierVerdictForms(t *testing.T) {
	t.Parallel()
	const prose = "The back-translated query matches the question."
	for _, tt := range []struct {
		name    string
		replies []string // nil entry: the call fails
		want    string   // the verdict's prefix
		calls   int
		reasks  int
		unread  int
		reask   string // in the re-ask, when there is one
	}{
		{"canonical", []string{"```json\n{\"correct\": true, \"explanation\": \"same\", \"back_translated_query\": \"b\"}\n```"}, VerdictPassed + "same", 1, 0, 0, ""},
		{"string false", []string{`{"correct": "false", "explanation": "extra filter", "back_translated_query": "b"}`}, VerdictError + "extra filter (back-translation: b)", 1, 0, 0, ""},
		{"upper-case string", []string{`{"correct": "FALSE", "explanation": "x", "back_translated_query": "b"}`}, VerdictError, 1, 0, 0, ""},
		{"zero", []string{`{"correct": 0, "explanation": "x", "back_translated_query": "b"}`}, VerdictError, 1, 0, 0, ""},
		{"Python literals", []string{"```json\n{'correct': False, 'explanation': 'x', 'back_translated_query': None}\n```"}, VerdictError + "x (back-translation: )", 1, 0, 0, ""},
		{"Python True", []string{`{"correct": True, "explanation": "same", "back_translated_query": "b"}`}, VerdictPassed + "same", 1, 0, 0, ""},
		{"trailing comma", []string{"{\n  \"correct\": false,\n  \"explanation\": \"x\",\n  \"back_translated_query\": \"b\",\n}"}, VerdictError, 1, 0, 0, ""},
		{"JSON in prose", []string{prose + ` Verdict: {"correct": false, "explanation": "x", "back_translated_query": "b"} as required.`}, VerdictError, 1, 0, 0, ""},
		{"think then verdict", []string{"<think>{\"correct\": true}</think>\n```json\n{\"correct\": false, \"explanation\": \"x\", \"back_translated_query\": \"b\"}\n```"}, VerdictError, 1, 0, 0, ""},
		{"unreadable value, then readable", []string{`{"correct": "partially", "explanation": "x"}`, `{"correct": true, "explanation": "same"}`},
			VerdictPassed + "same", 2, 1, 0, `field "correct": partially is not a boolean`},
		{"no correct field, then readable", []string{`{"verdict": "correct", "explanation": "x"}`, `{"correct": false, "explanation": "x", "back_translated_query": "b"}`},
			VerdictError, 2, 1, 0, `the verdict has no "correct" field`},
		{"prose twice", []string{prose, prose}, VerdictUnread + "no JSON object in the reply." + notVerified, 2, 1, 1, "no JSON object in the reply"},
		{"cut twice", []string{"{\"correct\": fal", "{\"correct\": fal"}, VerdictUnread + "the reply was cut off before its JSON verdict ended." + notVerified, 2, 1, 1, "cut off"},
		{"unreachable", []string{""}, VerdictNotRun + "the verifier could not be reached (", 1, 0, 0, ""},
	} {
		m := byRole(func(_ llm.Request, n int) *llm.Response {
			text := tt.replies[min(n, len(tt.replies)-1)]
			switch {
			case tt.name == "unreachable":
				return nil
			case strings.HasPrefix(tt.name, "cut"):
				return &llm.Response{Text: text, FinishReason: reply.FinishLength}
			}
			return &llm.Response{Text: text, FinishReason: "stop"}
		})
		s := &Steps{cfg: DefaultConfig(), llm: m}
		var c cost.Cost
		v, err := s.Verify(context.Background(), "How many rows?", answerSQL, "n\n5", 1, &c)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v, tt.want) || m.Calls() != tt.calls || c.FormatReasks != tt.reasks || c.VerdictsUnread != tt.unread {
			t.Errorf("%s: %q after %d calls, %d re-asks, %d unread; want %q…, %d, %d, %d",
				tt.name, v, m.Calls(), c.FormatReasks, c.VerdictsUnread, tt.want, tt.calls, tt.reasks, tt.unread)
		}
		if strings.HasPrefix(v, VerdictPassed) != strings.HasPrefix(tt.want, VerdictPassed) {
			t.Errorf("%s: %q passes, want %q", tt.name, v, tt.want)
		}
		if tt.reask != "" {
			if got := agenttest.LastMessage(m.Request(1)); got.Role != "user" || !strings.Contains(got.Content, tt.reask) {
				t.Errorf("%s: re-ask %q, want it to say %q", tt.name, got.Content, tt.reask)
			}
		}
	}
}

// TestUnreadVerdictReachesTheProposer: the Proposer reads an unreadable
// verdict as not verified, and the Planner sees it in the proposal.
func TestUnreadVerdictReachesTheProposer(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	m := byRole(func(req llm.Request, n int) *llm.Response {
		switch {
		case req.Role == RoleVerify:
			return &llm.Response{Text: "Looks right to me.", FinishReason: "stop"}
		case n == 0:
			return agenttest.ToolCalls(agenttest.Call("v", ToolSemanticVerifier, map[string]string{"sql_query": answerSQL}))
		}
		return &llm.Response{Text: "```sql\n" + answerSQL + "\n```"}
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	var c, vc cost.Cost
	p, err := s.Propose(context.Background(), db, "How many rows?", warehouse.SQLite, nil, seeds, &c, &vc)
	if err != nil {
		t.Fatal(err)
	}
	var toProposer string
	for _, r := range m.Requests() {
		if r.Role == RolePropose && len(r.Messages) > 2 {
			toProposer = r.Messages[2].Content
		}
	}
	if !strings.HasPrefix(toProposer, VerdictUnread) || !strings.HasSuffix(toProposer, notVerified) {
		t.Errorf("the proposer read %q, want an unread verdict saying the query is not verified", toProposer)
	}
	if !strings.HasPrefix(p.Verdict, VerdictUnread) || !strings.Contains(p.Render(), "Semantic verification: "+VerdictUnread) || vc.VerdictsUnread != 1 {
		t.Errorf("proposal verdict %q (%d unread), render:\n%s", p.Verdict, vc.VerdictsUnread, p.Render())
	}
}

// TestExecuteSQLArgsForms: execute_sql batches as models write them are
// run: string booleans, `sql` for `sql_query`, extra keys, one object for
// the list, Python literals. What cannot be read is not run, and the tool
// result says exactly what was wrong (counted as a re-ask).
func TestExecuteSQLArgsForms(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	for _, tt := range []struct {
		name    string
		args    string
		queries int    // executed from the first batch
		result  string // in the first batch's tool result, when the model gets another turn
		reasks  int
	}{
		{"string booleans", `{"queries": [{"description": "ids", "sql_query": "SELECT id FROM t", "exploration": "False"}, {"description": "names", "sql_query": "SELECT name FROM t", "exploration": "true"}]}`, 2, "", 0},
		{"sql key", `{"queries": [{"description": "ids", "sql": "SELECT id FROM t", "exploration": false}]}`, 1, "", 0},
		{"extra keys", `{"queries": [{"description": "ids", "sql_query": "SELECT id FROM t", "exploration": false, "tables": ["t"], "confidence": 0.9}], "reasoning": "simple"}`, 1, "", 0},
		{"one object for the list", `{"queries": {"description": "ids", "sql_query": "SELECT id FROM t", "exploration": false}}`, 1, "", 0},
		{"one query without a list", `{"description": "ids", "sql_query": "SELECT id FROM t", "exploration": 0}`, 1, "", 0},
		{"Python literals", `{'queries': [{'description': 'ids', 'sql_query': 'SELECT id FROM t', 'exploration': False},]}`, 1, "", 0},
		{"no exploration flag", `{"queries": [{"description": "ids", "sql_query": "SELECT id FROM t"}]}`, 1, "", 0},
		{"unreadable flag", `{"queries": [{"description": "ids", "sql_query": "SELECT id FROM t", "exploration": "maybe"}, {"description": "bad", "sql_query": "SELECT nope FROM t", "exploration": false}]}`,
			1, "Query 1 (ids): Not run: its exploration flag could not be read (field \"exploration\": maybe is not a boolean); give true or false.\nQuery 2 (bad): Compilation Error: ", 1},
		{"no SQL", `{"queries": [{"description": "ids", "exploration": false}]}`, 0, "Query 1 (ids): Not run: the query has no sql_query.", 1},
		{"no queries", `{"statements": 3}`, 0, `The execute_sql arguments have no "queries" list: give {"queries": [`, 1},
		{"broken JSON", `{"queries": [{"description": "ids", "sql_query": "SELECT id FROM t"`, 0, "The execute_sql arguments could not be read (", 1},
	} {
		m := byRole(func(_ llm.Request, n int) *llm.Response {
			if n == 0 {
				return agenttest.ToolCalls(raw("c1", ToolExecuteSQL, tt.args))
			}
			return agenttest.ToolCalls(agenttest.Call("c2", ToolExecuteSQL, queries(q{"count", answerSQL, false})))
		})
		s := &Steps{cfg: DefaultConfig(), llm: m}
		var c cost.Cost
		o, err := s.Probe(context.Background(), db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "ids of t"}, seeds, &c)
		if err != nil {
			t.Fatal(err)
		}
		first := o.Queries
		if tt.result != "" {
			first -= 1 // the second batch's query
			if got := agenttest.LastMessage(m.Request(1)); got.Role != "tool" || !strings.HasPrefix(got.Content, tt.result) {
				t.Errorf("%s: tool result %q, want prefix %q", tt.name, got.Content, tt.result)
			}
		} else if m.Calls() != 2 {
			t.Errorf("%s: %d calls, want the first batch and its choice turn to end the probe", tt.name, m.Calls())
		}
		if first != tt.queries || c.FormatReasks != tt.reasks || o.Status != ProbeFinal {
			t.Errorf("%s: %d queries run from the batch, %d re-asks, status %q; want %d, %d, %q", tt.name, first, c.FormatReasks, o.Status, tt.queries, tt.reasks, ProbeFinal)
		}
	}
}

// TestGeneratorChoosesFinal: the Final record is the success the
// generator names after the results; when its choice cannot be read, the
// fallback stands: the first success it marked most_promising unasked,
// else the first success. The pass counts which happened (D-P24).
func TestGeneratorChoosesFinal(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	type mq struct {
		Description string `json:"description"`
		SQL         string `json:"sql_query"`
		Exploration bool   `json:"exploration"`
		Promising   any    `json:"most_promising,omitempty"`
	}
	chosen3 := agenttest.ToolCalls(agenttest.Call("c", ToolChooseFinal, map[string]any{"query": 3}))
	unread := agenttest.ToolCalls(agenttest.Call("c", ToolChooseFinal, map[string]any{"pick": "the count"}))
	for _, tt := range []struct {
		name   string
		batch  []mq
		choice *llm.Response
		final  string
		chosen bool
	}{
		{"chosen after the results, over a mark", []mq{{"ids", "SELECT id FROM t", false, true}, {"names", "SELECT name FROM t", false, nil}, {"count", answerSQL, false, nil}}, chosen3, answerSQL, true},
		{"unread choice: the mark", []mq{{"ids", "SELECT id FROM t", false, nil}, {"count", answerSQL, false, true}, {"names", "SELECT name FROM t", false, nil}}, unread, answerSQL, false},
		{"unread choice: a mark as a string", []mq{{"ids", "SELECT id FROM t", false, nil}, {"count", answerSQL, false, "true"}}, unread, answerSQL, false},
		{"unread choice: marked twice, the first", []mq{{"ids", "SELECT id FROM t", false, true}, {"count", answerSQL, false, true}}, unread, "SELECT id FROM t", false},
		{"unread choice: a failed mark, the first", []mq{{"bad", "SELECT nope FROM t", false, true}, {"ids", "SELECT id FROM t", false, nil}, {"count", answerSQL, false, nil}}, unread, "SELECT id FROM t", false},
		{"unread choice: an exploration mark, the first", []mq{{"rows", "SELECT * FROM t", true, true}, {"ids", "SELECT id FROM t", false, nil}}, unread, "SELECT id FROM t", false},
		{"unread choice: an unreadable mark, the first", []mq{{"ids", "SELECT id FROM t", false, nil}, {"count", answerSQL, false, "perhaps"}}, unread, "SELECT id FROM t", false},
		{"unread choice, no mark: the first", []mq{{"ids", "SELECT id FROM t", false, nil}, {"count", answerSQL, false, nil}}, unread, "SELECT id FROM t", false},
	} {
		m := byRoleChoosing(func(llm.Request, int) *llm.Response {
			return agenttest.ToolCalls(agenttest.Call("e", ToolExecuteSQL, map[string]any{"queries": tt.batch}))
		}, func(llm.Request, int) *llm.Response { return tt.choice })
		s := &Steps{cfg: DefaultConfig(), llm: m}
		o, err := s.Probe(context.Background(), db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "p"}, seeds, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		f := o.final()
		if f == nil || f.SQL != tt.final || o.Chosen != tt.chosen {
			t.Errorf("%s: final %+v, chosen %v; want %q, %v", tt.name, f, o.Chosen, tt.final, tt.chosen)
			continue
		}
		finals := 0
		for _, r := range o.Records {
			if r.Class == ClassFinal {
				finals++
			}
		}
		if finals != 1 {
			t.Errorf("%s: %d Final records, want 1", tt.name, finals)
		}
		st := NewPlanState("Q?")
		st.Probes, st.Pending = []string{"p"}, []PendingCall{{ID: "g", Probes: true, From: 0, To: 1}}
		st.Resolve([]*ProbeOutcome{o}, nil)
		wantChosen, wantFirst := 0, 1
		if tt.chosen {
			wantChosen, wantFirst = 1, 0
		}
		last := st.Messages[len(st.Messages)-1].Content
		if st.FinalsChosen != wantChosen || st.FinalsFirst != wantFirst || !strings.Contains(last, "Final SQL: "+tt.final+"\n") {
			t.Errorf("%s: planner counts %d chosen, %d first, block %q; want %d, %d, Final SQL %q", tt.name, st.FinalsChosen, st.FinalsFirst, last, wantChosen, wantFirst, tt.final)
		}
		var rec passRecord
		if err := json.Unmarshal(passResult(0, 1, st, "").Payload, &rec); err != nil || rec.FinalsChosen != wantChosen || rec.FinalsFirst != wantFirst {
			t.Errorf("%s: pass record %+v (%v)", tt.name, rec, err)
		}
	}
}

// TestPlannerArgsForms: generate_testcase probes and the no-proposer
// Planner's sql_query are read leniently; what cannot be read is answered
// with what was wrong and counted.
func TestPlannerArgsForms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		args   string
		probes string // joined by |; "" = none run
		result string // the immediate tool result, when none run
	}{
		{"canonical", `{"probes": ["a", "b"]}`, "a|b", ""},
		{"one string", `{"probes": "ids of t"}`, "ids of t", ""},
		{"list in a string", `{"probes": "[\"a\", \"b\"]"}`, "a|b", ""},
		{"objects", `{"probes": [{"probe": "a"}, {"question": "b", "why": "x"}]}`, "a|b", ""},
		{"Python literals", `{'probes': ['a', 'b',]}`, "a|b", ""},
		{"singular key", `{"probe": "a"}`, "a", ""},
		{"no probes", `{"tests": ["a"]}`, "", `The generate_testcase arguments have no "probes" list: give {"probes": [`},
		{"a number in the list", `{"probes": ["a", 3]}`, "", "The generate_testcase arguments have probe 2 that is not a text:"},
		{"broken JSON", `{"probes": ["a"`, "", "The generate_testcase arguments could not be read ("},
	} {
		m := byRole(func(_ llm.Request, n int) *llm.Response {
			if n == 0 {
				return agenttest.ToolCalls(raw("g", ToolGenerateTestcase, tt.args))
			}
			return agenttest.ToolCalls(agenttest.Call("g2", ToolGenerateTestcase, map[string]any{"probes": []string{"z"}}))
		})
		s := &Steps{cfg: DefaultConfig(), llm: m}
		var c cost.Cost
		st := NewPlanState("Q?")
		act, err := s.PlanTurn(context.Background(), st, nil, seeds, &c)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(act.Probes, "|")
		if tt.result == "" {
			if got != tt.probes || c.FormatReasks != 0 {
				t.Errorf("%s: probes %q, %d re-asks; want %q, 0", tt.name, got, c.FormatReasks, tt.probes)
			}
			continue
		}
		if res := st.Messages[2].Content; got != "z" || !strings.HasPrefix(res, tt.result) || c.FormatReasks != 1 {
			t.Errorf("%s: probes %q, result %q, %d re-asks; want the retry's z, prefix %q, 1", tt.name, got, res, c.FormatReasks, tt.result)
		}
	}

	// The no-proposer Planner: `sql` and a fenced `query` are read; a
	// finish with no SQL is told so.
	db := agenttest.SQLite(t, tSQL)
	m := byRole(func(_ llm.Request, n int) *llm.Response {
		switch n {
		case 0:
			return agenttest.ToolCalls(raw("x", ToolExecuteSQL, `{"sql": "SELECT id FROM t"}`))
		case 1:
			return agenttest.ToolCalls(raw("f", ToolFinish, `{"final": true}`))
		}
		return agenttest.ToolCalls(raw("f", "Finish", `{"query": "`+"```sql\\nSELECT id FROM t\\n```"+`"}`))
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	s.cfg.NoProposer = true
	var c cost.Cost
	st := s.OpenPass("Q?")
	act, err := s.PlanTurn(context.Background(), st, &PlanEnv{Warehouse: db, Question: "Q?", Verify: &cost.Cost{}}, seeds, &c)
	if err != nil || !act.Finish || st.Proposal == nil || st.Proposal.SQL != "SELECT id FROM t" || c.Queries != 1 || c.FormatReasks != 1 {
		t.Fatalf("no-proposer: %+v, proposal %+v, %d queries, %d re-asks (%v); want finish with SELECT id FROM t, 1 query, 1 re-ask", act, st.Proposal, c.Queries, c.FormatReasks, err)
	}
	if got := st.Messages[4].Content; got != sqlArgsResult(fmt.Errorf("the arguments have no sql_query")) {
		t.Errorf("finish without SQL answered %q", got)
	}
}

// TestSequentialPlan: with sequential-plan the Planner is told to plan one
// probe per turn (golden plan.sequential), generate_testcase runs one probe
// (the rest are dropped, said and counted), and each probe's outcome
// reaches the Planner before it plans the next (Table 2, C.4 L413; D-P22).
func TestSequentialPlan(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	ctx := context.Background()
	m := byRole(func(req llm.Request, n int) *llm.Response {
		if req.Role == RoleTestcase {
			return agenttest.ToolCalls(agenttest.Call("e", ToolExecuteSQL, queries(q{"ids", "SELECT id FROM t", false})))
		}
		switch n {
		case 0: // a batch, as a model that ignores the prompt writes it
			return agenttest.ToolCalls(agenttest.Call("g", ToolGenerateTestcase, map[string]any{"probes": []string{"ids of t", "names of t", "values of t"}}))
		case 1: // two calls in one message
			return agenttest.ToolCalls(agenttest.Call("g1", ToolGenerateTestcase, map[string]any{"probes": []string{"names of t"}}),
				agenttest.Call("g2", ToolGenerateTestcase, map[string]any{"probes": []string{"values of t"}}))
		}
		return agenttest.ToolCalls(agenttest.Call("p", ToolProposeFinalSQL, map[string]any{}))
	})
	s := &Steps{cfg: DefaultConfig(), llm: m}
	s.cfg.SequentialPlan = true
	st := s.OpenPass("Q?")
	if st.Messages[0].Content != PlannerPromptSequential("Q?") {
		t.Fatal("the pass does not open with the sequential planner prompt")
	}
	var probeSeen []string // the probe outcome each planner request carried last
	for turn := 0; turn < 3; turn++ {
		act, err := s.PlanTurn(ctx, st, nil, seeds, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		if turn == 2 {
			if !act.Propose || len(act.Probes) != 0 {
				t.Errorf("third turn: %+v, want the proposer", act)
			}
			break
		}
		want := []string{"ids of t", "names of t"}[turn]
		if len(act.Probes) != 1 || act.Probes[0] != want {
			t.Fatalf("turn %d: probes %q, want only %q", turn, act.Probes, want)
		}
		o, err := s.Probe(ctx, db, TestcaseInput{Dialect: warehouse.SQLite, Probe: act.Probes[0]}, seeds, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		st.Resolve([]*ProbeOutcome{o}, nil)
	}
	for _, r := range m.Requests() {
		if r.Role == RolePlan && len(r.Messages) > 1 {
			for _, msg := range r.Messages[len(r.Messages)-2:] {
				if msg.Role == "tool" {
					probeSeen = append(probeSeen, msg.Content)
				}
			}
		}
	}
	if len(probeSeen) != 3 || !strings.HasPrefix(probeSeen[0], "Probe 1: ids of t\nStatus: final SQL found") ||
		!strings.HasSuffix(probeSeen[0], "Only the first probe was run: with sequential planning one probe runs per turn. The other 2 were not run; give the next one in your next turn if it is still needed.") ||
		!strings.HasPrefix(probeSeen[1], "Probe 1: names of t\nStatus: final SQL found") || probeSeen[2] != errSequentialTurn {
		t.Errorf("the planner read:\n%s", strings.Join(probeSeen, "\n---\n"))
	}
	if st.ProbesDropped != 3 {
		t.Errorf("%d probes dropped, want 3 (2 of the batch, 1 second call)", st.ProbesDropped)
	}
	for _, tool := range m.Request(0).Tools {
		if tool.Name == ToolGenerateTestcase && (!strings.Contains(tool.Description, "exactly one probe") || !strings.Contains(string(tool.Parameters), `"maxItems":1`)) {
			t.Errorf("generate_testcase under sequential planning: %s %s", tool.Description, tool.Parameters)
		}
	}
	// Without it the same batch runs whole.
	m.Reset()
	s.cfg.SequentialPlan = false
	if act, err := s.PlanTurn(ctx, s.OpenPass("Q?"), nil, seeds, &cost.Cost{}); err != nil || len(act.Probes) != 3 {
		t.Errorf("parallel planning: %+v (%v), want 3 probes", act, err)
	}
}

// counts are the comparable counters of a cost.Cost.
type counts struct{ Queries, QueryErrors, FormatReasks, FormatEnded, FormatLost int }

// TestStepBudgets: every reply the agent answers (tool results, the
// guard's feedback, a re-ask) is a step besides the reply's own, so Table
// 5's 20 / 15 / 20 iterations are at most 10 / 8 / 10 LLM turns whatever
// the model writes; a loop that ends on unreadable output is counted, and
// a Proposer that never gave a readable SQL loses its candidate (D-P3).
func TestStepBudgets(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	ctx := context.Background()
	for _, tt := range []struct {
		name  string
		text  string
		calls int
		c     counts
		sql   string
	}{
		{"failing final SQL", "```sql\nSELECT nope FROM t\n```", 10, counts{Queries: 1, QueryErrors: 1}, "SELECT nope FROM t"},
		{"never readable", "I would count the rows of t.", 10, counts{FormatReasks: 10, FormatEnded: 1, FormatLost: 1}, ""},
	} {
		m := byRole(func(llm.Request, int) *llm.Response { return &llm.Response{Text: tt.text, FinishReason: "stop"} })
		s := &Steps{cfg: DefaultConfig(), llm: m}
		var c cost.Cost
		p, err := s.Propose(ctx, db, "Q?", warehouse.SQLite, nil, seeds, &c, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		got := counts{Queries: c.Queries, QueryErrors: c.QueryErrors, FormatReasks: c.FormatReasks, FormatEnded: c.FormatEnded, FormatLost: c.FormatLost}
		if m.Calls() != tt.calls || got != tt.c || p.Stop != "proposer_recursion" || p.SQL != tt.sql {
			t.Errorf("proposer, %s: %d calls, %+v, stop %q, SQL %q; want %d calls, %+v, proposer_recursion, %q", tt.name, m.Calls(), got, p.Stop, p.SQL, tt.calls, tt.c, tt.sql)
		}
	}
	// A generator and a planner that never call a tool.
	text := func(llm.Request, int) *llm.Response {
		return &llm.Response{Text: "Let me think.", FinishReason: "stop"}
	}
	m := byRole(text)
	s := &Steps{cfg: DefaultConfig(), llm: m}
	var c cost.Cost
	o, err := s.Probe(ctx, db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "p"}, seeds, &c)
	if err != nil || m.Calls() != 8 || o.Status != ProbeLimit || c.FormatReasks != 8 || c.FormatEnded != 1 {
		t.Errorf("generator without tools: %d calls, %q, %d re-asks, %d ended (%v); want 8, %q, 8, 1", m.Calls(), o.Status, c.FormatReasks, c.FormatEnded, err, ProbeLimit)
	}
	m = byRole(text)
	s = &Steps{cfg: DefaultConfig(), llm: m}
	c = cost.Cost{}
	act, err := s.PlanTurn(ctx, NewPlanState("Q?"), nil, seeds, &c)
	if err != nil || m.Calls() != 10 || act.Stop != "planner_recursion" || c.FormatReasks != 10 || c.FormatEnded != 1 || c.FormatLost != 1 {
		t.Errorf("planner without tools: %d calls, %+v, %d re-asks, %d ended, %d lost (%v); want 10, planner_recursion, 10, 1, 1",
			m.Calls(), act, c.FormatReasks, c.FormatEnded, c.FormatLost, err)
	}
}

// TestGeneratorChoosesAfterResults: after a batch with a successful
// answering query the generator sees the results and names its Final with
// choose_final, in the forms models write the choice, or revises; the
// question lists the successes by their numbers in the batch (D-P24).
func TestGeneratorChoosesAfterResults(t *testing.T) {
	t.Parallel()
	db := agenttest.SQLite(t, tSQL)
	three := []q{{"ids", "SELECT id FROM t", false}, {"bad", "SELECT nope FROM t", false}, {"count", answerSQL, false}}
	call := func(args map[string]any) *llm.Response {
		return agenttest.ToolCalls(agenttest.Call("c", ToolChooseFinal, args))
	}
	for _, tt := range []struct {
		name    string
		batch   []q
		choices []*llm.Response // the choice turns', in order
		asked   string          // the choice question's opening
		final   string
		chosen  bool
		reasks  int
		calls   int
	}{
		{"a number", three, []*llm.Response{call(map[string]any{"query": 3})}, "Queries 1, 3 of your batch", answerSQL, true, 0, 2},
		{"a number as text", three, []*llm.Response{call(map[string]any{"query": "3"})}, "Queries 1, 3 of your batch", answerSQL, true, 0, 2},
		{"another key name", three, []*llm.Response{call(map[string]any{"query_number": 3})}, "Queries 1, 3 of your batch", answerSQL, true, 0, 2},
		{"namespaced tool name", three, []*llm.Response{agenttest.ToolCalls(agenttest.Call("c", "functions.choose_final", map[string]any{"query": 3}))}, "Queries 1, 3 of your batch", answerSQL, true, 0, 2},
		{"in prose, no tool call", three, []*llm.Response{{Text: "Query 3 is the most promising: it counts the rows.", FinishReason: "stop"}}, "Queries 1, 3 of your batch", answerSQL, true, 0, 2},
		{"the first success chosen", three, []*llm.Response{call(map[string]any{"query": 1})}, "Queries 1, 3 of your batch", "SELECT id FROM t", true, 0, 2},
		{"a failed query named: the first stands", three, []*llm.Response{call(map[string]any{"query": 2})}, "Queries 1, 3 of your batch", "SELECT id FROM t", false, 1, 2},
		{"unreadable: the first stands", three, []*llm.Response{call(map[string]any{"pick": "the count"})}, "Queries 1, 3 of your batch", "SELECT id FROM t", false, 1, 2},
		{"an unknown tool: the first stands", three, []*llm.Response{agenttest.ToolCalls(agenttest.Call("c", "select_final", map[string]any{"query": 3}))}, "Queries 1, 3 of your batch", "SELECT id FROM t", false, 1, 2},
		{"one success: checked against the question", []q{{"bad", "SELECT nope FROM t", false}, {"count", answerSQL, false}}, []*llm.Response{call(map[string]any{"query": 2})},
			"Query 2 of your batch executed with Success. Call choose_final with the number of the query if its result answers", answerSQL, true, 0, 2},
		// The revision's batch is the one chosen from; the first batch's
		// success stays as evidence (Successful).
		{"revised", []q{{"ids", "SELECT id FROM t", false}}, []*llm.Response{agenttest.ToolCalls(agenttest.Call("e2", ToolExecuteSQL, queries(q{"count", answerSQL, false}))), call(map[string]any{"query": 1})},
			"Query 1 of your batch", answerSQL, true, 0, 3},
	} {
		m := byRoleChoosing(func(llm.Request, int) *llm.Response {
			return agenttest.ToolCalls(agenttest.Call("e", ToolExecuteSQL, map[string]any{"queries": tt.batch}))
		}, func(req llm.Request, n int) *llm.Response {
			if req.ToolChoice != llm.ToolChoiceRequired {
				t.Errorf("%s: the choice turn's tool choice is %q; it must leave revising open", tt.name, req.ToolChoice)
			}
			return tt.choices[min(n, len(tt.choices)-1)]
		})
		s := &Steps{cfg: DefaultConfig(), llm: m}
		var c cost.Cost
		o, err := s.Probe(context.Background(), db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "p"}, seeds, &c)
		if err != nil {
			t.Fatal(err)
		}
		f := o.final()
		if f == nil || f.SQL != tt.final || o.Chosen != tt.chosen || c.FormatReasks != tt.reasks || o.Status != ProbeFinal {
			t.Errorf("%s: final %+v, chosen %v, %d format re-asks, status %q; want %q, %v, %d, %q", tt.name, f, o.Chosen, c.FormatReasks, o.Status, tt.final, tt.chosen, tt.reasks, ProbeFinal)
		}
		reqs := m.Requests()
		if prompt := agenttest.LastMessage(reqs[1]).Content; !strings.HasPrefix(prompt, tt.asked) || !strings.Contains(prompt, "choose_final") {
			t.Errorf("%s: the choice was asked as %q; want it to open %q", tt.name, prompt, tt.asked)
		}
		if o.Calls != tt.calls || m.Calls() != tt.calls {
			t.Errorf("%s: %d calls (%d counted); want %d", tt.name, m.Calls(), o.Calls, tt.calls)
		}
		if tt.name == "revised" {
			if classes := []string{o.Records[0].Class, o.Records[1].Class}; classes[0] != ClassSuccessful || classes[1] != ClassFinal {
				t.Errorf("revised: classes %v; want the first batch's success Successful, the revision's Final", classes)
			}
		}
	}
	// No turn left after the batch, or the choice turn's call failed:
	// the first success stands, unchosen, and the probe still has its Final.
	for _, tt := range []struct {
		name   string
		steps  int
		choice *llm.Response
	}{
		{"no step left", 2, nil},
		{"the choice call failed", 15, nil},
	} {
		m := byRoleChoosing(func(llm.Request, int) *llm.Response {
			return agenttest.ToolCalls(agenttest.Call("e", ToolExecuteSQL, queries(three...)))
		}, func(llm.Request, int) *llm.Response { return tt.choice })
		s := &Steps{cfg: DefaultConfig(), llm: m}
		s.cfg.MaxTestcaseSteps = tt.steps
		o, err := s.Probe(context.Background(), db, TestcaseInput{Dialect: warehouse.SQLite, Probe: "p"}, seeds, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		wantCalls := 2
		if tt.steps == 2 {
			wantCalls = 1
		}
		if f := o.final(); f == nil || f.SQL != "SELECT id FROM t" || o.Chosen || o.Status != ProbeFinal || m.Calls() != wantCalls {
			t.Errorf("%s: final %+v, chosen %v, status %q, %d calls; want the first success, unchosen, %q, %d calls", tt.name, f, o.Chosen, o.Status, m.Calls(), ProbeFinal, wantCalls)
		}
	}
}
