package policy

import (
	"testing"

	"github.com/relaygate/gateway/config"
)

func BenchmarkRedirect(b *testing.B) {
	p, err := NewRedirect(&config.RequestRedirect{Scheme: "https", Path: &config.PathRewrite{Prefix: strp("/v2")}})
	if err != nil {
		b.Fatal(err)
	}
	c := newCtx("GET", "/api/users?page=2", "Host: gw.example")
	c.MatchedPrefix = []byte("/api")
	b.ReportAllocs()
	for b.Loop() {
		c.Fast.Response.Reset()
		p.OnRequest(c)
	}
}
