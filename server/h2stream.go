package server

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/relaygate/gateway/backend/sock"
)

// h2Exchange is one stream: the pooled request context its request is
// decoded into and its response read from, and the stream's protocol
// state.
type h2Exchange struct {
	fctx   fasthttp.RequestCtx
	stream h2Stream
	body   h2RequestBody
	h2State
}

// h2State is an exchange's protocol state. What the reader sets before
// the handler starts is read-only from then on; the rest is guarded by
// the connection's mu, except the timers (their waiters').
type h2State struct {
	hc   *h2Conn
	id   uint32
	head bool // a HEAD request
	// expect100: the client waits for 100 (Continue) before its body;
	// sent100 once it went.
	expect100, sent100 bool

	state           int
	running, queued bool // its handler runs, or waits to
	// counted: the stream counts toward h2MaxStreams (h2Conn.active): it
	// is in the table and not closed (RFC 9113 5.1.2): neither both of
	// its sides ended nor reset.
	counted bool
	// reset: the stream was reset (by either side) or the connection
	// ended before the response did; ended: the response's END_STREAM
	// was queued.
	reset, ended bool
	// The request body: reof once the client ended its side; bodyClosed
	// once the handler no longer reads it. declLen is its content-length
	// (-1: none), gotLen what came.
	reof, bodyClosed bool
	declLen, gotLen  int64
	// headerBytes is the size of the request's header list, counted in
	// its connection's headerBytes while the stream is open.
	headerBytes int
	// sentAt is when the gateway last sent on the stream (monoNow; 0:
	// never): the answer's activity keeps a wait for the body alive
	// (answerFlows).
	sentAt atomic.Int64
	// recvWindow is what the client may still send on the stream;
	// recvTaken what was read since the last WINDOW_UPDATE.
	recvWindow, recvTaken int64
	// rbuf[roff:] is the body received and not yet read.
	rbuf []byte
	roff int
	// trailers are the request's trailer fields, name then value, until
	// the body's end hands them to the request.
	trailers []string
	// sendWindow is the stream's window for the gateway's DATA; swaiting
	// says the stream is among the connection's senders.
	sendWindow int64
	swaiting   bool
	// stalledAt is when the response began waiting for a window the
	// client keeps shut, since its last bytes were queued (monoNow; 0:
	// not waiting): h2WriteStall from then, the stream is reset, however
	// often its writer is woken meanwhile.
	stalledAt time.Duration
	// ctx is the stream's context, made when asked for (an HTTP/2
	// upstream exchange) and canceled when the stream ends.
	ctx    context.Context
	cancel context.CancelFunc
	// watched is the upstream connection of an HTTP/1.1 exchange waiting
	// for its answer (backend.ClientWatch): a reset moves its deadline to
	// the past.
	watched net.Conn

	// rwake and swake wake the body's reader and the response's writer.
	rwake, swake   chan struct{}
	rtimer, stimer *time.Timer
}

var h2Exchanges = sync.Pool{New: func() any {
	x := new(h2Exchange)
	x.rwake = make(chan struct{}, 1)
	x.swake = make(chan struct{}, 1)
	x.declLen = -1
	return x
}}

func acquireH2Exchange() *h2Exchange { return h2Exchanges.Get().(*h2Exchange) }

// releaseH2Exchange resets x for its next stream, once neither the reader
// nor a handler holds it.
func releaseH2Exchange(x *h2Exchange) {
	x.fctx.Request.Reset()
	x.fctx.Response.Reset()
	x.fctx.ResetUserValues()
	x.fctx.Hijack(nil)
	if x.cancel != nil {
		x.cancel()
	}
	rbuf := x.rbuf[:0]
	if cap(rbuf) > 64<<10 {
		rbuf = nil
	}
	select {
	case <-x.rwake:
	default:
	}
	select {
	case <-x.swake:
	default:
	}
	x.h2State = h2State{rbuf: rbuf, trailers: x.trailers[:0], declLen: -1,
		rwake: x.rwake, swake: x.swake, rtimer: x.rtimer, stimer: x.stimer}
	x.stream.hc, x.stream.x = nil, nil
	x.stream.readDeadline.Store(0)
	x.body = h2RequestBody{}
	h2Exchanges.Put(x)
}

// open makes x stream id of hc (mu held).
func (x *h2Exchange) open(hc *h2Conn, id uint32, state int) {
	x.hc, x.id, x.state = hc, id, state
	x.reof = state == h2HalfClosedRemote
	x.recvWindow = int64(hc.set.streamWindow)
	x.sendWindow = hc.peerWindow
	x.stream.hc, x.stream.x = hc, x
}

// sameAuthority reports whether two authorities name one entity: equal but
// for case, and for a port one names and the other leaves to its scheme's
// default (80 or 443).
func sameAuthority(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	trim := func(s string) string {
		if t, ok := strings.CutSuffix(s, ":443"); ok {
			return t
		}
		t, _ := strings.CutSuffix(s, ":80")
		return t
	}
	return strings.EqualFold(trim(a), trim(b))
}

// request fills the exchange's request from a decoded head, and reports
// false when the head is malformed (RFC 9113 8.3.1). The protocol is
// HTTP/1.1 to the request path: it is what goes to an HTTP/1.1 upstream,
// and what the path's checks of HTTP/1.x expect.
func (x *h2Exchange) request(b *h2Block) bool {
	h := &x.fctx.Request.Header
	if !httpguts.ValidHeaderFieldName(b.method) {
		// A method is a token (RFC 9110 9.1): "GET /admin" would be a
		// request line of its own to an HTTP/1.1 upstream.
		return false
	}
	if b.method == fasthttp.MethodConnect {
		if b.pseudo&(pseudoPath|pseudoScheme) != 0 || b.authority == "" {
			return false
		}
		h.SetRequestURI(b.authority) // (refused: begin)
	} else {
		if b.path == "" || b.scheme != "http" && b.scheme != "https" {
			return false
		}
		if b.path[0] != '/' && (b.path != "*" || b.method != fasthttp.MethodOptions) || !validTarget(b.path) {
			return false
		}
		h.SetRequestURI(b.path)
	}
	if b.authority != "" && b.host != "" && !sameAuthority(b.authority, b.host) {
		// A Host naming another entity than :authority makes the request
		// malformed (RFC 9113 8.3.1): which one a policy, a backend or a
		// log reads would differ.
		return false
	}
	h.SetMethod(b.method)
	h.SetProtocolBytes(protoHTTP11)
	if b.authority != "" {
		h.SetHost(b.authority)
	} else if b.host != "" {
		h.SetHost(b.host)
	}
	x.head = b.method == fasthttp.MethodHead
	x.expect100 = b.expect100
	x.declLen = b.contentLength
	if b.endStream {
		if b.contentLength > 0 {
			// A body declared and none sent.
			return false
		}
		if b.contentLength == 0 {
			h.SetContentLength(0)
		}
		return true
	}
	x.body = h2RequestBody{x: x}
	x.fctx.Request.SetBodyStream(&x.body, int(b.contentLength))
	return true
}

// endRemote marks the client's side of the stream over (mu held).
func (x *h2Exchange) endRemote() {
	x.state = h2HalfClosedRemote
	x.reof = true
	if x.ended {
		// Both sides are over: the stream is closed.
		x.hc.uncount(x)
	}
	x.wakeReader()
}

// endLocal marks the response's END_STREAM queued (mu held). A stream
// whose client side is over is closed from here on (RFC 9113 5.1): it no
// longer counts toward h2MaxStreams, though its handler may not have
// returned yet. One the client still sends on counts until the reset
// that ends it (streamDone).
func (x *h2Exchange) endLocal() {
	x.ended = true
	if x.state == h2HalfClosedRemote {
		x.hc.uncount(x)
	}
}

// giveBack returns n bytes read of the stream's body to the client, in a
// WINDOW_UPDATE once enough have gathered (mu held).
func (x *h2Exchange) giveBack(n int64) {
	x.recvTaken += n
	if x.state == h2Open && x.recvTaken >= int64(x.hc.set.streamWindow)/2 && !x.hc.dead {
		_ = x.hc.fw.WriteWindowUpdate(x.id, uint32(x.recvTaken))
		x.recvWindow += x.recvTaken
		x.recvTaken = 0
	}
}

func (x *h2Exchange) cancelContext() {
	if x.cancel != nil {
		x.cancel()
	}
	if x.watched != nil {
		_ = x.watched.SetDeadline(sock.LongAgo)
		x.watched = nil
	}
}

// Watch, Unwatch and Gone make the stream the backend.ClientWatch of its
// HTTP/1.1 upstream exchange: a reset ends the wait for the answer.
func (s *h2Stream) Watch(c net.Conn) {
	x, hc := s.x, s.hc
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if x.reset {
		_ = c.SetDeadline(sock.LongAgo)
		return
	}
	x.watched = c
}

// Unwatch ends the watch Watch began and reports whether the stream was
// reset.
func (s *h2Stream) Unwatch() bool {
	x, hc := s.x, s.hc
	hc.mu.Lock()
	defer hc.mu.Unlock()
	x.watched = nil
	return x.reset
}

// Gone reports whether the stream was reset (or its connection ended).
func (s *h2Stream) Gone() bool {
	x, hc := s.x, s.hc
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return x.reset
}

func (x *h2Exchange) wakeReader() {
	select {
	case x.rwake <- struct{}{}:
	default:
	}
}

func (x *h2Exchange) wakeSender() {
	select {
	case x.swake <- struct{}{}:
	default:
	}
}

// waitSender waits for a wake of the response's writer, up to d.
func (x *h2Exchange) waitSender(d time.Duration) {
	if x.stimer == nil {
		x.stimer = time.NewTimer(d)
	} else {
		x.stimer.Reset(d)
	}
	select {
	case <-x.swake:
		x.stimer.Stop()
	case <-x.stimer.C:
	}
}

// waitReader waits for a wake of the body's reader, up to the stream's
// read deadline (false).
func (x *h2Exchange) waitReader() bool {
	for {
		dl := x.stream.readDeadline.Load()
		if dl == 0 {
			<-x.rwake
			return true
		}
		d := time.Until(time.Unix(0, dl))
		if d <= 0 {
			if d = x.answerFlows(); d <= 0 {
				return false
			}
		}
		if x.rtimer == nil {
			x.rtimer = time.NewTimer(d)
		} else {
			x.rtimer.Reset(d)
		}
		select {
		case <-x.rwake:
			x.rtimer.Stop()
			return true
		case <-x.rtimer.C:
		}
	}
}

// answerFlows is how much longer a wait for the request body may go on
// past its deadline because the answer is moving: a stream is idle only
// when neither side sent for bodyIdleTimeout (Envoy's stream idle timeout
// counts both ways), so a gRPC watch, or a duplex stream whose client
// sends nothing while its server does, lives on. It was reset after 60 s.
// 0 or less when the answer did not move that recently.
func (x *h2Exchange) answerFlows() time.Duration {
	sent := x.sentAt.Load()
	if sent == 0 {
		return 0
	}
	return time.Duration(sent) + time.Duration(bodyIdleTimeout.Load()) - monoNow()
}

// h2Stream is a stream as the request path sees its connection (the
// request context's Conn): the connection's addresses and TLS identity,
// and read deadlines that bound the stream's body, not the connection's.
type h2Stream struct {
	hc *h2Conn
	x  *h2Exchange
	// readDeadline bounds the wait for the body's next piece (UnixNano,
	// 0 for none).
	readDeadline atomic.Int64
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
// being forwarded moves it on with every read: requestBody).
func (s *h2Stream) SetReadDeadline(t time.Time) error {
	var n int64
	if !t.IsZero() {
		n = t.UnixNano()
	}
	s.readDeadline.Store(n)
	return nil
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

// context is the stream's context, canceled when the stream is reset or
// ends (an HTTP/2 upstream exchange ends with it).
func (s *h2Stream) context() context.Context {
	x, hc := s.x, s.hc
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if x.ctx == nil {
		x.ctx, x.cancel = context.WithCancel(context.Background())
		if x.reset {
			x.cancel()
		}
	}
	return x.ctx
}

// closeBody ends the handler's reading of the request body: a read in
// progress returns, and what arrives from here on is dropped.
func (s *h2Stream) closeBody() {
	x, hc := s.x, s.hc
	hc.mu.Lock()
	x.bodyClosed = true
	if unread := int64(len(x.rbuf) - x.roff); unread > 0 {
		hc.giveBack(unread)
		x.rbuf, x.roff = x.rbuf[:0], 0
	}
	x.wakeReader()
	hc.mu.Unlock()
}

// h2RequestBody is a stream's request body as the request path reads it;
// at its end, the trailer fields the client sent join the request's
// trailer section, for the upstream.
type h2RequestBody struct{ x *h2Exchange }

var (
	errH2BodyReset  = errors.New("http2: stream reset before the request body's end")
	errH2BodyClosed = errors.New("http2: request body closed")
)

// mayWait reports whether a read may wait for the client: the stream's
// body has not all come yet.
func (b *h2RequestBody) mayWait() bool {
	x := b.x
	hc := x.hc
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return !x.reof && !x.reset && !hc.dead && !x.bodyClosed
}

func (b *h2RequestBody) Read(p []byte) (int, error) {
	x := b.x
	hc := x.hc
	hc.mu.Lock()
	for {
		if x.bodyClosed {
			hc.mu.Unlock()
			return 0, errH2BodyClosed
		}
		if avail := len(x.rbuf) - x.roff; avail > 0 {
			n := copy(p, x.rbuf[x.roff:])
			x.roff += n
			if x.roff == len(x.rbuf) {
				x.rbuf, x.roff = x.rbuf[:0], 0
			}
			queued := len(hc.wbuf)
			x.giveBack(int64(n))
			hc.giveBack(int64(n))
			update := len(hc.wbuf) > queued
			hc.mu.Unlock()
			if update {
				hc.flush(false)
			}
			return n, nil
		}
		if x.reof {
			x.takeTrailers()
			hc.mu.Unlock()
			return 0, io.EOF
		}
		if x.reset || hc.dead {
			hc.mu.Unlock()
			return 0, errH2BodyReset
		}
		send100 := x.expect100 && !x.sent100
		if send100 {
			// The client waits for it before sending the body.
			x.sent100 = true
			hc.hbuf = hc.hbuf[:0]
			_ = hc.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "100"})
			hc.writeBlock(x.id, false)
		}
		hc.mu.Unlock()
		if send100 {
			hc.flush(false)
		}
		if !x.waitReader() {
			return 0, os.ErrDeadlineExceeded
		}
		hc.mu.Lock()
	}
}

// takeTrailers hands the trailer fields the client sent to the request,
// as its trailer section (mu held).
func (x *h2Exchange) takeTrailers() {
	h := &x.fctx.Request.Header
	for i := 0; i+1 < len(x.trailers); i += 2 {
		k, v := x.trailers[i], x.trailers[i+1]
		if h.AddTrailer(k) != nil {
			// One a trailer section may not hold (RFC 9110 6.5.1).
			continue
		}
		h.Add(k, v)
	}
	x.trailers = x.trailers[:0]
}

// run serves one stream on its own goroutine: the request goes through
// the request path as any other, and the response it leaves is written to
// the stream.
func (hc *h2Conn) run(x *h2Exchange) {
	fctx := &x.fctx
	fctx.Init2(&x.stream, fasthttpLogger{hc.b.gw.log}, true)
	hc.b.handle(fctx) // (which refuses a CONNECT: begin)
	var abort bool
	if fctx.Hijacked() {
		// A tunnel the request path began has nothing to run on: it is
		// dropped, and the stream reset.
		hc.b.awaitTunnel(&x.stream)
		abort = true
	} else {
		abort = hc.respond(x)
	}
	if hc.b.draining.Load() || connTooOldNow(hc.b, hc.conn) {
		hc.goAway()
	}
	hc.streamDone(x, abort)
}

// streamDone ends a stream whose handler returned: a response cut short is
// reset (INTERNAL_ERROR, so that the client does not take what it got for
// the whole); a stream the client still sends on is reset with NO_ERROR
// (RFC 9113 8.1: the rest of the request is not wanted). The output is
// then written, with that of the streams ready at the same time.
func (hc *h2Conn) streamDone(x *h2Exchange, abort bool) {
	hc.mu.Lock()
	x.running = false
	if hc.streams[x.id] == x {
		switch {
		case abort || !x.ended:
			hc.writeReset(x.id, http2.ErrCodeInternal)
		case x.state == h2Open:
			hc.writeReset(x.id, http2.ErrCodeNo)
		}
		hc.closeStream(x) // releases x
	} else {
		releaseH2Exchange(x)
	}
	hc.handlerDone()
	hc.mu.Unlock()
	hc.flush(true)
}

// errClientGone is a write to a stream the client reset or left.
var errClientGone = io.ErrShortWrite

// copyBufs are the buffers a streamed response body is copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// respond writes the response the request path left in the exchange's
// context to the stream: its head, then its body (a streamed one piece by
// piece as it comes, each written at once: an event stream's events, gRPC's
// messages), then its trailer fields. It reports that a streamed body failed
// after its head went out: the stream must then be reset.
func (hc *h2Conn) respond(x *h2Exchange) (abort bool) {
	resp := &x.fctx.Response
	status := resp.StatusCode()
	if status < 200 || status > 999 {
		// 1xx (a 101 cannot come: no upgrade travels on a stream) or no
		// status at all.
		resp.ResetBody()
		status = fasthttp.StatusBadGateway
	}
	// 204 and 304 have no body (RFC 9110 6.4.1).
	bodyOK := status != fasthttp.StatusNoContent && status != fasthttp.StatusNotModified
	stream := resp.BodyStream()
	if stream == nil {
		body := resp.Body()
		cl := -1
		if bodyOK {
			cl = len(body)
			if x.head && cl == 0 {
				// A proxied HEAD's answer has no body and its length
				// in the head; one the gateway made has its body, which
				// the length is that of (RFC 9110 8.6: what GET would
				// send).
				cl = max(resp.Header.ContentLength(), -1)
			}
		}
		if x.head || !bodyOK {
			body = nil
		}
		trailers := hasTrailers(&resp.Header)
		if hc.writeHead(x, status, &resp.Header, cl, len(body) == 0 && !trailers) != nil {
			return false
		}
		if len(body) > 0 && hc.writeData(x, body, !trailers) != nil {
			return false
		}
		if trailers {
			_ = hc.writeTrailers(x, &resp.Header)
		}
		return false
	}
	// Closing the stream gives its upstream connection back and records
	// the request (backend.ObserveStream).
	defer resp.CloseBodyStream() //nolint:errcheck
	cl := max(resp.Header.ContentLength(), -1)
	end := x.head || !bodyOK
	if hc.writeHead(x, status, &resp.Header, cl, end) != nil || end {
		return false
	}
	hc.flush(false)
	err := hc.copyBody(x, stream)
	return err != nil && err != errClientGone
}

// hasTrailers reports whether the response has trailer fields to send.
func hasTrailers(h *fasthttp.ResponseHeader) bool {
	for k := range h.Trailers() {
		if h.PeekBytes(k) != nil {
			return true
		}
	}
	return false
}

// copyBody copies a streamed response body to the stream, writing each
// piece as it comes, then ends the stream (with the trailer section when
// there is one). A gRPC answer that times out between two messages ends
// with DEADLINE_EXCEEDED in its trailers (grpcTimedOut); any other failure
// is returned, and the stream reset.
func (hc *h2Conn) copyBody(x *h2Exchange, body io.Reader) error {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var msgs grpcFraming
	grpc := isGRPC(x.fctx.Response.Header.ContentType())
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if grpc {
				msgs.take(buf[:n])
			}
			if hc.writeData(x, buf[:n], false) != nil {
				return errClientGone
			}
			hc.flush(true)
		}
		if err == io.EOF {
			h := &x.fctx.Response.Header
			if hasTrailers(h) {
				err = hc.writeTrailers(x, h)
			} else {
				err = hc.writeData(x, nil, true)
			}
			if err != nil {
				return errClientGone
			}
			return nil
		}
		if err != nil {
			if grpc && msgs.between() && bodyTimedOut(err) {
				return hc.grpcTimedOut(x)
			}
			return err
		}
	}
}

// bodyTimedOut reports whether a streamed body's read failed for a
// deadline (the route's timeout, grpc-timeout, a backend timeout).
func bodyTimedOut(err error) bool {
	return errors.Is(err, fasthttp.ErrTimeout) || sock.IsTimeout(err)
}

// grpcTimedOut ends a gRPC answer that ran out of time after its head went
// out, between two of its messages, as the gateway's answer to a timeout
// reaches a gRPC client before it (grpcLocalReply): a trailer section of
// grpc-status 4 (DEADLINE_EXCEEDED) and grpc-message, ending the stream.
// Envoy resets the stream instead (RST_STREAM, which clients take for
// INTERNAL or UNAVAILABLE); a status says what happened. Cut inside a
// message the answer cannot end so: the stream is reset.
func (hc *h2Conn) grpcTimedOut(x *h2Exchange) error {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if x.reset || hc.dead {
		return errClientGone
	}
	hc.hbuf = hc.hbuf[:0]
	_ = hc.henc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: strconv.Itoa(grpcDeadlineExceeded)})
	_ = hc.henc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: "upstream request timeout"})
	hc.writeBlock(x.id, true)
	x.endLocal()
	return nil
}

// grpcFraming follows gRPC's length-prefixed messages (a flag byte, a
// 4-byte length, the message) through a response body, to tell whether it
// stopped between two of them.
type grpcFraming struct {
	head int    // bytes of the current message's prefix read (0–4)
	size uint32 // its length, as far as read
	left uint32 // bytes of the current message still to come
}

// take follows the body's next bytes.
func (g *grpcFraming) take(p []byte) {
	for len(p) > 0 {
		if g.left > 0 {
			k := len(p)
			if uint64(k) > uint64(g.left) {
				k = int(g.left)
			}
			g.left -= uint32(k)
			p = p[k:]
			continue
		}
		if g.head > 0 {
			g.size = g.size<<8 | uint32(p[0])
		}
		g.head++
		p = p[1:]
		if g.head == 5 {
			g.left, g.head, g.size = g.size, 0, 0
		}
	}
}

// between reports whether the body stopped between two messages.
func (g *grpcFraming) between() bool { return g.head == 0 && g.left == 0 }

// validTarget reports whether an HTTP/2 :path holds a request target an
// HTTP/1.1 request line can carry as it is: no whitespace or control
// characters (RFC 9112 3.2; HTTP/1.1 requests with them get 400 here
// too), and no fragment.
func validTarget(p string) bool {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f || c == '#' {
			return false
		}
	}
	return true
}
