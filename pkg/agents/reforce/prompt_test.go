package reforce

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/golden"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/sqltext"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

var update = flag.Bool("update", false, "rewrite the prompt golden files in testdata")

// goldenPrompts is every ReFoRCE prompt with its slots filled, by golden
// file name (the schema-linking prompt lives in dbinfo).
func goldenPrompts() map[string]string {
	info := "Table full name: main.t\nColumn name: id Type: INTEGER\nColumn name: name Type: TEXT\nSample rows:\n[{'id': 1, 'name': 'a'}]\n" +
		"--------------------------------------------------\nExternal knowledge that might be helpful: \nNone\n"
	structure := "['main.t', 'main.t_2020', 'main.t_2021']"
	cands := []*Candidate{{Index: 0, SQL: "SELECT 1", CSV: "a\n1\n"}, {Index: 3, SQL: "SELECT 2", CSV: "a\n2\n"}}
	out := map[string]string{
		"refine":            RefinePrompt("SELECT nope FROM t", "no such column: nope"),
		"refine.empty":      RefinePrompt("SELECT id FROM t WHERE id > 9", EmptyResult),
		"reask":             ReaskOneSQL,
		"reask.fence":       ReaskFence("the reply was cut off inside its query"),
		"format":            FormatPrompt("Which products sold best in 2021?"),
		"review":            ReviewPrompt(ReviewInput{Question: "How many rows?", Format: "```csv\nn\n```", CSV: "n\n3\n", SQL: "SELECT COUNT(*) AS n FROM t", Dialect: warehouse.SQLite}),
		"review.nested":     ReviewPrompt(ReviewInput{Question: "List the tags.", CSV: "id,tags\n1,\"[\n  a,\n  b\n]\"\n", SQL: "SELECT id, tags FROM t", Dialect: warehouse.BigQuery}),
		"review.empty":      ReviewPrompt(ReviewInput{Question: "Totals per name?", CSV: "name,total,extra\na,0,\nb,0,\n", SQL: "SELECT name, total, extra FROM t", Dialect: warehouse.SQLite}),
		"review.omission":   ReviewPrompt(ReviewInput{Question: "Rows per year?", CSV: "y,n\n\"\"\"2020\"\"\",5\n", SQL: "SELECT * FROM T_2020 UNION ALL\n-- Include all other years\nSELECT * FROM T_2021", Dialect: warehouse.Snowflake, TableStruct: structure}),
		"cte":               CTEPrompt("WITH a AS (SELECT id FROM t), b AS (SELECT id FROM a WHERE id > 9) SELECT * FROM b", "CTE 1 a: rows, for example:\nid\n1\nCTE 2 b: no rows\n"),
		"cte.error":         CTEFeedbackPrompt("WITH a AS (SELECT id FROM t), b AS (SELECT nope FROM a) SELECT * FROM b", "no such column: nope", "CTE 1 a: rows, for example:\nid\n1\nCTE 2 b: error: no such column: nope\n"),
		"cte.rewrite":       CTERewritePrompt("SELECT id FROM t WHERE id > 9", EmptyResult),
		"cte.rewrite.error": CTERewritePrompt("SELECT nope FROM t", "no such column: nope"),
		"explore.reask":     ExploreReask(warehouse.SQLite, 1),
		"correct":           CorrectPrompt("SELECT nope FROM t", "no such column: nope", false),
		"correct.empty":     CorrectPrompt("SELECT id FROM t WHERE id > 9", EmptyResult, true),
		"fix-others":        FixOthersPrompt("SELECT nope FROM t", "SELECT id FROM t", []string{"SELECT nope, name FROM t"}),
		"vote":              VotePrompt(info, "How many rows?", cands),
	}
	for _, d := range []warehouse.Dialect{warehouse.SQLite, warehouse.Snowflake, warehouse.BigQuery} {
		e := Example{ID: "t1", Question: "How many rows?", Dialect: d}
		out["generate."+string(d)] = GeneratePrompt(CandidateInput{Example: e, TableInfo: info, TableStruct: structure})
		out["generate.explored-format."+string(d)] = GeneratePrompt(CandidateInput{Example: e, TableInfo: info, TableStruct: structure,
			Format: "```csv\nn\n```", Exploration: "Query:\nSELECT DISTINCT name FROM t LIMIT 20\nAnswer:\nname\na\n"})
		out["explore."+string(d)] = ExplorePrompt(ExploreInput{Example: e, TableInfo: info, TableStruct: structure})
	}
	return out
}

// TestReforcePromptsArePinned: every prompt matches its golden file, so a
// rewording shows up as a diff (go test ./pkg/agents/reforce -run
// TestReforcePromptsArePinned -update rewrites them).
func TestReforcePromptsArePinned(t *testing.T) {
	cases := goldenPrompts()
	golden.Check(t, cases, *update, "go test ./pkg/agents/reforce -run TestReforcePromptsArePinned -update")
}

// TestPinnedPromptsAreRecognisedBySimulator: each pinned prompt is
// classified by llmsim as the request it is.
func TestPinnedPromptsAreRecognisedBySimulator(t *testing.T) {
	t.Parallel()
	want := map[string]llmsim.Kind{
		"refine": llmsim.KindRefine, "refine.empty": llmsim.KindRefine, "reask": llmsim.KindReaskSQL, "reask.fence": llmsim.KindReaskSQL, "format": llmsim.KindFormat,
		"review": llmsim.KindSelfConsistency, "review.nested": llmsim.KindSelfConsistency, "review.empty": llmsim.KindSelfConsistency,
		"review.omission": llmsim.KindSelfConsistency, "cte": llmsim.KindCTERefine, "cte.error": llmsim.KindCTERefine,
		"cte.rewrite": llmsim.KindCTERefine, "cte.rewrite.error": llmsim.KindCTERefine, "explore.reask": llmsim.KindExplore,
		"correct": llmsim.KindExploreCorrect, "correct.empty": llmsim.KindExploreCorrect, "fix-others": llmsim.KindExploreFixOther,
		"vote": llmsim.KindVote,
	}
	for name, p := range goldenPrompts() {
		k, ok := want[name]
		switch {
		case ok:
		case strings.HasPrefix(name, "generate."):
			k = llmsim.KindGenerate
		case strings.HasPrefix(name, "explore."):
			k = llmsim.KindExplore
		default:
			t.Errorf("no expected kind for %s", name)
			continue
		}
		if got := llmsim.Classify(p); got != k {
			t.Errorf("simulator classifies %s as %s, want %s", name, got, k)
		}
	}
}

// TestRestoredTipExamples: the tips keep the worked examples the authors
// tuned (issue 20 item 5; reference prompt.py:35,83-102,137-139).
func TestRestoredTipExamples(t *testing.T) {
	t.Parallel()
	has := func(what, p string, subs ...string) {
		t.Helper()
		for _, s := range subs {
			if !strings.Contains(p, s) {
				t.Errorf("%s lacks %q:\n%s", what, s, p)
			}
		}
	}
	sf := GeneratePrompt(CandidateInput{Example: Example{Question: "Q?", Dialect: warehouse.Snowflake}, TableStruct: "['A', 'B']"})
	// The two-part answer: a worked example where only the last part is
	// the answer.
	has("two-part tip", sf, "answer with the last one only", "the one ranked fourth", "the answer is those five counties, not the states")
	// The percentage decrease: an example and ABS.
	has("percentage tip", sf, "percentage decrease", "By how many percentage points did 2021 fall compared with 2020?", "ABS()")
	// The Snowflake UNION tip: the pattern, the anti-pattern, every
	// omission comment and the tables.
	has("UNION tip", sf, `FROM (SELECT * FROM TABLE1 UNION ALL SELECT * FROM TABLE2) WHERE ...`,
		`rather than filtering each branch on its own, as in (SELECT "col1", "col2" FROM TABLE1 WHERE ...) UNION ALL (SELECT "col1", "col2" FROM TABLE2 WHERE ...)`,
		"The tables are: ['A', 'B']")
	for _, c := range omissionComments {
		has("UNION tip", sf, "'"+c+"'")
	}
	for _, d := range []warehouse.Dialect{warehouse.SQLite, warehouse.Snowflake, warehouse.BigQuery} {
		p := ExplorePrompt(ExploreInput{Example: Example{Question: "Q?", Dialect: d}, TableStruct: "['t']"})
		has("exploration prompt", p, "replace non-standard symbols with %", "he\u2019s", "LIKE '%he%s%'",
			"opens and closes with the same quote", `'Vegetarian"`)
	}
}

// TestReviewPromptHasTaskAndHints: the self-consistency prompt carries the
// task and the reference's four conditional hints (agent.py:216-245).
func TestReviewPromptHasTaskAndHints(t *testing.T) {
	t.Parallel()
	base := ReviewInput{Question: "How many rows per name?", CSV: "name,n\na,1\n", SQL: "SELECT name, COUNT(*) AS n FROM t GROUP BY name", Dialect: warehouse.Snowflake, TableStruct: "['T1', 'T2']"}
	p := ReviewPrompt(base)
	if !strings.HasPrefix(p, llmsim.MarkerSelfConsistency+":\nHow many rows per name?\n") {
		t.Errorf("the review does not open with the task:\n%s", p)
	}
	if len(reviewHints(base)) != 0 {
		t.Errorf("a plain answer gets hints: %q", reviewHints(base))
	}
	tests := []struct {
		name     string
		csv, sql string
		want     []string
	}{
		{"triple quotes", "name,n\n\"\"\"a\"\"\",1\n", base.SQL, []string{`extra quotes (""")`, "CAST"}},
		{"nested", "name,n\n\"[\n a,\n b\n]\",1\n", base.SQL, []string{"nested", "'A, B'"}},
		{"empty columns", "name,n,m\na,0,\nb,0,\n", base.SQL, []string{"columns [n, m] are empty or all zero"}},
		{"omission", base.CSV, "SELECT * FROM T1 UNION ALL\n-- Omit the rest\nSELECT * FROM T2", []string{"leaves tables out behind a comment", "The tables are: ['T1', 'T2']"}},
	}
	for _, tt := range tests {
		in := base
		in.CSV, in.SQL = tt.csv, tt.sql
		p := ReviewPrompt(in)
		for _, w := range tt.want {
			if !strings.Contains(p, w) {
				t.Errorf("%s: the review lacks %q:\n%s", tt.name, w, p)
			}
		}
	}
	// The candidate loop sends the task.
	m := agenttest.Texts(func(n int, _ string) string {
		return sqlReply("SELECT id FROM t WHERE id = " + []string{"1", "2", "3"}[min(n, 2)])
	})
	if _, err := newAgent(t, Config{SelfConsistency: true}, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex}); err != nil {
		t.Fatal(err)
	}
	if len(m.Asked()) < 2 || !strings.Contains(m.Asked()[1], "reviewing task:\n"+ex.Question+"\n") {
		t.Errorf("self-consistency prompt %q", m.Asked()[1:])
	}
}

// TestFormatExamplesKeepTypesOutOfTheHeader: the format examples put bare
// names in the header and types in a value row, as the authors'
// (prompt.py:76-81); only the header is kept.
func TestFormatExamplesKeepTypesOutOfTheHeader(t *testing.T) {
	t.Parallel()
	p := FormatPrompt("Q?")
	for _, ex := range []string{"```csv\nlatitude,longitude,cumulative_distance_km\nlatitude1:float,", "```csv\nproduct_name,product_id\nproduct_name1:str,product_id1:int\n```"} {
		if !strings.Contains(p, ex) {
			t.Errorf("format prompt lacks %q:\n%s", ex, p)
		}
	}
	m := agenttest.Replies("```csv\nproduct_name,product_id\nwidget:str,7:int\n```")
	got, _, err := newAgent(t, Config{}, m).Format(context.Background(), ex, 1)
	if err != nil || got != "```csv\nproduct_name,product_id\n```" {
		t.Errorf("format %q, %v", got, err)
	}
}

// TestCTEPrefixQueryQuotesPerDialect: intermediate CTE results are selected
// with a name the dialect resolves (issue 20 item 6).
func TestCTEPrefixQueryQuotesPerDialect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d         warehouse.Dialect
		sql, want string
	}{
		{warehouse.SQLite, "WITH a AS (SELECT 1 AS x), b AS (SELECT x FROM a) SELECT * FROM b", "\nSELECT * FROM \"b\" LIMIT 5"},
		{warehouse.BigQuery, "WITH Daily AS (SELECT 1 AS x) SELECT * FROM Daily", "\nSELECT * FROM `Daily` LIMIT 5"},
		{warehouse.BigQuery, "WITH `daily` AS (SELECT 1 AS x) SELECT * FROM `daily`", "\nSELECT * FROM `daily` LIMIT 5"},
		// Bare: Snowflake upper-cases it on both sides; quoting "daily"
		// would look for a lower-case name that does not exist.
		{warehouse.Snowflake, "WITH daily AS (SELECT 1 AS \"x\") SELECT * FROM daily", "\nSELECT * FROM daily LIMIT 5"},
		{warehouse.Snowflake, "WITH \"Daily\" AS (SELECT 1 AS \"x\") SELECT * FROM \"Daily\"", "\nSELECT * FROM \"Daily\" LIMIT 5"},
	}
	for _, tt := range tests {
		q, ok := sqltext.SplitCTEs(tt.sql, tt.d.LexOptions())
		if !ok {
			t.Fatalf("%s: not split", tt.sql)
		}
		got := ctePrefixQuery(q, len(q.CTEs), 5, tt.d)
		if !strings.HasSuffix(got, tt.want) {
			t.Errorf("%s %s: prefix query %q, want it to end %q", tt.d, tt.sql, got, tt.want)
		}
		if strings.Contains(got, `FROM "daily"`) || (tt.d == warehouse.BigQuery && strings.Contains(got, `"`)) {
			t.Errorf("%s: %q quotes the CTE name as a string or a case-sensitive identifier", tt.d, got)
		}
	}
}

// TestCTERefinementAfterErrors: a candidate that ends on an error is also
// refined through its CTEs, with the error in the prompt.
func TestCTERefinementAfterErrors(t *testing.T) {
	t.Parallel()
	stuck := "WITH a AS (SELECT id FROM t), b AS (SELECT nope FROM a) SELECT * FROM b"
	m := agenttest.Texts(func(n int, last string) string {
		if strings.Contains(last, "intermediate results of each CTE") {
			return sqlReply("WITH a AS (SELECT id FROM t), b AS (SELECT id FROM a) SELECT * FROM b")
		}
		return sqlReply(stuck)
	})
	c, err := newAgent(t, Config{CTERefine: true}, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != StatusOK || !c.CTERefined || c.Rows != 3 {
		t.Fatalf("candidate %+v", c)
	}
	asked := m.Asked()
	last := asked[len(asked)-1]
	for _, w := range []string{"It failed with the error: ", "no such column: nope", "CTE 1 a: rows", "CTE 2 b: error: "} {
		if !strings.Contains(last, w) {
			t.Errorf("CTE prompt lacks %q:\n%s", w, last)
		}
	}
	// Without the option nothing of this runs.
	m2 := agenttest.Replies(sqlReply(stuck))
	c, err = newAgent(t, Config{}, m2).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex})
	if err != nil || c.Status != StatusError || c.CTERefined {
		t.Fatalf("without --cte-refine: %+v, %v", c, err)
	}
	for _, s := range m2.Asked() {
		if strings.Contains(s, "CTE") {
			t.Errorf("CTE prompt without the option: %s", s)
		}
	}
}

// TestCTERefinementAsksForARewrite: a failing query without CTEs is sent
// back to be rewritten as CTEs, whose steps are then inspected; a rewrite
// that already works is taken as it is.
func TestCTERefinementAsksForARewrite(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		rewrite       string
		inspected     bool
		rows, prompts int
	}{
		{"rewrite still empty", "WITH a AS (SELECT id FROM t), b AS (SELECT id FROM a WHERE id > 9) SELECT * FROM b", true, 2, 2},
		{"rewrite works", "WITH a AS (SELECT id FROM t) SELECT * FROM a", false, 3, 1},
	} {
		var cte []string
		m := agenttest.Texts(func(n int, last string) string {
			switch {
			case strings.Contains(last, "Rewrite the query as a chain of CTEs"):
				cte = append(cte, last)
				return sqlReply(tt.rewrite)
			case strings.Contains(last, "intermediate results of each CTE"):
				cte = append(cte, last)
				return sqlReply("WITH a AS (SELECT id FROM t), b AS (SELECT id FROM a WHERE id > 1) SELECT * FROM b")
			}
			return sqlReply("SELECT id FROM t WHERE id > 9")
		})
		c, err := newAgent(t, Config{CTERefine: true}, m).Candidate(context.Background(), agenttest.SQLite(t, tSQL), CandidateInput{Example: ex})
		if err != nil {
			t.Fatal(err)
		}
		if c.Status != StatusOK || !c.CTERefined || c.Rows != tt.rows || len(cte) != tt.prompts {
			t.Fatalf("%s: candidate %+v after %d CTE prompts", tt.name, c, len(cte))
		}
		if !strings.Contains(cte[0], "Input sql:\nSELECT id FROM t WHERE id > 9\nIt returned no rows.") {
			t.Errorf("%s: rewrite prompt:\n%s", tt.name, cte[0])
		}
		if tt.inspected && (!strings.Contains(cte[1], "Input sql:\n"+tt.rewrite) || !strings.Contains(cte[1], "CTE 1 a: rows") || !strings.Contains(cte[1], "CTE 2 b: no rows")) {
			t.Errorf("%s: inspection prompt:\n%s", tt.name, cte[1])
		}
	}
}
