package logline

import (
	"syscall"
	"testing"
	"time"
)

// processCPU returns the CPU time the process has used on all its threads:
// the benchmark's goroutine and the garbage collector's work alike.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPUPerOp reports the CPU time per operation since start (a
// processCPU reading before the loop) as "cpu-ns/op". On a machine shared
// with other work, wall time per operation (ns/op) counts the time the
// benchmark waited for a core; CPU time does not, so it varies far less.
func reportCPUPerOp(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op")
}
