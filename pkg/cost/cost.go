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
}

// Call records one LLM call (successful or not).
func (c *Cost) Call(u llm.Usage, failed bool) {
	c.LLMCalls++
	c.LLM.Add(u)
	if failed {
		c.LLMErrors++
	}
}

// Query records one warehouse query.
func (c *Cost) Query(d time.Duration, failed bool) {
	c.Queries++
	c.QueryTime += d
	if failed {
		c.QueryErrors++
	}
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
