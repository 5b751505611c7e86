package server

import (
	"io"
	"net"
	"testing"
)

// BenchmarkNetExtAuthzConn is a new connection carrying one GET (then
// closed) through a port without network policies, with a
// networkAuthorization rule, and with networkExtAuthz asking a local HTTP
// service (fastUpstream, which answers 200): the differences are each
// policy's cost per connection.
func BenchmarkNetExtAuthzConn(b *testing.B) {
	up := fastUpstream(b)
	authz := fastUpstream(b)
	for _, bc := range []struct{ name, frontend string }{
		{"none", ""},
		{"networkAuthorization", "frontendPolicies:\n  networkAuthorization: {rules: ['source.address == \"127.0.0.1\"']}\n"},
		{"networkExtAuthz", "frontendPolicies:\n  networkExtAuthz:\n    host: " + authz + "\n    protocol: {http: {addRequestHeaders: {x-client: 'source.address'}}}\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr := startGatewayBench(b, oneRoute(up)+bc.frontend, TransportStd)
			req := []byte("GET /bench HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			buf := make([]byte, 4096)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				n, err := io.ReadAtLeast(c, buf, 12)
				if err != nil || string(buf[9:12]) != "200" {
					b.Fatalf("%q %v", buf[:n], err)
				}
				c.Close()
			}
		})
	}
}
