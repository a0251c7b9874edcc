package llmsim

import (
	"encoding/json"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
)

// PromptCache simulates a provider's automatic prefix cache (OpenAI's):
// a request whose prompt starts with at least MinTokens of a recent
// request's prompt is served that shared prefix from the cache, in steps
// of Step tokens, and usage reports it as
// prompt_tokens_details.cached_tokens. As at the providers, a prompt is
// readable from the cache only once its request has been processed up to
// its first token: requests sent together all miss (Anthropic's docs: wait
// for the first response before sending the others).
type PromptCache struct {
	Enabled bool
	// MinTokens is the shortest prefix cached (default 1,024, OpenAI's).
	MinTokens int
	// Step is the granularity of a cached prefix (default 128 tokens).
	Step int
	// TTL is how long a prompt stays cached after its last use (default
	// 5 minutes).
	TTL time.Duration
	// ExcludeFromTPM leaves cached tokens out of the tokens-per-minute
	// limit, as Anthropic's current models do.
	ExcludeFromTPM bool
	// Markers caches as Anthropic does: only a prefix that ends where a
	// request marked a content part with cache_control, and a later
	// request reads it only when it starts with that whole prefix. A
	// request without a marker caches nothing (OpenAI's automatic cache
	// otherwise).
	Markers bool
}

// cacheMaxEntries bounds the prompts kept: a bench's examples in flight
// times their candidates' distinct prompts fit.
const cacheMaxEntries = 4096

// cacheKeyBytes is the length of the prompt start prompts are indexed by:
// only prompts sharing it can share a cacheable prefix (1,024 tokens are
// several thousand bytes).
const cacheKeyBytes = 1024

type cachedPrompt struct {
	text string
	used time.Time
	// ready is when the request that wrote it reached its first token.
	ready time.Time
}

// promptCache holds recent prompts' texts by their first bytes.
type promptCache struct {
	cfg PromptCache
	tok *llm.Tokenizer
	mu  sync.Mutex
	by  map[uint64][]*cachedPrompt
	n   int
}

func newPromptCache(cfg PromptCache, tok *llm.Tokenizer) *promptCache {
	if cfg.MinTokens <= 0 {
		cfg.MinTokens = 1024
	}
	if cfg.Step <= 0 {
		cfg.Step = 128
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Minute
	}
	return &promptCache{cfg: cfg, tok: tok, by: map[uint64][]*cachedPrompt{}}
}

// promptMarked is the prompt as the provider processes it, tools first
// (what a cached prefix is a prefix of), and where each cache_control
// breakpoint ends
// in it, in order.
func promptMarked(req chatRequest) (string, []int) {
	var b strings.Builder
	if len(req.Tools) > 0 {
		tools, _ := json.Marshal(req.Tools)
		b.Write(tools)
	}
	var marks []int
	for _, m := range req.Messages {
		b.WriteString("<|" + m.Role + "|>")
		b.WriteString(m.Content)
		if m.Marked {
			marks = append(marks, b.Len())
		}
		for _, tc := range m.ToolCalls {
			b.WriteString(tc.Function.Name + tc.Function.Arguments)
		}
		b.WriteString("<|end|>")
	}
	return b.String(), marks
}

func cacheKey(text string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(text[:min(len(text), cacheKeyBytes)]))
	return h.Sum64()
}

// lookup returns the cached tokens of a prompt of prompt tokens, and keeps
// the prompt for the requests after it, readable from ready (the request's
// first token).
func (c *promptCache) lookup(model string, req chatRequest, prompt int, ready time.Time) int {
	if c == nil || !c.cfg.Enabled {
		return 0
	}
	text, marks := promptMarked(req)
	// What the request writes to the cache, and the longest prefix it may
	// read: all of it, or with markers (Anthropic's) the prefix ending at
	// each breakpoint, read at most up to the last.
	stored, readable := []string{text}, len(text)
	if c.cfg.Markers {
		if len(marks) == 0 {
			return 0 // no breakpoint: Anthropic neither writes nor reads
		}
		stored, readable = nil, marks[len(marks)-1]
		for _, m := range marks {
			stored = append(stored, text[:m])
		}
	}
	if readable < cacheKeyBytes {
		return 0 // far below the shortest cached prefix
	}
	key := cacheKey(text)
	now := time.Now()
	c.mu.Lock()
	best := 0
	live := c.by[key][:0]
	same := map[string]*cachedPrompt{}
	for _, e := range c.by[key] {
		if now.Sub(e.used) > c.cfg.TTL {
			c.n--
			continue
		}
		live = append(live, e)
		for _, st := range stored {
			if e.text == st {
				same[st] = e
			}
		}
		if now.Before(e.ready) {
			continue // still being processed: not in the cache yet
		}
		n := min(commonPrefix(text, e.text), readable)
		if c.cfg.Markers && n < len(e.text) {
			n = 0 // a marked prefix is read whole or not at all
		}
		if n > best {
			best = n
		}
	}
	for _, st := range stored {
		if len(st) < cacheKeyBytes {
			continue
		}
		if e := same[st]; e != nil {
			e.used = now
			if ready.Before(e.ready) {
				e.ready = ready
			}
		} else if c.n < cacheMaxEntries {
			live = append(live, &cachedPrompt{text: st, used: now, ready: ready})
			c.n++
		}
	}
	c.by[key] = live
	c.mu.Unlock()
	if best < cacheKeyBytes {
		return 0
	}
	tokens := c.tok.Count(model, text[:best])
	tokens = min(tokens, prompt) / c.cfg.Step * c.cfg.Step
	if tokens < c.cfg.MinTokens {
		return 0
	}
	return tokens
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
