package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

var runSQL = llm.Tool{Name: "run_sql", Description: "Run one SQL query on the task's database and return its rows.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"sql":{"type":"string"}},"required":["sql"]}`)}

// TestToolCallRoundTrip: a request with tools gets a call with parsed name
// and arguments; the tool's result sent back gets a text answer.
func TestToolCallRoundTrip(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1"})
	ctx := context.Background()
	req := generate(ds.Examples[4].Question, 3)
	req.Tools = []llm.Tool{runSQL}
	resp, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.ToolCalls) != 1 || resp.Text != "" || resp.Endpoint != llm.DefaultEndpoint {
		t.Fatalf("response %+v, want one tool call", resp)
	}
	call := resp.ToolCalls[0]
	var args struct {
		SQL string `json:"sql"`
	}
	if call.Name != "run_sql" || !strings.HasPrefix(call.ID, "call_") || json.Unmarshal([]byte(call.Arguments), &args) != nil ||
		!strings.Contains(strings.ToUpper(args.SQL), "SELECT") {
		t.Fatalf("call %+v", call)
	}
	u := resp.Usage
	if u.Endpoint != llm.DefaultEndpoint || u.Model != "gpt-4o" || u.CompletionTokens == 0 {
		t.Errorf("usage %+v", u)
	}

	req.Messages = append(req.Messages, resp.Message(), llm.ToolResult(call.ID, "name,units\nwidget,3\n"))
	final, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if final.FinishReason != "stop" || len(final.ToolCalls) != 0 || len(llm.Blocks(final.Text, "sql")) != 1 {
		t.Errorf("answer after the tool result: %+v", final)
	}
	// The tool traffic counts in the prompt.
	if final.Usage.PromptTokens <= u.PromptTokens {
		t.Errorf("prompt tokens %d after the tool round, %d before", final.Usage.PromptTokens, u.PromptTokens)
	}
	if st := s.Stats(); st.ToolCalls[llmsim.KindGenerate] != 1 || st.ByKind[llmsim.KindGenerate] != 2 {
		t.Errorf("simulator stats %+v", st)
	}
}

func TestStopAndMaxTokensCutTheText(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := sim(t, llmsim.Config{Dataset: ds})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1"})
	ctx := context.Background()
	req := generate(ds.Examples[6].Question, 8)
	full, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	intro, _, ok := strings.Cut(full.Text, "```sql")
	if !ok {
		t.Fatalf("full answer %q has no SQL block", full.Text)
	}
	req.Stop = []string{"```sql"}
	stopped, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if stopped.Text != intro || stopped.FinishReason != "stop" {
		t.Errorf("with stop: %q (%s), want %q", stopped.Text, stopped.FinishReason, intro)
	}
	req.Stop, req.MaxTokens = nil, 4
	cut, err := c.Chat(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if cut.FinishReason != "length" || cut.Usage.CompletionTokens > 4 || cut.Text == "" || !strings.HasPrefix(full.Text, cut.Text) {
		t.Errorf("with max tokens 4: %q (%s, %d tokens)", cut.Text, cut.FinishReason, cut.Usage.CompletionTokens)
	}
}

// TestPerRequestKnobsOnTheWire records what the client sends.
func TestPerRequestKnobsOnTheWire(t *testing.T) {
	t.Parallel()
	rec, url := recordedSim(t)
	modelTemp := 1.0
	c := client(t, llm.Config{BaseURL: url + "/v1", Models: map[llm.Role]llm.ModelConfig{
		llm.RoleGenerate: {Name: "gpt-4o", Temperature: &modelTemp, MaxCompletionTokens: 500},
		llm.RoleVerify:   {Name: "o3"},
	}})
	ctx := context.Background()
	temp, topP := 0.25, 0.0
	ds := demo(t)
	req := generate(ds.Examples[1].Question, 2)
	req.Temperature, req.TopP, req.MaxTokens, req.Stop = &temp, &topP, 77, []string{"END"}
	req.Tools, req.ToolChoice = []llm.Tool{runSQL, {Name: "noop"}}, "run_sql"
	req.Messages = append(req.Messages,
		llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "call_7", Name: "run_sql", Arguments: `{"sql":"SELECT 1"}`}}},
		llm.ToolResult("call_7", "1"), llm.Message{Role: "user", Name: "analyst", Content: "again"})
	if _, err := c.Chat(ctx, req); err != nil {
		t.Fatal(err)
	}
	b := rec.body
	wire := func(v any) string { s, _ := json.Marshal(v); return string(s) }
	tp, _ := b["top_p"].(float64)
	checks := []struct {
		name string
		ok   bool
	}{
		{"temperature", b["temperature"] == 0.25},
		{"top_p 0 is sent (near zero), not omitted", tp > 0 && tp < 1e-30},
		{"max_completion_tokens", b["max_completion_tokens"] == 77.0},
		{"stop", wire(b["stop"]) == `["END"]`},
		{"tools", wire(b["tools"]) == `[{"function":{"description":"Run one SQL query on the task's database and return its rows.","name":"run_sql","parameters":{"properties":{"sql":{"type":"string"}},"required":["sql"],"type":"object"}},"type":"function"},{"function":{"name":"noop","parameters":{"properties":{},"type":"object"}},"type":"function"}]`},
		{"named tool choice", wire(b["tool_choice"]) == `{"function":{"name":"run_sql"},"type":"function"}`},
		{"assistant tool calls", wire(b["messages"].([]any)[1]) == `{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"sql\":\"SELECT 1\"}","name":"run_sql"},"id":"call_7","type":"function"}]}`},
		{"tool result", wire(b["messages"].([]any)[2]) == `{"content":"1","role":"tool","tool_call_id":"call_7"}`},
		{"name", wire(b["messages"].([]any)[3]) == `{"content":"again","name":"analyst","role":"user"}`},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("%s: request body %s", ck.name, wire(b))
		}
	}

	// Without per-request knobs the role's settings apply; reasoning models
	// get no sampling parameters.
	plain := generate(ds.Examples[1].Question, 2)
	if _, err := c.Chat(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if rec.body["temperature"] != 1.0 || rec.body["max_completion_tokens"] != 500.0 || rec.body["tools"] != nil || rec.body["stop"] != nil {
		t.Errorf("role settings: %s", wire(rec.body))
	}
	plain.Role, plain.Temperature, plain.TopP, plain.MaxTokens = llm.RoleVerify, &temp, &temp, 300
	if _, err := c.Chat(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if _, has := rec.body["temperature"]; has || rec.body["top_p"] != nil || rec.body["max_completion_tokens"] != 300.0 {
		t.Errorf("reasoning model: %s", wire(rec.body))
	}
}

// TestBadToolRequestsAreNotSent: what the API would refuse fails at once,
// as a CallError naming the problem, without a request.
func TestBadToolRequestsAreNotSent(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1"})
	tests := []struct {
		name  string
		tools []llm.Tool
		mode  string
		want  string
	}{
		{"unknown function", []llm.Tool{runSQL}, "drop_table", `"drop_table" names no tool`},
		{"required without tools", nil, llm.ToolChoiceRequired, "without tools"},
		{"nameless tool", []llm.Tool{{Description: "x"}}, "", "tool 1 has no name"},
		{"broken schema", []llm.Tool{{Name: "f", Parameters: json.RawMessage(`{"type":`)}}, "", "tool f: its parameters are not valid JSON"},
	}
	for _, tt := range tests {
		req := generate(ds.Examples[0].Question, 1)
		req.Tools, req.ToolChoice = tt.tools, tt.mode
		_, err := c.Chat(context.Background(), req)
		var ce *llm.CallError
		if !errors.As(err, &ce) || ce.Attempts != 0 || !strings.Contains(err.Error(), tt.want) || ce.Usage.Model != "gpt-4o" {
			t.Errorf("%s: err %v, want a CallError saying %q", tt.name, err, tt.want)
		}
	}
	if n := s.Stats().Requests; n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestToolSchemasCountTowardsTheWindow: the context-window check (and the
// token reservation, which uses the same count) includes tool schemas.
func TestToolSchemasCountTowardsTheWindow(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", Default: llm.ModelConfig{Name: "gpt-4o", ContextWindow: 400}})
	req := generate("short", 1)
	req.MaxTokens = 100
	if _, err := c.Chat(context.Background(), req); err != nil {
		t.Fatalf("without tools: %v", err)
	}
	big := llm.Tool{Name: "describe", Parameters: json.RawMessage(`{"type":"object","description":"` + strings.Repeat("column names and types ", 80) + `"}`)}
	req.Tools = []llm.Tool{big}
	if _, err := c.Chat(context.Background(), req); !errors.Is(err, llm.ErrContextTooLong) {
		t.Errorf("with a 400-token schema: err %v, want ErrContextTooLong", err)
	}
	if n := s.Stats().Requests; n != 1 {
		t.Errorf("%d requests sent, want 1", n)
	}
}
