package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// retireVars are a test's PKIs and files for the HTTPS listeners of
// retireConfig: the server's certificate and a client's, from ca1; ca2 signs
// neither.
type retireVars struct {
	ca1, ca2    *testPKI
	srv, client issued
	up          string // an upstream answering X-Upstream: up
	slow        *blockingBackend
	cert, key   string
	ca1File     string
	ca2File     string
}

func newRetireVars(t *testing.T) *retireVars {
	v := &retireVars{ca1: newTestPKI(t, "ca1"), ca2: newTestPKI(t, "ca2")}
	v.srv = v.ca1.Server("server", "a.test", "b.test")
	v.client = v.ca1.Client("client")
	v.cert, v.key = v.srv.CertFile, v.srv.KeyFile
	v.ca1File, v.ca2File = v.ca1.CAFile, v.ca2.CAFile
	v.up = newProbe(t, "up").addr
	v.slow = newBlockingBackend(t)
	t.Cleanup(v.slow.unblock)
	return v
}

// retireConfig is port 3000 with HTTPS listeners for a.test and b.test,
// each with the extra tls fields given (", root: ..."); every response
// carries x-gen: gen, so that a client sees which config answered it.
func (v *retireVars) config(aTLS, bTLS string, gen int) string {
	listener := func(host, extra string) string {
		return fmt.Sprintf(`  - hostname: %s
    protocol: HTTPS
    tls: {cert: %s, key: %s%s}
    routes:
    - matches: [{path: {pathPrefix: /slow}}]
      policies: {responseHeaderModifier: {set: {x-gen: "%d"}}}
      backends: [{host: '%s'}]
    - policies: {responseHeaderModifier: {set: {x-gen: "%d"}}}
      backends: [{host: '%s'}]
`, host, v.cert, v.key, extra, gen, v.slow.addr, gen, v.up)
	}
	return "binds:\n- port: 3000\n  listeners:\n" + listener("a.test", aTLS) + listener("b.test", bTLS)
}

// clientTLS is a client's TLS configuration for a.test: ALPN proto, the
// client certificate when cert is set, TLS versions up to max (0: any).
func (v *retireVars) clientTLS(proto string, cert bool, max uint16) *tls.Config {
	cfg := &tls.Config{ServerName: "a.test", RootCAs: v.ca1.Pool, NextProtos: []string{proto}, MaxVersion: max}
	if cert {
		cfg.Certificates = []tls.Certificate{v.client.TLS}
	}
	return cfg
}

// h1Conn is an HTTP/1.1 client connection, kept alive.
type h1Conn struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func newH1Conn(t *testing.T, c net.Conn) *h1Conn {
	t.Cleanup(func() { c.Close() })
	return &h1Conn{t: t, c: c, br: bufio.NewReader(c)}
}

// send writes GET path for host a.test.
func (h *h1Conn) send(path string) {
	h.t.Helper()
	_ = h.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(h.c, "GET "+path+" HTTP/1.1\r\nHost: a.test\r\n\r\n"); err != nil {
		h.t.Fatalf("writing a request: %v", err)
	}
}

// read reads a response to a GET.
func (h *h1Conn) read() *http.Response {
	h.t.Helper()
	_ = h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(h.br, &http.Request{Method: http.MethodGet})
	if err != nil {
		h.t.Fatalf("reading a response: %v", err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp
}

// get sends GET path and returns its response, which must be a 200 that
// keeps the connection, from the config of generation gen.
func (h *h1Conn) get(path string, gen int) {
	h.t.Helper()
	h.send(path)
	resp := h.read()
	if resp.StatusCode != 200 || resp.Close || resp.Header.Get("X-Gen") != itoa(gen) {
		h.t.Fatalf("GET %s: %d, close %v, x-gen %q; want 200 from generation %d, kept", path, resp.StatusCode, resp.Close, resp.Header.Get("X-Gen"), gen)
	}
}

// closedByPeer waits, with a bound, for the gateway to close the
// connection.
func (h *h1Conn) closedByPeer() {
	h.t.Helper()
	_ = h.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := h.br.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		h.t.Fatalf("the gateway did not close the connection: read %d, %v", n, err)
	}
}

// h2Client is an HTTP/2 client connection.
type h2Client struct {
	t    *testing.T
	cc   *http.ClientConn
	base string // scheme and authority of its requests
}

// newH2Client starts HTTP/2 on c: a TLS connection to a.test (tls set), or
// a cleartext one, with prior knowledge.
func newH2Client(t *testing.T, c net.Conn, tls bool) *h2Client {
	t.Helper()
	var p http.Protocols
	tr := &http.Transport{Protocols: &p}
	given := func(context.Context, string, string) (net.Conn, error) { return c, nil }
	scheme := "https"
	if tls {
		p.SetHTTP2(true)
		tr.DialTLSContext = given
	} else {
		p.SetUnencryptedHTTP2(true)
		tr.DialContext = given
		scheme = "http"
	}
	cc, err := tr.NewClientConn(context.Background(), scheme, "a.test:1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &h2Client{t: t, cc: cc, base: scheme + "://a.test"}
}

// get sends GET path on a new stream and returns its response.
func (h *h2Client) get(path string) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodGet, h.base+path, nil)
	resp, err := h.cc.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, nil
}

// getOK sends GET path, which must get 200 from the config of generation
// gen.
func (h *h2Client) getOK(path string, gen int) {
	h.t.Helper()
	resp, err := h.get(path)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Gen") != itoa(gen) {
		h.t.Fatalf("h2 GET %s: %v %v; want 200 from generation %d", path, resp, err, gen)
	}
}

// goingAway waits, with a bound, for the server's GOAWAY: the connection
// takes no new request.
func (h *h2Client) goingAway() {
	h.t.Helper()
	eventually(h.t, 5*time.Second, "GOAWAY", func() bool { return h.cc.Available() == 0 })
}

// open reports whether the connection takes new requests.
func (h *h2Client) open() bool { return h.cc.Err() == nil && h.cc.Available() > 0 }

// dialTLSConn opens a TLS connection to addr.
func dialTLSConn(t *testing.T, addr string, cfg *tls.Config) *tls.Conn {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	if got := c.ConnectionState().NegotiatedProtocol; got != cfg.NextProtos[0] {
		t.Fatalf("ALPN %q, want %q", got, cfg.NextProtos[0])
	}
	return c
}

// noneRetiring waits, with a bound, until no connection of the bind on
// port is marked retiring, which sends each request's end by the slower
// path (bind.closing).
func (tg *testGateway) noneRetiring(port int) {
	tg.t.Helper()
	tg.gw.mu.Lock()
	b := tg.gw.binds[port]
	tg.gw.mu.Unlock()
	eventually(tg.t, 5*time.Second, "no connection retiring", func() bool { return b.closing.Load() == 0 })
}

// TestReloadRetiresConnectionsOfChangedTLS: a reload that changes the TLS
// settings of the listener an HTTPS connection was handshaken for (its
// client CA rotated, mTLS turned on, its minimum version raised, its suites
// narrowed) closes the
// connection gracefully: an idle HTTP/1.1 one closes, an HTTP/2 one gets
// GOAWAY; one whose listener kept its settings stays open, and the reload's
// routes answer on it. (Kept connections went on being served under the
// handshake the new settings refuse: a rotated or revoked client CA never
// reached a client that kept its connection.)
func TestReloadRetiresConnectionsOfChangedTLS(t *testing.T) {
	v := newRetireVars(t)
	root := func(file string) string { return ", root: " + file }
	cases := []struct {
		desc           string
		before, after  [2]string // listeners a's and b's extra tls fields
		cert           bool      // the client presents its certificate
		maxVersion     uint16    // the client's maximum TLS version
		retired        bool
		newConnRefused bool
	}{
		{desc: "client CA rotated", before: [2]string{root(v.ca1File)}, after: [2]string{root(v.ca2File)}, cert: true, retired: true, newConnRefused: true},
		{desc: "mTLS turned on", after: [2]string{root(v.ca1File)}, retired: true, newConnRefused: true},
		{desc: "minimum version raised", after: [2]string{", minTLSVersion: TLS_V1_3"}, maxVersion: tls.VersionTLS12, retired: true, newConnRefused: true},
		{desc: "cipher suites narrowed", after: [2]string{", cipherSuites: [TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]"}, retired: true},
		{desc: "settings unchanged", before: [2]string{root(v.ca1File)}, after: [2]string{root(v.ca1File)}, cert: true},
		{desc: "another listener's settings changed", after: [2]string{"", root(v.ca1File)}},
	}
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		for _, tc := range cases {
			t.Run(string(tr)+"/"+tc.desc, func(t *testing.T) {
				tg := startGatewayWith(t, v.config(tc.before[0], tc.before[1], 1), nil, tr)
				addr := tg.addr(3000)
				h1 := newH1Conn(t, dialTLSConn(t, addr, v.clientTLS("http/1.1", tc.cert, tc.maxVersion)))
				h1.get("/", 1)
				h2 := newH2Client(t, dialTLSConn(t, addr, v.clientTLS("h2", tc.cert, tc.maxVersion)), true)
				h2.getOK("/", 1)

				tg.apply(v.config(tc.after[0], tc.after[1], 2), nil)
				if tc.retired {
					h1.closedByPeer()
					h2.goingAway()
				} else {
					h1.get("/", 2)
					h2.getOK("/", 2)
					if !h2.open() {
						t.Fatal("GOAWAY on a connection whose listener kept its TLS settings")
					}
				}
				c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, v.clientTLS("http/1.1", tc.cert, tc.maxVersion))
				if err == nil {
					// TLS 1.3: a refused client certificate is told after
					// the client's side of the handshake.
					h := newH1Conn(t, c)
					h.send("/")
					_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
					_, err = http.ReadResponse(h.br, nil)
				}
				if refused := err != nil; refused != tc.newConnRefused {
					t.Fatalf("a new connection after the reload: %v, want refused %v", err, tc.newConnRefused)
				}
			})
		}
	}
}

// TestReloadRetiresInFlight: a connection a reload retires while a request
// is in flight on it gets that request's answer first: over HTTP/1.1 with
// Connection: close (and then the connection closes), over HTTP/2 after a
// GOAWAY that leaves the stream to finish; parked HTTP/1.1 connections
// close at the reload as idle ones do.
func TestReloadRetiresInFlight(t *testing.T) {
	v := newRetireVars(t)
	before := func() string { return v.config(", root: "+v.ca1File, "", 1) }
	after := func() string { return v.config(", root: "+v.ca2File, "", 2) }
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		t.Run(string(tr), func(t *testing.T) {
			slow := newBlockingBackend(t)
			t.Cleanup(slow.unblock)
			v.slow = slow
			tg := startGatewayWith(t, before(), nil, tr)
			addr := tg.addr(3000)
			h1 := newH1Conn(t, dialTLSConn(t, addr, v.clientTLS("http/1.1", true, 0)))
			h1.send("/slow")
			slow.waitEntered(t)
			h2 := newH2Client(t, dialTLSConn(t, addr, v.clientTLS("h2", true, 0)), true)
			answer := make(chan *http.Response, 1)
			go func() {
				resp, err := h2.get("/slow")
				if err != nil {
					t.Error(err)
				}
				answer <- resp
			}()
			slow.waitEntered(t)
			tg.apply(after(), nil)
			h2.goingAway()
			slow.unblock()
			if resp := h1.read(); resp.StatusCode != 200 || !resp.Close {
				t.Fatalf("HTTP/1.1 request in flight: %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
			}
			h1.closedByPeer()
			select {
			case resp := <-answer:
				if resp == nil || resp.StatusCode != 200 {
					t.Fatalf("HTTP/2 stream in flight: %v", resp)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the HTTP/2 stream in flight got no answer")
			}
			tg.noneRetiring(3000)
		})
	}
	t.Run("parked", func(t *testing.T) {
		shortParking(t)
		tg := startGateway(t, before(), nil)
		m := tg.bindMetrics(3000)
		h1 := newH1Conn(t, dialTLSConn(t, tg.addr(3000), v.clientTLS("http/1.1", true, 0)))
		h1.get("/", 1)
		eventually(t, 5*time.Second, "the connection parked", func() bool { return m.Parked() == 1 })
		tg.apply(after(), nil)
		h1.closedByPeer()
		eventually(t, 5*time.Second, "no connection parked", func() bool { return m.Parked() == 0 })
	})
}

// heldFlight is a client's connection that holds its writes, from the
// first after the server's first bytes arrived, until released: a TLS
// handshake the server began stays unfinished meanwhile.
type heldFlight struct {
	net.Conn
	mu      sync.Mutex
	read    bool
	release chan struct{}
}

func (c *heldFlight) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.read = true
		c.mu.Unlock()
	}
	return n, err
}

func (c *heldFlight) Write(p []byte) (int, error) {
	c.mu.Lock()
	held := c.read
	c.mu.Unlock()
	if held {
		<-c.release
	}
	return c.Conn.Write(p)
}

// TestReloadRetiresHandshakeAcrossIt: a connection whose handshake began
// under the old settings and ended after a reload changed them (so that
// the reload's walk did not find it) is retired by its first request: its
// answer says Connection: close, and HTTP/2's first stream brings GOAWAY.
func TestReloadRetiresHandshakeAcrossIt(t *testing.T) {
	v := newRetireVars(t)
	for _, proto := range []string{"http/1.1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			tg := startGateway(t, v.config(", root: "+v.ca1File, "", 1), nil)
			raw, err := net.DialTimeout("tcp", tg.addr(3000), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			held := &heldFlight{Conn: raw, release: make(chan struct{})}
			c := tls.Client(held, v.clientTLS(proto, true, 0))
			handshake := make(chan error, 1)
			go func() { handshake <- c.Handshake() }()
			eventually(t, 5*time.Second, "the server's handshake flight", func() bool {
				held.mu.Lock()
				defer held.mu.Unlock()
				return held.read
			})
			tg.apply(v.config(", root: "+v.ca2File, "", 2), nil)
			close(held.release)
			if err := <-handshake; err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if proto == "h2" {
				h2 := newH2Client(t, c, true)
				h2.getOK("/", 2)
				h2.goingAway()
				return
			}
			h1 := newH1Conn(t, c)
			h1.send("/")
			if resp := h1.read(); resp.StatusCode != 200 || !resp.Close {
				t.Fatalf("first request: %d, close %v; want Connection: close", resp.StatusCode, resp.Close)
			}
			h1.closedByPeer()
			tg.noneRetiring(3000)
		})
	}
}

// TestReloadRetiresConnectionsOfChangedProtocol: a reload after which a
// port serves no cleartext HTTP (a TCP listener, HTTPS alone) closes its
// cleartext HTTP connections gracefully: an idle HTTP/1.1 one closes, an
// HTTP/2 one gets GOAWAY, and one served as HTTP before the reload whose
// first request comes after it is answered (404: no listener serves it)
// with Connection: close. A reload that keeps cleartext HTTP on the port
// keeps them. (They got 404 route not found forever, so pooled clients
// never reconnected.)
func TestReloadRetiresConnectionsOfChangedProtocol(t *testing.T) {
	v := newRetireVars(t)
	tcp := rawUpstream(t, func(c net.Conn) { defer c.Close(); io.WriteString(c, "tcp hello\n") })
	plain := func(gen int) string {
		return fmt.Sprintf(`binds:
- port: 3000
  listeners:
  - routes:
    - policies: {responseHeaderModifier: {set: {x-gen: "%d"}}}
      backends: [{host: '%s', policies: {http: {version: HTTP1}}}]
`, gen, v.up)
	}
	https := strings.Replace(v.config("", "", 2), "binds:\n- port: 3000\n  listeners:\n", "", 1)
	toTCP := "binds:\n- port: 3000\n  listeners:\n  - protocol: TCP\n    tcpRoutes: [{backends: [{host: '" + tcp + "'}]}]\n"
	cases := []struct {
		desc, after string
		retired     bool
	}{
		{"HTTP to TCP", toTCP, true},
		{"HTTP to HTTPS", "binds:\n- port: 3000\n  listeners:\n" + https, true},
		{"HTTP to HTTP and HTTPS", plain(2) + https, false},
		{"HTTP routes changed", plain(2), false},
	}
	for _, tr := range []Transport{TransportStd, TransportNetpoll} {
		for _, tc := range cases {
			t.Run(string(tr)+"/"+tc.desc, func(t *testing.T) {
				tg := startGatewayWith(t, plain(1), nil, tr)
				addr := tg.addr(3000)
				h1 := newH1Conn(t, dialTest(t, addr))
				h1.get("/", 1)
				h2 := newH2Client(t, dialTest(t, addr), false)
				h2.getOK("/", 1)

				tg.apply(tc.after, nil)
				if tc.retired {
					h1.closedByPeer()
					h2.goingAway()
					return
				}
				h1.get("/", 2)
				h2.getOK("/", 2)
				if !h2.open() {
					t.Fatal("GOAWAY on a port that still serves cleartext HTTP")
				}
			})
		}
	}
	t.Run("first request after the reload", func(t *testing.T) {
		// A connection the reload's walk cannot judge: served as HTTP
		// before it (here, handed to the bind's HTTP server directly), its
		// first request after it.
		tg := startGateway(t, plain(1), nil)
		tg.gw.mu.Lock()
		b := tg.gw.binds[3000]
		tg.gw.mu.Unlock()
		client, server := net.Pipe()
		served := make(chan struct{})
		b.metrics.ConnOpened()
		go func() { defer close(served); b.serve(server) }()
		tg.apply(toTCP, nil)
		h := newH1Conn(t, client)
		h.send("/")
		if resp := h.read(); resp.StatusCode != 404 || !resp.Close {
			t.Fatalf("first request after the reload: %d, close %v; want 404 with Connection: close", resp.StatusCode, resp.Close)
		}
		h.closedByPeer()
		select {
		case <-served:
		case <-time.After(5 * time.Second):
			t.Fatal("the connection is still served")
		}
		tg.noneRetiring(3000)
	})
}

// noParking keeps connections from parking for the test: a connection
// silent after its handshake stays with its goroutine.
func noParking(t *testing.T) {
	old := parkIdleAfter.Swap(int64(time.Hour))
	t.Cleanup(func() { parkIdleAfter.Store(old) })
}

// tlsConnTracked waits, with a bound, until the bind on port tracks a
// terminated connection (its handshake done on the server's side too) in
// state st.
func (tg *testGateway) tlsConnTracked(port int, st connState) {
	tg.t.Helper()
	tg.gw.mu.Lock()
	b := tg.gw.binds[port]
	tg.gw.mu.Unlock()
	eventually(tg.t, 5*time.Second, "a terminated connection in its state", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		for c, mapped := range b.conns {
			if _, ok := c.(*tlsConn); ok && stateOf(c, mapped) == st {
				return true
			}
		}
		return false
	})
}

// TestReloadKeepsConnectionsBeforeTheirFirstRequest: a certificate rotated
// between a new HTTPS connection's handshake and its first request (which
// may already be on its way) does not lose that request: the connection
// is not closed by the reload, its first request is answered under the new
// configuration with Connection: close, and the connection then closes.
// Parked after its handshake or not, on either transport. (The reload's
// walk counted such a connection idle and closed it: the client, which
// does not retry a request on a fresh connection, got an empty reply, and
// the access log had nothing.)
func TestReloadKeepsConnectionsBeforeTheirFirstRequest(t *testing.T) {
	v := newRetireVars(t)
	rotated := v.ca1.Server("server", "a.test", "b.test")
	before := func() string { v.cert, v.key = v.srv.CertFile, v.srv.KeyFile; return v.config("", "", 1) }
	after := func() string { v.cert, v.key = rotated.CertFile, rotated.KeyFile; return v.config("", "", 2) }
	cases := []struct {
		desc   string
		tr     Transport
		parked bool
	}{
		{"std", TransportStd, false},
		{"std/parked", TransportStd, true},
		{"netpoll", TransportNetpoll, false},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.parked {
				shortParking(t)
			} else {
				noParking(t)
			}
			tg := startGatewayWith(t, before(), nil, tc.tr)
			h1 := newH1Conn(t, dialTLSConn(t, tg.addr(3000), v.clientTLS("http/1.1", false, 0)))
			if tc.parked {
				m := tg.bindMetrics(3000)
				eventually(t, 5*time.Second, "the connection parked", func() bool { return m.Parked() == 1 })
			} else {
				tg.tlsConnTracked(3000, connNew)
			}
			tg.apply(after(), nil)
			h1.send("/")
			if resp := h1.read(); resp.StatusCode != 200 || !resp.Close || resp.Header.Get("X-Gen") != "2" {
				t.Fatalf("first request after the rotation: %d, close %v, x-gen %q; want 200 from generation 2 with Connection: close", resp.StatusCode, resp.Close, resp.Header.Get("X-Gen"))
			}
			h1.closedByPeer()
			tg.noneRetiring(3000)
		})
	}
}

// TestReloadKeepsConnectionsBeforeTheirFirstByte: a cleartext connection
// parked before its first byte, on a port a reload turns from HTTP to TCP,
// is not closed by the reload: its first bytes, which may be on their way,
// are served as the port serves them now (forwarded).
func TestReloadKeepsConnectionsBeforeTheirFirstByte(t *testing.T) {
	shortParking(t)
	up := rawUpstream(t, func(c net.Conn) { defer c.Close(); io.WriteString(c, "tcp hello\n") })
	tg := startGateway(t, "binds:\n- port: 3000\n  listeners:\n  - routes: [{backends: [{host: '"+up+"'}]}]\n", nil)
	m := tg.bindMetrics(3000)
	c := dialTest(t, tg.addr(3000))
	eventually(t, 5*time.Second, "the connection parked", func() bool { return m.Parked() == 1 })
	tg.apply("binds:\n- port: 3000\n  listeners:\n  - protocol: TCP\n    tcpRoutes: [{backends: [{host: '"+up+"'}]}]\n", nil)
	if _, err := io.WriteString(c, "hello\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); line != "tcp hello\n" {
		t.Fatalf("first bytes after the reload: %q, %v; want them forwarded", line, err)
	}
}
