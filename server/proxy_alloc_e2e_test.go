package server

import (
	"bytes"
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestProxyAllocationsBeyondPlainGET: requests that take the proxy's other
// paths (forwarded and Connection-listed headers to rewrite, streamed
// responses, request bodies) allocate no more through the gateway than the
// same client and upstream do alone. TestProxyPathAllocations covers the
// plain GET.
func TestProxyAllocationsBeyondPlainGET(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	big := bytes.Repeat([]byte("z"), 20000) // above backend.ResponseStreamThreshold
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/chunked":
			ctx.Response.SetBodyStream(bytes.NewReader(big), -1)
		case "/large":
			ctx.Response.SetBodyRaw(big)
		default:
			ctx.Response.SetBodyRaw(ctx.Request.Body())
		}
	}}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Shutdown() })
	up := ln.Addr().String()
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	if err := gw.Apply(parseConfig(t, oneRoute(up), nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Shutdown(expiredContext()) })

	upload := bytes.Repeat([]byte("u"), 3<<20) // above maxBufferSize: streams to the upstream
	tests := []struct {
		desc  string
		setup func(req *fasthttp.Request)
		size  int
		// known are allocations the gateway makes in a dependency: with
		// StreamRequestBody, fasthttp's server drains every request body
		// stream after the handler, even one read to its end, with io.CopyN,
		// whose io.LimitReader allocates (fasthttp v1.77.0 server.go,
		// requestStream.discard in streaming.go).
		known float64
		runs  int // 1000 unless set
	}{
		{desc: "forwarded and Connection-listed headers", size: 0, setup: func(req *fasthttp.Request) {
			req.SetRequestURI("/h?x=%20y")
			req.Header.Add("X-Forwarded-For", "1.2.3.4")
			req.Header.Add("X-Forwarded-For", "5.6.7.8")
			req.Header.Set("X-Forwarded-Proto", "https")
			req.Header.Set("Connection", "X-Foo, X-Bar")
			req.Header.Set("X-Foo", "1")
			req.Header.Set("X-Bar", "2")
			req.Header.Set("Keep-Alive", "timeout=5")
		}},
		// Deleting Keep-Alive would move the X-A lines: the header is
		// rebuilt from there (policy.DelRequestHeader), in pooled buffers.
		{desc: "hop-by-hop field before a repeated one", size: 0, setup: func(req *fasthttp.Request) {
			req.SetRequestURI("/h")
			req.Header.Set("Keep-Alive", "timeout=5")
			req.Header.Add("X-A", "1")
			req.Header.Add("X-A", "2")
			req.Header.Add("X-A", "3")
		}},
		{desc: "streamed chunked response", size: len(big), setup: func(req *fasthttp.Request) { req.SetRequestURI("/chunked") }},
		// A body of known length goes out through the client connection's
		// ReadFrom: the gateway's own (package sock) copies through a pooled
		// buffer, where net.TCPConn's generic copy allocated two.
		{desc: "streamed response by length", size: len(big), setup: func(req *fasthttp.Request) { req.SetRequestURI("/large") }},
		{desc: "small request body", size: 1000, known: 1, setup: func(req *fasthttp.Request) {
			req.SetRequestURI("/echo")
			req.Header.SetMethod("POST")
			req.SetBody(big[:1000])
		}},
		{desc: "streamed request body", size: len(upload), known: 1, runs: 50, setup: func(req *fasthttp.Request) {
			req.SetRequestURI("/echo")
			req.Header.SetMethod("POST")
			req.SetBody(upload)
		}},
	}
	allocs := func(addr string, setup func(*fasthttp.Request), size, runs int) float64 {
		c := &fasthttp.HostClient{Addr: addr}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		setup(req)
		req.Header.SetHost(addr)
		do := func() {
			if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 || len(resp.Body()) != size {
				t.Fatalf("%v %d, %d bytes, want %d", err, resp.StatusCode(), len(resp.Body()), size)
			}
		}
		for i := 0; i < runs/5; i++ { // warm pools
			do()
		}
		return testing.AllocsPerRun(runs, do)
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			runs := tc.runs
			if runs == 0 {
				runs = 1000
			}
			direct := allocs(up, tc.setup, tc.size, runs)
			// The count is the process's: goroutines that earlier tests
			// left winding down can only add to it, so the least of
			// three measurements is the gateway's.
			proxied := allocs(gw.Addrs()[3000].String(), tc.setup, tc.size, runs)
			for try := 1; try < 3 && proxied > direct+tc.known+0.5; try++ {
				proxied = min(proxied, allocs(gw.Addrs()[3000].String(), tc.setup, tc.size, runs))
			}
			if proxied > direct+tc.known+0.5 {
				t.Fatalf("%.2f allocations per request through the gateway, %.2f without it: the gateway allocates", proxied, direct)
			}
			t.Logf("allocations per request: %.2f direct, %.2f through the gateway", direct, proxied)
		})
	}
}
