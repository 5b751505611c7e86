package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// routesConfig is one bind on port 3000 with the given routes (YAML list
// items indented for `routes:`).
func routesConfig(routes string) string {
	return "binds:\n- port: 3000\n  listeners:\n  - routes:\n" + routes
}

// heldUpstream never answers until the test ends: timeouts fire without the
// test sleeping.
func heldUpstream(t *testing.T) string {
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

// rawAnswerUpstream answers every request with raw bytes, then holds the
// connection until the test ends (hold) or closes it.
func rawAnswerUpstream(answer string, hold bool) func(t *testing.T) string {
	return func(t *testing.T) string {
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		return rawUpstream(t, func(c net.Conn) {
			defer c.Close()
			if _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, answer)
			if hold {
				<-release
			}
		})
	}
}

// TestErrorsUpstreamFailures: each way a route or upstream can fail gets its
// own status and a short plain-text body.
func TestErrorsUpstreamFailures(t *testing.T) {
	plain := "    - backends: [{host: '${UP}'}]\n"
	timed := "    - policies: {timeout: {requestTimeout: 200ms}}\n      backends: [{host: '${UP}'}]\n"
	tests := []struct {
		desc     string
		routes   string
		upstream func(t *testing.T) string
		path     string
		want     int
		wantBody string
		minTime  time.Duration // the failure must not come sooner (a timeout)
	}{
		{desc: "no route", routes: "    - matches: [{path: {exact: /only}}]\n      backends: [{host: '${UP}'}]\n", upstream: closedAddr, path: "/other", want: 404, wantBody: "route not found"},
		{desc: "backend refuses connections", routes: plain, upstream: closedAddr, want: 503, wantBody: "upstream unavailable"},
		{desc: "upstream answers garbage", routes: plain, upstream: rawAnswerUpstream("THIS IS NOT HTTP\r\n\r\n", false), want: 502, wantBody: "bad upstream response"},
		{desc: "upstream closes without answering", routes: plain, upstream: rawAnswerUpstream("", false), want: 502, wantBody: "bad upstream response"},
		{desc: "upstream closes inside the status line", routes: plain, upstream: rawAnswerUpstream("HTTP/1.1 20", false), want: 502, wantBody: "bad upstream response"},
		{desc: "upstream closes inside a small body", routes: plain, upstream: rawAnswerUpstream("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", false), want: 502, wantBody: "bad upstream response"},
		{desc: "route requestTimeout, no answer", routes: timed, upstream: heldUpstream, want: 504, wantBody: "upstream request timeout", minTime: 200 * time.Millisecond},
		{desc: "route requestTimeout, head without its small body", routes: timed, upstream: rawAnswerUpstream("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", true), want: 504, wantBody: "upstream request timeout", minTime: 200 * time.Millisecond},
		{desc: "route backendRequestTimeout", routes: "    - policies: {timeout: {backendRequestTimeout: 200ms}}\n      backends: [{host: '${UP}'}]\n", upstream: heldUpstream, want: 504, wantBody: "upstream request timeout", minTime: 200 * time.Millisecond},
		{desc: "backend http.requestTimeout", routes: "    - backends: [{host: '${UP}', policies: {http: {requestTimeout: 200ms}}}]\n", upstream: heldUpstream, want: 504, wantBody: "upstream request timeout", minTime: 200 * time.Millisecond},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					up := tc.upstream(t)
					tg := startGatewayWith(t, routesConfig(tc.routes), map[string]string{"UP": up}, tr)
					start := time.Now()
					resp, body := get(t, tg.url(3000)+tc.path)
					took := time.Since(start)
					if resp.StatusCode != tc.want || body != tc.wantBody+"\n" {
						t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.want, tc.wantBody)
					}
					if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
						t.Errorf("Content-Type %q", ct)
					}
					if took < tc.minTime || took > 5*time.Second {
						t.Errorf("answered after %v, want between %v and 5s", took, tc.minTime)
					}
				})
			}
		})
	}
}

// TestErrorsTruncatedStreamedResponse: when the upstream dies inside a
// streamed body whose head already went out, the client must see a broken
// message, never one that looks complete.
func TestErrorsTruncatedStreamedResponse(t *testing.T) {
	part := strings.Repeat("p", 100<<10)
	tests := []struct {
		desc   string
		answer string
	}{
		{desc: "content-length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n" + part},
		{desc: "chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n19000\r\n" + part + "\r\n"},
	}
	for _, tr := range e2eTransports {
		for _, tc := range tests {
			t.Run(string(tr)+"/"+tc.desc, func(t *testing.T) {
				up := rawAnswerUpstream(tc.answer, false)(t)
				tg := startGatewayWith(t, oneRoute(up), nil, tr)
				resp, err := testClient.Get(tg.url(3000) + "/")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err == nil {
					t.Fatalf("the client got a complete-looking %d-byte body from an upstream that died after %d bytes", len(b), len(part))
				}
			})
		}
	}
}

// TestErrorsTruncatedCloseDelimitedResponse: an HTTP/1.0 client gets a body
// of unknown length close-delimited, where an orderly close means "complete".
// A body cut short (the upstream died, or the route's requestTimeout fired
// inside it) must end with a reset instead, so the client sees an error.
func TestErrorsTruncatedCloseDelimitedResponse(t *testing.T) {
	const part = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
	for _, tr := range e2eTransports {
		for _, tc := range []struct {
			desc, routes string
			upstream     func(t *testing.T) string
		}{
			{desc: "upstream dies", routes: "    - backends: [{host: '${UP}'}]\n", upstream: rawAnswerUpstream(part, false)},
			{desc: "requestTimeout", routes: "    - policies: {timeout: {requestTimeout: 300ms}}\n      backends: [{host: '${UP}'}]\n", upstream: rawAnswerUpstream(part, true)},
			{desc: "complete", routes: "    - backends: [{host: '${UP}'}]\n", upstream: rawAnswerUpstream(part+"0\r\n\r\n", true)},
		} {
			t.Run(string(tr)+"/"+tc.desc, func(t *testing.T) {
				tg := startGatewayWith(t, routesConfig(tc.routes), map[string]string{"UP": tc.upstream(t)}, tr)
				c, br := dialRaw(t, tg.addr(3000))
				if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
					t.Fatal(err)
				}
				m, err := readHead(br)
				if err != nil || m.status() != 200 || m.fields.has("Content-Length") || m.fields.has("Transfer-Encoding") {
					t.Fatalf("head %q %v, %v: want a close-delimited 200", m.line, m.fields, err)
				}
				body, err := io.ReadAll(br)
				if tc.desc == "complete" {
					if err != nil || string(body) != "hello" {
						t.Fatalf("body %q, %v: want %q and an orderly close", body, err, "hello")
					}
					return
				}
				if !errors.Is(err, syscall.ECONNRESET) {
					t.Fatalf("cut body %q ended with %v, want a connection reset", body, err)
				}
			})
		}
	}
}

// TestErrorsMalformedRequests: requests the gateway cannot take get a 4xx or
// 5xx of their own and the connection closes; the limits on header count
// and size are exact.
func TestErrorsMalformedRequests(t *testing.T) {
	up, _ := rawHTTPUpstream(t, okAnswer)
	fields := func(n, size int) string { // n fields besides Host, of size bytes each
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString("X-F" + strconv.Itoa(i) + ": " + strings.Repeat("v", size) + "\r\n")
		}
		return b.String()
	}
	tests := []struct {
		desc     string
		config   string // frontendPolicies YAML; "" is the default
		send     string
		want     int
		wantBody string
	}{
		{desc: "binary garbage", send: "\x00\x01\x02\x03 garbage\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "request line without version", send: "GET /\r\nHost: a\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "bad Content-Length", send: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "conflicting Content-Lengths", send: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", want: 400, wantBody: "malformed request"},
		{desc: "unsupported Transfer-Encoding", send: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "header line without colon", send: "GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "obsolete line folding", send: "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "HTTP/1.1 without Host", send: "GET / HTTP/1.1\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "Host with two colons", send: "GET / HTTP/1.1\r\nHost: a:b:80\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "Host with a bad port", send: "GET / HTTP/1.1\r\nHost: a:8o\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "Host with a slash", send: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "Host with an unclosed IPv6 literal", send: "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "absolute form with two colons", send: "GET http://a:b:80/ HTTP/1.1\r\nHost: a\r\n\r\n", want: 400, wantBody: "malformed request"},
		{desc: "Host an IPv6 literal with a port", send: "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", want: 200, wantBody: "ok"},
		{desc: "HTTP/2.0 request line", send: "GET / HTTP/2.0\r\nHost: a\r\n\r\n", want: 505, wantBody: "HTTP version not supported"},
		{desc: "HTTP/9.9 request line", send: "GET / HTTP/9.9\r\nHost: a\r\n\r\n", want: 505, wantBody: "HTTP version not supported"},
		{desc: "http1MaxHeaders 10, 10 fields", config: "http1MaxHeaders: 10", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(9, 1) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "http1MaxHeaders 10, 11 fields", config: "http1MaxHeaders: 10", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(10, 1) + "\r\n", want: 431, wantBody: "too many request headers"},
		{desc: "http1MaxHeaders 10, 11 fields with a body", config: "http1MaxHeaders: 10", send: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n" + fields(9, 1) + "\r\nab", want: 431, wantBody: "too many request headers"},
		// Counted as sent: not the Content-Length: 0 fasthttp makes up for
		// a method that may have a body, nor HTTP/1.0's Connection: close;
		// each Cookie line is one.
		{desc: "http1MaxHeaders 10, 10 fields, bodyless POST", config: "http1MaxHeaders: 10", send: "POST / HTTP/1.1\r\nHost: a\r\n" + fields(9, 1) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "http1MaxHeaders 10, 11 fields, bodyless POST", config: "http1MaxHeaders: 10", send: "POST / HTTP/1.1\r\nHost: a\r\n" + fields(10, 1) + "\r\n", want: 431, wantBody: "too many request headers"},
		{desc: "http1MaxHeaders 10, 10 fields, OPTIONS", config: "http1MaxHeaders: 10", send: "OPTIONS / HTTP/1.1\r\nHost: a\r\n" + fields(9, 1) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "http1MaxHeaders 10, 10 fields, CONNECT", config: "http1MaxHeaders: 10", send: "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n" + fields(9, 1) + "\r\n", want: 501, wantBody: "CONNECT is not served on this listener"},
		{desc: "http1MaxHeaders 10, 11 fields, CONNECT", config: "http1MaxHeaders: 10", send: "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n" + fields(10, 1) + "\r\n", want: 431, wantBody: "too many request headers"},
		{desc: "http1MaxHeaders 10, 10 fields, HTTP/1.0", config: "http1MaxHeaders: 10", send: "GET / HTTP/1.0\r\nHost: a\r\n" + fields(9, 1) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "http1MaxHeaders 10, 11 fields of which 3 Cookie", config: "http1MaxHeaders: 10", send: "GET / HTTP/1.1\r\nHost: a\r\nCookie: a=1\r\nCookie: b=2\r\nCookie: c=3\r\n" + fields(7, 1) + "\r\n", want: 431, wantBody: "too many request headers"},
		{desc: "default limit, 100 fields", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(99, 1) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "default limit, 101 fields", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(100, 1) + "\r\n", want: 431, wantBody: "too many request headers"},
		{desc: "a 7000-byte field", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(1, 7000) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "a 9000-byte field", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(1, 9000) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "a 32,000-byte field", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(1, 32000) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "a 33 KiB field", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(1, 33<<10) + "\r\n", want: 431, wantBody: "request headers too large"},
		{desc: "a 64 KiB field", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(1, 64<<10) + "\r\n", want: 431, wantBody: "request headers too large"},
		{desc: "30 fields of 1000 bytes (a JWT and cookies)", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(30, 1000) + "\r\n", want: 200, wantBody: "ok"},
		{desc: "34 fields of 1000 bytes", send: "GET / HTTP/1.1\r\nHost: a\r\n" + fields(34, 1000) + "\r\n", want: 431, wantBody: "request headers too large"},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			gateways := map[string]*testGateway{}
			for _, tc := range tests {
				if gateways[tc.config] == nil {
					cfg := oneRoute(up)
					if tc.config != "" {
						cfg = "frontendPolicies:\n  http:\n    " + tc.config + "\n" + cfg
					}
					gateways[tc.config] = startGatewayWith(t, cfg, nil, tr)
				}
			}
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					tg := gateways[tc.config]
					c, br := dialRaw(t, tg.addr(3000))
					resp := roundTripRaw(t, c, br, "GET", tc.send)
					if resp.status() != tc.want || strings.TrimSuffix(string(resp.body), "\n") != tc.wantBody {
						t.Fatalf("got %q %q, want %d %q", resp.line, resp.body, tc.want, tc.wantBody)
					}
					if tc.want < 400 {
						return
					}
					if resp.fields.get("Connection") != "close" {
						t.Errorf("error response without Connection: close (%q)", resp.fields)
					}
					if _, err := br.ReadByte(); !isClosed(err) {
						t.Errorf("connection still open after the error response: %v", err)
					}
				})
			}
		})
	}
}

// TestErrorsIdleTimeout: a keep-alive connection idle for http1IdleTimeout is
// closed by the gateway.
func TestErrorsIdleTimeout(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, _ := rawHTTPUpstream(t, okAnswer)
			tg := startGatewayWith(t, "frontendPolicies:\n  http:\n    http1IdleTimeout: 200ms\n"+oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			resp := roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp.status() != 200 || resp.fields.has("Connection") {
				t.Fatalf("first request: %q %q", resp.line, resp.fields)
			}
			start := time.Now()
			_, err := br.ReadByte()
			took := time.Since(start)
			if !isClosed(err) {
				t.Fatalf("idle connection not closed by the gateway within the client's bound: %v", err)
			}
			if took < 150*time.Millisecond || took > 5*time.Second {
				t.Fatalf("idle connection closed after %v, want about 200ms", took)
			}
		})
	}
}

// TestErrorsRequestHeadTimeout: a client must send a request head within
// requestHeadTimeout: of connecting, for the first request, and of the head's
// first byte, for a later one. A head begun and not finished gets 408 and the
// connection closes; a connection that sends nothing is closed without an
// answer; a head sent in pieces within the time is served.
func TestErrorsRequestHeadTimeout(t *testing.T) {
	old := headTimeout.Swap(int64(300 * time.Millisecond))
	t.Cleanup(func() { headTimeout.Store(old) })
	up, _ := rawHTTPUpstream(t, okAnswer)
	const get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	type headCase struct {
		desc   string
		before string // whole requests sent and answered first
		send   string // then this, and nothing more
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			cases := []headCase{
				{desc: "first request, part of its head", send: "GET / HTTP/1.1\r\nHost: a\r\n"},
				{desc: "second request, part of its head", before: get, send: "GET / HTTP/1.1\r\nHo"},
			}
			if tr == TransportStd {
				// netpoll hands a connection over at its first byte.
				cases = append(cases, headCase{desc: "no byte at all"})
			}
			for _, tc := range cases {
				t.Run(tc.desc, func(t *testing.T) {
					c, br := dialAfter(t, tg.addr(3000), tc.before)
					start := time.Now()
					if tc.send != "" {
						resp := roundTripRaw(t, c, br, "GET", tc.send)
						if resp.status() != 408 || resp.fields.get("Connection") != "close" {
							t.Fatalf("unfinished head answered %q %q, want 408 and Connection: close", resp.line, resp.fields)
						}
					}
					b, err := br.ReadByte()
					took := time.Since(start)
					if !isClosed(err) {
						t.Fatalf("connection not closed within the client's bound: byte %q, %v", b, err)
					}
					if took < 250*time.Millisecond || took > 5*time.Second {
						t.Fatalf("closed after %v, want about 300ms", took)
					}
				})
			}
			c, br := dialRaw(t, tg.addr(3000))
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\n"); err != nil {
				t.Fatal(err)
			}
			if resp := roundTripRaw(t, c, br, "GET", "Host: a\r\n\r\n"); resp.status() != 200 {
				t.Fatalf("head in two pieces: %q", resp.line)
			}
		})
	}
}

// misbehavingUpstream serves /echo (the body's length), /slow (signals
// firstMiB after reading one MiB of the body, then reports how reading the
// rest ended) and /big (8 MiB, ignoring write errors).
type misbehavingUpstream struct {
	addr     string
	firstMiB chan struct{}
	rest     chan error
}

func newMisbehavingUpstream(t *testing.T) *misbehavingUpstream {
	m := &misbehavingUpstream{firstMiB: make(chan struct{}, 8), rest: make(chan error, 8)}
	big := payload(8<<20, 31)
	m.addr = upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/slow":
			if _, err := io.CopyN(io.Discard, r.Body, 1<<20); err != nil {
				m.rest <- err
				return
			}
			m.firstMiB <- struct{}{}
			_, err := io.Copy(io.Discard, r.Body)
			m.rest <- err
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			w.Write(big)
		default:
			n, _ := io.Copy(io.Discard, r.Body)
			io.WriteString(w, "echo "+strconv.FormatInt(n, 10))
		}
	}))
	return m
}

// TestErrorsClientMisbehaves: clients that send garbage, stop halfway or
// leave never take the gateway down; it goes on serving, through the same
// upstream pool, and an upstream receiving a body the client abandoned sees
// it end instead of waiting for it.
func TestErrorsClientMisbehaves(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up := newMisbehavingUpstream(t)
			tg := startGatewayWith(t, oneRoute(up.addr), nil, tr)
			abandonBody := func(t *testing.T, head string) {
				c, _ := dialRaw(t, tg.addr(3000))
				io.WriteString(c, head)
				c.Write(payload(1<<20+1000, 1))
				select {
				case <-up.firstMiB:
				case err := <-up.rest:
					t.Fatalf("upstream failed before the first MiB: %v", err)
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream never received the first MiB")
				}
				c.Close()
				select {
				case err := <-up.rest:
					if err == nil {
						t.Fatal("the upstream read the abandoned body as complete")
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream was left waiting for the rest of an abandoned body")
				}
			}
			tests := []struct {
				desc string
				act  func(t *testing.T)
			}{
				{desc: "garbage, then gone", act: func(t *testing.T) {
					c, _ := dialRaw(t, tg.addr(3000))
					c.Write([]byte("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 tls hello?"))
					c.Close()
				}},
				{desc: "half a request head, then gone", act: func(t *testing.T) {
					c, _ := dialRaw(t, tg.addr(3000))
					io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Le")
					c.Close()
				}},
				{desc: "gone inside a buffered body", act: func(t *testing.T) {
					c, _ := dialRaw(t, tg.addr(3000))
					io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\npartial")
					c.Close()
				}},
				{desc: "gone inside a streamed body", act: func(t *testing.T) {
					abandonBody(t, "POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 8388608\r\n\r\n")
				}},
				{desc: "gone inside a chunked body", act: func(t *testing.T) {
					// One chunk announcing more than is sent.
					abandonBody(t, "POST /slow HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n800000\r\n")
				}},
				{desc: "gone while the response streams", act: func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
					if _, err := readHead(br); err != nil {
						t.Fatal(err)
					}
					if _, err := io.ReadFull(br, make([]byte, 64<<10)); err != nil {
						t.Fatal(err)
					}
					c.Close()
				}},
				{desc: "request sent, gone before the answer", act: func(t *testing.T) {
					c, _ := dialRaw(t, tg.addr(3000))
					io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
					c.Close()
				}},
			}
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					tc.act(t)
					// The gateway still serves, bodies and all, through the
					// same upstream.
					body := payload(3000, 2)
					req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/echo", strings.NewReader(string(body)))
					resp, got := do(t, req)
					if resp.StatusCode != 200 || got != "echo 3000" {
						t.Fatalf("after the misbehaving client: %d %q", resp.StatusCode, got)
					}
					resp, got = get(t, tg.url(3000)+"/big")
					if resp.StatusCode != 200 || len(got) != 8<<20 {
						t.Fatalf("after the misbehaving client: /big %d, %d bytes", resp.StatusCode, len(got))
					}
				})
			}
		})
	}
}

// TestErrorsManyBadClientsAtOnce: concurrent garbage and abandoned requests
// leave the gateway serving.
func TestErrorsManyBadClientsAtOnce(t *testing.T) {
	up := newMisbehavingUpstream(t)
	tg := startGateway(t, oneRoute(up.addr), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sends := []string{
		"\x00\xff garbage\r\n\r\n",
		"GET /big HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab",
		"GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("x", 20000) + "\r\n\r\n",
	}
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		go func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", tg.addr(3000))
			if err != nil {
				errs <- err
				return
			}
			io.WriteString(c, sends[i%len(sends)])
			c.Close()
			errs <- nil
		}()
	}
	for i := 0; i < 200; i++ {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("dial: %v", err)
		}
	}
	resp, got := get(t, tg.url(3000)+"/echo")
	if resp.StatusCode != 200 || got != "echo 0" {
		t.Fatalf("after 200 bad clients: %d %q", resp.StatusCode, got)
	}
}

// TestErrorsBareLFHead: a request head whose blank line is in bare-LF form
// gets 400 at once and the connection closes. fasthttp takes such a head
// only when CRLF CRLF follows, so without the head watch a lone one waited
// for the head's deadline (60 s) and got 408. A bare-LF head with a request
// pipelined after it is still served, as before.
func TestErrorsBareLFHead(t *testing.T) {
	up, _ := rawHTTPUpstream(t, okAnswer)
	const get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			for _, tc := range []struct {
				desc   string
				before string   // a whole request sent and answered first
				pieces []string // then these, one write each
			}{
				{desc: "LF LF", pieces: []string{"GET / HTTP/1.1\nHost: a\n\n"}},
				{desc: "CRLF LF", pieces: []string{"GET / HTTP/1.1\r\nHost: a\r\n\n"}},
				{desc: "LF CRLF", pieces: []string{"GET / HTTP/1.1\r\nHost: a\n\r\n"}},
				{desc: "POST with its body", pieces: []string{"POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\nab"}},
				{desc: "the blank line in a write of its own", pieces: []string{"GET / HTTP/1.1\r\nHost: a\n", "\n"}},
				{desc: "second request", before: get, pieces: []string{"GET / HTTP/1.1\nHost: a\n\n"}},
			} {
				t.Run(tc.desc, func(t *testing.T) {
					c, br := dialAfter(t, tg.addr(3000), tc.before)
					start := time.Now()
					for _, p := range tc.pieces[:len(tc.pieces)-1] {
						if _, err := io.WriteString(c, p); err != nil {
							t.Fatal(err)
						}
					}
					resp := roundTripRaw(t, c, br, "GET", tc.pieces[len(tc.pieces)-1])
					if resp.status() != 400 || resp.fields.get("Connection") != "close" ||
						string(resp.body) != "malformed request: the head must end with CRLF CRLF\n" {
						t.Fatalf("answered %q %q %q, want 400 naming the line ends, and Connection: close", resp.line, resp.fields, resp.body)
					}
					if took := time.Since(start); took > 5*time.Second {
						t.Fatalf("answered after %v, want at once", took)
					}
					if b, err := br.ReadByte(); !isClosed(err) {
						t.Fatalf("connection open after the 400: byte %q, %v", b, err)
					}
				})
			}
			t.Run("followed by a pipelined request", func(t *testing.T) {
				c, br := dialRaw(t, tg.addr(3000))
				if resp := roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\nHost: a\n\n"+get); resp.status() != 200 {
					t.Fatalf("bare-LF head: %q", resp.line)
				}
				if resp, err := readReply(br, "GET"); err != nil || resp.status() != 200 {
					t.Fatalf("request after it: %q %v", resp.line, err)
				}
			})
		})
	}
}

// dialAfter opens a raw client connection to addr and, if before is set,
// makes that request on it first, which must get 200.
func dialAfter(t *testing.T, addr, before string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, br := dialRaw(t, addr)
	if before != "" {
		if resp := roundTripRaw(t, c, br, "GET", before); resp.status() != 200 {
			t.Fatalf("request before: %q", resp.line)
		}
	}
	return c, br
}

// TestUpstreamErrorsLogNoUpstreamBytes: an upstream's malformed or
// oversized response head is a 502 whose access log line says what was
// wrong, without the bytes fasthttp's errors quote from it: a cookie or a
// token there used to reach the log.
func TestUpstreamErrorsLogNoUpstreamBytes(t *testing.T) {
	const secret = "s3cr3t-session-value"
	big := "HTTP/1.1 200 OK\r\nSet-Cookie: session=" + secret + "\r\n" + strings.Repeat("X-Filler: "+strings.Repeat("f", 100)+"\r\n", 700) + "Content-Length: 2\r\n\r\nok"
	for _, tc := range []struct {
		desc, answer, want string
	}{
		{"a field value with a control byte", "HTTP/1.1 200 OK\r\nSet-Cookie: session=" + secret + "\x01\r\nContent-Length: 2\r\n\r\nok", "invalid header"},
		{"a head past the 64 KiB limit", big, "larger than 64 KiB"},
		{"a bad status line", "HTTP/1.1 2x0 " + secret + "\r\n\r\n", "status code"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tg := startGateway(t, oneRoute(rawAnswerUpstream(tc.answer, false)(t)), nil)
			resp, err := http.Get(tg.url(3000) + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502", resp.StatusCode)
			}
			lines := tg.accessLogs().FilterMessage("request").All()
			if len(lines) != 1 {
				t.Fatalf("%d access lines", len(lines))
			}
			got, _ := lines[0].ContextMap()["upstream_error"].(string)
			if !strings.Contains(got, tc.want) || strings.Contains(got, secret) {
				t.Fatalf("upstream_error %q: want it to say %q, without the upstream's bytes", got, tc.want)
			}
		})
	}
}
