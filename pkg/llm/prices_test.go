package llm_test

import (
	"context"
	"math"
	"testing"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

func TestPriceMoney(t *testing.T) {
	t.Parallel()
	p := llm.Price{Input: 2, CachedInput: 0.5, Output: 8, Reasoning: 10}
	u := llm.Usage{PromptTokens: 3_000_000, CachedTokens: 1_000_000, CompletionTokens: 2_000_000, ReasoningTokens: 500_000}
	// 2M uncached × 2 + 1M cached × 0.5 + 1.5M output × 8 + 0.5M reasoning × 10
	if got, want := p.Money(u), 4+0.5+12+5.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("Money(%+v) = %v, want %v", u, got, want)
	}
	// Unset cached and reasoning prices fall back to input and output.
	q := llm.Price{Input: 1, Output: 4}
	if got, want := q.Money(u), 3+8.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("Money without cached/reasoning prices = %v, want %v", got, want)
	}
}

func TestBuiltinPriceTakesTheLongestPrefix(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]float64{"gpt-4o-2024-08-06": 2.50, "gpt-4o-mini-2024-07-18": 0.15, "o3-mini": 1.10, "o3": 2.00} {
		p, ok := llm.BuiltinPrice(model)
		if !ok || p.Input != want {
			t.Errorf("BuiltinPrice(%q) = %+v, %v; want input %v", model, p, ok, want)
		}
	}
	if p, ok := llm.BuiltinPrice("simulated-sql-model"); ok {
		t.Errorf("an unknown model has a built-in price: %+v", p)
	}
}

// TestCallMoney: a call's usage carries its money at the endpoint's price
// for the model, the built-in price without one, and the endpoint's
// AnyModel price over the built-in one.
func TestCallMoney(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := sim(t, llmsim.Config{Dataset: ds})
	priced := llm.Price{Input: 1000, Output: 3000}
	for _, tt := range []struct {
		name   string
		prices llm.Prices
		price  llm.Price
	}{
		{"configured", llm.Prices{"gpt-4o": priced}, priced},
		{"built-in", nil, llm.Price{Input: 2.50, CachedInput: 1.25, Output: 10}},
		{"any model zero", llm.Prices{llm.AnyModel: {}}, llm.Price{}},
	} {
		c := client(t, llm.Config{BaseURL: ts.URL + "/v1", Prices: tt.prices})
		resp, err := c.Chat(context.Background(), generate(ds.Examples[3].Question, 1))
		if err != nil {
			t.Fatal(err)
		}
		u := resp.Usage
		want := tt.price.Money(u)
		if u.Money != want || (tt.price != llm.Price{}) && want <= 0 {
			t.Errorf("%s: usage %+v has money %v, want %v", tt.name, u, u.Money, want)
		}
	}
}
