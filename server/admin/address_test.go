package admin

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		desc        string
		in          string
		wantNetwork string
		wantAddress string
		wantErr     string // "" for success; "disabled" for errDisabled
	}{
		{"tcp loopback", "127.0.0.1:15000", "tcp4", "127.0.0.1:15000", ""},
		{"tcp wildcard v4 (IPv4 alone)", "0.0.0.0:15020", "tcp4", "0.0.0.0:15020", ""},
		{"tcp wildcard v6", "[::]:15020", "tcp", "[::]:15020", ""},
		{"tcp any host", ":15021", "tcp", ":15021", ""},
		{"os-chosen port", "127.0.0.1:0", "tcp4", "127.0.0.1:0", ""},
		{"unix socket", "unix:/run/gw/admin.sock", "unix", "/run/gw/admin.sock", ""},
		{"unix relative path", "unix:admin.sock", "unix", "admin.sock", ""},
		{"abstract unix socket", "unix:@gw-admin", "unix", "@gw-admin", ""},
		{"off", "off", "", "", "disabled"},
		{"OFF", "OFF", "", "", "disabled"},
		{"empty", "", "", "", "disabled"},
		{"no port", "localhost", "", "", "want host:port"},
		{"empty port", "127.0.0.1:", "", "", "not a number"},
		{"port too big", "127.0.0.1:65536", "", "", "not a number"},
		{"negative port", "127.0.0.1:-1", "", "", "not a number"},
		{"too many colons", "1:2:3", "", "", "want host:port"},
		{"empty unix path", "unix:", "", "", "empty unix socket path"},
		{"NUL in unix path", "unix:/tmp/a\x00b", "", "", "NUL byte"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			a, err := parseAddr(tc.in)
			switch {
			case tc.wantErr == "disabled":
				if !errors.Is(err, errDisabled) {
					t.Errorf("err = %v, want errDisabled", err)
				}
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Errorf("unexpected error %v", err)
			case a.network != tc.wantNetwork || a.address != tc.wantAddress:
				t.Errorf("got %s %q, want %s %q", a.network, a.address, tc.wantNetwork, tc.wantAddress)
			}
		})
	}
}

func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1:0", "[::1]:80", "unix:/x", "unix:", "off", "", "a:b:c", ":99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := parseAddr(s)
		if err != nil {
			if a != (listenAddr{}) {
				t.Errorf("error %v with non-zero result %+v", err, a)
			}
			return
		}
		switch a.network {
		case "unix":
			if a.address == "" || "unix:"+a.address != s {
				t.Errorf("unix %q parsed from %q", a.address, s)
			}
		case "tcp", "tcp4":
			_, port, err := net.SplitHostPort(a.address)
			if err != nil {
				t.Fatalf("accepted %q but SplitHostPort fails: %v", s, err)
			}
			if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
				t.Errorf("accepted port %q from %q", port, s)
			}
		default:
			t.Errorf("network %q from %q", a.network, s)
		}
	})
}

func TestBrowserURL(t *testing.T) {
	tests := []struct {
		desc  string
		bound string
		want  string
	}{
		{"loopback", "127.0.0.1:15000", "http://127.0.0.1:15000/ui/"},
		{"ipv4 wildcard", "0.0.0.0:15000", "http://127.0.0.1:15000/ui/"},
		{"ipv6 wildcard", "[::]:15000", "http://[::1]:15000/ui/"},
		{"ipv6 loopback", "[::1]:15000", "http://[::1]:15000/ui/"},
		{"host name", "admin.internal:15000", "http://admin.internal:15000/ui/"},
		{"unix socket", "unix:/run/a.sock", ""},
		{"off", "", ""},
		{"malformed", "nonsense", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := browserURL(tc.bound, "/ui/"); got != tc.want {
				t.Errorf("browserURL(%q) = %q, want %q", tc.bound, got, tc.want)
			}
		})
	}
}

// An IPv4 wildcard listens on IPv4 alone: Go's "tcp" would open it dual
// stack, answering on IPv6 addresses too.
func TestListenIPv4WildcardIsIPv4Alone(t *testing.T) {
	a, err := parseAddr("0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := a.listen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.To4() == nil {
		t.Fatalf("listening on %v: dual stack", ln.Addr())
	}
}
