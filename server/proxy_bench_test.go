package server

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
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

// benchGET sends GET /bench to addr b.N times, with the given headers
// (name, value pairs), each answered 200.
func benchGET(b *testing.B, addr string, headers ...string) {
	c := &fasthttp.HostClient{Addr: addr, MaxConns: 64}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	req.SetRequestURI("http://" + addr + "/bench")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
			b.Fatalf("%v %d", err, resp.StatusCode())
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
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

// BenchmarkProxyBackendAuthKey is BenchmarkProxyGET to a backend with
// backendAuth key and a credential: the gateway puts its secrets on each
// request (every client value at their places removed first). It
// allocates nothing more than the plain route.
func BenchmarkProxyBackendAuthKey(b *testing.B) {
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		b.Run(string(tr), func(b *testing.B) {
			up := fastUpstream(b)
			tg := startGatewayBench(b, oneRoute(up)+"        policies: {backendAuth: {key: bench-key, credentials: [{location: {header: {name: X-Tenant}}, key: t1}]}}\n", tr)
			benchGET(b, tg)
		})
	}
}

// BenchmarkProxyPolicyRoute is BenchmarkProxyGET through a route with the
// policies of bench/gateway.yaml's policy route: jwtAuth (strict, an inline
// ES256 key set), a CEL authorization rule on a claim and a local rate
// limit that never runs dry. Every request carries the same valid token, as
// in the bench; the difference from BenchmarkProxyGET is the policies' cost.
func BenchmarkProxyPolicyRoute(b *testing.B) {
	iss := jwttest.NewIssuer(b, "ES256")
	token := iss.Sign(iss.Claims("bench"))
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		b.Run(string(tr), func(b *testing.B) {
			up := fastUpstream(b)
			tg := startGatewayBench(b, policyRoute(up, iss), tr)
			// The route enforces: no token, no answer from the upstream.
			if code, _, err := fasthttp.Get(nil, "http://"+tg+"/bench"); err != nil || code != fasthttp.StatusUnauthorized {
				b.Fatalf("without a token: %d %v, want 401", code, err)
			}
			benchGET(b, tg, "Authorization", "Bearer "+token)
		})
	}
}

// policyRoute is oneRoute with bench/gateway.yaml's policy route policies,
// trusting iss's key, given inline.
func policyRoute(backend string, iss *jwttest.Issuer) string {
	return `binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        jwtAuth:
          mode: strict
          providers:
          - issuer: ` + iss.Iss + `
            audiences: [` + jwttest.DefaultAudience + `]
            jwks: '` + string(iss.JWKS()) + `'
        authorization:
          rules: ['jwt.sub == "bench"']
        localRateLimit:
        - { maxTokens: 1000000000, tokensPerFill: 1000000000, fillInterval: 1s }
      backends:
      - host: ` + backend + "\n"
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
