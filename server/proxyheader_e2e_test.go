package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	proxyproto "github.com/pires/go-proxyproto"
)

// proxyDial opens a connection to addr and sends header (nil: none) as a
// load balancer does before the client's bytes.
func proxyDial(t *testing.T, addr string, header []byte) net.Conn {
	t.Helper()
	c := dialTest(t, addr)
	if len(header) > 0 {
		if _, err := c.Write(header); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// getOn sends a GET on c and returns the response's status and body (0
// when the connection ended without one).
func getOn(t *testing.T, c net.Conn, br *bufio.Reader, path string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: gw.test\r\n\r\n"); err != nil {
		return 0, ""
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// xffUpstream answers each request with the X-Forwarded-For it got.
func xffUpstream(t *testing.T) string {
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-For"))
	}))
}

// TestProxyProtocolHTTP: behind a load balancer that sends PROXY protocol
// headers, the client's address is the header's: in X-Forwarded-For, the
// access log and networkAuthorization's source, for every request of the
// connection. A connection without a valid header is refused unless the
// mode is optional.
func TestProxyProtocolHTTP(t *testing.T) {
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		t.Run(string(tr), func(t *testing.T) {
			up := xffUpstream(t)
			tg := startGatewayWith(t, `
frontendPolicies:
  proxy: {version: all}
  networkAuthorization:
    rules: ['source.address != "192.0.2.66"']
binds:
- port: 1
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up}, tr)
			for _, v := range []byte{1, 2} {
				c := proxyDial(t, tg.addr(1), proxyHeaderBytes(t, v, "198.51.100.7:40000", "203.0.113.1:80"))
				br := bufio.NewReader(c)
				for i := range 2 {
					if status, body := getOn(t, c, br, "/v"); status != 200 || body != "198.51.100.7" {
						t.Fatalf("v%d, request %d: %d %q, want the header's client in X-Forwarded-For", v, i, status, body)
					}
				}
			}
			var srcs []string
			for _, e := range tg.accessLogs().FilterMessage("request").All() {
				srcs = append(srcs, e.ContextMap()["src"].(string))
			}
			if len(srcs) != 4 || srcs[0] != "198.51.100.7:40000" || srcs[3] != "198.51.100.7:40000" {
				t.Errorf("access log src %v", srcs)
			}
			refused := map[string][]byte{
				"no header":                             nil,
				"a malformed header":                    []byte("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n"),
				"a v2 header too long for it":           append(append([]byte(nil), proxyV2Sig...), 0x21, 0x11, 0x08, 0x00),
				"a source networkAuthorization refuses": proxyHeaderBytes(t, 2, "192.0.2.66:1", "203.0.113.1:80"),
			}
			for desc, header := range refused {
				c := proxyDial(t, tg.addr(1), header)
				if status, _ := getOn(t, c, bufio.NewReader(c), "/v"); status != 0 {
					t.Errorf("%s: answered %d", desc, status)
				}
			}
		})
	}
}

// TestProxyProtocolModes: optional serves a connection without a header as
// the socket's; v2 alone refuses a v1 header; a LOCAL header (a load
// balancer's health check) keeps the socket's addresses; tunnelProtocol:
// proxy is the default policy for its bind; a header that never ends is
// cut off at the timeout.
func TestProxyProtocolModes(t *testing.T) {
	old := proxyHeaderTimeout
	proxyHeaderTimeout = 200 * time.Millisecond
	t.Cleanup(func() { proxyHeaderTimeout = old })
	up := xffUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  tunnelProtocol: proxy
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
- port: 2
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up})
	optional := startGateway(t, `
frontendPolicies:
  proxyProtocol: {mode: optional}
binds:
- port: 1
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up})
	local, err := (&proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}).Format()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc   string
		addr   string
		header []byte
		status int
		body   string
	}{
		{"tunnelProtocol proxy, v2", tg.addr(1), proxyHeaderBytes(t, 2, "198.51.100.8:1000", "203.0.113.1:80"), 200, "198.51.100.8"},
		{"tunnelProtocol proxy, v1 refused", tg.addr(1), proxyHeaderBytes(t, 1, "198.51.100.8:1000", "203.0.113.1:80"), 0, ""},
		{"tunnelProtocol proxy, none refused", tg.addr(1), nil, 0, ""},
		{"tunnelProtocol proxy, LOCAL", tg.addr(1), local, 200, "127.0.0.1"},
		{"a bind without it takes no header", tg.addr(2), nil, 200, "127.0.0.1"},
		{"optional, none", optional.addr(1), nil, 200, "127.0.0.1"},
		{"optional, v2", optional.addr(1), proxyHeaderBytes(t, 2, "[2001:db8::9]:1000", "[2001:db8::1]:80"), 200, "2001:db8::9"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := proxyDial(t, tc.addr, tc.header)
			status, body := getOn(t, c, bufio.NewReader(c), "/m")
			if status != tc.status || body != tc.body {
				t.Fatalf("%d %q, want %d %q", status, body, tc.status, tc.body)
			}
		})
	}
	t.Run("a header that never ends", func(t *testing.T) {
		v2 := proxyHeaderBytes(t, 2, "198.51.100.8:1000", "203.0.113.1:80")
		c := proxyDial(t, tg.addr(1), v2[:len(v2)-3])
		start := time.Now()
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("read %d, %v: want the connection closed", n, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("closed after %v", d)
		}
	})
}

// TestProxyProtocolTLSPassthrough: a TLS connection behind the header is
// routed by its server name as any other, and its record names the
// header's client.
func TestProxyProtocolTLSPassthrough(t *testing.T) {
	pki := newTestPKI(t, "proxyproto")
	srv := pki.Server("a.test", "a.test")
	echo := tlsEchoUpstream(t, srv.TLS)
	// On both transports: netpoll's look at a connection's start reads its
	// bytes into the connection's buffer, and the pipe once forwarded from
	// under it, losing the ClientHello (every passthrough hung there).
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, `
frontendPolicies:
  proxy: {}
binds:
- port: 1
  listeners:
  - protocol: TLS
    tcpRoutes:
    - hostnames: [a.test]
      backends: [{host: ${ECHO}}]
`, map[string]string{"ECHO": echo}, tr)
			raw := proxyDial(t, tg.addr(1), proxyHeaderBytes(t, 2, "198.51.100.9:5555", "203.0.113.1:443"))
			_ = raw.SetDeadline(time.Now().Add(10 * time.Second))
			c := tls.Client(raw, &tls.Config{ServerName: "a.test", RootCAs: pki.Pool})
			if _, err := io.WriteString(c, "ping"); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 4)
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "ping" {
				t.Fatalf("echo %q, %v", got, err)
			}
			c.Close()
			rec := loggedConns(t, tg, 1)[0]
			requireFields(t, rec, map[string]any{"src": "198.51.100.9:5555", "tls.sni": "a.test"})
		})
	}
}

// TestConnRecordRefusedEarly: a connection refused before any route takes
// it has its record too: a port's TLS it did not speak (a malformed
// ClientHello, plain bytes, a handshake that failed) and a PROXY protocol
// header it lacked.
func TestConnRecordRefusedEarly(t *testing.T) {
	pki := newTestPKI(t, "refused")
	srv := pki.Server("a.test", "a.test")
	up := xffUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - name: secure
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - backends: [{host: ${UP}}]
- port: 2
  tunnelProtocol: proxy
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile})
	closed := func(c net.Conn) {
		t.Helper()
		if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
			t.Fatalf("read %d, %v: want the connection closed", n, err)
		}
	}
	tests := []struct {
		desc   string
		do     func()
		fields map[string]any
	}{
		{"a malformed ClientHello", func() {
			c := proxyDial(t, tg.addr(1), []byte{0x16, 0x03, 0x01, 0x00, 0x04, 0xff, 0xff, 0xff, 0xff})
			closed(c)
		}, map[string]any{"protocol": "tls", "bind": "bind/1", "end": "tls_failed"}},
		{"plain HTTP to a TLS port", func() {
			c := proxyDial(t, tg.addr(1), []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
			closed(c)
		}, map[string]any{"protocol": "tls", "bind": "bind/1", "end": "tls_failed"}},
		{"a failed handshake", func() {
			raw := proxyDial(t, tg.addr(1), nil)
			c := tls.Client(raw, &tls.Config{ServerName: "a.test", RootCAs: pki.Pool, MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10})
			if err := c.Handshake(); err == nil {
				t.Fatal("a TLS 1.1 handshake succeeded")
			}
		}, map[string]any{"protocol": "tls", "bind": "bind/1", "listener": "secure", "tls.sni": "a.test", "end": "tls_failed"}},
		{"no PROXY header", func() {
			c := proxyDial(t, tg.addr(2), []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
			closed(c)
		}, map[string]any{"protocol": "http", "bind": "bind/2", "end": "proxy_header"}},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			tc.do()
			requireFields(t, loggedConns(t, tg, i+1)[i], tc.fields)
		})
	}
}

// TestProxyProtocolDestinationPort: behind a PROXY protocol header, the
// destination networkAuthorization reads is the header's, port and
// address alike; the port was the bind's own, so a rule on the port a
// load balancer took the client on never saw it.
func TestProxyProtocolDestinationPort(t *testing.T) {
	up := xffUpstream(t)
	tg := startGateway(t, `
frontendPolicies:
  proxy: {version: all}
  networkAuthorization:
    rules: ['destination.port != 8443']
binds:
- port: 1
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up})
	for _, tc := range []struct {
		dst    string
		status int
	}{{"203.0.113.1:80", 200}, {"203.0.113.1:8443", 0}} {
		c := proxyDial(t, tg.addr(1), proxyHeaderBytes(t, 2, "198.51.100.7:40000", tc.dst))
		if status, _ := getOn(t, c, bufio.NewReader(c), "/v"); status != tc.status {
			t.Errorf("to %s: answered %d, want %d", tc.dst, status, tc.status)
		}
	}
}
