package server

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"testing"

	proxyproto "github.com/pires/go-proxyproto"
)

// proxyHeaderBytes is the header a load balancer sends, as go-proxyproto
// writes it.
func proxyHeaderBytes(t testing.TB, version byte, src, dst string) []byte {
	t.Helper()
	s, err := net.ResolveTCPAddr("tcp", src)
	if err != nil {
		t.Fatal(err)
	}
	d, err := net.ResolveTCPAddr("tcp", dst)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proxyproto.HeaderProxyFromAddrs(version, s, d).Format()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFrameProxyHeader(t *testing.T) {
	v1 := proxyHeaderBytes(t, 1, "198.51.100.7:40000", "203.0.113.1:443")
	v2 := proxyHeaderBytes(t, 2, "[2001:db8::7]:40000", "[2001:db8::1]:443")
	long := append(append([]byte(nil), proxyV2Sig...), 0x21, 0x11, 0x04, 0x01) // a body of 1025 bytes
	tests := []struct {
		desc  string
		in    []byte
		n     int
		frame proxyFrame
	}{
		{"nothing yet", nil, 0, proxyFrameMore},
		{"v1 prefix", []byte("PROX"), 0, proxyFrameMore},
		{"v1 without its end", v1[:len(v1)-1], 0, proxyFrameMore},
		{"v1", v1, len(v1), proxyFrameWhole},
		{"v1 and a request", append(append([]byte(nil), v1...), "GET / HTTP/1.1\r\n"...), len(v1), proxyFrameWhole},
		{"v1 too long", append([]byte("PROXY "), bytes.Repeat([]byte("1"), proxyV1Max)...), 0, proxyFrameBad},
		{"v2 signature part", proxyV2Sig[:5], 0, proxyFrameMore},
		{"v2 fixed part", v2[:proxyV2Fixed-1], 0, proxyFrameMore},
		{"v2 body part", v2[:len(v2)-1], 0, proxyFrameMore},
		{"v2", v2, len(v2), proxyFrameWhole},
		{"v2 and a ClientHello", append(append([]byte(nil), v2...), 0x16, 0x03, 0x01), len(v2), proxyFrameWhole},
		{"v2 too long", long, 0, proxyFrameBad},
		{"HTTP", []byte("GET / HTTP/1.1\r\n"), 0, proxyFrameNone},
		{"a method sharing a prefix", []byte("PROPFIND / HTTP/1.1\r\n"), 0, proxyFrameNone},
		{"TLS", []byte{0x16, 0x03, 0x01, 0x02}, 0, proxyFrameNone},
		{"a CR", []byte("\r\n\r\nX"), 0, proxyFrameNone},
	}
	for _, tc := range tests {
		n, f := frameProxyHeader(tc.in)
		if n != tc.n || f != tc.frame {
			t.Errorf("%s: %d, %d; want %d, %d", tc.desc, n, f, tc.n, tc.frame)
		}
	}
}

func TestParseProxyHeader(t *testing.T) {
	all := &proxyPolicy{v1: true, v2: true}
	local, err := (&proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}).Format()
	if err != nil {
		t.Fatal(err)
	}
	unix, err := proxyproto.HeaderProxyFromAddrs(2, &net.UnixAddr{Name: "/a", Net: "unix"}, &net.UnixAddr{Name: "/b", Net: "unix"}).Format()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc     string
		in       []byte
		pol      *proxyPolicy
		src, dst string // "" for none
		err      string
	}{
		{"v1 IPv4", proxyHeaderBytes(t, 1, "198.51.100.7:40000", "203.0.113.1:443"), all, "198.51.100.7:40000", "203.0.113.1:443", ""},
		{"v2 IPv4", proxyHeaderBytes(t, 2, "198.51.100.7:40000", "203.0.113.1:443"), all, "198.51.100.7:40000", "203.0.113.1:443", ""},
		{"v2 IPv6", proxyHeaderBytes(t, 2, "[2001:db8::7]:40000", "[2001:db8::1]:443"), all, "[2001:db8::7]:40000", "[2001:db8::1]:443", ""},
		{"v1 UNKNOWN", []byte("PROXY UNKNOWN\r\n"), all, "", "", ""},
		{"v2 LOCAL", local, all, "", "", ""},
		{"v1 not accepted", proxyHeaderBytes(t, 1, "198.51.100.7:40000", "203.0.113.1:443"), &proxyPolicy{v2: true}, "", "", "v1 header, not accepted"},
		{"v2 not accepted", proxyHeaderBytes(t, 2, "198.51.100.7:40000", "203.0.113.1:443"), &proxyPolicy{v1: true}, "", "", "v2 header, not accepted"},
		{"unix", unix, all, "", "", "Unix socket"},
		{"v1 bad address", []byte("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n"), all, "", "", "malformed"},
		{"v1 bad port", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 99999 2\r\n"), all, "", "", "malformed"},
	}
	for _, tc := range tests {
		src, dst, err := parseProxyHeader(tc.in, tc.pol)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.desc, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.desc, err)
			continue
		}
		if addrString(src) != tc.src || addrString(dst) != tc.dst {
			t.Errorf("%s: %v → %v, want %s → %s", tc.desc, src, dst, tc.src, tc.dst)
		}
	}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// FuzzProxyHeader holds the framing to go-proxyproto's reading: a frame
// that is whole parses (or fails) on exactly its bytes, and bytes the
// framing calls no header are no header to the library either.
func FuzzProxyHeader(f *testing.F) {
	f.Add(proxyHeaderBytes(f, 1, "198.51.100.7:40000", "203.0.113.1:443"))
	f.Add(proxyHeaderBytes(f, 2, "198.51.100.7:40000", "203.0.113.1:443"))
	f.Add(proxyHeaderBytes(f, 2, "[2001:db8::7]:40000", "[2001:db8::1]:443"))
	f.Add([]byte("PROXY UNKNOWN\r\nGET / HTTP/1.1\r\n"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	all := &proxyPolicy{v1: true, v2: true}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > proxyHeaderMax {
			b = b[:proxyHeaderMax]
		}
		n, frame := frameProxyHeader(b)
		switch frame {
		case proxyFrameWhole:
			if n <= 0 || n > len(b) {
				t.Fatalf("frame of %d bytes out of %d", n, len(b))
			}
			_, _, _ = parseProxyHeader(b[:n], all)
		case proxyFrameNone:
			if _, err := proxyproto.Read(bufio.NewReader(bytes.NewReader(b))); err != proxyproto.ErrNoProxyProtocol {
				t.Fatalf("no header by the framing, the library says %v", err)
			}
		}
	})
}
