package pexa

import (
	"embed"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// The prompts are the paper's Figs. 3–6 word for word (pexa L301–L319),
// with the slots filled; prompts/*.txt hold them and golden files pin what
// they render to. The texts of ours are the no-proposer planner's two
// bullets (D-P21) and sequential planning's guideline and closing line
// (D-P22) in plan.txt.
//
//go:embed prompts/*.txt
var promptFiles embed.FS

var prompts = template.Must(template.New("pexa").Option("missingkey=error").ParseFS(promptFiles, "prompts/*.txt"))

func render(name string, data any) string {
	var b strings.Builder
	if err := prompts.ExecuteTemplate(&b, name+".txt", data); err != nil {
		panic(fmt.Sprintf("pexa prompt %s: %v", name, err)) // the templates are fixed at build time
	}
	return strings.TrimRight(b.String(), "\n")
}

// PlannerPrompt is Fig. 3. "Another way to say it" repeats the question:
// the paper describes no rewriting step (D-P11).
func PlannerPrompt(question string) string {
	return render("plan", planData{Question: question})
}

// PlannerPromptNoProposer is Fig. 3 for the no-proposer ablation: the
// "Propose Final SQL" and "Finish" bullets are ours (the paper does not
// print this prompt), saying the Planner writes and checks the final SQL
// with execute_sql (and semantic_verifier when it is offered) and submits
// it with finish(sql_query); the rest is verbatim (D-P21).
func PlannerPromptNoProposer(question string, verifier bool) string {
	return render("plan", planData{Question: question, NoProposer: true, Verifier: verifier})
}

// PlannerPromptSequential is Fig. 3 for the sequential-planning ablation
// (D-P22): a guideline of ours asks for one probe per generate_testcase
// call, read before the next is written, and the closing line asks for
// the first probe; the rest is verbatim.
func PlannerPromptSequential(question string) string {
	return render("plan", planData{Question: question, Sequential: true})
}

type planData struct {
	Question                         string
	NoProposer, Verifier, Sequential bool
}

// TestcaseInput fills Fig. 4.
type TestcaseInput struct {
	Dialect warehouse.Dialect
	// TableInfo is ReFoRCE's compressed table blocks; Structure its closing
	// "The table structure information is …" line.
	TableInfo, Structure, ExternalKnowledge, Probe string
}

// TestcasePrompt is Fig. 4; only the Snowflake dialect block is printed,
// so SQLite and BigQuery get their own (D-P10). The elided
// "domain-specific instructions" are not published, so there are none.
func TestcasePrompt(in TestcaseInput) string {
	return render("testcase", struct {
		Dialect, TableInfo, TableStruct, ExternalKnowledge, Probe string
	}{testcaseDialect[in.Dialect], strings.TrimRight(in.TableInfo, "\n"), strings.TrimRight(in.Structure, "\n"),
		in.ExternalKnowledge, in.Probe})
}

// ProposerPrompt is Fig. 5 over the evidence in its four clusters.
func ProposerPrompt(question string, dialect warehouse.Dialect, evidence []Record) string {
	return render("propose", struct{ Question, Dialect, Evidence string }{question, proposeDialect[dialect], renderEvidence(evidence)})
}

// VerifierPrompt is Fig. 6.
func VerifierPrompt(question, sql, result string) string {
	return render("verify", struct{ Question, SQL, Result string }{question, sql, result})
}

var testcaseDialect = map[warehouse.Dialect]string{
	warehouse.Snowflake: "Dialect, Naming, and Qualification\n- MUST use Snowflake SQL. Enclose all identifiers (databases, schemas, tables, columns, aliases) in double quotes.\n" +
		`- MUST fully qualify table names using the format: "<DATABASE>"."<SCHEMA>"."<TABLE>". To reference INFORMATION_SCHEMA, use "<DATABASE>"."INFORMATION_SCHEMA"."TABLES" instead of INFORMATION_SCHEMA.TABLES or anything else.`,
	warehouse.SQLite: "Dialect, Naming, and Qualification\n- MUST use SQLite SQL. Enclose identifiers in double quotes when they contain spaces or special characters or are keywords.\n" +
		"- Table names are not qualified.",
	warehouse.BigQuery: "Dialect, Naming, and Qualification\n- MUST use BigQuery Standard SQL. Enclose project.dataset.table in backticks: `<PROJECT>.<DATASET>.<TABLE>`.\n" +
		"- Quote column names with backticks when needed.",
}

var proposeDialect = map[warehouse.Dialect]string{
	warehouse.Snowflake: "Dialect, Naming, and Qualification\n- MUST use Snowflake SQL and enclose all identifiers (DBs, schemas, tables, columns, aliases) in double quotes.\n" +
		`- MUST fully qualify tables: "<DATABASE>"."<SCHEMA>"."<TABLE>". To reference INFORMATION_SCHEMA, use "<DATABASE>"."INFORMATION_SCHEMA"."TABLES" instead of INFORMATION_SCHEMA.TABLES or anything else.`,
	warehouse.SQLite:   testcaseDialect[warehouse.SQLite],
	warehouse.BigQuery: testcaseDialect[warehouse.BigQuery],
}

// Evidence classes (D-P5), in the order Fig. 5 lists them.
const (
	ClassExploratory = "exploratory"
	ClassFailure     = "failure"
	ClassSuccessful  = "successful"
	ClassFinal       = "final"
)

var classHeadings = []struct{ class, heading string }{
	{ClassExploratory, "Exploratory Probes:"},
	{ClassFailure, "Failure Probes:"},
	{ClassSuccessful, "Successful Probes:"},
	{ClassFinal, "Final SQL queries (pay more attention here):"},
}

// renderEvidence lays out the records under the four headings; numbering
// restarts in each and an empty cluster keeps its heading (D-P20).
func renderEvidence(records []Record) string {
	var b strings.Builder
	for i, h := range classHeadings {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(h.heading)
		n := 0
		for _, r := range records {
			if r.Class != h.class {
				continue
			}
			n++
			if h.class == ClassFailure {
				fmt.Fprintf(&b, "\n%d. Probe: %s SQL: %s Error: %s", n, r.Probe, r.SQL, r.Feedback)
			} else {
				fmt.Fprintf(&b, "\n%d. Probe: %s SQL: %s Executed Result (truncated): %s", n, r.Probe, r.SQL, strings.TrimPrefix(r.Feedback, "Success: "))
			}
		}
	}
	return b.String()
}

// Tool names (D-P2; "not enough information" loses its spaces because
// function names cannot have them).
const (
	ToolGenerateTestcase = "generate_testcase"
	ToolProposeFinalSQL  = "propose_final_sql"
	ToolFinish           = "finish"
	ToolExecuteSQL       = "execute_sql"
	ToolNotEnoughInfo    = "not_enough_information"
	ToolSemanticVerifier = "semantic_verifier"
)

var noArgs = json.RawMessage(`{"type":"object","properties":{}}`)

// sqlArgs are the parameters of the tools that take one SQL query.
var sqlArgs = json.RawMessage(`{"type":"object","required":["sql_query"],"properties":{"sql_query":{"type":"string"}}}`)

// plannerTools are Fig. 3's tools; with NoProposer (D-P21) the Planner gets
// the Proposer's executor and verifier instead of propose_final_sql, and
// finish takes the final SQL.
func plannerTools(cfg Config) []llm.Tool {
	desc := "Call the worker to generate SQL queries for probes. Probes are simple natural language queries that provide basic information about the data to the proposer."
	params := `{"type":"object","required":["probes"],"properties":{"probes":{"type":"array","items":{"type":"string"}}}}`
	switch {
	case cfg.SequentialPlan:
		// One probe per turn (D-P22).
		desc += " Give exactly one probe per call; you will read its result before you write the next."
		params = `{"type":"object","required":["probes"],"properties":{"probes":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":1}}}`
	case cfg.MaxProbesPerPlan > 0:
		desc += fmt.Sprintf(" Give at most %d probes per call.", cfg.MaxProbesPerPlan)
	}
	gen := llm.Tool{Name: ToolGenerateTestcase, Description: desc, Parameters: json.RawMessage(params)}
	if cfg.NoProposer {
		tools := append([]llm.Tool{gen}, proposerTools(!cfg.NoVerifier)...)
		return append(tools, llm.Tool{Name: ToolFinish, Parameters: sqlArgs,
			Description: "Submit the final SQL query and stop. It must execute with rows; if it does not, you get the executor's feedback instead."})
	}
	return []llm.Tool{
		gen,
		{Name: ToolProposeFinalSQL, Description: "Call the proposer to integrate the probes and synthesize the final SQL query.", Parameters: noArgs},
		{Name: ToolFinish, Description: "Submit the proposed final SQL query and stop.", Parameters: noArgs},
	}
}

// toolNames lists tools for a message: "a, b or c".
func toolNames(tools []llm.Tool) string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func testcaseTools(maxSQLs int) []llm.Tool {
	// The Final is chosen once the results are seen (choose_final,
	// D-P24), so the batch carries no mark.
	desc := "Execute a batch of SQL queries and return, for each, Success with the first rows, NULL Error (no rows) or Compilation Error."
	if maxSQLs > 0 {
		desc += fmt.Sprintf(" Submit at most %d queries.", maxSQLs)
	}
	return []llm.Tool{
		{Name: ToolExecuteSQL, Description: desc,
			Parameters: json.RawMessage(`{"type":"object","required":["queries"],"properties":{"queries":{"type":"array","items":{"type":"object","required":["description","sql_query","exploration"],"properties":{"description":{"type":"string"},"sql_query":{"type":"string"},"exploration":{"type":"boolean"}}}}}}`)},
		{Name: ToolNotEnoughInfo, Description: "The question is not self-contained or is unanswerable.",
			Parameters: json.RawMessage(`{"type":"object","required":["explanation"],"properties":{"explanation":{"type":"string"}}}`)},
	}
}

func proposerTools(verifier bool) []llm.Tool {
	tools := []llm.Tool{{Name: ToolExecuteSQL, Description: "Execute one SQL query and return Success with the first rows, NULL Error (no rows) or Compilation Error.",
		Parameters: sqlArgs}}
	if verifier {
		tools = append(tools, llm.Tool{Name: ToolSemanticVerifier, Description: "Back-translate the SQL query into a question and compare it with the original question.",
			Parameters: sqlArgs})
	}
	return tools
}
