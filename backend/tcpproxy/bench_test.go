package tcpproxy_test

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/tcpproxy"
	"github.com/relaygate/gateway/backend/tcpproxy/tcpproxytest"
)

// The benchmarks run the source, the proxy and the sink in this process:
// cpu-s/GiB is the whole process's (getrusage), so the proxy's own share is
// a method's figure less direct's. bench/tcpfwd runs the proxy in a process
// of its own (GOMAXPROCS=1) and reports its CPU alone.
//
//	go test -run '^$' -bench 'Pipe' -benchtime 1024x ./backend/tcpproxy   # 1 GiB
var benchKinds = []string{"copy", "splice", "hybrid", "netpoll", "direct"}

// benchTarget stands up kind's proxy in front of the server handle (or
// nothing, for direct) and returns the address clients dial.
func benchTarget(b *testing.B, kind string, handle func(*net.TCPConn)) string {
	b.Helper()
	up, err := tcpproxytest.Serve(handle)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(up.Close)
	if kind == "direct" {
		return up.Addr
	}
	k, ok := tcpproxytest.KindByName(kind)
	if !ok {
		b.Fatalf("no kind %s", kind)
	}
	p, err := tcpproxytest.Start(k, up.Addr, tcpproxy.Options{Idle: time.Minute}, tcpproxytest.StartOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p.Addr
}

func dialBench(b *testing.B, addr string) *net.TCPConn {
	b.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// reportCPU reports the process's CPU seconds per GiB moved since cpu0.
func reportCPU(b *testing.B, cpu0 time.Duration, bytes int64) {
	cpu := tcpproxytest.CPU() - cpu0
	b.ReportMetric(cpu.Seconds()/(float64(bytes)/(1<<30)), "cpu-s/GiB")
}

// BenchmarkPipe: a source writes b.N MiB through the proxy to a sink.
func BenchmarkPipe(b *testing.B) {
	block := randomBytes(1<<20, 7)
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			counts := make(chan tcpproxytest.SinkCount, 1)
			addr := benchTarget(b, kind, tcpproxytest.Sink(counts))
			c := dialBench(b, addr)
			total := int64(b.N) << 20
			b.SetBytes(1 << 20)
			b.ResetTimer()
			cpu0 := tcpproxytest.CPU()
			if err := tcpproxytest.Source(c, block, total); err != nil {
				b.Fatal(err)
			}
			_ = c.CloseWrite()
			if got := <-counts; got.Bytes != total || got.Err != nil {
				b.Fatalf("sink read %d bytes, %v; want %d", got.Bytes, got.Err, total)
			}
			b.StopTimer()
			reportCPU(b, cpu0, total)
		})
	}
}

// BenchmarkPipeEcho: b.N MiB each way through an echo server, both at once.
func BenchmarkPipeEcho(b *testing.B) {
	block := randomBytes(1<<20, 8)
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			addr := benchTarget(b, kind, tcpproxytest.Echo)
			c := dialBench(b, addr)
			total := int64(b.N) << 20
			b.SetBytes(2 << 20)
			b.ResetTimer()
			cpu0 := tcpproxytest.CPU()
			go func() {
				_ = tcpproxytest.Source(c, block, total)
				_ = c.CloseWrite()
			}()
			if n, err := tcpproxytest.Drain(c); n != total || err != nil {
				b.Fatalf("read back %d bytes, %v; want %d", n, err, total)
			}
			b.StopTimer()
			reportCPU(b, cpu0, 2*total)
		})
	}
}

// BenchmarkPipePingPong: 50 connections exchange 1 KiB requests for 1 KiB
// answers (an echo server); an op is one exchange.
func BenchmarkPipePingPong(b *testing.B) {
	const conns, size = 50, 1 << 10
	for _, kind := range benchKinds {
		b.Run(kind, func(b *testing.B) {
			addr := benchTarget(b, kind, tcpproxytest.Echo)
			cs := make([]*net.TCPConn, conns)
			for i := range cs {
				cs[i] = dialBench(b, addr)
			}
			lat := make([][]time.Duration, conns)
			b.SetBytes(2 * size)
			b.ResetTimer()
			cpu0 := tcpproxytest.CPU()
			var wg sync.WaitGroup
			for i, c := range cs {
				n := b.N / conns
				if i < b.N%conns {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, resp := make([]byte, size), make([]byte, size)
					l := make([]time.Duration, 0, n)
					for range n {
						t0 := time.Now()
						if _, err := c.Write(req); err != nil {
							b.Error(err)
							return
						}
						if _, err := io.ReadFull(c, resp); err != nil {
							b.Error(err)
							return
						}
						l = append(l, time.Since(t0))
					}
					lat[i] = l
				}()
			}
			wg.Wait()
			b.StopTimer()
			cpu := tcpproxytest.CPU() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/exchange")
			all := slices.Concat(lat...)
			slices.Sort(all)
			if len(all) > 0 {
				b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}
