package raise

import (
	"testing"

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
