package server

import (
	"bytes"
	"context"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/policy"
)

// gRPC through the gateway: a request is gRPC by its Content-Type; it goes
// upstream in HTTP/2 unless the backend says otherwise (the spec's default
// for backends' http.version), with its deadline (grpc-timeout) bounding
// the exchange; an answer the gateway makes itself goes as a gRPC status.

var grpcContentType = []byte("application/grpc")

// isGRPC reports whether a Content-Type is gRPC's: application/grpc, or
// application/grpc+ a message format (gRPC-Web's application/grpc-web is
// not: it needs a translation, not a pass).
func isGRPC(ct []byte) bool {
	if len(ct) < len(grpcContentType) || !bytes.EqualFold(ct[:len(grpcContentType)], grpcContentType) {
		return false
	}
	rest := ct[len(grpcContentType):]
	return len(rest) == 0 || rest[0] == '+' || rest[0] == ';'
}

// gRPC status codes (google.golang.org/grpc/codes) the gateway answers with.
const (
	grpcUnknown          = 2
	grpcDeadlineExceeded = 4
	grpcPermissionDenied = 7
	grpcUnimplemented    = 12
	grpcInternal         = 13
	grpcUnavailable      = 14
	grpcUnauthenticated  = 16
)

// grpcStatusOf maps the HTTP status of an answer the gateway made to a gRPC
// status, as Envoy does for its local replies (gRPC's
// http-grpc-status-mapping): 400 INTERNAL, 401 UNAUTHENTICATED, 403
// PERMISSION_DENIED, 404 UNIMPLEMENTED, 429 and 502–504 UNAVAILABLE, any
// other UNKNOWN; and, as Envoy does since it stopped having clients retry
// them, a request that ran out of time DEADLINE_EXCEEDED rather than 504's
// UNAVAILABLE.
func grpcStatusOf(status int, timedOut bool) int {
	if timedOut {
		return grpcDeadlineExceeded
	}
	switch status {
	case fasthttp.StatusBadRequest:
		return grpcInternal
	case fasthttp.StatusUnauthorized:
		return grpcUnauthenticated
	case fasthttp.StatusForbidden:
		return grpcPermissionDenied
	case fasthttp.StatusNotFound:
		return grpcUnimplemented
	case fasthttp.StatusTooManyRequests, fasthttp.StatusBadGateway, fasthttp.StatusServiceUnavailable, fasthttp.StatusGatewayTimeout:
		return grpcUnavailable
	}
	return grpcUnknown
}

var (
	headerGRPCStatus  = []byte("Grpc-Status")
	headerGRPCMessage = []byte("Grpc-Message")
)

// grpcLocalReply turns an answer the gateway made to a gRPC request into
// the form a gRPC client reads: HTTP 200, application/grpc, no message, and
// the status in grpc-status with the answer's text as grpc-message (a
// "trailers-only" response). The fields that came with the answer
// (WWW-Authenticate, the rate limit's) stay, but for any grpc-status and
// grpc-message, which the gateway's replace. It returns 200.
func grpcLocalReply(resp *fasthttp.Response, status int, timedOut bool) int {
	msg := bytes.TrimSpace(resp.Body())
	if len(msg) == 0 {
		msg = []byte(fasthttp.StatusMessage(status))
	}
	buf := appendGRPCMessage(make([]byte, 0, len(msg)+8), msg)
	resp.ResetBody()
	resp.SetStatusCode(fasthttp.StatusOK)
	resp.Header.SetContentTypeBytes(grpcContentType)
	var code [4]byte
	policy.SetResponseHeaderCanonical(&resp.Header, headerGRPCStatus, strconv.AppendInt(code[:0], int64(grpcStatusOf(status, timedOut)), 10))
	policy.SetResponseHeaderCanonical(&resp.Header, headerGRPCMessage, buf)
	return fasthttp.StatusOK
}

// appendGRPCMessage appends msg percent-encoded as grpc-message wants it:
// bytes outside printable ASCII, and '%', as %XX.
func appendGRPCMessage(dst, msg []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range msg {
		if c < 0x20 || c > 0x7e || c == '%' {
			dst = append(dst, '%', hex[c>>4], hex[c&15])
			continue
		}
		dst = append(dst, c)
	}
	return dst
}

// grpcTimeout reads a request's grpc-timeout ("100m", "5S": up to eight
// digits and a unit, H M S m u n).
func grpcTimeout(h *fasthttp.RequestHeader) (time.Duration, bool) {
	v := h.Peek("Grpc-Timeout")
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range v[:len(v)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	if time.Duration(n) > math.MaxInt64/unit {
		// Beyond 292 years (the format reaches 99999999H): no deadline,
		// as grpc-go takes it, rather than a product that wraps negative.
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// upstreamH2 reports whether a request goes to its backend in HTTP/2: as
// the backend's http.version says, or when it does not say, as the spec
// has it: HTTP/2 for gRPC, the client's protocol in cleartext, HTTP/1.1
// for a client over TLS.
func (rs *requestState) upstreamH2(rb *routeBackend) bool {
	switch rb.version {
	case versionHTTP1:
		return false
	case versionHTTP2:
		return true
	}
	return rs.grpc || rs.h2 != nil && rs.h2.hc.tls == nil
}

// The HTTP versions a backend may be spoken to in.
const (
	versionAuto = iota // the request decides (upstreamH2)
	versionHTTP1
	versionHTTP2
)

// clientWatch tells an HTTP/1.1 upstream exchange that the request's
// client went away: an HTTP/2 stream, reset or its connection ended; an
// HTTP/1.x client's connection hung up, for the requests that watch it
// (hangup: those waiting on an LLM provider's answer, which takes seconds
// and is billed, set by serveLLM). Other HTTP/1.x requests are not
// watched (nil): a client that half-closes its connection after its
// request still gets the answer there (TestHalfClosedClientGetsItsAnswer),
// and a FIN cannot be told from a close.
func (rs *requestState) clientWatch() backend.ClientWatch {
	switch {
	case rs.h2 != nil:
		return rs.h2
	case rs.hangup != nil:
		return rs.hangup
	}
	return nil
}

// clientGone reports that the request's client went away (clientWatch).
func (rs *requestState) clientGone() bool {
	w := rs.clientWatch()
	return w != nil && w.Gone()
}

// exchangeH2 makes one HTTP/2 attempt at the request (backend.ExchangeH2).
// A client's stream going away ends it.
func (b *bind) exchangeH2(rs *requestState, up *backend.Upstream, deadline time.Time) error {
	fctx := rs.pc.Fast
	ctx := context.Background()
	if rs.h2 != nil {
		ctx = rs.h2.context()
	} else if h := rs.hangup; h != nil {
		// An HTTP/1.1 client's hang-up ends the wait for the answer's head,
		// as it ends an HTTP/1.1 exchange's (ExchangeWatched).
		c, cancel := context.WithCancel(ctx)
		h.OnGone(cancel)
		defer h.OnGone(nil)
		ctx = c
	}
	err := up.ExchangeH2(ctx, &fctx.Request, &fctx.Response, deadline, rs, rs.grpc)
	if err == nil && rs.body.active() && fctx.Response.IsBodyStream() {
		// The body may still be read while the response streams: its
		// count is taken once the stream is closed (StreamClosed).
		rs.bodyAsync = true
	}
	return err
}

// InterruptBody ends a read of the client's request body that outlives an
// HTTP/2 exchange (backend.BodyInterrupter), on the exchange's goroutine:
// the body's own interruption (requestBody.InterruptRead), and an HTTP/1.1
// client's connection closes after the response, its body unread.
func (rs *requestState) InterruptBody() {
	rs.body.InterruptRead()
	if rs.h2 == nil {
		rs.pc.Fast.SetConnectionClose()
	}
}

// deadlineInterrupts reports whether moving c's read deadline from another
// goroutine ends a read in progress on it. Not on the netpoll transport:
// netpoll keeps the deadline in a plain field that a read looks at only as
// it begins, so moving it would not wake the read and would race with it.
// There the read ends with the client's next bytes or the body idle
// timeout, and the connection closes after the response.
func deadlineInterrupts(c net.Conn) bool {
	_, isNetpoll := clientSocket(c).(netpoll.Connection)
	return !isNetpoll
}

var _ backend.BodyInterrupter = (*requestState)(nil)
