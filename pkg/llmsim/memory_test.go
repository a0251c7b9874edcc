package llmsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	agentreply "github.com/quorumsql/quorum/pkg/reply"
)

// The re-ask sentences the agents send, as the memory recognises them.
func TestReaskPhrases(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text string
	}{
		{"reply cut", agentreply.ReaskCut},
		{"reply no sql", agentreply.ReaskNoSQL},
		{"reply empty", agentreply.ReaskEmpty},
		{"reforce fence", reforce.ReaskFence("the reply was cut off inside its query")},
		{"reforce one", reforce.ReaskOneSQL},
		{"reforce explore", reforce.ExploreReask("sqlite", 1)},
		{"pexa verdict", "Your verdict could not be read: no JSON. Answer with one JSON object."},
		{"pexa planner", "You must call one of the tools."},
	}
	for _, tc := range cases {
		if !isReask([]wireMessage{{Role: "user", Content: tc.text}}, memEntry{}, nil, "") {
			t.Errorf("%s: %q is not read as a re-ask", tc.name, tc.text)
		}
	}
	if isReask([]wireMessage{{Role: "user", Content: reforce.EmptyResult}}, memEntry{}, nil, "") {
		t.Errorf("the empty-result feedback %q is read as a re-ask", reforce.EmptyResult)
	}
	calls := []wireToolCall{{ID: "c1"}}
	unread := wireMessage{Role: "tool", ToolCallID: "c1", Content: `The arguments were not understood: bad JSON. Give {"sql_query": "..."}.`}
	if !isReask([]wireMessage{unread}, memEntry{}, calls, "") {
		t.Errorf("the tool result %q is not read as a re-ask", unread.Content)
	}
	if isReask([]wireMessage{{Role: "tool", ToolCallID: "c1", Content: "Success: 3 rows"}}, memEntry{}, calls, "") {
		t.Error("a successful tool result is read as a re-ask")
	}
	if !isReask([]wireMessage{{Role: "user", Content: "same prompt"}}, memEntry{cut: true}, nil, "same prompt") ||
		isReask([]wireMessage{{Role: "user", Content: "same prompt"}}, memEntry{}, nil, "same prompt") {
		t.Error("the same prompt again should be a re-ask after a cut reply only")
	}
}

// TestMemoryBound: the memory keeps at most its entries and bytes,
// evicting the least recently used.
func TestMemoryBound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                 string
		maxEntries, maxBytes int
		add                  int
		wantKept             int
	}{
		{"by entries", 4, 1 << 20, 10, 4},
		{"by bytes", 100, 3 * (64 + 10), 10, 3},
		{"one too big", 4, 10, 1, 0},
	}
	for _, tc := range cases {
		m := newMemory(tc.maxEntries, tc.maxBytes)
		for i := range tc.add {
			m.remember(7, reply{text: fmt.Sprintf("dressed %d", i)}, reply{text: fmt.Sprintf("canon%04d", i)})
		}
		kept := 0
		for i := range tc.add {
			if e, ok := m.lookup(7, wireMessage{Role: "assistant", Content: fmt.Sprintf("dressed %d", i)}); ok {
				kept++
				if i < tc.add-tc.wantKept {
					t.Errorf("%s: reply %d kept, want only the last %d", tc.name, i, tc.wantKept)
				}
				if want := fmt.Sprintf("canon%04d", i); e.rep.text != want {
					t.Errorf("%s: reply %d maps to %q, want %q", tc.name, i, e.rep.text, want)
				}
			}
		}
		if kept != tc.wantKept || m.order.Len() != tc.wantKept || len(m.entries) != tc.wantKept {
			t.Errorf("%s: kept %d (list %d, map %d), want %d", tc.name, kept, m.order.Len(), len(m.entries), tc.wantKept)
		}
	}
}

// simTurn is one reply as an agent keeps it, with its finish.
type simTurn struct {
	msg    llm.Message
	finish string
}

func turnOf(r simReply) simTurn {
	m := llm.Message{Role: "assistant", Content: r.text()}
	for _, c := range r.calls {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return simTurn{m, r.finish}
}

func bodyOf(seed int64, msgs []llm.Message, tls []json.RawMessage) map[string]any {
	b := map[string]any{"model": "m", "seed": seed, "messages": wireMsgs(msgs)}
	if tls != nil {
		b["tools"], b["tool_choice"] = tls, "required"
	}
	return b
}

// answerKey is a reply's answer without its surface: its SQL, or its
// call's name and lenient arguments.
func answerKey(r simReply) string {
	if len(r.calls) > 0 {
		b, _ := json.Marshal(argsOf(r.calls[0].Function.Arguments))
		return r.calls[0].Function.Name + " " + string(b)
	}
	return answerOf(r.text())
}

// converse runs an agent-like conversation under url: each turn's reply
// is kept as sent; a cut reply (or, with reaskAll, the first reply) is
// re-asked as the agents do, and the answer to a re-ask is whole. It returns the last
// reply's answer and how many re-asks it took.
func converse(t *testing.T, url string, first string, next []string, tls []json.RawMessage, seed int64, reaskAll bool) (string, int) {
	t.Helper()
	msgs := []llm.Message{llm.User(first)}
	reasks := 0
	var last simReply
	for turn := 0; ; turn++ {
		for k := 0; ; k++ {
			last = askRaw(t, url, bodyOf(seed+int64(100*turn+k), msgs, tls))
			if last.status != http.StatusOK {
				t.Fatalf("turn %d: status %d: %s", turn, last.status, last.errMsg)
			}
			tt := turnOf(last)
			msgs = append(msgs, tt.msg)
			if k > 0 && tt.finish == "length" {
				t.Errorf("turn %d: the answer to re-ask %d was cut again: %q", turn, k, tt.msg.Content)
			}
			if k >= 5 || tt.finish != "length" && !(reaskAll && k == 0 && turn == 0) {
				break
			}
			reasks++
			switch {
			case len(tt.msg.ToolCalls) > 0:
				msgs = append(msgs, llm.ToolResult(tt.msg.ToolCalls[0].ID, `The execute_sql arguments could not be read (unexpected end of JSON input): give {"queries": [...]}.`))
			case tt.finish == "length":
				msgs = append(msgs, llm.User(reforce.ReaskFence("the reply was cut off inside its query")))
			default:
				msgs = append(msgs, llm.User(reforce.ReaskOneSQL))
			}
		}
		if turn >= len(next) {
			return answerKey(last), reasks
		}
		if len(tls) > 0 {
			msgs = append(msgs, llm.ToolResult(last.calls[0].ID, next[turn]))
		} else {
			msgs = append(msgs, llm.User(next[turn]))
		}
	}
}

// TestPersonaConversationKeepsTheAnswer: a conversation that re-sends the
// model's replies as a persona wrote them, cut replies re-asked, gets
// canonical's answers: the history is read in canonical form, a re-ask
// gets the reply it asks for again, and the re-asked pair drops out.
func TestPersonaConversationKeepsTheAnswer(t *testing.T) {
	t.Parallel()
	ds, canon, canonURL, urls := personaSims(t)
	type convCase struct {
		name     string
		first    func(e *dataset.Example) string
		next     []string
		tools    []json.RawMessage
		reaskAll bool
	}
	gen := func(e *dataset.Example) string {
		return "DB info...\nTask: " + e.Question + "\nPlease think step by step and " + MarkerGenerate + " in sqlite dialect."
	}
	refine := MarkerInputSQL + "\nSELECT 1\n" + MarkerErrorInfo + ":\nno such column\nPlease correct it and output only 1 complete SQL query."
	cases := []convCase{
		{name: "refine twice", first: gen, next: []string{refine, refine + " "}},
		{name: "asked again", first: gen, next: []string{refine}, reaskAll: true},
		{name: "testcase fix", tools: testcaseTools, first: func(e *dataset.Example) string {
			info := canon.know.find("Task: " + e.Question)
			return testcasePrompt(canon, e, tag(info, "Retrieve a few sample rows from "+canon.know.goldTables(info)[0].name))
		}, next: []string{"Query 1 (sample): Compilation Error: no such column"}},
	}
	examples := []*dataset.Example{ds.Examples[0], ds.Examples[10], ds.Examples[20]}
	seeds := int64(6)
	if raceEnabled {
		seeds = 2
	}
	for _, p := range listedPersonas() {
		reasks := 0
		for _, tc := range cases {
			for _, e := range examples {
				for seed := int64(0); seed < seeds; seed++ {
					want, _ := converse(t, canonURL, tc.first(e), tc.next, tc.tools, seed*1000, false)
					got, n := converse(t, urls[p], tc.first(e), tc.next, tc.tools, seed*1000, tc.reaskAll)
					reasks += n
					if got != want {
						t.Errorf("%s %s %s seed %d: answer %q, canonical %q", p, tc.name, e.ID, seed, got, want)
					}
				}
			}
		}
		if p == PersonaTruncating && reasks == 0 && !raceEnabled {
			t.Errorf("truncating: no reply was cut, so the re-asks went untested")
		}
	}
}

// TestPExAMostPromising: execute_sql batches mark one answering query
// most_promising only when the tool's schema offers it, and mostly the
// probe's answering query; the other fields are as without the mark.
func TestPExAMostPromising(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := newSim(t, Config{Dataset: ds, Seed: 5})
	offered := tools(toolBatchPromisingJSON, toolNEIJSON)
	type batch struct {
		Queries []map[string]any `json:"queries"`
	}
	marked, first, total := 0, 0, 0
	for _, e := range ds.Examples[:12] {
		info := s.know.find("Task: " + e.Question)
		prompt := testcasePrompt(s, e, tag(info, "Retrieve the distinct values of "+s.know.goldTables(info)[0].columns[0]+" in "+s.know.goldTables(info)[0].name))
		for seed := int64(0); seed < 6; seed++ {
			plain := chatTo(t, ts.URL, seed, []llm.Message{llm.User(prompt)}, testcaseTools, "required")
			with := chatTo(t, ts.URL, seed, []llm.Message{llm.User(prompt)}, offered, "required")
			if plain.calls[0].Function.Name != toolExecuteSQL {
				continue
			}
			if strings.Contains(plain.calls[0].Function.Arguments, "most_promising") {
				t.Errorf("%s seed %d: most_promising without the schema offering it: %s", e.ID, seed, plain.calls[0].Function.Arguments)
			}
			var a, b batch
			_ = json.Unmarshal([]byte(plain.calls[0].Function.Arguments), &a)
			_ = json.Unmarshal([]byte(with.calls[0].Function.Arguments), &b)
			n, at := 0, -1
			for i, q := range b.Queries {
				if q["most_promising"] == true {
					n, at = n+1, i
					if q["exploration"] == true {
						t.Errorf("%s seed %d: an exploration query is most_promising", e.ID, seed)
					}
				}
				delete(q, "most_promising")
			}
			if !reflect.DeepEqual(a.Queries, b.Queries) {
				t.Errorf("%s seed %d: the batch changed beyond the mark:\n%v\nwithout it\n%v", e.ID, seed, b.Queries, a.Queries)
			}
			if n != 1 {
				t.Errorf("%s seed %d: %d queries marked most_promising, want 1", e.ID, seed, n)
				continue
			}
			total++
			marked++
			for i, q := range a.Queries {
				if q["exploration"] != true {
					if i == at {
						first++
					}
					break
				}
			}
		}
	}
	if total == 0 || first*100 < marked*60 || first == marked {
		t.Errorf("the probe's answering query was marked %d of %d times, want mostly but not always", first, marked)
	}
}

// toolBatchPromisingJSON is execute_sql as the agent offers it (D-P5).
const toolBatchPromisingJSON = `{"type":"function","function":{"name":"execute_sql","description":"Execute a batch of SQL queries.","parameters":{"type":"object","required":["queries"],"properties":{"queries":{"type":"array","items":{"type":"object","required":["description","sql_query","exploration"],"properties":{"description":{"type":"string"},"sql_query":{"type":"string"},"exploration":{"type":"boolean"},"most_promising":{"type":"boolean"}}}}}}}}`

// toolGenerateOneJSON is generate_testcase under sequential planning.
const toolGenerateOneJSON = `{"type":"function","function":{"name":"generate_testcase","description":"Give exactly one probe per call.","parameters":{"type":"object","required":["probes"],"properties":{"probes":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":1}}}}}`

// TestPExASequentialPlan: a sequential Planner (its prompt's guideline or
// generate_testcase's maxItems 1) asks one probe per turn, each one of
// its plan not asked yet, then proposes.
func TestPExASequentialPlan(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Seed: 4})
	cases := []struct {
		name   string
		prompt func(q string) string
		tools  []json.RawMessage
	}{
		{"prompt", pexa.PlannerPromptSequential, plannerTools},
		{"schema", planPrompt, tools(toolGenerateOneJSON, toolProposeJSON, toolFinishJSON)},
		{"both", pexa.PlannerPromptSequential, tools(toolGenerateOneJSON, toolProposeJSON, toolFinishJSON)},
	}
	type probes struct {
		Probes []string `json:"probes"`
	}
	for _, tc := range cases {
		for _, e := range ds.Examples[:8] {
			msgs := []llm.Message{llm.User(tc.prompt(e.Question))}
			var asked []string
			for turn := 0; ; turn++ {
				a := chatTo(t, ts.URL, int64(turn), msgs, tc.tools, "required")
				if len(a.calls) == 1 && a.calls[0].Function.Name == toolProposeFinalSQL {
					break
				}
				var p probes
				oneCall(t, a, toolGenerateTestcase, &p)
				if len(p.Probes) != 1 {
					t.Fatalf("%s %s turn %d: %d probes, want one: %q", tc.name, e.ID, turn, len(p.Probes), p.Probes)
				}
				for _, q := range asked {
					if q == p.Probes[0] {
						t.Fatalf("%s %s turn %d: probe %q asked again", tc.name, e.ID, turn, q)
					}
				}
				asked = append(asked, p.Probes[0])
				if len(asked) > maxSequentialProbes {
					t.Fatalf("%s %s: %d probes, want at most %d", tc.name, e.ID, len(asked), maxSequentialProbes)
				}
				msgs = append(msgs, a.asMessage(), llm.ToolResult(a.calls[0].ID, "Probe 1: "+p.Probes[0]+"\nStatus: final\nFinal SQL: SELECT 1\nExecuted Result (truncated): 1"))
			}
			if len(asked) == 0 {
				t.Errorf("%s %s: proposed without a probe", tc.name, e.ID)
			}
		}
	}
}

// TestToolNameGuess: a tool result whose call is not in the conversation
// is named by its shape, the verifier's unread and not-run verdicts too.
func TestToolNameGuess(t *testing.T) {
	t.Parallel()
	cases := []struct{ content, want string }{
		{"Probe 1: rows of t\nStatus: final", toolGenerateTestcase},
		{"Proposed SQL: SELECT 1", toolProposeFinalSQL},
		{"Semantic check passed: fine", toolSemanticVerifier},
		{"Semantic Error: wrong filter", toolSemanticVerifier},
		{pexa.VerdictUnread + "no JSON." + " The query is not verified.", toolSemanticVerifier},
		{pexa.VerdictNotRun + "the verifier could not be reached.", toolSemanticVerifier},
		{"Query 1 (ids): Success", toolExecuteSQL},
		{"something else", ""},
	}
	c := newConvo(nil, 0)
	for _, tc := range cases {
		if got := c.toolName(llm.Message{Role: "tool", ToolCallID: "gone", Content: tc.content}); got != tc.want {
			t.Errorf("tool result %q: named %q, want %q", tc.content, got, tc.want)
		}
	}
}

// TestMemorySameDressTwoAnswers: two different canonical replies dressed
// alike (o3 writes both as a bare "Answer:" block) stay apart, each under
// the conversation that asked for it.
func TestMemorySameDressTwoAnswers(t *testing.T) {
	m := newMemory(100, 1<<20)
	dressed := reply{text: "Answer:\n```sql\nSELECT 1\n```"}
	first := []wireMessage{{Role: "user", Content: "Q"}}
	second := append(append([]wireMessage(nil), first...), wireMessage{Role: "assistant", Content: "Let me think.\n\n```sql\nSELECT 1\n```"}, wireMessage{Role: "user", Content: "No rows. Fix it."})
	m.remember(prefixKey(first), dressed, reply{text: "Let me think.\n\n```sql\nSELECT 1\n```"})
	m.remember(prefixKey(second), dressed, reply{text: "Let me try a different approach.\n\n```sql\nSELECT 1\n```"})
	for _, tc := range []struct {
		prefix []wireMessage
		want   string
	}{{first, "Let me think."}, {second, "Let me try a different approach."}} {
		e, ok := m.lookup(prefixKey(tc.prefix), wireMessage{Role: "assistant", Content: dressed.text})
		if !ok || !strings.HasPrefix(e.rep.text, tc.want) {
			t.Errorf("after %d messages the dressed reply reads as %q (found %v), want the canonical %q…", len(tc.prefix), e.rep.text, ok, tc.want)
		}
	}
}
