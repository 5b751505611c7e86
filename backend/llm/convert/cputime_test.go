//go:build unix

package convert

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestBenchmarkCPU runs the benchmarks and reports CPU time per operation
// beside wall time: on a shared machine wall time counts the time other
// processes had the core. Set LLM_CONVERT_CPU=1 to run it.
func TestBenchmarkCPU(t *testing.T) {
	if os.Getenv("LLM_CONVERT_CPU") == "" {
		t.Skip("set LLM_CONVERT_CPU=1")
	}
	for _, bm := range []struct {
		name string
		f    func(*testing.B)
	}{
		{"RequestChatToChat", BenchmarkRequestChatToChat},
		{"RequestChatToMessages", BenchmarkRequestChatToMessages},
		{"RequestChatToBedrock", BenchmarkRequestChatToBedrock},
		{"RequestChatToGemini", BenchmarkRequestChatToGemini},
		{"ChunkChatToChat", BenchmarkChunkChatToChat},
		{"ChunkChatToMessages", BenchmarkChunkChatToMessages},
		{"ChunkMessagesToChat", BenchmarkChunkMessagesToChat},
		{"ChunkBedrockToChat", BenchmarkChunkBedrockToChat},
		{"ChunkBedrockToResponses", BenchmarkChunkBedrockToResponses},
	} {
		before := cpuTime()
		r := testing.Benchmark(bm.f)
		cpu := cpuTime() - before
		t.Logf("%-24s %8d ops  wall %7.0f ns/op  cpu <= %7.0f ns/op  %d allocs/op", bm.name, r.N, float64(r.T.Nanoseconds())/float64(r.N),
			float64(cpu.Nanoseconds())/float64(r.N), r.AllocsPerOp())
	}
	g := testGuard(t)
	for _, tc := range maskedChunkCases(t) {
		before := cpuTime()
		r := testing.Benchmark(func(b *testing.B) { benchMaskedChunk(b, g, tc, tc.chunk) })
		cpu := cpuTime() - before
		t.Logf("%-24s %8d ops  wall %7.0f ns/op  cpu <= %7.0f ns/op  %d allocs/op", "Masked"+tc.desc, r.N, float64(r.T.Nanoseconds())/float64(r.N),
			float64(cpu.Nanoseconds())/float64(r.N), r.AllocsPerOp())
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
