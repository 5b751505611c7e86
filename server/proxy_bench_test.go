package server

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// fastUpstream is an in-process fasthttp server with a small fixed answer.
func fastUpstream(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	body := []byte("hello, this is a small upstream response body of about a hundred bytes for the proxy benchmark...")
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBody(body) }}
	go srv.Serve(ln) //nolint:errcheck
	tb.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

func benchGET(b *testing.B, addr string) {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + addr + "/bench")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("%v %d", err, resp.StatusCode())
		}
	}
}

// BenchmarkDirectGET is the baseline: client and upstream only.
func BenchmarkDirectGET(b *testing.B) { benchGET(b, fastUpstream(b)) }

// BenchmarkProxyGET is one GET through the gateway (same client and
// upstream as BenchmarkDirectGET; the difference is the gateway's cost).
func BenchmarkProxyGET(b *testing.B) {
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		b.Run(string(tr), func(b *testing.B) {
			up := fastUpstream(b)
			tg := startGatewayBench(b, oneRoute(up), tr)
			benchGET(b, tg)
		})
	}
}

func startGatewayBench(b *testing.B, yaml string, tr Transport) string {
	gw := New(Options{Transport: tr, ListenAddr: func(int) string { return "127.0.0.1:0" }})
	f := parseConfigTB(b, yaml)
	if err := gw.Apply(f); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gw.Shutdown(expiredContext()) })
	return gw.Addrs()[3000].String()
}
