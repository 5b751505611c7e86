package server

import (
	"crypto/tls"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestSilentTLSConnections: a connection to a port of TLS listeners alone
// (a passthrough one, an HTTPS one) that sends nothing, or a ClientHello's
// record header and then nothing, is closed at
// frontendPolicies.tls.handshakeTimeout, on either transport and however it
// waited (parked, or on its goroutine, the deadline before or after the
// park check; netpoll's acceptor times it), and leaves
// one connection record: end tls_failed, an absent or unfinished
// ClientHello (proxy_header where a PROXY protocol header is due first).
func TestSilentTLSConnections(t *testing.T) {
	const handshake = 400 * time.Millisecond
	oldProxy := proxyHeaderTimeout
	proxyHeaderTimeout = handshake
	t.Cleanup(func() { proxyHeaderTimeout = oldProxy })
	pki := newTestPKI(t, "silent")
	srv := pki.Server("a.test", "a.test")
	up := tlsUpstream(t, srv.TLS, "ok")
	yaml := `
frontendPolicies:
  tls: {handshakeTimeout: 400ms}
binds:
- port: 1
  listeners:
  - protocol: TLS
    tcpRoutes:
    - backends: [{host: ${UP}}]
- port: 2
  listeners:
  - protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - backends: [{host: ${UP}}]
- port: 3
  tunnelProtocol: proxy
  listeners:
  - protocol: TLS
    tcpRoutes:
    - backends: [{host: ${UP}}]
`
	vars := map[string]string{"UP": up, "CERT": srv.CertFile, "KEY": srv.KeyFile}
	// A ClientHello's record header announcing 512 bytes, and 4 of them.
	partial := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc}
	cases := []struct {
		name string
		port int
		send []byte
		end  string
	}{
		{"silent", 1, nil, "tls_failed"},
		{"partial ClientHello", 1, partial, "tls_failed"},
		{"silent", 2, nil, "tls_failed"},
		{"partial ClientHello", 2, partial, "tls_failed"},
		// With a PROXY protocol header due, what it lacks is the header.
		{"silent, PROXY header due", 3, nil, "proxy_header"},
	}
	ways := []struct {
		name string
		tr   Transport
		park time.Duration // parkIdleAfter
	}{
		{"std, parked", TransportStd, 50 * time.Millisecond},
		{"std, the deadline before the park check", TransportStd, 5 * time.Second},
		{"std, no parking", TransportStd, 0},
		{"netpoll", TransportNetpoll, 0}, // its connections do not park
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			old := parkIdleAfter.Swap(int64(w.park))
			t.Cleanup(func() { parkIdleAfter.Store(old) })
			tg := startGatewayWith(t, yaml, vars, w.tr)
			for _, tc := range cases {
				t.Run(bindName(tc.port)+", "+tc.name, func(t *testing.T) {
					c := dialTest(t, tg.addr(tc.port))
					start := time.Now()
					if _, err := c.Write(tc.send); err != nil {
						t.Fatal(err)
					}
					_ = c.SetReadDeadline(start.Add(5 * time.Second))
					if n, err := c.Read(make([]byte, 1)); n != 0 || err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
						t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
					}
					if took := time.Since(start); took < handshake*3/4 || took > handshake+2*time.Second {
						t.Errorf("closed after %v; want the handshake timeout, %v", took, handshake)
					}
					rec := connRecordOf(t, tg, c.LocalAddr().String())
					requireFields(t, rec, map[string]any{"protocol": "tls", "bind": bindName(tc.port), "end": tc.end})
					requireAbsent(t, rec, "tls.sni", "endpoint")
					if d, _ := rec["duration"].(time.Duration); d < handshake*3/4 {
						t.Errorf("duration %v; want it from the accept", rec["duration"])
					}
				})
			}
			// None is logged twice.
			eventually(t, 5*time.Second, "the connections closed", func() bool {
				return tg.bindMetrics(1).Open()+tg.bindMetrics(2).Open()+tg.bindMetrics(3).Open() == 0
			})
			loggedConns(t, tg, len(cases))
		})
	}
}

// connRecordOf waits for the connection record of the client at src and
// returns its fields, failing if there is more than one.
func connRecordOf(t *testing.T, tg *testGateway, src string) map[string]any {
	t.Helper()
	var recs []map[string]any
	eventually(t, 10*time.Second, "the connection record of "+src, func() bool {
		recs = recs[:0]
		for _, e := range tg.accessLogs().FilterMessage("connection").All() {
			if rec := e.ContextMap(); rec["src"] == src {
				recs = append(recs, rec)
			}
		}
		return len(recs) > 0
	})
	if len(recs) != 1 {
		t.Fatalf("%d connection records of %s: %v", len(recs), src, recs)
	}
	return recs[0]
}

// TestSilentAfterHandshake: an HTTPS connection that completes its
// handshake and then sends nothing is closed at http1IdleTimeout when
// that is shorter than the request head's bound, as a plain connection
// silent after its accept is, on TLS 1.2 and 1.3, parked or not. (It was
// held for the request head's bound, 60 s, whatever http1IdleTimeout
// said.)
func TestSilentAfterHandshake(t *testing.T) {
	pki := newTestPKI(t, "silent-after")
	srv := pki.Server("a.test", "a.test")
	yaml := `
frontendPolicies:
  http: {http1IdleTimeout: 300ms}
binds:
- port: 1
  listeners:
  - protocol: HTTPS
    tls: {cert: ${CERT}, key: ${KEY}}
    routes:
    - policies: {directResponse: {status: 200}}
`
	cases := []struct {
		desc    string
		version uint16
		parked  bool
	}{
		{"TLS 1.3", tls.VersionTLS13, false},
		{"TLS 1.2", tls.VersionTLS12, false},
		{"TLS 1.3, parked", tls.VersionTLS13, true},
		{"TLS 1.2, parked", tls.VersionTLS12, true},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if tc.parked {
				shortParking(t)
			} else {
				noParking(t)
			}
			tg := startGateway(t, yaml, map[string]string{"CERT": srv.CertFile, "KEY": srv.KeyFile})
			c := tls.Client(dialTest(t, tg.addr(1)), &tls.Config{ServerName: "a.test", RootCAs: pki.Pool, MinVersion: tc.version, MaxVersion: tc.version, NextProtos: []string{"http/1.1"}})
			if err := c.Handshake(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			// Well under the head's 60 s bound, well over the idle timeout.
			_ = c.SetReadDeadline(start.Add(5 * time.Second))
			n, err := c.Read(make([]byte, 1))
			if n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("read %d, %v after %v; want the gateway's close", n, err, time.Since(start))
			}
			if d := time.Since(start); d < 250*time.Millisecond {
				t.Fatalf("closed after %v, before the idle timeout", d)
			}
		})
	}
}
