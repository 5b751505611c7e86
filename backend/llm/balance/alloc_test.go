package balance

import (
	"testing"
	"time"
)

// TestAttemptsAllocations holds a request's walk and reports at zero
// allocations.
func TestAttemptsAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	tests := []struct {
		desc    string
		layout  string
		opts    Options
		evicted []string
		outcome Outcome
	}{
		{desc: "healthy, first answers", layout: "a1 a2 a3|b1", outcome: Success},
		{desc: "some evicted, real clock", layout: "a1 a2 a3|b1", opts: Options{Now: time.Now}, evicted: []string{"a1", "b1"}, outcome: Success},
		{desc: "all evicted, failures", layout: "a1 a2|b1", evicted: []string{"a1", "a2", "b1"}, outcome: ServerError},
		{desc: "32 by 32", layout: bigLayout(32, 32), outcome: ClientError},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s, _ := newTestSet(t, tt.layout, tt.opts)
			for _, name := range tt.evicted {
				member(t, s, name).Report(RateLimited, time.Hour)
			}
			rnd := uint64(0)
			allocs := testing.AllocsPerRun(1000, func() {
				rnd++
				it := s.Attempts(rnd)
				for {
					_, m, ok := it.Next()
					if !ok {
						break
					}
					m.Report(tt.outcome, 0)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per request, want 0", allocs)
			}
		})
	}
}

// bigLayout is groups of providers named g<group>p<provider>.
func bigLayout(groups, providers int) string {
	var b []byte
	for g := range groups {
		if g > 0 {
			b = append(b, '|')
		}
		for p := range providers {
			b = append(b, ' ', 'g')
			b = appendInt(b, g)
			b = append(b, 'p')
			b = appendInt(b, p)
		}
	}
	return string(b)
}

func appendInt(b []byte, n int) []byte {
	if n >= 10 {
		b = appendInt(b, n/10)
	}
	return append(b, byte('0'+n%10))
}
