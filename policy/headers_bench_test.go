package policy

import (
	"testing"

	"github.com/relaygate/gateway/config"
	"github.com/valyala/fasthttp"
)

func BenchmarkHeaderModifierRequest(b *testing.B) {
	m, err := NewHeaderModifier(&config.HeaderModifier{
		Add:    map[string]string{"X-Trace": "on"},
		Set:    map[string]string{"X-Env": "prod", "X-Tenant": "acme"},
		Remove: []string{"Cookie", "X-Debug"},
	})
	if err != nil {
		b.Fatal(err)
	}
	c := newCtx("GET", "/p", "Host: a.example", "X-Debug: 1", "Cookie: a=b", "Accept: */*")
	var template fasthttp.RequestHeader
	c.Fast.Request.Header.CopyTo(&template)
	rh := RequestHeaders{m}
	b.ReportAllocs()
	for b.Loop() {
		template.CopyTo(&c.Fast.Request.Header)
		rh.OnRequest(c)
	}
}

func BenchmarkHeaderModifierResponse(b *testing.B) {
	m, err := NewHeaderModifier(&config.HeaderModifier{
		Set:    map[string]string{"X-Frame-Options": "DENY", "Cache-Control": "no-store"},
		Remove: []string{"Server"},
	})
	if err != nil {
		b.Fatal(err)
	}
	c := newCtx("GET", "/")
	rh := ResponseHeaders{m}
	b.ReportAllocs()
	for b.Loop() {
		c.Fast.Response.Header.Reset()
		rh.OnResponse(c)
	}
}
