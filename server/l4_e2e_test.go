package server

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tlsUpstream starts an HTTPS server on 127.0.0.1 with cert that answers
// every request with body.
func tlsUpstream(t *testing.T, cert tls.Certificate, body string) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, body)
	})}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// tlsGet sends GET / over TLS to addr with server name sni and returns the
// server's leaf certificate's common name and the body.
func tlsGet(t *testing.T, addr, sni string, cfg *tls.Config) (cn, body string, err error) {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName = sni
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+sni+"\r\nConnection: close\r\n\r\n"); err != nil {
		return "", "", err
	}
	resp, err := io.ReadAll(c)
	if err != nil && len(resp) == 0 {
		return "", "", err
	}
	s := string(resp)
	if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
		s = s[i+4:]
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, s, nil
}

func TestTLSPassthroughBySNI(t *testing.T) {
	pki := newTestPKI(t, "upstreams")
	upA := tlsUpstream(t, pki.Server("a.test", "a.test").TLS, "from A")
	upB := tlsUpstream(t, pki.Server("b.test", "b.test", "x.wild.test").TLS, "from B")
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: TLS
    tcpRoutes:
    - hostnames: [a.test]
      backends: [{host: ${A}}]
    - hostnames: ["*.wild.test", b.test]
      backends: [{host: ${B}}]
`, map[string]string{"A": upA, "B": upB})
	addr := tg.addr(1)
	client := &tls.Config{RootCAs: pki.Pool}
	for _, tc := range []struct{ sni, cn, body string }{
		{"a.test", "a.test", "from A"},
		{"b.test", "b.test", "from B"},
		{"x.wild.test", "b.test", "from B"},
		{"A.TEST", "a.test", "from A"},
	} {
		cn, body, err := tlsGet(t, addr, tc.sni, client)
		if err != nil {
			t.Fatalf("%s: %v", tc.sni, err)
		}
		// The upstream's own certificate reached the client.
		if cn != tc.cn || body != tc.body {
			t.Errorf("%s: certificate %q, body %q; want %q, %q", tc.sni, cn, body, tc.cn, tc.body)
		}
	}
	for _, sni := range []string{"c.test", ""} {
		cfg := client.Clone()
		cfg.InsecureSkipVerify = true
		if _, _, err := tlsGet(t, addr, sni, cfg); err == nil {
			t.Errorf("server name %q: connected; want the connection closed", sni)
		}
	}
}

// TestTLSHostileClientHellos: a malformed, oversized, slow or absent
// ClientHello closes its connection within the handshake timeout, and
// never stalls another connection.
func TestTLSHostileClientHellos(t *testing.T) {
	pki := newTestPKI(t, "hostile")
	up := tlsUpstream(t, pki.Server("a.test", "a.test").TLS, "ok")
	tg := startGateway(t, `
frontendPolicies:
  tls: {handshakeTimeout: 300ms}
binds:
- port: 1
  listeners:
  - protocol: TLS
    tcpRoutes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up})
	addr := tg.addr(1)
	record := func(body []byte) []byte {
		return append([]byte{0x16, 0x03, 0x01, byte(len(body) >> 8), byte(len(body))}, body...)
	}
	hugeLen := []byte{0x16, 0x03, 0x01, 0xff, 0xff}
	cases := []struct {
		name string
		send []byte
	}{
		{"garbage record", record([]byte{1, 0, 0, 5, 9, 9, 9, 9, 9})},
		{"wrong handshake type", record([]byte{2, 0, 0, 0})},
		{"length past the record", record([]byte{1, 0xff, 0xff, 0xff})},
		{"huge record, slow", hugeLen},
		{"half a header", []byte{0x16, 0x03}},
		{"nothing", nil},
		{"not TLS", []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			// A good connection meanwhile is served.
			if _, body, err := tlsGet(t, addr, "a.test", &tls.Config{RootCAs: pki.Pool}); err != nil || body != "ok" {
				t.Fatalf("good connection beside it: %q, %v", body, err)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			start := time.Now()
			n, err := io.Copy(io.Discard, c)
			if errors.Is(err, syscall.ECONNRESET) {
				err = nil // closed with the client's bytes unread
			}
			if err != nil {
				t.Fatalf("read: %v (after %d bytes): the connection was not closed", err, n)
			}
			if waited := time.Since(start); waited > 3*time.Second {
				t.Errorf("closed after %v", waited)
			}
		})
	}
}

// tlsEchoUpstream is tcpEchoUpstream behind TLS with cert.
func tlsEchoUpstream(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	return rawUpstream(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		defer tc.Close()
		_, _ = io.Copy(tc, tc)
	})
}

// tcpEchoUpstream accepts connections and echoes what they send, half-closing
// its side when the client half-closes.
func tcpEchoUpstream(t *testing.T) string {
	t.Helper()
	return rawUpstream(t, func(c net.Conn) {
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
	})
}

// TestTCPListenerEcho: 64 MiB through a TCP listener to an echo server and
// back, both ways at once, then the client's half-close; on both
// transports (netpoll's refuses writes after the client's FIN, and the
// echo's tail goes out through the descriptor).
func TestTCPListenerEcho(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) { testTCPListenerEcho(t, tr) })
	}
}

func testTCPListenerEcho(t *testing.T, tr Transport) {
	up := tcpEchoUpstream(t)
	tg := startGatewayWith(t, `
binds:
- port: 1
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up}, tr)
	c, err := net.Dial("tcp", tg.addr(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	const size = 64 << 20
	src := rand.NewChaCha8([32]byte{1})
	want := sha256.New()
	errc := make(chan error, 1)
	go func() {
		buf := make([]byte, 256<<10)
		for sent := 0; sent < size; sent += len(buf) {
			_, _ = src.Read(buf)
			want.Write(buf)
			if _, err := c.Write(buf); err != nil {
				errc <- err
				return
			}
		}
		// Half-close: the echo must still come back whole.
		errc <- c.(*net.TCPConn).CloseWrite()
	}()
	got := sha256.New()
	n, err := io.Copy(got, c)
	if err != nil {
		t.Fatalf("read after %d bytes: %v", n, err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatalf("echoed %d bytes, digest match %v; want %d intact", n, bytes.Equal(got.Sum(nil), want.Sum(nil)), size)
	}
	// The bytes are counted once the pipe ends.
	c.Close()
	series := `agentgateway_downstream_received_bytes_total{bind="bind/1",listener="unknown",protocol="tcp"} 67108864`
	var m bytes.Buffer
	eventually(t, 10*time.Second, "the forwarded bytes counted", func() bool {
		m.Reset()
		tg.metrics().WritePrometheus(&m)
		return strings.Contains(m.String(), series) && strings.Contains(m.String(), strings.Replace(series, "received", "sent", 1))
	})
}

// TestTCPHalfCloseFromUpstream: the upstream answers and half-closes
// first; the client still sends, and the upstream reads it all. The
// upstream speaks before the client sent a byte: on netpoll's transport too,
// which hands a connection to its reader only once bytes arrive, the pipe
// starts at accept.
func TestTCPHalfCloseFromUpstream(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) { testTCPHalfCloseFromUpstream(t, tr) })
	}
}

func testTCPHalfCloseFromUpstream(t *testing.T, tr Transport) {
	got := make(chan string, 1)
	up := rawUpstream(t, func(c net.Conn) {
		io.WriteString(c, "hello first")
		_ = c.(*net.TCPConn).CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	tg := startGatewayWith(t, `
binds:
- port: 1
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": up}, tr)
	c := dialTest(t, tg.addr(1))
	greeting := make([]byte, len("hello first"))
	if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != "hello first" {
		t.Fatalf("greeting %q, %v", greeting, err)
	}
	// The upstream's end of stream reaches the client as one.
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("after the greeting: %d bytes, %v; want EOF", n, err)
	}
	io.WriteString(c, "and then the client")
	_ = c.(*net.TCPConn).CloseWrite()
	select {
	case s := <-got:
		if s != "and then the client" {
			t.Fatalf("upstream read %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the client's end")
	}
}

// TestTCPRouteOriginatesTLS: a TCP route's backendTLS speaks TLS to the
// backend, verified as configured; a backend that does not verify gets no
// bytes, and the client's connection closes.
func TestTCPRouteOriginatesTLS(t *testing.T) {
	pki := newTestPKI(t, "tcptls")
	up := tlsEchoUpstream(t, pki.Server("db.internal", "db.internal").TLS)
	tg := startGateway(t, `
binds:
- port: 1
  listeners:
  - protocol: TCP
    tcpRoutes:
    - policies: {backendTLS: {root: ${CA}, hostname: db.internal}}
      backends: [{host: ${UP}}]
- port: 2
  listeners:
  - protocol: TCP
    tcpRoutes:
    - policies: {backendTLS: {root: ${CA}}}
      backends: [{host: ${UP}, policies: {backendTLS: {root: ${CA}, hostname: wrong.internal}}}]
`, map[string]string{"UP": up, "CA": pki.CAFile})
	c := dialTest(t, tg.addr(1))
	io.WriteString(c, "over TLS upstream")
	buf := make([]byte, len("over TLS upstream"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "over TLS upstream" {
		t.Fatalf("echo %q, %v", buf, err)
	}
	// The backend's own setting replaced the route's: its name does not
	// verify.
	c2, err := net.Dial("tcp", tg.addr(2))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_ = c2.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c2, "hello")
	if n, err := c2.Read(make([]byte, 16)); n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	}
}

// TestForwardedConnectionsHaveNoHTTPDeadlines: a forwarded connection that
// stays quiet longer than an HTTP request head may take (and a TLS
// passthrough one longer than its handshake bound) is still forwarded.
func TestForwardedConnectionsHaveNoHTTPDeadlines(t *testing.T) {
	old := headTimeout.Swap(int64(200 * time.Millisecond))
	t.Cleanup(func() { headTimeout.Store(old) })
	pki := newTestPKI(t, "quiet")
	echo := tcpEchoUpstream(t)
	tlsEcho := tlsEchoUpstream(t, pki.Server("q.test", "q.test").TLS)
	tg := startGateway(t, `
frontendPolicies:
  tls: {handshakeTimeout: 200ms}
binds:
- port: 1
  listeners:
  - protocol: TCP
    tcpRoutes: [{backends: [{host: ${ECHO}}]}]
- port: 2
  listeners:
  - protocol: TLS
    tcpRoutes: [{backends: [{host: ${TLSECHO}}]}]
`, map[string]string{"ECHO": echo, "TLSECHO": tlsEcho})
	plain, err := net.Dial("tcp", tg.addr(1))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	sealed, err := tls.Dial("tcp", tg.addr(2), &tls.Config{ServerName: "q.test", RootCAs: pki.Pool})
	if err != nil {
		t.Fatal(err)
	}
	defer sealed.Close()
	// Quiet for longer than both bounds: elapsed time is what is tested.
	time.Sleep(600 * time.Millisecond)
	for name, c := range map[string]net.Conn{"tcp": plain, "tls passthrough": sealed} {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "still here")
		buf := make([]byte, len("still here"))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "still here" {
			t.Errorf("%s after a quiet spell: %q, %v", name, buf, err)
		}
	}
}
