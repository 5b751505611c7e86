package policy

import (
	"testing"
)

func TestSplitAuthority(t *testing.T) {
	tests := []struct {
		desc string
		in   string
		host string
		port string // "-" for none
		ok   bool
	}{
		{desc: "host", in: "a.com", host: "a.com", port: "-", ok: true},
		{desc: "host and port", in: "a.com:8080", host: "a.com", port: "8080", ok: true},
		{desc: "empty port", in: "a.com:", host: "a.com", port: "", ok: true},
		{desc: "IPv6", in: "[::1]", host: "[::1]", port: "-", ok: true},
		{desc: "IPv6 and port", in: "[::1]:443", host: "[::1]", port: "443", ok: true},
		{desc: "unclosed IPv6", in: "[::1", ok: false},
		{desc: "junk after IPv6", in: "[::1]x", ok: false},
		{desc: "empty", in: "", host: "", port: "-", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			host, port, ok := splitAuthority([]byte(tt.in))
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			gotPort := "-"
			if port != nil {
				gotPort = string(port)
			}
			if string(host) != tt.host || gotPort != tt.port {
				t.Errorf("splitAuthority(%q) = %q, %q; want %q, %q", tt.in, host, gotPort, tt.host, tt.port)
			}
		})
	}
}

func TestAppendAuthority(t *testing.T) {
	tests := []struct {
		desc   string
		host   string
		port   string // "-" for none
		scheme string
		want   string
	}{
		{desc: "no port", host: "a.com", port: "-", scheme: "http", want: "a.com"},
		{desc: "http 80 left out", host: "a.com", port: "80", scheme: "http", want: "a.com"},
		{desc: "https 443 left out", host: "a.com", port: "443", scheme: "HTTPS", want: "a.com"},
		{desc: "http 443 kept", host: "a.com", port: "443", scheme: "http", want: "a.com:443"},
		{desc: "other port kept", host: "[::1]", port: "8080", scheme: "https", want: "[::1]:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var port []byte
			if tt.port != "-" {
				port = []byte(tt.port)
			}
			if got := string(appendAuthority(nil, []byte(tt.host), port, []byte(tt.scheme))); got != tt.want {
				t.Errorf("appendAuthority = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzSplitAuthority(f *testing.F) {
	for _, s := range []string{"a.com", "a.com:80", "[::1]:8080", "[::1", ":", "[]:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, port, ok := splitAuthority([]byte(s))
		if !ok {
			return
		}
		back := string(host)
		if port != nil {
			back += ":" + string(port)
		}
		if back != s {
			t.Fatalf("splitAuthority(%q) = %q, %q, which does not rebuild the input", s, host, port)
		}
		_ = checkHostPort(s)
	})
}
