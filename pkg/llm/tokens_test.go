package llm

import "testing"

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
