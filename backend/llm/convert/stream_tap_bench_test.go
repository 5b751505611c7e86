package convert

import "testing"

// BenchmarkChunkTapped is BenchmarkChunk* with the text tap on, the text
// taken after every chunk as a guarding server does.
func BenchmarkChunkTapped(b *testing.B) {
	for _, tc := range maskedChunkCases(b) {
		b.Run(tc.desc, func(b *testing.B) {
			s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "m", IncludeUsage: true})
			s.TapText()
			out, err := s.Feed(nil, tc.prelude)
			if err != nil {
				b.Fatal(err)
			}
			text := s.TakeText(nil)
			b.SetBytes(int64(len(tc.chunk)))
			b.ReportAllocs()
			for b.Loop() {
				if out, err = s.Feed(out[:0], tc.chunk); err != nil {
					b.Fatal(err)
				}
				text = s.TakeText(text[:0])
			}
			if len(out) == 0 || len(text) == 0 {
				b.Fatal("no output")
			}
		})
	}
}
