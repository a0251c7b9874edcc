// Package raise is RAISE (Granado, Lotufo, Pereira, STIL 2025): one
// reasoning model explores the database through commands written in its
// own text ([RUN] command(arguments) [EXECUTE]), with token caps that force
// it to interact; only its executed commands and their results are handed
// to three models, each of which writes a final SQL (refined on errors);
// one of them also gets a column post-process. The paper publishes no code
// and only three phrases of its prompts; docs/agents/raise.md records
// every decision taken where it is silent, with the line it rests on.
package raise

import (
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// The authors' own phrases (raise §3.2 L199-L214). The nudge names the
// command as the model is told to write it, run_query (D-R1: the printed
// "run query" is the PDF's text extraction).
const (
	PhraseStart     = "Before thinking about the solution, I will have a deep understanding of the data and not make any assumptions about it."
	Nudge           = "Wait, I am thinking for too long without interacting with the database. I can run queries and see the results with the command [RUN] run_query(...) [EXECUTE]"
	PhraseTerminate = "I am thinking for too long. I will generate my final solution now."
)

// Markers of the command protocol (raise §3.1 L172-L178).
const (
	TagRun     = "[RUN]"
	TagExecute = "[EXECUTE]"
	TagResult  = "[RESULT]"
	TagEnd     = "[/RESULT]"
)

func dialectName(d warehouse.Dialect) string {
	switch d {
	case warehouse.Snowflake:
		return "Snowflake"
	case warehouse.BigQuery:
		return "BigQuery"
	}
	return "SQLite"
}

func evidence(ek string) string {
	if strings.TrimSpace(ek) == "" {
		return "None"
	}
	return ek
}

// AgentPrompt is the agent's one user message (ours, D-R15; no system
// prompt, as DeepSeek advises for R1 models). static removes run_query
// (the "static agent" of §4 L273-L276).
func AgentPrompt(d warehouse.Dialect, question, externalKnowledge string, static bool) string {
	dn := dialectName(d)
	var b strings.Builder
	fmt.Fprintf(&b, "You are a data analyst who must answer a question using a %s database you have never seen.\n", dn)
	b.WriteString("You can interact with the database while you think. Write a command as\n")
	b.WriteString("[RUN] command(arguments) [EXECUTE]\n")
	b.WriteString("and its result will appear right after it, between [RESULT] and [/RESULT]. Available commands:\n")
	b.WriteString("- read_table_names(): lists the tables of the database.\n")
	b.WriteString("- read_table_columns(table_name: str): lists the columns of a table and their types.\n")
	b.WriteString(`- read_columns_documentation(column_names: list[str]): returns the documentation of the given columns, written as "table.column".` + "\n")
	if !static {
		fmt.Fprintf(&b, "- run_query(sql: str): runs one read-only %s query and returns its first rows.\n", dn)
	}
	b.WriteString("Explore the data as much as you need: check which tables and columns are relevant, how values are stored, and whether the documentation matches the data. ")
	b.WriteString("When you are done, give the final answer as one SQL query in a ```sql``` block.\n")
	fmt.Fprintf(&b, "Question: %s\nEvidence: %s", question, evidence(externalKnowledge))
	return b.String()
}

// MultiTurnStart replaces the prefilled start phrase when the endpoint
// cannot continue an assistant message (D-R2's labelled fallback).
func MultiTurnStart() string {
	return "\nBegin your reasoning with: " + PhraseStart
}

// Op is one executed command with its output, as the final prompt lists
// it.
type Op struct {
	Command string `json:"command"`
	Output  string `json:"output"`
}

// Attempt is a previous final SQL that did not work.
type Attempt struct {
	SQL    string `json:"sql"`
	Result string `json:"result"`
}

// FinalPrompt is the final-generation prompt, the same for the three
// models (ours, D-R15); a retry lists the previous attempts (D-R7).
func FinalPrompt(d warehouse.Dialect, question, externalKnowledge string, ops []Op, attempts []Attempt) string {
	dn := dialectName(d)
	var b strings.Builder
	fmt.Fprintf(&b, "Below are the operations a data analyst executed on a %s database while studying a question, with their results.\n", dn)
	fmt.Fprintf(&b, "Question: %s\nEvidence: %s\nOperations:\n", question, evidence(externalKnowledge))
	for i, op := range ops {
		fmt.Fprintf(&b, "[%d] %s\n%s\n", i+1, op.Command, strings.TrimRight(op.Output, "\n"))
	}
	if len(ops) == 0 {
		b.WriteString("(none)\n")
	}
	if len(attempts) > 0 {
		b.WriteString("Previous attempts that did not work:\n")
		for i, a := range attempts {
			fmt.Fprintf(&b, "Attempt %d:\n```sql\n%s\n```\nResult: %s\n", i+1, a.SQL, a.Result)
		}
	}
	fmt.Fprintf(&b, "Using only what these operations show, write the %s SQL query that answers the question. Answer with exactly one SQL query in a ```sql``` block.", dn)
	return b.String()
}

// ColumnsPrompt asks for the columns to select and their order (raise
// §3.3 L237-L239; ours, D-R15).
func ColumnsPrompt(question, sql string) string {
	return "Question: " + question + "\nSQL:\n```sql\n" + sql + "\n```\n" +
		"Identify what columns should be selected to answer the question, and in what order. " +
		"Rewrite the query changing only its selected columns (the list and its order); do not change the query logic " +
		"(tables, joins, filters, grouping, ordering, limits). Answer with exactly one SQL query in a ```sql``` block."
}
