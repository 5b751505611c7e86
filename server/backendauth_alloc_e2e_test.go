package server

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestBackendAuthAllocations: a request to a backend whose backendAuth
// puts credentials on it (in a header and in the query, the head kept
// aside for expressions: hideCredentials) allocates no more through the
// gateway than the same client and upstream do alone.
func TestBackendAuthAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.Response.SetBodyRaw([]byte("ok")) }}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Shutdown() })
	up := ln.Addr().String()
	gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
	if err := gw.Apply(parseConfig(t, oneRoute(up)+`        policies:
          backendAuth:
            key: sk-backend
            credentials: [{location: {queryParameter: {name: api_key}}, key: sk-query}]
`, nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Shutdown(expiredContext()) })
	allocs := func(addr string) float64 {
		c := &fasthttp.HostClient{Addr: addr}
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.SetRequestURI("/a?q=1")
		req.Header.SetHost(addr)
		req.Header.Set("Authorization", "Bearer client-token")
		do := func() {
			if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				t.Fatalf("%v %d", err, resp.StatusCode())
			}
		}
		for range 200 {
			do()
		}
		return testing.AllocsPerRun(1000, do)
	}
	direct := allocs(up)
	proxied := allocs(gw.Addrs()[3000].String())
	for try := 1; try < 3 && proxied > direct+0.5; try++ {
		proxied = min(proxied, allocs(gw.Addrs()[3000].String()))
	}
	if proxied > direct+0.5 {
		t.Fatalf("%.2f allocations per request through the gateway, %.2f without it", proxied, direct)
	}
	t.Logf("allocations per request: %.2f direct, %.2f through the gateway", direct, proxied)
}
