package llm_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestWarmUp: eight candidates sharing a long prompt, sent at once to a
// provider that caches a prompt from its first token on, all pay for the
// whole prompt; with WarmUp the first goes ahead and the seven others,
// sent once it has its first token, read the shared prompt from the cache.
func TestWarmUp(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rl, err := ratelimit.New(ratelimit.Config{Client: redis.NewClient(&redis.Options{Addr: srv.Addr})})
	if err != nil {
		t.Fatal(err)
	}
	ds := demo(t)
	var schema strings.Builder
	for i := range 80 {
		fmt.Fprintf(&schema, "CREATE TABLE t%d (id INTEGER PRIMARY KEY, name TEXT, amount REAL, created_at TEXT);\n", i)
	}
	const candidates = 8
	for _, tc := range []struct {
		warmUp bool
	}{{false}, {true}} {
		// A long first token: candidates sent together arrive within it
		// however loaded the machine.
		_, ts := sim(t, llmsim.Config{Dataset: ds, PromptCache: llmsim.PromptCache{Enabled: true},
			Latency: llmsim.Latency{FirstToken: 2 * time.Second}})
		c := client(t, llm.Config{BaseURL: ts.URL + "/v1", WarmUp: tc.warmUp, Limiter: &ratelimit.LLMBudget{Limiter: rl, Scope: "t"}})
		prompt := fmt.Sprintf("warm-up %v\n%s\nQuestion: %s", tc.warmUp, schema.String(), ds.Examples[3].Question)
		var wg sync.WaitGroup
		usage := make([]llm.Usage, candidates)
		errs := make([]error, candidates)
		for i := range candidates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				seed := int64(i)
				resp, err := c.Chat(context.Background(), llm.Request{Role: llm.RoleGenerate, Messages: []llm.Message{llm.User(prompt)}, Seed: &seed})
				if err != nil {
					errs[i] = err
					return
				}
				usage[i] = resp.Usage
			}()
		}
		wg.Wait()
		hits, waited := 0, 0
		for i, u := range usage {
			if errs[i] != nil {
				t.Fatalf("warm-up %v: candidate %d: %v", tc.warmUp, i, errs[i])
			}
			if u.CachedTokens >= 1024 {
				hits++
			}
			if u.WarmUpWait > 0 {
				waited++
			}
		}
		t.Logf("warm-up %v: %d of %d candidates read the prompt from the cache, %d waited", tc.warmUp, hits, candidates, waited)
		if tc.warmUp && (hits != candidates-1 || waited != candidates-1) {
			t.Errorf("with warm-up %d of %d candidates read the cache and %d waited for the first; want %d and %d (all but the first)",
				hits, candidates, waited, candidates-1, candidates-1)
		}
		// Without it, how many hit depends on when each was scheduled: only
		// that none waited is asserted (the hits are logged above).
		if !tc.warmUp && waited != 0 {
			t.Errorf("without warm-up %d of %d candidates waited; want none (sent at once)", waited, candidates)
		}
	}
}
