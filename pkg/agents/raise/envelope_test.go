package raise

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/reply"
)

// TestCommandsInEnvelopes: a command is read in whatever envelope the
// serving stack or the model's template puts it (issue 52), a note after
// it costs nothing, and an answer after one is still the answer.
func TestCommandsInEnvelopes(t *testing.T) {
	t.Parallel()
	q := "SELECT COUNT(*) FROM orders WHERE status = 'done'"
	for _, tt := range []struct {
		name      string
		resp      llm.Response
		cmd, args string // cmd "" = no command
		query     string // for run_query: the query the command's Text names
	}{
		{"Hermes <tool_call> JSON", llm.Response{Text: "Let me count.\n<tool_call>\n{\"name\": \"run_query\", \"arguments\": {\"query\": \"" + q + "\"}}\n</tool_call>"}, CmdQuery, "", q},
		{"bare JSON call, arguments as a string", llm.Response{Text: `{"name": "read_table_columns", "arguments": "{\"table_name\": \"orders\"}"}`}, CmdColumns, `{"table_name":"orders"}`, ""},
		{"OpenAI function shape in a fence", llm.Response{Text: "```json\n{\"type\": \"function\", \"function\": {\"name\": \"functions.read_table_names\", \"arguments\": {}}}\n```"}, CmdTableNames, "{}", ""},
		{"<function=…><parameter=…>", llm.Response{Text: "<function=run_query>\n<parameter=sql>\n" + q + "\n</parameter>\n</function>"}, CmdQuery, "", q},
		{"[RUN] in a <tool_call> tag", llm.Response{Text: "<tool_call>[RUN] run_query(\"" + q + "\")</tool_call>"}, CmdQuery, "", q},
		{"[RUN] with a note after it", llm.Response{Text: "[RUN] read_table_names()\nI expect a handful of tables."}, CmdTableNames, "", ""},
		{"native tool call", llm.Response{ToolCalls: []llm.ToolCall{{ID: "1", Name: "run_query", Arguments: `{"sql": "` + q + `;\r\n"}`}}}, CmdQuery, "", q},
		{"only in reasoning_content", llm.Response{Reasoning: "I should look at the tables.\n[RUN] read_table_names()"}, CmdTableNames, "", ""},
		{"a command then the answer: the answer", llm.Response{Text: "[RUN] read_table_names()\nActually I know enough:\n```sql\n" + q + "\n```"}, "", "", ""},
		{"a tool named in prose", llm.Response{Text: "The read_table_names() command lists the tables.\nI wonder which one holds the orders."}, "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rd := readResponse(&tt.resp)
			if tt.cmd == "" {
				if rd.HasCmd {
					t.Errorf("read command %+v; want none", rd.Cmd)
				}
				return
			}
			if !rd.HasCmd || rd.Cmd.Name != tt.cmd || tt.args != "" && rd.Cmd.Args != tt.args {
				t.Fatalf("read %+v (command %v); want %s(%s)", rd.Cmd, rd.HasCmd, tt.cmd, tt.args)
			}
			if tt.query != "" {
				got := reply.Statements(unquote(argument(rd.Cmd.Args, "sql", "query")))
				if len(got) != 1 || reply.Key(got[0]) != reply.Key(tt.query) {
					t.Errorf("run_query's query %q (from %q); want %q", got, rd.Cmd.Args, tt.query)
				}
			}
		})
	}
}

// TestCommandsListedInOneForm: whatever envelope a command comes in (the
// forms the envelopes persona draws: [RUN], a Hermes <tool_call>, a bare
// JSON call with "arguments" or "parameters", the arguments as a JSON
// string, renamed parameters, a <function=…> block whose parameters are
// text, a fence with a note after), it runs with the canonical form's
// output and the final prompt lists it in the canonical form (D-R19), so
// the final models read one operations log whatever model explored.
func TestCommandsListedInOneForm(t *testing.T) {
	t.Parallel()
	tl := tools(t, agenttest.SQLite(t, tSQL))
	q := "SELECT COUNT(*) AS n FROM t WHERE name <> 'x'"
	type cmd struct {
		canonical      string
		name           string
		params, rename map[string]any
	}
	cmds := []cmd{
		{"read_table_names()", CmdTableNames, map[string]any{}, map[string]any{}},
		{`read_table_columns("t")`, CmdColumns, map[string]any{"table_name": "t"}, map[string]any{"table": "t"}},
		{`read_columns_documentation(["t.id", "t.name"])`, CmdDocs, map[string]any{"columns": []any{"t.id", "t.name"}},
			map[string]any{"column_names": []any{"t.id", "t.name"}}},
		{`run_query("` + strings.ReplaceAll(q, `"`, `\"`) + `")`, CmdQuery, map[string]any{"query": q}, map[string]any{"sql": q}},
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	forms := map[string]func(c cmd) string{
		"[RUN]": func(c cmd) string { return "[RUN] " + c.canonical },
		"<tool_call> JSON": func(c cmd) string {
			return "<tool_call>\n" + js(map[string]any{"name": c.name, "arguments": c.params}) + "\n</tool_call>"
		},
		"bare, parameters":    func(c cmd) string { return js(map[string]any{"name": c.name, "parameters": c.params}) },
		"arguments as string": func(c cmd) string { return js(map[string]any{"name": c.name, "arguments": js(c.params)}) },
		"renamed parameters":  func(c cmd) string { return js(map[string]any{"name": c.name, "arguments": c.rename}) },
		"<function=…> text": func(c cmd) string {
			var b strings.Builder
			b.WriteString("<function=" + c.name + ">")
			for k, v := range c.params {
				s, ok := v.(string)
				if !ok {
					s = js(v)
				}
				b.WriteString("\n<parameter=" + k + ">\n" + s + "\n</parameter>")
			}
			return b.String() + "\n</function>"
		},
		"fence and a note": func(c cmd) string {
			return "```json\n" + js(map[string]any{"name": c.name, "arguments": c.params}) + "\n```\nLet me see what this returns."
		},
	}
	for _, c := range cmds {
		want, err := tl.Run(context.Background(), c.name, strings.TrimSuffix(strings.TrimPrefix(c.canonical, c.name+"("), ")"))
		if err != nil {
			t.Fatal(err)
		}
		for fname, form := range forms {
			seg := "I should look.\n" + form(c)
			rd := readResponse(&llm.Response{Text: seg})
			if !rd.HasCmd {
				t.Errorf("%s as %s: no command read from %q", c.name, fname, seg)
				continue
			}
			if got := rd.Cmd.Text(); got != c.canonical {
				t.Errorf("%s as %s is listed as %s; want %s", c.name, fname, got, c.canonical)
			}
			if out, err := tl.Run(context.Background(), rd.Cmd.Name, rd.Cmd.Args); err != nil || out != want {
				t.Errorf("%s as %s ran with output %q (%v); the canonical form's is %q", c.name, fname, out, err, want)
			}
		}
	}
}
