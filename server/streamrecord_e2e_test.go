package server

import (
	"bufio"
	"io"
	"net"
	"net/http/httputil"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/sock"
)

// stallingUpstream answers every request with a chunked response whose first
// chunk ("first") goes at once and whose rest (rest bytes) waits for
// release; it returns the address and the release channel. With rest < 0
// the rest never comes: the response stalls until the test ends.
func stallingUpstream(t *testing.T, rest int) (string, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	addr := requestUpstream(t, func(c net.Conn, _ *bufio.Reader, _ message) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
		if rest < 0 {
			<-done
			return false
		}
		select {
		case <-release:
		case <-done:
			return false
		}
		io.WriteString(c, strconv.FormatInt(int64(rest), 16)+"\r\n"+strings.Repeat("r", rest)+"\r\n0\r\n\r\n")
		return true
	})
	return addr, release
}

// TestStreamedBodiesRecordedWhole: the access log line (and the metrics)
// of a request whose body streams counts every byte that went through,
// whatever the framing, and a streamed response is recorded when it has
// ended, with its whole size and duration.
func TestStreamedBodiesRecordedWhole(t *testing.T) {
	sink, _ := rawHTTPUpstream(t, okAnswer)
	held, release := stallingUpstream(t, 50000)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /held}}]
      backends: [{host: ${HELD}}]
    - backends: [{host: ${SINK}}]
`, map[string]string{"SINK": sink, "HELD": held})
	lines := func() int { return len(tg.accessLogs().FilterMessage("request").All()) }

	c, br := dialRaw(t, tg.addr(3000))
	roundTripRaw(t, c, br, "PUT", "PUT /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("a", 100000))
	if f := lastAccessLine(t, tg.accessLogs(), 1); f["bytes_in"] != int64(100000) {
		t.Fatalf("Content-Length upload: bytes_in %v, want 100000", f["bytes_in"])
	}
	chunk := strings.Repeat("b", 10000)
	roundTripRaw(t, c, br, "PUT", "PUT /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"2710\r\n"+chunk+"\r\n2710\r\n"+chunk+"\r\n2710\r\n"+chunk+"\r\n0\r\n\r\n")
	if f := lastAccessLine(t, tg.accessLogs(), 2); f["bytes_in"] != int64(30000) {
		t.Fatalf("chunked upload: bytes_in %v, want 30000", f["bytes_in"])
	}

	start := time.Now()
	if _, err := io.WriteString(c, "GET /held HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	head, err := readHead(br)
	if err != nil || head.status() != 200 {
		t.Fatalf("head %q, %v", head.line, err)
	}
	cr := httputil.NewChunkedReader(br)
	first := make([]byte, 5)
	if _, err := io.ReadFull(cr, first); err != nil || string(first) != "first" {
		t.Fatalf("first chunk %q, %v", first, err)
	}
	if n := lines(); n != 2 {
		t.Fatalf("%d access log lines while the response still streams; the request must be recorded when it ends", n)
	}
	close(release)
	rest, err := io.ReadAll(cr)
	if err != nil || len(rest) != 50000 {
		t.Fatalf("rest of the body: %d bytes, %v", len(rest), err)
	}
	elapsed := time.Since(start)
	eventually(t, 5*time.Second, "the streamed response's access log line", func() bool { return lines() == 3 })
	f := lastAccessLine(t, tg.accessLogs(), 3)
	if f["bytes_out"] != int64(50005) || f["status"] != int64(200) || f["path"] != "/held" || f["method"] != "GET" {
		t.Fatalf("streamed response recorded as %v", f)
	}
	if d, _ := f["duration"].(time.Duration); d <= 0 || d > elapsed {
		t.Fatalf("duration %v, want in (0, %v]", f["duration"], elapsed)
	}
	if _, has := f["upstream_error"]; has {
		t.Fatalf("a complete stream recorded with upstream_error %v", f["upstream_error"])
	}
}

// TestRequestTimeoutBoundsStreamedBodies: timeouts.request runs until the
// full response is received (spec), so a body that stops flowing is cut
// when it passes: the client's response ends incomplete, and the record
// names the timeout.
func TestRequestTimeoutBoundsStreamedBodies(t *testing.T) {
	held, _ := stallingUpstream(t, -1)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {timeout: {requestTimeout: 300ms}}
      backends: [{host: ${HELD}}]
`, map[string]string{"HELD": held})
	c, br := dialRaw(t, tg.addr(3000))
	if _, err := io.WriteString(c, "GET /held HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	head, err := readHead(br)
	if err != nil || head.status() != 200 {
		t.Fatalf("head %q, %v", head.line, err)
	}
	body, err := io.ReadAll(httputil.NewChunkedReader(br))
	if err == nil || sock.IsTimeout(err) {
		t.Fatalf("body %q ended with %v; want the gateway to cut it (an unexpected end)", body, err)
	}
	eventually(t, 5*time.Second, "the access log line", func() bool { return len(tg.accessLogs().FilterMessage("request").All()) == 1 })
	f := lastAccessLine(t, tg.accessLogs(), 1)
	if e, _ := f["upstream_error"].(string); !strings.Contains(e, "timeout") {
		t.Fatalf("upstream_error %v, want a timeout", f["upstream_error"])
	}
}

// TestUnparsableRequestsRecorded: a request fasthttp cannot parse is
// answered 400 and still gets its access log line.
func TestUnparsableRequestsRecorded(t *testing.T) {
	sink, _ := rawHTTPUpstream(t, okAnswer)
	tg := startGateway(t, oneRoute(sink), nil)
	for i, req := range []string{
		"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nX-Y : z\r\n\r\n",
	} {
		c, br := dialRaw(t, tg.addr(3000))
		if m := roundTripRaw(t, c, br, "GET", req); m.status() != 400 {
			t.Fatalf("%q: status %d", req, m.status())
		}
		eventually(t, 5*time.Second, "the access log line", func() bool { return len(tg.accessLogs().FilterMessage("request").All()) == i+1 })
		if f := lastAccessLine(t, tg.accessLogs(), i+1); f["status"] != int64(400) {
			t.Fatalf("%q: recorded as %v", req, f)
		}
	}
}
