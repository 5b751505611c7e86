package balance

import (
	"math"
	"testing"
	"time"
)

// step is one event in a provider's history: time passes, then an outcome
// is reported (unless none), then the eviction that should be in force is
// checked (0: none).
type step struct {
	advance     time.Duration
	report      bool
	outcome     Outcome
	retryAfter  time.Duration
	wantEvicted time.Duration // eviction left after the report
}

func fails(o Outcome, retryAfter, want time.Duration) step {
	return step{report: true, outcome: o, retryAfter: retryAfter, wantEvicted: want}
}

func answers(o Outcome) step { return step{report: true, outcome: o} }

// after moves the clock and then expects the given eviction left.
func after(d, want time.Duration) step { return step{advance: d, wantEvicted: want} }

func TestEviction(t *testing.T) {
	sec := time.Second
	tests := []struct {
		desc  string
		opts  Options
		steps []step
	}{
		{
			desc:  "a failure evicts for the base eviction, then the provider returns",
			steps: []step{fails(ServerError, 0, sec), after(sec-1, 1), after(1, 0)},
		},
		{
			desc: "every failure kind evicts",
			steps: []step{
				fails(RateLimited, 0, sec), answers(Success),
				fails(ServerError, 0, sec), answers(Success),
				fails(Timeout, 0, sec), answers(Success),
				fails(ConnectFailure, 0, sec), answers(Success),
				fails(Outcome(42), 0, sec), // an unknown outcome is a failure
			},
		},
		{
			desc: "the backoff doubles while failures continue, up to the maximum",
			opts: Options{BaseEviction: sec, MaxEviction: 8 * sec},
			steps: []step{
				fails(ServerError, 0, sec), after(sec, 0),
				fails(Timeout, 0, 2*sec), after(2*sec, 0),
				fails(ConnectFailure, 0, 4*sec), after(4*sec, 0),
				fails(ServerError, 0, 8*sec), after(8*sec, 0),
				fails(ServerError, 0, 8*sec), after(8*sec, 0),
			},
		},
		{
			desc: "defaults: 1 s doubling to 5 min",
			steps: []step{
				fails(ServerError, 0, sec), after(sec, 0),
				fails(ServerError, 0, 2*sec), after(2*sec, 0),
				fails(ServerError, 0, 4*sec), after(4*sec, 0),
				fails(ServerError, 0, 8*sec), after(8*sec, 0),
				fails(ServerError, 0, 16*sec), after(16*sec, 0),
				fails(ServerError, 0, 32*sec), after(32*sec, 0),
				fails(ServerError, 0, 64*sec), after(64*sec, 0),
				fails(ServerError, 0, 128*sec), after(128*sec, 0),
				fails(ServerError, 0, 256*sec), after(256*sec, 0),
				fails(ServerError, 0, 300*sec), after(300*sec, 0),
			},
		},
		{
			desc: "a success ends the eviction and resets the backoff",
			steps: []step{
				fails(ServerError, 0, sec), after(sec, 0),
				fails(ServerError, 0, 2*sec),
				answers(Success), after(0, 0),
				fails(ServerError, 0, sec),
			},
		},
		{
			desc: "a client error is an answer too",
			steps: []step{
				fails(ServerError, 0, sec), after(sec, 0),
				fails(ServerError, 0, 2*sec),
				answers(ClientError), after(0, 0),
				fails(ServerError, 0, sec),
			},
		},
		{
			desc: "failures of attempts begun before the eviction neither double nor extend it",
			steps: []step{
				fails(ServerError, 0, sec),
				fails(Timeout, 0, sec),
				after(sec/2, sec/2),
				fails(ConnectFailure, 0, sec/2),
				after(sec/2, 0),
				fails(ServerError, 0, 2*sec), // the next episode doubles once
			},
		},
		{
			desc:  "Retry-After longer than the backoff sets the eviction",
			steps: []step{fails(RateLimited, 30*sec, 30*sec), after(30*sec-1, 1), after(1, 0)},
		},
		{
			desc:  "Retry-After shorter than the backoff leaves the backoff",
			steps: []step{fails(RateLimited, sec/2, sec)},
		},
		{
			desc:  "Retry-After is bounded by the maximum eviction",
			steps: []step{fails(RateLimited, time.Hour, 5*time.Minute)},
		},
		{
			desc:  "Retry-After on a failure during an eviction lengthens it",
			steps: []step{fails(ServerError, 0, sec), fails(RateLimited, 10*sec, 10*sec)},
		},
		{
			desc:  "Retry-After on a failure during an eviction never shortens it",
			steps: []step{fails(RateLimited, 10*sec, 10*sec), fails(RateLimited, 2*sec, 10*sec)},
		},
		{
			desc: "after a Retry-After eviction the backoff still doubles",
			steps: []step{
				fails(RateLimited, 10*sec, 10*sec), after(10*sec, 0),
				fails(ServerError, 0, 2*sec),
			},
		},
		{
			desc:  "a maximum below the base is raised to the base",
			opts:  Options{BaseEviction: 4 * sec, MaxEviction: sec},
			steps: []step{fails(ServerError, 0, 4*sec), after(4*sec, 0), fails(ServerError, 0, 4*sec)},
		},
		{
			desc: "huge settings do not overflow",
			opts: Options{BaseEviction: math.MaxInt64 / 2, MaxEviction: math.MaxInt64},
			steps: []step{
				fails(ServerError, 0, evictionLimit), after(evictionLimit, 0),
				fails(ServerError, math.MaxInt64, evictionLimit),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s, c := newTestSet(t, "p q", tt.opts)
			p := member(t, s, "p")
			for i, st := range tt.steps {
				c.advance(st.advance)
				if st.report {
					p.Report(st.outcome, st.retryAfter)
				}
				h := healthOf(t, s, "p")
				var left time.Duration
				if h.Evicted {
					left = h.EvictedUntil.Sub(c.Now())
				}
				if left != st.wantEvicted {
					t.Fatalf("step %d: eviction left %v, want %v (%+v)", i, left, st.wantEvicted, h)
				}
				if h.Evicted != (st.wantEvicted > 0) || h.EvictedUntil.IsZero() == h.Evicted {
					t.Fatalf("step %d: Evicted %v with EvictedUntil %v", i, h.Evicted, h.EvictedUntil)
				}
				// The order agrees: an evicted provider comes after the live one.
				if got := walk(s, uint64(i)); h.Evicted && got[0] != "q" {
					t.Fatalf("step %d: evicted p is tried first: %v", i, got)
				}
			}
			if q := healthOf(t, s, "q"); q.Evicted || q.Requests != 0 || q.Score != 1 {
				t.Errorf("the other provider changed: %+v", q)
			}
		})
	}
}

func TestHealthCounters(t *testing.T) {
	s, c := newTestSet(t, "p|q", Options{})
	p := member(t, s, "p")
	for _, o := range []Outcome{Success, ServerError, Timeout, ClientError, RateLimited, RateLimited, ConnectFailure} {
		p.Report(o, 0)
	}
	h := healthOf(t, s, "p")
	want := Health{Name: "p", Group: 0, Requests: 7, Failures: 5, ConsecutiveFailures: 3, Evicted: true}
	if h.Name != want.Name || h.Group != want.Group || h.Requests != want.Requests || h.Failures != want.Failures ||
		h.ConsecutiveFailures != want.ConsecutiveFailures || h.Evicted != want.Evicted {
		t.Errorf("Health = %+v, want %+v", h, want)
	}
	if !h.EvictedUntil.Equal(c.Now().Add(time.Second)) {
		t.Errorf("EvictedUntil = %v, want %v", h.EvictedUntil, c.Now().Add(time.Second))
	}
	if q := healthOf(t, s, "q"); q.Group != 1 || q.Name != "q" {
		t.Errorf("q's Health = %+v", q)
	}
	if p.Name() != "p" || p.Group() != 0 || member(t, s, "q").Group() != 1 {
		t.Errorf("Name/Group = %q/%d", p.Name(), p.Group())
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		desc     string
		outcomes []Outcome
		want     float64
	}{
		{desc: "a new provider is at full health", want: 1},
		{desc: "successes keep full health", outcomes: []Outcome{Success, Success, ClientError}, want: 1},
		{desc: "one failure", outcomes: []Outcome{ServerError}, want: 0.75},
		{desc: "two failures", outcomes: []Outcome{ServerError, Timeout}, want: 0.5625},
		{desc: "a failure then a success", outcomes: []Outcome{ServerError, Success}, want: 0.8125},
		{desc: "a client error raises as a success does", outcomes: []Outcome{ServerError, ClientError}, want: 0.8125},
		{
			desc:     "successes bring a failing provider back to exactly 1",
			outcomes: append([]Outcome{ServerError, ServerError, ServerError}, repeat(Success, 30)...),
			want:     1,
		},
		{desc: "constant failures go towards 0", outcomes: repeat(ConnectFailure, 40), want: math.Pow(0.75, 40)},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			s, _ := newTestSet(t, "p", Options{})
			p := member(t, s, "p")
			for _, o := range tt.outcomes {
				p.Report(o, 0)
			}
			if got := healthOf(t, s, "p").Score; math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("score %v, want %v", got, tt.want)
			}
		})
	}
}

func repeat(o Outcome, n int) []Outcome {
	out := make([]Outcome, n)
	for i := range out {
		out[i] = o
	}
	return out
}

func TestNewRefusesBadShapes(t *testing.T) {
	tooMany := make([]int, maxMembers+1)
	tooManyNames := make([]string, maxMembers+1)
	tests := []struct {
		desc   string
		groups [][]int
		names  [][]string
	}{
		{desc: "fewer name groups", groups: [][]int{{1}, {2}}, names: [][]string{{"a"}}},
		{desc: "a group's names short", groups: [][]int{{1, 2}}, names: [][]string{{"a"}}},
		{desc: "too many providers", groups: [][]int{tooMany}, names: [][]string{tooManyNames}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("New did not panic")
				}
			}()
			New(tt.groups, tt.names, Options{})
		})
	}
}
