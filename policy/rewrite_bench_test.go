package policy

import (
	"testing"

	"github.com/relaygate/gateway/config"
)

func BenchmarkURLRewrite(b *testing.B) {
	p, err := NewURLRewrite(&config.URLRewrite{
		Authority: &config.HostRewrite{Host: "backend.internal"},
		Path:      &config.PathRewrite{Prefix: strp("/v2")},
	})
	if err != nil {
		b.Fatal(err)
	}
	c := newCtx("GET", "/api/users?page=2", "Host: gw.example")
	b.ReportAllocs()
	for b.Loop() {
		c.Fast.Request.SetRequestURI("/api/users?page=2")
		c.Path = rawPathNoCopy(c.Fast.Request.Header.RequestURI())
		c.MatchedPrefix = c.Path[:4]
		p.OnRequest(c)
	}
}
