package llmsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/llm"
)

// answer is one decoded chat completion.
type answer struct {
	status  int
	content string
	calls   []wireToolCall
	finish  string
	tokens  int // completion tokens
	errText string
}

func ask(t *testing.T, url string, body map[string]any) answer {
	t.Helper()
	resp, out := post(t, url+"/v1/chat/completions", body)
	a := answer{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		if e, ok := out["error"].(map[string]any); ok {
			a.errText, _ = e["message"].(string)
		}
		return a
	}
	raw, _ := json.Marshal(out)
	var r struct {
		Choices []struct {
			Message struct {
				Content   string         `json:"content"`
				ToolCalls []wireToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("response %s: %v", raw, err)
	}
	ch := r.Choices[0]
	return answer{status: resp.StatusCode, content: ch.Message.Content, calls: ch.Message.ToolCalls, finish: ch.FinishReason, tokens: r.Usage.CompletionTokens}
}

// askStream sends the request streamed and reassembles the answer.
func askStream(t *testing.T, url string, body map[string]any) answer {
	t.Helper()
	sb := map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}
	for k, v := range body {
		sb[k] = v
	}
	b, _ := json.Marshal(sb)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string         `json:"content"`
					ToolCalls []wireToolCall `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		if chunk.Usage != nil {
			a.tokens = chunk.Usage.CompletionTokens
		}
		for _, ch := range chunk.Choices {
			a.content += ch.Delta.Content
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == nil || *tc.Index != 0 {
					t.Fatalf("tool call chunk without index 0: %s", line)
				}
				if len(a.calls) == 0 {
					a.calls = []wireToolCall{{}}
				}
				c := &a.calls[0]
				if tc.ID != "" {
					c.ID, c.Type, c.Function.Name = tc.ID, tc.Type, tc.Function.Name
				}
				c.Function.Arguments += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				a.finish = *ch.FinishReason
			}
		}
	}
	return a
}

const (
	sqlTool    = `{"type":"function","function":{"name":"run_sql","description":"Run a query","parameters":{"type":"object","properties":{"sql":{"type":"string"},"timeout":{"type":"integer"}},"required":["sql"]}}}`
	lookupTool = `{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"table":{"type":"string"},"limit":{"type":"integer"},"verbose":{"type":"boolean"},"mode":{"type":"string","enum":["fast","slow"]},"note":{"type":"string"}},"required":["table","limit","verbose","mode"]}}}`
)

func tools(defs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(defs))
	for i, d := range defs {
		out[i] = json.RawMessage(d)
	}
	return out
}

func TestToolChoiceRules(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Seed: 3})
	e, _ := ds.Example("local011")
	task := llm.User("Task: " + e.Question + "\nPlease think step by step and " + MarkerGenerate + " in sqlite dialect.")
	call := llm.Message{Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "run_sql", Arguments: `{"sql":"SELECT 1"}`}}}
	wire := func(msgs ...llm.Message) []map[string]any {
		var out []map[string]any
		for _, m := range msgs {
			w := map[string]any{"role": m.Role, "content": m.Content}
			if m.ToolCallID != "" {
				w["tool_call_id"] = m.ToolCallID
			}
			for _, tc := range m.ToolCalls {
				w["tool_calls"] = []map[string]any{{"id": tc.ID, "type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}}
			}
			out = append(out, w)
		}
		return out
	}
	// The SQL a text answer to the same messages holds.
	plain := ask(t, ts.URL, map[string]any{"model": "m", "seed": 5, "messages": wire(task)})
	wantSQL := llm.Blocks(plain.content, "sql")[0]

	tests := []struct {
		name   string
		msgs   []map[string]any
		tools  []json.RawMessage
		choice any
		// want: the tool called ("" = a text answer) and its arguments
		// (nil = not checked).
		want   string
		args   map[string]any
		status int
	}{
		{"auto before any result calls the SQL tool", wire(task), tools(lookupTool, sqlTool), nil, "run_sql", map[string]any{"sql": wantSQL}, 200},
		{"explicit auto alike", wire(task), tools(sqlTool), "auto", "run_sql", map[string]any{"sql": wantSQL}, 200},
		{"auto after a result answers in text", wire(task, call, llm.ToolResult("call_1", "1 row")), tools(sqlTool), "auto", "", nil, 200},
		{"a new user turn after a result may call again", wire(task, call, llm.ToolResult("call_1", "1 row"), llm.Assistant("ok"), task), tools(sqlTool), nil, "run_sql", nil, 200},
		{"none answers in text", wire(task), tools(sqlTool), "none", "", nil, 200},
		{"required calls even after a result", wire(task, call, llm.ToolResult("call_1", "1 row")), tools(sqlTool), "required", "run_sql", nil, 200},
		{"named function is called, arguments from its schema", wire(task), tools(sqlTool, lookupTool),
			map[string]any{"type": "function", "function": map[string]any{"name": "lookup"}}, "lookup",
			map[string]any{"table": "llmsim simulated table", "limit": 0.0, "verbose": false, "mode": "fast"}, 200},
		{"without a SQL tool, the first", wire(task), tools(lookupTool), "auto", "lookup", nil, 200},
		{"no tools, a text answer", wire(task), nil, nil, "", nil, 200},
		{"named function missing from tools", wire(task), tools(sqlTool), map[string]any{"type": "function", "function": map[string]any{"name": "drop_db"}}, "", nil, 400},
		{"unknown mode", wire(task), tools(sqlTool), "sometimes", "", nil, 400},
		{"required without tools", wire(task), nil, "required", "", nil, 400},
	}
	for _, tt := range tests {
		body := map[string]any{"model": "m", "seed": 5, "messages": tt.msgs}
		if tt.tools != nil {
			body["tools"] = tt.tools
		}
		if tt.choice != nil {
			body["tool_choice"] = tt.choice
		}
		a := ask(t, ts.URL, body)
		if a.status != tt.status {
			t.Errorf("%s: status %d (%s), want %d", tt.name, a.status, a.errText, tt.status)
			continue
		}
		if tt.status != 200 {
			if a.errText == "" {
				t.Errorf("%s: a 400 without a message", tt.name)
			}
			continue
		}
		if tt.want == "" {
			if len(a.calls) != 0 || a.finish != "stop" || len(llm.Blocks(a.content, "sql")) != 1 {
				t.Errorf("%s: want a text answer with SQL, got %+v", tt.name, a)
			}
			continue
		}
		if len(a.calls) != 1 || a.finish != "tool_calls" || a.content != "" || a.calls[0].Function.Name != tt.want || a.calls[0].Type != "function" {
			t.Errorf("%s: want a call to %s, got %+v", tt.name, tt.want, a)
			continue
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(a.calls[0].Function.Arguments), &args); err != nil {
			t.Errorf("%s: arguments %q are not JSON: %v", tt.name, a.calls[0].Function.Arguments, err)
		}
		if tt.args != nil {
			want, _ := json.Marshal(tt.args)
			if got, _ := json.Marshal(args); string(got) != string(want) {
				t.Errorf("%s: arguments %s, want %s", tt.name, got, want)
			}
		}
	}
}

var callIDShape = regexp.MustCompile(`^call_[0-9a-f]{16}_0$`)

func TestToolCallIDsAreDeterministic(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s1, ts1 := newSim(t, Config{Dataset: ds, Seed: 9})
	_, ts2 := newSim(t, Config{Dataset: ds, Seed: 9})
	_, other := newSim(t, Config{Dataset: ds, Seed: 10})
	body := func(seed int64) map[string]any {
		b := generateBody(ds.Examples[2].Question, seed)
		b["tools"] = tools(sqlTool)
		return b
	}
	a, b := ask(t, ts1.URL, body(1)), ask(t, ts2.URL, body(1))
	if len(a.calls) != 1 || !callIDShape.MatchString(a.calls[0].ID) {
		t.Fatalf("call %+v", a)
	}
	if a.calls[0].ID != b.calls[0].ID || a.calls[0].Function.Arguments != b.calls[0].Function.Arguments {
		t.Errorf("one request, two answers: %+v vs %+v", a.calls, b.calls)
	}
	if again := ask(t, ts1.URL, body(1)); again.calls[0].ID != a.calls[0].ID {
		t.Error("a repeated request got another call id")
	}
	if c := ask(t, ts1.URL, body(2)); c.calls[0].ID == a.calls[0].ID {
		t.Error("another request seed kept the call id")
	}
	if c := ask(t, other.URL, body(1)); c.calls[0].ID == a.calls[0].ID {
		t.Error("another simulator seed kept the call id")
	}
	if st := s1.Stats(); st.ToolCalls[KindGenerate] != 3 || st.ByKind[KindGenerate] != 3 {
		t.Errorf("stats: tool calls %v, by kind %v", st.ToolCalls, st.ByKind)
	}
}

func TestStopAndMaxTokens(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := newSim(t, Config{Dataset: ds, Seed: 4})
	base := generateBody(ds.Examples[5].Question, 2)
	full := ask(t, ts.URL, base)
	if full.finish != "stop" || !strings.Contains(full.content, "```sql") {
		t.Fatalf("full answer %+v", full)
	}
	with := func(k string, v any) map[string]any {
		b := map[string]any{}
		for k, v := range base {
			b[k] = v
		}
		b[k] = v
		return b
	}
	intro, _, _ := strings.Cut(full.content, "```sql")
	tests := []struct {
		name   string
		body   map[string]any
		text   string // want this text exactly ("" = a prefix of the full answer)
		finish string
		max    int
	}{
		{"stop list, earliest wins", with("stop", []string{"\n```\n", "```sql"}), intro, "stop", 0},
		{"stop string", with("stop", "```sql"), intro, "stop", 0},
		{"absent stop leaves the text", with("stop", []string{"never appears"}), full.content, "stop", 0},
		{"max_tokens cuts", with("max_tokens", 5), "", "length", 5},
		{"max_completion_tokens cuts", with("max_completion_tokens", 7), "", "length", 7},
		{"a generous bound does not", with("max_tokens", 100000), full.content, "stop", 0},
	}
	for _, tt := range tests {
		for _, streamed := range []bool{false, true} {
			var a answer
			if streamed {
				a = askStream(t, ts.URL, tt.body)
			} else {
				a = ask(t, ts.URL, tt.body)
			}
			if a.status != 200 || a.finish != tt.finish {
				t.Errorf("%s (streamed %v): status %d, finish %q, want %q", tt.name, streamed, a.status, a.finish, tt.finish)
				continue
			}
			if tt.text != "" && a.content != tt.text {
				t.Errorf("%s (streamed %v): text %q, want %q", tt.name, streamed, a.content, tt.text)
			}
			if tt.max > 0 {
				n := s.tok.Count("gpt-4o", a.content)
				if !strings.HasPrefix(full.content, a.content) || a.content == "" || n > tt.max || a.tokens != n {
					t.Errorf("%s (streamed %v): text %q (%d tokens, usage says %d), want a prefix of at most %d tokens", tt.name, streamed, a.content, n, a.tokens, tt.max)
				}
			}
		}
	}
	// A tool call cut by the bound ends in "length" with its arguments cut.
	b := with("max_tokens", 6)
	b["tools"] = tools(sqlTool)
	for _, streamed := range []bool{false, true} {
		var a answer
		if streamed {
			a = askStream(t, ts.URL, b)
		} else {
			a = ask(t, ts.URL, b)
		}
		if a.finish != "length" || len(a.calls) != 1 || json.Valid([]byte(a.calls[0].Function.Arguments)) || a.tokens > 6 {
			t.Errorf("cut tool call (streamed %v): %+v", streamed, a)
		}
	}
}

func TestStreamedToolCallMatchesPlain(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Seed: 6})
	body := generateBody(ds.Examples[7].Question, 4)
	body["tools"] = tools(sqlTool)
	plain, streamed := ask(t, ts.URL, body), askStream(t, ts.URL, body)
	if streamed.finish != "tool_calls" || len(streamed.calls) != 1 || len(plain.calls) != 1 ||
		streamed.calls[0] != plain.calls[0] || streamed.tokens != plain.tokens {
		t.Errorf("streamed %+v\nplain %+v", streamed, plain)
	}
}

func TestSamplingParametersChecked(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds})
	tests := []struct {
		key    string
		value  any
		status int
	}{
		{"top_p", 0.9, 200},
		{"top_p", 1.5, 400},
		{"temperature", 0.0, 200},
		{"temperature", 3.0, 400},
		{"max_tokens", -1, 400},
		{"stop", 5, 400},
	}
	for _, tt := range tests {
		b := generateBody(ds.Examples[0].Question, 1)
		b[tt.key] = tt.value
		if a := ask(t, ts.URL, b); a.status != tt.status {
			t.Errorf("%s=%v: status %d, want %d", tt.key, tt.value, a.status, tt.status)
		}
	}
}
