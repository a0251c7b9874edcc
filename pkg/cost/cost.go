// Package cost accounts for what answering costs: LLM calls and their usage,
// warehouse queries and their time, per stage of an agent.
package cost

import (
	"sort"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
)

// Cost is the spending of one stage (or of everything).
type Cost struct {
	LLMCalls int       `json:"llm_calls"`
	LLM      llm.Usage `json:"llm"`
	// LLMErrors counts calls that ended in an error after their retries.
	LLMErrors    int           `json:"llm_errors"`
	Queries      int           `json:"warehouse_queries"`
	QueryErrors  int           `json:"warehouse_errors"`
	QueryTime    time.Duration `json:"warehouse_time_ns"`
	CacheHits    int           `json:"cache_hits,omitempty"`
	LimiterWaits time.Duration `json:"-"`
	// ByModel splits the LLM calls by "endpoint/model" (ModelKey).
	ByModel map[string]*ModelCost `json:"by_model,omitempty"`
	// What the form of the model's replies cost (real models write SQL,
	// JSON and commands in many shapes): re-asks a reply's form caused,
	// candidates lost because no reply could be read, loops that ended
	// early on unreadable output, verifier verdicts that could not be read.
	FormatReasks   int `json:"format_reasks,omitempty"`
	FormatLost     int `json:"format_lost,omitempty"`
	FormatEnded    int `json:"format_ended,omitempty"`
	VerdictsUnread int `json:"verdicts_unread,omitempty"`
	// Refusals are replies that held no statement where one was asked
	// for (a refusal, a question back, prose only): recorded, never run.
	Refusals int `json:"refusals,omitempty"`
}

// ModelCost is the spending on one model at one endpoint.
type ModelCost struct {
	Calls            int `json:"calls"`
	Errors           int `json:"errors"`
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	ReasoningTokens  int `json:"reasoning_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	// Money is what the calls cost at their endpoint's prices.
	Money       float64       `json:"money"`
	Attempts    int           `json:"attempts"`
	RateLimited int           `json:"rate_limited"`
	Latency     time.Duration `json:"latency_ns"`
	LimiterWait time.Duration `json:"limiter_wait_ns"`
}

func (m *ModelCost) add(o ModelCost) {
	m.Calls += o.Calls
	m.Errors += o.Errors
	m.PromptTokens += o.PromptTokens
	m.CompletionTokens += o.CompletionTokens
	m.ReasoningTokens += o.ReasoningTokens
	m.CachedTokens += o.CachedTokens
	m.Money += o.Money
	m.Attempts += o.Attempts
	m.RateLimited += o.RateLimited
	m.Latency += o.Latency
	m.LimiterWait += o.LimiterWait
}

// ModelKey is the ByModel key of a call's usage: "endpoint/model", with
// "unknown" for a part the usage does not name (a call that never reached
// the client). Endpoint names hold no '/', so the first one splits the key.
func ModelKey(u llm.Usage) string {
	ep, model := u.Endpoint, u.Model
	if ep == "" {
		ep = "unknown"
	}
	if model == "" {
		model = "unknown"
	}
	return ep + "/" + model
}

func (c *Cost) model(key string) *ModelCost {
	if c.ByModel == nil {
		c.ByModel = map[string]*ModelCost{}
	}
	m, ok := c.ByModel[key]
	if !ok {
		m = &ModelCost{}
		c.ByModel[key] = m
	}
	return m
}

// Add accumulates o.
func (c *Cost) Add(o Cost) {
	c.LLMCalls += o.LLMCalls
	c.LLM.Add(o.LLM)
	c.LLMErrors += o.LLMErrors
	c.Queries += o.Queries
	c.QueryErrors += o.QueryErrors
	c.QueryTime += o.QueryTime
	c.CacheHits += o.CacheHits
	c.FormatReasks += o.FormatReasks
	c.FormatLost += o.FormatLost
	c.FormatEnded += o.FormatEnded
	c.VerdictsUnread += o.VerdictsUnread
	c.Refusals += o.Refusals
	// Copies, never o's pointers: the sum must not change when o does.
	for k, m := range o.ByModel {
		c.model(k).add(*m)
	}
}

// Call records one LLM call (successful or not).
func (c *Cost) Call(u llm.Usage, failed bool) {
	c.LLMCalls++
	c.LLM.Add(u)
	m := ModelCost{Calls: 1, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		ReasoningTokens: u.ReasoningTokens, CachedTokens: u.CachedTokens, Money: u.Money, Attempts: u.Attempts,
		RateLimited: u.RateLimited, Latency: u.Latency, LimiterWait: u.LimiterWait}
	if failed {
		c.LLMErrors++
		m.Errors = 1
	}
	c.model(ModelKey(u)).add(m)
}

// Query records one warehouse query.
func (c *Cost) Query(d time.Duration, failed bool) {
	c.Queries++
	c.QueryTime += d
	if failed {
		c.QueryErrors++
	}
}

// Money is what the LLM calls cost.
func (c Cost) Money() float64 { return c.LLM.Money }

// CachedShare is the share of prompt tokens the providers served from
// their prompt caches (0 without prompt tokens).
func (c Cost) CachedShare() float64 {
	if c.LLM.PromptTokens == 0 {
		return 0
	}
	return float64(c.LLM.CachedTokens) / float64(c.LLM.PromptTokens)
}

// Tokens is prompt plus completion tokens.
func (c Cost) Tokens() int { return c.LLM.PromptTokens + c.LLM.CompletionTokens }

// Ledger is cost per stage.
type Ledger map[string]*Cost

// Stage returns the stage's cost, creating it.
func (l Ledger) Stage(name string) *Cost {
	if c, ok := l[name]; ok {
		return c
	}
	c := &Cost{}
	l[name] = c
	return c
}

// Merge adds every stage of o.
func (l Ledger) Merge(o Ledger) {
	for k, v := range o {
		l.Stage(k).Add(*v)
	}
}

// Total sums the stages.
func (l Ledger) Total() Cost {
	var t Cost
	for _, k := range l.Stages() {
		t.Add(*l[k])
	}
	return t
}

// Stages lists the stage names in order.
func (l Ledger) Stages() []string {
	out := make([]string, 0, len(l))
	for k := range l {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
