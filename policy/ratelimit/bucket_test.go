package ratelimit

import (
	"testing"
	"time"
)

// step moves the clock, then admits requests and checks how many passed and
// what the bucket holds afterwards.
type step struct {
	advance     time.Duration
	admit       int
	wantAllowed int
	wantHeld    int64
}

// TestFillAndRefill: a bucket starts full, gains tokensPerFill at the end
// of every whole interval counted from its start (not from the last take),
// and never holds more than maxTokens.
func TestFillAndRefill(t *testing.T) {
	tests := []struct {
		desc               string
		maxTokens, perFill uint64
		interval           time.Duration
		steps              []step
	}{
		{"starts full, burst up to maxTokens", 5, 1, time.Second, []step{
			{0, 7, 5, 0},
		}},
		{"no fill before the interval ends", 2, 1, time.Second, []step{
			{0, 2, 2, 0},
			{time.Second - 1, 1, 0, 0},
			{1, 0, 0, 1},
			{0, 2, 1, 0},
		}},
		{"a fill adds tokensPerFill", 10, 3, time.Second, []step{
			{0, 10, 10, 0},
			{time.Second, 4, 3, 0},
			{2 * time.Second, 0, 0, 6},
		}},
		{"partial intervals count from the start, not from the take", 1, 1, time.Second, []step{
			{900 * time.Millisecond, 1, 1, 0},
			{100 * time.Millisecond, 1, 1, 0}, // interval 1 ended at 1 s
			{999 * time.Millisecond, 1, 0, 0},
			{time.Millisecond, 1, 1, 0},
		}},
		{"idle time banks at most maxTokens", 4, 1, time.Second, []step{
			{0, 4, 4, 0},
			{time.Hour, 0, 0, 4},
			{0, 6, 4, 0},
		}},
		{"a fill overflowing a partly full bucket is capped", 5, 4, time.Minute, []step{
			{0, 2, 2, 3},
			{time.Minute, 0, 0, 5},
			{0, 5, 5, 0},
		}},
		{"fills beyond maxTokens after long idle with a big fill", 1000, 1000, time.Millisecond, []step{
			{0, 1000, 1000, 0},
			{365 * 24 * time.Hour, 0, 0, 1000},
			{0, 1, 1, 999},
			{time.Millisecond, 0, 0, 1000},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, clock := newLimiter(t, spec(tc.maxTokens, tc.perFill, tc.interval, ""))
			for i, s := range tc.steps {
				clock.advance(s.advance)
				allowed := 0
				for range s.admit {
					if l.Admit(nil, 0).Allowed {
						allowed++
					}
				}
				if allowed != s.wantAllowed {
					t.Errorf("step %d: %d of %d allowed, want %d", i, allowed, s.admit, s.wantAllowed)
				}
				if got := held(l, clock, 0); got != s.wantHeld {
					t.Errorf("step %d: bucket holds %d, want %d", i, got, s.wantHeld)
				}
			}
		})
	}
}

// TestNoDrift: over a hundred thousand uneven clock steps, a bucket drained
// at every step admits exactly one request per whole interval elapsed, however the
// steps straddle interval ends; and the arithmetic stays exact decades in.
func TestNoDrift(t *testing.T) {
	tests := []struct {
		desc      string
		maxTokens uint64 // enough for the fills of one step
		interval  time.Duration
		step      time.Duration
		steps     int
		offset    time.Duration // where the run starts, from the limiter's start
	}{
		{"7 ms interval, 3 ms steps", 1, 7 * time.Millisecond, 3 * time.Millisecond, 100_000, 0},
		{"odd nanoseconds", 1, 1_000_003, 999_999, 100_000, 0},
		{"steps longer than the interval", 2, 3 * time.Millisecond, 5 * time.Millisecond, 100_000, 0},
		{"fifty years in", 1, 7 * time.Millisecond, 3 * time.Millisecond, 100_000, 50 * 365 * 24 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l, clock := newLimiter(t, spec(tc.maxTokens, 1, tc.interval, ""))
			clock.set(tc.offset)
			admitted := 0
			// drain admits until refused, at most one more than the bucket
			// can hold (a broken bucket must fail the test, not hang it).
			drain := func() {
				for range tc.maxTokens + 1 {
					if !l.Admit(nil, 0).Allowed {
						return
					}
					admitted++
				}
			}
			drain() // the bucket is full at the start of the run
			for range tc.steps {
				clock.advance(tc.step)
				drain()
			}
			start := int64(tc.offset / tc.interval)
			end := (int64(tc.offset) + int64(tc.steps)*int64(tc.step)) / int64(tc.interval)
			want := int(tc.maxTokens) + int(end-start)
			if admitted != want {
				t.Fatalf("admitted %d, want %d (a full bucket, then one per whole interval)", admitted, want)
			}
		})
	}
}

// TestWait: the time until a bucket holds what a request needs.
func TestWait(t *testing.T) {
	b := new(bucket)
	b.init(10, 3, 10*time.Second, false)
	tests := []struct {
		desc       string
		elapsed    time.Duration
		have, need int64
		want       time.Duration
	}{
		{"enough", 0, 5, 5, 0},
		{"one fill", 4 * time.Second, 0, 1, 6 * time.Second},
		{"one fill covers three", 4 * time.Second, 0, 3, 6 * time.Second},
		{"two fills", 4 * time.Second, 0, 4, 16 * time.Second},
		{"debt", 0, -20, 1, 70 * time.Second},
		{"at an interval end", 10 * time.Second, 0, 1, 10 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := b.wait(int64(tc.elapsed), tc.have, tc.need); got != tc.want {
				t.Fatalf("wait = %v, want %v", got, tc.want)
			}
		})
	}
}
