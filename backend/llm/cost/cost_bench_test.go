package cost

import "testing"

func BenchmarkCost(b *testing.B) {
	c := catalog(b, ratesCatalog)
	u := Usage{Input: 1200, CacheRead: 1024, Output: 300, Reasoning: 100}
	b.ReportAllocs()
	for b.Loop() {
		c.Cost("openai", "gpt-4o", u)
	}
}

func BenchmarkCostTiered(b *testing.B) {
	c := catalog(b, tieredCatalog)
	u := Usage{Input: 600_000, Output: 2000}
	b.ReportAllocs()
	for b.Loop() {
		c.Cost("gcp.gemini", "gemini-2.5-pro", u)
	}
}

func BenchmarkCostUnknownModel(b *testing.B) {
	c := catalog(b, ratesCatalog)
	u := Usage{Input: 1200}
	b.ReportAllocs()
	for b.Loop() {
		c.Cost("openai", "gpt-5-unknown", u)
	}
}
