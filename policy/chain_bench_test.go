package policy

import (
	"testing"

	"github.com/relaygate/gateway/config"
)

// BenchmarkChain runs a typical MCP route: CORS, CSRF, a request and a
// response header modifier, on an allowed cross-origin request.
func BenchmarkChain(b *testing.B) {
	cors, err := NewCORS(&config.CORS{AllowOrigins: []string{"https://app.example"}, ExposeHeaders: []string{"Mcp-Session-Id"}})
	if err != nil {
		b.Fatal(err)
	}
	csrf, err := NewCSRF(&config.CSRF{AdditionalOrigins: []string{"https://app.example"}})
	if err != nil {
		b.Fatal(err)
	}
	hm, err := NewHeaderModifier(&config.HeaderModifier{Set: map[string]string{"X-Env": "prod"}})
	if err != nil {
		b.Fatal(err)
	}
	cb := NewChainBuilder()
	cb.Add(KindCORS, cors)
	cb.Add(KindCSRF, csrf)
	cb.Add(KindRequestHeaders, RequestHeaders{hm})
	cb.Add(KindResponseHeaders, ResponseHeaders{hm})
	ch := cb.Build()
	c := newCtx("POST", "/mcp", "Host: gw.example", "Origin: https://app.example", "Sec-Fetch-Site: cross-site")
	b.ReportAllocs()
	for b.Loop() {
		c.CORS = nil
		c.Fast.Response.Reset()
		if ch.RunRequest(c) != Continue {
			b.Fatal("request answered")
		}
		ch.RunResponse(c)
	}
}
