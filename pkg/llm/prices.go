package llm

import "strings"

// Price is what a model costs per million tokens, in the currency of the
// table (the built-in one is in US dollars).
type Price struct {
	// Input is a prompt token the provider did not serve from its cache.
	Input float64 `json:"input"`
	// CachedInput is a prompt token served from the provider's prompt
	// cache (usage.prompt_tokens_details.cached_tokens); 0 with Input set
	// means cached tokens cost as much as others.
	CachedInput float64 `json:"cached_input,omitempty"`
	Output      float64 `json:"output"`
	// Reasoning is a reasoning token (counted within the completion
	// tokens); 0 means reasoning costs what output does.
	Reasoning float64 `json:"reasoning,omitempty"`
}

// Money is what a call's usage costs at p.
func (p Price) Money(u Usage) float64 {
	cached := min(max(u.CachedTokens, 0), u.PromptTokens)
	reasoning := min(max(u.ReasoningTokens, 0), u.CompletionTokens)
	cachedPrice, reasoningPrice := p.CachedInput, p.Reasoning
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	if reasoningPrice == 0 {
		reasoningPrice = p.Output
	}
	return (float64(u.PromptTokens-cached)*p.Input + float64(cached)*cachedPrice +
		float64(u.CompletionTokens-reasoning)*p.Output + float64(reasoning)*reasoningPrice) / 1e6
}

// AnyModel is the Prices key that prices every model of an endpoint not
// listed by name.
const AnyModel = "*"

// Prices maps a model name (or AnyModel) to its price at one endpoint.
type Prices map[string]Price

// lookup is the price of model: the endpoint's own by name, then its
// AnyModel, then the built-in table by the model's family; ok is false
// when none knows the model (its calls are then counted at no cost).
func (ps Prices) lookup(model string) (Price, bool) {
	if p, ok := ps[model]; ok {
		return p, true
	}
	if p, ok := ps[AnyModel]; ok {
		return p, true
	}
	return BuiltinPrice(model)
}

// builtinPrices are public list prices (US dollars per million tokens) of
// common hosted models, by name prefix; the longest prefix wins, so a
// dated snapshot takes its family's price. They change: a configured
// price overrides them.
var builtinPrices = map[string]Price{
	"gpt-4o":            {Input: 2.50, CachedInput: 1.25, Output: 10},
	"gpt-4o-mini":       {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"gpt-4.1":           {Input: 2.00, CachedInput: 0.50, Output: 8},
	"gpt-4.1-mini":      {Input: 0.40, CachedInput: 0.10, Output: 1.60},
	"gpt-4.1-nano":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
	"gpt-5":             {Input: 1.25, CachedInput: 0.125, Output: 10},
	"gpt-5-mini":        {Input: 0.25, CachedInput: 0.025, Output: 2},
	"gpt-5-nano":        {Input: 0.05, CachedInput: 0.005, Output: 0.40},
	"o1":                {Input: 15, CachedInput: 7.50, Output: 60},
	"o1-mini":           {Input: 1.10, CachedInput: 0.55, Output: 4.40},
	"o3":                {Input: 2.00, CachedInput: 0.50, Output: 8},
	"o3-mini":           {Input: 1.10, CachedInput: 0.55, Output: 4.40},
	"o4-mini":           {Input: 1.10, CachedInput: 0.275, Output: 4.40},
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, Output: 4},
	"claude-3-5-sonnet": {Input: 3, CachedInput: 0.30, Output: 15},
	"claude-3-7-sonnet": {Input: 3, CachedInput: 0.30, Output: 15},
	"claude-sonnet-4":   {Input: 3, CachedInput: 0.30, Output: 15},
	"claude-opus-4":     {Input: 15, CachedInput: 1.50, Output: 75},
	"deepseek-chat":     {Input: 0.27, CachedInput: 0.07, Output: 1.10},
	"deepseek-reasoner": {Input: 0.55, CachedInput: 0.14, Output: 2.19},
}

// BuiltinPrice is the built-in list price of model, by its longest known
// name prefix.
func BuiltinPrice(model string) (Price, bool) {
	best, found := "", false
	var p Price
	for prefix, q := range builtinPrices {
		if strings.HasPrefix(model, prefix) && len(prefix) > len(best) {
			best, p, found = prefix, q, true
		}
	}
	return p, found
}
