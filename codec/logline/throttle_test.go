package logline

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestThrottle: a Throttle lets the first call through, then one per
// Every, each reporting how many it refused since the last; a clock that
// goes back refuses until it is past the next line's time again.
func TestThrottle(t *testing.T) {
	type call struct {
		at      time.Duration // from the case's base
		ok      bool
		dropped int64 // when ok
	}
	s := time.Second
	for _, tc := range []struct {
		name  string
		base  time.Time
		every time.Duration
		calls []call
	}{
		{"first, then one per interval", time.Unix(1000, 0), 10 * s, []call{
			{0, true, 0}, {s, false, 0}, {9 * s, false, 0}, {10*s - 1, false, 0},
			{10 * s, true, 3}, {15 * s, false, 0}, {21 * s, true, 1}, {60 * s, true, 0},
		}},
		{"zero every is the default", time.Unix(1000, 0), 0, []call{
			{0, true, 0}, {DefaultThrottle - 1, false, 0}, {DefaultThrottle, true, 1},
		}},
		{"a minute", time.Unix(1000, 0), time.Minute, []call{
			{0, true, 0}, {10 * s, false, 0}, {59 * s, false, 0}, {65 * s, true, 2},
		}},
		{"the clock goes back", time.Unix(1000, 0), 10 * s, []call{
			{0, true, 0}, {-time.Hour, false, 0}, {5 * s, false, 0}, {10 * s, true, 2},
		}},
		{"times before the epoch", time.Unix(0, 0), 10 * s, []call{
			{0, true, 0}, {s, false, 0}, {10 * s, true, 1},
		}},
		{"the first line's next time would be 0", throttleEpoch.Round(0).Add(-10 * s), 10 * s, []call{
			{0, true, 0}, {9 * s, false, 0}, {10 * s, true, 1},
		}},
		{"the end of time", throttleEpoch.Add(math.MaxInt64 - 1), 10 * s, []call{
			{0, true, 0}, {0, false, 0}, {-time.Hour, false, 0},
		}},
		{"the monotonic clock", time.Now(), 10 * s, []call{
			{0, true, 0}, {s, false, 0}, {10 * s, true, 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := Throttle{Every: tc.every}
			for i, c := range tc.calls {
				dropped, ok := th.Allow(tc.base.Add(c.at))
				if ok != c.ok || dropped != c.dropped {
					t.Fatalf("call %d at %v: (%d, %t), want (%d, %t)", i, c.at, dropped, ok, c.dropped, c.ok)
				}
			}
		})
	}
}

// TestThrottleConcurrent: of callers racing within one interval exactly
// one is let through, and every refusal is reported once: the calls let
// through, the drops they report and those not yet reported add up to the
// calls made. Each round's callers are released together (spinning, so
// that they meet on the first calls) and the round ends before the next.
func TestThrottleConcurrent(t *testing.T) {
	const (
		perRound = 20
		rounds   = 1000
		every    = 10 * time.Second
	)
	goroutines := max(2, runtime.GOMAXPROCS(0))
	th := Throttle{Every: every}
	base := time.Unix(1000, 0)
	var reported, calls atomic.Int64
	for r := range rounds {
		var wins, ready atomic.Int64
		var start atomic.Bool
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				ready.Add(1)
				for !start.Load() {
					runtime.Gosched()
				}
				for i := range perRound {
					// All within the round's interval, in any order.
					at := base.Add(time.Duration(r)*every + time.Duration((g*perRound+i)%1000)*time.Millisecond)
					calls.Add(1)
					if dropped, ok := th.Allow(at); ok {
						wins.Add(1)
						reported.Add(dropped)
					}
				}
			})
		}
		for ready.Load() < int64(goroutines) {
			runtime.Gosched()
		}
		start.Store(true)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d calls let through, want 1", r, n)
		}
	}
	if got := rounds + reported.Load() + th.Dropped(); got != calls.Load() {
		t.Fatalf("%d let through + %d reported dropped + %d pending = %d, want the %d calls", rounds, reported.Load(), th.Dropped(), got, calls.Load())
	}
}

// TestThrottleAllocs: Allow allocates nothing, let through or not.
func TestThrottleAllocs(t *testing.T) {
	var th Throttle
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() {
		now = now.Add(time.Second)
		_, _ = th.Allow(now)
	}); n != 0 {
		t.Fatalf("%v allocations per Allow, want 0", n)
	}
}
