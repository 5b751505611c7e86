package server

import (
	"bytes"
	"encoding/base64"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http2"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// HTTP/2 clients: over TLS (ALPN h2), in cleartext with prior knowledge
// (the connection starts with the preface) and by the HTTP/1.1 upgrade to
// h2c. The gateway's own connection loop speaks the protocol, on x/net's
// http2.Framer for the framing and its hpack package for header
// compression: h2conn.go reads a connection's frames and keeps its streams
// and limits, h2headers.go decodes header blocks, h2frames.go takes the
// other frames (bodies, windows, settings, pings), h2write.go writes frames
// out, batched into few writes, and h2park.go parks an idle connection.
// Each stream's request is decoded straight into a pooled
// fasthttp.RequestCtx and taken through the same request path as an
// HTTP/1.1 request (handle) on a pooled worker (h2worker.go); the response
// it leaves is encoded straight into the stream's frames (h2stream.go). docs/ARCHITECTURE.md ("HTTP/2 clients") says why and what
// it costs.

// h2Settings are frontendPolicies.http's HTTP/2 settings.
type h2Settings struct {
	streamWindow, connWindow int32 // 0: the defaults (h2DefaultWindow)
	frameSize                uint32
	maxHeaderBytes           int // 0: h2DefaultHeaderList
	// headerBudget bounds the header lists the open streams of a
	// connection hold, together: a stream past it is refused
	// (REFUSED_STREAM, the client may try it again), unless it is the
	// only one. Four lists of the limit, at least h2MinHeaderBudget.
	headerBudget           int
	pingAfter, pingTimeout time.Duration
}

// h2SettingsFrom reads frontendPolicies.http's HTTP/2 fields.
func h2SettingsFrom(h *config.FrontendHTTP) h2Settings {
	var s h2Settings
	if h == nil {
		return s
	}
	if h.HTTP2WindowSize != nil {
		s.streamWindow = int32(*h.HTTP2WindowSize)
	}
	if h.HTTP2ConnectionWindowSize != nil {
		s.connWindow = int32(*h.HTTP2ConnectionWindowSize)
	}
	if h.HTTP2FrameSize != nil {
		s.frameSize = uint32(*h.HTTP2FrameSize)
	}
	if h.HTTP2MaxHeaderSize != nil {
		s.maxHeaderBytes = *h.HTTP2MaxHeaderSize
	}
	if h.HTTP2KeepaliveInterval != nil {
		s.pingAfter = h.HTTP2KeepaliveInterval.Duration
	}
	if h.HTTP2KeepaliveTimeout != nil {
		s.pingTimeout = h.HTTP2KeepaliveTimeout.Duration
	}
	return s
}

// withDefaults fills what the file left unset.
func (s h2Settings) withDefaults() h2Settings {
	if s.streamWindow <= 0 {
		s.streamWindow = h2DefaultWindow
	}
	if s.connWindow <= 0 {
		s.connWindow = h2DefaultWindow
	}
	if s.frameSize == 0 {
		s.frameSize = h2MinFrameSize
	}
	if s.maxHeaderBytes <= 0 {
		s.maxHeaderBytes = h2DefaultHeaderList
	}
	// Past 1 GiB a header list limit is no limit (SETTINGS carry 32 bits,
	// and the decoder takes strings up to twice the limit).
	s.maxHeaderBytes = min(s.maxHeaderBytes, 1<<30)
	s.headerBudget = max(4*s.maxHeaderBytes, h2MinHeaderBudget)
	if s.pingAfter > 0 && s.pingTimeout <= 0 {
		s.pingTimeout = h2DefaultPingTimeout
	}
	return s
}

// The HTTP/2 limits that are not settings of the file.
const (
	// h2MaxStreams is SETTINGS_MAX_CONCURRENT_STREAMS: a client's streams
	// beyond it are refused. Open and half-closed streams count (RFC 9113
	// 5.1.2); one whose answer ended with the client's side over does not,
	// even while its handler still runs. At most as many handlers run per
	// connection; streams opened meanwhile wait for one, and more than
	// four times as many waiting (reset streams count: the rapid-reset
	// attack) end the connection.
	h2MaxStreams = 100
	// h2HeaderTable is SETTINGS_HEADER_TABLE_SIZE, the HPACK table the
	// client may make the gateway keep per connection, and the most the
	// gateway keeps for its responses.
	h2HeaderTable = 4096
	// h2ErrorBudget is how many protocol errors one connection may cause
	// (streams reset by the server for the client's fault, or refused
	// past a limit the client knew) before it is closed: each
	// is cheap for the server, but a client that keeps causing them is
	// not one to keep serving.
	h2ErrorBudget = 200
	// h2EarlyResetBudget is how many streams a client may reset before
	// their answer while they are more than half the streams it opened: a
	// reset ends the stream's handler and its upstream exchange, so
	// opening and resetting streams in a loop would make the gateway open
	// and close upstream connections at the client's pace. A browser
	// leaving pages or a user stopping generations resets far fewer.
	// (Envoy closes connections with too many premature resets likewise.)
	h2EarlyResetBudget = 100
	// h2EmptyFrameBudget is how many frames in a row may carry nothing
	// (DATA without data or end, CONTINUATION without fields or end)
	// before the connection is closed: they cost a little each and
	// advance nothing.
	h2EmptyFrameBudget = 100
	// h2PriorityPerStream is how many PRIORITY frames a client may send
	// per stream it opened (and for one more): the gateway does not act on
	// priorities, and a flood of them costs a frame's parse each. Envoy's
	// max_inbound_priority_frames_per_stream is the same 100.
	h2PriorityPerStream = 100
	// h2WindowUpdatesPerData, with h2WindowUpdateMargin and two per
	// stream, bounds the client's WINDOW_UPDATE frames by the DATA frames
	// sent to it, as Envoy's max_inbound_window_update_frames_per_data_frame_sent
	// (10) does: a client widens windows as DATA uses them.
	h2WindowUpdatesPerData = 10
	h2WindowUpdateMargin   = 100
	// The defaults of the settings: 1 MiB windows (as net/http's
	// server), a 64 KiB header list (Envoy's 60 KiB, near; net/http's
	// 1 MiB let a client hold 100 MiB per connection through the HPACK
	// table's references), 16 KiB frames (the spec's), a 15 s ping
	// timeout.
	h2DefaultWindow     = 1 << 20
	h2DefaultHeaderList = 64 << 10
	h2MinFrameSize      = 16384
	// h2MinHeaderBudget is the least of a connection's budget for the
	// header lists of its open streams (h2Settings.headerBudget): a
	// header block of a few bytes may decode into a list as large as
	// the limit, by references to the HPACK table, so 100 streams could
	// hold 100 times the limit from a few kilobytes sent.
	h2MinHeaderBudget    = 1 << 20
	h2DefaultPingTimeout = 15 * time.Second
	// h2PrefaceTimeout bounds the wait for the client's preface.
	h2PrefaceTimeout = 10 * time.Second
	// h2CloseLinger is how long a closing connection waits for the client
	// to close its side after the last frame (GOAWAY) went out, so that
	// the frames are read before the connection goes.
	h2CloseLinger = time.Second
)

// h2WriteStall bounds how long a stream's response may wait for the client
// to take it (a client that never opens its flow-control window, or stops
// reading the connection), as bodyIdleTimeout bounds the wait for a request
// body's next piece: a stream's wait counts from its last bytes sent
// (writeData), a connection's from its write's start (write).
var h2WriteStall = newAtomicInt64(int64(60 * time.Second)) // settable by tests

// h2Preface is what an HTTP/2 connection in cleartext starts with.
var h2Preface = []byte(http2.ClientPreface)

// looksLikeH2 reports whether a connection's first bytes b (at least one)
// are, or may still become, the HTTP/2 preface; whole reports that they
// are the whole of it.
func looksLikeH2(b []byte) (maybe, whole bool) {
	n := min(len(b), len(h2Preface))
	if !bytes.Equal(b[:n], h2Preface[:n]) {
		return false, false
	}
	return true, n == len(h2Preface)
}

// servePlain serves a cleartext connection: HTTP/2 when it starts with the
// preface (prior knowledge, RFC 9113 3.3), HTTP/1.1 otherwise. The look is
// a peek: the socket is handed on untouched either way. Only a connection
// whose first byte is 'P' (the preface's, and POST's, PUT's, PATCH's) is
// looked at further.
func (b *bind) servePlain(c net.Conn) {
	p, ok := c.(peeker)
	if !ok {
		b.serve(c)
		return
	}
	var buf [24]byte
	if n, _ := p.Peek(buf[:1], func(b []byte) bool { return len(b) >= 1 }); n == 0 || buf[0] != 'P' {
		b.serve(c)
		return
	}
	n, _ := p.Peek(buf[:], func(b []byte) bool { maybe, whole := looksLikeH2(b); return !maybe || whole })
	if _, whole := looksLikeH2(buf[:n]); !whole {
		b.serve(c)
		return
	}
	if !b.serveH2(c, nil, nil, nil) {
		b.connClosed(c)
	}
}

// serveH2 serves c in HTTP/2 until it closes: tc is the TLS connection c
// is (nil in cleartext); an h2c upgrade passes its request, to be served
// on stream 1, and its HTTP2-Settings. The caller accounts for the
// connection's end, unless it parked (then h2Ended does, once it ends).
func (b *bind) serveH2(c net.Conn, tc *tlsConn, upgrade *h2Exchange, settings []byte) (parked bool) {
	fs := &b.current.Load().frontend
	// The bytes are frames now, not request heads, and the connection
	// keeps its own time (idle timeout, pings): no read deadline of the
	// bind's.
	if h := sock.HeadWatchOf(c); h != nil {
		h.Stop()
	}
	if tc != nil {
		_ = tc.raw.SetReadDeadline(time.Time{})
	}
	_ = c.SetReadDeadline(time.Time{})
	hc := newH2Conn(b, c, tc, fs)
	// Drain waits for the connection until it closes, after the GOAWAY it
	// sends and the streams in flight (goAwayH2).
	if w := stateWord(c); w != nil {
		b.storeState(w, connActive)
	} else {
		b.mu.Lock()
		if _, ok := b.conns[c]; ok {
			b.conns[c] = connActive
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.h2conns[hc] = struct{}{}
	draining := b.draining.Load()
	b.mu.Unlock()
	if draining {
		hc.goAway()
	}
	if upgrade == nil {
		// Not behind fasthttp's hijacked connection: it may park.
		hc.enableParking()
	}
	if hc.serve(upgrade, settings) {
		return true
	}
	b.forgetH2(hc)
	return false
}

// goAwayH2 tells every HTTP/2 connection of the bind to go away (drain).
func (b *bind) goAwayH2() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for hc := range b.h2conns {
		hc.goAway()
	}
}

// connTooOldNow reports whether c has reached maxConnectionDuration.
func connTooOldNow(b *bind, c net.Conn) bool {
	life := b.current.Load().frontend.maxConnLife
	return life > 0 && connTooOld(c, monoNow(), life)
}

// upgradeH2C answers an HTTP/1.1 request asking to upgrade to h2c (RFC
// 7540 3.2: Upgrade: h2c, HTTP2-Settings, both named in Connection, and no
// body) with 101, and serves the connection in HTTP/2 from there; the
// request itself is answered on stream 1. It reports false, leaving the
// request to be served in HTTP/1.1, when the request does not qualify.
func (b *bind) upgradeH2C(fctx *fasthttp.RequestCtx) bool {
	h := &fctx.Request.Header
	if !h.IsHTTP11() || !bytes.EqualFold(h.Peek(fasthttp.HeaderUpgrade), tokenH2C) || declaredBodyLen(h) != 0 || !connectionNames(h, headerHTTP2Settings) {
		return false
	}
	raw := h.Peek("HTTP2-Settings")
	settings, err := base64.RawURLEncoding.DecodeString(string(bytes.TrimRight(raw, "=")))
	if err != nil || len(settings)%6 != 0 {
		return false
	}
	// Stream 1's request: this one without the upgrade's fields, copied
	// now (the connection's request is reused once the handler returns).
	x := acquireH2Exchange()
	h.CopyTo(&x.fctx.Request.Header)
	for _, k := range [][]byte{headerConnection, headerUpgrade, headerHTTP2Settings, headerContentLength} {
		policy.DelRequestHeader(&x.fctx.Request.Header, k)
	}
	x.fctx.Request.Header.SetProtocolBytes(protoHTTP11)
	x.head = fctx.IsHead()
	conn := fctx.Conn()
	done := b.startTunnel(conn, nil, nil)
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(c net.Conn) {
		defer close(done)
		setWriteStall(conn, 0) // HTTP/2 bounds its writes itself (h2WriteStall); c is fasthttp's wrapper of conn
		if _, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"); err != nil {
			releaseH2Exchange(x)
			return
		}
		b.serveH2(&hijackedConn{Conn: c, raw: conn}, nil, x, settings)
	})
	return true
}

// hijackedConn is a connection fasthttp handed over after an upgrade: it
// reads through fasthttp's wrapper (which holds the bytes fasthttp had
// read ahead), and does everything else on the socket itself. Everything
// else must be: a stream's worker may outlive the connection's serving,
// and once the hijack handler returned fasthttp empties its wrapper and
// pools it for the next hijacked connection, so that a late write through
// it raced with that (the race detector saw it) and could have reached
// another client's connection, and RemoteAddr or a deadline panicked. On
// the socket, which fasthttp closes then, a late write fails.
type hijackedConn struct {
	net.Conn // fasthttp's wrapper: Read only
	raw      net.Conn
}

// Write writes to the socket.
func (c *hijackedConn) Write(p []byte) (int, error) { return c.raw.Write(p) }

// Close closes the socket (fasthttp closes it again, harmlessly, when the
// hijack handler returns).
func (c *hijackedConn) Close() error { return c.raw.Close() }

// SetDeadline sets the socket's deadlines.
func (c *hijackedConn) SetDeadline(t time.Time) error { return c.raw.SetDeadline(t) }

// SetReadDeadline sets the socket's read deadline.
func (c *hijackedConn) SetReadDeadline(t time.Time) error { return c.raw.SetReadDeadline(t) }

// SetWriteDeadline sets the socket's write deadline.
func (c *hijackedConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

// ServerFields are the socket's (sock.ServerFields).
func (c *hijackedConn) ServerFields() *sock.Server { return sock.ServerFields(c.raw) }

// LocalAddr is the socket's.
func (c *hijackedConn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// RemoteAddr is the socket's.
func (c *hijackedConn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

var (
	tokenH2C            = []byte("h2c")
	headerHTTP2Settings = []byte("HTTP2-Settings")
)

// connectionNames reports whether the request's Connection field names
// name (among its tokens).
func connectionNames(h *fasthttp.RequestHeader, name []byte) bool {
	for _, v := range h.PeekAll(fasthttp.HeaderConnection) {
		for tok := range bytes.SplitSeq(v, listComma) {
			if bytes.EqualFold(bytes.TrimSpace(tok), name) {
				return true
			}
		}
	}
	return false
}
