package balance

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentAttemptsAndReports runs many requests at once against one
// Set while the clock moves: every walk must still yield each provider
// exactly once, and the counters must add up to what was reported.
func TestConcurrentAttemptsAndReports(t *testing.T) {
	const (
		workers  = 8
		requests = 3000
	)
	s, c := newTestSet(t, "a1 a2 a3|b1 b2|c1", Options{BaseEviction: time.Millisecond, MaxEviction: 50 * time.Millisecond})
	n := len(s.members)
	reported := make([]atomic.Uint64, n)
	failed := make([]atomic.Uint64, n)
	index := func(m *Member) int {
		for i := range s.members {
			if &s.members[i] == m {
				return i
			}
		}
		t.Errorf("member %s is not the Set's", m.Name())
		return 0
	}

	stop := make(chan struct{})
	var ticker sync.WaitGroup
	ticker.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				c.advance(100 * time.Microsecond)
				_ = s.Health()
			}
		}
	})

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			seen := make([]bool, n)
			for r := range requests {
				clear(seen)
				it := s.Attempts(uint64(w*requests + r))
				attempts := 0
				for {
					name, m, ok := it.Next()
					if !ok {
						break
					}
					i := index(m)
					if seen[i] || name != m.Name() {
						t.Errorf("walk yielded %s twice or with the wrong member", name)
						return
					}
					seen[i] = true
					// Fail over across the first few, as a server would.
					if attempts < 3 {
						o := Outcome((w + r + attempts) % 6)
						m.Report(o, time.Duration(r%3)*time.Millisecond)
						reported[i].Add(1)
						if !o.healthy() {
							failed[i].Add(1)
						}
					}
					attempts++
				}
				if attempts != n {
					t.Errorf("walk yielded %d of %d providers", attempts, n)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	ticker.Wait()

	for i, h := range s.Health() {
		if h.Requests != reported[i].Load() || h.Failures != failed[i].Load() {
			t.Errorf("%s: %d requests, %d failures; reported %d, %d", h.Name, h.Requests, h.Failures, reported[i].Load(), failed[i].Load())
		}
		if h.Score < 0 || h.Score > 1 {
			t.Errorf("%s: score %v", h.Name, h.Score)
		}
		if h.Requests == 0 {
			t.Errorf("%s was never reported on", h.Name)
		}
	}
}
