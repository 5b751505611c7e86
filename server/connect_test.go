package server

import (
	"net"
	"strconv"
	"testing"
)

func TestParseConnectTarget(t *testing.T) {
	tests := []struct {
		in   string
		host string
		port int
		ok   bool
	}{
		{"example.com:443", "example.com", 443, true},
		{"Example.COM:8443", "example.com", 8443, true},
		{"example.com.:443", "example.com", 443, true},
		{"127.0.0.1:22", "127.0.0.1", 22, true},
		{"[::1]:443", "::1", 443, true},
		{"[2001:DB8::1]:1", "2001:db8::1", 1, true},
		{"a:65535", "a", 65535, true},
		{"example.com", "", 0, false},
		{"example.com:", "", 0, false},
		{":443", "", 0, false},
		{"example.com:0", "", 0, false},
		{"example.com:65536", "", 0, false},
		{"example.com:99999999999999999999", "", 0, false},
		{"example.com:+443", "", 0, false},
		{"example.com:44a", "", 0, false},
		{"user@example.com:443", "", 0, false},
		{"example.com:443/path", "", 0, false},
		{"http://example.com:443", "", 0, false},
		{"::1:443", "", 0, false},
		{"[::1:443", "", 0, false},
		{"[fe80::1%eth0]:443", "", 0, false},
		{"[127.0.0.1]:443", "", 0, false},
		{"*.example.com:443", "", 0, false},
		{"exa mple.com:443", "", 0, false},
		{"exa\x00mple.com:443", "", 0, false},
		// Canonical addresses: the mapped form is the IPv4 address; an
		// unspecified one, or a name that is a short-form IPv4 address,
		// is refused.
		{"[::ffff:127.0.0.1]:443", "127.0.0.1", 443, true},
		{"[::FFFF:7f00:1]:443", "127.0.0.1", 443, true},
		{"0.0.0.0:443", "", 0, false},
		{"[::]:443", "", 0, false},
		{"[::ffff:0.0.0.0]:443", "", 0, false},
		{"127.1:443", "", 0, false},
		{"2130706433:443", "", 0, false},
		{"0x7f.1:443", "", 0, false},
		{"0x7f000001.:443", "", 0, false},
		{"1.example.123a:443", "1.example.123a", 443, true},
		{"example.com..:443", "", 0, false},
		{"0xfoo:443", "0xfoo", 443, true},
		{"123.example:443", "123.example", 443, true},
	}
	for _, tc := range tests {
		host, port, err := parseConnectTarget([]byte(tc.in))
		if ok := err == nil; ok != tc.ok || host != tc.host || port != tc.port {
			t.Errorf("%q: %q %d %v; want %q %d ok=%v", tc.in, host, port, err, tc.host, tc.port, tc.ok)
		}
	}
}

// FuzzParseConnectTarget: any input is refused or read as a host and port
// that name exactly what they were read from.
func FuzzParseConnectTarget(f *testing.F) {
	for _, s := range []string{"example.com:443", "[::1]:443", "127.0.0.1:1", "a:65535", "x:0", "[::1", "a:b:c", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		host, port, err := parseConnectTarget(in)
		if err != nil {
			return
		}
		if host == "" || port < 1 || port > 65535 {
			t.Fatalf("%q: host %q port %d", in, host, port)
		}
		// Written back, it reads the same.
		again := net.JoinHostPort(host, strconv.Itoa(port))
		h2, p2, err := parseConnectTarget([]byte(again))
		if err != nil || h2 != host || p2 != port {
			t.Fatalf("%q -> %q -> %q %d %v", in, again, h2, p2, err)
		}
	})
}
