package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/relaygate/gateway/server/telemetry"
)

// Parking of idle HTTP/2 connections (h2park.go): an HTTP/2 connection
// with no stream open parks as an idle HTTP/1.1 one does, keeps its
// session (settings, HPACK tables) and is served again when bytes come.

// controlBind is a bind on port 3001 for controlParks.
const controlBind = `- port: 3001
  listeners:
  - routes:
    - policies: {directResponse: {status: 200, body: ok}}
`

// TestH2ConnectionParksAndIsServedAgain: net/http's HTTP/2 client (in
// cleartext with prior knowledge, and over TLS) makes requests on one connection that
// parks between them. Each is answered on the same connection; a field
// sent with the same value each time rides HPACK's dynamic table, which
// the parked connection kept in step.
func TestH2ConnectionParksAndIsServedAgain(t *testing.T) {
	shortParking(t)
	up := echoProtoUpstream(t)
	tg, cfg := httpsGateway(t, TransportStd, "", up)
	for _, tc := range []struct {
		name string
		port int
	}{
		{"h2c", 3001},
		{"h2 over TLS", 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dials atomic.Int32
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			var rt http.RoundTripper
			url := "http://" + tg.addr(tc.port)
			if tc.port == 3000 {
				h2cfg := cfg.Clone()
				h2cfg.NextProtos = nil
				tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: h2cfg, DialContext: dial, DisableCompression: true}
				defer tr.CloseIdleConnections()
				rt, url = tr, "https://"+tg.addr(tc.port)
			} else {
				p := new(http.Protocols)
				p.SetUnencryptedHTTP2(true)
				tr := &http.Transport{Protocols: p, DialContext: dial, DisableCompression: true}
				defer tr.CloseIdleConnections()
				rt = tr
			}
			client := &http.Client{Transport: rt, Timeout: 10 * time.Second}
			m := tg.bindMetrics(tc.port)
			for i := range 4 {
				if i > 0 {
					eventually(t, 5*time.Second, "the idle HTTP/2 connection parked", func() bool { return m.Parked() == 1 })
				}
				body := fmt.Sprintf("payload %d", i)
				if i == 1 {
					// An answer of several DATA frames: the connection
					// parks after it with its output shed (shedOutput).
					body += strings.Repeat(".", 40<<10)
				}
				req, _ := http.NewRequest(http.MethodPost, url+"/r", strings.NewReader(body))
				req.Header.Set("X-Echo", "X-Same")
				req.Header.Set("X-Same", "the same value every time")
				resp, got := doWith(t, client, req)
				if resp.ProtoMajor != 2 || resp.StatusCode != 200 || got != "POST /r "+body {
					t.Fatalf("request %d: %s %d %q", i, resp.Proto, resp.StatusCode, got)
				}
				if v := resp.Header.Get("X-Got-X-Same"); v != "the same value every time" {
					t.Fatalf("request %d: the upstream got X-Same %q", i, v)
				}
			}
			if n := dials.Load(); n != 1 {
				t.Fatalf("%d connections dialled; want 1, parked and served again", n)
			}
			if n := tg.openConns(tc.port); n != 1 {
				t.Fatalf("open connections %d, want 1", n)
			}
			// The client closes the parked connection: counted closed.
			eventually(t, 5*time.Second, "the idle HTTP/2 connection parked", func() bool { return m.Parked() == 1 })
			client.CloseIdleConnections()
			eventually(t, 5*time.Second, "the connection counted closed", func() bool {
				return m.Parked() == 0 && tg.openConns(tc.port) == 0
			})
		})
	}
}

// Parked HTTP/2 connections hold no goroutine.
func TestParkedH2ConnectionsHoldNoGoroutine(t *testing.T) {
	shortParking(t)
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRoute(up), nil)
	m := tg.bindMetrics(3000)
	const n = 40
	before := runtime.NumGoroutine()
	for i := range n {
		h := dialH2Raw(t, tg.addr(3000))
		if a := h.get(t, map[uint32]*h2Answer{}, 1, "/x"); a.status != "200" {
			t.Fatalf("connection %d: status %q", i, a.status)
		}
	}
	eventually(t, 10*time.Second, "every connection parked", func() bool { return m.Parked() == n })
	// Unparked, each would keep its reader goroutine; allow a few for the
	// test's own and the runtime's.
	eventually(t, 5*time.Second, "the reader goroutines gone", func() bool {
		return runtime.NumGoroutine() < before+10
	})
}

// An HTTP/2 connection parks only when idle: not while a stream waits for
// its answer, and not with part of a frame read; what it was in the middle
// of is served whole.
func TestH2ConnectionParksOnlyWhenIdle(t *testing.T) {
	shortParking(t)
	t.Run("a stream in flight", func(t *testing.T) {
		blocked := newBlockingBackend(t)
		t.Cleanup(blocked.unblock)
		tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /slow}}]
      backends: [{host: ${SLOW}, policies: {http: {version: HTTP1}}}]
    - policies: {directResponse: {status: 200, body: ok}}
`+controlBind, map[string]string{"SLOW": blocked.addr})
		h := dialH2Raw(t, tg.addr(3000))
		if err := h.request(1, "GET", "/slow", true); err != nil {
			t.Fatal(err)
		}
		blocked.waitEntered(t)
		tg.controlParks()
		blocked.unblock()
		if a := h.answer(t, map[uint32]*h2Answer{}, 1); a.status != "200" || string(a.body) != "released" {
			t.Fatalf("stream 1: %q %q", a.status, a.body)
		}
	})
	t.Run("part of a frame read", func(t *testing.T) {
		up := echoProtoUpstream(t)
		tg := startGateway(t, oneRoute(up)+controlBind, nil)
		m := tg.bindMetrics(3000)
		h := dialH2Raw(t, tg.addr(3000))
		answers := map[uint32]*h2Answer{}
		if a := h.get(t, answers, 1, "/one"); a.status != "200" || string(a.body) != "GET /one " {
			t.Fatalf("stream 1: %q %q", a.status, a.body)
		}
		eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
		// Stream 3's HEADERS frame, in two pieces: four bytes of its
		// header wake the connection; the rest comes after several
		// periods in which it must not park.
		var frame strings.Builder
		fr := http2.NewFramer(&frame, nil)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: h.block("GET", "/two"), EndStream: true, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		raw := frame.String()
		if _, err := io.WriteString(h.c, raw[:4]); err != nil {
			t.Fatal(err)
		}
		eventually(t, 5*time.Second, "the connection woken", func() bool { return m.Parked() == 0 })
		tg.controlParks()
		if _, err := io.WriteString(h.c, raw[4:]); err != nil {
			t.Fatal(err)
		}
		if a := h.answer(t, answers, 3); a.status != "200" || string(a.body) != "GET /two " {
			t.Fatalf("stream 3, sent in two pieces: %q %q", a.status, a.body)
		}
	})
}

// A parked HTTP/2 connection ends as an unparked one does: the idle
// timeout and maxConnectionDuration send GOAWAY and close it, drain
// likewise (and Shutdown returns), an unanswered keepalive ping closes it;
// answered pings keep it, parking between them. Each end is counted.
func TestParkedH2ConnectionEnds(t *testing.T) {
	shortParking(t)
	up := echoProtoUpstream(t)
	// parkedH2 opens an HTTP/2 connection, makes one request on it and
	// waits until it parks.
	parkedH2 := func(t *testing.T, tg *testGateway) *h2Raw {
		t.Helper()
		h := dialH2Raw(t, tg.addr(3000))
		if a := h.get(t, map[uint32]*h2Answer{}, 1, "/x"); a.status != "200" {
			t.Fatalf("status %q", a.status)
		}
		m := tg.bindMetrics(3000)
		eventually(t, 5*time.Second, "the idle connection parked", func() bool { return m.Parked() == 1 })
		return h
	}
	// goAwayThenClosed reads until GOAWAY (NO_ERROR, last stream 1), then
	// until the connection closes, and waits for it to be counted in m.
	goAwayThenClosed := func(t *testing.T, tg *testGateway, h *h2Raw, m *telemetry.BindMetrics) {
		t.Helper()
		f, err := h.readUntil(10*time.Second, nil, func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok })
		if err != nil {
			t.Fatalf("no GOAWAY: %v", err)
		}
		if ga := f.(*http2.GoAwayFrame); ga.ErrCode != http2.ErrCodeNo || ga.LastStreamID != 1 {
			t.Fatalf("GOAWAY %v, last stream %d; want NO_ERROR, 1", ga.ErrCode, ga.LastStreamID)
		}
		if _, err := h.readUntil(10*time.Second, nil, func(http2.Frame) bool { return false }); err == nil || isTimeout(err) {
			t.Fatalf("connection still open after GOAWAY: %v", err)
		}
		eventually(t, 5*time.Second, "the connection counted closed", func() bool {
			return m.Parked() == 0 && m.Open() == 0
		})
	}
	for _, tc := range []struct{ desc, policy string }{
		{"http1IdleTimeout", "http1IdleTimeout: 500ms"},
		{"maxConnectionDuration", "maxConnectionDuration: 500ms"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGateway(t, "frontendPolicies:\n  http: {"+tc.policy+"}\n"+oneRoute(up), nil)
			goAwayThenClosed(t, tg, parkedH2(t, tg), tg.bindMetrics(3000))
		})
	}
	t.Run("drain", func(t *testing.T) {
		tg := startGateway(t, oneRoute(up), nil)
		m := tg.bindMetrics(3000)
		h := parkedH2(t, tg)
		done := make(chan struct{})
		go func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			tg.gw.Shutdown(ctx)
		}()
		goAwayThenClosed(t, tg, h, m)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Shutdown did not return after the parked connection closed")
		}
	})
	t.Run("keepalive pings", func(t *testing.T) {
		// The timeout leaves a loaded machine (the race detector, other
		// tests) time to answer; 400 ms once was not.
		tg := startGateway(t, "frontendPolicies:\n  http: {http2KeepaliveInterval: 150ms, http2KeepaliveTimeout: 2s}\n"+oneRoute(up), nil)
		m := tg.bindMetrics(3000)
		// Answered (readUntil answers them): the connection stays, and
		// parks between pings.
		h := parkedH2(t, tg)
		pings, parkedBetween := 0, 0
		_, err := h.readUntil(10*time.Second, nil, func(f http2.Frame) bool {
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				pings++
				if m.Parked() == 1 {
					parkedBetween++ // parked when the ping went out
				}
			}
			if _, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatal("GOAWAY to a client that answers its pings")
			}
			return pings == 5
		})
		if err != nil {
			t.Fatalf("after %d pings: %v", pings, err)
		}
		if parkedBetween == 0 {
			t.Fatal("the connection never parked between pings")
		}
		// Unanswered: closed while parked.
		h.c.Close()
		eventually(t, 5*time.Second, "the first connection counted closed", func() bool { return tg.openConns(3000) == 0 })
		h = parkedH2(t, tg)
		closedAfterUnansweredPing(t, h)
		eventually(t, 5*time.Second, "the connection counted closed", func() bool {
			return m.Parked() == 0 && tg.openConns(3000) == 0
		})
	})
}

// An HTTP/2 connection served after an h2c upgrade does not park: its
// socket is behind fasthttp's hijacked connection.
func TestUpgradedH2CConnectionDoesNotPark(t *testing.T) {
	shortParking(t)
	up := echoProtoUpstream(t)
	tg := startGateway(t, oneRoute(up)+controlBind, nil)
	h := dialH2CUpgrade(t, tg.addr(3000), "GET /up HTTP/1.1\r\nHost: h2.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: \r\n\r\n")
	answers := map[uint32]*h2Answer{}
	if a := h.answer(t, answers, 1); a.status != "200" {
		t.Fatalf("stream 1, the upgrade's: status %q", a.status)
	}
	tg.controlParks()
	if a := h.get(t, answers, 3, "/next"); a.status != "200" || string(a.body) != "GET /next " {
		t.Fatalf("stream 3: %s %q", a.status, a.body)
	}
}
