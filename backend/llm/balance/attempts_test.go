package balance

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAttemptsOrder(t *testing.T) {
	sec := time.Second
	tests := []struct {
		desc   string
		layout string
		setup  func(t *testing.T, s *Set[string], c *fakeClock)
		// stages are the order to expect: the names of a stage come in any
		// order, before every name of the next stage.
		stages string
	}{
		{desc: "one provider", layout: "a", stages: "a"},
		{desc: "one group", layout: "a b c", stages: "a b c"},
		{desc: "groups in priority order", layout: "a1 a2|b1|c1 c2 c3", stages: "a1 a2|b1|c1 c2 c3"},
		{
			desc:   "an evicted provider comes after every live one",
			layout: "a1 a2|b1 b2",
			setup: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "a1").Report(ServerError, 0)
			},
			stages: "a2|b1 b2|a1",
		},
		{
			desc:   "a group wholly evicted: the next group serves",
			layout: "a1 a2|b1 b2|c1",
			setup: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "a1").Report(ServerError, 0)
				member(t, s, "a2").Report(Timeout, 0)
			},
			stages: "b1 b2|c1|a1|a2",
		},
		{
			desc:   "evicted ones by group, then by the end of their eviction",
			layout: "a1 a2 a3|b1 b2|c1",
			setup: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "b2").Report(RateLimited, 5*sec)
				member(t, s, "a3").Report(RateLimited, 30*sec)
				member(t, s, "a1").Report(RateLimited, 10*sec)
				member(t, s, "b1").Report(RateLimited, 20*sec)
			},
			stages: "a2|c1|a1|a3|b2|b1",
		},
		{
			desc:   "all evicted: every provider is still tried",
			layout: "a1 a2|b1",
			setup: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "a2").Report(ConnectFailure, 0)
				c.advance(sec / 2)
				member(t, s, "a1").Report(ConnectFailure, 0)
				member(t, s, "b1").Report(ConnectFailure, 0)
			},
			stages: "a2|a1|b1",
		},
		{
			desc:   "a provider whose eviction ended is live again",
			layout: "a1 a2|b1",
			setup: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "a1").Report(ServerError, 0)
				member(t, s, "a2").Report(ServerError, 0)
				c.advance(sec)
			},
			stages: "a1 a2|b1",
		},
		{
			desc:   "a success ends an eviction at once",
			layout: "a1 a2|b1",
			setup: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "a1").Report(ServerError, 0)
				member(t, s, "a2").Report(ServerError, 0)
				member(t, s, "a2").Report(Success, 0)
			},
			stages: "a2|b1|a1",
		},
		{
			desc:   "a low score lowers the weight but never to nothing",
			layout: "a1 a2|b1",
			setup: func(t *testing.T, s *Set[string], c *fakeClock) {
				failAndReturn(t, s, c, "a1", 30)
			},
			stages: "a1 a2|b1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s, c := newTestSet(t, tt.layout, Options{})
			if tt.setup != nil {
				tt.setup(t, s, c)
			}
			var stages [][]string
			for st := range strings.SplitSeq(tt.stages, "|") {
				stages = append(stages, strings.Fields(st))
			}
			firsts := map[string]bool{}
			for rnd := range uint64(2000) {
				got := walk(s, rnd)
				firsts[got[0]] = true
				rest := got
				for _, st := range stages {
					if len(rest) < len(st) {
						t.Fatalf("rnd %d: %v is short for stages %v", rnd, got, stages)
					}
					head := slices.Clone(rest[:len(st)])
					slices.Sort(head)
					want := slices.Sorted(slices.Values(st))
					if !slices.Equal(head, want) {
						t.Fatalf("rnd %d: order %v, want stages %v", rnd, got, stages)
					}
					rest = rest[len(st):]
				}
				if len(rest) > 0 {
					t.Fatalf("rnd %d: %v yields more than stages %v", rnd, got, stages)
				}
			}
			// The pick is random: every provider of the first stage comes
			// first for some rnd.
			for _, name := range stages[0] {
				if !firsts[name] {
					t.Errorf("%s never came first; firsts %v", name, firsts)
				}
			}
		})
	}
}

// TestWeightedDistribution checks the share of first picks against the
// weights over many requests, with rnd a counter as a server could give.
func TestWeightedDistribution(t *testing.T) {
	const picks = 200_000
	tests := []struct {
		desc     string
		layout   string
		failures map[string]int // failures (each waited out) per provider
	}{
		{desc: "equal health", layout: "a b c d"},
		{desc: "one recovering", layout: "a b", failures: map[string]int{"b": 1}},
		{desc: "mixed", layout: "a b c", failures: map[string]int{"b": 2, "c": 4}},
		{desc: "the floor keeps a failing one in", layout: "a b", failures: map[string]int{"b": 20}},
		{desc: "a later group does not dilute the first", layout: "a b|c", failures: map[string]int{"a": 3}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s, c := newTestSet(t, tt.layout, Options{})
			for name, n := range tt.failures {
				failAndReturn(t, s, c, name, n)
			}
			// The weights, from the documented rule: score 0.75^failures,
			// at least 0.05.
			first := strings.Fields(strings.Split(tt.layout, "|")[0])
			weights := map[string]float64{}
			total := 0.0
			for _, name := range first {
				w := max(math.Pow(0.75, float64(tt.failures[name])), 0.05)
				weights[name] = w
				total += w
			}
			counts := map[string]int{}
			for rnd := range uint64(picks) {
				it := s.Attempts(rnd)
				_, m, _ := it.Next()
				counts[m.Name()]++
			}
			for _, name := range first {
				want := weights[name] / total
				got := float64(counts[name]) / picks
				// Ten standard deviations of a binomial share at most 0.011:
				// a fixed sequence cannot flake, and a pick that ignored the
				// weights would miss by more.
				if math.Abs(got-want) > 0.011 {
					t.Errorf("%s first in %.4f of requests, want %.4f (counts %v)", name, got, want, counts)
				}
			}
			if len(counts) != len(first) {
				t.Errorf("first picks outside the first group: %v", counts)
			}
		})
	}
}

// TestSecondPick checks the pick after the first is weighted among the rest.
func TestSecondPick(t *testing.T) {
	s, c := newTestSet(t, "a b c", Options{})
	failAndReturn(t, s, c, "c", 3) // weight 0.421875
	const picks = 200_000
	afterA := map[string]int{}
	n := 0
	for rnd := range uint64(picks) {
		got := walk(s, rnd)
		if got[0] == "a" {
			afterA[got[1]]++
			n++
		}
	}
	want := 1 / (1 + 0.421875)
	if got := float64(afterA["b"]) / float64(n); math.Abs(got-want) > 0.015 {
		t.Errorf("b second after a in %.4f, want %.4f (%v)", got, want, afterA)
	}
}

func TestAttemptsDeterministic(t *testing.T) {
	s, _ := newTestSet(t, "a b c d e|f g", Options{})
	orders := map[string]bool{}
	for rnd := range uint64(50) {
		one, two := walk(s, rnd), walk(s, rnd)
		if !slices.Equal(one, two) {
			t.Fatalf("rnd %d gave %v then %v", rnd, one, two)
		}
		orders[fmt.Sprint(one)] = true
	}
	if len(orders) < 20 {
		t.Errorf("50 seeds gave only %d orders", len(orders))
	}
}

// TestAttemptsFollowChanges: liveness is read at each step, so what other
// requests report during this one's failover counts. a2 starts evicted.
func TestAttemptsFollowChanges(t *testing.T) {
	tests := []struct {
		desc string
		// during runs after the first provider, a1, was yielded.
		during func(t *testing.T, s *Set[string], c *fakeClock)
		want   []string // the order after a1
	}{
		{
			desc:   "nothing changes",
			during: func(t *testing.T, s *Set[string], c *fakeClock) {},
			want:   []string{"b1", "c1", "a2"},
		},
		{
			desc: "the failed first provider is not yielded again",
			during: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "a1").Report(ServerError, 0)
			},
			want: []string{"b1", "c1", "a2"},
		},
		{
			desc: "a later provider evicted meanwhile moves to the tail, by group",
			during: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "b1").Report(ServerError, 0)
			},
			want: []string{"c1", "a2", "b1"},
		},
		{
			desc: "a provider back meanwhile is yielded in its group",
			during: func(t *testing.T, s *Set[string], c *fakeClock) {
				c.advance(time.Second)
			},
			want: []string{"a2", "b1", "c1"},
		},
		{
			desc: "a provider that answered meanwhile is yielded in its group",
			during: func(t *testing.T, s *Set[string], c *fakeClock) {
				member(t, s, "a2").Report(Success, 0)
			},
			want: []string{"a2", "b1", "c1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s, c := newTestSet(t, "a1 a2|b1|c1", Options{})
			member(t, s, "a2").Report(ServerError, 0)
			it := s.Attempts(7)
			if first, _, _ := it.Next(); first != "a1" {
				t.Fatalf("first %s, want a1", first)
			}
			tt.during(t, s, c)
			var got []string
			for it.More() {
				name, _, ok := it.Next()
				if !ok {
					t.Fatal("More but no Next")
				}
				got = append(got, name)
			}
			if _, _, ok := it.Next(); ok {
				t.Fatal("Next after More was false")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("rest %v, want %v", got, tt.want)
			}
		})
	}
}

func TestZeroIter(t *testing.T) {
	var it Iter[string]
	if it.More() {
		t.Error("zero Iter has More")
	}
	if _, m, ok := it.Next(); ok || m != nil {
		t.Error("zero Iter yields")
	}
	empty := New[string](nil, nil, Options{})
	it = empty.Attempts(1)
	if _, _, ok := it.Next(); ok || it.More() {
		t.Error("empty Set yields")
	}
	if len(empty.Health()) != 0 {
		t.Error("empty Set has health")
	}
}
