package logline

import (
	"math"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// DefaultThrottle is a Throttle's interval when its Every is 0.
const DefaultThrottle = 10 * time.Second

// DroppedKey is the field of a throttled line that says how many lines its
// Throttle held back since the last one went out (DroppedField).
const DroppedKey = "similar_errors_not_logged"

// DroppedField is the DroppedKey field of a line that Throttle.Allow let
// through, dropped being what Allow returned.
func DroppedField(dropped int64) zap.Field { return zap.Int64(DroppedKey, dropped) }

// Throttle bounds a warning that a failure repeats on every request (an
// external service down, a backend whose certificate does not verify) to
// one line per interval, counting those it holds back: each failed request
// is in the access log already, and a line per request under load says
// nothing more. The zero value lets the first line through, then one per
// DefaultThrottle. It is safe for concurrent use and allocates nothing; it
// must not be copied after first use.
type Throttle struct {
	// Every is the least time between two lines; 0 (or less) is
	// DefaultThrottle. Set before first use.
	Every time.Duration

	// next is when the next line may go out, as nanoseconds since
	// throttleEpoch; 0: no line yet.
	next    atomic.Int64
	dropped atomic.Int64
}

// throttleEpoch is what Throttle measures times from: a reading of the
// monotonic clock, so that time.Now's readings are compared on it and a
// step of the wall clock neither stalls nor floods the lines.
var throttleEpoch = time.Now()

// Allow reports whether a line may go out at now: the first call's may,
// and then one per Every. When ok, dropped is how many calls Allow refused
// since the last line (the line says so with DroppedField). Of callers
// racing at the same time exactly one is let through; every refusal is
// counted once, in a later line. now is best time.Now(), with its
// monotonic reading; a clock that goes back refuses lines until it is past
// the next one's time again.
func (t *Throttle) Allow(now time.Time) (dropped int64, ok bool) {
	at := int64(now.Sub(throttleEpoch))
	next := t.next.Load()
	if next != 0 && at < next || !t.next.CompareAndSwap(next, t.after(at)) {
		t.dropped.Add(1)
		return 0, false
	}
	return t.dropped.Swap(0), true
}

// Dropped is how many calls Allow has refused since the last line it let
// through (as yet unreported).
func (t *Throttle) Dropped() int64 { return t.dropped.Load() }

// after is when the line after one at at may go out; never 0 (no line
// yet), and not past the end of time.
func (t *Throttle) after(at int64) int64 {
	every := int64(t.Every)
	if every <= 0 {
		every = int64(DefaultThrottle)
	}
	next := at + every
	switch {
	case next < at: // overflow
		return math.MaxInt64
	case next == 0:
		return -1
	}
	return next
}
