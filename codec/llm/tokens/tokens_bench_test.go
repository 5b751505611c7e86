package tokens

import "testing"

// BenchmarkCount4KB counts prompts of about 4 KB with this package and,
// beside it, with the library it reproduces: prompt4KB and the corpora in
// testdata.
func BenchmarkCount4KB(b *testing.B) {
	prompts := []struct {
		name string
		text []byte
	}{{"prompt", prompt4KB()}}
	for _, name := range corpora {
		prompts = append(prompts, struct {
			name string
			text []byte
		}{name, corpus(b, name)})
	}
	for _, e := range []Encoding{O200kBase, Cl100kBase} {
		for _, p := range prompts {
			b.Run(string(e)+"/"+p.name+"/counter", func(b *testing.B) {
				CountEncoding(e, p.text) // load outside the timing
				b.SetBytes(int64(len(p.text)))
				b.ReportAllocs()
				for b.Loop() {
					CountEncoding(e, p.text)
				}
			})
			b.Run(string(e)+"/"+p.name+"/library", func(b *testing.B) {
				ref := references()[e]
				text := string(p.text)
				b.SetBytes(int64(len(p.text)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := ref.Count(text); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	b.Run("estimateWords", func(b *testing.B) {
		p := prompt4KB()
		b.SetBytes(int64(len(p)))
		b.ReportAllocs()
		for b.Loop() {
			EstimateWords(p)
		}
	})
}

// BenchmarkLoad builds an encoder from the library's vocabulary, which the
// library itself loads once a process, before the first run.
func BenchmarkLoad(b *testing.B) {
	for _, e := range []struct {
		name string
		load func() *encoder
	}{
		{"o200k_base", func() *encoder { return newEncoder("o200k_base", o200kSize) }},
		{"cl100k_base", func() *encoder { return newEncoder("cl100k_base", cl100kSize) }},
	} {
		b.Run(e.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.load()
			}
		})
	}
}

func BenchmarkEncodingFor(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		EncodingFor("anthropic.claude-3-5-sonnet-20240620-v1:0")
	}
}
