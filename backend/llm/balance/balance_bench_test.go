package balance

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAttemptsNextReport is a request that the first provider answers.
func BenchmarkAttemptsNextReport(b *testing.B) {
	cases := []struct {
		desc    string
		layout  string
		evicted []string
	}{
		{desc: "4+1 healthy", layout: "a1 a2 a3 a4|b1"},
		{desc: "4+1 one evicted", layout: "a1 a2 a3 a4|b1", evicted: []string{"a2"}},
		{desc: "32 healthy", layout: bigLayout(1, 32)},
	}
	for _, bc := range cases {
		b.Run(bc.desc, func(b *testing.B) {
			s := benchSet(b, bc.layout, bc.evicted)
			b.ReportAllocs()
			rnd := uint64(0)
			for b.Loop() {
				rnd++
				it := s.Attempts(rnd)
				_, m, _ := it.Next()
				m.Report(Success, 0)
			}
		})
	}
}

// BenchmarkAttemptsFailover is a request whose first two attempts fail and
// whose third is answered.
func BenchmarkAttemptsFailover(b *testing.B) {
	s := benchSet(b, "a1 a2|b1 b2|c1", nil)
	b.ReportAllocs()
	rnd := uint64(0)
	for b.Loop() {
		rnd++
		it := s.Attempts(rnd)
		for i := range 3 {
			_, m, _ := it.Next()
			if i < 2 {
				m.Report(ServerError, 0)
			} else {
				m.Report(Success, 0)
			}
		}
	}
}

// BenchmarkAttemptsParallel is many goroutines on one Set, the gateway's
// shape.
func BenchmarkAttemptsParallel(b *testing.B) {
	s := benchSet(b, "a1 a2 a3 a4|b1", nil)
	var seed atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		rnd := seed.Add(1) << 32
		for pb.Next() {
			rnd++
			it := s.Attempts(rnd)
			_, m, _ := it.Next()
			m.Report(Success, 0)
		}
	})
}

// benchSet builds a Set on the real clock with the named providers evicted
// for an hour.
func benchSet(b *testing.B, layout string, evicted []string) *Set[string] {
	s, _ := newTestSet(b, layout, Options{Now: time.Now})
	for _, name := range evicted {
		member(b, s, name).Report(RateLimited, time.Hour)
	}
	return s
}
