package llm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestCacheMarkers: against a provider that caches only what a request
// marks (llmsim's Anthropic-style cache), an endpoint with CacheMarkers
// gets the second call's shared system prompt from the cache, and one
// without gets none; the reply is the same either way.
func TestCacheMarkers(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := sim(t, llmsim.Config{Dataset: ds, PromptCache: llmsim.PromptCache{Enabled: true, Markers: true}})
	var schema strings.Builder
	for i := range 80 {
		fmt.Fprintf(&schema, "CREATE TABLE t%d (id INTEGER PRIMARY KEY, name TEXT, amount REAL, created_at TEXT);\n", i)
	}
	for _, tc := range []struct {
		name    string
		markers bool
		cached  bool
	}{
		{"unmarked", false, false},
		{"marked", true, true},
	} {
		c := client(t, llm.Config{BaseURL: ts.URL + "/v1", CacheMarkers: tc.markers})
		var got [2]llm.Usage
		for i := range got {
			// A distinct system prompt per case, so neither reads the other's.
			req := llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{
				llm.System(tc.name + "\n" + schema.String()), llm.User(ds.Examples[3].Question)}}
			resp, err := c.Chat(context.Background(), req)
			if err != nil {
				t.Fatalf("%s call %d: %v", tc.name, i+1, err)
			}
			got[i] = resp.Usage
		}
		if got[0].CachedTokens != 0 {
			t.Errorf("%s: the first call read %d cached tokens, want 0", tc.name, got[0].CachedTokens)
		}
		if hit := got[1].CachedTokens >= 1024; hit != tc.cached {
			t.Errorf("%s: the second call read %d of %d prompt tokens from the cache; want a hit %v", tc.name, got[1].CachedTokens, got[1].PromptTokens, tc.cached)
		}
	}
}

// TestPatchedBodyKeepsNumbers: a request whose body quorum rewrites (cache
// markers, prefix continuation) reaches the endpoint with its seed exact;
// decoded as a float64, a 64-bit seed loses its low bits and the provider
// samples another answer.
func TestPatchedBodyKeepsNumbers(t *testing.T) {
	t.Parallel()
	bodies := make(chan map[string]json.RawMessage, 4)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		bodies <- body
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"SELECT 1"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`))
	}))
	defer ts.Close()
	seed := int64(1)<<62 + 12345
	for _, tc := range []struct {
		name string
		cfg  llm.Config
		req  llm.Request
	}{
		{"cache markers", llm.Config{CacheMarkers: true}, llm.Request{Messages: []llm.Message{llm.System("s"), llm.User("u")}}},
		{"continue the final message", llm.Config{}, llm.Request{ContinueFinal: true, Messages: []llm.Message{llm.User("u"), llm.Assistant("SELECT")}}},
	} {
		tc.cfg.BaseURL, tc.cfg.NoStream = ts.URL+"/v1", true
		c := client(t, tc.cfg)
		tc.req.Role, tc.req.Seed = llm.RoleGenerate, &seed
		if _, err := c.Chat(context.Background(), tc.req); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body := <-bodies
		if got := string(body["seed"]); got != strconv.FormatInt(seed, 10) {
			t.Errorf("%s: the endpoint got seed %s, want %d", tc.name, got, seed)
		}
	}
}

// TestCacheMarkersOnTheWire: the breakpoints go on the system message, the
// last user message and a conversation's final tool result, and nowhere
// else (Anthropic allows four).
func TestCacheMarkersOnTheWire(t *testing.T) {
	t.Parallel()
	bodies := make(chan []map[string]json.RawMessage, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []map[string]json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		bodies <- body.Messages
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"SELECT 1"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`))
	}))
	defer ts.Close()
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1", NoStream: true, CacheMarkers: true})
	call := llm.ToolCall{ID: "c1", Name: "execute_sql", Arguments: `{"sql":"SELECT 1"}`}
	msgs := []llm.Message{llm.System("rules"), llm.User("schema and question"), {Role: "assistant", ToolCalls: []llm.ToolCall{call}},
		llm.ToolResult("c1", "first result"), {Role: "assistant", ToolCalls: []llm.ToolCall{{ID: "c2", Name: "execute_sql", Arguments: `{"sql":"SELECT 2"}`}}},
		llm.ToolResult("c2", "second result")}
	if _, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleGenerate, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	got := <-bodies
	want := []bool{true, true, false, false, false, true}
	if len(got) != len(want) {
		t.Fatalf("the endpoint got %d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		marked := strings.Contains(string(m["content"]), `"cache_control"`)
		if marked != want[i] {
			t.Errorf("message %d (%s): marked %v, want %v; content %s", i, m["role"], marked, want[i], m["content"])
		}
	}
}
