package llmsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
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
// they do not.
func TestPromptCacheExcludedFromTPM(t *testing.T) {
	t.Parallel()
	shared := schemaText(225) // about 5,000 tokens
	for _, exclude := range []bool{false, true} {
		// The limit refills in a second: a second prompt admitted later
		// than that says nothing, so a pair the machine was too slow for
		// is tried again.
		var got int
		for try := 1; ; try++ {
			_, ts := newSim(t, Config{Limits: Limits{TokensPerMinute: 360_000}, PromptCache: PromptCache{Enabled: true, ExcludeFromTPM: exclude}})
			url := ts.URL + "/v1/chat/completions"
			start := time.Now()
			resp, first := post(t, url, chatBody(msg("system", shared), msg("user", "Task: how many orders are there?")))
			if resp.StatusCode != 200 {
				t.Fatalf("exclude %v: the first prompt got %d: %v", exclude, resp.StatusCode, first)
			}
			if _, p := cachedTokens(t, first); p < 4000 || p > 6000 {
				t.Fatalf("the prompt has %d tokens; the test wants about 5,000 (a second of the limit is 6,000)", p)
			}
			resp, _ = post(t, url, chatBody(msg("system", shared), msg("user", "Task: what is the largest total?")))
			got = resp.StatusCode
			if took := time.Since(start); took < 500*time.Millisecond || got == 429 || try == 10 {
				if took >= 500*time.Millisecond && got != 429 {
					t.Logf("exclude %v: the machine took %s for the pair in every try", exclude, took)
				}
				break
			}
		}
		if want := map[bool]int{false: 429, true: 200}[exclude]; got != want {
			t.Errorf("exclude cached tokens from TPM %v: the second prompt got %d, want %d", exclude, got, want)
		}
	}
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
// together all miss, and one sent after the first has answered hits.
func TestPromptCacheAfterFirstToken(t *testing.T) {
	t.Parallel()
	shared := "You write SQLite queries.\n" + schemaText(60)
	// The first two requests are let through together, once both have
	// arrived, and the first token is long, so neither is processed
	// before the other reads the cache, however loaded the machine.
	sim, err := New(Config{Dataset: demo(t), PromptCache: PromptCache{Enabled: true}, Latency: Latency{FirstToken: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	var arrivals sync.WaitGroup
	arrivals.Add(2)
	var n atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			arrivals.Done()
			arrivals.Wait()
		}
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	url := ts.URL + "/v1/chat/completions"
	body := chatBody(msg("system", shared), msg("user", "Task: how many orders are there?"))
	type result struct {
		cached int
		err    error
	}
	results := make(chan result, 2)
	for range 2 {
		go func() {
			b, _ := json.Marshal(body)
			resp, err := http.Post(url, "application/json", bytes.NewReader(b))
			if err != nil {
				results <- result{err: err}
				return
			}
			defer resp.Body.Close()
			var out struct {
				Usage struct {
					Details struct {
						Cached int `json:"cached_tokens"`
					} `json:"prompt_tokens_details"`
				} `json:"usage"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			results <- result{out.Usage.Details.Cached, err}
		}()
	}
	for range 2 {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.cached != 0 {
			t.Errorf("a request sent with another of the same prompt read %d cached tokens, want 0 (neither had reached its first token)", r.cached)
		}
	}
	_, after := post(t, url, body)
	if c, p := cachedTokens(t, after); c < 1024 {
		t.Errorf("a request sent after the first answered read %d of %d tokens from the cache, want the shared prompt", c, p)
	}
}
