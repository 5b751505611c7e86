package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestClientGoneFromASilentUpstream: a plain route's request waiting on an
// upstream that never answers is let go when its client goes: at once for a
// reset, and halfCloseGrace after a FIN, since a client that half-closes
// after its request may still wait for its answer, which it gets when the
// upstream answers within the grace. Before, every such request held its
// goroutine, the client's socket (in CLOSE-WAIT) and an upstream
// connection for as long as the upstream stayed silent.
func TestClientGoneFromASilentUpstream(t *testing.T) {
	old := halfCloseGrace.Swap(int64(500 * time.Millisecond))
	t.Cleanup(func() { halfCloseGrace.Store(old) })
	up, arrived, released := silentUpstream(t)
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			for _, tc := range clientHangups {
				t.Run(tc.desc, func(t *testing.T) {
					leaveWhileWaiting(t, tg.addr(3000), arrived, released, tc.hangUp)
				})
			}
			t.Run("half-closed, answered within the grace", func(t *testing.T) {
				c, br := dialRaw(t, tg.addr(3000))
				sendAndHalfClose(t, c, "GET /late HTTP/1.1\r\nHost: x\r\n\r\n")
				m, err := readReply(br, "GET")
				if err != nil || m.status() != 200 || string(m.body) != "late" {
					t.Fatalf("got %q %q, %v; want the late answer", m.line, m.body, err)
				}
			})
		})
	}
}

// TestClientGoneFromASilentHTTP2Upstream: the same for a backend spoken to
// in HTTP/2: the hang-up of the HTTP/1.1 client resets the upstream stream
// that waits for its answer.
func TestClientGoneFromASilentHTTP2Upstream(t *testing.T) {
	old := halfCloseGrace.Swap(int64(500 * time.Millisecond))
	t.Cleanup(func() { halfCloseGrace.Store(old) })
	var arrived, released atomic.Int32
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		<-r.Context().Done() // never answers; the stream's reset ends it
		released.Add(1)
	}))
	tg := startGateway(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: "+up+"\n        policies: { http: { version: HTTP2 } }\n", nil)
	for _, tc := range clientHangups {
		t.Run(tc.desc, func(t *testing.T) {
			leaveWhileWaiting(t, tg.addr(3000), &arrived, &released, tc.hangUp)
		})
	}
}

// clientHangups are the ways a client leaves while its request waits.
var clientHangups = []struct {
	desc   string
	hangUp func(*net.TCPConn)
}{
	{"reset", func(c *net.TCPConn) { _ = c.SetLinger(0); c.Close() }},
	{"close", func(c *net.TCPConn) { c.Close() }},
	{"half-close", func(c *net.TCPConn) { _ = c.CloseWrite() }},
}

// leaveWhileWaiting sends the gateway at addr a request its upstream never
// answers (GET /never), waits until the upstream has it (arrived grows),
// hangs up, and waits until the upstream is let go (released grows).
func leaveWhileWaiting(t *testing.T, addr string, arrived, released *atomic.Int32, hangUp func(*net.TCPConn)) {
	t.Helper()
	before, sent := released.Load(), arrived.Load()
	c, _ := dialRaw(t, addr)
	if _, err := io.WriteString(c, "GET /never HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the request at the upstream", func() bool { return arrived.Load() > sent })
	hangUp(c.(*net.TCPConn))
	eventually(t, 10*time.Second, "the upstream let go", func() bool { return released.Load() > before })
}

// TestClientGoneInsideAConnectTunnel: HTTP served inside a CONNECT tunnel
// is watched on the tunnel's client connection: the client's going lets
// the silent upstream go, as for a request on a connection of its own.
// Before, the tunnel's stream had no socket the watch could find.
func TestClientGoneInsideAConnectTunnel(t *testing.T) {
	old := halfCloseGrace.Swap(int64(500 * time.Millisecond))
	t.Cleanup(func() { halfCloseGrace.Store(old) })
	up, arrived, released := silentUpstream(t)
	tg := startGateway(t, `
binds:
- port: 1
  tunnelProtocol: connect
  listeners: []
- mode: internal
  listeners:
  - routes:
    - backends: [{dynamic: {}}]
`, nil)
	for _, tc := range clientHangups {
		t.Run(tc.desc, func(t *testing.T) {
			before, sent := released.Load(), arrived.Load()
			c, _, status := connectRaw(t, tg.addr(1), up)
			if status != 200 {
				t.Fatalf("CONNECT %s: %d", up, status)
			}
			if _, err := io.WriteString(c, "GET /never HTTP/1.1\r\nHost: "+up+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, "the request at the upstream", func() bool { return arrived.Load() > sent })
			tc.hangUp(c.(*net.TCPConn))
			eventually(t, 10*time.Second, "the upstream let go", func() bool { return released.Load() > before })
		})
	}
}

// silentUpstream is an upstream that never answers GET /never (arrived
// counts those it got), answers GET /late a moment later, and counts in
// released the connections the gateway let go.
func silentUpstream(t *testing.T) (addr string, arrived, released *atomic.Int32) {
	t.Helper()
	arrived, released = new(atomic.Int32), new(atomic.Int32)
	addr = rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				released.Add(1) // the gateway let the connection go
				return
			}
			if strings.HasPrefix(line, "GET /never") {
				arrived.Add(1)
			}
			if strings.HasPrefix(line, "GET /late") {
				// Answer a moment later, within the grace.
				for line != "\r\n" && err == nil {
					line, err = br.ReadString('\n')
				}
				time.Sleep(100 * time.Millisecond) // the upstream's slowness, not a wait for a condition
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
			}
			// Anything else is never answered.
		}
	})
	return addr, arrived, released
}
