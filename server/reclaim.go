package server

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/relaygate/gateway/backend/sock"
)

// Returning memory after a wave of connections goes idle. Parked
// connections (sock.EnableParking) give their goroutine stacks and buffers
// back to the Go heap, but an idle process runs no garbage collection to
// free them, and the runtime gives freed memory back to the system only
// slowly. So when the number of parked connections has grown by
// reclaimParkedGrowth since the last look, the memory is collected and
// returned at once (debug.FreeOSMemory). Steady traffic, where connections
// park and wake at the same rate, never triggers it.

// reclaimParkedGrowth is the growth in parked connections (about 17 KiB
// each) that triggers a reclaim.
const reclaimParkedGrowth = 1024

// reclaimEvery is how often the parked count is looked at.
const reclaimEvery = time.Second

var reclaimOnce sync.Once

// startReclaimer starts, once per process, the goroutine that returns the
// memory of connections that parked.
func startReclaimer() {
	reclaimOnce.Do(func() {
		go func() {
			base := sock.Parked()
			prev := base
			for range time.Tick(reclaimEvery) {
				n := sock.Parked()
				if reclaimDue(base, prev, n) {
					reclaim()
					base = n
				}
				base = min(base, n)
				prev = n
			}
		}()
	})
}

// reclaim collects twice, since what the parked connections' servers pooled
// (sync.Pool) survives one collection, and returns the free memory to the
// system.
func reclaim() {
	runtime.GC()
	debug.FreeOSMemory()
}

// reclaimDue reports whether to reclaim, given the parked count after the
// last reclaim (or its lowest since: base), at the previous look and now:
// once the count has grown by reclaimParkedGrowth and the wave has ebbed
// (few parked since the previous look).
func reclaimDue(base, prev, now int) bool {
	return now-base >= reclaimParkedGrowth && now-prev < reclaimParkedGrowth/8
}
