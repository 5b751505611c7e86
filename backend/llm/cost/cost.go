// Package cost owns the price of an LLM exchange: the model catalog built
// from the sources of config.modelCatalog, and the cost of an exchange's
// token usage under it.
//
// Prices are per million tokens, held as integer millionths of the currency
// unit (config.Money), and a cost is summed exactly in 128-bit integers
// before it becomes a float64, so a catalog of decimal prices gives the
// decimal answer (333 tokens at 0.075 cost 0.000024975, not
// 0.000024974999999999998).
//
// The rules are agentgateway's:
//
//   - A tier applies when the exchange's input context (input, cache read,
//     cache write and input audio tokens) exceeds its contextOver; the tier
//     with the highest such bound wins, and its rates replace the base
//     rates they set, for the whole exchange.
//   - An unset rate falls back: reasoning and output audio to the output
//     rate, cache reads, cache writes and input audio to the input rate (a
//     provider that does not price its cache bills those tokens as input).
//     A kind whose rate and fallback are both unset costs nothing.
//   - A model whose effective rates are all unset (no rates, or only a tier
//     the exchange does not reach) has no price: Cost reports false, as it
//     does for a model the catalog does not list.
package cost

import (
	"cmp"
	"math"
	"math/bits"
	"slices"

	"github.com/relaygate/gateway/config"
)

// Usage is an exchange's tokens, each counted in exactly one field: Input
// excludes the tokens read from or written to the cache and input audio;
// Output excludes reasoning and output audio. A provider that reports
// totals (OpenAI's prompt_tokens include cached tokens, its
// completion_tokens include reasoning) must have those parts subtracted.
// Negative counts count as zero.
type Usage struct {
	Input, Output, CacheRead, CacheWrite, Reasoning int64
	InputAudio, OutputAudio                         int64
}

// Catalog is a compiled model catalog. It is immutable and safe for
// concurrent use; the zero value and nil price nothing.
type Catalog struct {
	models map[modelKey]*model
}

// modelKey is comparable, so a lookup by it does not allocate.
type modelKey struct{ provider, model string }

// model is one model's compiled prices.
type model struct {
	base  rates
	tiers []tier // in increasing contextOver order
}

type tier struct {
	contextOver uint64
	rates       rates
}

// Token kinds, the indexes of rates.micros.
const (
	kindInput = iota
	kindOutput
	kindCacheRead
	kindCacheWrite
	kindReasoning
	kindInputAudio
	kindOutputAudio
	numKinds
)

// fallback is the kind whose rate an unset rate takes.
var fallback = [numKinds]int{
	kindInput:       kindInput,
	kindOutput:      kindOutput,
	kindCacheRead:   kindInput,
	kindCacheWrite:  kindInput,
	kindReasoning:   kindOutput,
	kindInputAudio:  kindInput,
	kindOutputAudio: kindOutput,
}

// rates are effective prices, fallbacks applied, in millionths per million
// tokens.
type rates struct {
	micros [numKinds]int64
	priced bool // some rate was set
}

// Lists reports whether the catalog lists a model of a provider, priced
// or not. It does not allocate.
func (c *Catalog) Lists(provider, modelName string) bool {
	return c != nil && c.models[modelKey{provider, modelName}] != nil
}

// Cost returns the cost of u for a model of a provider, in the catalog's
// currency units, and whether the catalog prices that model. It does not
// allocate.
func (c *Catalog) Cost(provider, modelName string, u Usage) (float64, bool) {
	if c == nil {
		return 0, false
	}
	m := c.models[modelKey{provider, modelName}]
	if m == nil {
		return 0, false
	}
	tokens := [numKinds]uint64{
		kindInput:       count(u.Input),
		kindOutput:      count(u.Output),
		kindCacheRead:   count(u.CacheRead),
		kindCacheWrite:  count(u.CacheWrite),
		kindReasoning:   count(u.Reasoning),
		kindInputAudio:  count(u.InputAudio),
		kindOutputAudio: count(u.OutputAudio),
	}
	r := m.ratesFor(contextTokens(tokens))
	if !r.priced {
		return 0, false
	}
	// Each product is below 2^63 * 2^50 (config.MaxMoney), so the sum of
	// seven stays far below 2^128.
	var hi, lo uint64
	for k, n := range tokens {
		ph, pl := bits.Mul64(n, uint64(r.micros[k]))
		var carry uint64
		lo, carry = bits.Add64(lo, pl, 0)
		hi += ph + carry
	}
	// tokens × millionths per million tokens = 1e-12 units.
	return (float64(hi)*(1<<64) + float64(lo)) / 1e12, true
}

// ratesFor returns the rates of the last tier whose bound the context
// exceeds, or the base rates.
func (m *model) ratesFor(context uint64) *rates {
	for i := len(m.tiers) - 1; i >= 0; i-- {
		if context > m.tiers[i].contextOver {
			return &m.tiers[i].rates
		}
	}
	return &m.base
}

// contextTokens is the exchange's input context, which selects the tier.
func contextTokens(t [numKinds]uint64) uint64 {
	return saturatingAdd(saturatingAdd(t[kindInput], t[kindCacheRead]), saturatingAdd(t[kindCacheWrite], t[kindInputAudio]))
}

func saturatingAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}

func count(n int64) uint64 { return uint64(max(n, 0)) }

// compileModel resolves a merged catalog entry: tier rates over the base
// rates they leave unset, then the fallbacks.
func compileModel(m *config.CatalogModel) *model {
	out := &model{base: compileRates(&m.Rates, nil)}
	for _, t := range m.Tiers {
		out.tiers = append(out.tiers, tier{t.ContextOver, compileRates(&t.Rates, &m.Rates)})
	}
	// A decoded catalog's tiers are in order already; one built in code
	// may not be.
	slices.SortStableFunc(out.tiers, func(a, b tier) int {
		return cmp.Compare(a.contextOver, b.contextOver)
	})
	return out
}

// compileRates turns set rates (each taken from r, else from base) into
// effective rates.
func compileRates(r, base *config.CatalogRates) rates {
	set := rateList(r)
	if base != nil {
		for k, b := range rateList(base) {
			if set[k] == nil {
				set[k] = b
			}
		}
	}
	var out rates
	for k := range set {
		if set[k] != nil {
			out.priced = true
		}
		switch {
		case set[k] != nil:
			out.micros[k] = set[k].Micros()
		case set[fallback[k]] != nil:
			out.micros[k] = set[fallback[k]].Micros()
		}
	}
	return out
}

// rateList indexes a config rate set by kind.
func rateList(r *config.CatalogRates) [numKinds]*config.Money {
	return [numKinds]*config.Money{
		kindInput:       r.Input,
		kindOutput:      r.Output,
		kindCacheRead:   r.CacheRead,
		kindCacheWrite:  r.CacheWrite,
		kindReasoning:   r.Reasoning,
		kindInputAudio:  r.InputAudio,
		kindOutputAudio: r.OutputAudio,
	}
}
