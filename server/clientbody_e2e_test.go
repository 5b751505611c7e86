package server

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// upstreamOutcome is what a raw upstream made of one connection: the request
// it read whole, or the error that ended reading it.
type upstreamOutcome struct {
	req message
	err error
}

// outcomeUpstream reads one request per connection, answers 200 when it read
// one whole, and reports what it read.
func outcomeUpstream(t *testing.T) (string, <-chan upstreamOutcome) {
	t.Helper()
	out := make(chan upstreamOutcome, 16)
	addr := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(15 * time.Second))
		m, err := readRequest(bufio.NewReader(c))
		out <- upstreamOutcome{req: m, err: err}
		if err == nil {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		}
	})
	return addr, out
}

func nextOutcome(t *testing.T, out <-chan upstreamOutcome) upstreamOutcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream connection neither completed a request nor ended")
		return upstreamOutcome{}
	}
}

// TestClientBodyCutShortIsNeverCompleted: a chunked request body the client
// stops sending before its last chunk must not reach the upstream as a
// complete request; the upstream connection is closed instead. A body the
// client breaks (a bad chunk) gets the client a 400, not a 502 blamed on
// the backend. A complete chunked body followed by the client's half-close
// goes through whole.
func TestClientBodyCutShortIsNeverCompleted(t *testing.T) {
	head := "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	cases := []struct {
		name string
		sent string
		// close: the client closes (true) or half-closes (false) after sent.
		close      bool
		wantStatus int    // 0: no answer expected (the client closed)
		wantBody   string // "": the upstream must not get a whole request
	}{
		{name: "closed after a chunk", sent: head + "5\r\nhello\r\n", close: true},
		{name: "half-closed after a chunk", sent: head + "5\r\nhello\r\n", wantStatus: 400},
		{name: "half-closed inside a chunk", sent: head + "5\r\nhello\r\n3\r\nabc", wantStatus: 400},
		{name: "half-closed inside a chunk header", sent: head + "5\r\nhello\r\n3", wantStatus: 400},
		{name: "bad chunk size", sent: head + "zz\r\nhello\r\n0\r\n\r\n", wantStatus: 400},
		{name: "bad chunk end", sent: head + "5\r\nhelloXX0\r\n\r\n", wantStatus: 400},
		{name: "complete, then half-closed", sent: head + "5\r\nhello\r\n0\r\n\r\n", wantStatus: 200, wantBody: "hello"},
		{name: "content-length body half-closed short", sent: "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("a", 50000), wantStatus: 400},
		{name: "complete with trailer, then half-closed", sent: head + "5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", wantStatus: 200, wantBody: "hello"},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			addr, out := outcomeUpstream(t)
			tg := startGatewayWith(t, oneRoute(addr), nil, tr)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					if _, err := io.WriteString(c, tc.sent); err != nil {
						t.Fatal(err)
					}
					if tc.close {
						c.Close()
					} else if err := c.(*net.TCPConn).CloseWrite(); err != nil {
						t.Fatal(err)
					}
					o := nextOutcome(t, out)
					if tc.wantBody == "" && o.err == nil {
						t.Fatalf("the upstream received a whole request with body %q from a body the client never finished", o.req.body)
					}
					if tc.wantBody != "" && (o.err != nil || string(o.req.body) != tc.wantBody) {
						t.Fatalf("the upstream got body %q (error %v), want %q", o.req.body, o.err, tc.wantBody)
					}
					if tc.wantStatus == 0 {
						return
					}
					m, err := readReply(br, "POST")
					if err != nil {
						t.Fatalf("reading the answer: %v", err)
					}
					if m.status() != tc.wantStatus {
						t.Fatalf("status %d (%q), want %d", m.status(), m.body, tc.wantStatus)
					}
				})
			}
		})
	}
}

// TestBufferedBodyCutShortIsNeverSent: a body read whole for a retry (or a
// mirror) that the client does not finish is answered 400 and sent
// nowhere. (fasthttp's Request.Body would have replaced it with its error
// text and sent that.) A chunked one streams, recorded (bufferBody): the
// backend may get its beginning, never a whole request (its connection is
// closed before the body's end), and the mirror nothing.
func TestBufferedBodyCutShortIsNeverSent(t *testing.T) {
	addr, out := outcomeUpstream(t)
	mirrorAddr, mirrorOut := outcomeUpstream(t)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /retry}}]
      policies: {retry: {attempts: 2, codes: [503]}}
      backends: [{host: ${UP}}]
    - matches: [{path: {pathPrefix: /mirror}}]
      policies: {requestMirror: {backend: {host: ${MIRROR}}, percentage: 1}}
      backends: [{host: ${UP}}]
`, map[string]string{"UP": addr, "MIRROR": mirrorAddr})
	framings := []struct{ name, head, body string }{
		// More than fasthttp reads ahead, so the body streams.
		{"content-length", "Content-Length: 20000", strings.Repeat("a", 10000)},
		{"chunked", "Transfer-Encoding: chunked", "5\r\nhello\r\n"},
	}
	for _, path := range []string{"/retry", "/mirror"} {
		for _, f := range framings {
			t.Run(path+"/"+f.name, func(t *testing.T) {
				c, br := dialRaw(t, tg.addr(3000))
				sent := "PUT " + path + " HTTP/1.1\r\nHost: x\r\n" + f.head + "\r\n\r\n" + f.body
				sendAndHalfClose(t, c, sent)
				m, err := readReply(br, "PUT")
				if err != nil {
					t.Fatalf("reading the answer: %v", err)
				}
				if m.status() != 400 {
					t.Fatalf("status %d (%q), want 400", m.status(), m.body)
				}
				// The gateway answered without sending anything upstream: a
				// request that reached either upstream would be there by now,
				// since the gateway only answers after an exchange ends.
				select {
				case o := <-out:
					if f.name != "chunked" || o.err == nil {
						t.Fatalf("the backend was sent a request (body %d bytes, error %v)", len(o.req.body), o.err)
					}
				case o := <-mirrorOut:
					t.Fatalf("the mirror was sent a request (body %d bytes, error %v)", len(o.req.body), o.err)
				default:
				}
			})
		}
	}
}

// TestHalfClosedClientGetsItsAnswer: a client that half-closes its
// connection after the request still gets the answer (RFC 9112 9.6), on
// both transports (netpoll counts a half-closed connection as closed).
func TestHalfClosedClientGetsItsAnswer(t *testing.T) {
	addr, _ := rawHTTPUpstream(t, okAnswer)
	cases := []struct {
		name, sent string
		want       int
	}{
		{"GET", "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", 200},
		{"HTTP/1.0", "GET /x HTTP/1.0\r\n\r\n", 200},
		{"malformed", "GET /x HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n", 400},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(addr), nil, tr)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					sendAndHalfClose(t, c, tc.sent)
					m, err := readReply(br, "GET")
					if err != nil {
						t.Fatalf("reading the answer: %v", err)
					}
					if m.status() != tc.want {
						t.Fatalf("status %d (%q), want %d", m.status(), m.body, tc.want)
					}
				})
			}
		})
	}
}

// TestHalfCloseDuringALargeAnswer: a client that half-closes while a
// large answer is on its way (it read the first bytes, then closed its
// side) still gets all of it, on both transports. netpoll gives up on a
// write under way when the FIN arrives, after sending part of it; the
// rest goes to the descriptor (sock.PromptConn).
func TestHalfCloseDuringALargeAnswer(t *testing.T) {
	const size = 16 << 20
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = w.Write(body)
	}))
	t.Cleanup(up.Close)
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, oneRoute(strings.TrimPrefix(up.URL, "http://")), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			if _, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The answer is under way: far more of it than the sockets
			// hold is still to be written.
			first := make([]byte, 64<<10)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatal(err)
			}
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			rest, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(first)+len(rest), err)
			}
			if got := append(first, rest...); !bytes.Equal(got, body) {
				t.Fatalf("got %d bytes (intact: %v), want the %d sent", len(got), bytes.Equal(got, body[:min(len(got), size)]), size)
			}
		})
	}
}

// sendAndHalfClose writes s and closes the connection's sending side.
func sendAndHalfClose(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
}

// TestStalledBodyAnswered408: a client that stops sending a body being
// forwarded is answered 408 once bodyIdleTimeout passes without a byte
// (not when the hour-long whole-body bound does), and the upstream never
// gets a complete request.
func TestStalledBodyAnswered408(t *testing.T) {
	old := bodyIdleTimeout.Swap(int64(300 * time.Millisecond))
	t.Cleanup(func() { bodyIdleTimeout.Store(old) })
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			addr, out := outcomeUpstream(t)
			tg := startGatewayWith(t, oneRoute(addr), nil, tr)
			for _, sent := range []string{
				"PUT /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("a", 20000),
				"PUT /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
			} {
				c, br := dialRaw(t, tg.addr(3000))
				if _, err := io.WriteString(c, sent); err != nil {
					t.Fatal(err)
				}
				m, err := readReply(br, "PUT")
				if err != nil {
					t.Fatalf("%.20q: reading the answer: %v", sent, err)
				}
				if m.status() != 408 {
					t.Fatalf("%.20q: status %d (%q), want 408", sent, m.status(), m.body)
				}
				if o := nextOutcome(t, out); o.err == nil {
					t.Fatalf("%.20q: the upstream received a whole request", sent)
				}
			}
		})
	}
}
