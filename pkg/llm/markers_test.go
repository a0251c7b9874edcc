package llm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/pkg/llm"
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
