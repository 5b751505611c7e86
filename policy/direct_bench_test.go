package policy

import (
	"testing"

	"github.com/relaygate/gateway/config"
)

func BenchmarkDirectResponse(b *testing.B) {
	p, err := NewDirectResponse(&config.DirectResponse{Status: intp(200), Body: config.Bytes(`{"status":"ok"}`)})
	if err != nil {
		b.Fatal(err)
	}
	c := newCtx("GET", "/healthz")
	b.ReportAllocs()
	for b.Loop() {
		c.Fast.Response.Reset()
		p.OnRequest(c)
	}
}
