package server

//lint:file-ignore SA1019 x/net's http2.Server.ServeConn is the one API that serves a connection already accepted and classified, and an h2c upgrade's first request; x/net deprecates it for net/http's Server, which serves listeners only (on Go 1.27 the same call wraps net/http's implementation).

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"golang.org/x/net/http2"

	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/config"
)

// HTTP/2 clients: over TLS (ALPN h2), in cleartext with prior knowledge
// (the connection starts with the preface) and by the HTTP/1.1 upgrade to
// h2c. golang.org/x/net/http2's server speaks the protocol (framing, flow
// control, HPACK, the flood defenses); each stream is turned into a pooled
// fasthttp.RequestCtx and taken through the same request path as an
// HTTP/1.1 request (handle), and the response it leaves is written back to
// the stream. docs/ARCHITECTURE.md ("HTTP/2 clients") says why and what it
// costs.

// h2Settings are frontendPolicies.http's HTTP/2 settings.
type h2Settings struct {
	streamWindow, connWindow int32 // 0: x/net's defaults (1 MiB each)
	frameSize                uint32
	maxHeaderBytes           int // 0: net/http's default (1 MiB)
	pingAfter, pingTimeout   time.Duration
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

// The HTTP/2 limits that are not settings of the file.
const (
	// h2MaxStreams is SETTINGS_MAX_CONCURRENT_STREAMS: a client's streams
	// beyond it are refused, and more than four times as many reset
	// streams waiting for a handler (the rapid-reset attack) end the
	// connection (x/net's scheduleHandler).
	h2MaxStreams = 100
	// h2HeaderTable is SETTINGS_HEADER_TABLE_SIZE, the HPACK table the
	// client may make the gateway keep per connection.
	h2HeaderTable = 4096
	// h2ErrorBudget is how many protocol errors one connection may cause
	// (streams refused or reset by the server) before it is closed: each
	// is cheap for the server, but a client that keeps causing them is
	// not one to keep serving.
	h2ErrorBudget = 200
)

// h2WriteStall bounds how long a stream's response may wait for the client
// to take it (a client that never opens its flow-control window), as
// bodyIdleTimeout bounds the wait for a request body's next piece.
var h2WriteStall = newAtomicInt64(int64(60 * time.Second)) // settable by tests

// h2Conn is one client connection served in HTTP/2.
type h2Conn struct {
	b *bind
	// conn is what the streams see as their connection: the addresses,
	// and for TLS the peer's certificates.
	conn net.Conn
	tls  *tlsConn // nil in cleartext (h2c)
	hs   *http.Server
	// errors counts the connection's protocol errors (h2ErrorBudget).
	errors atomic.Int32
	// goingAway: the connection was told to send GOAWAY (goAway).
	goingAway atomic.Bool
}

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
	b.serveH2(c, nil, nil, nil)
	b.connClosed(c)
}

// serveH2 serves c in HTTP/2 until it closes: tc is the TLS connection c
// is (nil in cleartext); an h2c upgrade passes the request that asked for
// it and its HTTP2-Settings. The caller accounts for the connection's end.
func (b *bind) serveH2(c net.Conn, tc *tlsConn, upgrade *http.Request, settings []byte) {
	fs := &b.current.Load().frontend
	// The bytes are frames now, not request heads, and x/net keeps its
	// own time (idle timeout, pings): no read deadline of the bind's.
	if h := sock.HeadWatchOf(c); h != nil {
		h.Stop()
	}
	if tc != nil {
		_ = tc.raw.SetReadDeadline(time.Time{})
	}
	_ = c.SetReadDeadline(time.Time{})
	hc := &h2Conn{b: b, conn: c, tls: tc}
	srv := &http2.Server{
		MaxConcurrentStreams:         h2MaxStreams,
		MaxDecoderHeaderTableSize:    h2HeaderTable,
		MaxEncoderHeaderTableSize:    h2HeaderTable,
		MaxReadFrameSize:             fs.h2.frameSize,
		MaxUploadBufferPerStream:     fs.h2.streamWindow,
		MaxUploadBufferPerConnection: fs.h2.connWindow,
		IdleTimeout:                  fs.idle(),
		ReadIdleTimeout:              fs.h2.pingAfter,
		PingTimeout:                  fs.h2.pingTimeout,
		CountError:                   hc.countError,
	}
	hc.hs = &http.Server{
		MaxHeaderBytes: fs.h2.maxHeaderBytes,
		ErrorLog:       b.h2Log(),
	}
	// One http.Server per connection, so that this connection alone can
	// be told to go away (maxConnectionDuration) and drain can tell them
	// all (goAwayH2).
	if err := http2.ConfigureServer(hc.hs, srv); err != nil {
		b.gw.log.Debug("http2: configure", zap.Error(err))
		c.Close()
		return
	}
	// Drain waits for the connection until x/net closes it, after the
	// GOAWAY it sends and the streams in flight (goAwayH2).
	if w := stateWord(c); w != nil {
		w.Store(int32(connActive))
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
	srv.ServeConn(c, &http2.ServeConnOpts{BaseConfig: hc.hs, Handler: hc, UpgradeRequest: upgrade, Settings: settings})
	b.mu.Lock()
	delete(b.h2conns, hc)
	b.mu.Unlock()
	c.Close()
}

// h2Log is the bind's logger for x/net's messages, at debug level: they are
// about clients that broke the protocol.
func (b *bind) h2Log() *log.Logger {
	b.h2logOnce.Do(func() {
		b.h2log, _ = zap.NewStdLogAt(b.gw.log, zap.DebugLevel)
	})
	return b.h2log
}

// goAway has the connection send GOAWAY and close once its streams are
// done; once.
func (hc *h2Conn) goAway() {
	if hc.goingAway.CompareAndSwap(false, true) {
		go hc.hs.Shutdown(context.Background()) //nolint:errcheck // it tracks no connection: returns once it told this one
	}
}

// goAwayH2 tells every HTTP/2 connection of the bind to go away (drain).
func (b *bind) goAwayH2() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for hc := range b.h2conns {
		hc.goAway()
	}
}

// countError counts a protocol error of the connection (x/net's
// CountError) and closes the connection past its budget.
func (hc *h2Conn) countError(kind string) {
	if hc.errors.Add(1) == h2ErrorBudget {
		hc.b.gw.log.Debug("http2: connection closed after too many protocol errors", zap.String("last", kind), zap.Stringer("client", hc.conn.RemoteAddr()))
		hc.conn.Close()
	}
}

// h2Stream is a stream as the request path sees its connection (the
// request context's Conn): the connection's addresses and TLS identity,
// and read deadlines that bound the stream's body, not the connection's.
type h2Stream struct {
	hc *h2Conn
	w  http.ResponseWriter
	r  *http.Request
	// readDeadline is the deadline last passed to the stream, and
	// writeDeadline when the write deadline was last moved.
	readDeadline, writeMoved time.Time
}

var errH2StreamIO = io.ErrClosedPipe

func (s *h2Stream) Read([]byte) (int, error)         { return 0, errH2StreamIO }
func (s *h2Stream) Write([]byte) (int, error)        { return 0, errH2StreamIO }
func (s *h2Stream) Close() error                     { return nil }
func (s *h2Stream) LocalAddr() net.Addr              { return s.hc.conn.LocalAddr() }
func (s *h2Stream) RemoteAddr() net.Addr             { return s.hc.conn.RemoteAddr() }
func (s *h2Stream) SetDeadline(t time.Time) error    { return s.SetReadDeadline(t) }
func (s *h2Stream) SetWriteDeadline(time.Time) error { return nil }

// SetReadDeadline bounds the reads of the stream's request body (a body
// being forwarded moves it on with every read: requestBody). Each move
// costs x/net a message to its connection goroutine, so a later deadline
// is passed on only when it is a second past the last one; an earlier one
// at once.
func (s *h2Stream) SetReadDeadline(t time.Time) error {
	if !s.readDeadline.IsZero() && !t.IsZero() && !t.Before(s.readDeadline) && t.Sub(s.readDeadline) < time.Second {
		return nil
	}
	s.readDeadline = t
	return http.NewResponseController(s.w).SetReadDeadline(t)
}

// PeerCertificates is the client's verified certificate chain over TLS,
// for CEL's source identity (celrules).
func (s *h2Stream) PeerCertificates() []*x509.Certificate {
	if s.hc.tls == nil {
		return nil
	}
	return s.hc.tls.PeerCertificates()
}

// ServerFields are the connection's (sock.ServerFields): its start time,
// for maxConnectionDuration.
func (s *h2Stream) ServerFields() *sock.Server { return sock.ServerFields(s.hc.conn) }

// h2Exchange is the pooled state of one stream.
type h2Exchange struct {
	fctx   fasthttp.RequestCtx
	stream h2Stream
	body   h2RequestBody
}

var h2Exchanges = sync.Pool{New: func() any { return new(h2Exchange) }}

// ServeHTTP serves one stream: the request goes through the request path
// as any other, and the response it leaves is written to the stream.
func (hc *h2Conn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := h2Exchanges.Get().(*h2Exchange)
	x.stream = h2Stream{hc: hc, w: w, r: r}
	fctx := &x.fctx
	fctx.Init2(&x.stream, fasthttpLogger{hc.b.gw.log}, true)
	x.request(r)
	hc.b.handle(fctx)
	abort := hc.respond(x)
	if hc.b.draining.Load() || connTooOldNow(hc.b, hc.conn) {
		hc.goAway()
	}
	fctx.Request.Reset()
	fctx.Response.Reset()
	fctx.ResetUserValues()
	x.stream = h2Stream{}
	x.body = h2RequestBody{}
	h2Exchanges.Put(x)
	if abort {
		// The response was cut short: the stream is reset, so that the
		// client does not take what it got for the whole.
		panic(http.ErrAbortHandler)
	}
}

// connTooOldNow reports whether c has reached maxConnectionDuration.
func connTooOldNow(b *bind, c net.Conn) bool {
	life := b.current.Load().frontend.maxConnLife
	return life > 0 && connTooOld(c, monoNow(), life)
}

// request fills the exchange's fasthttp request from the stream's. The
// protocol is HTTP/1.1 to the request path: it is what goes to an HTTP/1.1
// upstream, and what the path's checks of HTTP/1.x expect.
func (x *h2Exchange) request(r *http.Request) {
	req := &x.fctx.Request
	h := &req.Header
	h.SetMethod(r.Method)
	h.SetRequestURI(r.RequestURI)
	h.SetProtocolBytes(protoHTTP11)
	if r.Host != "" {
		h.SetHost(r.Host)
	}
	for k, vv := range r.Header {
		switch k {
		case "Host", "Content-Length":
			continue
		}
		for _, v := range vv {
			h.Add(k, v)
		}
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		// No body (the stream ended with its head, or declared none).
		if len(r.Header["Content-Length"]) > 0 {
			h.SetContentLength(0)
		}
		return
	}
	x.body = h2RequestBody{r: r, req: req}
	req.SetBodyStream(&x.body, int(r.ContentLength))
	// The trailer fields the client announced (x/net keeps them out of
	// the header): their values come at the body's end.
	for k := range r.Trailer {
		_ = h.AddTrailer(k)
	}
}

// h2RequestBody is a stream's request body; at its end, the trailer fields
// the client sent (and announced, as x/net requires) join the request's
// trailer section, for the upstream.
type h2RequestBody struct {
	r   *http.Request
	req *fasthttp.Request
	eof bool
}

func (b *h2RequestBody) Read(p []byte) (int, error) {
	n, err := b.r.Body.Read(p)
	if err == io.EOF && !b.eof {
		b.eof = true
		for k, vv := range b.r.Trailer {
			if len(vv) == 0 || b.req.Header.AddTrailer(k) != nil {
				continue
			}
			for _, v := range vv {
				b.req.Header.Add(k, v)
			}
		}
	}
	return n, err
}

// h2Skip are the response fields that do not go on an HTTP/2 stream: the
// connection-specific ones (RFC 9113 8.2.2), and the framing, which x/net
// writes itself (Content-Length) or which trailers replace (Trailer).
var h2Skip = [][]byte{
	[]byte("Connection"), []byte("Keep-Alive"), []byte("Proxy-Connection"),
	[]byte("Transfer-Encoding"), []byte("Upgrade"), []byte("Trailer"),
	[]byte("Content-Length"),
}

func skipOnH2(k []byte) bool {
	for _, s := range h2Skip {
		if len(k) == len(s) && bytes.EqualFold(k, s) {
			return true
		}
	}
	return false
}

// h2Names are the common response field names, as fasthttp writes them:
// looked up, not copied, per response.
var h2Names = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Content-Type", "Content-Encoding", "Date", "Server", "Cache-Control", "Set-Cookie",
		"Location", "Etag", "Last-Modified", "Vary", "Expires", "Age", "Accept-Ranges", "Content-Range",
		"Content-Disposition", "Content-Language", "Access-Control-Allow-Origin", "Access-Control-Allow-Credentials",
		"Access-Control-Expose-Headers", "Strict-Transport-Security", "X-Content-Type-Options", "X-Frame-Options",
		"Www-Authenticate", "Retry-After", "X-Request-Id", "Grpc-Status", "Grpc-Message", "Grpc-Encoding", "Grpc-Accept-Encoding"} {
		m[k] = k
	}
	return m
}()

// copyBufs are the buffers a streamed response body is copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// respond writes the response the request path left in the exchange's
// context to the stream: its head, then its body, with a flush after each
// piece of a streamed body (an event stream's events go out as they come),
// then its trailer fields. It reports that a streamed body failed after its
// head went out: the stream must then be reset.
func (hc *h2Conn) respond(x *h2Exchange) (abort bool) {
	w, r := x.stream.w, x.stream.r
	resp := &x.fctx.Response
	status := resp.StatusCode()
	if status < 200 || status > 999 {
		// 1xx (a 101 cannot come: no upgrade travels on a stream) or no
		// status at all.
		resp.ResetBody()
		status = fasthttp.StatusBadGateway
	}
	hdr := w.Header()
	fillH2Header(hdr, resp)
	head := r.Method == http.MethodHead
	stream := resp.BodyStream()
	if stream == nil {
		body := resp.Body()
		if n := resp.Header.ContentLength(); head && n >= 0 {
			hdr["Content-Length"] = []string{strconv.Itoa(n)}
		}
		w.WriteHeader(status)
		if !head && len(body) > 0 {
			_, _ = w.Write(body)
		}
		hc.trailers(hdr, resp)
		return false
	}
	if n := resp.Header.ContentLength(); n >= 0 {
		hdr["Content-Length"] = []string{strconv.Itoa(n)}
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	var err error
	if !head {
		err = x.stream.copyBody(w, rc, stream)
	}
	if err == nil {
		hc.trailers(hdr, resp)
	}
	// Closing the stream gives its upstream connection back and records
	// the request (backend.ObserveStream).
	_ = resp.CloseBodyStream()
	return err != nil && err != errClientGone
}

// fillH2Header puts a response's fields in a stream's header map, but
// those HTTP/2 does not carry.
func fillH2Header(hdr http.Header, resp *fasthttp.Response) {
	// One backing array for the values: a field's value is a slice of it
	// (capped, so that a second value of the name gets one of its own).
	vals := make([]string, 0, 8)
	for k, v := range resp.Header.All() {
		if skipOnH2(k) {
			continue
		}
		key, ok := h2Names[string(k)]
		if !ok {
			key = string(k)
		}
		if prior, ok := hdr[key]; ok {
			hdr[key] = append(prior, string(v))
			continue
		}
		vals = append(vals, string(v))
		hdr[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if _, ok := hdr["Content-Type"]; !ok {
		// No Content-Type is invented: x/net would sniff one.
		hdr["Content-Type"] = nil
	}
}

// errClientGone is a write to a stream the client reset or left.
var errClientGone = io.ErrShortWrite

// copyBody copies a streamed response body to the stream, flushing each
// piece. A client that takes nothing for h2WriteStall ends it.
func (s *h2Stream) copyBody(w http.ResponseWriter, rc *http.ResponseController, body io.Reader) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			// The deadline moves on at most once a second (each move is a
			// message to x/net's connection goroutine).
			stall := time.Duration(h2WriteStall.Load())
			if now := deadlineAfter(0); now.Sub(s.writeMoved) >= min(time.Second, stall/4) {
				s.writeMoved = now
				_ = rc.SetWriteDeadline(now.Add(stall))
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return errClientGone
			}
			if rc.Flush() != nil {
				return errClientGone
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// trailers sends the response's trailer fields after its body.
func (hc *h2Conn) trailers(hdr http.Header, resp *fasthttp.Response) {
	for k := range resp.Header.Trailers() {
		if v := resp.Header.PeekBytes(k); v != nil {
			hdr[http.TrailerPrefix+string(k)] = []string{string(v)}
		}
	}
}

// upgradeH2C answers an HTTP/1.1 request asking to upgrade to h2c (RFC
// 7540 3.2: Upgrade: h2c, HTTP2-Settings, both named in Connection, and no
// body) with 101, and serves the connection in HTTP/2 from there; the
// request itself is answered on stream 1. It reports false, leaving the
// request to be served in HTTP/1.1, when the request does not qualify.
func (b *bind) upgradeH2C(fctx *fasthttp.RequestCtx) bool {
	h := &fctx.Request.Header
	if !bytes.EqualFold(h.Peek(fasthttp.HeaderUpgrade), tokenH2C) || declaredBodyLen(h) != 0 || !connectionNames(h, headerHTTP2Settings) {
		return false
	}
	raw := h.Peek("HTTP2-Settings")
	settings, err := base64.RawURLEncoding.DecodeString(string(bytes.TrimRight(raw, "=")))
	if err != nil || len(settings)%6 != 0 {
		return false
	}
	req := upgradeRequest(fctx)
	conn := fctx.Conn()
	done := b.startTunnel(conn, nil)
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(c net.Conn) {
		defer close(done)
		if _, err := io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"); err != nil {
			return
		}
		b.serveH2(&hijackedConn{Conn: c, raw: conn}, nil, req, settings)
	})
	return true
}

// hijackedConn is a connection fasthttp handed over after an upgrade
// (possibly a reader of the bytes it had read ahead); its server words and
// addresses are the socket's.
type hijackedConn struct {
	net.Conn
	raw net.Conn
}

// ServerFields are the socket's (sock.ServerFields).
func (c *hijackedConn) ServerFields() *sock.Server { return sock.ServerFields(c.raw) }

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

// upgradeRequest is the request of an h2c upgrade as x/net serves it on
// stream 1: the same request without the fields of the upgrade.
func upgradeRequest(fctx *fasthttp.RequestCtx) *http.Request {
	h := &fctx.Request.Header
	r := &http.Request{
		Method:     string(h.Method()),
		RequestURI: string(h.RequestURI()),
		Proto:      "HTTP/2.0",
		ProtoMajor: 2,
		Header:     http.Header{},
		Host:       string(h.Host()),
		Body:       http.NoBody,
		RemoteAddr: fctx.RemoteAddr().String(),
	}
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil {
		r.URL = u
	} else {
		r.URL = &url.URL{Path: "/"}
	}
	for k, v := range h.All() {
		switch {
		case bytes.EqualFold(k, headerHost), bytes.EqualFold(k, headerConnection), bytes.EqualFold(k, headerUpgrade),
			bytes.EqualFold(k, headerHTTP2Settings), bytes.EqualFold(k, headerContentLength):
			continue
		}
		r.Header.Add(string(k), string(v))
	}
	return r
}
