package llmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// The PExA prompts as the agent sends them: the paper's Figs. 3–6 word for
// word (spec pexa-raise.md §1.8), SQLite dialect block (D-P10).
const (
	figPlan = `You are an excellent SQL agent whose task is to manage complex SQL query writing for a given natural language question.
Tools Available to Agent:
- Database Exploration: Call the worker (generate_testcase tool) to generate SQL queries for probes. Probes are simple natural language queries to provide basic information about the data to the proposer for writing the final SQL.
- Propose Final SQL: Call the proposer (propose_final_sql tool) to integrate probes and synthesize the final SQL query. You should call the proposer only when you feel you have enough probes to generate the final SQL.
- Finish: If you are confident that the final SQL query is ready and the executed results look good, you can submit it (finish tool). Else you can generate more probes to guide the final SQL generation.
Guidelines:
- Keep your probes simple and focused on exploring the data. They should be answerable by simple SQL queries.
- Make sure each probe is independent and self-contained and does not depend on previous probes. Do not include any probes for combining results or just for an extra computation/filtering operation.
- Generate only as many probes as needed. Do not be redundant.
Failure Examples:
Question: "Suppose it is 2020 currently. For each customer who purchased on the website in December last year, find the days between their first visit in December and their first purchase in December. Also find what type of device did they make that first purchase?"
Probes: ["Retrieve a table of all customers who made purchases in December last year", "Retrieve a table of all customers who visited the website who also made purchases in December last year", "Retrieve a table of devices used by customers for their purchases. Assume there is a table which provides the customer id and device id and the purchase date", "Calculate the days between the first visit and the first purchase for customers in December last year"]
Explanation: The first probe does not specify the year. The second probe is not simplest as it combines two different aspects (visits and purchases) into one unit. The third probe assumes the existence of a table that may not be present in the database. The fourth probe combines probes 1 and 2 to calculate the days - thus, not self-contained. You should not write probes like the fourth.
Correct Examples:
Question: "Suppose it is 2020 currently. For each customer who purchased on the website in December last year, find the days between their first visit in December and their first purchase in December. Also find what type of device did they make that first purchase?"
Probes: ["Retrieve a table of all customers who made purchases in December last year (the current year is 2020)", "Retrieve a table of all customers who visited the website in December last year (the current year is 2020)", "Retrieve a table of devices used by customers for their purchases"]
Test Data
Question: {question}
Another way to say it: {question}
Now based on the instructions and examples provided, generate the probes (using the generate_testcase tool) for the above question.`

	figTestcase = `You are an SQL expert. Your task is to generate as many diverse SQL queries as possible for the question below. Each SQL should use a different combination of tables, so that at least one will execute correctly.
Instructions:
1. Check Question Completeness: If the question is not self-contained or unanswerable, use the "not enough information" tool with an explanation.
2. Generate many Diverse SQL queries: If answerable, generate as many diverse SQL queries as possible (even if you are confident about your first choice). Each SQL should use a different set of tables. Do NOT simply use the same table with different joins, filters, or aliases and call them diverse. True diversity means using fundamentally different tables or table combinations, not just different ways of querying the same table. For each SQL, provide a short description of what it does and how it is different from the others. Submit this list of SQL queries to the "execute_sql" tool for execution validation.
3. Explore Table Schema: Make sure that you are entirely sure about the attribute values before writing the SQL. If you are unsure, you can explore table columns or values using the "execute_sql" tool (using regex or ILIKE functions). Set the exploration attribute to True for such queries. Batch and execute all such exploration queries in a single tool call. Do not explore tables one by one in separate tool calls.
4. Tool Usage: In every response, you must use one of the tools.
SQL Writing Guidelines:
- MUST stay faithful to the exact wording of the question. Prefer exact table/column matches over partial matches. If an exact-match table exists, do not union with partial matches; only explore alternates if no exact match is found. Examples: If the question mentions ‘total functional expenses’, only use tables which mention them exactly.
- MUST keep queries simple (Occam’s razor). Avoid extra joins/filters/rankings unless explicitly requested. Examples: If the question asks for “average measurement in a month”, do not average across hours — average across days.
- MUST pay careful attention to any External Knowledge hints provided below; treat them as guidance for table/column.
- SHOULD prefer inner joins (which naturally drop NULLs) unless the question requires outer joins. In general, remove rows with NULLs unless told otherwise.
Dialect, Naming, and Qualification
- MUST use SQLite SQL. Enclose identifiers in double quotes when they contain spaces or special characters or are keywords.
- Table names are not qualified.
Examples
Example 1: (Diverse SQL queries)
Question: Retrieve the weather for all active days at an XYZ school for 2022.
Tool Call: execute_sql([ (‘description’: "Uses Table 1 and Table 2: Joins school active days with weather data.", ‘sql_query’: "SELECT …", ‘exploration’: False), (‘description’: "Uses Table 4 and Table 3: Alternative join for weather info.", ‘sql_query’: "SELECT …", ‘exploration’: False) ])
Table Info: {tableinfo}
Table Names: The table structure information is ({database name: {schema name: [table name]}}): {structure}
External Knowledge: {knowledge}
Question: {probe}`

	figPropose = `You are an SQL expert. Your task is to generate a final SQL query for the given question. You are provided with a set of probes and corresponding SQL queries to provide you information about the database structure.
SQL Writing Guidelines:
- MUST stay faithful to the exact wording of the question. Do not add extra tables/filters/grouping beyond what is asked. Examples: If the question asks about top rising terms, do not add top rising international terms …
- MUST keep queries simple (Occam’s razor). Avoid extra ranking (RANK = 1), FLOOR() on dates, redundant GROUP BY, or unnecessary unions unless explicitly requested. Examples: If the question asks for “overall score”, do not average “overall direct” and “overall indirect”; use overall direct as overall score …
- MUST try to be faithful to the Final Probes. Example: If the probe uses "DICOM_ALL" and results are non-null, prefer "DICOM_ALL" in the final SQL (not "DICOM_PIVOT" or others)
Dialect, Naming, and Qualification
- MUST use SQLite SQL. Enclose identifiers in double quotes when they contain spaces or special characters or are keywords.
- Table names are not qualified.
- Preserve output case (uppercase/lowercase/mixed) as stored; do not LOWER()/UPPER() results.
Here are the details:
Main Question: {question}
Another way to say it: {question}
Probes and SQL Queries:
{evidence}
Now use these information to generate a final SQL query that answers the question. The final SQL query should be a complete and valid SQL query that can be executed on the database.`

	figVerify = `You are a semantic verifier. Your task is to verify the semantic correctness of a SQL query against a natural language question. Here are the steps you should follow:
1. Back-translate the SQL query: Convert the SQL query (conditioned on the executed result) into natural language query that captures what the SQL query is trying to achieve. This should be a faithful representation of the SQL query and the executed result in natural language.
2. Comparison for Semantic Verification: Compare the back-translated natural language query (from part 1) with the original question. The back-translated query should capture the same intent and meaning as the original question.
- If the back-translated query matches the original question, it indicates that the SQL query is semantically correct.
- If the back-translated query does not match the original question, it indicates that the SQL query is semantically incorrect.
3. Return a response: Your final response should be a structured JSON of three fields - "correct", "explanation", and "back_translated_query". The "back_translated_query" should always be the query back-translated from step 1. Based on the comparison in step 2:
- If the SQL query is semantically correct: "correct" = true and "explanation" = <Provide a one line explanation of why the back-translated query matches the original question.>
- If the SQL query is semantically incorrect: "correct" = false and "explanation" = "<Give one line explanation of what is the difference between the back-translated query. Add one line for what can be potential improvement to fix this issue.>"
Original Question: {question}
SQL Query: {sql}
Executed Result: {result}
Some final guidelines for your semantic matching:
- Be extra careful with complex regex and try to ensure they are written correctly. If not provide an explanation to improve the regex.
- Check the COALESCE statements carefully. Verify that they are not redundant the default values are not incorrect. We want to keep the queries simple and avoid any redundant/overthought statements.
- Check the filters carefully. Ensure that there are no redundant filters which are unrelated to the original question. For example, if the question asks for trees not marked as dead, the SQL should only have filters for status not ‘dead’. We want to avoid additional status checks like ‘stump’, ‘cut down’, ‘removed’ etc.
Now please follow the steps above and return your response in the specified JSON format.`
)

func fill(tmpl string, kv ...string) string {
	return strings.NewReplacer(kv...).Replace(tmpl)
}

func planPrompt(q string) string { return fill(figPlan, "{question}", q) }

func proposePrompt(q, evidence string) string {
	return fill(figPropose, "{question}", q, "{evidence}", evidence)
}

func verifyPrompt(q, sql, result string) string {
	return fill(figVerify, "{question}", q, "{sql}", sql, "{result}", result)
}

// testcasePrompt fills Fig. 4 with the database's tables in ReFoRCE's
// grammar.
func testcasePrompt(s *Server, e *dataset.Example, probe string) string {
	var info, names strings.Builder
	for _, t := range s.know.tables(e) {
		fmt.Fprintf(&info, "Table full name: %s\n", t.name)
		for _, c := range t.columns {
			fmt.Fprintf(&info, "Column name: %s Type: TEXT\n", c)
		}
		fmt.Fprintf(&names, "'%s', ", t.name)
	}
	return fill(figTestcase, "{tableinfo}", info.String(), "{structure}", "{"+e.DB+": {"+e.DB+": ["+names.String()+"]}}",
		"{knowledge}", e.ExternalKnowledge, "{probe}", probe)
}

// The agent's tools (spec §1.8.2, §1.8.5).
const (
	toolGenerateJSON = `{"type":"function","function":{"name":"generate_testcase","description":"Call the worker to generate SQL queries for probes.","parameters":{"type":"object","required":["probes"],"properties":{"probes":{"type":"array","items":{"type":"string"}}}}}}`
	toolProposeJSON  = `{"type":"function","function":{"name":"propose_final_sql","description":"Call the proposer.","parameters":{"type":"object","properties":{}}}}`
	toolFinishJSON   = `{"type":"function","function":{"name":"finish","description":"Submit the proposed final SQL query and stop.","parameters":{"type":"object","properties":{}}}}`
	toolBatchJSON    = `{"type":"function","function":{"name":"execute_sql","description":"Execute a batch of SQL queries.","parameters":{"type":"object","required":["queries"],"properties":{"queries":{"type":"array","items":{"type":"object","required":["description","sql_query","exploration"],"properties":{"description":{"type":"string"},"sql_query":{"type":"string"},"exploration":{"type":"boolean"}}}}}}}}`
	toolNEIJSON      = `{"type":"function","function":{"name":"not_enough_information","description":"The question is not self-contained or is unanswerable.","parameters":{"type":"object","required":["explanation"],"properties":{"explanation":{"type":"string"}}}}}`
	toolExecJSON     = `{"type":"function","function":{"name":"execute_sql","description":"Execute one SQL query.","parameters":{"type":"object","required":["sql_query"],"properties":{"sql_query":{"type":"string"}}}}}`
	toolVerifierJSON = `{"type":"function","function":{"name":"semantic_verifier","description":"Back-translate and compare.","parameters":{"type":"object","required":["sql_query"],"properties":{"sql_query":{"type":"string"}}}}}`
	toolChooseJSON   = `{"type":"function","function":{"name":"choose_final","description":"Choose the query whose result answers the question.","parameters":{"type":"object","required":["query"],"properties":{"query":{"type":"integer"}}}}}`
)

// choosePrompt is the agent's question after a batch with successful
// answering queries (pexa ChooseFinalPrompt, D-P24): the generator names
// its Final seeing the results, or revises.
func choosePrompt(numbers []int) string {
	if len(numbers) == 1 {
		return fmt.Sprintf("Query %d of your batch executed with Success. Call choose_final with the number of the query if its result answers the question, judging by the result above: it becomes the probe's final SQL. If it does not, call execute_sql with revised queries instead.", numbers[0])
	}
	list := make([]string, len(numbers))
	for i, n := range numbers {
		list[i] = strconv.Itoa(n)
	}
	return "Queries " + strings.Join(list, ", ") + " of your batch executed with Success. Call choose_final with the number of the one whose result answers the question, judging by their results above: it becomes the probe's final SQL. If none of them does, call execute_sql with revised queries instead."
}

var (
	plannerTools  = tools(toolGenerateJSON, toolProposeJSON, toolFinishJSON)
	testcaseTools = tools(toolBatchJSON, toolNEIJSON)
	// choiceTools are the generator's in its choice turn.
	choiceTools   = tools(toolBatchJSON, toolNEIJSON, toolChooseJSON)
	proposerTools = tools(toolExecJSON, toolVerifierJSON)
)

// wireMsgs renders messages as an OpenAI client sends them.
func wireMsgs(msgs []llm.Message) []map[string]any {
	var out []map[string]any
	for _, m := range msgs {
		w := map[string]any{"role": m.Role, "content": m.Content}
		if m.ToolCallID != "" {
			w["tool_call_id"] = m.ToolCallID
		}
		var calls []map[string]any
		for _, tc := range m.ToolCalls {
			calls = append(calls, map[string]any{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		if calls != nil {
			w["tool_calls"] = calls
		}
		out = append(out, w)
	}
	return out
}

// chatTo asks the simulator; tools may be nil.
func chatTo(t *testing.T, url string, seed int64, msgs []llm.Message, tls []json.RawMessage, choice string) answer {
	t.Helper()
	body := map[string]any{"model": "o3", "seed": seed, "messages": wireMsgs(msgs)}
	if tls != nil {
		body["tools"] = tls
		body["tool_choice"] = choice
	}
	a := ask(t, url, body)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.errText)
	}
	return a
}

// asMessage is the assistant message of an answer, as the agent keeps it.
func (a answer) asMessage() llm.Message {
	m := llm.Message{Role: "assistant", Content: a.content}
	for _, c := range a.calls {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return m
}

// oneCall checks that an answer is exactly one well-formed call to name and
// decodes its arguments into v.
func oneCall(t *testing.T, a answer, name string, v any) {
	t.Helper()
	if len(a.calls) != 1 || a.finish != "tool_calls" || a.content != "" {
		t.Fatalf("want one call to %s, got %+v", name, a)
	}
	c := a.calls[0]
	if c.Function.Name != name || c.Type != "function" || !callIDShape.MatchString(c.ID) {
		t.Fatalf("want a call to %s, got %+v", name, c)
	}
	if err := json.Unmarshal([]byte(c.Function.Arguments), v); err != nil {
		t.Fatalf("%s arguments %q: %v", name, c.Function.Arguments, err)
	}
}

func demoDB(t *testing.T, ds *dataset.Dataset) *sqlite.DB {
	t.Helper()
	db, ok := ds.Database(ds.Examples[0])
	if !ok || db.SQLitePath == "" {
		t.Fatal("the demo has no SQLite database")
	}
	w, err := sqlite.Open(sqlite.Config{Path: db.SQLitePath, Immutable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

const nullErrorText = "NULL Error: the query executed successfully but returned no rows."

// feedback runs a query and words the result as PExA's SQL Executor does
// (spec D-P8): header and 3 rows, at most 500 characters.
func feedback(t *testing.T, db *sqlite.DB, sql string) string {
	t.Helper()
	res, err := db.Query(context.Background(), sql, warehouse.Limits{MaxRows: 4})
	var qe *warehouse.QueryError
	switch {
	case errors.As(err, &qe):
		return "Compilation Error: " + qe.Message
	case err != nil:
		t.Fatalf("%s: %v", sql, err)
	case res.RowCount() == 0:
		return nullErrorText
	}
	lines := strings.Split(strings.TrimRight(res.CSV(), "\n"), "\n")
	s := strings.Join(lines[:min(4, len(lines))], "\n")
	return "Success: " + s[:min(500, len(s))]
}

var tagged = regexp.MustCompile(` \[llmsim:([^\]]+)\]$`)

func TestClassifyConversation(t *testing.T) {
	t.Parallel()
	call := func(id, name, args string) llm.Message {
		return llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: args}}}
	}
	plan := llm.User(planPrompt("How many rows?"))
	tc := llm.User(fill(figTestcase, "{tableinfo}", "Table full name: t", "{structure}", "{}", "{knowledge}", "", "{probe}", "Retrieve a table of a from t [llmsim:x]"))
	prop := llm.User(proposePrompt("How many rows?", "Exploratory Probes:\nFailure Probes:\nSuccessful Probes:\nFinal SQL queries (pay more attention here):"))
	gen, prp, fin := call("c1", "generate_testcase", `{"probes":["p"]}`), call("c2", "propose_final_sql", `{}`), call("c3", "finish", `{}`)
	exe := call("c4", "execute_sql", `{"sql_query":"SELECT 1"}`)
	ver := call("c5", "semantic_verifier", `{"sql_query":"SELECT 1"}`)
	batch := call("c6", "execute_sql", `{"queries":[{"description":"d","sql_query":"SELECT 1","exploration":true}]}`)
	tests := []struct {
		name string
		msgs []llm.Message
		want Kind
	}{
		{"planner, first turn", []llm.Message{plan}, KindPExAPlan},
		{"planner behind a system message", []llm.Message{llm.System("be brief"), plan}, KindPExAPlan},
		{"planner after probes", []llm.Message{plan, gen, llm.ToolResult("c1", "Probe 1: p\nStatus: final SQL found")}, KindPExAPlanAfterProbes},
		{"planner after a proposal", []llm.Message{plan, gen, llm.ToolResult("c1", "Probe 1: p"), prp, llm.ToolResult("c2", "Proposed SQL:\n```sql\nSELECT 1\n```")}, KindPExAPlanAfterProposal},
		{"probes and proposal in one message", []llm.Message{plan, {Role: "assistant", ToolCalls: []llm.ToolCall{gen.ToolCalls[0], prp.ToolCalls[0]}},
			llm.ToolResult("c1", "Probe 1: p"), llm.ToolResult("c2", "Proposed SQL:")}, KindPExAPlanAfterProposal},
		{"finish before a proposal", []llm.Message{plan, gen, llm.ToolResult("c1", "Probe 1: p"), fin, llm.ToolResult("c3", "No final SQL has been proposed yet. Call propose_final_sql first.")}, KindPExAPlanAfterProbes},
		{"finish mixed, after a proposal", []llm.Message{plan, prp, llm.ToolResult("c2", "Proposed SQL:"), fin, llm.ToolResult("c3", "finish must be called on its own.")}, KindPExAPlanAfterProposal},
		{"planner re-asked", []llm.Message{plan, llm.Assistant("hmm"), llm.User("You must call one of the tools.")}, KindPExAPlan},
		{"planner re-asked after probes", []llm.Message{plan, gen, llm.ToolResult("c1", "Probe 1: p"), llm.Assistant("hmm"), llm.User("You must call one of the tools.")}, KindPExAPlanAfterProbes},
		{"unknown call id, result shape decides", []llm.Message{plan, gen, llm.ToolResult("zz", "Proposed SQL:\n```sql\nSELECT 1\n```")}, KindPExAPlanAfterProposal},
		{"test case, first turn", []llm.Message{tc}, KindPExATestcase},
		{"test case after a failed batch", []llm.Message{tc, batch, llm.ToolResult("c6", "Query 1 (d): Success: a\n1")}, KindPExATestcaseFix},
		{"proposer, first turn", []llm.Message{prop}, KindPExAPropose},
		{"proposer after success", []llm.Message{prop, exe, llm.ToolResult("c4", "Success: a\n1")}, KindPExAProposeNext},
		{"proposer after an error", []llm.Message{prop, exe, llm.ToolResult("c4", "Compilation Error: near FORM")}, KindPExAProposeFix},
		{"proposer after no rows", []llm.Message{prop, exe, llm.ToolResult("c4", nullErrorText)}, KindPExAProposeFix},
		{"proposer after a verdict", []llm.Message{prop, exe, llm.ToolResult("c4", "Success: a\n1"), ver, llm.ToolResult("c5", "Semantic Error: x (back-translation: y)")}, KindPExAProposeAfterVerify},
		{"proposer guard feedback", []llm.Message{prop, llm.Assistant("```sql\nSELECT x\n```"), llm.User("Compilation Error: no such column: x")}, KindPExAProposeFix},
		{"proposer re-asked for SQL", []llm.Message{prop, llm.Assistant("done"), llm.User("Answer with one SQL query in a ```sql``` block.")}, KindPExAProposeNext},
		{"verifier", []llm.Message{llm.User(verifyPrompt("How many rows?", "SELECT 1", "a\n1"))}, KindPExAVerify},
		{"ReFoRCE unchanged", []llm.Message{llm.User("Task: x\nPlease think step by step and " + MarkerGenerate)}, KindGenerate},
		{"ReFoRCE by its last user message", []llm.Message{llm.User("Task: x\n" + MarkerGenerate), llm.Assistant("```sql\nSELECT 1\n```"),
			llm.User("Input sql:\nSELECT 1\nThe error information is:\nno such column")}, KindRefine},
		{"nothing recognisable", []llm.Message{llm.User("hello")}, KindUnknown},
		{"no user message", []llm.Message{llm.System("hello")}, KindUnknown},
	}
	for _, tt := range tests {
		if got := ClassifyConversation(tt.msgs); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestMarkersAreExclusive: no PExA marker is, contains or appears in a
// ReFoRCE marker, none appears in another PExA prompt, and the PExA prompts
// carry no ReFoRCE marker (so Classify alone finds nothing in them).
func TestMarkersAreExclusive(t *testing.T) {
	t.Parallel()
	reforce := []string{MarkerFormat, MarkerGenerate, MarkerInputSQL, MarkerErrorInfo, MarkerPreviousContext, MarkerExplore,
		MarkerCorrectedTo, MarkerCorrectOthers, MarkerLink, MarkerVote, MarkerSelfConsistency, MarkerCTE, MarkerReaskOne,
		MarkerReaskFence, MarkerReaskThinking}
	prompts := map[string]string{MarkerPExAPlan: figPlan, MarkerPExATestcase: figTestcase, MarkerPExAPropose: figPropose, MarkerPExAVerify: figVerify}
	for _, p := range pexaMarkers {
		for _, r := range reforce {
			if strings.Contains(p, r) || strings.Contains(r, p) {
				t.Errorf("PExA marker %q and ReFoRCE marker %q overlap", p, r)
			}
		}
		for q, prompt := range prompts {
			if has := strings.Contains(prompt, p); has != (p == q) {
				t.Errorf("marker %q in the prompt of %q: %v", p, q, has)
			}
		}
	}
	for m, prompt := range prompts {
		for _, r := range reforce {
			if strings.Contains(prompt, r) {
				t.Errorf("the prompt of %q carries ReFoRCE marker %q", m, r)
			}
		}
		if k := Classify(prompt); k != KindUnknown {
			t.Errorf("Classify finds %s in the prompt of %q", k, m)
		}
	}
	if len(pexaMarkers) != 4 {
		t.Errorf("pexaMarkers %v", pexaMarkers)
	}
}

func TestPExANoiseDefaults(t *testing.T) {
	t.Parallel()
	d := DefaultNoise()
	if d.PlanMore != 0.26 || d.NotEnoughInfo != 0.02 || d.ProposeBoost != 1.2 || d.VerifyCall != 0.9 || d.Verify != 0.9 {
		t.Errorf("DefaultNoise %+v", d)
	}
	ds := demo(t)
	s, _ := newSim(t, Config{Dataset: ds, Noise: Noise{Gold: 1}})
	if n := s.cfg.Noise; n.Gold != 1 || n.Verify != 0.9 || n.PlanMore != 0.26 || n.ExploreError != 0 {
		t.Errorf("a ReFoRCE-only Noise got %+v", n)
	}
	s, _ = newSim(t, Config{Dataset: ds, Noise: Noise{Gold: 1, Verify: 1}})
	if n := s.cfg.Noise; n.Verify != 1 || n.PlanMore != 0 || n.VerifyCall != 0 {
		t.Errorf("a Noise with PExA fields set got %+v", n)
	}
}

func TestPExAPlanner(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	always := Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, PlanMore: 1, Verify: 1, VerifyCall: 1}
	s, ts := newSim(t, Config{Dataset: ds, Seed: 2, Noise: always})
	_, never := newSim(t, Config{Dataset: ds, Seed: 2, Noise: Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, Verify: 1}})
	_, random := newSim(t, Config{Dataset: ds, Seed: 2, Noise: Noise{Gold: 1, ExploreRight: 0, Verify: 1}})
	type probes struct {
		Probes []string `json:"probes"`
	}
	for _, e := range ds.Examples {
		for _, url := range []string{ts.URL, random.URL} {
			plan := []llm.Message{llm.User(planPrompt(e.Question))}
			a := chatTo(t, url, 1, plan, plannerTools, "required")
			var p probes
			oneCall(t, a, "generate_testcase", &p)
			if len(p.Probes) < 3 || len(p.Probes) > 7 {
				t.Errorf("%s: %d probes: %q", e.ID, len(p.Probes), p.Probes)
			}
			for _, pr := range p.Probes {
				if m := tagged.FindStringSubmatch(pr); m == nil || m[1] != e.ID {
					t.Errorf("%s: probe %q is not tagged with its example", e.ID, pr)
				}
			}
			if url == random.URL {
				continue
			}
			// The gold tables are probed (as many as the cap of 7 allows).
			gold := s.know.goldTables(s.know.examples[e.ID])
			for _, g := range gold[:min(7, len(gold))] {
				if !strings.Contains(strings.Join(p.Probes, "\n"), " "+g.name+" [llmsim:") {
					t.Errorf("%s: no probe of gold table %s in %q", e.ID, g.name, p.Probes)
				}
			}
		}
	}

	e, _ := ds.Example("local011")
	plan := []llm.Message{llm.User(planPrompt(e.Question))}
	first := chatTo(t, ts.URL, 1, plan, plannerTools, "required")
	probeResult := "Probe 1: p\nStatus: final SQL found\nFinal SQL: SELECT 1\nExecuted Result (truncated): a\n1"
	afterOne := append(plan, first.asMessage(), llm.ToolResult(first.calls[0].ID, probeResult))
	// PlanMore 1: a second batch of new, tagged probes; then, batches
	// exhausted, a proposal.
	more := chatTo(t, ts.URL, 1, afterOne, plannerTools, "required")
	var p probes
	oneCall(t, more, "generate_testcase", &p)
	if len(p.Probes) < 1 || len(p.Probes) > 3 {
		t.Errorf("second batch %q", p.Probes)
	}
	for _, pr := range p.Probes {
		if !tagged.MatchString(pr) || strings.Contains(first.calls[0].Function.Arguments, pr) {
			t.Errorf("second-batch probe %q is untagged or repeated", pr)
		}
	}
	afterTwo := append(afterOne, more.asMessage(), llm.ToolResult(more.calls[0].ID, probeResult))
	oneCall(t, chatTo(t, ts.URL, 1, afterTwo, plannerTools, "required"), "propose_final_sql", &map[string]any{})
	// PlanMore 0: a proposal straight away.
	oneCall(t, chatTo(t, never.URL, 1, afterOne, plannerTools, "required"), "propose_final_sql", &map[string]any{})

	propose := func(msgs []llm.Message, result string) []llm.Message {
		call := llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("call_p%d", len(msgs)), Name: "propose_final_sql", Arguments: "{}"}}}
		return append(msgs, call, llm.ToolResult(call.ToolCalls[0].ID, result))
	}
	good := "Proposed SQL:\n```sql\nSELECT 1\n```\nExecution: Success: a\n1\nSemantic verification: Semantic check passed: fine"
	unverified := "Proposed SQL:\n```sql\nSELECT 1\n```\nExecution: Success: a\n1\nSemantic verification: not run"
	semErr := "Proposed SQL:\n```sql\nSELECT 1\n```\nExecution: Success: a\n1\nSemantic verification: Semantic Error: wrong (back-translation: x)"
	failed := "Proposed SQL:\n```sql\nSELECT x\n```\nExecution: Compilation Error: no such column: x\nSemantic verification: not run"
	tests := []struct {
		name string
		msgs []llm.Message
		want string
	}{
		{"success and a passed check", propose(afterTwo, good), "finish"},
		{"success, verifier not run", propose(afterTwo, unverified), "finish"},
		{"semantic error", propose(afterTwo, semErr), "propose_final_sql"},
		{"execution failed", propose(afterTwo, failed), "propose_final_sql"},
		{"failed twice", propose(propose(afterTwo, failed), semErr), "propose_final_sql"},
		{"failed three times: give up", propose(propose(propose(afterTwo, failed), semErr), failed), "finish"},
		{"finish before any proposal", append(afterTwo, llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "f1", Name: "finish", Arguments: "{}"}}},
			llm.ToolResult("f1", "No final SQL has been proposed yet. Call propose_final_sql first.")), "propose_final_sql"},
		{"re-asked", append(afterTwo, llm.Assistant("thinking"), llm.User("You must call one of the tools.")), "propose_final_sql"},
	}
	for _, tt := range tests {
		a := chatTo(t, ts.URL, 1, tt.msgs, plannerTools, "required")
		if len(a.calls) != 1 || a.calls[0].Function.Name != tt.want || a.finish != "tool_calls" {
			t.Errorf("%s: want %s, got %+v", tt.name, tt.want, a)
		}
	}
	st := s.Stats()
	if st.ByKind[KindPExAPlan] == 0 || st.ByKind[KindPExAPlanAfterProbes] == 0 || st.ByKind[KindPExAPlanAfterProposal] == 0 || st.Unknown != 0 {
		t.Errorf("stats %+v", st.ByKind)
	}
}

// figPlanNoProposer is the agent's planner prompt for the no-proposer
// ablation: Fig. 3 with its Propose Final SQL and Finish bullets replaced
// (pexa D-P21).
var figPlanNoProposer = strings.NewReplacer(
	"- Propose Final SQL: Call the proposer (propose_final_sql tool) to integrate probes and synthesize the final SQL query. You should call the proposer only when you feel you have enough probes to generate the final SQL.",
	"- Write Final SQL: Write the final SQL query yourself from what the probes found. Run it with the execute_sql tool to see its executed result, and check it with the semantic_verifier tool, which compares the meaning of the query with the question. You should write the final SQL only when you feel you have enough probes to generate it.",
	"you can submit it (finish tool).", "you can submit it (finish tool, with the final SQL query as its sql_query).").Replace(figPlan)

const toolFinishSQLJSON = `{"type":"function","function":{"name":"finish","description":"Submit the final SQL query and stop.","parameters":{"type":"object","required":["sql_query"],"properties":{"sql_query":{"type":"string"}}}}}`

// noProposerTools are the no-proposer Planner's tools.
var noProposerTools = tools(toolGenerateJSON, toolExecJSON, toolVerifierJSON, toolFinishSQLJSON)

// TestPExAPlannerNoProposer: a Planner offered execute_sql and not
// propose_final_sql writes the final SQL itself after its probes (drawn as
// the Proposer's, boosted by probe results naming every gold table),
// verifies a Success with probability VerifyCall, finishes with the same
// SQL, and revises after an error, NULL or Semantic Error as the Proposer
// does; the paper's Planner is unchanged.
func TestPExAPlannerNoProposer(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	db := demoDB(t, ds)
	if pexaAgent(figPlanNoProposer) != MarkerPExAPlan || Classify(figPlanNoProposer) != KindUnknown || figPlanNoProposer == figPlan ||
		strings.Contains(figPlanNoProposer, "propose_final_sql") {
		t.Fatal("the no-proposer planner prompt is not recognised as the planner's alone")
	}
	call := func(id, name, sql string) llm.Message {
		args, _ := json.Marshal(map[string]string{"sql_query": sql})
		return llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: string(args)}}}
	}
	plan := llm.User(fill(figPlanNoProposer, "{question}", "How many rows?"))
	gen := llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "g", Name: "generate_testcase", Arguments: `{"probes":["p"]}`}}}
	probed := []llm.Message{plan, gen, llm.ToolResult("g", "Probe 1: p\nStatus: final SQL found")}
	for _, tt := range []struct {
		name string
		msgs []llm.Message
		want Kind
	}{
		{"after its execute_sql", append(probed, call("x", "execute_sql", "SELECT 1"), llm.ToolResult("x", "Success: a\n1")), KindPExAPlanAfterSQL},
		{"after its execute_sql failed", append(probed, call("x", "execute_sql", "SELECT x"), llm.ToolResult("x", "Compilation Error: no such column: x")), KindPExAPlanAfterSQL},
		{"after a finish the guard refused", append(probed, call("f", "finish", "SELECT x"), llm.ToolResult("f", "Compilation Error: no such column: x")), KindPExAPlanAfterSQL},
		{"after its verifier", append(probed, call("v", "semantic_verifier", "SELECT 1"), llm.ToolResult("v", "Semantic check passed: same")), KindPExAPlanAfterVerify},
		{"re-asked after its execute_sql", append(probed, call("x", "execute_sql", "SELECT 1"), llm.ToolResult("x", "Success: a\n1"), llm.Assistant("hmm"),
			llm.User("You must call one of the tools.")), KindPExAPlanAfterSQL},
		{"after probes", probed, KindPExAPlanAfterProbes},
	} {
		if got := ClassifyConversation(tt.msgs); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}

	clean := Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, Verify: 1, VerifyCall: 1}
	s, ts := newSim(t, Config{Dataset: ds, Seed: 8, Noise: clean})
	noCall := clean
	noCall.VerifyCall = 0
	_, nts := newSim(t, Config{Dataset: ds, Seed: 8, Noise: noCall})
	e, _ := ds.Example("local011")
	info := s.know.examples[e.ID]
	msgs := []llm.Message{llm.User(fill(figPlanNoProposer, "{question}", e.Question))}
	first := chatTo(t, ts.URL, 1, msgs, noProposerTools, "required")
	oneCall(t, first, "generate_testcase", &map[string]any{})
	afterOne := append(msgs, first.asMessage(), llm.ToolResult(first.calls[0].ID,
		"Probe 1: p\nStatus: final SQL found\nFinal SQL: SELECT name FROM warehouses\nExecuted Result (truncated): name\nA"))
	// The paper's Planner proposes; the no-proposer one executes its own SQL.
	oneCall(t, chatTo(t, ts.URL, 1, afterOne, plannerTools, "required"), "propose_final_sql", &map[string]any{})
	a := chatTo(t, ts.URL, 1, afterOne, noProposerTools, "required")
	var ex struct {
		SQL string `json:"sql_query"`
	}
	oneCall(t, a, "execute_sql", &ex)
	if !sameSQL(ex.SQL, info.gold) {
		t.Errorf("Gold 1 wrote %q", ex.SQL)
	}
	fb := feedback(t, db, ex.SQL)
	if !strings.HasPrefix(fb, "Success") {
		t.Fatalf("the planner's SQL %q fails: %s", ex.SQL, fb)
	}
	afterExec := append(afterOne, a.asMessage(), llm.ToolResult(a.calls[0].ID, fb))
	wrong := "SELECT name FROM warehouses"
	semErr := func(msgs []llm.Message, id string) []llm.Message {
		return append(msgs, call(id, "semantic_verifier", wrong), llm.ToolResult(id, "Semantic Error: order differs (back-translation: the names)"))
	}
	noVerifier := tools(toolGenerateJSON, toolExecJSON, toolFinishSQLJSON)
	tests := []struct {
		name string
		url  string
		msgs []llm.Message
		tls  []json.RawMessage
		// want: the tool called; sql: its SQL, "" for a revision that
		// must execute with Success (Fix 1)
		want, sql string
	}{
		{"success: the verifier on the same SQL", ts.URL, afterExec, noProposerTools, "semantic_verifier", ex.SQL},
		{"success, no verifier offered: finish", ts.URL, afterExec, noVerifier, "finish", ex.SQL},
		{"success, VerifyCall 0: finish", nts.URL, afterExec, noProposerTools, "finish", ex.SQL},
		{"re-asked after success: finish", ts.URL, append(afterExec, llm.Assistant("hmm"), llm.User("You must call one of the tools.")), noProposerTools, "finish", ex.SQL},
		{"passed check: finish with the SQL", ts.URL, append(afterExec, call("v1", "semantic_verifier", ex.SQL), llm.ToolResult("v1", "Semantic check passed: same question")),
			noProposerTools, "finish", ex.SQL},
		{"semantic error: a revision", ts.URL, semErr(afterExec, "v2"), noProposerTools, "execute_sql", ""},
		{"third semantic error: finish anyway", ts.URL, semErr(semErr(semErr(afterExec, "v2"), "v3"), "v4"), noProposerTools, "finish", wrong},
		{"compilation error: a revision", ts.URL, append(afterOne, call("e1", "execute_sql", "SELECT nme FROM warehouses"),
			llm.ToolResult("e1", "Compilation Error: no such column: nme")), noProposerTools, "execute_sql", ""},
		{"no rows: a revision", ts.URL, append(afterOne, call("e2", "execute_sql", "SELECT name FROM warehouses WHERE 1 = 0"), llm.ToolResult("e2", nullErrorText)),
			noProposerTools, "execute_sql", ""},
		{"finish refused by the guard: a revision", ts.URL, append(afterExec, call("f1", "finish", "SELECT nme FROM warehouses"),
			llm.ToolResult("f1", "Compilation Error: no such column: nme")), noProposerTools, "execute_sql", ""},
		{"finish refused for company: finish alone with the SQL that ran", ts.URL, append(afterExec, llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{
			{ID: "x9", Name: "execute_sql", Arguments: `{"sql_query":"SELECT nme FROM warehouses"}`}, {ID: "f9", Name: "finish", Arguments: `{"sql_query":"SELECT 1"}`}}},
			llm.ToolResult("x9", "Compilation Error: no such column: nme"), llm.ToolResult("f9", "finish must be called on its own.")), noProposerTools, "finish", ex.SQL},
	}
	for _, tt := range tests {
		a := chatTo(t, tt.url, 1, tt.msgs, tt.tls, "required")
		var x struct {
			SQL string `json:"sql_query"`
		}
		oneCall(t, a, tt.want, &x)
		switch {
		case tt.sql != "" && x.SQL != tt.sql:
			t.Errorf("%s: %s with %q, want %q", tt.name, tt.want, x.SQL, tt.sql)
		case tt.sql == "" && !strings.HasPrefix(feedback(t, db, x.SQL), "Success"):
			t.Errorf("%s: Fix 1 revised to %q", tt.name, x.SQL)
		}
	}
	st := s.Stats()
	for _, k := range PExANoProposerKinds() {
		if st.ByKind[k] == 0 || st.Unknown != 0 {
			t.Errorf("no %s in %v", k, st.ByKind)
		}
	}

	// The boost: probe results naming every gold table raise the chance
	// of the gold SQL, as the Proposer's evidence does.
	n := DefaultNoise()
	n.Gold, n.ProposeBoost = 0.4, 2
	_, bts := newSim(t, Config{Dataset: ds, Seed: 3, Noise: n})
	golds := func(finalSQL string) int {
		g := 0
		for seed := int64(0); seed < 150; seed++ {
			msgs := append(append([]llm.Message(nil), msgs...), first.asMessage(), llm.ToolResult(first.calls[0].ID,
				"Probe 1: p\nStatus: final SQL found\nFinal SQL: "+finalSQL+"\nExecuted Result (truncated): a"))
			a := chatTo(t, bts.URL, seed, msgs, noProposerTools, "required")
			if len(a.calls) == 1 && a.calls[0].Function.Name == "generate_testcase" {
				continue // PlanMore: a second batch instead
			}
			var x struct {
				SQL string `json:"sql_query"`
			}
			oneCall(t, a, "execute_sql", &x)
			if sameSQL(x.SQL, info.gold) {
				g++
			}
		}
		return g
	}
	gw, gwo := golds("SELECT 1 FROM inventory JOIN warehouses"), golds("SELECT 1 FROM inventory")
	t.Logf("gold %d/150 with every gold table in the probe results, %d/150 without", gw, gwo)
	if gw <= gwo {
		t.Errorf("the boost did not raise the gold rate: %d vs %d", gw, gwo)
	}
}

type batchArgs struct {
	Queries []sqlQuery `json:"queries"`
}

// runBatch executes a batch and words the tool result; it reports whether
// an answering query succeeded.
func runBatch(t *testing.T, db *sqlite.DB, b batchArgs) (string, bool) {
	var lines []string
	ok := false
	for i, q := range b.Queries {
		fb := feedback(t, db, q.SQL)
		if strings.HasPrefix(fb, "Success") && !q.Exploration {
			ok = true
		}
		lines = append(lines, fmt.Sprintf("Query %d (%s): %s", i+1, q.Description, fb))
	}
	return strings.Join(lines, "\n"), ok
}

func TestPExATestcase(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	db := demoDB(t, ds)
	clean := Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, Verify: 1}
	s, ts := newSim(t, Config{Dataset: ds, Seed: 5, Noise: clean})
	broken := clean
	broken.ExploreError = 1
	_, bts := newSim(t, Config{Dataset: ds, Seed: 5, Noise: broken})
	nei := clean
	nei.NotEnoughInfo = 1
	_, nts := newSim(t, Config{Dataset: ds, Seed: 5, Noise: nei})

	probesOf := func(e *dataset.Example) []string {
		a := chatTo(t, ts.URL, 1, []llm.Message{llm.User(planPrompt(e.Question))}, plannerTools, "required")
		var p struct {
			Probes []string `json:"probes"`
		}
		oneCall(t, a, "generate_testcase", &p)
		return p.Probes
	}
	fixes := 0
	for i, e := range ds.Examples {
		// Under the race detector, every fourth example (its requests are
		// several times slower); the run without it (make slow) asks all.
		if raceEnabled && i%4 != 0 {
			continue
		}
		info := s.know.examples[e.ID]
		var goldNames []string
		for _, g := range s.know.goldTables(info) {
			goldNames = append(goldNames, g.name)
		}
		for i, probe := range probesOf(e) {
			msgs := []llm.Message{llm.User(testcasePrompt(s, e, probe))}
			var b batchArgs
			oneCall(t, chatTo(t, ts.URL, int64(i), msgs, testcaseTools, "required"), "execute_sql", &b)
			if len(b.Queries) < 2 || len(b.Queries) > 4 {
				t.Errorf("%s probe %q: %d queries", e.ID, probe, len(b.Queries))
			}
			var answering *sqlQuery
			for j := range b.Queries {
				if !b.Queries[j].Exploration {
					answering = &b.Queries[j]
					break
				}
			}
			if answering == nil {
				t.Fatalf("%s probe %q: no answering query in %+v", e.ID, probe, b)
			}
			touches := false
			for _, g := range goldNames {
				touches = touches || strings.Contains(answering.SQL, "FROM "+g+" ") || strings.HasSuffix(answering.SQL, "FROM "+g)
			}
			if !touches {
				t.Errorf("%s: answering query %q does not read a gold table of %v", e.ID, answering.SQL, goldNames)
			}
			if _, ok := runBatch(t, db, b); !ok {
				t.Errorf("%s probe %q: no answering query succeeded: %+v", e.ID, probe, b)
			}

			// A misspelt column fails the whole batch; the fix runs.
			ba := chatTo(t, bts.URL, int64(i), msgs, testcaseTools, "required")
			var bb batchArgs
			oneCall(t, ba, "execute_sql", &bb)
			result, ok := runBatch(t, db, bb)
			for round := 0; !ok && round < 3; round++ {
				if !strings.Contains(result, "Compilation Error") && !strings.Contains(result, "NULL Error") {
					break // an exploration-only batch
				}
				msgs = append(msgs, ba.asMessage(), llm.ToolResult(ba.calls[0].ID, result))
				ba = chatTo(t, bts.URL, int64(i), msgs, testcaseTools, "required")
				bb = batchArgs{}
				oneCall(t, ba, "execute_sql", &bb)
				for _, q := range bb.Queries {
					if q.Exploration || misspelt.MatchString(q.SQL) {
						t.Errorf("%s: fix %+v is exploration or still misspelt", e.ID, q)
					}
				}
				result, ok = runBatch(t, db, bb)
				fixes++
			}
			if !ok {
				t.Errorf("%s probe %q: still failing after fixes: %s", e.ID, probe, result)
			}
		}
	}
	if fixes == 0 {
		t.Error("ExploreError 1 never needed a fix")
	}
	// An exploration-only batch, answered from the probe.
	e, _ := ds.Example("local011")
	probe := probesOf(e)[0]
	msgs := []llm.Message{llm.User(testcasePrompt(s, e, probe)),
		{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "x1", Name: "execute_sql", Arguments: `{"queries":[{"description":"look","sql_query":"SELECT * FROM inventory LIMIT 5","exploration":true}]}`}}},
		llm.ToolResult("x1", "Query 1 (look): Success: inventory_id\n1")}
	var b batchArgs
	oneCall(t, chatTo(t, ts.URL, 1, msgs, testcaseTools, "required"), "execute_sql", &b)
	if _, ok := runBatch(t, db, b); !ok || b.Queries[0].Exploration {
		t.Errorf("after exploration only: %+v", b)
	}
	// NotEnoughInfo.
	var nei2 struct {
		Explanation string `json:"explanation"`
	}
	oneCall(t, chatTo(t, nts.URL, 1, []llm.Message{llm.User(testcasePrompt(s, e, probe))}, testcaseTools, "required"), "not_enough_information", &nei2)
	if nei2.Explanation == "" {
		t.Error("not_enough_information without an explanation")
	}
	// The probe tag alone names the example: the prompt has no question.
	if st := s.Stats(); st.UnknownExample != 0 || st.Unknown != 0 || st.ByKind[KindPExATestcase] == 0 || st.ByKind[KindPExATestcaseFix] == 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPExAProposerAndVerifier(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	db := demoDB(t, ds)
	clean := Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, Verify: 1, VerifyCall: 1}
	s, ts := newSim(t, Config{Dataset: ds, Seed: 8, Noise: clean})
	e, _ := ds.Example("local011")
	info := s.know.examples[e.ID]
	evidence := "Exploratory Probes:\nFailure Probes:\nSuccessful Probes:\nFinal SQL queries (pay more attention here):\n" +
		"1. Probe: Retrieve a table of name from warehouses [llmsim:local011] SQL: SELECT DISTINCT name FROM warehouses LIMIT 20 Executed Result (truncated): name\nA"
	prop := []llm.Message{llm.User(proposePrompt(e.Question, evidence))}

	var ex struct {
		SQL string `json:"sql_query"`
	}
	a := chatTo(t, ts.URL, 1, prop, proposerTools, "auto")
	oneCall(t, a, "execute_sql", &ex)
	if !sameSQL(ex.SQL, info.gold) {
		t.Errorf("Gold 1 proposed %q", ex.SQL)
	}
	fb := feedback(t, db, ex.SQL)
	if !strings.HasPrefix(fb, "Success") {
		t.Fatalf("the proposal %q fails: %s", ex.SQL, fb)
	}
	afterExec := append(prop, a.asMessage(), llm.ToolResult(a.calls[0].ID, fb))
	v := chatTo(t, ts.URL, 1, afterExec, proposerTools, "auto")
	var vs struct {
		SQL string `json:"sql_query"`
	}
	oneCall(t, v, "semantic_verifier", &vs)
	if vs.SQL != ex.SQL {
		t.Errorf("verifier asked about %q, executed %q", vs.SQL, ex.SQL)
	}
	// Without the verifier tool (the no_verifier ablation), or with
	// VerifyCall 0, the final answer follows the execution.
	noVer := chatTo(t, ts.URL, 1, afterExec, tools(toolExecJSON), "auto")
	if b := llm.Blocks(noVer.content, "sql"); len(noVer.calls) != 0 || len(b) != 1 || b[0] != ex.SQL || noVer.finish != "stop" {
		t.Errorf("without a verifier tool: %+v", noVer)
	}
	// The verifier itself.
	verdict := func(url, sql string) (map[string]any, string) {
		a := chatTo(t, url, 1, []llm.Message{llm.User(verifyPrompt(e.Question, sql, "name,units\nA,1"))}, nil, "")
		js := llm.Blocks(a.content, "json")
		var out map[string]any
		if len(js) != 1 || json.Unmarshal([]byte(js[0]), &out) != nil {
			t.Fatalf("verifier answer %q", a.content)
		}
		for _, k := range []string{"correct", "explanation", "back_translated_query"} {
			if _, ok := out[k]; !ok {
				t.Errorf("verdict without %s: %s", k, js[0])
			}
		}
		return out, a.content
	}
	wrong := "SELECT w.name, SUM(i.quantity) AS units FROM inventory i JOIN warehouses w ON w.warehouse_id = i.warehouse_id GROUP BY w.name ORDER BY units DESC LIMIT 1"
	if out, _ := verdict(ts.URL, ex.SQL); out["correct"] != true {
		t.Errorf("the gold SQL judged %v", out)
	}
	if out, _ := verdict(ts.URL, wrong); out["correct"] != false {
		t.Errorf("a wrong SQL judged %v", out)
	}
	if out, _ := verdict(ts.URL, "SELECT * FROM (\n"+info.gold+"\n) AS t WHERE 1 = 0"); out["correct"] != false {
		t.Errorf("the gold SQL wrapped to return nothing judged %v", out)
	}
	liar := clean
	liar.Verify = 0.0001 // nearly always wrong (0 would mean "PExA unset" only with the others 0)
	_, lts := newSim(t, Config{Dataset: ds, Seed: 8, Noise: liar})
	if out, _ := verdict(lts.URL, ex.SQL); out["correct"] != false {
		t.Errorf("Verify≈0 kept the right verdict: %v", out)
	}

	call := func(id, name, sql string) llm.Message {
		args, _ := json.Marshal(map[string]string{"sql_query": sql})
		return llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: id, Name: name, Arguments: string(args)}}}
	}
	passed := append(afterExec, call("v1", "semantic_verifier", ex.SQL), llm.ToolResult("v1", "Semantic check passed: same question"))
	semErr := func(msgs []llm.Message, id string) []llm.Message {
		return append(msgs, call(id, "semantic_verifier", wrong), llm.ToolResult(id, "Semantic Error: order differs (back-translation: the top one)"))
	}
	failed := append(prop, call("e1", "execute_sql", "SELECT nme FROM warehouses"), llm.ToolResult("e1", "Compilation Error: no such column: nme"))
	tests := []struct {
		name string
		msgs []llm.Message
		// want: the tool called, or "" for the final text with SQL sql
		want, sql string
	}{
		{"passed check: final answer, same SQL", passed, "", ex.SQL},
		{"semantic error: a revision to execute", semErr(afterExec, "v2"), "execute_sql", ""},
		{"third semantic error: answer anyway", semErr(semErr(semErr(afterExec, "v2"), "v3"), "v4"), "", wrong},
		{"compilation error: a revision", failed, "execute_sql", ""},
		{"no rows: a revision", append(prop, call("e2", "execute_sql", "SELECT name FROM warehouses WHERE 1 = 0"), llm.ToolResult("e2", nullErrorText)), "execute_sql", ""},
		{"guard feedback: a revision", append(afterExec, llm.Assistant("```sql\nSELECT nme FROM warehouses\n```"), llm.User("Compilation Error: no such column: nme")), "execute_sql", ""},
		{"re-asked for SQL: the last SQL that ran", append(afterExec, llm.Assistant("done"), llm.User("Answer with one SQL query in a ```sql``` block.")), "", ex.SQL},
	}
	for _, tt := range tests {
		a := chatTo(t, ts.URL, 1, tt.msgs, proposerTools, "auto")
		if tt.want == "" {
			if b := llm.Blocks(a.content, "sql"); len(a.calls) != 0 || len(b) != 1 || b[0] != tt.sql {
				t.Errorf("%s: want the final SQL %q, got %+v", tt.name, tt.sql, a)
			}
			continue
		}
		var x struct {
			SQL string `json:"sql_query"`
		}
		oneCall(t, a, tt.want, &x)
		if x.SQL == "" {
			t.Errorf("%s: no SQL in %+v", tt.name, a)
		} else if fb := feedback(t, db, x.SQL); !strings.HasPrefix(fb, "Success") {
			t.Errorf("%s: Fix 1 revised to %q: %s", tt.name, x.SQL, fb)
		}
	}
	st := s.Stats()
	for _, k := range []Kind{KindPExAPropose, KindPExAProposeNext, KindPExAProposeAfterVerify, KindPExAProposeFix, KindPExAVerify} {
		if st.ByKind[k] == 0 {
			t.Errorf("no %s in %v", k, st.ByKind)
		}
	}
}

// TestPExAProposeBoost: evidence naming every gold table raises the
// Proposer's chance of the gold SQL by ProposeBoost.
func TestPExAProposeBoost(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	n := DefaultNoise()
	n.Gold, n.ProposeBoost = 0.4, 2
	s, ts := newSim(t, Config{Dataset: ds, Seed: 3, Noise: n})
	e, _ := ds.Example("local011")
	info := s.know.examples[e.ID]
	with := "Final SQL queries (pay more attention here):\n1. Probe: p SQL: SELECT 1 FROM inventory JOIN warehouses Executed Result (truncated): a"
	without := "Final SQL queries (pay more attention here):\n1. Probe: p SQL: SELECT 1 FROM inventory Executed Result (truncated): a"
	if !s.evidenceNamesGold(info, proposePrompt(e.Question, with)) || s.evidenceNamesGold(info, proposePrompt(e.Question, without)) {
		t.Fatal("evidenceNamesGold")
	}
	golds := func(evidence string) int {
		g := 0
		for seed := int64(0); seed < 150; seed++ {
			var x struct {
				SQL string `json:"sql_query"`
			}
			oneCall(t, chatTo(t, ts.URL, seed, []llm.Message{llm.User(proposePrompt(e.Question, evidence))}, proposerTools, "auto"), "execute_sql", &x)
			if sameSQL(x.SQL, info.gold) {
				g++
			}
		}
		return g
	}
	gw, gwo := golds(with), golds(without)
	p := min(0.98, n.Gold*info.skill)
	t.Logf("skill %.2f: gold %d/150 with every gold table in the evidence, %d/150 without (p %.2f vs %.2f)", info.skill, gw, gwo, min(0.98, p*2), p)
	if gw <= gwo {
		t.Errorf("the boost did not raise the gold rate: %d vs %d", gw, gwo)
	}
}

func TestPExADeterministic(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts1 := newSim(t, Config{Dataset: ds, Seed: 4})
	_, ts2 := newSim(t, Config{Dataset: ds, Seed: 4})
	e := ds.Examples[8]
	msgs := []llm.Message{llm.User(planPrompt(e.Question))}
	raw := func(url string, seed int64) string {
		b := map[string]any{"model": "o3", "seed": seed, "messages": wireMsgs(msgs), "tools": plannerTools, "tool_choice": "required"}
		resp, out := post(t, url+"/v1/chat/completions", b)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		ch, _ := json.Marshal(out["choices"])
		return string(ch)
	}
	if a, b := raw(ts1.URL, 3), raw(ts2.URL, 3); a != b {
		t.Errorf("one request, two replies:\n%s\n%s", a, b)
	}
	if a, b := raw(ts1.URL, 3), raw(ts1.URL, 3); a != b {
		t.Errorf("a repeated request, two replies:\n%s\n%s", a, b)
	}
}

// pexaRun is a small PExA agent (spec §1.4–§1.6) driven by the simulator
// over the demo database; it counts what a pass does.
type pexaRun struct {
	t      *testing.T
	url    string
	s      *Server
	db     *sqlite.DB
	e      *dataset.Example
	seed   int64
	calls  map[string]int // LLM calls by role
	rounds int            // generate_testcase batches
	probes int
	// chosen counts the probes whose Final the generator chose after
	// seeing the results (D-P24).
	chosen int
}

type record struct{ class, probe, sql, feedback string }

func (r *pexaRun) chat(role string, msgs []llm.Message, tls []json.RawMessage, choice string) answer {
	r.calls[role]++
	r.seed++
	return chatTo(r.t, r.url, r.seed, msgs, tls, choice)
}

// pass runs the Planner to finish and returns the pass's SQL.
func (r *pexaRun) pass() string {
	t := r.t
	msgs := []llm.Message{llm.User(planPrompt(r.e.Question))}
	var evidence []record
	proposal := ""
	for step := 0; step < 10; step++ {
		a := r.chat("plan", msgs, plannerTools, "required")
		if len(a.calls) != 1 {
			t.Fatalf("%s planner: %+v", r.e.ID, a)
		}
		msgs = append(msgs, a.asMessage())
		c := a.calls[0]
		result := ""
		switch c.Function.Name {
		case "generate_testcase":
			var p struct {
				Probes []string `json:"probes"`
			}
			if err := json.Unmarshal([]byte(c.Function.Arguments), &p); err != nil {
				t.Fatal(err)
			}
			r.rounds++
			r.probes += len(p.Probes)
			var blocks []string
			for i, probe := range p.Probes {
				recs, status := r.testcase(probe)
				evidence = append(evidence, recs...)
				final, res := "none", ""
				for _, rec := range recs {
					if rec.class == "final" {
						final, res = rec.sql, rec.feedback
					}
				}
				blocks = append(blocks, fmt.Sprintf("Probe %d: %s\nStatus: %s\nFinal SQL: %s\nExecuted Result (truncated): %s", i+1, probe, status, final, res))
			}
			result = strings.Join(blocks, "\n\n")
		case "propose_final_sql":
			sql, fb, verdict := r.propose(evidence)
			proposal = sql
			result = fmt.Sprintf("Proposed SQL:\n```sql\n%s\n```\nExecution: %s\nSemantic verification: %s", sql, fb, verdict)
		case "finish":
			if proposal != "" {
				return proposal
			}
			result = "No final SQL has been proposed yet. Call propose_final_sql first."
		default:
			t.Fatalf("planner called %s", c.Function.Name)
		}
		msgs = append(msgs, llm.ToolResult(c.ID, result))
	}
	t.Fatalf("%s: the planner did not finish: %d messages", r.e.ID, len(msgs))
	return ""
}

func (r *pexaRun) testcase(probe string) ([]record, string) {
	t := r.t
	msgs := []llm.Message{llm.User(testcasePrompt(r.s, r.e, probe))}
	var recs []record
	for step := 0; step < 8; step++ {
		a := r.chat("testcase", msgs, testcaseTools, "required")
		if len(a.calls) != 1 {
			t.Fatalf("%s test case: %+v", r.e.ID, a)
		}
		msgs = append(msgs, a.asMessage())
		c := a.calls[0]
		if c.Function.Name == "not_enough_information" {
			return recs, "not enough information"
		}
		var b batchArgs
		if c.Function.Name != "execute_sql" || json.Unmarshal([]byte(c.Function.Arguments), &b) != nil {
			t.Fatalf("%s test case called %s %s", r.e.ID, c.Function.Name, c.Function.Arguments)
		}
		var lines []string
		var ok []int // the successful answering queries, numbered
		from := len(recs)
		for i, q := range b.Queries {
			fb := feedback(t, r.db, q.SQL)
			lines = append(lines, fmt.Sprintf("Query %d (%s): %s", i+1, q.Description, fb))
			class := "failure"
			switch {
			case q.Exploration:
				class = "exploratory"
			case strings.HasPrefix(fb, "Success"):
				class = "successful"
				ok = append(ok, i+1)
			}
			recs = append(recs, record{class, probe, q.SQL, strings.TrimPrefix(fb, "Success: ")})
		}
		msgs = append(msgs, llm.ToolResult(c.ID, strings.Join(lines, "\n")))
		if len(ok) == 0 {
			continue
		}
		// The generator sees the results and names its Final (D-P24).
		msgs = append(msgs, llm.User(choosePrompt(ok)))
		a = r.chat("testcase", msgs, choiceTools, "required")
		var ch struct {
			Query int `json:"query"`
		}
		oneCall(t, a, "choose_final", &ch)
		if !slices.Contains(ok, ch.Query) {
			t.Fatalf("%s test case chose query %d; the successes are %v", r.e.ID, ch.Query, ok)
		}
		recs[from+ch.Query-1].class = "final"
		r.chosen++
		return recs, "final SQL found"
	}
	return recs, "stopped (iteration limit)"
}

func (r *pexaRun) propose(evidence []record) (sql, fb, verdict string) {
	t := r.t
	var ev strings.Builder
	for i, h := range []struct{ class, heading string }{{"exploratory", "Exploratory Probes:"}, {"failure", "Failure Probes:"},
		{"successful", "Successful Probes:"}, {"final", "Final SQL queries (pay more attention here):"}} {
		if i > 0 {
			ev.WriteString("\n")
		}
		ev.WriteString(h.heading)
		n := 0
		for _, rec := range evidence {
			if rec.class == h.class {
				n++
				word := "Executed Result (truncated)"
				if rec.class == "failure" {
					word = "Error"
				}
				fmt.Fprintf(&ev, "\n%d. Probe: %s SQL: %s %s: %s", n, rec.probe, rec.sql, word, rec.feedback)
			}
		}
	}
	msgs := []llm.Message{llm.User(proposePrompt(r.e.Question, ev.String()))}
	ran := map[string]string{}
	verdicts := map[string]string{}
	last := ""
	for step := 0; step < 10; step++ {
		a := r.chat("propose", msgs, proposerTools, "auto")
		msgs = append(msgs, a.asMessage())
		if len(a.calls) == 0 {
			b := llm.Blocks(a.content, "sql")
			if len(b) != 1 {
				t.Fatalf("%s proposer answered %q", r.e.ID, a.content)
			}
			fb, ok := ran[b[0]]
			if !ok {
				fb = feedback(t, r.db, b[0])
				ran[b[0]] = fb
			}
			if !strings.HasPrefix(fb, "Success") {
				msgs = append(msgs, llm.User(fb))
				continue
			}
			v := verdicts[b[0]]
			if v == "" {
				v = "not run"
			}
			return b[0], fb, v
		}
		c := a.calls[0]
		sql := argSQL(llm.ToolCall{Arguments: c.Function.Arguments})
		switch c.Function.Name {
		case "execute_sql":
			fb := feedback(t, r.db, sql)
			ran[sql] = fb
			if strings.HasPrefix(fb, "Success") {
				last = sql
			}
			msgs = append(msgs, llm.ToolResult(c.ID, fb))
		case "semantic_verifier":
			fb, ok := ran[sql]
			if !ok {
				fb = feedback(t, r.db, sql)
				ran[sql] = fb
			}
			va := r.chat("verify", []llm.Message{llm.User(verifyPrompt(r.e.Question, sql, strings.TrimPrefix(fb, "Success: ")))}, nil, "")
			var v struct {
				Correct     bool   `json:"correct"`
				Explanation string `json:"explanation"`
				Back        string `json:"back_translated_query"`
			}
			js := llm.Blocks(va.content, "json")
			if len(js) != 1 || json.Unmarshal([]byte(js[0]), &v) != nil {
				t.Fatalf("%s verifier answered %q", r.e.ID, va.content)
			}
			res := "Semantic check passed: " + v.Explanation
			if !v.Correct {
				res = "Semantic Error: " + v.Explanation + " (back-translation: " + v.Back + ")"
			}
			verdicts[sql] = res
			msgs = append(msgs, llm.ToolResult(c.ID, res))
		default:
			t.Fatalf("proposer called %s", c.Function.Name)
		}
	}
	return last, ran[last], "not run"
}

// TestPExAEndToEnd runs one pass per demo example with the default noise:
// every request is recognised, every PExA kind is served and listed in
// /stats, and the pass has PExA's structure (spec §5.1 item 12). Under the
// race detector (its requests are several times slower) every fourth
// example, which serves every kind and keeps the averages in range; the
// run without it (make slow) passes all.
func TestPExAEndToEnd(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	db := demoDB(t, ds)
	s, ts := newSim(t, Config{Dataset: ds, Seed: 21})
	calls := map[string]int{}
	rounds, probes, chosen, right, passes := 0, 0, 0, 0, 0
	for i, e := range ds.Examples {
		if raceEnabled && i%4 != 0 {
			continue
		}
		passes++
		r := &pexaRun{t: t, url: ts.URL, s: s, db: db, e: e, seed: int64(1000 * i), calls: calls}
		sql := r.pass()
		rounds += r.rounds
		probes += r.probes
		chosen += r.chosen
		if sameSQL(sql, s.know.examples[e.ID].gold) {
			right++
		}
	}
	n := float64(passes)
	total := 0
	for _, c := range calls {
		total += c
	}
	t.Logf("%d passes: %.2f rounds per pass, %.2f probes per round, %d Finals chosen after the results, %.1f LLM calls per pass %v, %.2f verifications per pass, %d gold answers",
		passes, float64(rounds)/n, float64(probes)/float64(rounds), chosen, float64(total)/n, calls, float64(calls["verify"])/n, right)
	// Most probes end with a success: the choice runs on the demo.
	if chosen == 0 || float64(chosen) < 0.5*float64(probes) {
		t.Errorf("%d of %d probes had their Final chosen after the results; want at least half", chosen, probes)
	}
	if rp := float64(rounds) / n; rp < 1 || rp > 1.6 {
		t.Errorf("%.2f generate rounds per pass", rp)
	}
	if pr := float64(probes) / float64(rounds); pr < 1 || pr > 7 {
		t.Errorf("%.2f probes per round", pr)
	}
	if v := float64(calls["verify"]) / n; v < 0.6 || v > 2 {
		t.Errorf("%.2f verifications per pass", v)
	}

	resp, err := http.Get(ts.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var st struct {
		ByKind         map[string]int64 `json:"by_kind"`
		Unknown        int64            `json:"unknown_requests"`
		UnknownExample int64            `json:"unknown_example"`
		Requests       int64            `json:"requests"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	if st.Unknown != 0 || st.UnknownExample != 0 || st.Requests != int64(total) {
		t.Errorf("stats %s (the agent made %d calls)", raw, total)
	}
	for _, k := range PExAKinds() {
		if st.ByKind[string(k)] == 0 {
			t.Errorf("/stats by_kind has no %s: %s", k, raw)
		}
	}
	if int64(calls["verify"]) != st.ByKind[string(KindPExAVerify)] || int64(calls["testcase"]) != st.ByKind[string(KindPExATestcase)]+st.ByKind[string(KindPExATestcaseFix)]+st.ByKind[string(KindPExAChooseFinal)] ||
		int64(chosen) != st.ByKind[string(KindPExAChooseFinal)] {
		t.Errorf("by_kind %v does not match the agent's calls %v", st.ByKind, calls)
	}
}

// TestPExAChooseFinal: after a batch with successful answering queries
// the agent asks the generator to choose, seeing the results (pexa
// D-P24); the simulator names one of the successes the question lists
// (the probe's main query when it is one), also when the batch's
// arguments cannot be read back, and through any tool choice that offers
// choose_final.
func TestPExAChooseFinal(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	db := demoDB(t, ds)
	clean := Noise{Gold: 1, Fix: 1, ExploreRight: 1, Link: 1, Verify: 1}
	s, ts := newSim(t, Config{Dataset: ds, Seed: 5, Noise: clean})
	chooseOnly := tools(toolChooseJSON)
	checked, several := 0, 0
	for _, e := range ds.Examples[:6] {
		probe := e.Question
		msgs := []llm.Message{llm.User(testcasePrompt(s, e, probe))}
		a := chatTo(t, ts.URL, 1, msgs, testcaseTools, "required")
		var b batchArgs
		oneCall(t, a, "execute_sql", &b)
		result, _ := runBatch(t, db, b)
		var ok []int
		for _, m := range queryFeedback.FindAllStringSubmatch(result, -1) {
			n, _ := strconv.Atoi(m[1])
			if m[2] == "Success" && !b.Queries[n-1].Exploration {
				ok = append(ok, n)
			}
		}
		if len(ok) == 0 {
			continue
		}
		if len(ok) > 1 {
			several++
		}
		garbled := a.asMessage()
		garbled.ToolCalls[0].Arguments = "{not json"
		for _, tt := range []struct {
			name   string
			call   llm.Message
			listed []int
			tools  []json.RawMessage
			choice string
		}{
			{"as the agent asks", a.asMessage(), ok, choiceTools, "required"},
			{"forced", a.asMessage(), ok, chooseOnly, "required"},
			{"arguments unreadable", garbled, ok, choiceTools, "required"},
			{"one listed", a.asMessage(), ok[len(ok)-1:], choiceTools, "required"},
		} {
			conv := append(slices.Clone(msgs), tt.call, llm.ToolResult(a.calls[0].ID, result), llm.User(choosePrompt(tt.listed)))
			if k := ClassifyConversation(conv); k != KindPExAChooseFinal {
				t.Fatalf("%s, %s: the choice turn is classified %s", e.ID, tt.name, k)
			}
			var c struct {
				Query int `json:"query"`
			}
			oneCall(t, chatTo(t, ts.URL, 1, conv, tt.tools, tt.choice), "choose_final", &c)
			if !slices.Contains(tt.listed, c.Query) {
				t.Errorf("%s, %s: chose query %d; the question lists %v", e.ID, tt.name, c.Query, tt.listed)
			}
		}
		checked++
	}
	if checked == 0 || several == 0 {
		t.Fatalf("%d batches with a success, %d with several: nothing to choose from", checked, several)
	}
}
