package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/server/telemetry"
)

// Parking: a keep-alive connection idle for a whole check period
// (parkIdleAfter) gives up its goroutine (sock.EnableParking) and is served
// again when its next request arrives. The standard-library transport parks;
// netpoll's connections are not sock.Conns.

// shortParking makes connections park after a few milliseconds of
// idleness for the rest of the test.
func shortParking(t *testing.T) {
	old := parkIdleAfter.Swap(int64(20 * time.Millisecond))
	t.Cleanup(func() { parkIdleAfter.Store(old) })
}

// bindMetrics returns the metrics of the bind configured with port.
func (tg *testGateway) bindMetrics(port int) *telemetry.BindMetrics {
	tg.gw.mu.Lock()
	defer tg.gw.mu.Unlock()
	b := tg.gw.binds[port]
	if b == nil {
		tg.t.Fatalf("no bind for port %d", port)
	}
	return b.metrics
}

// openConns returns the bind's open-connection gauge.
func (tg *testGateway) openConns(port int) int { return tg.bindMetrics(port).Open() }

// parkedConn opens a connection to the bind on port 3000, makes one GET on
// it if request is set, and waits until the connection has parked.
func (tg *testGateway) parkedConn(request bool) (*telemetry.BindMetrics, net.Conn, *bufio.Reader) {
	t := tg.t
	t.Helper()
	m := tg.bindMetrics(3000)
	c, br := dialRaw(t, tg.addr(3000))
	if request {
		if r := roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); r.status() != 200 {
			t.Fatalf("status %d", r.status())
		}
	}
	eventually(t, 5*time.Second, "the connection parked", func() bool { return m.Parked() == 1 })
	return m, c, br
}

func TestIdleConnectionParksAndIsServedAgain(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, echoAnswer)
	tg := startGateway(t, oneRoute(up), nil)
	m := tg.bindMetrics(3000)
	c, br := dialRaw(t, tg.addr(3000))
	local := c.LocalAddr().String()

	requests := []struct {
		desc, raw, method string
		want              []string // response bodies, in order
	}{
		{"a GET", "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n", "GET", []string{"GET /1 HTTP/1.1\n"}},
		{"a GET after parking", "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n", "GET", []string{"GET /2 HTTP/1.1\n"}},
		{"a POST with a body", "POST /3 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", "POST", []string{"POST /3 HTTP/1.1\nhello"}},
		{"a chunked POST", "POST /4 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", "POST", []string{"POST /4 HTTP/1.1\nabc"}},
		{"two pipelined GETs", "GET /5 HTTP/1.1\r\nHost: a\r\n\r\nGET /6 HTTP/1.1\r\nHost: a\r\n\r\n", "GET", []string{"GET /5 HTTP/1.1\n", "GET /6 HTTP/1.1\n"}},
	}
	for i, r := range requests {
		if i > 0 {
			// Each request after the first goes to a parked connection.
			eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
		}
		if _, err := io.WriteString(c, r.raw); err != nil {
			t.Fatalf("%s: writing: %v", r.desc, err)
		}
		for _, want := range r.want {
			resp, err := readReply(br, r.method)
			if err != nil {
				t.Fatalf("%s: reading the response: %v", r.desc, err)
			}
			if resp.status() != 200 || string(resp.body) != want {
				t.Fatalf("%s: got %q %q; want 200 %q", r.desc, resp.line, resp.body, want)
			}
		}
		if c.LocalAddr().String() != local {
			t.Fatal("not the same connection")
		}
	}
	if n := tg.openConns(3000); n != 1 {
		t.Fatalf("open connections %d, want 1", n)
	}
	// The client closes a parked connection: the gateway wakes and closes
	// its side, and counts it closed.
	eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
	c.Close()
	eventually(t, 5*time.Second, "the connection counted closed", func() bool {
		return m.Parked() == 0 && tg.openConns(3000) == 0
	})
}

// Parked connections hold no goroutine.
func TestParkedConnectionsHoldNoGoroutine(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg := startGateway(t, oneRoute(up), nil)
	m := tg.bindMetrics(3000)
	const n = 50
	before := runtime.NumGoroutine()
	for range n {
		c, br := dialRaw(t, tg.addr(3000))
		if r := roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); r.status() != 200 {
			t.Fatalf("status %d", r.status())
		}
	}
	eventually(t, 5*time.Second, "every connection parked", func() bool { return m.Parked() == n })
	// Without parking each would keep its serving goroutine; allow a few
	// for the test's own and the runtime's.
	eventually(t, 5*time.Second, "the serving goroutines gone", func() bool {
		return runtime.NumGoroutine() < before+10
	})
}

// A parked connection is closed at http1IdleTimeout like any idle one.
func TestParkedConnectionClosesAtTheIdleTimeout(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg := startGateway(t, "frontendPolicies:\n  http:\n    http1IdleTimeout: 500ms\n"+oneRoute(up), nil)
	m := tg.bindMetrics(3000)
	c, br := dialRaw(t, tg.addr(3000))
	roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	start := time.Now()
	eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := br.ReadByte()
	took := time.Since(start)
	if !isClosed(err) {
		t.Fatalf("parked connection not closed: %v", err)
	}
	if took < 400*time.Millisecond {
		t.Fatalf("closed after %v; want about 500ms", took)
	}
	eventually(t, 5*time.Second, "the connection counted closed", func() bool {
		return m.Parked() == 0 && tg.openConns(3000) == 0
	})
}

// Shutdown closes parked connections at once: they are idle.
func TestShutdownClosesParkedConnections(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg := startGateway(t, oneRoute(up), nil)
	m, c, br := tg.parkedConn(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	tg.gw.Shutdown(ctx)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("shutdown took %v with only a parked connection", took)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br.ReadByte(); !isClosed(err) {
		t.Fatalf("parked connection still open after shutdown: %v", err)
	}
	eventually(t, 5*time.Second, "the parked gauge back to 0", func() bool { return m.Parked() == 0 })
}

// A reload that keeps the bind keeps its parked connections, which are
// then served by the new configuration.
func TestParkedConnectionsOutliveAReload(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, echoAnswer)
	cfg := oneRoute(up)
	tg := startGateway(t, cfg, nil)
	_, c, br := tg.parkedConn(true)
	tg.apply(strings.Replace(cfg, "backends:", "policies:\n        responseHeaderModifier:\n          add:\n            x-reloaded: \"yes\"\n      backends:", 1), nil)
	r := roundTripRaw(t, c, br, "GET", "GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
	if r.status() != 200 || r.fields.get("X-Reloaded") != "yes" {
		t.Fatalf("after the reload: %q %q", r.line, r.fields)
	}
}

// A new connection that sends nothing parks too, and is served once its
// first request arrives.
func TestSilentNewConnectionParks(t *testing.T) {
	shortParking(t)
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg := startGateway(t, oneRoute(up), nil)
	_, c, br := tg.parkedConn(false)
	if r := roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); r.status() != 200 {
		t.Fatalf("status %d", r.status())
	}
}

// A parked silent connection is closed, without an answer, when its first
// byte is due (requestHeadTimeout here).
func TestSilentParkedConnectionClosesWithoutAnswer(t *testing.T) {
	shortParking(t)
	old := headTimeout.Swap(int64(400 * time.Millisecond))
	t.Cleanup(func() { headTimeout.Store(old) })
	up, _ := rawHTTPUpstream(t, okAnswer)
	tg := startGateway(t, oneRoute(up), nil)
	m, c, br := tg.parkedConn(false)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := br.ReadByte(); !isClosed(err) {
		t.Fatalf("read %q, %v; want the connection closed without an answer", b, err)
	}
	eventually(t, 5*time.Second, "the connection counted closed", func() bool {
		return m.Parked() == 0 && tg.openConns(3000) == 0
	})
}
