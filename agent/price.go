package agent

// Price is what a model costs, in micro-USD per million tokens.
type Price struct {
	Input       int64 `toml:"input" json:"input"`
	Output      int64 `toml:"output" json:"output"`
	CachedInput int64 `toml:"cached_input" json:"cached_input"`
}

// PriceTable maps "provider:model" (or "provider:*" for every model of a
// provider) to its price. A model with no entry costs nothing, which is
// right for the offline and script models and for local servers.
type PriceTable map[string]Price

// Lookup returns the price of provider:model, falling back to provider:*.
func (t PriceTable) Lookup(provider, model string) (Price, bool) {
	if p, ok := t[provider+":"+model]; ok {
		return p, true
	}
	p, ok := t[provider+":*"]
	return p, ok
}

// Cost returns what u cost on provider:model, in micro-USD, rounded down
// once over the whole sum so that many small calls do not each lose their
// fraction.
func (t PriceTable) Cost(provider, model string, u Usage) int64 {
	p, ok := t.Lookup(provider, model)
	if !ok {
		return u.ReportedMicroUSD
	}
	cached := min(max(u.CachedInputTokens, 0), u.InputTokens)
	fresh := u.InputTokens - cached
	total := fresh*p.Input + cached*p.CachedInput + u.OutputTokens*p.Output
	return total/1_000_000 + u.ReportedMicroUSD
}

// Merge returns t with every entry of over added or replaced.
func (t PriceTable) Merge(over PriceTable) PriceTable {
	out := make(PriceTable, len(t)+len(over))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// DefaultPrices are list prices of the default models and their close
// relatives, in micro-USD per million tokens, as published by the
// providers. Config's [prices] overrides or adds to them.
var DefaultPrices = PriceTable{
	"anthropic:claude-sonnet-4-5": {Input: 3_000_000, Output: 15_000_000, CachedInput: 300_000},
	"anthropic:claude-haiku-4-5":  {Input: 1_000_000, Output: 5_000_000, CachedInput: 100_000},
	"anthropic:claude-opus-4-1":   {Input: 15_000_000, Output: 75_000_000, CachedInput: 1_500_000},
	"openai:gpt-4.1":              {Input: 2_000_000, Output: 8_000_000, CachedInput: 500_000},
	"openai:gpt-4.1-mini":         {Input: 400_000, Output: 1_600_000, CachedInput: 100_000},
	"openai:gpt-4o":               {Input: 2_500_000, Output: 10_000_000, CachedInput: 1_250_000},
	"openai:gpt-4o-mini":          {Input: 150_000, Output: 600_000, CachedInput: 75_000},
}
