package server

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/extauthz"
	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
)

// netExtAuthzConfig is frontendPolicies.networkExtAuthz asking the service
// at ${AUTHZ} with the connection's destination port in the path and its
// source and destination in headers.
const netExtAuthzConfig = `
frontendPolicies:
  networkExtAuthz:
    host: ${AUTHZ}
    protocol:
      http:
        path: '"/conn/" + string(destination.port)'
        addRequestHeaders:
          x-source: 'source.address + ":" + string(source.port)'
          x-destination: 'has(destination.hostname) ? destination.hostname : destination.address'
`

// allowPaths is a Decide that allows the checks whose path is one of paths.
func allowPaths(paths ...string) func(*http.Request) int {
	return func(r *http.Request) int {
		for _, p := range paths {
			if r.URL.Path == p {
				return http.StatusOK
			}
		}
		return http.StatusForbidden
	}
}

// countingUpstream is an HTTP upstream answering "ok" that counts the
// requests it got.
func countingUpstream(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	return upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.WriteString(w, "ok")
	})), &n
}

// requestOn sends GET path on c and returns the answer's status and body.
func requestOn(t *testing.T, c net.Conn, br *bufio.Reader, path string) (int, string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// requireClosedUnanswered fails unless the gateway closes c without a byte
// (after the request, if any, that was written on it).
func requireClosedUnanswered(t *testing.T, c net.Conn) {
	t.Helper()
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v; want the connection closed unanswered", n, err)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection was neither answered nor closed")
	}
}

// TestNetExtAuthzHTTPListener: an HTTP listener's connection is checked
// once, before its first request: allowed, both requests of a keep-alive
// connection are served after a single check, which saw the client's
// address and the destination; refused, the connection is closed without
// an answer, no request reaches the upstream, and the refusal has its
// connection record.
func TestNetExtAuthzHTTPListener(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			authz := &extauthztest.HTTP{Decide: allowPaths("/conn/1")}
			up, served := countingUpstream(t)
			tg := startGatewayWith(t, netExtAuthzConfig+`
binds:
- port: 1
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
- port: 2
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"AUTHZ": extauthztest.StartHTTP(t, authz), "UP": up}, tr)

			c := dialTest(t, tg.addr(1))
			br := bufio.NewReader(c)
			for _, path := range []string{"/a", "/b"} {
				if status, body := requestOn(t, c, br, path); status != 200 || body != "ok" {
					t.Fatalf("GET %s: %d %q", path, status, body)
				}
			}
			checks := authz.Checks()
			if len(checks) != 1 {
				t.Fatalf("%d checks for one connection of two requests, want 1", len(checks))
			}
			if ch := checks[0]; ch.Method != "GET" || ch.URI != "/conn/1" || ch.Header.Get("X-Source") != c.LocalAddr().String() || ch.Header.Get("X-Destination") != "127.0.0.1" {
				t.Errorf("the service saw %s %s x-source %q x-destination %q; want GET /conn/1 from %s to 127.0.0.1",
					ch.Method, ch.URI, ch.Header.Get("X-Source"), ch.Header.Get("X-Destination"), c.LocalAddr())
			}

			before := served.Load()
			d := dialTest(t, tg.addr(2))
			io.WriteString(d, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			requireClosedUnanswered(t, d)
			rec := loggedConns(t, tg, 1)[0]
			requireFields(t, rec, map[string]any{"protocol": "http", "bind": "bind/2", "src": d.LocalAddr().String(), "end": "denied"})
			requireAbsent(t, rec, "endpoint", "tls.sni")
			if n := served.Load() - before; n != 0 {
				t.Errorf("the upstream got %d requests from a refused connection", n)
			}
			if n := len(authz.Checks()); n != 2 {
				t.Errorf("%d checks for two connections, want 2", n)
			}
		})
	}
}

// countingEcho is tcpEchoUpstream counting the connections it accepted.
func countingEcho(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	return rawUpstream(t, func(c net.Conn) {
		n.Add(1)
		_, _ = io.Copy(c, c)
		_ = c.(*net.TCPConn).CloseWrite()
	}), &n
}

// TestNetExtAuthzTCPListener: a TCP listener's connection is checked
// before the upstream is dialed: refused, the upstream never sees it.
func TestNetExtAuthzTCPListener(t *testing.T) {
	authz := &extauthztest.HTTP{Decide: allowPaths("/conn/1")}
	echo, accepted := countingEcho(t)
	tg := startGateway(t, netExtAuthzConfig+`
binds:
- port: 1
  listeners:
  - protocol: TCP
    tcpRoutes: [{backends: [{host: ${ECHO}}]}]
- port: 2
  listeners:
  - name: raw
    protocol: TCP
    tcpRoutes: [{name: echo, backends: [{host: ${ECHO}}]}]
`, map[string]string{"AUTHZ": extauthztest.StartHTTP(t, authz), "ECHO": echo})

	d := dialTest(t, tg.addr(2))
	requireClosedUnanswered(t, d)
	rec := loggedConns(t, tg, 1)[0]
	requireFields(t, rec, map[string]any{"protocol": "tcp", "bind": "bind/2", "listener": "raw", "route": "echo", "src": d.LocalAddr().String(), "end": "denied", "bytes_in": int64(0)})
	requireAbsent(t, rec, "endpoint")
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the upstream accepted %d connections for a refused one", n)
	}

	c := dialTest(t, tg.addr(1))
	if got := exchange(t, c, []byte("hello")); string(got) != "hello" {
		t.Fatalf("echo %q", got)
	}
	rec = loggedConns(t, tg, 2)[1]
	requireFields(t, rec, map[string]any{"protocol": "tcp", "bind": "bind/1", "endpoint": echo, "end": "closed"})
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the upstream accepted %d connections, want 1", n)
	}
	if checks := authz.Checks(); len(checks) != 2 || checks[0].URI != "/conn/2" || checks[1].URI != "/conn/1" {
		t.Fatalf("checks %+v", checks)
	}
}

// TestNetExtAuthzTLSPassthrough: a TLS passthrough connection is checked
// with its server name as destination.hostname, before the upstream is
// dialed.
func TestNetExtAuthzTLSPassthrough(t *testing.T) {
	pki := newTestPKI(t, "netextauthz")
	srv := pki.Server("a.test", "a.test", "b.test")
	cfg := &tls.Config{Certificates: []tls.Certificate{srv.TLS}}
	var accepted atomic.Int64
	up := rawUpstream(t, func(c net.Conn) {
		accepted.Add(1)
		tc := tls.Server(c, cfg)
		defer tc.Close()
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(tc)
		if _, err := http.ReadRequest(br); err == nil {
			io.WriteString(tc, "HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\npassed!")
		}
	})
	authz := &extauthztest.HTTP{Decide: func(r *http.Request) int {
		if r.Header.Get("X-Destination") == "a.test" {
			return 200
		}
		return 403
	}}
	tg := startGateway(t, netExtAuthzConfig+`
binds:
- port: 1
  listeners:
  - name: pass
    protocol: TLS
    tcpRoutes:
    - hostnames: [a.test, b.test]
      backends: [{host: ${UP}}]
`, map[string]string{"AUTHZ": extauthztest.StartHTTP(t, authz), "UP": up})
	trust := &tls.Config{RootCAs: pki.Pool}

	if _, _, err := tlsGet(t, tg.addr(1), "b.test", trust); err == nil {
		t.Fatal("b.test: the handshake succeeded through a refused connection")
	}
	rec := loggedConns(t, tg, 1)[0]
	requireFields(t, rec, map[string]any{"protocol": "tls", "bind": "bind/1", "tls.sni": "b.test", "end": "denied"})
	requireAbsent(t, rec, "endpoint")
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the upstream accepted %d connections for a refused one", n)
	}

	if cn, body, err := tlsGet(t, tg.addr(1), "a.test", trust); err != nil || cn != "a.test" || body != "passed!" {
		t.Fatalf("a.test: %q %q %v", cn, body, err)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the upstream accepted %d connections, want 1", n)
	}
	if checks := authz.Checks(); len(checks) != 2 || checks[0].Header.Get("X-Destination") != "b.test" || checks[1].URI != "/conn/1" {
		t.Fatalf("checks %+v", checks)
	}
}

// TestNetExtAuthzServiceDown: a service that cannot be reached closes the
// connection (failureMode deny, the default), with its own end in the
// record, or lets it through (failureMode allow).
func TestNetExtAuthzServiceDown(t *testing.T) {
	up, served := countingUpstream(t)
	for _, tc := range []struct {
		desc, mode string
		allowed    bool
	}{
		{"fail closed by default", "", false},
		{"deny with a status closes too", "failureMode: {denyWithStatus: 503}", false},
		{"fail open", "failureMode: allow", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGateway(t, netExtAuthzConfig+"    "+tc.mode+`
binds:
- port: 1
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"AUTHZ": closedAddr(t), "UP": up})
			c := dialTest(t, tg.addr(1))
			if tc.allowed {
				if status, body := requestOn(t, c, bufio.NewReader(c), "/"); status != 200 || body != "ok" {
					t.Fatalf("%d %q", status, body)
				}
				return
			}
			before := served.Load()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
			requireClosedUnanswered(t, c)
			requireFields(t, loggedConns(t, tg, 1)[0], map[string]any{"protocol": "http", "bind": "bind/1", "end": "ext_authz_failed"})
			if served.Load() != before {
				t.Error("the upstream got a request")
			}
		})
	}
}

// TestNetExtAuthzSlowService: a service that does not answer holds its
// connection for the check's timeout and no longer (then the connection
// is closed, failing closed), and holds no other connection meanwhile.
func TestNetExtAuthzSlowService(t *testing.T) {
	authz := &extauthztest.HTTP{Hold: make(chan struct{}), Held: func(r *http.Request) bool { return r.URL.Path == "/conn/1" }}
	t.Cleanup(func() { close(authz.Hold) })
	up, _ := countingUpstream(t)
	tg := startGateway(t, netExtAuthzConfig+`
binds:
- port: 1
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
- port: 2
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`, map[string]string{"AUTHZ": extauthztest.StartHTTP(t, authz), "UP": up})

	start := time.Now()
	slow := dialTest(t, tg.addr(1))
	io.WriteString(slow, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	authz.AwaitChecks(t, 1, 10*time.Second)

	// While the first connection's check is held, another is served.
	fast := dialTest(t, tg.addr(2))
	if status, body := requestOn(t, fast, bufio.NewReader(fast), "/"); status != 200 || body != "ok" {
		t.Fatalf("another connection: %d %q", status, body)
	}
	if n := tg.accessLogs().FilterMessage("connection").Len(); n != 0 {
		t.Fatal("the held connection was refused before the other was served: the other waited for it")
	}

	requireClosedUnanswered(t, slow)
	took := time.Since(start)
	if took < extauthz.DefaultTimeout-100*time.Millisecond || took > extauthz.DefaultTimeout+3*time.Second {
		t.Errorf("the held connection was closed after %v; the check's timeout is %v", took, extauthz.DefaultTimeout)
	}
	requireFields(t, loggedConns(t, tg, 1)[0], map[string]any{"protocol": "http", "bind": "bind/1", "src": slow.LocalAddr().String(), "end": "ext_authz_failed"})
}

// TestNetExtAuthzConnectTunnel: as in agentgateway, a CONNECT request is
// not checked (it is answered 200); its tunnel's stream is, once, where
// it arrives, with the CONNECT target's name as destination.hostname.
func TestNetExtAuthzConnectTunnel(t *testing.T) {
	authz := &extauthztest.HTTP{Decide: func(r *http.Request) int {
		if r.Header.Get("X-Destination") == "ok.test" {
			return 200
		}
		return 403
	}}
	echo, accepted := countingEcho(t)
	tg := startGateway(t, netExtAuthzConfig+`
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- port: 7001
  mode: internal
  listeners:
  - name: inner
    protocol: TCP
    tcpRoutes: [{backends: [{host: ${ECHO}}]}]
`, map[string]string{"AUTHZ": extauthztest.StartHTTP(t, authz), "ECHO": echo})

	c, br, status := connectRaw(t, tg.addr(1), "ok.test:7001")
	if status != 200 {
		t.Fatalf("CONNECT ok.test: %d", status)
	}
	io.WriteString(c, "through")
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(br); string(got) != "through" {
		t.Fatalf("echo %q, %v", got, err)
	}
	checks := authz.Checks()
	if len(checks) != 1 || checks[0].URI != "/conn/7001" || checks[0].Header.Get("X-Source") != c.LocalAddr().String() {
		t.Fatalf("checks %+v; want one, for the tunnel", checks)
	}

	d, dbr, status := connectRaw(t, tg.addr(1), "no.test:7001")
	if status != 200 {
		t.Fatalf("CONNECT no.test: %d; the CONNECT request itself is not checked", status)
	}
	if n, err := dbr.Read(make([]byte, 1)); n != 0 || err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("read %d bytes, %v; want the tunnel closed", n, err)
	}
	recs := loggedConns(t, tg, 2)
	rec := recs[0]
	if rec["end"] == "closed" {
		rec = recs[1]
	}
	requireFields(t, rec, map[string]any{"protocol": "tcp", "bind": "bind/7001", "destination": "no.test:7001", "src": d.LocalAddr().String(), "end": "denied"})
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the upstream accepted %d connections, want 1 (the allowed tunnel's)", n)
	}
}

// TestNetExtAuthzReload: the policy is compiled with each configuration,
// its connections to the service kept across a reload that keeps the
// service (the snapshot's lease); a reload that removes it stops the
// checks.
func TestNetExtAuthzReload(t *testing.T) {
	authz := &extauthztest.HTTP{}
	up, _ := countingUpstream(t)
	vars := map[string]string{"AUTHZ": extauthztest.StartHTTP(t, authz), "UP": up}
	const binds = `
binds:
- port: 1
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`
	tg := startGateway(t, netExtAuthzConfig+binds, vars)
	serve := func() {
		t.Helper()
		c := dialTest(t, tg.addr(1))
		if status, _ := requestOn(t, c, bufio.NewReader(c), "/"); status != 200 {
			t.Fatalf("%d", status)
		}
	}
	serve()
	tg.apply(netExtAuthzConfig+binds, vars)
	serve()
	checks := authz.Checks()
	if len(checks) != 2 || checks[0].RemoteAddr != checks[1].RemoteAddr {
		t.Fatalf("checks %+v; want two over the same connection to the service", checks)
	}
	tg.apply(binds, vars)
	serve()
	if n := len(authz.Checks()); n != 2 {
		t.Fatalf("%d checks after networkExtAuthz was removed, want still 2", n)
	}
}
