package cost

import (
	"math"
	"math/big"
	"strconv"
	"testing"

	"github.com/relaygate/gateway/config"
)

// catalog compiles catalog documents given inline, merged in order.
func catalog(t testing.TB, docs ...string) *Catalog {
	t.Helper()
	var sources []config.ModelCatalogSource
	for _, doc := range docs {
		var c config.ModelCatalog
		if errs := config.ParseModelCatalog([]byte(doc), &c); len(errs) > 0 {
			t.Fatalf("catalog does not parse: %v", errs)
		}
		sources = append(sources, config.ModelCatalogSource{Inline: &c})
	}
	cat, err := Load(sources, "")
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// decimal parses a decimal as the float64 nearest to it: what an exact
// computation must give.
func decimal(t testing.TB, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const ratesCatalog = `
providers:
  openai:
    models:
      gpt-4o: {rates: {input: "2.5", output: "10", cacheRead: "1.25"}}
      o3: {rates: {input: "2", output: "8", reasoning: "12"}}
      audio: {rates: {input: "0.15", output: "0.6", inputAudio: "10", outputAudio: "20"}}
      free: {rates: {input: "0", output: "0"}}
      tagged-only: {tags: [preview]}
      cheap: {rates: {input: "0.075"}}
      dear: {rates: {input: "1000000000", output: "1000000000"}}
  anthropic:
    models:
      claude-sonnet-4-5: {rates: {input: "3", output: "15", cacheRead: "0.3", cacheWrite: "3.75"}}
      output-only: {rates: {output: "15"}}
`

func TestCostRates(t *testing.T) {
	c := catalog(t, ratesCatalog)
	tests := []struct {
		desc, provider, model string
		u                     Usage
		want                  string // the exact decimal; "" when not priced
	}{
		{"input and output", "openai", "gpt-4o", Usage{Input: 1000, Output: 500}, "0.0075"},
		{"cache read at its own rate", "openai", "gpt-4o", Usage{Input: 700, CacheRead: 300, Output: 500}, "0.007125"},
		{"cache write falls back to the input rate", "openai", "gpt-4o", Usage{CacheWrite: 1_000_000}, "2.5"},
		{"reasoning falls back to the output rate", "openai", "gpt-4o", Usage{Reasoning: 2000}, "0.02"},
		{"reasoning at its own rate", "openai", "o3", Usage{Output: 1000, Reasoning: 1000}, "0.02"},
		{"cache read falls back to the input rate", "openai", "o3", Usage{CacheRead: 1_000_000}, "2"},
		{"audio at its own rates", "openai", "audio", Usage{Input: 1000, InputAudio: 100, Output: 500, OutputAudio: 50}, "0.00245"},
		{"audio falls back to the text rates", "openai", "gpt-4o", Usage{InputAudio: 1000, OutputAudio: 1000}, "0.0125"},
		{"every kind", "anthropic", "claude-sonnet-4-5", Usage{Input: 1000, CacheRead: 2000, CacheWrite: 500, Output: 500, Reasoning: 100}, "0.014475"},
		{"a kind with no rate and no fallback is free", "anthropic", "output-only", Usage{Input: 1_000_000, CacheRead: 5, Output: 1000}, "0.015"},
		{"free model is priced", "openai", "free", Usage{Input: 10, Output: 10}, "0"},
		{"no usage", "openai", "gpt-4o", Usage{}, "0"},
		{"negative counts are zero", "openai", "gpt-4o", Usage{Input: -5, Output: 1000}, "0.01"},
		{"sub-micro amounts are exact", "openai", "cheap", Usage{Input: 333}, "0.000024975"},
		{"one token at the smallest price step", "openai", "cheap", Usage{Input: 1}, "0.000000075"},
		{"largest price and token counts do not overflow", "openai", "dear", Usage{Input: math.MaxInt64, Output: math.MaxInt64}, "18446744073709551614000"},
		{"model without rates", "openai", "tagged-only", Usage{Input: 1}, ""},
		{"unknown model", "openai", "gpt-5", Usage{Input: 1}, ""},
		{"unknown provider", "azure.ai.openai", "gpt-4o", Usage{Input: 1}, ""},
		{"models are per provider", "anthropic", "gpt-4o", Usage{Input: 1}, ""},
		{"names are exact", "openai", "GPT-4o", Usage{Input: 1}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := c.Cost(tc.provider, tc.model, tc.u)
			if tc.want == "" {
				if ok || got != 0 {
					t.Errorf("Cost = %v, %v; want not priced", got, ok)
				}
				return
			}
			if want := decimal(t, tc.want); !ok || got != want {
				t.Errorf("Cost = %v, %v; want %v (exactly)", got, ok, want)
			}
		})
	}
}

const tieredCatalog = `
providers:
  gcp.gemini:
    models:
      gemini-2.5-pro:
        rates: {input: "1.25", output: "10", cacheRead: "0.125"}
        tiers:
        - {contextOver: 200000, rates: {input: "2.5", output: "15"}}
        - {contextOver: 500000, rates: {input: "4"}}
      tier-only:
        tiers: [{contextOver: 100000, rates: {input: "1"}}]
      empty-tier:
        rates: {input: "1"}
        tiers: [{contextOver: 10, rates: {}}]
`

func TestCostTiers(t *testing.T) {
	c := catalog(t, tieredCatalog)
	tests := []struct {
		desc, model string
		u           Usage
		want        string
	}{
		{"below the first bound", "gemini-2.5-pro", Usage{Input: 100_000, Output: 1000}, "0.135"},
		{"on the bound: base rates", "gemini-2.5-pro", Usage{Input: 200_000, Output: 1000}, "0.26"},
		{"above the bound: the whole exchange at the tier's rates", "gemini-2.5-pro", Usage{Input: 250_000, Output: 1000}, "0.64"},
		{"cached tokens count toward the context", "gemini-2.5-pro", Usage{Input: 150_000, CacheRead: 60_000}, "0.3825"},
		{"cache writes and input audio count too", "gemini-2.5-pro", Usage{Input: 100_000, CacheWrite: 50_000, InputAudio: 50_001}, "0.5000025"},
		{"output does not", "gemini-2.5-pro", Usage{Input: 200_000, Output: 1_000_000}, "10.25"},
		// The second tier sets only input: output is the base rate, not the first tier's.
		{"the highest bound exceeded wins, over the base rates", "gemini-2.5-pro", Usage{Input: 600_000, Output: 1000}, "2.41"},
		{"a tier keeps the base rates it does not set", "gemini-2.5-pro", Usage{Input: 1, CacheRead: 250_000}, "0.0312525"},
		{"a tier-only model is unpriced below its bound", "tier-only", Usage{Input: 100_000}, ""},
		{"and priced above it", "tier-only", Usage{Input: 100_001}, "0.100001"},
		{"an empty tier keeps the base rates", "empty-tier", Usage{Input: 1_000_000}, "1"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := c.Cost("gcp.gemini", tc.model, tc.u)
			if tc.want == "" {
				if ok {
					t.Errorf("Cost = %v, priced; want not priced", got)
				}
				return
			}
			if want := decimal(t, tc.want); !ok || got != want {
				t.Errorf("Cost = %v, %v; want %v", got, ok, want)
			}
		})
	}
}

// TestCostTiersBuiltInCode: tiers out of order (a catalog built in code,
// not decoded) are applied by bound, not by position.
func TestCostTiersBuiltInCode(t *testing.T) {
	one, four := config.MoneyFromMicros(1_000_000), config.MoneyFromMicros(4_000_000)
	two := config.MoneyFromMicros(2_000_000)
	c := &config.ModelCatalog{Providers: map[string]config.CatalogProvider{"p": {Models: map[string]config.CatalogModel{
		"m": {Rates: config.CatalogRates{Input: &one}, Tiers: []config.CatalogTier{
			{ContextOver: 500, Rates: config.CatalogRates{Input: &four}},
			{ContextOver: 100, Rates: config.CatalogRates{Input: &two}},
		}},
	}}}}
	cat, err := Load([]config.ModelCatalogSource{{Inline: c}}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		input int64
		want  float64
	}{{100, 0.0001}, {101, 0.000202}, {501, 0.002004}} {
		if got, _ := cat.Cost("p", "m", Usage{Input: tc.input}); got != tc.want {
			t.Errorf("%d tokens: %v, want %v", tc.input, got, tc.want)
		}
	}
}

func TestNilCatalog(t *testing.T) {
	var c *Catalog
	if got, ok := c.Cost("openai", "gpt-4o", Usage{Input: 1}); ok || got != 0 {
		t.Errorf("nil catalog priced: %v", got)
	}
	empty, err := Load(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := empty.Cost("openai", "gpt-4o", Usage{Input: 1}); ok {
		t.Error("empty catalog priced a model")
	}
	if c.Lists("openai", "gpt-4o") || empty.Lists("openai", "gpt-4o") {
		t.Error("an empty catalog lists a model")
	}
}

// TestCatalogLists: Lists tells a model the catalog has, priced or not,
// from one it lacks (the server prices an answer by the model that
// answered when the catalog lists it, else by the model asked for).
func TestCatalogLists(t *testing.T) {
	c := catalog(t, ratesCatalog, tieredCatalog)
	if !c.Lists("gcp.gemini", "gemini-2.5-pro") || c.Lists("gcp.gemini", "no-such-model") || c.Lists("no-such-provider", "gemini-2.5-pro") {
		t.Error("Lists disagrees with the catalog")
	}
}

func TestCostDoesNotAllocate(t *testing.T) {
	c := catalog(t, ratesCatalog, tieredCatalog)
	provider, model := "gcp.gemini", "gemini-2.5-pro"
	u := Usage{Input: 300_000, CacheRead: 1000, Output: 2000, Reasoning: 500}
	for _, tc := range []struct {
		desc string
		fn   func()
	}{
		{"tiered hit", func() { c.Cost(provider, model, u) }},
		{"miss", func() { c.Cost(provider, "no-such-model", u) }},
		{"lists", func() { c.Lists(provider, model) }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, tc.fn); n != 0 {
				t.Errorf("%v allocations per lookup, want 0", n)
			}
		})
	}
}

// FuzzCost holds Cost to exact rational arithmetic for any usage and
// prices: the float it returns is the exact cost rounded to float64 (at
// most one rounding more for costs beyond 2^53 picounits).
func FuzzCost(f *testing.F) {
	f.Add(int64(1000), int64(500), int64(300), int64(0), int64(0), int64(2_500_000), int64(10_000_000), int64(1_250_000))
	f.Add(int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64),
		int64(config.MaxMoney*1e6), int64(config.MaxMoney*1e6), int64(config.MaxMoney*1e6))
	f.Add(int64(333), int64(-1), int64(0), int64(7), int64(1), int64(75_000), int64(1), int64(0))
	f.Fuzz(func(t *testing.T, in, out, cacheRead, cacheWrite, reasoning, inRate, outRate, readRate int64) {
		clamp := func(r int64) int64 { return min(max(r, 0), config.MaxMoney*1e6) }
		inRate, outRate, readRate = clamp(inRate), clamp(outRate), clamp(readRate)
		i, o, r := config.MoneyFromMicros(inRate), config.MoneyFromMicros(outRate), config.MoneyFromMicros(readRate)
		c := &config.ModelCatalog{Providers: map[string]config.CatalogProvider{"p": {Models: map[string]config.CatalogModel{
			"m": {Rates: config.CatalogRates{Input: &i, Output: &o, CacheRead: &r}},
		}}}}
		cat, err := Load([]config.ModelCatalogSource{{Inline: c}}, "")
		if err != nil {
			t.Fatal(err)
		}
		u := Usage{Input: in, Output: out, CacheRead: cacheRead, CacheWrite: cacheWrite, Reasoning: reasoning}
		got, ok := cat.Cost("p", "m", u)
		if !ok {
			t.Fatal("not priced")
		}
		// Cache writes take the input rate, reasoning the output rate.
		exact := new(big.Int)
		for _, term := range [][2]int64{{in, inRate}, {out, outRate}, {cacheRead, readRate}, {cacheWrite, inRate}, {reasoning, outRate}} {
			exact.Add(exact, new(big.Int).Mul(big.NewInt(max(term[0], 0)), big.NewInt(term[1])))
		}
		want, _ := new(big.Rat).SetFrac(exact, big.NewInt(1e12)).Float64()
		if exact.IsUint64() && exact.Uint64() <= 1<<53 {
			if got != want {
				t.Fatalf("Cost = %v, want %v exactly (%s picounits)", got, want, exact)
			}
			return
		}
		if math.Abs(got-want) > want*0x1p-51 {
			t.Fatalf("Cost = %v, want %v (%s picounits)", got, want, exact)
		}
	})
}
