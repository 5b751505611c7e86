package policy

import (
	"testing"

	"github.com/relaygate/gateway/config"
)

func BenchmarkCSRF(b *testing.B) {
	p, err := NewCSRF(&config.CSRF{AdditionalOrigins: []string{"https://a.example", "https://b.example"}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		desc    string
		headers []string
	}{
		{desc: "same origin", headers: []string{"Host: gw.example", "Origin: http://gw.example"}},
		{desc: "trusted cross-site", headers: []string{"Host: gw.example", "Sec-Fetch-Site: cross-site", "Origin: https://b.example"}},
	} {
		b.Run(bc.desc, func(b *testing.B) {
			c := newCtx("POST", "/api", bc.headers...)
			b.ReportAllocs()
			for b.Loop() {
				if p.OnRequest(c) != Continue {
					b.Fatal("rejected")
				}
			}
		})
	}
}
