package llm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTokenizerOffline(t *testing.T) {
	t.Parallel()
	tk := NewTokenizer()
	tests := []struct {
		model, text string
		want        int
	}{
		{"gpt-4o", "hello world", 2},
		{"gpt-4", "hello world", 2},
		{"llama-3-70b", "SELECT count(*) FROM orders", 5},
	}
	for _, tt := range tests {
		if got := tk.Count(tt.model, tt.text); got != tt.want {
			t.Errorf("%s %q: %d tokens, want %d", tt.model, tt.text, got, tt.want)
		}
	}
	if n := tk.CountMessages("gpt-4o", []Message{User("hello world")}); n != 2+7 {
		t.Errorf("CountMessages = %d, want 9", n)
	}
}

func TestModelFamilies(t *testing.T) {
	t.Parallel()
	for _, m := range []string{"o1", "o3-mini", "o4-mini", "gpt-5", "gpt-5-mini", "azure/o3"} {
		if !IsReasoningModel(m) {
			t.Errorf("%s should be a reasoning model", m)
		}
	}
	for _, m := range []string{"gpt-4o", "gpt-4.1-mini", "llama3", "omni-sql", "o", "gpt-4o-mini"} {
		if IsReasoningModel(m) {
			t.Errorf("%s should not be a reasoning model", m)
		}
	}
	if ContextWindow("o3") != 200_000 || ContextWindow("unknown") != 128_000 {
		t.Error("context windows")
	}
}

func TestToolTokensAndTruncate(t *testing.T) {
	t.Parallel()
	tk := NewTokenizer()
	plain := []Message{User("hello world"), {Role: "assistant"}}
	withCall := []Message{User("hello world"), {Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Name: "run_sql", Arguments: `{"sql":"SELECT count(*) FROM orders"}`}}}}
	if a, b := tk.CountMessages("gpt-4o", plain), tk.CountMessages("gpt-4o", withCall); b < a+10 {
		t.Errorf("a tool call adds %d tokens, want its arguments counted", b-a)
	}
	schema := Tool{Name: "run_sql", Parameters: []byte(`{"type":"object","properties":{"sql":{"type":"string","description":"one query"}}}`)}
	if n := tk.CountTools("gpt-4o", []Tool{schema}); n < tk.Count("gpt-4o", string(schema.Parameters)) {
		t.Errorf("CountTools = %d, less than the schema's text", n)
	}
	tests := []struct {
		text string
		n    int
		want string
		cut  bool
	}{
		{"hello world", 5, "hello world", false},
		{"hello world", 1, "hello", true},
		{"hello world", 0, "", true},
		{"héllo wörld ünïcode", 3, "", true}, // checked below: valid UTF-8, at most 3 tokens
	}
	for _, tt := range tests {
		got, cut := tk.Truncate("gpt-4o", tt.text, tt.n)
		if cut != tt.cut || (tt.want != "" || tt.n == 0) && got != tt.want || !utf8.ValidString(got) || tk.Count("gpt-4o", got) > tt.n ||
			!strings.HasPrefix(tt.text, got) {
			t.Errorf("Truncate(%q, %d) = %q, %v", tt.text, tt.n, got, cut)
		}
	}
}

// TestLongTextsCountedInChunks: a long prompt is counted in cached
// paragraph chunks within a token per chunk of the whole-text count, and a
// second prompt sharing its schema costs only its own tail.
func TestLongTextsCountedInChunks(t *testing.T) {
	t.Parallel()
	tk := NewTokenizer()
	var b strings.Builder
	for i := 0; b.Len() < 100_000; i++ {
		b.WriteString("CREATE TABLE events_2024 (id INTEGER, user_id INTEGER, name TEXT, params TEXT);\n")
		if i%20 == 19 {
			b.WriteString("-- the table's columns are described in the documents\n\n")
		}
	}
	schema := b.String()
	for _, q := range []string{"Task: how many events per user?", "Task: which user had the most events in March?"} {
		text := schema + q
		whole := len(tk.encoding("gpt-4o").Encode(text, nil, nil))
		got := tk.Count("gpt-4o", text)
		chunks := len(text)/chunkBytes + 1
		if d := got - whole; d < -chunks || d > chunks {
			t.Errorf("chunked count %d, whole-text count %d: off by more than a token per chunk (%d chunks)", got, whole, chunks)
		}
	}
	tk.mu.Lock()
	cached := len(tk.counts)
	tk.mu.Unlock()
	// The schema's chunks are shared: the second prompt added one entry.
	if want := len(schema)/chunkBytes + 1; cached > want+1 {
		t.Errorf("%d cached chunks for two prompts over one schema, want about %d", cached, want)
	}
}
