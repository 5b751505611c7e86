package balance

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is a clock the tests move by hand; safe for concurrent use.
type fakeClock struct{ offset atomic.Int64 }

var clockStart = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

func (c *fakeClock) Now() time.Time { return clockStart.Add(time.Duration(c.offset.Load())) }

func (c *fakeClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// newTestSet builds a Set whose items are the providers' names, from groups
// written "a1 a2|b1|c1 c2".
func newTestSet(t testing.TB, layout string, opts Options) (*Set[string], *fakeClock) {
	t.Helper()
	c := &fakeClock{}
	if opts.Now == nil {
		opts.Now = c.Now
	}
	var groups [][]string
	for g := range strings.SplitSeq(layout, "|") {
		groups = append(groups, strings.Fields(g))
	}
	return New(groups, groups, opts), c
}

// member finds a provider's handle by name.
func member[T any](t testing.TB, s *Set[T], name string) *Member {
	t.Helper()
	for i := range s.members {
		if s.members[i].name == name {
			return &s.members[i]
		}
	}
	t.Fatalf("no provider %q", name)
	return nil
}

// walk returns the names an iteration yields, in order.
func walk(s *Set[string], rnd uint64) []string {
	var out []string
	it := s.Attempts(rnd)
	for {
		item, m, ok := it.Next()
		if !ok {
			return out
		}
		if item != m.Name() {
			panic("item " + item + " yielded with member " + m.Name())
		}
		out = append(out, item)
	}
}

// healthOf returns a provider's Health entry.
func healthOf[T any](t testing.TB, s *Set[T], name string) Health {
	t.Helper()
	hs := s.Health()
	i := slices.IndexFunc(hs, func(h Health) bool { return h.Name == name })
	if i < 0 {
		t.Fatalf("no health for %q", name)
	}
	return hs[i]
}

// fail reports a failure and then waits out the eviction it caused, so the
// provider is live again with a lowered score.
func failAndReturn(t testing.TB, s *Set[string], c *fakeClock, name string, times int) {
	t.Helper()
	m := member(t, s, name)
	for range times {
		m.Report(ServerError, 0)
		h := healthOf(t, s, name)
		c.advance(h.EvictedUntil.Sub(c.Now()))
	}
}
