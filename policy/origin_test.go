package policy

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func TestParseOrigin(t *testing.T) {
	tests := []struct {
		desc     string
		in       string
		wildcard bool
		ok       bool
		scheme   uint8
		host     string
		port     int
	}{
		{desc: "http default port", in: "http://example.com", ok: true, scheme: schemeHTTP, host: "example.com", port: 80},
		{desc: "https default port", in: "https://example.com", ok: true, scheme: schemeHTTPS, host: "example.com", port: 443},
		{desc: "explicit port", in: "https://example.com:8443", ok: true, scheme: schemeHTTPS, host: "example.com", port: 8443},
		{desc: "scheme any case", in: "HTTPS://Example.com", ok: true, scheme: schemeHTTPS, host: "Example.com", port: 443},
		{desc: "IPv6", in: "http://[::1]:8080", ok: true, scheme: schemeHTTP, host: "[::1]", port: 8080},
		{desc: "IPv6 default port", in: "http://[::1]", ok: true, scheme: schemeHTTP, host: "[::1]", port: 80},
		{desc: "wildcard pattern", in: "https://*.example.com", wildcard: true, ok: true, scheme: schemeHTTPS, host: "*.example.com", port: 443},
		{desc: "wildcard in request origin", in: "https://*.example.com"},
		{desc: "other scheme", in: "ftp://example.com"},
		{desc: "path", in: "http://example.com/path"},
		{desc: "trailing slash", in: "http://example.com/"},
		{desc: "query", in: "http://example.com?x"},
		{desc: "port zero", in: "http://example.com:0"},
		{desc: "port too big", in: "http://example.com:65536"},
		{desc: "empty port", in: "http://example.com:"},
		{desc: "empty host", in: "http://:80"},
		{desc: "no host", in: "http://"},
		{desc: "no scheme", in: "example.com"},
		{desc: "null", in: "null"},
		{desc: "userinfo", in: "http://user@example.com"},
		{desc: "unbracketed IPv6", in: "http://::1"},
		{desc: "unclosed bracket", in: "http://[::1"},
		{desc: "junk after bracket", in: "http://[::1]x"},
		{desc: "space", in: "http://exa mple.com"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			o, ok := parseOrigin([]byte(tt.in), tt.wildcard)
			if ok != tt.ok {
				t.Fatalf("parseOrigin(%q) ok = %v, want %v", tt.in, ok, tt.ok)
			}
			if ok && (o.scheme != tt.scheme || string(o.host) != tt.host || o.port != tt.port) {
				t.Errorf("parseOrigin(%q) = {%d %q %d}, want {%d %q %d}", tt.in, o.scheme, o.host, o.port, tt.scheme, tt.host, tt.port)
			}
		})
	}
}

func TestGlobFold(t *testing.T) {
	tests := []struct {
		desc    string
		pattern string
		s       string
		want    bool
	}{
		{desc: "exact", pattern: "a.com", s: "a.com", want: true},
		{desc: "case", pattern: "a.com", s: "A.COM", want: true},
		{desc: "star alone", pattern: "*", s: "anything.at.all", want: true},
		{desc: "star suffix", pattern: "*.com", s: "foo.bar.com", want: true},
		{desc: "star needs the dot", pattern: "*.bar.com", s: "bar.com", want: false},
		{desc: "other tld", pattern: "*.org", s: "foo.com", want: false},
		{desc: "star in the middle", pattern: "api-*.example.com", s: "api-eu.example.com", want: true},
		{desc: "two stars", pattern: "*.*.example.com", s: "a.b.example.com", want: true},
		{desc: "backtracking", pattern: "*ab", s: "aab", want: true},
		{desc: "too short", pattern: "a.com", s: "a.co", want: false},
		{desc: "too long", pattern: "a.co", s: "a.com", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := globFold([]byte(tt.pattern), []byte(tt.s)); got != tt.want {
				t.Errorf("globFold(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
			}
		})
	}
}

func FuzzParseOrigin(f *testing.F) {
	for _, s := range []string{"http://a.com", "https://*.a.com:8443", "http://[::1]:80", "null", "https://", "http://a:0", "http://a.com/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, wildcard := range []bool{false, true} {
			o, ok := parseOrigin([]byte(s), wildcard)
			if !ok {
				continue
			}
			if len(o.host) == 0 || o.port < 1 || o.port > 65535 || (o.scheme != schemeHTTP && o.scheme != schemeHTTPS) {
				t.Fatalf("parseOrigin(%q) = %+v: invalid result", s, o)
			}
			if !wildcard {
				// An origin, as a pattern, matches itself.
				p, ok := parseOrigin(bytes.ToLower([]byte(s)), true)
				if !ok || !p.matches(&o) {
					t.Fatalf("origin %q does not match itself as a pattern", s)
				}
			}
		}
	})
}

// FuzzGlobFold compares globFold with a regular-expression reference.
func FuzzGlobFold(f *testing.F) {
	f.Add("*.example.com", "a.example.com")
	f.Add("a*b*c", "aXbYbZc")
	f.Add("**", "")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 64 || !isASCII(pattern) || !isASCII(s) {
			return // the reference works on text; hosts are ASCII
		}
		pattern = asciiLower(pattern)
		parts := strings.Split(pattern, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		// Case folding of the reference is ASCII only, like globFold.
		want := regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`).MatchString(asciiLower(s))
		if got := globFold([]byte(pattern), []byte(s)); got != want {
			t.Fatalf("globFold(%q, %q) = %v, want %v", pattern, s, got, want)
		}
	})
}

func asciiLower(s string) string {
	b := []byte(s)
	for i := range b {
		b[i] = lowerASCII(b[i])
	}
	return string(b)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
