package mcp

import "testing"

// TestHTTPSURL: with backendTLS an http:// target is reached with TLS on
// its own port.
func TestHTTPSURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:3001/mcp":   "https://127.0.0.1:3001/mcp",
		"http://tools.internal/mcp":   "https://tools.internal:80/mcp",
		"http://[::1]/sse?x=1":        "https://[::1]:80/sse?x=1",
		"https://tools.internal/mcp":  "https://tools.internal/mcp",
		"https://tools.internal:8443": "https://tools.internal:8443",
	} {
		if got := httpsURL(in); got != want {
			t.Errorf("httpsURL(%q) = %q, want %q", in, got, want)
		}
	}
}
