package cost

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/llm"
)

func TestCallsByEndpointAndModel(t *testing.T) {
	t.Parallel()
	calls := []struct {
		u      llm.Usage
		failed bool
	}{
		{llm.Usage{Endpoint: "fast", Model: "gpt-4o", PromptTokens: 100, CompletionTokens: 10, Attempts: 1, Latency: time.Second}, false},
		{llm.Usage{Endpoint: "fast", Model: "gpt-4o", PromptTokens: 50, CompletionTokens: 5, Attempts: 2, RateLimited: 1}, false},
		{llm.Usage{Endpoint: "slow", Model: "gpt-4o", PromptTokens: 7, Attempts: 8}, true},
		{llm.Usage{Endpoint: "default", Model: "meta-llama/Llama-3-8B", PromptTokens: 1, CompletionTokens: 1, Attempts: 1}, false},
		{llm.Usage{}, true},
	}
	var c Cost
	for _, cl := range calls {
		c.Call(cl.u, cl.failed)
	}
	tests := []struct {
		key  string
		want ModelCost
	}{
		{"fast/gpt-4o", ModelCost{Calls: 2, PromptTokens: 150, CompletionTokens: 15, Attempts: 3, RateLimited: 1, Latency: time.Second}},
		{"slow/gpt-4o", ModelCost{Calls: 1, Errors: 1, PromptTokens: 7, Attempts: 8}},
		{"default/meta-llama/Llama-3-8B", ModelCost{Calls: 1, PromptTokens: 1, CompletionTokens: 1, Attempts: 1}},
		{"unknown/unknown", ModelCost{Calls: 1, Errors: 1}},
	}
	for _, tt := range tests {
		got := c.ByModel[tt.key]
		if got == nil || *got != tt.want {
			t.Errorf("ByModel[%q] = %+v, want %+v", tt.key, got, tt.want)
		}
	}
	// Totals keep their meaning: every call, whatever its model.
	if c.LLMCalls != 5 || c.LLMErrors != 2 || c.LLM.PromptTokens != 158 || c.LLM.Endpoint != "" || len(c.ByModel) != 4 {
		t.Errorf("totals %+v", c)
	}

	// Merging two ledgers adds the breakdowns without sharing them.
	l := Ledger{}
	l.Stage("generate").Add(c)
	o := Ledger{"generate": &Cost{}, "vote": &Cost{}}
	o["generate"].Call(llm.Usage{Endpoint: "fast", Model: "gpt-4o", PromptTokens: 1}, false)
	o["vote"].Call(llm.Usage{Endpoint: "slow", Model: "o3"}, false)
	l.Merge(o)
	if m := l["generate"].ByModel["fast/gpt-4o"]; m.Calls != 3 || m.PromptTokens != 151 {
		t.Errorf("merged fast/gpt-4o %+v", m)
	}
	if c.ByModel["fast/gpt-4o"].Calls != 2 {
		t.Error("adding c into the ledger shares its breakdown")
	}
	tot := l.Total()
	if tot.LLMCalls != 7 || tot.ByModel["slow/o3"].Calls != 1 || tot.ByModel["fast/gpt-4o"].Calls != 3 {
		t.Errorf("total %+v", tot)
	}
	sum := 0
	for _, m := range tot.ByModel {
		sum += m.Calls
	}
	if sum != tot.LLMCalls {
		t.Errorf("breakdown sums to %d calls, total says %d", sum, tot.LLMCalls)
	}
}

// TestJSONWithoutCallsUnchanged: the breakdown and the usage's endpoint and
// model are omitted where there is nothing to say, so stored costs read as
// before.
func TestJSONWithoutCallsUnchanged(t *testing.T) {
	t.Parallel()
	var c Cost
	c.Query(time.Millisecond, false)
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"llm_calls":0,"llm":{"prompt_tokens":0,"completion_tokens":0,"reasoning_tokens":0,"cached_tokens":0,"latency_ns":0,"attempts":0,"rate_limited":0,"limiter_wait_ns":0},"llm_errors":0,"warehouse_queries":1,"warehouse_errors":0,"warehouse_time_ns":1000000}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
	c.Call(llm.Usage{Endpoint: "fast", Model: "gpt-4o", PromptTokens: 3}, false)
	b, _ = json.Marshal(c)
	if !strings.Contains(string(b), `"by_model":{"fast/gpt-4o":{"calls":1,"errors":0,"prompt_tokens":3`) {
		t.Errorf("JSON with a call: %s", b)
	}
	var back Cost
	if err := json.Unmarshal(b, &back); err != nil || back.ByModel["fast/gpt-4o"].PromptTokens != 3 {
		t.Errorf("round trip: %v %+v", err, back)
	}
}

// TestMoneyByModel: a call's money is added to its model's line and to the
// totals, and the cached share is what the providers cached of the prompts.
func TestMoneyByModel(t *testing.T) {
	t.Parallel()
	var c Cost
	c.Call(llm.Usage{Endpoint: "a", Model: "m", PromptTokens: 1000, CachedTokens: 600, Money: 0.25}, false)
	c.Call(llm.Usage{Endpoint: "a", Model: "m", PromptTokens: 1000, Money: 0.5}, false)
	c.Call(llm.Usage{Endpoint: "b", Model: "m", PromptTokens: 2000, CachedTokens: 200, Money: 1}, false)
	if got := c.ByModel["a/m"].Money; got != 0.75 {
		t.Errorf("a/m money %v, want 0.75", got)
	}
	if c.Money() != 1.75 {
		t.Errorf("total money %v, want 1.75", c.Money())
	}
	if got := c.CachedShare(); got != 0.2 {
		t.Errorf("cached share %v, want 0.2 (800 of 4000)", got)
	}
}
