package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Parking under TLS: an HTTPS keep-alive connection idle between requests
// parks like a plain one (its socket, with the tls.Conn above it kept as
// it was) and is served again, on the same TLS session, when its next
// request arrives (sock.Layer).

// httpsGateway starts a gateway whose bind on port 3000 has one HTTPS
// listener routing to up (with extra frontend settings before the binds),
// and returns it with the client TLS configuration that trusts it. Port
// 3001 serves plain HTTP to the same upstream, for control connections
// (controlParks).
func httpsGateway(t *testing.T, tr Transport, frontend, up string) (*testGateway, *tls.Config) {
	t.Helper()
	tg, cfg, _, _ := httpsGatewayConfig(t, tr, frontend, up)
	return tg, cfg
}

// httpsGatewayConfig is httpsGateway, returning also the configuration it
// applied and its variables, for a reload.
func httpsGatewayConfig(t *testing.T, tr Transport, frontend, up string) (*testGateway, *tls.Config, string, map[string]string) {
	t.Helper()
	pki := newTestPKI(t, "tlspark")
	srv := pki.Server("a.test", "a.test", "127.0.0.1")
	yaml := frontend + `
binds:
- port: 3000
  listeners:
  - name: a
    protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - backends: [{host: ${UP}}]
- port: 3001
  listeners:
  - routes:
    - backends: [{host: ${UP}}]
`
	vars := map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile}
	tg := startGatewayWith(t, yaml, vars, tr)
	return tg, &tls.Config{ServerName: "a.test", RootCAs: pki.Pool, NextProtos: []string{"http/1.1"}}, yaml, vars
}

// controlParks makes a plain connection to port 3001 park three times,
// after a request each time, checking after each that no connection of
// port 3000 is parked. A connection of port 3000 that went quiet before
// the first request has been so for at least three check periods at the
// end, and would have parked had it been allowed to.
func (tg *testGateway) controlParks() {
	t := tg.t
	t.Helper()
	m, ctl := tg.bindMetrics(3000), tg.bindMetrics(3001)
	c, br := dialRaw(t, tg.addr(3001))
	for i := range 3 {
		if r := roundTripRaw(t, c, br, "GET", "GET /c HTTP/1.1\r\nHost: a\r\n\r\n"); r.status() != 200 {
			t.Fatalf("control request: %q", r.line)
		}
		eventually(t, 5*time.Second, "the control connection parked", func() bool { return ctl.Parked() == 1 })
		if n := m.Parked(); n != 0 {
			t.Fatalf("round %d: %d connections of port 3000 parked; want none", i, n)
		}
	}
}

// tlsClient is a client's TLS connection to the gateway, counting its
// handshakes.
type tlsClient struct {
	*tls.Conn
	br         *bufio.Reader
	handshakes *atomic.Int32
}

// dialTLS opens a TLS connection to addr with cfg (cloned), bounded by a
// deadline, over under when it is given (a wrapper of the socket).
func dialTLS(t *testing.T, addr string, cfg *tls.Config, under func(net.Conn) net.Conn) *tlsClient {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	if err := raw.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	cfg = cfg.Clone()
	cfg.VerifyConnection = func(tls.ConnectionState) error { n.Add(1); return nil }
	var c net.Conn = raw
	if under != nil {
		c = under(raw)
	}
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return &tlsClient{Conn: tc, br: bufio.NewReader(tc), handshakes: &n}
}

// roundTrip sends raw request bytes and reads the one response, which must
// be 200 with body want.
func (c *tlsClient) roundTrip(t *testing.T, desc, raw, want string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("%s: writing: %v", desc, err)
	}
	c.expect(t, desc, want)
}

// expect reads one response to a GET or POST, which must be 200 with body
// want.
func (c *tlsClient) expect(t *testing.T, desc, want string) {
	t.Helper()
	resp, err := readReply(c.br, "GET")
	if err != nil {
		t.Fatalf("%s: reading the response: %v", desc, err)
	}
	if resp.status() != 200 || string(resp.body) != want {
		t.Fatalf("%s: got %q %q; want 200 %q", desc, resp.line, resp.body, want)
	}
}

func TestIdleHTTPSConnectionParksAndIsServedAgain(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, echoAnswer)
	for _, v := range []struct {
		name string
		max  uint16
	}{{"TLS 1.2", tls.VersionTLS12}, {"TLS 1.3", tls.VersionTLS13}} {
		t.Run(v.name, func(t *testing.T) {
			tg, cfg := httpsGateway(t, TransportStd, "", up)
			cfg.MaxVersion = v.max
			m := tg.bindMetrics(3000)
			c := dialTLS(t, tg.addr(3000), cfg, nil)
			local := c.LocalAddr().String()
			requests := []struct{ desc, raw, want string }{
				{"a GET", "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n", "GET /1 HTTP/1.1\n"},
				{"a GET after parking", "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n", "GET /2 HTTP/1.1\n"},
				{"a POST with a body", "POST /3 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", "POST /3 HTTP/1.1\nhello"},
				{"a chunked POST", "POST /4 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "POST /4 HTTP/1.1\nabc"},
			}
			for i, r := range requests {
				if i > 0 {
					// Each request after the first goes to a parked
					// connection.
					eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
				}
				c.roundTrip(t, r.desc, r.raw, r.want)
			}
			// Two pipelined requests in one record, after parking.
			eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
			if _, err := io.WriteString(c, "GET /5 HTTP/1.1\r\nHost: a\r\n\r\nGET /6 HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			c.expect(t, "the first pipelined GET", "GET /5 HTTP/1.1\n")
			c.expect(t, "the second pipelined GET", "GET /6 HTTP/1.1\n")

			// One TLS session throughout: one handshake, one socket, one
			// connection open at the gateway.
			if n := c.handshakes.Load(); n != 1 {
				t.Fatalf("%d handshakes; want 1", n)
			}
			if st := c.ConnectionState(); st.Version != v.max || st.DidResume {
				t.Fatalf("connection state: version %x, resumed %v", st.Version, st.DidResume)
			}
			if c.LocalAddr().String() != local {
				t.Fatal("not the same connection")
			}
			if n := tg.openConns(3000); n != 1 {
				t.Fatalf("open connections %d, want 1", n)
			}
			// The client closes a parked connection: the gateway wakes and
			// closes its side, and counts it closed.
			eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
			c.Close()
			eventually(t, 5*time.Second, "the connection counted closed", func() bool {
				return m.Parked() == 0 && tg.openConns(3000) == 0
			})
		})
	}
}

// A parked HTTPS connection is closed at http1IdleTimeout, with TLS's
// close_notify, like an idle one that was not parked.
func TestParkedHTTPSConnectionClosesAtTheIdleTimeout(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg, cfg := httpsGateway(t, TransportStd, "frontendPolicies:\n  http:\n    http1IdleTimeout: 500ms\n", up)
	m := tg.bindMetrics(3000)
	c := dialTLS(t, tg.addr(3000), cfg, nil)
	c.roundTrip(t, "a GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "ok")
	start := time.Now()
	eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.ReadByte()
	took := time.Since(start)
	if err != io.EOF {
		t.Fatalf("parked connection: read %v; want the end of the TLS stream", err)
	}
	if took < 400*time.Millisecond {
		t.Fatalf("closed after %v; want about 500ms", took)
	}
	eventually(t, 5*time.Second, "the connection counted closed", func() bool {
		return m.Parked() == 0 && tg.openConns(3000) == 0
	})
}

// Shutdown closes parked HTTPS connections at once: they are idle.
func TestShutdownClosesParkedHTTPSConnections(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg, cfg := httpsGateway(t, TransportStd, "", up)
	m := tg.bindMetrics(3000)
	c := dialTLS(t, tg.addr(3000), cfg, nil)
	c.roundTrip(t, "a GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "ok")
	eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	tg.gw.Shutdown(ctx)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %v with only a parked connection", took)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("parked connection after shutdown: read %v; want the end of the TLS stream", err)
	}
	eventually(t, 5*time.Second, "the parked gauge back to 0", func() bool { return m.Parked() == 0 })
}

// A reload that keeps the bind keeps its parked HTTPS connections, which
// are then served by the new configuration (their listener looked up again
// by server name).
func TestParkedHTTPSConnectionsOutliveAReload(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg, cfg, yaml, vars := httpsGatewayConfig(t, TransportStd, "", up)
	m := tg.bindMetrics(3000)
	c := dialTLS(t, tg.addr(3000), cfg, nil)
	c.roundTrip(t, "a GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "ok")
	eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
	reloaded := strings.Replace(yaml, "    - backends: [{host: ${UP}}]\n- port: 3001",
		"    - policies: {responseHeaderModifier: {add: {x-reloaded: \"yes\"}}}\n      backends: [{host: ${UP}}]\n- port: 3001", 1)
	if reloaded == yaml {
		t.Fatal("the configuration was not changed")
	}
	tg.apply(reloaded, vars)
	if _, err := io.WriteString(c, "GET /after HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r, err := readReply(c.br, "GET")
	if err != nil || r.status() != 200 || r.fields.get("X-Reloaded") != "yes" {
		t.Fatalf("after the reload: %q %q, %v", r.line, r.fields, err)
	}
	if n := c.handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes; want 1", n)
	}
}

// An HTTPS connection silent after its handshake (a browser's preconnect)
// parks too, and is served, on its session, once its first request comes.
func TestSilentHTTPSConnectionParks(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, echoAnswer)
	tg, cfg := httpsGateway(t, TransportStd, "", up)
	m := tg.bindMetrics(3000)
	c := dialTLS(t, tg.addr(3000), cfg, nil)
	eventually(t, 5*time.Second, "the silent connection parked", func() bool { return m.Parked() == 1 })
	c.roundTrip(t, "the first GET", "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n", "GET /1 HTTP/1.1\n")
	eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
	c.roundTrip(t, "the second GET", "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n", "GET /2 HTTP/1.1\n")
	if n := c.handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes; want 1", n)
	}
	if n := tg.openConns(3000); n != 1 {
		t.Fatalf("open connections %d, want 1", n)
	}
}

// A parked HTTPS connection that never sent a request is closed, without
// an answer, when its first request is due (requestHeadTimeout here).
func TestSilentParkedHTTPSConnectionClosesWithoutAnswer(t *testing.T) {
	shortParking(t)
	old := headTimeout.Swap(int64(400 * time.Millisecond))
	t.Cleanup(func() { headTimeout.Store(old) })
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg, cfg := httpsGateway(t, TransportStd, "", up)
	m := tg.bindMetrics(3000)
	c := dialTLS(t, tg.addr(3000), cfg, nil)
	eventually(t, 5*time.Second, "the silent connection parked", func() bool { return m.Parked() == 1 })
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := c.br.ReadByte(); err != io.EOF {
		t.Fatalf("read %q, %v; want the end of the TLS stream without an answer", b, err)
	}
	eventually(t, 5*time.Second, "the connection counted closed", func() bool {
		return m.Parked() == 0 && tg.openConns(3000) == 0
	})
}

// splitConn writes, once armed, the first half of the next write (a TLS
// record) and keeps the rest until release.
type splitConn struct {
	net.Conn
	mu    sync.Mutex
	armed bool
	rest  []byte
}

func (c *splitConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.armed {
		return c.Conn.Write(p)
	}
	c.armed = false
	half := len(p) / 2
	c.rest = append([]byte(nil), p[half:]...)
	if _, err := c.Conn.Write(p[:half]); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *splitConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.Conn.Write(c.rest)
	return err
}

// A client that sends half a TLS record and then goes quiet, while the
// server waits for its next request, is not parked: crypto/tls holds that
// half, and what woke the parker would be the rest of a request already
// begun. Once the rest arrives, the request is served, and the connection
// parks again between requests.
func TestHalfATLSRecordDoesNotPark(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, echoAnswer)
	tg, cfg := httpsGateway(t, TransportStd, "", up)
	m := tg.bindMetrics(3000)
	var split *splitConn
	c := dialTLS(t, tg.addr(3000), cfg, func(raw net.Conn) net.Conn {
		split = &splitConn{Conn: raw}
		return split
	})
	// The first request, then half of the next one's record, sent before
	// the first is answered: the server never waits idle without that half.
	if _, err := io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	split.mu.Lock()
	split.armed = true
	split.mu.Unlock()
	if _, err := io.WriteString(c, "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "the first GET", "GET /1 HTTP/1.1\n")

	tg.controlParks()
	if err := split.release(); err != nil {
		t.Fatal(err)
	}
	c.expect(t, "the request sent in two halves", "GET /2 HTTP/1.1\n")
	// Between requests again: it parks.
	eventually(t, 5*time.Second, "the connection parked", func() bool { return m.Parked() == 1 })
	c.roundTrip(t, "a GET after parking", "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n", "GET /3 HTTP/1.1\n")
	if n := c.handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes; want 1", n)
	}
}

// The bare-LF head watch runs on the decrypted bytes: a head ending in a
// bare-LF blank line over TLS gets 400 at once, as in cleartext
// (TestErrorsBareLFHead), on a new connection and on a parked one.
func TestHTTPSBareLFHead(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg, cfg := httpsGateway(t, tr, "", up)
			m := tg.bindMetrics(3000)
			for _, tc := range []struct {
				desc   string
				before bool     // a request answered first, then parked (std)
				pieces []string // then these, one write (and record) each
			}{
				{desc: "LF LF", pieces: []string{"GET / HTTP/1.1\nHost: a\n\n"}},
				{desc: "CRLF LF", pieces: []string{"GET / HTTP/1.1\r\nHost: a\r\n\n"}},
				{desc: "LF CRLF", pieces: []string{"GET / HTTP/1.1\r\nHost: a\n\r\n"}},
				{desc: "the blank line in a record of its own", pieces: []string{"GET / HTTP/1.1\r\nHost: a\n", "\n"}},
				{desc: "after parking", before: true, pieces: []string{"GET / HTTP/1.1\nHost: a\n\n"}},
			} {
				t.Run(tc.desc, func(t *testing.T) {
					c := dialTLS(t, tg.addr(3000), cfg, nil)
					if tc.before {
						c.roundTrip(t, "a GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "ok")
						if tr == TransportStd {
							eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
						}
					}
					start := time.Now()
					for _, p := range tc.pieces {
						if _, err := io.WriteString(c, p); err != nil {
							t.Fatal(err)
						}
					}
					resp, err := readReply(c.br, "GET")
					if err != nil {
						t.Fatalf("reading the response: %v", err)
					}
					if resp.status() != 400 || string(resp.body) != "malformed request: the head must end with CRLF CRLF\n" {
						t.Fatalf("answered %q %q, want 400 naming the line ends", resp.line, resp.body)
					}
					if took := time.Since(start); took > 5*time.Second {
						t.Fatalf("answered after %v, want at once", took)
					}
					if b, err := c.br.ReadByte(); err == nil {
						t.Fatalf("connection open after the 400: byte %q", b)
					}
				})
			}
			t.Run("followed by a pipelined request", func(t *testing.T) {
				c := dialTLS(t, tg.addr(3000), cfg, nil)
				c.roundTrip(t, "a bare-LF head", "GET / HTTP/1.1\nHost: a\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", "ok")
				c.expect(t, "the request after it", "ok")
			})
		})
	}
}
