package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extproc"
)

// requestBody is a client's streamed request body as the upstream request
// reads it. It states two things fasthttp's request stream leaves unsaid:
//
//   - A chunked body whose connection ends where the next chunk header
//     should start is cut short, not complete. fasthttp's decoder reports
//     io.EOF there just as after the last chunk. The client connection
//     (readEnder) tells the two apart: a complete body never needs a byte
//     past its end, so only a cut one makes the read that returned io.EOF
//     reach the end of the connection.
//   - A read error sticks. fasthttp's chunked writer drops an error that
//     comes with data and reads again, which after a broken chunk finds the
//     end of the connection and would close the body as if it were whole.
//
// Either way the upstream request is never completed (its connection is
// closed), and the client gets a 4xx: the fault is the client's, not the
// backend's. It also counts the bytes read, for the access log and metrics.
type requestBody struct {
	bodyState
	// interrupted says the gateway stopped the body's reading
	// (InterruptBody, or the deadline): a read that fails from then on is
	// no failure of the client's, since the upstream needs no more of the
	// body.
	interrupted atomic.Bool
	// deadline is the request's deadline while it goes upstream (UnixNano,
	// 0 for none: setDeadline). Atomic: a body may be read on a goroutine
	// of its own (an HTTP/2 exchange's pump, extProc's) while the request's
	// moves on to another attempt.
	deadline atomic.Int64
}

// bodyState is what a requestBody knows of one request's body; reset
// clears it whole, so a field added here cannot outlive its request.
type bodyState struct {
	r      io.Reader
	conn   readEnder // nil when the connection cannot tell
	client net.Conn
	limit  time.Time // bodyReadTimeout after the body began
	want   int       // the declared length, -1 for a chunked body
	whole  bool      // the body was in memory when wrapped (MayWait)
	n      int
	err    error // the client's failure, once there is one
	eof    bool  // the body was read to its end
	// record is what has been read of a body of unknown length that a
	// retry may send again or a mirror copy (startRecording): at most
	// recordMax bytes, the recording given up (recordMax -1) past them.
	record    []byte
	recordMax int
}

// errBodyInterrupted ends a body whose reading the gateway stopped.
var errBodyInterrupted = errors.New("request body not read to its end: the upstream answered first")

// errBodyDeadline ends a body whose reading the request's deadline cut
// (setDeadline): the exchange timed out (backend.Classify), and the client
// gets 504, not 408.
var errBodyDeadline = fmt.Errorf("request body not read to its end: %w", os.ErrDeadlineExceeded)

// readEnder is a client connection that knows whether a read found its end
// (sock.Conn, sock.PromptConn).
type readEnder interface{ ReadEnds() int }

// clientBodyError is a failure reading the client's request body.
type clientBodyError struct{ err error }

func (e *clientBodyError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *clientBodyError) Unwrap() error { return e.err }

// ClientBody marks the failure as the client's (policy.ClientBodyError).
func (e *clientBodyError) ClientBody() {}

var (
	_ policy.ClientBodyError  = (*clientBodyError)(nil)
	_ extproc.EndWritesHeader = (*requestBody)(nil)
)

// wrap puts b in front of req's body stream. A body of declared length up
// to prefetched was read whole before the handler ran (fasthttp's
// MaxRequestBodySize).
func (b *requestBody) wrap(req *fasthttp.Request, conn net.Conn, prefetched int) {
	n := req.Header.ContentLength()
	b.reset()
	b.r, b.want, b.client, b.limit = req.BodyStream(), n, conn, deadlineAfter(bodyReadTimeout)
	b.whole = n >= 0 && n <= prefetched
	b.conn, _ = conn.(readEnder)
	req.SetBodyStream(b, n)
}

func (b *requestBody) reset() {
	b.bodyState = bodyState{}
	b.interrupted.Store(false)
	b.deadline.Store(0)
}

// setDeadline bounds the body's reads by t (zero: no bound) while the
// request goes upstream: requestTimeout and backendRequestTimeout count
// from the start of the exchange to the full response, and a slow client
// still sending its body is within it. A read that t cuts ends the body
// with errBodyDeadline, as if the gateway had stopped it (interrupted):
// the exchange fails as timed out, and an HTTP/1.x client's connection
// closes after the answer, its body unread. The bound is the read's own
// deadline, taken by each read as it begins (Read), so it needs no timer
// and wakes a read on every transport (netpoll's too, whose deadlines a
// read looks at only as it begins: InterruptRead).
func (b *requestBody) setDeadline(t time.Time) {
	var n int64
	if !t.IsZero() {
		n = t.UnixNano()
	}
	b.deadline.Store(n)
}

// EndWritesHeader reports whether the read that ends the body writes the
// request's header h (extproc.EndWritesHeader): fasthttp's decoder reads a
// chunked body's trailer section into h, and an HTTP/2 stream's announced
// trailer fields join h (h2RequestBody). extProc's full-duplex pump, which
// reads the body on a goroutine of its own, then reads only while the
// request's goroutine leaves h alone.
func (b *requestBody) EndWritesHeader(h *fasthttp.RequestHeader) bool {
	if _, ok := b.r.(*h2RequestBody); ok {
		for range h.Trailers() {
			return true
		}
		return false
	}
	return b.want < 0
}

// active reports whether b stands for the current request's body.
func (b *requestBody) active() bool { return b.r != nil }

func (b *requestBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	ends := 0
	if b.conn != nil {
		ends = b.conn.ReadEnds()
	}
	// Each piece must come within bodyIdleTimeout (the data path's
	// connections take a later deadline without a system call), and
	// before the request's deadline while it goes upstream (cut).
	cut := false
	if b.client != nil {
		d := deadlineAfter(time.Duration(bodyIdleTimeout.Load()))
		if d.After(b.limit) {
			d = b.limit
		}
		if dl := b.deadline.Load(); dl != 0 && dl <= d.UnixNano() {
			d, cut = time.Unix(0, dl), true
		}
		_ = b.client.SetReadDeadline(d)
	}
	if b.interrupted.Load() {
		// Looked at after the deadline moved: an InterruptRead that came
		// before it is seen here, one that comes after it moves it back.
		b.err = errBodyInterrupted
		return 0, b.err
	}
	n, err := b.r.Read(p)
	b.n += n
	if b.recordMax > 0 && n > 0 {
		if len(b.record)+n > b.recordMax {
			b.record, b.recordMax = nil, -1
		} else {
			b.record = append(b.record, p[:n]...)
		}
	}
	if err == io.EOF && (b.want < 0 && b.conn != nil && b.conn.ReadEnds() != ends || b.want >= 0 && b.n < b.want) {
		// A chunked body whose connection ended between chunks, or a body
		// shorter than its Content-Length (fasthttp's stream reports a
		// client that closes early as io.EOF).
		err = io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		switch {
		case b.interrupted.Load():
			b.err = errBodyInterrupted
		case cut && sock.IsTimeout(err):
			// The request's deadline passed while the client was still
			// sending: the gateway stops reading (setDeadline).
			b.interrupted.Store(true)
			b.err = errBodyDeadline
		default:
			b.err = &clientBodyError{err: err}
		}
		return n, b.err
	}
	b.eof = b.eof || err == io.EOF
	return n, err
}

// InterruptRead ends a read of the body in progress and fails later ones,
// from any goroutine (backend.ReadInterrupter): the upstream the body goes
// to hung up. An HTTP/2 client's stream body is closed; an HTTP/1.x
// client's connection gets a read deadline long past (not on netpoll,
// where the read ends with the client's next bytes or the body idle
// timeout: deadlineInterrupts). The connection is closed after the
// response, its body unread (finish, or InterruptBody).
func (b *requestBody) InterruptRead() {
	b.interrupted.Store(true)
	switch c := b.client.(type) {
	case nil:
	case *h2Stream:
		c.closeBody()
	default:
		if deadlineInterrupts(c) {
			_ = c.SetReadDeadline(sock.LongAgo)
		}
	}
}

// MayWait reports whether a read of the body may wait for the client: the
// rest of it is not in memory already (backend.ReadInterrupter).
func (b *requestBody) MayWait() bool {
	if b.eof || b.err != nil {
		return false
	}
	if hb, ok := b.r.(*h2RequestBody); ok {
		return hb.mayWait()
	}
	return !b.whole
}

var _ backend.ReadInterrupter = (*requestBody)(nil)

// ended reports whether the body was read to its end.
func (b *requestBody) ended() bool { return b.eof }

// failed returns the client's failure to send the body, nil when there
// was none (or the gateway stopped reading it, its deadline included).
func (b *requestBody) failed() error {
	if b.err == errBodyInterrupted || b.err == errBodyDeadline {
		return nil
	}
	return b.err
}

// readAll reads the rest of the body of declared length n (n >= 0) whole,
// and makes it the request's buffered body.
func (b *requestBody) readAll(req *fasthttp.Request, n int) error {
	buf := make([]byte, n)
	if _, err := io.ReadFull(b, buf); err != nil {
		if b.err == nil {
			b.err = &clientBodyError{err: io.ErrUnexpectedEOF}
		}
		return b.err
	}
	req.SetBodyRaw(buf)
	return nil
}

// startRecording has b keep what is read of a body of unknown length
// (chunked, or an HTTP/2 stream's without content-length), up to limit
// bytes, while it streams to the first attempt: bufferBody.
func (b *requestBody) startRecording(limit int) {
	b.record, b.recordMax = nil, limit
}

// recordedWhole returns the body as recorded when it was read to its end
// within the recording's limit, reading nothing more.
func (b *requestBody) recordedWhole() ([]byte, bool) {
	if b.recordMax <= 0 || !b.eof || b.err != nil {
		return nil, false
	}
	return b.record, true
}

// recorded returns the whole body as recorded, reading what the first
// attempt left unread (an upstream that answered before the body's end),
// as far as the recording's limit; ok is false when the body is longer,
// was not recorded, or its reading failed or was cut by the gateway.
func (b *requestBody) recorded() (body []byte, ok bool) {
	var buf [16 << 10]byte
	for b.recordMax > 0 && !b.eof && b.err == nil {
		_, _ = b.Read(buf[:]) // (a failure sticks in b.err)
	}
	body, ok = b.recordedWhole()
	if ok && body == nil {
		body = []byte{} // an empty body, recorded
	}
	return body, ok
}

// clientBodyStatus answers a request whose body the client failed to send:
// 408 when it stopped sending in time, 400 otherwise; or whose body was
// still coming at the request's deadline (errBodyDeadline, read whole
// before the exchange): 504, as an exchange that timed out. The connection
// is closed after the answer, since the body's end was never found.
func clientBodyStatus(fctx *fasthttp.RequestCtx, err error) int {
	status, msg := fasthttp.StatusBadRequest, "malformed or incomplete request body"
	switch {
	case err == errBodyDeadline:
		status, msg = fasthttp.StatusGatewayTimeout, failureMessage(backend.FailureTimeout)
	case sock.IsTimeout(err):
		status, msg = fasthttp.StatusRequestTimeout, "request body timeout"
	}
	return respondErrorClose(fctx, status, msg)
}

// closeDelimited sends a streamed response of unknown length to an HTTP/1.0
// client, which cannot take chunked framing (RFC 9112 6.1): the head goes
// without Content-Length or Transfer-Encoding, the body as it comes, and
// closing the connection ends it. fasthttp frames every such stream chunked,
// so the connection is hijacked and written here; the body stream stays on
// the response, which fasthttp closes (releasing its upstream connection)
// once this returns.
func (b *bind) closeDelimited(fctx *fasthttp.RequestCtx) {
	resp := &fctx.Response
	body := resp.BodyStream()
	h := &resp.Header
	policy.DelResponseHeader(h, headerTransferEncoding)
	h.Del(fasthttp.HeaderTrailer) // no trailer section without chunks
	h.SetContentLength(-2)        // no length: sets Connection: close
	head := h.AppendBytes(nil)
	skipBody := fctx.Request.Header.IsHead()
	conn := fctx.Conn()
	done := b.startTunnel(conn, nil, nil)
	fctx.HijackSetNoResponse(true)
	fctx.Hijack(func(c net.Conn) {
		defer close(done)
		if _, err := c.Write(head); err != nil || skipBody {
			return
		}
		if _, err := io.Copy(c, body); err != nil {
			// Cut short (the upstream failed, a timeout fired): a reset,
			// since the close that follows would read as the body's end.
			_ = sock.Abort(conn)
		}
	})
}
