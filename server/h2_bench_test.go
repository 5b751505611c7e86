package server

//lint:file-ignore SA1019 the benchmarks drive x/net's HTTP/2 client, and its server as the baseline the gateway's own is measured against.

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// benchH2GET sends GET /bench to addr over HTTP/2 in cleartext b.N times,
// from 8 goroutines sharing one connection (streams, as HTTP/2 clients
// send them), each answered 200.
func benchH2GET(b *testing.B, addr string) {
	c := h2cClient()
	url := "http://" + addr + "/bench"
	get := func() {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			b.Fatalf("%d %s", resp.StatusCode, resp.Proto)
		}
	}
	get() // the connection
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			get()
		}
	})
}

// BenchmarkH2Direct is the baseline the gateway's own HTTP/2 server was
// chosen against: the same client against x/net's server answering with a
// fixed body (docs/ARCHITECTURE.md, "HTTP/2 clients").
func BenchmarkH2Direct(b *testing.B) {
	body := []byte("hello, this is a small upstream response body of about a hundred bytes for the proxy benchmark...")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	addr := xnetH2Upstream(b, h)
	benchH2GET(b, addr)
}

// BenchmarkH2Proxy is a GET from an HTTP/2 client through the gateway's
// HTTP/2 front-end to an HTTP/1.1 upstream (BenchmarkProxyGET's), streams
// in parallel on one connection.
func BenchmarkH2Proxy(b *testing.B) {
	up := fastUpstream(b)
	tg := startGatewayBench(b, oneRouteVersion(up, "HTTP1"), TransportStd)
	benchH2GET(b, tg)
}

// oneRouteVersion is oneRoute with the backend's HTTP version set.
func oneRouteVersion(backend, version string) string {
	return oneRoute(backend) + "        policies: {http: {version: " + version + "}}\n"
}

// benchH2Raw sends GET /bench to addr over HTTP/2 in cleartext b.N times,
// one stream after another on one connection, from a client built on
// x/net's Framer that allocates next to nothing itself (a pre-encoded
// header block, frames reused): the allocations reported are the
// server's.
func benchH2Raw(b *testing.B, addr string) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	bw, br := bufio.NewWriter(c), bufio.NewReader(c)
	_, _ = bw.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(bw, br)
	fr.SetReuseFrames()
	_ = fr.WriteSettings()
	_ = bw.Flush()
	// :method GET, :scheme http (static table), :path /bench and
	// :authority bench (literals without indexing).
	block := []byte{0x82, 0x86, 0x04, 6, '/', 'b', 'e', 'n', 'c', 'h', 0x01, 5, 'b', 'e', 'n', 'c', 'h'}
	get := func(id uint32) {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			b.Fatal(err)
		}
		_ = bw.Flush()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				b.Fatal(err)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					_ = fr.WriteSettingsAck()
					_ = bw.Flush()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					_ = fr.WritePing(true, f.Data)
					_ = bw.Flush()
				}
			case *http2.GoAwayFrame:
				b.Fatalf("GOAWAY %v", f.ErrCode)
			case *http2.RSTStreamFrame:
				b.Fatalf("RST_STREAM %v", f.ErrCode)
			case *http2.DataFrame:
				if n := len(f.Data()); n > 0 {
					_ = fr.WriteWindowUpdate(0, uint32(n))
					_ = bw.Flush()
				}
				if f.StreamID == id && f.StreamEnded() {
					return
				}
			case *http2.HeadersFrame:
				if f.StreamID == id && f.StreamEnded() {
					return
				}
			}
		}
	}
	for i := range 100 { // warm up
		get(uint32(2*i + 1))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		get(uint32(2*(i+100) + 1))
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process has used (user and system), in
// nanoseconds: on this shared machine, wall time per request says more
// about the neighbours than about the code.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkH2ServerDirect: x/net's server answering with a fixed body,
// measured from the frame client: the baseline (BenchmarkH2Direct).
func BenchmarkH2ServerDirect(b *testing.B) {
	body := []byte("hello, this is a small upstream response body of about a hundred bytes for the proxy benchmark...")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain; charset=utf-8"}
		w.Header()["Server"] = []string{"fasthttp"}
		_, _ = w.Write(body)
	})
	addr := xnetH2Upstream(b, h)
	benchH2Raw(b, addr)
}

// BenchmarkH2ServerProxy: the gateway's HTTP/2 front-end to an HTTP/1.1
// upstream (BenchmarkProxyGET's), measured from the frame client, one
// stream after another: the front-end's and the request path's cost per
// request, and the front-end's allocations (those of x/net's frame
// structs and of hpack's strings for the client's literal fields).
func BenchmarkH2ServerProxy(b *testing.B) {
	up := fastUpstream(b)
	tg := startGatewayBench(b, oneRouteVersion(up, "HTTP1"), TransportStd)
	benchH2Raw(b, tg)
}

// BenchmarkH2Codec is the front-end's own work per stream without the
// sockets: a request head decoded from HPACK into a pooled request
// context, and a small response encoded into the stream's frames.
func BenchmarkH2Codec(b *testing.B) {
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	hc := newH2Conn(&bind{}, c1, nil, &frontendSettings{})
	hc.sendWindow = 1 << 62 // no client here to give it back
	// The blocks a client sends for two identical requests: the first
	// fills HPACK's table, the second (the one measured) has every field
	// indexed.
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	fields := []hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "bench.example"}, {Name: ":path", Value: "/bench?x=1"},
		{Name: "user-agent", Value: "h2load"}, {Name: "accept", Value: "*/*"}, {Name: "accept-encoding", Value: "gzip, deflate"},
		{Name: "cookie", Value: "a=b"}, {Name: "x-request-id", Value: "0123456789"}}
	var blocks [2][]byte
	for i := range blocks {
		buf.Reset()
		for _, f := range fields {
			_ = enc.WriteField(f)
		}
		blocks[i] = bytes.Clone(buf.Bytes())
	}
	var resp fasthttp.Response
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.Header.Set("Date", "Thu, 26 Nov 2026 14:00:00 GMT")
	resp.Header.Set("Server", "fasthttp")
	resp.SetBodyString("hello")
	decode := func(block []byte) *h2Exchange {
		x := acquireH2Exchange()
		hc.block = h2Block{id: 1, x: x, endStream: true, remain: hc.set.maxHeaderBytes, contentLength: -1}
		hc.hdec.SetEmitEnabled(true)
		if _, err := hc.hdec.Write(block); err != nil {
			b.Fatal(err)
		}
		if err := hc.hdec.Close(); err != nil || !x.request(&hc.block) {
			b.Fatal("bad block", err)
		}
		x.open(hc, 1, h2HalfClosedRemote)
		return x
	}
	releaseH2Exchange(decode(blocks[0]))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x := decode(blocks[1])
		if err := hc.writeHead(x, 200, &resp.Header, len(resp.Body()), false); err != nil {
			b.Fatal(err)
		}
		if err := hc.writeData(x, resp.Body(), true); err != nil {
			b.Fatal(err)
		}
		hc.wbuf = hc.wbuf[:0]
		releaseH2Exchange(x)
	}
}

// BenchmarkH2UpstreamPOST is a gRPC-like unary call: a POST with a small
// body from an HTTP/2 client through the gateway to an HTTP/2 upstream
// (x/net's server, reading the body and answering with a small one), one
// call after another on one connection. The request body streams from the
// client's stream to the upstream's (upBody's pump).
func BenchmarkH2UpstreamPOST(b *testing.B) {
	answer := []byte("answer")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = w.Write(answer)
	})
	addr := xnetH2Upstream(b, h)
	tg := startGatewayBench(b, oneRouteVersion(addr, "HTTP2"), TransportStd)
	client := h2cClient()
	body := bytes.Repeat([]byte("x"), 100)
	call := func() {
		resp, err := client.Post("http://"+tg+"/bench", "application/grpc", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 100 {
		call()
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		call()
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// xnetH2Upstream serves h with x/net's HTTP/2 server in cleartext (prior
// knowledge) on a port of its own, and returns its address.
func xnetH2Upstream(b *testing.B, h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http2.Server{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(c, &http2.ServeConnOpts{Handler: h})
		}
	}()
	b.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}
