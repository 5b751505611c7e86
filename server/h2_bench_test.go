package server

//lint:file-ignore SA1019 the tests drive x/net's HTTP/2 server and client directly (server/h2.go says why the server).

import (
	"io"
	"net"
	"net/http"
	"testing"

	"golang.org/x/net/http2"
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

// BenchmarkH2Direct is the floor of any design built on x/net's server:
// the same client against x/net's server answering with a fixed body.
func BenchmarkH2Direct(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	body := []byte("hello, this is a small upstream response body of about a hundred bytes for the proxy benchmark...")
	srv := &http2.Server{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
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
	benchH2GET(b, ln.Addr().String())
}

// BenchmarkH2Proxy is a GET from an HTTP/2 client through the gateway to
// an HTTP/1.1 upstream (BenchmarkProxyGET's), through the front-end adapter:
// the difference from BenchmarkH2Direct is the gateway's cost.
func BenchmarkH2Proxy(b *testing.B) {
	up := fastUpstream(b)
	tg := startGatewayBench(b, oneRouteVersion(up, "HTTP1"), TransportStd)
	benchH2GET(b, tg)
}

// oneRouteVersion is oneRoute with the backend's HTTP version set.
func oneRouteVersion(backend, version string) string {
	return oneRoute(backend) + "        policies: {http: {version: " + version + "}}\n"
}
