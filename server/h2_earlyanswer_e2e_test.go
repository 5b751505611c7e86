package server

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestHTTP2UpstreamAnswersBeforeTheBody: an HTTP/2 upstream that answers
// before it read the request body (an early 413, a redirect, a handler
// that ignores the body), to an HTTP/1.1 client that has sent part of its
// body and waits: the client gets the answer and the connection closes
// at once, its body unread. The gateway used to hold the request until
// the client sent more or its body idle timeout passed (60 s): x/net's
// Close of the response waited for the request-body writer, blocked
// reading the client, which only the Close's own aftermath would have
// interrupted. (The std transport; netpoll's reads cannot be interrupted
// by a deadline set meanwhile, and wait for the body idle timeout.)
func TestHTTP2UpstreamAnswersBeforeTheBody(t *testing.T) {
	old := bodyIdleTimeout.Swap(int64(time.Hour))
	t.Cleanup(func() { bodyIdleTimeout.Store(old) })
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			_, _ = io.WriteString(w, "too large, say I\n")
		}
	}))
	tg := startGatewayWith(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: "+up+"\n        policies: { http: { version: HTTP2 } }\n", nil, TransportStd)
	for _, tc := range []struct {
		path     string
		status   int
		wantBody string
	}{
		{"/answer", http.StatusRequestEntityTooLarge, "too large, say I\n"},
		{"/empty", http.StatusNoContent, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c, br := dialRaw(t, tg.addr(3000))
			m := roundTripRaw(t, c, br, "POST", "POST "+tc.path+" HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
			if m.status() != tc.status || string(m.body) != tc.wantBody {
				t.Fatalf("got %q %q, want %d %q", m.line, m.body, tc.status, tc.wantBody)
			}
			if b, err := br.ReadByte(); !isClosed(err) {
				t.Fatalf("after the answer: byte %q, %v; want the connection closed (the rest of the body is not read)", b, err)
			}
		})
		t.Run("HTTP/2 client "+tc.path, func(t *testing.T) {
			// The request body's stream stays open: its reading is what
			// the gateway must stop.
			pr, pw := io.Pipe()
			t.Cleanup(func() { pw.Close() })
			go func() { _, _ = io.WriteString(pw, "hello") }()
			req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+tc.path, pr)
			resp, err := h2cClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != tc.status || string(body) != tc.wantBody {
				t.Fatalf("got %d %q %v, want %d %q", resp.StatusCode, body, err, tc.status, tc.wantBody)
			}
		})
	}
}

// TestHTTP2UpstreamAnswersBeforeTheBodyNetpoll: the same on the netpoll
// transport, whose reads a deadline set meanwhile cannot interrupt. The
// answer waits for the body idle timeout (shortened here) and then reaches
// the client, and the interruption touches nothing of the connection that
// its reader uses: netpoll keeps a read deadline in a plain field, which
// the interrupter used to write every 50 ms while the reader read it (a
// data race, which -race reports).
func TestHTTP2UpstreamAnswersBeforeTheBodyNetpoll(t *testing.T) {
	old := bodyIdleTimeout.Swap(int64(300 * time.Millisecond))
	t.Cleanup(func() { bodyIdleTimeout.Store(old) })
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}))
	tg := startGatewayWith(t, "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: "+up+"\n        policies: { http: { version: HTTP2 } }\n", nil, TransportNetpoll)
	c, br := dialRaw(t, tg.addr(3000))
	m := roundTripRaw(t, c, br, "POST", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	if m.status() != http.StatusRequestEntityTooLarge {
		t.Fatalf("got %q, want 413", m.line)
	}
	if b, err := br.ReadByte(); !isClosed(err) {
		t.Fatalf("after the answer: byte %q, %v; want the connection closed", b, err)
	}
}
