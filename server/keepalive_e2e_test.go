package server

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// TestKeepAliveKeepsEveryRequestFlowing: whatever mix of requests a
// keep-alive connection carries — bodies of every framing, HEAD, pipelined
// bursts — each is answered at once (requests in pieces and heads after an
// empty line: the next test). A read of the next request that waited on
// the wrong thing would hold an answer until the 10-minute idle timeout;
// dialRaw's deadline would fail the read.
func TestKeepAliveKeepsEveryRequestFlowing(t *testing.T) {
	up, _ := rawHTTPUpstream(t, echoAnswer)
	tg := startGatewayWith(t, oneRoute(up), nil, TransportStd)
	c, br := dialRaw(t, tg.addr(3000))
	type step struct {
		send    []string // written one after another
		method  []string // the method of each reply expected
		wantOne string   // body of the first reply
	}
	steps := []step{
		{send: []string{"GET /a HTTP/1.1\r\nHost: a\r\n\r\n"}, method: []string{"GET"}, wantOne: "GET /a HTTP/1.1\n"},
		{send: []string{"GET /b HTTP/1.1\r\nHost: a\r\nX-Many: 1\r\nX-More: 2\r\n\r\n"}, method: []string{"GET"}, wantOne: "GET /b HTTP/1.1\n"},
		// Pipelined: the second waits in the gateway's buffer.
		{send: []string{"GET /c HTTP/1.1\r\nHost: a\r\n\r\nGET /d HTTP/1.1\r\nHost: a\r\n\r\n"}, method: []string{"GET", "GET"}, wantOne: "GET /c HTTP/1.1\n"},
		{send: []string{"HEAD /e HTTP/1.1\r\nHost: a\r\n\r\n"}, method: []string{"HEAD"}},
		{send: []string{"POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nxyz"}, method: []string{"POST"}, wantOne: "POST /f HTTP/1.1\nxyz"},
		{send: []string{"GET /g HTTP/1.1\r\nHost: a\r\n\r\n"}, method: []string{"GET"}, wantOne: "GET /g HTTP/1.1\n"},
		{send: []string{"POST /h HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nq\r\n0\r\n\r\n"}, method: []string{"POST"}, wantOne: "POST /h HTTP/1.1\nq"},
		// After a chunked body.
		{send: []string{"GET /i HTTP/1.1\r\nHost: a\r\n\r\n"}, method: []string{"GET"}, wantOne: "GET /i HTTP/1.1\n"},
	}
	for i, s := range steps {
		for _, part := range s.send {
			io.WriteString(c, part)
		}
		for j, m := range s.method {
			resp, err := readReply(br, m)
			if err != nil || resp.status() != 200 {
				t.Fatalf("step %d reply %d: %q %v", i, j, resp.line, err)
			}
			if j == 0 && s.wantOne != "" && string(resp.body) != s.wantOne {
				t.Fatalf("step %d: body %q, want %q", i, resp.body, s.wantOne)
			}
		}
	}
}

// TestKeepAliveAfterUnusualHeads: after a request that arrives in pieces, or
// one with an empty line before it, a pipelined burst still flows.
func TestKeepAliveAfterUnusualHeads(t *testing.T) {
	up, _ := rawHTTPUpstream(t, echoAnswer)
	tg := startGatewayWith(t, oneRoute(up), nil, TransportStd)
	for _, first := range [][]string{
		{"GET /pie", "ces HTTP/1.1\r\nHo", "st: a\r\n\r\n"},
		{"\r\nGET /leading-crlf HTTP/1.1\r\nHost: a\r\n\r\n"},
	} {
		c, br := dialRaw(t, tg.addr(3000))
		for _, part := range first {
			io.WriteString(c, part)
		}
		if resp, err := readReply(br, "GET"); err != nil || resp.status() >= 500 {
			t.Fatalf("%q: %q %v", first, resp.line, err)
		}
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\n\r\n")
		for _, want := range []string{"GET /x HTTP/1.1\n", "GET /y HTTP/1.1\n"} {
			resp, err := readReply(br, "GET")
			if err != nil || string(resp.body) != want {
				t.Fatalf("after %q: %q %q %v; want %q", first, resp.line, resp.body, err, want)
			}
		}
		io.WriteString(c, "GET /z HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, err := readReply(br, "GET"); err != nil || string(resp.body) != "GET /z HTTP/1.1\n" {
			t.Fatalf("after %q: %q %q %v", first, resp.line, resp.body, err)
		}
	}
}

// TestKeepAliveSeesWhatArrivedBefore: bytes a client sends before it has
// the answer — a pipelined request sent while the gateway waits on the
// upstream, and the half-close after a client's last request — are answered
// (or closed) at once. (Session 9 found a wait inside the response's write
// that missed them: the poller forgets readiness it reported before a read
// begins.) With parking off, a wait that missed them would last until the
// head's deadline (60 s); dialRaw's 15 s deadline fails the read.
func TestKeepAliveSeesWhatArrivedBefore(t *testing.T) {
	old := parkIdleAfter.Swap(0)
	t.Cleanup(func() { parkIdleAfter.Store(old) })
	// start returns the gateway's address in front of an upstream that
	// reports each request's target and answers it once released.
	start := func(t *testing.T) (addr string, upstreamGot func(want string), release chan<- struct{}) {
		rel := make(chan struct{})
		got := make(chan string, 4)
		up := requestUpstream(t, func(c net.Conn, _ *bufio.Reader, m message) bool {
			got <- m.target()
			select {
			case <-rel:
			case <-time.After(10 * time.Second):
				return false
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return true
		})
		tg := startGatewayWith(t, oneRoute(up), nil, TransportStd)
		return tg.addr(3000), func(want string) {
			t.Helper()
			select {
			case target := <-got:
				if target != want {
					t.Fatalf("upstream got %s, want %s", target, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("upstream never got %s", want)
			}
		}, rel
	}
	t.Run("pipelined request", func(t *testing.T) {
		addr, upstreamGot, release := start(t)
		c, br := dialRaw(t, addr)
		io.WriteString(c, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
		upstreamGot("/1") // the gateway has read the first request
		io.WriteString(c, "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
		release <- struct{}{}
		if resp, err := readReply(br, "GET"); err != nil || resp.status() != 200 {
			t.Fatalf("first reply: %q %v", resp.line, err)
		}
		upstreamGot("/2")
		release <- struct{}{}
		if resp, err := readReply(br, "GET"); err != nil || resp.status() != 200 {
			t.Fatalf("second reply: %q %v", resp.line, err)
		}
	})
	t.Run("half-close after the request", func(t *testing.T) {
		addr, upstreamGot, release := start(t)
		c, br := dialRaw(t, addr)
		io.WriteString(c, "GET /3 HTTP/1.1\r\nHost: a\r\n\r\n")
		upstreamGot("/3")
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		release <- struct{}{}
		if resp, err := readReply(br, "GET"); err != nil || resp.status() != 200 {
			t.Fatalf("reply: %q %v", resp.line, err)
		}
		if b, err := br.ReadByte(); !isClosed(err) {
			t.Fatalf("connection still open after the client's half-close: byte %q, %v", b, err)
		}
	})
}
