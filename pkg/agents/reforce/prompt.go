package reforce

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Dialect prompt fragments (reference §9, paper Listing 1).

func dialectName(d warehouse.Dialect) string {
	switch d {
	case warehouse.Snowflake:
		return "Snowflake"
	case warehouse.BigQuery:
		return "BigQuery"
	}
	return "SQLite"
}

// BasicUsage is the dialect's "SQL usage example".
func BasicUsage(d warehouse.Dialect) string {
	switch d {
	case warehouse.Snowflake:
		return `SELECT "COLUMN_NAME" FROM DATABASE.SCHEMA.TABLE WHERE ... (Adjust "DATABASE", "SCHEMA", and "TABLE" to match actual names, ensure all column names are enclosed in double quotations)`
	case warehouse.BigQuery:
		return "SELECT `column_name` FROM `database.schema.table` WHERE ... (Replace `database`, `schema`, and `table` with actual names. Enclose column names and table identifiers with backticks.)"
	}
	return `SELECT DISTINCT "column_name" FROM "table_name" WHERE ... (Replace "table_name" with the actual table name. Enclose table and column names with double quotations if they contain special characters or match reserved keywords.)`
}

// NestedTip tells how to read nested JSON columns (exploration only).
func NestedTip(d warehouse.Dialect) string {
	switch d {
	case warehouse.Snowflake:
		return `For columns in json nested format: e.g. SELECT t."column_name", f.value::VARIANT:"key_name"::STRING AS "abstract_text" FROM PATENTS.PATENTS.PUBLICATIONS t, LATERAL FLATTEN(input => t."json_column_name") f; DO NOT directly answer the task and ensure all column names are enclosed in double quotations. For nested columns like event_params, when you do not know the structure of it, first watch the whole column: SELECT f.value FROM table, LATERAL FLATTEN(input => t."event_params") f;`
	case warehouse.BigQuery:
		return "Extract a specific key from a nested JSON column: SELECT t.`column_name`, JSON_EXTRACT_SCALAR(f.value, \"$.key_name\") AS `abstract_text` FROM `database.schema.table` AS t, UNNEST(JSON_EXTRACT_ARRAY(t.`json_column_name`)) AS f;\nWhen the structure of the nested column (e.g., event_params) is unknown, first inspect the whole column: SELECT f.value FROM `project.dataset.table` AS t, UNNEST(JSON_EXTRACT_ARRAY(t.`event_params`)) AS f;"
	}
	return `Extract a specific key from a nested JSON column: SELECT t."column_name", json_extract(f.value, '$.key_name') AS "abstract_text" FROM "table_name" AS t, json_each(t."json_column_name") AS f;
When the structure of the nested column is unknown, first inspect the whole column: SELECT f.value FROM "table_name" AS t, json_each(t."json_column_name") AS f;`
}

// StringMatchingTip is the fuzzy matching advice (exploration only). The
// reference's Snowflake example put the pattern in double quotes (an
// identifier in Snowflake) and misspelt ILIKE; both are fixed here.
func StringMatchingTip(d warehouse.Dialect) string {
	switch d {
	case warehouse.Snowflake:
		return `Do not directly match strings if you are not convinced. Use fuzzy query first: WHERE str ILIKE '%target_str%'. For string matching, e.g. meat lovers, you should use % to replace space, e.g. ILIKE '%meat%lovers%'.`
	case warehouse.BigQuery:
		return `Do not directly match strings if you are not convinced. Use LOWER for fuzzy queries: WHERE LOWER(str) LIKE LOWER('%target_str%'). For example, to match 'meat lovers', use LOWER(str) LIKE '%meat%lovers%'.`
	}
	return `Do not directly match strings if you are not convinced. For fuzzy queries, use: WHERE str LIKE '%target_str%'. For example, to match 'meat lovers', use WHERE str LIKE '%meat%lovers%'. If case sensitivity is needed, add COLLATE BINARY: WHERE str LIKE '%target_str%' COLLATE BINARY.`
}

// ListTablesTip is the advice about unions over many tables.
func ListTablesTip(d warehouse.Dialect, tableStruct string) string {
	switch d {
	case warehouse.Snowflake:
		return "When using UNION over many tables, list every table explicitly and UNION them first, then apply the filters and pick the columns once, " +
			`e.g. SELECT "col1", "col2" FROM (SELECT * FROM TABLE1 UNION ALL SELECT * FROM TABLE2) WHERE ...; ` +
			`rather than filtering each branch on its own, as in (SELECT "col1", "col2" FROM TABLE1 WHERE ...) UNION ALL (SELECT "col1", "col2" FROM TABLE2 WHERE ...). ` +
			"Never put a comment such as " + omissionList() + " where a table belongs. The tables are: " + tableStruct
	case warehouse.BigQuery:
		return "When querying many tables of the same structure, use wildcard tables such as `project.dataset.prefix*` with _TABLE_SUFFIX IN (...) or BETWEEN rather than listing every table."
	}
	return ""
}

// omissionComments are the comments models write in place of tables they
// leave out of a long UNION (the reference's list, prompt.py:35 and
// agent.py:243-245).
var omissionComments = []string{"-- Include all", "-- Omit", "-- Continue", "-- Union all", "-- ...", "-- List all", "-- Replace this", "-- Each table", "-- Add other"}

func omissionList() string {
	q := make([]string, len(omissionComments))
	for i, c := range omissionComments {
		q[i] = "'" + c + "'"
	}
	return strings.Join(q, ", ")
}

// hasOmissionComment reports whether sql leaves tables out behind one of
// omissionComments.
func hasOmissionComment(sql string) bool {
	for _, c := range omissionComments {
		if strings.Contains(sql, c) {
			return true
		}
	}
	return false
}

// GeneratePrompt is the first turn of self-refinement (reference §5).
func GeneratePrompt(in CandidateInput) string {
	d := in.Example.Dialect
	var b strings.Builder
	b.WriteString(in.TableInfo)
	b.WriteString("\n")
	if in.Exploration != "" {
		b.WriteString("Some few-shot examples after column exploration may be helpful:\n")
		b.WriteString(in.Exploration)
		b.WriteString("\n")
	}
	b.WriteString("Task: " + in.Example.Question + "\n")
	b.WriteString("Please think step by step and answer only one complete SQL in " + dialectName(d) + " dialect in ```sql``` format.\n")
	b.WriteString("SQL usage example: " + BasicUsage(d) + "\n")
	if in.Format != "" {
		b.WriteString("Follow the answer format like: " + in.Format + ".\n")
	}
	b.WriteString("Here are some useful tips for answering:\n")
	if tip := ListTablesTip(d, in.TableStruct); tip != "" {
		b.WriteString(tip + "\n")
	}
	if d == warehouse.Snowflake {
		b.WriteString("When using ORDER BY xxx DESC, add NULLS LAST to exclude null records: ORDER BY xxx DESC NULLS LAST.\n")
	}
	b.WriteString("When asked something without stating name or id, return both of them, e.g. for \"Which products ...?\" the answer should include product_name and product_id.\n")
	b.WriteString("When asked for a percentage decrease, return a positive value: for \"By how many percentage points did 2021 fall compared with 2020?\" the answer is the size of the drop, so wrap the difference in ABS().\n")
	b.WriteString("When the task asks for two results in a chain, where the first only selects what the second is about, answer with the last one only instead of combining both: " +
		"for \"Find the five states with the most stores, take the one ranked fourth and list its five counties with the most stores\" the answer is those five counties, not the states.\n")
	if d == warehouse.Snowflake {
		b.WriteString("When computing geographic distances, use ST_DISTANCE.\n")
	}
	b.WriteString("If the task gives no precision, keep 4 decimal places.\n")
	return b.String()
}

// RefinePrompt feeds an execution error or an empty result back.
func RefinePrompt(sql, feedback string) string {
	return "Input sql:\n" + sql + "\nThe error information is:\n" + feedback +
		"\nPlease correct the SQL according to the error information and output only 1 complete SQL query in ```sql``` format."
}

// EmptyResult is the feedback for a query that returned no rows (the
// reference's text).
const EmptyResult = "No data found for the specified query."

// ReaskOneSQL asks again for exactly one query.
const ReaskOneSQL = "Please output one SQL only."

// ReaskFence asks again for a reply with no readable query: the
// reference's fence re-ask (chat.py), preceded by what was wrong.
func ReaskFence(problem string) string {
	return "Your reply could not be used: " + problem + ". Please answer in ```sql``` format with one sql query."
}

// FormatPrompt asks for the expected answer format (v1's format
// restriction).
func FormatPrompt(question string) string {
	return "Task: " + question + "\n" +
		"Please give the simplest possible answer format of the task in ```csv``` format, and no SQL: a header line with one column name for each attribute the answer needs, then a line of placeholder values, each with its type like :int, :float or :str. For example:\n" +
		"```csv\nlatitude,longitude,cumulative_distance_km\nlatitude1:float,longitude1:float,distance1:float\n```\n" +
		"```csv\nproduct_name,product_id\nproduct_name1:str,product_id1:int\n```\n" +
		"If the task asks for named things, give both the name and the id.\n"
}

// ReviewInput is what the self-consistency review shows (v1 Alg. 2; the
// reference's prompt.py:146-151 with agent.py:216-245).
type ReviewInput struct {
	// Question is the task text; Format the expected answer format, if any.
	Question, Format string
	// CSV is the whole current answer (the prompt shows its first 500
	// chars; the hints read all of it) and SQL the query that gave it.
	CSV, SQL string
	// Dialect and TableStruct give the list-every-table tip when the SQL
	// leaves tables out behind a comment.
	Dialect     warehouse.Dialect
	TableStruct string
}

// ReviewPrompt asks the model to review a successful answer (v1's
// self-consistency): the task, the answer and its SQL, and the hints the
// answer calls for.
func ReviewPrompt(in ReviewInput) string {
	var b strings.Builder
	b.WriteString("Please check the answer again by reviewing task:\n" + in.Question + "\n")
	b.WriteString("Review the relevant tables and columns and the possible conditions, and then give the final SQL query. Don't output other queries. If you think the answer is right, just output the current SQL.\n")
	b.WriteString("If the task gives no precision, keep 4 decimal places.\n")
	if in.Format != "" {
		b.WriteString("The answer format should be like: " + in.Format + "\n")
	}
	b.WriteString("Current answer:\n" + truncate(in.CSV, 500) + "\n")
	b.WriteString("Current sql:\n```sql\n" + in.SQL + "\n```\n")
	for _, h := range reviewHints(in) {
		b.WriteString(h + "\n")
	}
	return b.String()
}

// SelfConsistencyPrompt is ReviewPrompt without the task text or the list
// of tables, for callers that only have the answer.
func SelfConsistencyPrompt(format, csv, sql string) string {
	return ReviewPrompt(ReviewInput{Format: format, CSV: csv, SQL: sql})
}

// reviewHints are the reference's four conditional hints, in its order:
// values wrapped in triple quotes, nested (multi-line) values, columns that
// are all empty or zero, and tables left out behind a comment.
func reviewHints(in ReviewInput) []string {
	var hints []string
	if strings.Contains(in.CSV, `"""`) {
		hints = append(hints, `Some values of the answer are wrapped in extra quotes ("""): remove them, e.g. by CASTing the column to a string type.`)
	}
	r := csv.NewReader(strings.NewReader(in.CSV))
	r.FieldsPerRecord, r.LazyQuotes = -1, true
	rows, err := r.ReadAll()
	if err == nil && len(rows) > 1 {
		header, body := rows[0], rows[1:]
		nested := false
		for _, row := range body {
			for _, v := range row {
				nested = nested || strings.Contains(v, "\n")
			}
		}
		var empty []string
		for j, name := range header {
			all := true
			for _, row := range body {
				if j < len(row) && strings.TrimSpace(row[j]) != "" && strings.TrimSpace(row[j]) != "0" {
					all = false
					break
				}
			}
			if all {
				empty = append(empty, name)
			}
		}
		switch {
		case nested:
			hints = append(hints, "Some values of the answer are nested and span several lines: flatten them into one line each, e.g. turn '[\\n  A,\\n  B\\n]' into 'A, B'.")
		case len(empty) > 0:
			hints = append(hints, "The answer's columns ["+strings.Join(empty, ", ")+"] are empty or all zero: check the conditions and joins that fill them, and fix the query.")
		}
	}
	if hasOmissionComment(in.SQL) {
		tip := ListTablesTip(in.Dialect, in.TableStruct)
		if tip == "" {
			tip = "List every table the query needs explicitly."
		}
		hints = append(hints, "The SQL leaves tables out behind a comment. "+tip)
	}
	return hints
}

// CTEPrompt shows the intermediate result of each CTE of a query that
// returned nothing (v1's CTE-based refinement, v1 §3.2.4).
func CTEPrompt(sql, intermediates string) string {
	return CTEFeedbackPrompt(sql, EmptyResult, intermediates)
}

// CTEFeedbackPrompt shows the intermediate result of each CTE of a query
// that ended with feedback: EmptyResult, or the engine's error.
func CTEFeedbackPrompt(sql, feedback, intermediates string) string {
	return "Input sql:\n" + sql + "\n" + cteOutcome(feedback) + " Here are the intermediate results of each CTE, in order:\n" + intermediates +
		"\nFind the CTE where the expected data disappears or the error starts, rewrite that CTE, and output the complete corrected SQL in ```sql``` format."
}

// CTERewritePrompt asks for a query without CTEs to be rewritten as a chain
// of CTEs, so that CTE-based refinement can inspect each step (v1 §3.2.4:
// "prompt the agent to write the SQL as CTEs").
func CTERewritePrompt(sql, feedback string) string {
	return "Input sql:\n" + sql + "\n" + cteOutcome(feedback) +
		" Rewrite the query as a chain of CTEs, one per logical step (WITH step1 AS (...), step2 AS (... FROM step1 ...) SELECT ... FROM step2), so that the intermediate results of each CTE can be inspected; fix what you can on the way, and output the complete SQL in ```sql``` format."
}

func cteOutcome(feedback string) string {
	if feedback == EmptyResult || feedback == "" {
		return "It returned no rows."
	}
	return "It failed with the error: " + strings.TrimSpace(feedback) + "."
}

// ExplorePrompt asks for up to 10 exploration queries (paper Figure 4).
func ExplorePrompt(in ExploreInput) string {
	d := in.Example.Dialect
	var b strings.Builder
	b.WriteString(in.TableInfo)
	b.WriteString("\nTask: " + in.Example.Question + "\n")
	b.WriteString(exploreInstructions(d, in.TableStruct))
	return b.String()
}

func exploreInstructions(d warehouse.Dialect, tableStruct string) string {
	return "Write at most 10 " + dialectName(d) + " SQL queries for simple to complex ones to final answer in format like:\n```sql\n" + BasicUsage(d) + "\n```\n" +
		"in sql code block to have an understanding of values in related columns.\n" +
		"Each query should be different. Do not query about any SCHEMA or checking data types. You can write SELECT query only. Try to use DISTINCT. For each SQL LIMIT 20 rows.\n" +
		"Write annotations to describe each SQL, format like\n--Description:\nSELECT ...\n" +
		NestedTip(d) + "\n" + StringMatchingTip(d) + "\n" +
		"For time-related queries, given the variety of formats, avoid using time converting functions unless you are certain of the specific format being used.\n" +
		"When matching strings, replace non-standard symbols with %: to find he’s (with a curly apostrophe) write LIKE '%he%s%' rather than typing the symbol.\n" +
		"Make sure each string literal opens and closes with the same quote: 'Vegetarian\" starts with a single quote and ends with a double one, which is an error.\n" +
		"You can only use tables in " + tableStruct + "\n" +
		"Your knowledge is based on information in database. Do not use your own knowledge.\n"
}

// ExploreReask asks again when fewer than three queries came back.
func ExploreReask(d warehouse.Dialect, n int) string {
	return fmt.Sprintf("You wrote %d queries. Write at most 10 %s SQL queries, and at least 3, from simple to complex, each with a --Description: annotation and LIMIT 20, in one ```sql``` block.", n, dialectName(d))
}

// CorrectPrompt asks for a fix of a failing exploration query.
func CorrectPrompt(sql, feedback string, empty bool) string {
	s := "Input sql:\n" + sql + "\nThe error information is:\n" + feedback +
		"\nPlease correct the SQL based on previous context and output the thinking process with only one SQL query in ```sql``` format, starting with a --Description: annotation."
	if empty {
		s += " The query returned no rows: please simplify some conditions."
	}
	return s
}

// FixOthersPrompt asks to correct the remaining queries alike.
func FixOthersPrompt(orig, corrected string, rest []string) string {
	list, _ := json.Marshal(rest)
	return orig + "\nis corrected to\n" + corrected + "\nPlease correct other sqls if they have similar errors, and output them all in one ```sql``` block, each with a --Description: annotation. SQLs: " + string(list)
}

// VotePrompt asks the model to choose among tied candidates (v1's model
// vote).
func VotePrompt(tableInfo, question string, cands []*Candidate) string {
	var b strings.Builder
	b.WriteString(tableInfo)
	b.WriteString("\nTask: " + question + "\n")
	b.WriteString("Compare the candidate answers below and choose the one that answers the task. Think step by step: 1. exclude unreasonable results (null or zero results tend to be wrong); 2. check the task's requirements; 3. check the SQL.\n\n")
	for _, c := range cands {
		fmt.Fprintf(&b, "SQL file name: %s\n```sql\n%s\n```\nCSV file name: %dresult.csv\n```csv\n%s\n```\n\n", c.FileName(), c.SQL, c.Index, truncate(c.CSV, voteCSVChars))
	}
	b.WriteString("Output the chosen SQL file name in ```plaintext``` format, like:\n```plaintext\n0result.sql\n```\n")
	return b.String()
}

// voteCSVChars is how much of each tied result the model vote shows.
const voteCSVChars = 5000

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
