package mcp

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/mcp/mcptest"
	"github.com/relaygate/gateway/config"
)

// streamTarget is mcptest.PingingTarget served on 127.0.0.1.
type streamTarget struct {
	URL string
	*mcptest.PingingTarget
}

func startStreamTarget(t *testing.T) *streamTarget {
	t.Helper()
	f := &streamTarget{PingingTarget: new(mcptest.PingingTarget)}
	h := f.PingingTarget
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	f.URL = "http://" + ln.Addr().String() + "/mcp"
	return f
}

// clientContexts gives each GET a Context of its own, as the server's
// hang-up watch does; gone ends them all, as the clients' hang-ups would.
type clientContexts struct {
	mu      sync.Mutex
	cancels []context.CancelFunc
}

func (c *clientContexts) set(r *Request) {
	if !r.Fast.IsGet() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.Context = ctx
	c.mu.Lock()
	c.cancels = append(c.cancels, cancel)
	c.mu.Unlock()
}

func (c *clientContexts) gone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels {
		cancel()
	}
	c.cancels = nil
}

// serveWithContexts serves b with a client Context on each GET; at the
// test's end, before the server stops (it waits for them), the Contexts
// end and so do the streams.
func serveWithContexts(t *testing.T, b *Backend) (string, *clientContexts) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cc := &clientContexts{}
	endpoint := serveBackendOn(t, b, ln, cc.set)
	t.Cleanup(func() {
		cc.gone()
		b.EndStreams()
	})
	return endpoint, cc
}

// openStream opens the session's GET stream on a raw connection and reads
// its first comment; it returns the connection and the stream's body.
func openStream(t *testing.T, endpoint, session string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(endpoint, "/mcp"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req, _ := http.NewRequest(http.MethodGet, endpoint, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(mcptest.WaitTimeout))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	body := bufio.NewReader(resp.Body)
	for _, want := range []string{": stream open\n", "\n"} {
		if line, err := body.ReadString('\n'); err != nil || line != want {
			t.Fatalf("stream's first comment: %q, %v", line, err)
		}
	}
	return conn, body
}

func (b *Backend) session(id string) *Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sessions[id]
}

// TestRelayTargetStreamFollowsClientStream: a target's standalone GET
// stream, opened to feed the client's GET stream, closes shortly after
// the client's stream ends, however it ends, and opens again with the
// client's next stream; the session lives on. The client's stream ends as
// soon as its client goes (Request.Context), not at the next keep-alive.
// A GET stream its client dropped used to be noticed only by the
// keep-alive write 25 s later, and the target's stream stayed open until
// the session expired: 500 dropped streams held 500 upstream connections
// and 2,500 goroutines.
func TestRelayTargetStreamFollowsClientStream(t *testing.T) {
	tests := []struct {
		name      string
		keepAlive time.Duration
		end       func(b *Backend, cc *clientContexts, conn net.Conn)
		reopen    bool
	}{
		// The hang-up watch ends the request's Context; no keep-alive
		// comes to notice it.
		{"client gone", time.Hour, func(_ *Backend, cc *clientContexts, _ net.Conn) { cc.gone() }, true},
		// No Context: the keep-alive's failed write is how it is noticed.
		{"connection closed without a watch", 10 * time.Millisecond, func(_ *Backend, _ *clientContexts, conn net.Conn) { conn.Close() }, true},
		{"gateway draining", time.Hour, func(b *Backend, _ *clientContexts, _ net.Conn) { b.EndStreams() }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			up := startStreamTarget(t)
			b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: up.URL}}})
			b.keepAlive, b.listenLinger = tc.keepAlive, 20*time.Millisecond
			endpoint, cc := serveWithContexts(t, b)
			id := initSession(t, endpoint)
			if up.Opened.Load() != 0 {
				t.Fatal("the target's stream opened before the client's")
			}
			conn, body := openStream(t, endpoint, id)
			mcptest.WaitFor(t, func() bool { return up.Open.Load() == 1 })
			tc.end(b, cc, conn)
			if tc.name != "connection closed without a watch" {
				// The client sees its stream end (the chunked body's end).
				if _, err := io.Copy(io.Discard, body); err != nil {
					t.Fatalf("the client's stream did not end: %v", err)
				}
			}
			mcptest.WaitFor(t, func() bool { return up.Open.Load() == 0 })
			if b.SessionCount() != 1 {
				t.Fatal("the session ended with its stream")
			}
			if !tc.reopen {
				return
			}
			openStream(t, endpoint, id)
			mcptest.WaitFor(t, func() bool { return up.Open.Load() == 1 })
			if n := up.Opened.Load(); n != 2 {
				t.Fatalf("the target's stream opened %d times, want 2", n)
			}
		})
	}
}

// TestRelayTargetStreamWaitsForAReconnect: a client that opens its stream
// again within listenLinger finds the target's stream still open.
func TestRelayTargetStreamWaitsForAReconnect(t *testing.T) {
	up := startStreamTarget(t)
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: up.URL}}})
	b.keepAlive, b.listenLinger = time.Hour, time.Hour
	endpoint, cc := serveWithContexts(t, b)
	id := initSession(t, endpoint)
	openStream(t, endpoint, id)
	mcptest.WaitFor(t, func() bool { return up.Open.Load() == 1 })
	cc.gone()
	s := b.session(id)
	mcptest.WaitFor(t, func() bool { return !s.streaming() })
	openStream(t, endpoint, id)
	if !s.streaming() {
		t.Fatal("no stream after the reconnect")
	}
	if open, opened := up.Open.Load(), up.Opened.Load(); open != 1 || opened != 1 {
		t.Fatalf("target streams: %d open, %d opened; want the first kept", open, opened)
	}
}

// TestRelayKeepAliveToAGoneClientIsNoUse: a keep-alive comment counts as
// the session's use only once it was written: one whose write fails (the
// client reset its connection) does not extend the session, where the
// tick used to touch it before writing.
func TestRelayKeepAliveToAGoneClientIsNoUse(t *testing.T) {
	up := startStreamTarget(t)
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: up.URL}}})
	b.keepAlive = 20 * time.Millisecond
	// No Context: only a write tells that the client left.
	endpoint := serveBackend(t, b, nil)
	id := initSession(t, endpoint)
	conn, body := openStream(t, endpoint, id)
	s := b.session(id)
	// A keep-alive the client reads is its use.
	before := s.lastUsed.Load()
	if line, err := body.ReadString('\n'); err != nil || line != ": keep-alive\n" {
		t.Fatalf("%q, %v; want a keep-alive", line, err)
	}
	mcptest.WaitFor(t, func() bool { return s.lastUsed.Load() > before })
	_ = conn.(*net.TCPConn).SetLinger(0)
	conn.Close() // a reset: the next write fails
	gone := time.Now().UnixNano()
	mcptest.WaitFor(t, func() bool { return !s.streaming() })
	if last := s.lastUsed.Load(); last > gone {
		t.Fatalf("the session was used %v after its client reset its stream", time.Duration(last-gone))
	}
}

// TestRelayLegacyStreamEndsWhenItsClientGoes: a legacy SSE session ends as
// soon as its client goes (Request.Context), its upstream session and
// stream with it, not at the next keep-alive.
func TestRelayLegacyStreamEndsWhenItsClientGoes(t *testing.T) {
	up := startStreamTarget(t)
	b := newTestBackend(t, &config.MCPBackend{Targets: []config.MCPTarget{{Name: "a", Kind: config.MCPTargetStreamable, URL: up.URL}}})
	b.legacyKeepAlive = time.Hour
	endpoint, cc := serveWithContexts(t, b)
	base := strings.TrimSuffix(endpoint, "/mcp")
	_, body, post := rawLegacy(t, base)
	c := &legacyClient{t: t, endpoint: post, events: body}
	if status, _ := c.post(legacyInit); status != http.StatusAccepted {
		t.Fatalf("initialize: %d", status)
	}
	if msg := c.message(); !strings.Contains(msg, `"protocolVersion"`) {
		t.Fatalf("initialize answer: %s", msg)
	}
	mcptest.WaitFor(t, func() bool { return up.Open.Load() == 1 })
	cc.gone()
	mcptest.WaitFor(t, func() bool { return b.SessionCount() == 0 && up.Open.Load() == 0 && up.Deletes.Load() == 1 })
}
