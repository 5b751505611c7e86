package balance

import (
	"cmp"
	"math"
	"slices"
	"testing"
	"time"
)

// model is the health rules written plainly, one provider at a time, for
// the fuzz target to hold the Set to.
type model struct {
	group                  int
	score                  float64
	until                  time.Duration // 0: none
	evictions, consecutive int
	requests, failures     uint64
	base, maxEviction      time.Duration
}

func (m *model) report(o Outcome, retryAfter, now time.Duration) {
	m.requests++
	if o == Success || o == ClientError {
		m.score += 0.25 * (1 - m.score)
		if m.score >= 0.999 {
			m.score = 1
		}
		m.consecutive, m.evictions, m.until = 0, 0, 0
		return
	}
	m.failures++
	m.consecutive++
	m.score *= 0.75
	retryAfter = min(retryAfter, m.maxEviction)
	if now < m.until {
		m.until = max(m.until, now+retryAfter)
		return
	}
	m.evictions++
	backoff := time.Duration(math.Min(float64(m.base)*math.Pow(2, float64(m.evictions-1)), float64(m.maxEviction)))
	m.until = now + max(backoff, retryAfter)
}

func (m *model) live(now time.Duration) bool { return m.until <= now }

// FuzzAttempts drives a Set and the model with the same reports and clock
// steps, and checks every walk's order and every Health against the model.
func FuzzAttempts(f *testing.F) {
	f.Add([]byte("a3\x00\x11\x22\x33\x02\x02\x00\x40\x02"), uint8(5))
	f.Add([]byte{1, 2, 1, 3, 1, 4, 1, 5, 2, 0, 9, 2, 3}, uint8(3))
	f.Add([]byte{1, 0x0d, 1, 0x11, 1, 0x15, 2, 0x30, 2, 3, 1, 0x06, 2}, uint8(9))
	f.Fuzz(func(t *testing.T, ops []byte, shape uint8) {
		// shape: up to 4 groups of 1 to 4 providers.
		groups := int(shape%4) + 1
		var layout []int
		var items [][]int
		var names [][]string
		n := 0
		for g := range groups {
			size := int(shape>>(2+g%3))%4 + 1
			layout = append(layout, size)
			items = append(items, nil)
			names = append(names, nil)
			for range size {
				items[g] = append(items[g], n)
				names[g] = append(names[g], string(rune('a'+n)))
				n++
			}
		}
		c := &fakeClock{}
		base, maxEviction := 100*time.Millisecond, 3*time.Second
		s := New(items, names, Options{BaseEviction: base, MaxEviction: maxEviction, Now: c.Now})
		models := make([]model, n)
		for g, size := range layout {
			for i := range size {
				models[items[g][i]] = model{group: g, score: 1, base: base, maxEviction: maxEviction}
			}
		}
		now := func() time.Duration { return c.Now().Sub(clockStart) }

		for len(ops) > 0 {
			op := ops[0]
			ops = ops[1:]
			arg := byte(0)
			if len(ops) > 0 {
				arg = ops[0]
				ops = ops[1:]
			}
			switch op % 4 {
			case 0: // time passes
				c.advance(time.Duration(arg) * 25 * time.Millisecond)
			case 1: // a report
				i := int(arg) % n
				o := Outcome((op >> 2) % 6)
				retryAfter := time.Duration(op>>5) * 400 * time.Millisecond
				s.members[i].Report(o, retryAfter)
				models[i].report(o, retryAfter, now())
			case 2: // a walk
				checkWalk(t, s, models, uint64(arg), now())
			case 3:
				checkHealth(t, s, models, now())
			}
		}
		checkWalk(t, s, models, 0, now())
		checkHealth(t, s, models, now())
	})
}

func checkWalk(t *testing.T, s *Set[int], models []model, rnd uint64, now time.Duration) {
	t.Helper()
	var got []int
	it := s.Attempts(rnd)
	for it.More() {
		item, m, ok := it.Next()
		if !ok || m != &s.members[item] {
			t.Fatalf("More without Next, or item %d with member %s", item, m.Name())
		}
		got = append(got, item)
	}
	// Live providers group by group (any order inside a group), then the
	// evicted by group and eviction end.
	var live, evicted []int
	for i := range models {
		if models[i].live(now) {
			live = append(live, i)
		} else {
			evicted = append(evicted, i)
		}
	}
	byGroup := func(a, b int) int { return cmp.Compare(models[a].group, models[b].group) }
	slices.SortStableFunc(live, byGroup)
	slices.SortStableFunc(evicted, func(a, b int) int {
		return cmp.Or(byGroup(a, b), cmp.Compare(models[a].until, models[b].until), cmp.Compare(a, b))
	})
	if len(got) != len(models) {
		t.Fatalf("walk %v, want every one of %d providers", got, len(models))
	}
	gotLive := slices.Clone(got[:len(live)])
	slices.SortStableFunc(gotLive, func(a, b int) int { return cmp.Or(byGroup(a, b), cmp.Compare(a, b)) })
	slices.SortStableFunc(live, func(a, b int) int { return cmp.Or(byGroup(a, b), cmp.Compare(a, b)) })
	for k := range live {
		if models[got[k]].group != models[live[k]].group {
			t.Fatalf("walk %v: live providers out of group order (live %v)", got, live)
		}
	}
	if !slices.Equal(gotLive, live) || !slices.Equal(got[len(live):], evicted) {
		t.Fatalf("walk %v, want live %v then evicted %v", got, live, evicted)
	}
}

func checkHealth(t *testing.T, s *Set[int], models []model, now time.Duration) {
	t.Helper()
	for i, h := range s.Health() {
		m := &models[i]
		evicted := !m.live(now)
		var until time.Time
		if evicted {
			until = clockStart.Add(m.until)
		}
		if h.Group != m.group || h.Score != m.score || h.Evicted != evicted || !h.EvictedUntil.Equal(until) ||
			h.ConsecutiveFailures != m.consecutive || h.Requests != m.requests || h.Failures != m.failures {
			t.Fatalf("provider %d: Health %+v, model %+v (now %v)", i, h, *m, now)
		}
	}
}
