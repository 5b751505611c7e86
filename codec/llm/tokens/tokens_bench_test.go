package tokens

import "testing"

func BenchmarkCount4KB(b *testing.B) {
	p := prompt4KB()
	for _, e := range []Encoding{O200kBase, Cl100kBase} {
		b.Run(string(e), func(b *testing.B) {
			CountEncoding(e, p) // load outside the timing
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				CountEncoding(e, p)
			}
		})
	}
	b.Run("estimateWords", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		b.ReportAllocs()
		for b.Loop() {
			EstimateWords(p)
		}
	})
}

func BenchmarkEncodingFor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		EncodingFor("anthropic.claude-3-5-sonnet-20240620-v1:0")
	}
}
