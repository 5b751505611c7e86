package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRetryBackoffEndsWhenClientLeaves: a request whose client goes away
// while it waits out a retry's backoff (its upstream answered a status the
// policy retries) ends there: no further attempt sends its body again, and
// it is recorded as a hang-up during an attempt is (upstream_error: the
// client went away). Over HTTP/1.1 a reset ends it at once and a FIN once
// halfCloseGrace has passed; over HTTP/2 the stream's reset. Before, the
// backoff slept on whatever the client did, holding the request, its
// goroutine and its buffered body for the whole of it (probed: 30 s
// backoffs, 200 abandoned 2 MB POSTs held 400 MB for over a minute), and the
// next attempt sent the body to the upstream again.
func TestRetryBackoffEndsWhenClientLeaves(t *testing.T) {
	old := halfCloseGrace.Swap(int64(300 * time.Millisecond))
	t.Cleanup(func() { halfCloseGrace.Store(old) })
	var hits atomic.Int32
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusServiceUnavailable)
		w.(http.Flusher).Flush()
		hits.Add(1)
	}))
	body := strings.Repeat("b", 64<<10)
	// leaveRaw sends the request on an HTTP/1.1 connection of its own and
	// returns the hang-up.
	leaveRaw := func(hangUp func(*net.TCPConn)) func(t *testing.T, tg *testGateway, path string) func() {
		return func(t *testing.T, tg *testGateway, path string) func() {
			c := dialTest(t, tg.addr(3000))
			if _, err := io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body); err != nil {
				t.Fatal(err)
			}
			return func() { hangUp(c.(*net.TCPConn)) }
		}
	}
	// leaveH2 sends the request on a stream and returns its reset.
	leaveH2 := func(t *testing.T, tg *testGateway, path string) func() {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(3000)+path, strings.NewReader(body))
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := h2cClient().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		t.Cleanup(func() { cancel(); <-done })
		return cancel
	}
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			tg := startGatewayWith(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /h1}}]
      policies: {retry: {attempts: 5, codes: [503], backoff: 30s}}
      backends: [{host: '${UP}', policies: {http: {version: HTTP1}}}]
    - matches: [{path: {pathPrefix: /h2}}]
      policies: {retry: {attempts: 5, codes: [503], backoff: 30s}}
      backends: [{host: '${UP}', policies: {http: {version: HTTP2}}}]
`, map[string]string{"UP": up}, tr)
			for _, c := range []struct {
				desc, path string
				send       func(t *testing.T, tg *testGateway, path string) func()
			}{
				{"HTTP/1.1 reset", "/h1", leaveRaw(func(c *net.TCPConn) { _ = c.SetLinger(0); c.Close() })},
				{"HTTP/1.1 close", "/h1", leaveRaw(func(c *net.TCPConn) { c.Close() })},
				{"HTTP/1.1 half-close", "/h1", leaveRaw(func(c *net.TCPConn) { _ = c.CloseWrite() })},
				{"HTTP/1.1 reset, HTTP/2 backend", "/h2", leaveRaw(func(c *net.TCPConn) { _ = c.SetLinger(0); c.Close() })},
				{"HTTP/2 stream reset, HTTP/1.1 backend", "/h1", leaveH2},
				{"HTTP/2 stream reset, HTTP/2 backend", "/h2", leaveH2},
			} {
				t.Run(c.desc, func(t *testing.T) {
					before := hits.Load()
					logged := len(tg.accessLogs().FilterMessage("request").All())
					hangUp := c.send(t, tg, c.path)
					eventually(t, 10*time.Second, "the first attempt", func() bool { return hits.Load() > before })
					hangUp()
					eventually(t, 10*time.Second, "the request's end", func() bool {
						return len(tg.accessLogs().FilterMessage("request").All()) > logged
					})
					f := tg.accessLogs().FilterMessage("request").All()[logged].ContextMap()
					// (The hang-up may still beat the answer's head to the
					// gateway: an HTTP/2 exchange then ends with its
					// context, as one that a hang-up cuts short does.)
					gone := f["upstream_error"] == "the client went away" ||
						c.path == "/h2" && f["upstream_error"] == "context canceled"
					if !gone || f["status"] != int64(502) {
						t.Errorf("recorded %v, %v; want 502, the client went away", f["status"], f["upstream_error"])
					}
					if n := hits.Load() - before; n != 1 {
						t.Errorf("the upstream got %d attempts, want 1", n)
					}
				})
			}
		})
	}
}
