package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// connectRaw sends a CONNECT for target on a new connection to addr and
// returns the connection and the status of the answer.
func connectRaw(t *testing.T, addr, target string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	return c, br, resp.StatusCode
}

// TestConnectEgressBySNI: agentgateway's egress shape. A CONNECT bind hands
// each tunnel to the internal bind of its port, which reads the SNI and
// passes allowed names through to the name itself (dynamic); the client is
// Go's own HTTP client configured with the gateway as its proxy.
func TestConnectEgressBySNI(t *testing.T) {
	pki := newTestPKI(t, "egress")
	up := tlsUpstream(t, pki.Server("localhost", "localhost").TLS, "through the tunnel")
	_, upPort, _ := net.SplitHostPort(up)
	tg := startGateway(t, `
frontendPolicies:
  networkAuthorization:
    rules:
    - deny: 'destination.hostname == "blocked.test"'
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- port: ${PORT}
  mode: internal
  listeners:
  - protocol: TLS
    tcpRoutes:
    - hostnames: [localhost]
      backends: [{dynamic: {}}]
`, map[string]string{"PORT": upPort})
	proxy, _ := url.Parse(tg.url(1))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(proxy),
		TLSClientConfig: &tls.Config{RootCAs: pki.Pool},
	}}
	resp, err := client.Get("https://localhost:" + upPort + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer client.CloseIdleConnections()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "through the tunnel" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// The upstream's own certificate reached the client (nothing was
	// terminated): the client verified it against the test CA.
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].Subject.CommonName != "localhost" {
		t.Fatalf("certificate %+v", resp.TLS)
	}

	t.Run("a denied destination never gets a tunnel", func(t *testing.T) {
		if _, _, status := connectRaw(t, tg.addr(1), "blocked.test:"+upPort); status != 403 {
			t.Fatalf("status %d; want 403", status)
		}
	})
	t.Run("an SNI no route names is closed", func(t *testing.T) {
		c, br, status := connectRaw(t, tg.addr(1), "localhost:"+upPort)
		if status != 200 {
			t.Fatalf("status %d", status)
		}
		tc := tls.Client(&bufferedConn{c, br}, &tls.Config{ServerName: "evil.test", InsecureSkipVerify: true})
		if err := tc.Handshake(); err == nil {
			t.Fatal("handshake through an unlisted name succeeded")
		}
	})
	t.Run("no bind for the port", func(t *testing.T) {
		if _, _, status := connectRaw(t, tg.addr(1), "localhost:9"); status != 404 {
			t.Fatalf("status %d; want 404", status)
		}
	})
	t.Run("only CONNECT", func(t *testing.T) {
		resp, _ := get(t, tg.url(1)+"/")
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "CONNECT" {
			t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
	t.Run("malformed targets", func(t *testing.T) {
		for _, target := range []string{"localhost", "localhost:", "localhost:0", "localhost:65536", "user@localhost:443", "localhost:443/path", "[::1:443", "::1:443", "*.test:443", "bad host:443"} {
			c, err := net.Dial("tcp", tg.addr(1))
			if err != nil {
				t.Fatal(err)
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			c.Close()
			if err != nil || resp.StatusCode != 400 {
				status := 0
				if resp != nil {
					status = resp.StatusCode
				}
				t.Errorf("CONNECT %q: %d, %v; want 400", target, status, err)
			}
		}
	})
}

// bufferedConn reads what a bufio.Reader holds before its connection.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestConnectIntoHTTPWildcardBind: the internal bind without a port takes
// tunnels to any port; its HTTP listener routes the tunnelled requests.
func TestConnectIntoHTTPWildcardBind(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "plain "+r.Host)
	}))
	tg := startGateway(t, `
frontendPolicies:
  networkAuthorization:
    rules:
    - 'destination.address == "127.0.0.1"'
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- mode: internal
  listeners:
  - routes:
    - policies: {responseHeaderModifier: {set: {x-via: internal}}}
      backends: [{dynamic: {}}]
`, nil)
	// Go's client sends plain http:// requests to a proxy without CONNECT:
	// dial the tunnel by hand, then speak HTTP inside it.
	c, br, status := connectRaw(t, tg.addr(1), up)
	if status != 200 {
		t.Fatalf("CONNECT %s: %d", up, status)
	}
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: "+up+"\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "plain "+up || resp.Header.Get("x-via") != "internal" {
		t.Fatalf("%d %q %q", resp.StatusCode, body, resp.Header.Get("x-via"))
	}
	// A hostname is not 127.0.0.1: refused before any connection.
	_, port, _ := net.SplitHostPort(up)
	if _, _, status := connectRaw(t, tg.addr(1), "localhost:"+port); status != 403 {
		t.Fatalf("CONNECT by name: %d; want 403", status)
	}
	// Inside an allowed tunnel, a request naming another destination (a
	// host the rules refuse, another port) goes nowhere: 421, and the
	// tunnel's destination alone is ever dialled. It used to reach what
	// the request's Host named.
	secret := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "SECRET")
	}))
	_, secretPort, _ := net.SplitHostPort(secret)
	for _, host := range []string{"localhost:" + secretPort, "localhost:" + port, "127.0.0.1:" + secretPort} {
		c, br, status := connectRaw(t, tg.addr(1), up)
		if status != 200 {
			t.Fatalf("CONNECT %s: %d", up, status)
		}
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		switch {
		case strings.Contains(string(body), "SECRET"):
			t.Errorf("Host %s through a tunnel to %s reached the other server", host, up)
		case host == "127.0.0.1:"+secretPort && (resp.StatusCode != 200 || string(body) != "plain "+host):
			// The tunnel's host, another port: the tunnel's port is used.
			t.Errorf("Host %s through a tunnel to %s: %d %q; want the tunnel's destination", host, up, resp.StatusCode, body)
		case host != "127.0.0.1:"+secretPort && resp.StatusCode != http.StatusMisdirectedRequest:
			t.Errorf("Host %s through a tunnel to %s: %d %q; want 421", host, up, resp.StatusCode, body)
		}
	}
}

// TestConnectEgressTerminatedWithDynamicCA: agentgateway's dynamic-TLS
// egress example. A tunnel to an internal HTTPS bind is terminated with a
// certificate made for the name asked for, HTTP policies apply to what is
// inside, and the request goes on over TLS to that name.
func TestConnectEgressTerminatedWithDynamicCA(t *testing.T) {
	egressCA := newTestPKI(t, "egress-ca")
	upstreamCA := newTestPKI(t, "upstream-ca")
	seen := make(chan string, 1)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{upstreamCA.Server("localhost", "localhost").TLS}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("x-req-message")
		io.WriteString(w, "origin")
	})}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { srv.Close() })
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	tg := startGateway(t, `
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- port: ${PORT}
  mode: internal
  listeners:
  - protocol: HTTPS
    tls: {mode: dynamicCa, cert: ${CA}, key: ${CAKEY}}
    routes:
    - backends:
      - dynamic: {}
        policies:
          backendTLS: {root: ${UPCA}}
      policies:
        transformations:
          request:
            set: {x-req-message: "'hello from the gateway'"}
          response:
            set: {x-resp-message: "'and back'"}
`, map[string]string{"PORT": port, "CA": egressCA.CAFile, "CAKEY": egressCA.KeyFile(), "UPCA": upstreamCA.CAFile})
	proxy, _ := url.Parse(tg.url(1))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(proxy),
		TLSClientConfig: &tls.Config{RootCAs: egressCA.Pool}, // the client trusts the egress CA only
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://localhost:" + port + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "origin" || resp.Header.Get("x-resp-message") != "and back" {
		t.Fatalf("%d %q %q", resp.StatusCode, body, resp.Header.Get("x-resp-message"))
	}
	if got := <-seen; got != "hello from the gateway" {
		t.Fatalf("the origin saw x-req-message %q", got)
	}
	if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != "egress-ca" {
		t.Fatalf("the client saw a certificate from %q; want the egress CA's", issuer)
	}
}

// TestConnectTunnelPassesTheUpstreamsEnd: a TCP route reached through a
// CONNECT tunnel passes the upstream's half-close on to the client, which
// reads the end of the stream; before, the tunnel's stream could not
// half-close and the client waited for an end that never came.
func TestConnectTunnelPassesTheUpstreamsEnd(t *testing.T) {
	up := rawUpstream(t, func(c net.Conn) {
		_, _ = io.WriteString(c, "hello, then the end")
		_ = c.(*net.TCPConn).CloseWrite()
		_, _ = io.Copy(io.Discard, c) // until the client's end
		c.Close()
	})
	tg := startGateway(t, connectToTCPRoute, map[string]string{"UP": up})
	c, br, status := connectRaw(t, tg.addr(1), up)
	if status != 200 {
		t.Fatalf("CONNECT: %d", status)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(br)
	if err != nil || string(b) != "hello, then the end" {
		t.Fatalf("read %q, %v; want the upstream's bytes, then the end of the stream", b, err)
	}
}

// connectToTCPRoute is a CONNECT bind in front of an internal bind whose
// TCP route forwards every tunnel to ${UP}.
const connectToTCPRoute = `
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- mode: internal
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{host: '${UP}'}]
`

// TestConnectOnARouteListenerIsRefused: tunnels are a CONNECT bind's; a
// listener of routes answers CONNECT 501 in either form, and nothing goes
// upstream. The origin form ("CONNECT /x") used to be forwarded as a
// request, and the upstream's answer came back chunked.
func TestConnectOnARouteListenerIsRefused(t *testing.T) {
	hits := make(chan string, 4)
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits <- r.Method }))
	tg := startGateway(t, oneRoute(up), nil)
	for _, target := range []string{"/x", "example.com:443"} {
		c, err := net.Dial("tcp", tg.addr(3000))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
		status, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.Contains(status, " 501 ") {
			t.Errorf("CONNECT %s: %q %v, want 501", target, status, err)
		}
	}
	select {
	case m := <-hits:
		t.Errorf("the upstream got a %s", m)
	default:
	}
}

// TestConnectWithContentIsRefused: a CONNECT request has no content (RFC
// 9110 9.3.6); one declaring some, by Content-Length or chunked, is
// refused 400 rather than have part of what follows taken as its body
// (swallowed, or its chunk framing tunnelled).
func TestConnectWithContentIsRefused(t *testing.T) {
	up := tcpEchoUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- mode: internal
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{host: `+up+`}]
`, nil)
	for _, framing := range []string{"Content-Length: 5\r\n", "Transfer-Encoding: chunked\r\n"} {
		c, err := net.Dial("tcp", tg.addr(1))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		body := "hello"
		if strings.HasPrefix(framing, "Transfer") {
			body = "5\r\nhello\r\n0\r\n\r\n"
		}
		io.WriteString(c, "CONNECT "+up+" HTTP/1.1\r\nHost: "+up+"\r\n"+framing+"\r\n"+body)
		status, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.Contains(status, " 400 ") {
			t.Errorf("%q: %q %v, want 400", framing, status, err)
		}
	}
}

// TestConnectRefusedLogsItsTarget: a refused CONNECT request's access line
// shows its target as the request line had it (the authority form, or
// what else was sent), whatever refused it: the CONNECT bind's checks
// (networkAuthorization, no bind for the port, a malformed target) or a
// listener of routes, which serves no CONNECT.
func TestConnectRefusedLogsItsTarget(t *testing.T) {
	up := tcpEchoUpstream(t)
	tg := startGateway(t, `
frontendPolicies:
  networkAuthorization:
    rules:
    - deny: 'destination.hostname == "blocked.test"'
`+connectBinds, map[string]string{"UP": up})
	tests := []struct {
		desc   string
		port   int
		target string
		status int
	}{
		{"denied by networkAuthorization", 1, "blocked.test:443", 403},
		{"no bind for the port", 1, "localhost:9", 404},
		{"a malformed target", 1, "localhost:0", 400},
		// A tunnel into the CONNECT port itself would take CONNECT again
		// inside it, nesting tunnels without end on one connection.
		{"the CONNECT port itself", 1, "ok.test:1", 508},
		{"a listener of routes", 3000, "example.com:443", 501},
		{"a listener of routes, origin form", 3000, "/x", 501},
	}
	for i, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := net.Dial("tcp", tg.addr(tc.port))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "CONNECT "+tc.target+" HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("CONNECT %s: %v %v; want %d", tc.target, resp, err, tc.status)
			}
			line := lastAccessLine(t, tg.accessLogs(), i+1)
			requireFields(t, line, map[string]any{"method": "CONNECT", "path": tc.target, "status": int64(tc.status)})
		})
	}
}

// TestConnectOverH2IsRefusedAndLogged: a CONNECT on an HTTP/2 stream is
// refused 501 (no tunnel is carried on a stream), on a listener of routes
// and on a CONNECT bind alike, and leaves its access line as any request
// does, with its target.
func TestConnectOverH2IsRefusedAndLogged(t *testing.T) {
	up := tcpEchoUpstream(t)
	tg := startGateway(t, connectBinds, map[string]string{"UP": up})
	for i, port := range []int{3000, 1} {
		t.Run(strconv.Itoa(port), func(t *testing.T) {
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			cc, err := (&http.Transport{Protocols: &p}).NewClientConn(context.Background(), "http", tg.addr(port))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: "localhost:443"}, Host: "localhost:443", Header: http.Header{}}
			resp, err := cc.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 501 || resp.ProtoMajor != 2 {
				t.Fatalf("%s %d, want HTTP/2 501", resp.Proto, resp.StatusCode)
			}
			eventually(t, 5*time.Second, "the access line", func() bool { return tg.accessLogs().FilterMessage("request").Len() > i })
			line := lastAccessLine(t, tg.accessLogs(), i+1)
			requireFields(t, line, map[string]any{"method": "CONNECT", "path": "localhost:443", "status": int64(501)})
		})
	}
}

// connectBinds are a CONNECT bind (port 1) whose tunnels reach an internal
// TCP bind (443) to ${UP}, and a listener of routes (3000) to ${UP}.
const connectBinds = `binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- port: 443
  mode: internal
  listeners:
  - protocol: TCP
    tcpRoutes:
    - backends: [{host: '${UP}'}]
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`

// TestConnectAddressRulesSeeCanonicalAddresses: a rule about 127.0.0.0/8
// refuses a target that names a loopback address in another form (an
// IPv4-mapped IPv6 address), and an unspecified address, which a dial
// takes for the local host, is no target at all.
func TestConnectAddressRulesSeeCanonicalAddresses(t *testing.T) {
	up := tcpEchoUpstream(t)
	tg := startGateway(t, `
frontendPolicies:
  networkAuthorization:
    rules:
    - 'true'
    - deny: 'has(destination.address) && destination.address.startsWith("127.")'
`+connectBinds, map[string]string{"UP": up})
	tests := []struct {
		target string
		status int
	}{
		{"127.0.0.1:443", 403},
		{"[::ffff:127.0.0.1]:443", 403},
		{"[::ffff:7f00:2]:443", 403},
		{"0.0.0.0:443", 400},
		{"[::]:443", 400},
		{"127.1:443", 400},
		{"ok.test:443", 200},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			_, _, status := connectRaw(t, tg.addr(1), tc.target)
			if status != tc.status {
				t.Fatalf("CONNECT %s: %d; want %d", tc.target, status, tc.status)
			}
		})
	}
}

func TestDestinationIsCanonical(t *testing.T) {
	for host, want := range map[string]string{"::ffff:127.0.0.1": "127.0.0.1", "127.0.0.1": "127.0.0.1", "::1": "::1"} {
		if got := destination(host, 443)["address"]; got != want {
			t.Errorf("%s: address %v; want %s", host, got, want)
		}
	}
}

// TestConnectAuthorizationComesFirst: networkAuthorization decides before
// the target port is looked up, so a client the rules refuse learns
// nothing of which ports are served (404) or are the proxy's own (508):
// it gets 403 whatever the port. An allowed target still gets 404 for a
// port no bind serves.
func TestConnectAuthorizationComesFirst(t *testing.T) {
	up := tcpEchoUpstream(t)
	tg := startGateway(t, `
frontendPolicies:
  networkAuthorization:
    rules:
    - 'destination.port == 443 || destination.port == 9 || destination.hostname == "self.test"'
`+connectBinds, map[string]string{"UP": up})
	tests := []struct {
		desc   string
		target string
		status int
	}{
		{"refused, on a port no bind serves", "localhost:10", 403},
		{"refused, on the CONNECT port itself", "localhost:1", 403},
		{"allowed, on a port no bind serves", "localhost:9", 404},
		{"allowed, on the CONNECT port itself", "self.test:1", 508},
		{"allowed, on a served port", "localhost:443", 200},
		{"malformed, whatever the rules", "localhost:0", 400},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if _, _, status := connectRaw(t, tg.addr(1), tc.target); status != tc.status {
				t.Fatalf("CONNECT %s: %d; want %d", tc.target, status, tc.status)
			}
		})
	}
}
