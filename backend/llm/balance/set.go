package balance

import (
	"fmt"
	"time"
)

// Options tune health scoring. Zero values take the defaults.
type Options struct {
	// BaseEviction is a provider's first eviction after an answer; each
	// eviction that follows without an answer doubles it. Default 1 s.
	BaseEviction time.Duration
	// MaxEviction bounds the doubling and any Retry-After. Default 5 min;
	// never less than BaseEviction.
	MaxEviction time.Duration
	// Now is the clock; nil is time.Now (tests inject a fake one).
	Now func() time.Time
}

// maxMembers bounds a Set's providers: an attempt iterator marks the
// providers it has yielded in a fixed bitmap of this many bits. The config
// allows 32 groups of 32.
const maxMembers = 1024

// Set is the providers of one ai backend, in groups. T is the server's
// provider type. A Set is safe for concurrent use; its health state lives as
// long as it does, so a server that keeps the Set across a reload keeps the
// health.
type Set[T any] struct {
	items   []T
	members []Member // members[i] is items[i]'s health
	groups  []span   // each group's range of items, in priority order
	clock   *clock
}

// span is a group's range [start, end) of a Set's items.
type span struct{ start, end int }

// New builds a Set. groups are the providers in priority order and
// names[g][i] names groups[g][i]. It panics when the two do not have the
// same shape or there are more than 1024 providers: both are the caller's
// mistake, since the config checks the bounds.
func New[T any](groups [][]T, names [][]string, opts Options) *Set[T] {
	if len(names) != len(groups) {
		panic(fmt.Sprintf("balance.New: %d groups but %d name groups", len(groups), len(names)))
	}
	total := 0
	for g := range groups {
		if len(names[g]) != len(groups[g]) {
			panic(fmt.Sprintf("balance.New: group %d has %d providers but %d names", g, len(groups[g]), len(names[g])))
		}
		total += len(groups[g])
	}
	if total > maxMembers {
		panic(fmt.Sprintf("balance.New: %d providers, at most %d", total, maxMembers))
	}
	s := &Set[T]{
		items:   make([]T, 0, total),
		members: make([]Member, total),
		groups:  make([]span, len(groups)),
		clock:   newClock(opts),
	}
	for g, providers := range groups {
		s.groups[g] = span{start: len(s.items), end: len(s.items) + len(providers)}
		for i, p := range providers {
			m := &s.members[len(s.items)]
			m.name, m.group, m.clock = names[g][i], g, s.clock
			m.score.Store(fullScoreBits)
			s.items = append(s.items, p)
		}
	}
	return s
}

// Health is a provider's state, for metrics and the admin page.
type Health struct {
	Name  string
	Group int
	// Score is the EWMA of success, 0 to 1.
	Score float64
	// Evicted reports an eviction in force; EvictedUntil is when it ends
	// (zero when none).
	Evicted      bool
	EvictedUntil time.Time
	// ConsecutiveFailures counts the failures since the last answer.
	ConsecutiveFailures int
	// Requests counts every reported attempt, Failures those that failed.
	Requests, Failures uint64
}

// Len is the number of providers in the set: with one, a request has one
// attempt.
func (s *Set[T]) Len() int { return len(s.members) }

// Health reports every provider's state, in group order.
func (s *Set[T]) Health() []Health {
	out := make([]Health, len(s.members))
	now := s.clock.since()
	for i := range s.members {
		m := &s.members[i]
		h := Health{
			Name:                m.name,
			Group:               m.group,
			Score:               m.loadScore(),
			ConsecutiveFailures: int(m.consecutive.Load()),
			Requests:            m.requests.Load(),
			Failures:            m.failures.Load(),
		}
		if until := m.evictedUntil.Load(); until != 0 && now < until {
			h.Evicted, h.EvictedUntil = true, s.clock.at(until)
		}
		out[i] = h
	}
	return out
}
