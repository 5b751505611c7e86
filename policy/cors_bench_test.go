package policy

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
)

func benchCORS(b *testing.B) *CORS {
	p, err := NewCORS(&config.CORS{
		AllowCredentials: true,
		AllowOrigins:     []string{"https://app.example.com", "https://*.example.org"},
		AllowMethods:     []string{"GET", "POST", "DELETE"},
		AllowHeaders:     []string{"Content-Type", "Mcp-Session-Id", "Authorization"},
		ExposeHeaders:    []string{"Mcp-Session-Id"},
		MaxAge:           &config.Duration{Duration: time.Hour},
	})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

func BenchmarkCORSPreflight(b *testing.B) {
	p := benchCORS(b)
	c := newCtx("OPTIONS", "/mcp", "Origin: https://tenant.example.org", "Access-Control-Request-Method: POST")
	b.ReportAllocs()
	for b.Loop() {
		c.Fast.Response.Reset()
		p.OnRequest(c)
	}
}

func BenchmarkCORSSimpleRequest(b *testing.B) {
	p := benchCORS(b)
	c := newCtx("POST", "/mcp", "Origin: https://app.example.com")
	b.ReportAllocs()
	for b.Loop() {
		c.CORS = nil
		c.Fast.Response.Reset()
		p.OnRequest(c)
		p.OnResponse(c)
	}
}
