package server

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http/httputil"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The end-to-end tests of the proxy semantics speak HTTP/1.1 on raw TCP on
// both sides of the gateway, so that they see exactly the header fields and
// bytes the gateway sends, not what net/http makes of them.

// e2eTransports are the transports the basic end-to-end cases run on.
var e2eTransports = []Transport{TransportStd, TransportNetpoll}

// headerFields are header fields in the order they arrived.
type headerFields [][2]string

// values returns every value of name, one per field line.
func (h headerFields) values(name string) []string {
	var out []string
	for _, f := range h {
		if strings.EqualFold(f[0], name) {
			out = append(out, f[1])
		}
	}
	return out
}

// get returns the values of name joined as one list ("" when absent).
func (h headerFields) get(name string) string { return strings.Join(h.values(name), ", ") }

func (h headerFields) has(name string) bool { return len(h.values(name)) > 0 }

// message is one HTTP/1.1 message as read off the wire.
type message struct {
	line   string // request or status line
	fields headerFields
	body   []byte
}

func (m message) method() string { return strings.Fields(m.line)[0] }

// target is the request target of a request line.
func (m message) target() string {
	if f := strings.Fields(m.line); len(f) > 1 {
		return f[1]
	}
	return ""
}

// status is the status code of a status line (0 when unparseable).
func (m message) status() int {
	f := strings.Fields(m.line)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// readHead reads a start line and header fields up to the blank line.
func readHead(br *bufio.Reader) (message, error) {
	var m message
	line, err := br.ReadString('\n')
	if err != nil {
		return m, err
	}
	m.line = strings.TrimRight(line, "\r\n")
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return m, fmt.Errorf("reading header fields: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return m, nil
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return m, fmt.Errorf("header line without colon: %q", line)
		}
		m.fields = append(m.fields, [2]string{name, strings.TrimSpace(value)})
	}
}

// readBody reads the body the fields announce: chunked, Content-Length, or
// (untilClose, for responses) everything up to the end of the connection.
func readBody(br *bufio.Reader, fields headerFields, untilClose bool) ([]byte, error) {
	if strings.Contains(strings.ToLower(fields.get("Transfer-Encoding")), "chunked") {
		b, err := io.ReadAll(httputil.NewChunkedReader(br))
		if err != nil {
			return b, err
		}
		// Trailer fields, then the blank line that ends the message.
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return b, err
			}
			if strings.TrimRight(line, "\r\n") == "" {
				return b, nil
			}
		}
	}
	if cl := fields.get("Content-Length"); cl != "" {
		n, err := strconv.Atoi(cl)
		if err != nil {
			return nil, fmt.Errorf("bad Content-Length %q", cl)
		}
		b := make([]byte, n)
		_, err = io.ReadFull(br, b)
		return b, err
	}
	if untilClose {
		return io.ReadAll(br)
	}
	return nil, nil
}

// readRequest reads one request with its body.
func readRequest(br *bufio.Reader) (message, error) {
	m, err := readHead(br)
	if err != nil {
		return m, err
	}
	m.body, err = readBody(br, m.fields, false)
	return m, err
}

// readReply reads one response to a request with method; interim (1xx other
// than 101) responses are returned like any other.
func readReply(br *bufio.Reader, method string) (message, error) {
	m, err := readHead(br)
	if err != nil {
		return m, err
	}
	s := m.status()
	if method == "HEAD" || s < 200 || s == 204 || s == 304 {
		return m, nil
	}
	m.body, err = readBody(br, m.fields, true)
	return m, err
}

// rawHTTPUpstream serves HTTP/1.1 on raw TCP: every request is sent on the
// returned channel, then answer gives the raw response bytes and whether to
// close the connection after them.
func rawHTTPUpstream(t *testing.T, answer func(message) (string, bool)) (string, <-chan message) {
	t.Helper()
	seen := make(chan message, 1024)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	addr := requestUpstream(t, func(c net.Conn, _ *bufio.Reader, m message) bool {
		select {
		case seen <- m:
		case <-done:
			return false
		}
		resp, closeConn := answer(m)
		_, err := io.WriteString(c, resp)
		return err == nil && !closeConn
	})
	return addr, seen
}

// requestUpstream is rawUpstream for an upstream that reads requests one
// after another on each connection: handle gets each request, with the
// connection and its reader, and reports whether to read the next; the
// connection closes after a request it declines or one that does not parse.
func requestUpstream(t testing.TB, handle func(c net.Conn, br *bufio.Reader, m message) bool) string {
	t.Helper()
	return rawUpstream(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			m, err := readRequest(br)
			if err != nil || !handle(c, br, m) {
				return
			}
		}
	})
}

// okAnswer answers every request 200 with body "ok".
func okAnswer(message) (string, bool) {
	return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", false
}

// echoAnswer answers with the request line and body, so a client can tell
// which request a response belongs to.
func echoAnswer(m message) (string, bool) {
	body := m.line + "\n" + string(m.body)
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body, false
}

// dialRaw opens a raw client connection to addr, bounded by a deadline.
func dialRaw(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(15 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// roundTripRaw writes raw request bytes and reads one response.
func roundTripRaw(t *testing.T, c net.Conn, br *bufio.Reader, method, raw string) message {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	m, err := readReply(br, method)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return m
}

// nextSeen returns the next request the upstream saw, bounded in time.
func nextSeen(t *testing.T, seen <-chan message) message {
	t.Helper()
	select {
	case m := <-seen:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream received no request")
		return message{}
	}
}

// payload returns n deterministic pseudo-random bytes (a repeated pattern
// would hide misplaced chunks).
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// sameBytes reports how two bodies differ, or "" when they are equal.
func sameBytes(got, want []byte) string {
	if bytes.Equal(got, want) {
		return ""
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("got %d bytes (sha %s), want %d (sha %s), first difference at %d", len(got), digest(got), len(want), digest(want), i)
}

// isClosed reports whether err from a read means the peer closed the
// connection (as opposed to our own deadline passing).
func isClosed(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}
