package server

import (
	"bufio"
	"io"
	"net"
	"net/http/httputil"
	"strings"
	"testing"
)

// TestResponseVersionAndFraming: the gateway speaks HTTP/1.1 to its clients
// whatever version the backend answered in, re-frames a close-delimited
// body for an HTTP/1.1 client (chunked, connection kept), and sends an
// HTTP/1.0 client no chunked framing (RFC 9112 6.1): a body of unknown
// length goes close-delimited.
func TestResponseVersionAndFraming(t *testing.T) {
	http10 := rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		if _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.0 200 OK\r\nX-Up: 1\r\n\r\nclose-delimited-body")
	})
	http10CL, _ := rawHTTPUpstream(t, func(message) (string, bool) {
		return "HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello", true
	})
	chunked, chunkedSeen := rawHTTPUpstream(t, func(m message) (string, bool) {
		if m.method() == "HEAD" {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false
		}
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 1\r\n\r\n", false
	})
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /old}}]
      backends: [{host: ${OLD}}]
    - matches: [{path: {pathPrefix: /oldcl}}]
      backends: [{host: ${OLDCL}}]
    - backends: [{host: ${CHUNKED}}]
`, map[string]string{"OLD": http10, "OLDCL": http10CL, "CHUNKED": chunked}, tr)

			t.Run("HTTP/1.0 backend, HTTP/1.1 client", func(t *testing.T) {
				c, br := dialRaw(t, tg.addr(3000))
				for _, path := range []string{"/old", "/oldcl", "/old"} {
					m := roundTripRaw(t, c, br, "GET", "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
					if !strings.HasPrefix(m.line, "HTTP/1.1 200") {
						t.Fatalf("%s: status line %q, want HTTP/1.1 200", path, m.line)
					}
					if m.fields.has("Connection") {
						t.Fatalf("%s: Connection %q: the client connection must stay open", path, m.fields.get("Connection"))
					}
					want := map[string]string{"/old": "close-delimited-body", "/oldcl": "hello"}[path]
					if string(m.body) != want {
						t.Fatalf("%s: body %q, want %q", path, m.body, want)
					}
				}
			})

			for _, req := range []string{
				"GET /new HTTP/1.0\r\n\r\n",
				"GET /new HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
			} {
				t.Run("HTTP/1.0 client "+strings.TrimSpace(strings.SplitN(req, "\r\n", 3)[1]), func(t *testing.T) {
					c, br := dialRaw(t, tg.addr(3000))
					if _, err := io.WriteString(c, req); err != nil {
						t.Fatal(err)
					}
					m, err := readHead(br)
					if err != nil {
						t.Fatal(err)
					}
					if m.status() != 200 || m.fields.has("Transfer-Encoding") || m.fields.has("Content-Length") || m.fields.has("Trailer") {
						t.Fatalf("head %q %v: want 200 without Transfer-Encoding, Content-Length or Trailer", m.line, m.fields)
					}
					body, err := io.ReadAll(br)
					if err != nil {
						t.Fatalf("reading the body to the close: %v", err)
					}
					if string(body) != "hello world" {
						t.Fatalf("body %q, want %q", body, "hello world")
					}
					// The upstream request is this hop's: HTTP/1.1.
					if got := nextSeen(t, chunkedSeen); !strings.HasSuffix(got.line, " HTTP/1.1") {
						t.Fatalf("upstream request line %q, want HTTP/1.1", got.line)
					}
				})
			}
			t.Run("HEAD from an HTTP/1.0 client", func(t *testing.T) {
				c, br := dialRaw(t, tg.addr(3000))
				m := roundTripRaw(t, c, br, "HEAD", "HEAD /new HTTP/1.0\r\n\r\n")
				nextSeen(t, chunkedSeen)
				if m.status() != 200 || m.fields.has("Transfer-Encoding") {
					t.Fatalf("head %q %v: want 200 without Transfer-Encoding", m.line, m.fields)
				}
			})
		})
	}
}

// TestNoInventedContentType: a body that came without Content-Type goes on
// without one, in both directions, and a policy can remove one.
func TestNoInventedContentType(t *testing.T) {
	addr, seen := rawHTTPUpstream(t, func(m message) (string, bool) {
		if m.target() == "/typed" {
			return "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2\r\n\r\nok", false
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /typed}}]
      policies: {responseHeaderModifier: {remove: [content-type]}}
      backends: [{host: ${UP}}]
    - backends: [{host: ${UP}}]
`, map[string]string{"UP": addr})
	c, br := dialRaw(t, tg.addr(3000))
	m := roundTripRaw(t, c, br, "PUT", "PUT /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	if got := nextSeen(t, seen); got.fields.has("Content-Type") {
		t.Fatalf("the upstream got Content-Type %q the client never sent", got.fields.get("Content-Type"))
	}
	if m.fields.has("Content-Type") {
		t.Fatalf("the client got Content-Type %q the upstream never sent", m.fields.get("Content-Type"))
	}
	m = roundTripRaw(t, c, br, "GET", "GET /typed HTTP/1.1\r\nHost: x\r\n\r\n")
	nextSeen(t, seen)
	if m.fields.has("Content-Type") {
		t.Fatalf("Content-Type %q survived responseHeaderModifier remove", m.fields.get("Content-Type"))
	}
}

// TestResponseTrailersForwarded: the trailer fields of a chunked response
// reach the client after the body (RFC 9110 6.5), announced or not, a
// field on several lines with each.
func TestResponseTrailersForwarded(t *testing.T) {
	addr, _ := rawHTTPUpstream(t, func(message) (string, bool) {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-Other: o\r\nX-Other: p\r\n\r\n", false
	})
	tg := startGateway(t, oneRoute(addr), nil)
	c, br := dialRaw(t, tg.addr(3000))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	m, err := readHead(br)
	if err != nil || m.status() != 200 {
		t.Fatalf("head %q, %v", m.line, err)
	}
	if m.fields.get("Trailer") != "X-Sum" {
		t.Fatalf("Trailer announcement %q, want X-Sum", m.fields.get("Trailer"))
	}
	body, err := io.ReadAll(httputil.NewChunkedReader(br))
	if err != nil || string(body) != "hello" {
		t.Fatalf("body %q, %v", body, err)
	}
	trailer, err := readHeadFields(br)
	if err != nil {
		t.Fatal(err)
	}
	if trailer.get("X-Sum") != "abc" || trailer.get("X-Other") != "o, p" {
		t.Fatalf("trailer fields %v, want X-Sum: abc and X-Other: o and p, a field's every line", trailer)
	}
	// The connection stays usable: the message ended where it should.
	if m := roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); m.status() != 200 {
		t.Fatalf("next request: %q", m.line)
	}
}

// readHeadFields reads header (or trailer) field lines up to the blank line.
func readHeadFields(br *bufio.Reader) (headerFields, error) {
	var out headerFields
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return out, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return out, nil
		}
		name, value, _ := strings.Cut(line, ":")
		out = append(out, [2]string{name, strings.TrimSpace(value)})
	}
}
