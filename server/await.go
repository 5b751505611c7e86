package server

import (
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/sock"
)

// requestHeadLen is the size on the wire of a request's head as the client
// sent it: the request line and the header block. Taken before policies
// change the request.
func requestHeadLen(h *fasthttp.RequestHeader) int {
	n := len(h.Method()) + 1 + len(h.RequestURI()) + 1 + len(h.Protocol()) + 2
	if raw := h.RawHeaders(); len(raw) > 0 {
		return n + len(raw)
	}
	return n + 2 // no fields: the empty line alone
}

// declaredBodyLen is the length of the request's body as its head declares
// it: Content-Length, 0 when the head has neither Content-Length nor
// Transfer-Encoding (a request without framing has no body, RFC 9112 6.3;
// fasthttp reports -2), or -1 for a chunked body.
func declaredBodyLen(h *fasthttp.RequestHeader) int {
	if n := h.ContentLength(); n != -2 {
		return n
	}
	return 0
}

// awaitMaxConns is how many client connections a bind may hold and still
// have responses await the next request. A connection waiting inside a write
// keeps fasthttp's write buffer (a touched page of it, about 4 KiB) while it
// is idle; with many connections, most are idle and memory matters more
// than the system call saved (10,000 idle connections: 235 MiB instead of
// 189 MiB).
var awaitMaxConns = newAtomicInt64(1024) // settable by tests

// newAtomicInt64 returns an atomic.Int64 holding v, for the package's
// settings that tests change while other tests' connections may read them.
func newAtomicInt64(v int64) *atomic.Int64 {
	var n atomic.Int64
	n.Store(v)
	return &n
}

// armResponseAwait lets the client connection wait for the next request
// inside the write that completes this response (sock.ArmResponseAwait),
// saving the read that would find nothing yet. Only a keep-alive HTTP/1.1
// exchange without request body and with a buffered response qualifies,
// on a bind below awaitMaxConns connections; the connection itself checks
// that nothing pipelined is waiting unparsed.
func (b *bind) armResponseAwait(rs *requestState, status int) {
	fctx := rs.pc.Fast
	sc, ok := fctx.Conn().(*sock.Conn)
	if !ok {
		return
	}
	req, resp := &fctx.Request, &fctx.Response
	cl := declaredBodyLen(&req.Header)
	if cl >= 0 {
		sc.AccountRequest(rs.headLen + cl)
	} else {
		sc.AccountRequest(-1)
	}
	if cl != 0 || b.open.Load() > awaitMaxConns.Load() || req.IsBodyStream() || resp.IsBodyStream() || fctx.Hijacked() ||
		rs.http10 || req.Header.ConnectionClose() || resp.ConnectionClose() || rs.bind.frontend.maxConnLife > 0 {
		sc.ArmResponseAwait(-1, time.Time{}) // disarms
		return
	}
	body := len(resp.Body())
	if req.Header.IsHead() || status < 200 || status == fasthttp.StatusNoContent || status == fasthttp.StatusNotModified {
		body = 0
	}
	sc.ArmResponseAwait(body, deadlineAfter(rs.bind.frontend.idle()))
}
