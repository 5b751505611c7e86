package server

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// blockingUpstream answers only when the test ends, so timeouts fire without
// the test sleeping.
func blockingUpstream(t *testing.T) string {
	release := make(chan struct{})
	addr := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release) })
	return addr
}

// garbageUpstream answers every connection with bytes that are not HTTP.
func garbageUpstream(t *testing.T) string {
	return rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 4096)
		c.Read(buf)
		io.WriteString(c, "THIS IS NOT HTTP\r\n\r\n")
	})
}

func TestErrorStatuses(t *testing.T) {
	tests := []struct {
		desc     string
		yaml     string
		backend  func(t *testing.T) string
		path     string
		headers  int
		want     int
		wantBody string
	}{
		{desc: "no route", yaml: "    - matches: [{path: {exact: /only}}]\n      backends: [{host: '${UP}'}]\n", backend: closedAddr, path: "/other", want: 404, wantBody: "route not found"},
		{desc: "backend refused", yaml: "    - backends: [{host: '${UP}'}]\n", backend: closedAddr, path: "/", want: 503, wantBody: "upstream unavailable"},
		{desc: "bad upstream response", yaml: "    - backends: [{host: '${UP}'}]\n", backend: garbageUpstream, path: "/", want: 502, wantBody: "bad upstream response"},
		{desc: "request timeout", yaml: "    - policies: {timeout: {requestTimeout: 200ms}}\n      backends: [{host: '${UP}'}]\n", backend: blockingUpstream, path: "/", want: 504, wantBody: "upstream request timeout"},
		{desc: "backend request timeout", yaml: "    - policies: {timeout: {backendRequestTimeout: 200ms}}\n      backends: [{host: '${UP}'}]\n", backend: blockingUpstream, path: "/", want: 504},
		{desc: "backend http.requestTimeout", yaml: "    - backends: [{host: '${UP}', policies: {http: {requestTimeout: 200ms}}}]\n", backend: blockingUpstream, path: "/", want: 504},
		{desc: "no backends", yaml: "    - name: empty\n", backend: closedAddr, path: "/", want: 500, wantBody: "route has no backends"},
		{desc: "too many headers (default 100)", yaml: "    - backends: [{host: '${UP}'}]\n", backend: closedAddr, path: "/", headers: 101, want: 431},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			up := tc.backend(t)
			tg := startGateway(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n"+tc.yaml, map[string]string{"UP": up})
			req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+tc.path, nil)
			for i := 0; i < tc.headers; i++ {
				req.Header.Set("X-H"+itoa(i), "v")
			}
			start := time.Now()
			resp, body := do(t, req)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tc.want, body)
			}
			if tc.wantBody != "" && strings.TrimSpace(body) != tc.wantBody {
				t.Fatalf("body %q, want %q", body, tc.wantBody)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %v", time.Since(start))
			}
		})
	}
}

func TestErrorRawClients(t *testing.T) {
	ch := make(chan seen, 8)
	up := recordingUpstream(t, ch)
	tg := startGateway(t, `
frontendPolicies:
  http:
    http1MaxHeaders: 10
    http1IdleTimeout: 200ms
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	tests := []struct {
		desc string
		send string
		want int
	}{
		{desc: "garbage", send: "\x00\x01 NOT HTTP\r\n\r\n", want: 400},
		{desc: "too many headers", send: "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-A: 1\r\n", 11) + "\r\n", want: 431},
		{desc: "headers too large", send: "GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("x", 64<<10) + "\r\n\r\n", want: 431},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c, br := rawConn(t, tg.addr(3000))
			io.WriteString(c, tc.send)
			resp, _ := readResponse(t, br, "GET")
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	t.Run("client disconnects mid-body", func(t *testing.T) {
		c, _ := rawConn(t, tg.addr(3000))
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\npartial")
		c.Close()
		if resp, _ := get(t, tg.url(3000)+"/after"); resp.StatusCode != 200 {
			t.Fatalf("gateway unhealthy after a dropped client: %d", resp.StatusCode)
		}
	})
	t.Run("idle connection closed", func(t *testing.T) {
		c, br := rawConn(t, tg.addr(3000))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("first request: %d", resp.StatusCode)
		}
		start := time.Now()
		expectClosedByGateway(t, br, "an idle connection")
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("closed after %v; want about 200ms", d)
		}
	})
}

func TestMaxConnectionDuration(t *testing.T) {
	ch := make(chan seen, 4)
	up := recordingUpstream(t, ch)
	tg := startGateway(t, "frontendPolicies:\n  http:\n    maxConnectionDuration: 1ns\n"+oneRoute(up), nil)
	c, br := rawConn(t, tg.addr(3000))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, _ := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("status %d, close %v: a connection past maxConnectionDuration must be closed after its response", resp.StatusCode, resp.Close)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection stayed open")
	}
}

// TestMaxConnectionDurationKeepsYoungConnections: a connection younger than
// maxConnectionDuration stays open between requests, on both transports.
// (fasthttp's RequestCtx.ConnTime is zero after the first wait between
// requests, which had every response close its connection.)
func TestMaxConnectionDurationKeepsYoungConnections(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			ch := make(chan seen, 4)
			up := recordingUpstream(t, ch)
			tg := startGatewayWith(t, "frontendPolicies:\n  http:\n    maxConnectionDuration: 1h\n"+oneRoute(up), nil, tr)
			c, br := rawConn(t, tg.addr(3000))
			for i := 0; i < 3; i++ {
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
				resp, _ := readResponse(t, br, "GET")
				if resp.StatusCode != 200 || resp.Close {
					t.Fatalf("request %d: status %d, close %v: a young connection must be kept", i, resp.StatusCode, resp.Close)
				}
			}
		})
	}
}

// TestSilentConnectionClosedAfterIdleTimeout: a connection that never sends
// a byte is idle from the start and is closed after http1IdleTimeout, on
// both transports (netpoll hands the server a connection only once bytes
// arrive, so its acceptor watches silent ones).
func TestSilentConnectionClosedAfterIdleTimeout(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			ch := make(chan seen, 4)
			up := recordingUpstream(t, ch)
			tg := startGatewayWith(t, "frontendPolicies:\n  http:\n    http1IdleTimeout: 200ms\n"+oneRoute(up), nil, tr)
			_, br := rawConn(t, tg.addr(3000))
			expectClosedByGateway(t, br, "a silent connection")
		})
	}
}

// TestMaxConnectionDurationClosesIdleConnections: a connection that reaches
// maxConnectionDuration while it waits for its next request is closed then,
// not when a next request comes or http1IdleTimeout passes.
func TestMaxConnectionDurationClosesIdleConnections(t *testing.T) {
	ch := make(chan seen, 4)
	up := recordingUpstream(t, ch)
	tg := startGateway(t, "frontendPolicies:\n  http:\n    maxConnectionDuration: 300ms\n"+oneRoute(up), nil)
	c, br := rawConn(t, tg.addr(3000))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	expectClosedByGateway(t, br, "a connection past maxConnectionDuration")
}

// expectClosedByGateway reads from a connection the gateway should close
// before the client's own deadline (rawConn's) passes.
func expectClosedByGateway(t *testing.T, br *bufio.Reader, what string) {
	t.Helper()
	_, err := br.ReadByte()
	if err == nil {
		t.Fatalf("%s got data instead of being closed", what)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("%s was not closed by the gateway: %v", what, err)
	}
}
