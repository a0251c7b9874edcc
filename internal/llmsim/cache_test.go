package llmsim

import (
	"fmt"
	"strings"
	"testing"
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
		_, ts := newSim(t, Config{Limits: Limits{TokensPerMinute: 360_000}, PromptCache: PromptCache{Enabled: true, ExcludeFromTPM: exclude}})
		url := ts.URL + "/v1/chat/completions"
		resp, first := post(t, url, chatBody(msg("system", shared), msg("user", "Task: how many orders are there?")))
		if resp.StatusCode != 200 {
			t.Fatalf("exclude %v: the first prompt got %d: %v", exclude, resp.StatusCode, first)
		}
		if _, p := cachedTokens(t, first); p < 4000 || p > 6000 {
			t.Fatalf("the prompt has %d tokens; the test wants about 5,000 (a second of the limit is 6,000)", p)
		}
		resp, _ = post(t, url, chatBody(msg("system", shared), msg("user", "Task: what is the largest total?")))
		if want := map[bool]int{false: 429, true: 200}[exclude]; resp.StatusCode != want {
			t.Errorf("exclude cached tokens from TPM %v: the second prompt got %d, want %d", exclude, resp.StatusCode, want)
		}
	}
}
