package reply

import (
	"errors"
	"strings"
	"testing"
)

// Replies as real model families write them; each row names the style.
func TestSQL(t *testing.T) {
	const q = "SELECT name, COUNT(*) AS n\nFROM orders\nGROUP BY name"
	cases := []struct {
		name, text, finish string
		want               string
		reask              string // "" = readable
	}{
		{"canonical", "Here is the query.\n```sql\n" + q + "\n```", "stop", q, ""},
		{"upper-case fence (GPT-4o)", "```SQL\n" + q + "\n```", "stop", q, ""},
		{"dialect fence sqlite (Qwen-coder)", "```sqlite\n" + q + "\n```", "stop", q, ""},
		{"dialect fence bigquery", "```bigquery\n" + q + "\n```", "stop", q, ""},
		{"dialect fence googlesql", "```googlesql\n" + q + "\n```\n", "stop", q, ""},
		{"dialect fence snowflake", "Sure!\n\n```snowflake\n" + q + ";\n```\nDone.", "stop", q, ""},
		{"postgresql fence", "```postgresql\n" + q + "\n```", "stop", q, ""},
		{"bare fence", "The query:\n```\n" + q + "\n```", "stop", q, ""},
		{"tilde fence", "~~~sql\n" + q + "\n~~~", "stop", q, ""},
		{"indented fence in a list", "1. Run this:\n   ```sql\n   SELECT 1\n   ```\n", "stop", "SELECT 1", ""},
		{"inline fence", "The answer is ```sql SELECT COUNT(*) FROM t``` which counts rows.", "stop", "SELECT COUNT(*) FROM t", ""},
		{"one-line fence without language", "```SELECT COUNT(*) FROM t```", "stop", "SELECT COUNT(*) FROM t", ""},
		{"closing fence on the code's line", "```sql\nSELECT 1```", "stop", "SELECT 1", ""},
		{"draft then final (Claude)", "First attempt:\n```sql\nSELECT name FROM orders\n```\nActually, we need the count:\n```sql\n" + q + "\n```\nThis groups by name.", "stop", q, ""},
		{"think block with a draft (R1 via vLLM)", "<think>\nMaybe ```sql\nSELECT 1\n``` no.\n</think>\n\n```sql\n" + q + "\n```", "stop", q, ""},
		{"think opened in the prompt (R1 template)", "Let me look at the tables... ```sql\nSELECT 2\n```\n</think>\n```sql\n" + q + "\n```", "stop", q, ""},
		{"plain SQL, no fence", "The query is:\n\n" + q + ";\n\nIt counts orders per name.", "stop", q, ""},
		{"plain SQL with a blank line inside", "SELECT a\nFROM t\n\nWHERE a > 1", "stop", "SELECT a\nFROM t\n\nWHERE a > 1", ""},
		{"plain SQL with a subquery on its own line", "SELECT * FROM (\nSELECT name FROM t\n) AS x LIMIT 5", "stop", "SELECT * FROM (\nSELECT name FROM t\n) AS x LIMIT 5", ""},
		{"plain draft then final", "First try:\nSELECT a FROM t;\n\nBetter:\nSELECT b FROM t;", "stop", "SELECT b FROM t", ""},
		{"plain WITH query", "WITH x AS (SELECT 1 AS a) SELECT a FROM x", "stop", "WITH x AS (SELECT 1 AS a) SELECT a FROM x", ""},
		{"json fence is not SQL", "```json\n{\"a\": 1}\n```\n```sql\nSELECT 1\n```", "stop", "SELECT 1", ""},
		{"a query in another language's string is read", "```python\nprint('SELECT 1')\n```", "stop", "SELECT 1", ""},
		{"cut inside the block", "Here:\n```sql\nSELECT name, COUNT(*) AS n\nFROM ord", "length", "", ReaskCut},
		{"cut after a draft", "```sql\nSELECT 1\n```\nBetter:\n```sql\nSELECT name FR", "length", "", ReaskCut},
		{"cut after the final block", "```sql\n" + q + "\n```\nThis query groups the ord", "length", q, ""},
		{"cut while thinking", "<think>\nThe user wants the count per", "length", "", ReaskCut},
		{"prose only", "I cannot answer without more information about the schema.", "stop", "", ReaskNoSQL},
		{"empty", "  \n", "stop", "", ReaskEmpty},
		{"only thinking", "<think>\nhmm\n</think>", "stop", "", ReaskEmpty},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := SQL(c.text, c.finish)
			var u *Unreadable
			switch {
			case c.reask == "" && err != nil:
				t.Fatalf("SQL(%q) failed: %v; want %q", c.text, err, c.want)
			case c.reask != "" && !errors.As(err, &u):
				t.Fatalf("SQL(%q) = %q, %v; want an *Unreadable with re-ask %q", c.text, got, err, c.reask)
			case c.reask != "" && u.Reask != c.reask:
				t.Fatalf("SQL(%q) re-asks %q; want %q", c.text, u.Reask, c.reask)
			case got != c.want:
				t.Fatalf("SQL(%q) = %q; want %q", c.text, got, c.want)
			}
		})
	}
}

func TestSQLBlocks(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"several queries, several spellings", "```sql\nSELECT 1\n```\n```SQL\nSELECT 2\n```\n```sqlite\nSELECT 3\n```", []string{"SELECT 1", "SELECT 2", "SELECT 3"}},
		{"sqlite is not sql+ite", "```sqlite\nSELECT 1\n```", []string{"SELECT 1"}},
		{"one block of many statements", "```sql\nSELECT 1;\nSELECT 2;\n```", []string{"SELECT 1", "SELECT 2"}},
		{"unclosed last block read (no finish reason says it was cut)", "```sql\nSELECT 1\n```\n```sql\nSELECT 2", []string{"SELECT 1", "SELECT 2"}},
		{"bare fence with prose is not SQL", "```\nThe table has 3 columns\n```", nil},
		{"think drafts left out", "<think>```sql\nSELECT 0\n```</think>```sql\nSELECT 1\n```", []string{"SELECT 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SQLBlocks(c.text)
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Fatalf("SQLBlocks(%q) = %q; want %q", c.text, got, c.want)
			}
		})
	}
}

func TestVisible(t *testing.T) {
	cases := []struct{ in, want string }{
		{"<think>a</think>b", "b"},
		{"a</think>b", "b"},
		{"x<think>a</think>y<think>b</think>z", "xyz"},
		{"<THINK>a</THINK>b", "b"},
		{"<thinking>a</thinking>b", "b"},
		{"no reasoning", "no reasoning"},
		{"answer <think>cut", "answer"},
	}
	for _, c := range cases {
		if got := Visible(c.in); got != c.want {
			t.Errorf("Visible(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

// Verdicts as models write them: the boolean must be read right or be an
// error, never a silent "true".
func TestJSONVerdicts(t *testing.T) {
	cases := []struct {
		name, text string
		want       bool
		bad        bool // unreadable: an error, not a verdict
	}{
		{"canonical", "```json\n{\"correct\": false, \"explanation\": \"x\"}\n```", false, false},
		{"string false", `{"correct": "false", "explanation": "x"}`, false, false},
		{"string False", `{"correct": "False"}`, false, false},
		{"string true", `{"correct": "true"}`, true, false},
		{"Python False", "{'correct': False, 'explanation': 'the join is wrong'}", false, false},
		{"Python True with None", "{\"correct\": True, \"back_translated_query\": None}", true, false},
		{"trailing comma", "{\"correct\": false, \"explanation\": \"x\",}", false, false},
		{"JSON in prose", "After checking, my verdict is {\"correct\": false, \"explanation\": \"wrong year\"}. Hope it helps.", false, false},
		{"fenced JSON after a think block", "<think>{\"correct\": true}</think>\n```json\n{\"correct\": false}\n```", false, false},
		{"unquoted keys", "{correct: false, explanation: \"x\"}", false, false},
		{"comment inside", "{\n  \"correct\": false, // the filter is wrong\n  \"explanation\": \"x\"\n}", false, false},
		{"number 0", `{"correct": 0}`, false, false},
		{"not a boolean", `{"correct": "maybe"}`, false, true},
		{"no JSON", "The query looks right to me.", false, true},
		{"broken JSON", `{"correct": fal`, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := JSON(c.text)
			var got, present bool
			if err == nil {
				got, present, err = f.Bool("correct")
				if err == nil && !present {
					err = errors.New("no correct field")
				}
			}
			switch {
			case c.bad && err == nil:
				t.Fatalf("JSON(%q) read correct=%v; want an error", c.text, got)
			case !c.bad && err != nil:
				t.Fatalf("JSON(%q) failed: %v; want correct=%v", c.text, err, c.want)
			case !c.bad && got != c.want:
				t.Fatalf("JSON(%q) read correct=%v; want %v", c.text, got, c.want)
			}
		})
	}
}

// Tool arguments as serving stacks deliver them.
func TestArgs(t *testing.T) {
	cases := []struct {
		name, raw   string
		wantSQL     []string
		wantExplore []bool
	}{
		{"schema", `{"queries": [{"description": "d", "sql_query": "SELECT 1", "exploration": false}]}`, []string{"SELECT 1"}, []bool{false}},
		{"string booleans", `{"queries": [{"description": "d", "sql_query": "SELECT 1", "exploration": "False"}, {"sql_query": "SELECT 2", "exploration": "true"}]}`, []string{"SELECT 1", "SELECT 2"}, []bool{false, true}},
		{"sql for sql_query and an extra key", `{"queries": [{"sql": "SELECT 1", "exploration": false, "confidence": 0.9}]}`, []string{"SELECT 1"}, []bool{false}},
		{"double-encoded", `"{\"queries\": [{\"sql_query\": \"SELECT 1\"}]}"`, []string{"SELECT 1"}, []bool{false}},
		{"one object for a list", `{"queries": {"sql_query": "SELECT 1", "exploration": 0}}`, []string{"SELECT 1"}, []bool{false}},
		{"list as a JSON string", `{"queries": "[{\"sql_query\": \"SELECT 1\"}]"}`, []string{"SELECT 1"}, []bool{false}},
		{"trailing comma", `{"queries": [{"sql_query": "SELECT 1",},],}`, []string{"SELECT 1"}, []bool{false}},
		{"fenced", "```json\n{\"queries\": [{\"sql_query\": \"SELECT 1\"}]}\n```", []string{"SELECT 1"}, []bool{false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := Args(c.raw)
			if err != nil {
				t.Fatalf("Args(%s): %v", c.raw, err)
			}
			qs, ok := f.List("queries")
			if !ok || len(qs) != len(c.wantSQL) {
				t.Fatalf("Args(%s) queries = %v; want %d", c.raw, qs, len(c.wantSQL))
			}
			for i, q := range qs {
				sql, _ := q.String("sql_query", "sql", "query")
				ex, _, err := q.Bool("exploration")
				if err != nil || sql != c.wantSQL[i] || ex != c.wantExplore[i] {
					t.Fatalf("query %d of %s = %q exploration %v (%v); want %q %v", i, c.raw, sql, ex, err, c.wantSQL[i], c.wantExplore[i])
				}
			}
		})
	}
}
