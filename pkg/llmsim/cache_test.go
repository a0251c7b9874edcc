package llmsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// schemaText is a prompt part of several thousand tokens, like a schema.
func schemaText(tables int) string {
	var b strings.Builder
	for i := range tables {
		fmt.Fprintf(&b, "CREATE TABLE orders_%d (id INTEGER PRIMARY KEY, customer_id INTEGER, total REAL, placed_at TEXT);\n", i)
	}
	return b.String()
}

func cachedTokens(t *testing.T, out map[string]any) (cached, prompt int) {
	t.Helper()
	u, ok := out["usage"].(map[string]any)
	if !ok {
		t.Fatalf("no usage in %v", out)
	}
	prompt = int(u["prompt_tokens"].(float64))
	if d, ok := u["prompt_tokens_details"].(map[string]any); ok {
		cached = int(d["cached_tokens"].(float64))
	}
	return cached, prompt
}

func chatBody(msgs ...map[string]string) map[string]any {
	return map[string]any{"model": "gpt-4o", "messages": msgs}
}

func msg(role, content string) map[string]string {
	return map[string]string{"role": role, "content": content}
}

// TestPromptCacheServesASharedPrefix: a prompt that starts with a recent
// prompt's first 1,024 tokens or more is served them from the cache, in
// steps of 128; one whose varying part comes first is not, nor is any
// prompt with the cache off.
func TestPromptCacheServesASharedPrefix(t *testing.T) {
	t.Parallel()
	shared := "You write SQLite queries.\n" + schemaText(60)
	_, ts := newSim(t, Config{PromptCache: PromptCache{Enabled: true}})
	url := ts.URL + "/v1/chat/completions"
	_, first := post(t, url, chatBody(msg("system", shared), msg("user", "Task: how many orders are there?")))
	if c, _ := cachedTokens(t, first); c != 0 {
		t.Errorf("the first prompt had %d cached tokens, want 0", c)
	}
	_, second := post(t, url, chatBody(msg("system", shared), msg("user", "Task: what is the largest total?")))
	c, p := cachedTokens(t, second)
	if c < 1024 || c%128 != 0 || c >= p || c < p-200 {
		t.Errorf("a prompt sharing all but its question: %d of %d tokens cached, want the shared part (>= 1024, a multiple of 128)", c, p)
	}
	_, late := post(t, url, chatBody(msg("user", "Task: what is the smallest total?\n"+shared)))
	if c, _ := cachedTokens(t, late); c != 0 {
		t.Errorf("a prompt whose question comes first had %d cached tokens, want 0", c)
	}

	_, off := newSim(t, Config{})
	post(t, off.URL+"/v1/chat/completions", chatBody(msg("system", shared), msg("user", "Task: a")))
	_, again := post(t, off.URL+"/v1/chat/completions", chatBody(msg("system", shared), msg("user", "Task: b")))
	if c, _ := cachedTokens(t, again); c != 0 {
		t.Errorf("with the cache off: %d cached tokens, want 0", c)
	}
}

// TestPromptCacheExcludedFromTPM: under a tokens-per-minute limit that
// admits one such prompt a second at once, a second prompt sharing its
// prefix is refused (429) when cached tokens count, and admitted when
// they do not. The pair is sent in a synctest bubble, straight to the
// handler: the simulator's clock does not move between the two requests
// however long the machine takes for them, so the limit has not refilled.
func TestPromptCacheExcludedFromTPM(t *testing.T) {
	t.Parallel()
	shared := schemaText(225) // about 5,000 tokens
	ds := demo(t)
	for _, exclude := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			s, err := New(Config{Dataset: ds, Limits: Limits{TokensPerMinute: 360_000}, PromptCache: PromptCache{Enabled: true, ExcludeFromTPM: exclude}})
			if err != nil {
				t.Fatal(err)
			}
			code, first := serveChat(t, s, chatBody(msg("system", shared), msg("user", "Task: how many orders are there?")))
			if code != 200 {
				t.Fatalf("exclude %v: the first prompt got %d: %v", exclude, code, first)
			}
			if _, p := cachedTokens(t, first); p < 4000 || p > 6000 {
				t.Fatalf("the prompt has %d tokens; the test wants about 5,000 (a second of the limit is 6,000)", p)
			}
			got, _ := serveChat(t, s, chatBody(msg("system", shared), msg("user", "Task: what is the largest total?")))
			if want := map[bool]int{false: 429, true: 200}[exclude]; got != want {
				t.Errorf("exclude cached tokens from TPM %v: the second prompt got %d, want %d", exclude, got, want)
			}
		})
	}
}

// serveChat sends a chat request straight to the simulator's handler, as
// a synctest bubble needs (no connection, whose waits would not let its
// clock move), and returns the status and the decoded reply.
func serveChat(t *testing.T, s *Server, body any) (int, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	var out map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out
}

// marked is a message whose content is one text part with an
// Anthropic-style cache_control breakpoint, as a client marks it.
func marked(role, content string) map[string]any {
	return map[string]any{"role": role, "content": []any{
		map[string]any{"type": "text", "text": content, "cache_control": map[string]any{"type": "ephemeral"}}}}
}

// TestPromptCacheMarkers: with Markers (Anthropic's prompt cache) only a
// prefix ending at a cache_control breakpoint is cached, and read only by
// a request starting with all of it; unmarked requests cache nothing, as
// OpenAI's automatic cache would have.
func TestPromptCacheMarkers(t *testing.T) {
	t.Parallel()
	shared := "You write SQLite queries.\n" + schemaText(60)
	_, ts := newSim(t, Config{PromptCache: PromptCache{Enabled: true, Markers: true}})
	url := ts.URL + "/v1/chat/completions"
	ask := func(msgs ...any) int {
		t.Helper()
		_, out := post(t, url, map[string]any{"model": "gpt-4o", "messages": msgs})
		c, _ := cachedTokens(t, out)
		return c
	}
	for i, c := range []struct {
		name string
		msgs []any
		want func(int) bool
	}{
		{"unmarked, first", []any{msg("system", shared), msg("user", "Task: a")}, func(n int) bool { return n == 0 }},
		{"unmarked, the same prefix again", []any{msg("system", shared), msg("user", "Task: b")}, func(n int) bool { return n == 0 }},
		{"marked, first: written, not read", []any{marked("system", shared), msg("user", "Task: c")}, func(n int) bool { return n == 0 }},
		{"marked, the same prefix: read", []any{marked("system", shared), msg("user", "Task: d")}, func(n int) bool { return n >= 1024 }},
		{"marked, a shorter prefix: not read", []any{marked("system", shared[:len(shared)-200]), msg("user", "Task: e")}, func(n int) bool { return n == 0 }},
		// Every breakpoint writes its prefix, as at Anthropic: a turn marked
		// at the system message and at its end writes both, and a request
		// sharing only the system message reads that.
		{"two breakpoints: the system's is written too", []any{marked("system", "v2 "+shared), msg("user", "Task: f"), marked("user", "more")}, func(n int) bool { return n == 0 }},
		{"the system breakpoint read by another turn", []any{marked("system", "v2 "+shared), marked("user", "Task: g")}, func(n int) bool { return n >= 1024 }},
	} {
		if got := ask(c.msgs...); !c.want(got) {
			t.Errorf("request %d (%s): %d cached tokens", i+1, c.name, got)
		}
	}
}

// TestContentParts: content as an array of text parts is read as its
// joined text (clients and proxies send it so); another part type is
// refused with a 400 that names it.
func TestContentParts(t *testing.T) {
	t.Parallel()
	_, ts := newSim(t, Config{})
	url := ts.URL + "/v1/chat/completions"
	resp, _ := post(t, url, map[string]any{"model": "gpt-4o", "messages": []any{marked("user", "How many orders are there?")}})
	code := resp.StatusCode
	if code != 200 {
		t.Errorf("text parts: status %d, want 200", code)
	}
	resp, out := post(t, url, map[string]any{"model": "gpt-4o", "messages": []any{map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:"}}}}}})
	if resp.StatusCode != 400 || !strings.Contains(fmt.Sprint(out), "image_url") {
		t.Errorf("an image part: status %d (%v), want 400 naming it", resp.StatusCode, out)
	}
}

// TestPromptCacheAfterFirstToken: as at the providers, a prompt is in the
// cache only once its request reached its first token, so requests sent
// together all miss, and one sent after the first has answered hits. The
// requests run in a synctest bubble: its clock moves only once both wait
// for their first token, so neither is processed before the other has
// read the cache, however loaded the machine.
func TestPromptCacheAfterFirstToken(t *testing.T) {
	t.Parallel()
	shared := "You write SQLite queries.\n" + schemaText(60)
	ds := demo(t)
	synctest.Test(t, func(t *testing.T) {
		sim, err := New(Config{Dataset: ds, PromptCache: PromptCache{Enabled: true}, Latency: Latency{FirstToken: 3 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		body := chatBody(msg("system", shared), msg("user", "Task: how many orders are there?"))
		type result struct {
			code int
			out  map[string]any
		}
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		results := make(chan result, 2)
		for range 2 {
			go func() {
				w := httptest.NewRecorder()
				sim.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(raw)))
				var out map[string]any
				_ = json.Unmarshal(w.Body.Bytes(), &out)
				results <- result{w.Code, out}
			}()
		}
		for range 2 {
			r := <-results
			if r.code != 200 {
				t.Fatalf("a request sent with another of the same prompt got %d: %v", r.code, r.out)
			}
			if c, _ := cachedTokens(t, r.out); c != 0 {
				t.Errorf("a request sent with another of the same prompt read %d cached tokens, want 0 (neither had reached its first token)", c)
			}
		}
		_, after := serveChat(t, sim, body)
		if c, p := cachedTokens(t, after); c < 1024 {
			t.Errorf("a request sent after the first answered read %d of %d tokens from the cache, want the shared prompt", c, p)
		}
	})
}
