//go:build unix

package aipolicy

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestBenchmarkCPU runs the benchmarks and reports CPU time per operation
// beside wall time: on a shared machine wall time counts the time other
// processes had the core. Set AIPOLICY_CPU=1 to run it.
func TestBenchmarkCPU(t *testing.T) {
	if os.Getenv("AIPOLICY_CPU") == "" {
		t.Skip("set AIPOLICY_CPU=1")
	}
	for _, sub := range allBenches() {
		before := cpuTime()
		r := testing.Benchmark(sub.f)
		cpu := cpuTime() - before
		t.Logf("%-34s %7d ops  wall %8.0f ns/op  cpu <= %8.0f ns/op  %5d allocs/op", sub.name, r.N,
			float64(r.T.Nanoseconds())/float64(r.N), float64(cpu.Nanoseconds())/float64(r.N), r.AllocsPerOp())
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
