package server

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestUpstreamHeadMisbehaviourE2E: an upstream answering with a response
// head whose blank line is a bare LF, or with a 101 to a request that asked
// for no upgrade, and then keeping its connection open, gets the client a 502
// at once; the gateway waited for the upstream to close (or the tunnel's
// handshake timeout) before, or relayed the 101 and left the client's
// connection silent (item 15 of issue 17). The gateway serves the next
// request as usual.
func TestUpstreamHeadMisbehaviourE2E(t *testing.T) {
	// bound is far below the old waits (the upstream's close, the tunnel's
	// 30 s handshake timeout) and far above a prompt answer.
	const bound = 5 * time.Second
	const get = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	const upgrade = "GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n"
	tests := []struct {
		desc    string
		request string // raw
		answer  string // the upstream's bytes; it holds the connection open after them
		status  int
		body    string
	}{
		{desc: "control: CRLF head", request: get, answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok"},
		{desc: "control: bare LF lines, CRLF blank line", request: get, answer: "HTTP/1.1 200 OK\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok"},
		{desc: "control: blank lines inside the body", request: get, answer: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\na\n\nb\n\n", status: 200, body: "a\n\nb\n\n"},
		{desc: "control: 100 Continue then a CRLF head", request: get, answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", status: 200, body: "ok"},
		{desc: "bare LF head", request: get, answer: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", status: 502, body: "bad upstream response\n"},
		{desc: "bare LF head without a body", request: get, answer: "HTTP/1.1 204 No Content\n\n", status: 502, body: "bad upstream response\n"},
		{desc: "CRLF lines, bare LF blank line", request: get, answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\nok", status: 502, body: "bad upstream response\n"},
		{desc: "bare LF line, CRLF blank line", request: get, answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\n\r\nok", status: 502, body: "bad upstream response\n"},
		{desc: "bare LF head after 100 Continue", request: get, answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\nContent-Length: 2\n\nok", status: 502, body: "bad upstream response\n"},
		{desc: "unsolicited 101", request: get, answer: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", status: 502, body: "bad upstream response\n"},
		{desc: "unsolicited bare 101", request: get, answer: "HTTP/1.1 101 Switching Protocols\r\n\r\n", status: 502, body: "bad upstream response\n"},
		{desc: "upgrade answered with a bare LF 101", request: upgrade, answer: "HTTP/1.1 101 Switching Protocols\nConnection: Upgrade\nUpgrade: echo\n\n", status: 502, body: "bad upstream response\n"},
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.desc, func(t *testing.T) {
					bad := rawAnswerUpstream(tc.answer, true)(t)
					good := requestUpstream(t, func(c net.Conn, _ *bufio.Reader, m message) bool {
						answer, _ := okAnswer(m)
						_, err := io.WriteString(c, answer)
						return err == nil
					})
					tg := startGatewayWith(t, routesConfig(`
    - matches: [{path: {exact: /next}}]
      backends: [{host: '${GOOD}'}]
    - backends: [{host: '${BAD}'}]
`), map[string]string{"BAD": bad, "GOOD": good}, tr)
					c, br := dialRaw(t, tg.addr(3000))
					start := time.Now()
					if err := c.SetDeadline(start.Add(bound)); err != nil {
						t.Fatal(err)
					}
					resp := roundTripRaw(t, c, br, "GET", tc.request)
					if resp.status() != tc.status || string(resp.body) != tc.body {
						t.Fatalf("got %q %q, want %d %q", resp.line, resp.body, tc.status, tc.body)
					}
					if took := time.Since(start); took > bound {
						t.Fatalf("answered after %v", took)
					}
					// The gateway goes on serving, on this connection when
					// it kept it open and on a new one.
					if !resp.fields.has("Connection") || resp.fields.get("Connection") != "close" {
						if m := roundTripRaw(t, c, br, "GET", "GET /next HTTP/1.1\r\nHost: a\r\n\r\n"); m.status() != 200 || string(m.body) != "ok" {
							t.Fatalf("next request on the connection: %q %q", m.line, m.body)
						}
					}
					c2, br2 := dialRaw(t, tg.addr(3000))
					if m := roundTripRaw(t, c2, br2, "GET", "GET /next HTTP/1.1\r\nHost: a\r\n\r\n"); m.status() != 200 || string(m.body) != "ok" {
						t.Fatalf("next request: %q %q", m.line, m.body)
					}
				})
			}
		})
	}
}
