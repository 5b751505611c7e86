package balance

// Iter yields one request's providers in the order to try them (see the
// package comment). It is a value with a fixed bitmap of the providers it
// has yielded, so making and walking one allocates nothing. An Iter is for
// one goroutine; the zero Iter yields nothing.
type Iter[T any] struct {
	set *Set[T]
	// rng is the state of the request's random sequence (splitmix64).
	rng uint64
	// group is the group whose live providers are being yielded; it passes
	// the last group when only evicted ones are left.
	group int
	// left counts the providers not yielded yet.
	left  int
	tried [maxMembers / 64]uint64
}

// Attempts starts the iteration of the providers for one request. rnd seeds
// the weighted picks: give each request a fresh random number (the same rnd
// against the same health gives the same order).
func (s *Set[T]) Attempts(rnd uint64) Iter[T] {
	return Iter[T]{set: s, rng: rnd, left: len(s.members)}
}

// Next returns the next provider to try and its health handle, or false
// when every provider has been yielded.
func (it *Iter[T]) Next() (T, *Member, bool) {
	if it.left > 0 {
		s := it.set
		now := int64(-1) // read from the clock only if an eviction is set
		for ; it.group < len(s.groups); it.group++ {
			if i := it.pickLive(s.groups[it.group], &now); i >= 0 {
				return it.take(i)
			}
		}
		if i := it.pickEvicted(); i >= 0 {
			return it.take(i)
		}
	}
	var none T
	return none, nil, false
}

// More reports whether Next has another provider to yield.
func (it *Iter[T]) More() bool { return it.left > 0 }

// pickLive picks one of the group's live providers not yet tried, each with
// a chance proportional to its weight, or returns -1. It is one pass of a
// weighted reservoir of one: the k-th candidate replaces the pick with
// probability w_k / (w_1 + ... + w_k), which leaves each candidate picked
// with probability w / total, and reads every member's state once.
func (it *Iter[T]) pickLive(g span, now *int64) int {
	s := it.set
	picked, total := -1, 0.0
	for i := g.start; i < g.end; i++ {
		m := &s.members[i]
		if it.wasTried(i) || !m.liveAt(s.clock, now) {
			continue
		}
		w := m.weight()
		total += w
		if it.uniform()*total < w {
			picked = i
		}
	}
	return picked
}

// pickEvicted returns the untried provider of the first group that has one
// whose eviction ends first, or -1. A provider that returned meanwhile has
// an eviction end in the past (or none) and so comes first in its group.
func (it *Iter[T]) pickEvicted() int {
	s := it.set
	for _, g := range s.groups {
		picked, first := -1, int64(0)
		for i := g.start; i < g.end; i++ {
			if it.wasTried(i) {
				continue
			}
			if until := s.members[i].evictedUntil.Load(); picked < 0 || until < first {
				picked, first = i, until
			}
		}
		if picked >= 0 {
			return picked
		}
	}
	return -1
}

func (it *Iter[T]) take(i int) (T, *Member, bool) {
	it.tried[i/64] |= 1 << (i % 64)
	it.left--
	return it.set.items[i], &it.set.members[i], true
}

func (it *Iter[T]) wasTried(i int) bool {
	return it.tried[i/64]&(1<<(i%64)) != 0
}

// uniform returns the next number of the request's sequence, in [0, 1).
// splitmix64: consecutive seeds (a counter) still give independent-looking
// numbers.
func (it *Iter[T]) uniform() float64 {
	it.rng += 0x9e3779b97f4a7c15
	z := it.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) * 0x1p-53
}
