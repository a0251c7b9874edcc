package raise

import (
	"context"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// TestReadSegment: commands as real models write them are read, with the
// segment cut where a server honouring the stop would have cut it; a tool
// asked for in a form that cannot be run is a mention; text that only
// talks about tools is neither.
func TestReadSegment(t *testing.T) {
	t.Parallel()
	type want struct {
		name, args string // "" = no command
		mention    bool
		tool       string
		cut        bool
	}
	cases := []struct {
		style, seg string
		want       want
	}{
		{"llmsim canonical (stop cut leaves a space)", "Okay. Let me list the tables first.\n[RUN] read_table_names() ", want{name: CmdTableNames}},
		{"trailing semicolon (GPT-4o)", "I need the columns of orders.\n[RUN] read_table_columns(\"orders\");", want{name: CmdColumns, args: `"orders"`}},
		{"trailing period", "Let me check [RUN] read_table_columns('orders').", want{name: CmdColumns, args: `'orders'`}},
		{"backticks around the command (Claude)", "Let me look at the schema.\n`[RUN] read_table_columns(\"orders\")`", want{name: CmdColumns, args: `"orders"`}},
		{"backticks around the name", "[RUN] `read_table_names()`", want{name: CmdTableNames}},
		{"command in a fence", "```\n[RUN] run_query(\"SELECT 1\")\n```\n", want{name: CmdQuery, args: `"SELECT 1"`}},
		{"quotes around the command", "\"[RUN] read_table_names()\".", want{name: CmdTableNames}},
		{"bold markdown", "**[RUN] read_table_names()**", want{name: CmdTableNames}},
		{"no parentheses on the zero-argument tool", "First the tables.\n[RUN] read_table_names", want{name: CmdTableNames}},
		{"no parentheses, then a period", "[RUN] read_table_names.", want{name: CmdTableNames}},
		{"fenced SQL inside run_query (Qwen-coder)", "[RUN] run_query(\n```sql\nSELECT status, COUNT(*) FROM orders GROUP BY status\n```\n)",
			want{name: CmdQuery, args: "```sql\nSELECT status, COUNT(*) FROM orders GROUP BY status\n```"}},
		{"fenced SQL, closing parenthesis forgotten", "[RUN] run_query(\n```sqlite\nSELECT 1\n```", want{name: CmdQuery, args: "```sqlite\nSELECT 1\n```"}},
		{"triple double quotes (o3)", "[RUN] run_query(\"\"\"\nSELECT name, COUNT(*)\nFROM t\nGROUP BY name\n\"\"\")",
			want{name: CmdQuery, args: "\"\"\"\nSELECT name, COUNT(*)\nFROM t\nGROUP BY name\n\"\"\""}},
		{"triple single quotes holding a parenthesis", "[RUN] run_query('''SELECT ')' AS p''')", want{name: CmdQuery, args: "'''SELECT ')' AS p'''"}},
		{"keyword argument", "[RUN] run_query(sql=\"SELECT MAX(id) FROM t\")", want{name: CmdQuery, args: `sql="SELECT MAX(id) FROM t"`}},
		{"JSON arguments", `[RUN] read_table_columns({"table_name": "orders"})`, want{name: CmdColumns, args: `{"table_name": "orders"}`}},
		{"the PDF's spaced name", "[RUN] run query(\"SELECT 1\")", want{name: CmdQuery, args: `"SELECT 1"`}},
		{"stop not honoured: the model invents the result", "[RUN] read_table_names() [EXECUTE]\n[RESULT]\norders\n[/RESULT]\nSo orders it is.",
			want{name: CmdTableNames, cut: true}},
		{"a result invented without [EXECUTE]", "[RUN] read_table_columns(orders)\n[RESULT]\nid INTEGER", want{name: CmdColumns, args: "orders", cut: true}},
		{"known tool without [RUN]", "Let me query it:\nrun_query(\"SELECT 1\")", want{name: CmdQuery, args: `"SELECT 1"`}},
		{"inside R1's think section", "<think>\nI should see the tables before anything else.\n[RUN] read_table_names()", want{name: CmdTableNames}},
		{"unknown command (answered with an error)", "[RUN] list_tables()", want{name: "list_tables"}},
		// Not commands.
		{"the paper's nudge (injected text)", Nudge, want{mention: true, tool: CmdQuery, cut: true}},
		{"a command in prose, then the answer", "I could use [RUN] read_table_names() but the question names the table.\n```sql\nSELECT COUNT(*) FROM t\n```", want{}},
		{"an answer that mentions a tool last", "```sql\nSELECT 1\n```\nI checked the values with run_query before.", want{}},
		{"a tool named mid-segment, prose after", "The read_table_names() command lists the tables.\nI wonder which one holds the orders.", want{}},
		{"plain final answer", "The answer is:\n```SQL\nSELECT 1\n```", want{}},
		// Mentions: asked for, not runnable.
		{"argument without parentheses", "[RUN] read_table_columns orders", want{mention: true, tool: CmdColumns}},
		{"tool named at the end", "Now let me look at its columns with read_table_columns.", want{mention: true, tool: CmdColumns}},
		{"parenthesis never closed", "[RUN] run_query(SELECT name FROM t WHERE", want{mention: true, tool: CmdQuery}},
		{"[EXECUTE] with no command", "I will now run it. [EXECUTE]", want{mention: true, cut: true}},
		{"placeholder arguments", "[RUN] run_query(...) [EXECUTE]", want{mention: true, tool: CmdQuery, cut: true}},
	}
	for _, c := range cases {
		t.Run(c.style, func(t *testing.T) {
			s := ReadSegment(c.seg)
			got := want{name: s.Cmd.Name, args: s.Cmd.Args, mention: s.Mention, tool: s.Tool, cut: s.Cut}
			if s.HasCmd != (c.want.name != "") || got != c.want {
				t.Fatalf("ReadSegment(%q) = %+v (command %v); want %+v", c.seg, got, s.HasCmd, c.want)
			}
			if s.Cut && strings.Contains(s.Text, TagExecute) {
				t.Fatalf("ReadSegment(%q).Text = %q still holds %s", c.seg, s.Text, TagExecute)
			}
		})
	}
}

// TestToolArguments: the argument forms the parser lets through reach the
// tools as the values they hold.
func TestToolArguments(t *testing.T) {
	t.Parallel()
	tl := tools(t, agenttest.SQLite(t, tSQL))
	for _, tt := range []struct{ seg, want string }{
		{"[RUN] run_query(\n```sql\nSELECT name FROM t WHERE id = 2\n```\n)", "name\nb"},
		{"[RUN] run_query(\"\"\"\nSELECT name\nFROM t\nWHERE id = 3\n\"\"\")", "name\nc"},
		{"[RUN] run_query(query='SELECT COUNT(*) AS n FROM t');", "n\n3"},
		{`[RUN] read_table_columns({"table_name": "t"})`, "id INTEGER\nname TEXT"},
		{`[RUN] read_columns_documentation({"column_names": ["t.id"]})`, "t.id: the row's identifier"},
		{"`[RUN] read_table_names`", "t\nevents_20200101"},
	} {
		s := ReadSegment(tt.seg)
		if !s.HasCmd {
			t.Fatalf("%q: no command read", tt.seg)
		}
		out, err := tl.Run(context.Background(), s.Cmd.Name, s.Cmd.Args)
		if err != nil || !strings.HasPrefix(out, tt.want) {
			t.Errorf("%q ran %s(%s): %q (%v); want a prefix %q", tt.seg, s.Cmd.Name, s.Cmd.Args, out, err, tt.want)
		}
	}
	// The final prompt lists every query in one double-quoted string, as
	// the canonical form writes it, whatever form the agent model used.
	for _, seg := range []string{"[RUN] run_query(```sql\nSELECT \"a\"\nFROM t\n```)", "[RUN] run_query(\"\"\"SELECT \"a\"\nFROM t\"\"\")",
		"[RUN] run_query(sql=\"SELECT \\\"a\\\"\\nFROM t\")", "[RUN] run_query(\"SELECT \\\"a\\\"\\nFROM t\");"} {
		if got, want := ReadSegment(seg).Cmd.Text(), `run_query("SELECT \"a\"\nFROM t")`; got != want {
			t.Errorf("%q is listed as %q; want %q", seg, got, want)
		}
	}
}

// TestTrajectoryKeepsExploring: a backticked, semicolon-terminated command
// runs and the trajectory goes on; an unparsable tool mention gets the
// corrective nudge (counted) instead of ending it; a command whose
// [EXECUTE] the server did not stop at runs, and the result the model
// invented after it never enters the transcript; the answer in ```SQL is
// read.
func TestTrajectoryKeepsExploring(t *testing.T) {
	t.Parallel()
	wh := agenttest.SQLite(t, tSQL)
	replies := []string{
		"I'll list the tables first.\n`[RUN] read_table_names()`;",
		"Now the columns.\n[RUN] read_table_columns t",
		"[RUN] run_query(sql=\"\"\"SELECT COUNT(*) AS n FROM t\"\"\") [EXECUTE]\n[RESULT]\nn\n99\n[/RESULT]\nSo there are 99 rows.",
		"Done.\n```SQL\nSELECT COUNT(*) FROM t\n```",
	}
	m := script(func(_ llm.Request, n int) *llm.Response { return &llm.Response{Text: replies[min(n, len(replies)-1)]} })
	s := &Steps{cfg: DefaultConfig(), llm: m}
	c := &cost.Cost{}
	tr, err := s.Run(context.Background(), tools(t, wh), warehouse.SQLite, "How many rows?", "", seeds, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Ops) != 2 || tr.Ops[0].Command != "read_table_names()" || tr.Ops[1].Output != "n\n3" || tr.Corrections != 1 ||
		tr.End != EndAnswer || tr.Answer != "SELECT COUNT(*) FROM t" || c.FormatReasks != 1 || c.FormatEnded != 0 {
		t.Fatalf("trajectory %+v, cost %+v; want 2 commands (the second's output n/3), 1 correction, the ```SQL answer", tr, c)
	}
	afterMention := m.Request(2).Messages[1].Content
	if want := "[RUN] read_table_columns t\n" + Correction(CmdColumns, false) + "\n"; !strings.HasSuffix(afterMention, want) {
		t.Errorf("the request after the mention ends %q; want the corrective nudge %q", afterMention[max(0, len(afterMention)-250):], want)
	}
	last := m.Request(3).Messages[1].Content
	if !strings.HasSuffix(last, `"""SELECT COUNT(*) AS n FROM t""") `+TagExecute+"\n"+TagResult+"\nn\n3\n"+TagEnd+"\n") || strings.Contains(last, "99") {
		t.Errorf("the transcript after the unstopped command: %q; want the real result and none of the invented one", last[max(0, len(last)-300):])
	}

	// Unparsable mentions in a row: maxCorrections nudges, then the end.
	m = script(func(llm.Request, int) *llm.Response { return &llm.Response{Text: "[RUN] read_table_columns: t"} })
	s = &Steps{cfg: DefaultConfig(), llm: m}
	c = &cost.Cost{}
	tr, err = s.Run(context.Background(), tools(t, wh), warehouse.SQLite, "Q?", "", seeds, c)
	if err != nil || tr.End != EndFormat || tr.Corrections != maxCorrections || tr.Calls != maxCorrections+1 || c.FormatReasks != maxCorrections || c.FormatEnded != 1 {
		t.Errorf("mentions only: %+v, cost %+v (%v); want %d corrections then the end %s, counted", tr, c, err, maxCorrections, EndFormat)
	}

	// R1 with the <think> prefill: commands while thinking are commands.
	r1 := []string{"Let me see which tables exist.\n[RUN] read_table_names()", "Only t matters.\n</think>\n\n```sql\nSELECT COUNT(*) FROM t\n```"}
	m = script(func(_ llm.Request, n int) *llm.Response { return &llm.Response{Text: r1[min(n, 1)]} })
	cfg := DefaultConfig()
	cfg.ThinkTag = true
	s = &Steps{cfg: cfg, llm: m}
	tr, err = s.Run(context.Background(), tools(t, wh), warehouse.SQLite, "Q?", "", seeds, &cost.Cost{})
	if err != nil || len(tr.Ops) != 1 || tr.Answer != "SELECT COUNT(*) FROM t" || !strings.HasPrefix(m.Request(0).Messages[1].Content, "<think>\n"+PhraseStart) {
		t.Errorf("think-tag trajectory %+v (%v); want the command run inside <think> and the answer after it", tr, err)
	}
}

// TestFinalReadsRealReplies: the final SQL in the forms models write it is
// executed as written; an unreadable reply is re-asked with reply's
// sentence outside the refinement retries, and after maxReasks the
// candidate is lost, counted, and nothing is executed.
func TestFinalReadsRealReplies(t *testing.T) {
	t.Parallel()
	wh := agenttest.SQLite(t, tSQL)
	const good = "SELECT COUNT(*) AS n FROM t"
	type r struct{ text, finish string }
	cases := []struct {
		style           string
		replies         []r
		status, sql     string
		calls, attempts int
		reasks, lost    int
		lastReask       string // the last request's last message, when re-asked
	}{
		{"```SQL (GPT-4o)", []r{{"```SQL\n" + good + "\n```", ""}}, "ok", good, 1, 1, 0, 0, ""},
		{"```sqlite (Qwen-coder)", []r{{"```sqlite\n" + good + ";\n```", ""}}, "ok", good, 1, 1, 0, 0, ""},
		{"bare fence", []r{{"```\n" + good + "\n```", ""}}, "ok", good, 1, 1, 0, 0, ""},
		{"plain SQL (o3)", []r{{"The query is:\n\n" + good + ";\n\nIt counts the rows.", ""}}, "ok", good, 1, 1, 0, 0, ""},
		{"draft then final (Claude)", []r{{"First:\n```sql\nSELECT nope FROM t\n```\nBetter:\n```sql\n" + good + "\n```", ""}}, "ok", good, 1, 1, 0, 0, ""},
		{"<think> with a draft (DeepSeek-R1)", []r{{"<think>\n```sql\nSELECT nope FROM t\n```\n</think>\n```sql\n" + good + "\n```", ""}}, "ok", good, 1, 1, 0, 0, ""},
		{"cut reply re-asked", []r{{"```sql\nSELECT COUNT(*) AS n FR", reply.FinishLength}, {"```sql\n" + good + "\n```", ""}}, "ok", good, 2, 1, 1, 0, reply.ReaskCut},
		{"cut while thinking re-asked", []r{{"<think>\nThe user wants", reply.FinishLength}, {"```sql\n" + good + "\n```", ""}}, "ok", good, 2, 1, 1, 0, reply.ReaskCut},
		{"prose only, lost", []r{{"I need more information about the schema.", ""}}, "gave_up", "", 1 + maxReasks, 1, maxReasks, 1, reply.ReaskNoSQL},
		{"an error, then prose, then the query: the re-ask is no retry", []r{{"```sql\nSELECT nope FROM t\n```", ""}, {"Sorry, here it is.", ""}, {"```sql\n" + good + "\n```", ""}},
			"ok", good, 3, 2, 1, 0, reply.ReaskNoSQL},
	}
	for _, c := range cases {
		t.Run(c.style, func(t *testing.T) {
			t.Parallel()
			m := script(func(_ llm.Request, n int) *llm.Response {
				x := c.replies[min(n, len(c.replies)-1)]
				return &llm.Response{Text: x.text, FinishReason: x.finish}
			})
			s := &Steps{cfg: DefaultConfig(), llm: m}
			first, refine := &cost.Cost{}, &cost.Cost{}
			cand, err := s.Final(context.Background(), wh, RoleFinalA, warehouse.SQLite, "How many rows?", "", nil, seeds, first, refine)
			if err != nil {
				t.Fatal(err)
			}
			var sum cost.Cost
			sum.Add(*first)
			sum.Add(*refine)
			if cand.Status != c.status || cand.SQL != c.sql || cand.Attempts != c.attempts || sum.LLMCalls != c.calls || sum.FormatReasks != c.reasks || sum.FormatLost != c.lost {
				t.Fatalf("candidate %+v, %d calls, %d re-asks, %d lost; want %s %q after %d attempts, %d calls, %d re-asks, %d lost",
					cand, sum.LLMCalls, sum.FormatReasks, sum.FormatLost, c.status, c.sql, c.attempts, c.calls, c.reasks, c.lost)
			}
			if c.status == "gave_up" && sum.Queries != 0 {
				t.Errorf("an unreadable reply was executed: %d warehouse queries", sum.Queries)
			}
			if c.lastReask != "" {
				reqs := m.Requests()
				msgs := reqs[len(reqs)-1].Messages
				if got := msgs[len(msgs)-1].Content; !strings.HasSuffix(got, c.lastReask) {
					t.Errorf("the re-ask ends %q; want %q", got, c.lastReask)
				}
			}
		})
	}
	// Every shape of the kit's: a readable one is executed at once; an
	// unreadable one is re-asked with reply's sentence, then the query the
	// next reply holds runs.
	for _, shape := range append(agenttest.Shapes(good), agenttest.Unreadable(good)...) {
		t.Run("kit: "+shape.Name, func(t *testing.T) {
			t.Parallel()
			m := script(func(_ llm.Request, n int) *llm.Response {
				if n == 0 {
					return shape.Reply
				}
				return agenttest.Text(agenttest.Fence("sql", good))
			})
			s := &Steps{cfg: DefaultConfig(), llm: m}
			first, refine := &cost.Cost{}, &cost.Cost{}
			cand, err := s.Final(context.Background(), wh, RoleFinalA, warehouse.SQLite, "How many rows?", "", nil, seeds, first, refine)
			if err != nil {
				t.Fatal(err)
			}
			calls, reasks := 1, 0
			if shape.Reask != "" {
				calls, reasks = 2, 1
				if got := agenttest.LastMessage(m.Request(1)).Content; !strings.HasSuffix(got, shape.Reask) {
					t.Errorf("the re-ask ends %q; want %q", got, shape.Reask)
				}
			}
			if cand.Status != "ok" || cand.SQL != good || m.Calls() != calls || first.FormatReasks+refine.FormatReasks != reasks {
				t.Errorf("candidate %+v after %d calls, %d re-asks; want %q after %d calls, %d re-asks", cand, m.Calls(), first.FormatReasks+refine.FormatReasks, good, calls, reasks)
			}
		})
	}
}

// TestColumnContract: the column post-process may reorder, drop, qualify
// and re-alias the selected columns and nothing else (D-R9).
func TestColumnContract(t *testing.T) {
	t.Parallel()
	const orig = "SELECT c.country, AVG(o.total) AS avg_total, COUNT(*) AS n FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'done' GROUP BY c.country ORDER BY n DESC LIMIT 5"
	cases := []struct {
		name, orig, rewrite string
		ok                  bool
		why                 string // part of the rejection
	}{
		{"reorder columns", orig, "SELECT COUNT(*) AS n, c.country, AVG(o.total) AS avg_total FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'done' GROUP BY c.country ORDER BY n DESC LIMIT 5", true, ""},
		{"drop a column", orig, "SELECT c.country, AVG(o.total) AS avg_total FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'done' GROUP BY c.country ORDER BY COUNT(*) DESC LIMIT 5", true, ""},
		{"qualified column", "SELECT name FROM t WHERE id > 1", "SELECT t.name FROM t WHERE t.id > 1", true, ""},
		{"table alias dropped", orig, "select customers.country, avg(orders.total) as avg_total, count(*) as n\nfrom customers join orders on orders.customer_id = customers.id\nwhere orders.status = 'done' group by customers.country order by n desc limit 5", true, ""},
		{"alias renamed, ORDER BY follows", orig, "SELECT c.country, AVG(o.total) AS avg_total, COUNT(*) AS customers_count FROM customers c JOIN orders o ON o.customer_id = c.id WHERE o.status = 'done' GROUP BY c.country ORDER BY customers_count DESC LIMIT 5", true, ""},
		{"alias dropped", "SELECT COUNT(*) AS n FROM t", "SELECT COUNT(*) FROM t", true, ""},
		{"positions follow the reorder", "SELECT id, name FROM t ORDER BY 2", "SELECT name, id FROM t ORDER BY 1", true, ""},
		{"CTE, outer list trimmed", "WITH daily AS (SELECT order_date, SUM(total) AS amount FROM orders GROUP BY order_date)\nSELECT order_date, amount, amount * 2 AS twice FROM daily ORDER BY order_date",
			"WITH daily AS (SELECT order_date, SUM(total) AS amount FROM orders GROUP BY order_date)\nSELECT order_date, amount FROM daily ORDER BY order_date;", true, ""},
		{"AVG to SUM", orig, strings.Replace(orig, "AVG(o.total)", "SUM(o.total)", 1), false, `selects "sum ( total )"`},
		{"a new column from the table", "SELECT name FROM t", "SELECT id, name FROM t", false, `selects "id"`},
		{"SELECT * narrowed", "SELECT * FROM t", "SELECT name FROM t", false, `selects "name"`},
		{"changed WHERE", orig, strings.Replace(orig, "'done'", "'shipped'", 1), false, "outside its select list"},
		{"added DISTINCT", "SELECT name, id FROM t", "SELECT DISTINCT name FROM t", false, "outside its select list"},
		{"changed LIMIT", orig, strings.Replace(orig, "LIMIT 5", "LIMIT 10", 1), false, "outside its select list"},
		{"reorder under ORDER BY 2", "SELECT id, name FROM t ORDER BY 2", "SELECT name, id FROM t ORDER BY 2", false, "outside its select list"},
		{"self-join side swapped", "SELECT a.name FROM people a JOIN people b ON b.id = a.parent_id", "SELECT b.name FROM people a JOIN people b ON b.id = a.parent_id", false, `selects "name"`},
		{"other table's same-named column", "SELECT c.name, COUNT(*) FROM customers c JOIN products p ON p.id = c.pid GROUP BY c.name",
			"SELECT p.name, COUNT(*) FROM customers c JOIN products p ON p.id = c.pid GROUP BY c.name", false, `selects "name"`},
		{"ORDER BY added", "SELECT id FROM t", "SELECT id FROM t ORDER BY id", false, "adds \"order by id\" outside"},
		{"CTE body changed", "WITH x AS (SELECT id FROM t) SELECT id FROM x", "WITH x AS (SELECT name FROM t) SELECT id FROM x", false, "outside its select list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckColumns(c.orig, c.rewrite, warehouse.SQLite)
			switch {
			case c.ok && err != nil:
				t.Fatalf("CheckColumns(%q, %q) rejected: %v; want accepted", c.orig, c.rewrite, err)
			case !c.ok && err == nil:
				t.Fatalf("CheckColumns(%q, %q) accepted; want rejected (%s)", c.orig, c.rewrite, c.why)
			case !c.ok && !strings.Contains(err.Error(), c.why):
				t.Fatalf("CheckColumns(%q, %q): %v; want a reason naming %q", c.orig, c.rewrite, err, c.why)
			}
		})
	}

	// Through the post-process: a re-alias in ```SQL is executed; AVG→SUM
	// is not, and says why.
	wh := agenttest.SQLite(t, tSQL)
	for _, tt := range []struct{ orig, reply, csv, why string }{
		{"SELECT id AS k, name FROM t WHERE id > 2", "```SQL\nSELECT name AS label FROM t WHERE id > 2\n```", "label\nc\n", ""},
		{"SELECT AVG(id) FROM t", "```sql\nSELECT SUM(id) FROM t\n```", "", `rejected: it selects "sum ( id )"`},
	} {
		m := script(func(llm.Request, int) *llm.Response { return &llm.Response{Text: tt.reply} })
		s := &Steps{cfg: DefaultConfig(), llm: m}
		cand, why, err := s.Columns(context.Background(), wh, warehouse.SQLite, "Q?", tt.orig, 1, &cost.Cost{})
		if err != nil || (tt.why == "") != (cand != nil) || (cand != nil && cand.CSV != tt.csv) || !strings.Contains(why, tt.why) {
			t.Errorf("post-process of %q with %q: %+v %q (%v); want CSV %q / reason %q", tt.orig, tt.reply, cand, why, err, tt.csv, tt.why)
		}
	}
}
