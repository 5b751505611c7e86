package server

import (
	"sync"
	"sync/atomic"
	"time"
)

// Clock reads on the request path. time.Now reads two clocks (the wall clock
// and the monotonic one: two clock_gettime calls on Linux), and a proxied
// request needs several readings: when it began, when it ended, and the
// client connection's deadlines (the next request head's, the idle wait's).
//
//   - Durations use the monotonic clock alone (monoNow): one call.
//   - Connection deadlines are seconds to minutes long; they come from a
//     wall clock a ticker refreshes every deadlineTick (deadlineAfter), at
//     no clock read per request.

// deadlineTick is how often the deadline clock is refreshed, and so how late
// a deadline from deadlineAfter may fire.
const deadlineTick = 100 * time.Millisecond

var deadlineClock struct {
	once sync.Once
	now  atomic.Int64 // wall clock, UnixNano, at most about deadlineTick old
}

// deadlineAfter returns the deadline d from now, for a connection, rounded up
// by one tick of the deadline clock: it fires up to deadlineTick late, and
// early only if the clock's goroutine was kept from running for longer than
// a tick.
func deadlineAfter(d time.Duration) time.Time {
	deadlineClock.once.Do(startDeadlineClock)
	return time.Unix(0, deadlineClock.now.Load()+int64(deadlineTick+d))
}

// startDeadlineClock sets the deadline clock and starts its ticker, which
// runs for the life of the process (one wakeup per tick, like the ticker
// behind fasthttp's Date header).
func startDeadlineClock() {
	deadlineClock.now.Store(time.Now().UnixNano())
	go func() {
		for range time.Tick(deadlineTick) {
			deadlineClock.now.Store(time.Now().UnixNano())
		}
	}()
}

// monoEpoch anchors monoNow.
var monoEpoch = time.Now()

// monoNow reads the monotonic clock alone, as time since monoEpoch.
func monoNow() time.Duration { return time.Since(monoEpoch) }
