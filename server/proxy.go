package server

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/policy"
)

// Hop-by-hop headers (RFC 9110 7.6.1) that a proxy must not forward.
// (Trailer is not one: it announces the trailer fields, which go end to
// end with a chunked body.)
var hopHeaders = [][]byte{
	[]byte("Connection"), []byte("Proxy-Connection"), []byte("Keep-Alive"),
	[]byte("Proxy-Authenticate"), []byte("Proxy-Authorization"), []byte("Te"),
	[]byte("Upgrade"),
}

// The fields the proxy path acts on, as bits of a set (fieldBit): the
// hop-by-hop headers first, at their index in hopHeaders, then the request
// fields prepareRequest replaces or removes.
const (
	fieldConnection = 1 << 0
	fieldUpgrade    = 1 << 6
	hopFields       = 1<<7 - 1
	fieldExpect     = 1 << 7
	fieldXFF        = 1 << 8
	fieldXFP        = 1 << 9
	allFields       = 1<<10 - 1
	// fieldBadName marks a field name holding a space, which fasthttp's
	// parser lets through ("Bad Name: v") but is no token (RFC 9110 5.1).
	fieldBadName = 1 << 10
)

var (
	headerXFF     = []byte("X-Forwarded-For")
	headerXFP     = []byte("X-Forwarded-Proto")
	headerExpect  = []byte("Expect")
	commaSpace    = []byte(", ")
	tokenClose    = []byte("close")
	tokenKeepAliv = []byte("keep-alive")
)

// forward sends the request to the chosen backend, with the route's retry and
// timeout policies, and leaves the backend's response (or an error response) in
// fctx.Response. It returns the status sent to the client.
func (b *bind) forward(rs *requestState, r *route, rb *routeBackend, t *httpUpstream) int {
	fctx := rs.pc.Fast
	req := &fctx.Request
	up := t.static
	if up == nil {
		authority := req.Header.Host()
		if tc := tunnelOf(fctx.Conn()); tc != nil {
			// Through a CONNECT tunnel the destination is the tunnel's,
			// which networkAuthorization and networkExtAuthz allowed:
			// the request's Host may only name it (its host; the port is
			// the tunnel's), or it would reach what no rule allowed.
			host, _ := appendHost(rs.pc.Scratch(), authority) // lower case, no port or trailing dot
			if string(bytes.TrimSuffix(bytes.TrimPrefix(host, []byte("[")), []byte("]"))) != tc.host {
				return respondError(fctx, fasthttp.StatusMisdirectedRequest, "misdirected request: this tunnel goes to "+tc.host)
			}
			authority = rs.pc.Scratch()
			authority = append(authority, net.JoinHostPort(tc.host, strconv.Itoa(tc.port))...)
			rs.pc.KeepScratch(authority)
		}
		var err error
		up, err = t.dynamic.For(authority, t.dynamic.DefaultPort())
		if err != nil {
			rs.upstreamErr = err
			return respondError(fctx, fasthttp.StatusBadRequest, "request names no destination")
		}
	}
	fields := requestFields(&req.Header)
	if fields&fieldBadName != 0 {
		status := respondErrorClose(fctx, fasthttp.StatusBadRequest, "invalid header field name")
		return status
	}
	if fields&fieldExpect != 0 && !onlyContinueExpected(&req.Header) {
		// An expectation the gateway cannot meet, and must not pass on
		// silently dropped (RFC 9110 10.1.1): 417, before any body is read.
		return respondErrorClose(fctx, fasthttp.StatusExpectationFailed, "unsupported expectation")
	}
	// An upgrade is the client's to ask for (rs.upgrade, read before any
	// policy ran); the header must still say it (a header policy of the
	// route's may have removed Upgrade). External services cannot set or
	// remove these fields (policy.ReservedHeader).
	upgrade := rs.upgrade && fields&(fieldConnection|fieldUpgrade) == fieldConnection|fieldUpgrade && isUpgrade(&req.Header)
	mirrored := false
	retries := r.retry.retries(&rs.pc)
	var deadline time.Time
	if !upgrade {
		if r.timeout > 0 {
			// requestTimeout counts from when the handler took the request.
			deadline = time.Now().Add(r.timeout - (monoNow() - rs.start))
		}
		if rs.grpc {
			// The client's deadline bounds the exchange too (the header goes
			// on, for the upstream to keep it as well).
			if d, ok := grpcTimeout(&req.Header); ok {
				if dl := time.Now().Add(d - (monoNow() - rs.start)); deadline.IsZero() || dl.Before(deadline) {
					deadline = dl
				}
			}
		}
		rs.guardBody()
		mirrored = r.mirror != nil && r.mirror.chosen()
		// The body's reads from here on (whole for a retry, a mirror or
		// a signature, then upstream) are within the request's deadline
		// (setDeadline).
		rs.body.setDeadline(deadline)
		if status, ok := b.bufferBody(rs, r, retries, mirrored); !ok {
			return status
		}
	}
	if err := b.prepareRequest(rs, rb, up, upgrade, fields, mirrored); err != nil {
		// A secret file of backendAuth cannot be read: the request does
		// not go without its credentials.
		rs.upstreamErr = err
		return respondError(fctx, fasthttp.StatusBadGateway, errBackendCredentials.Error())
	}
	if status, ok := rb.auth.sign(rs); !ok {
		return status
	}
	if upgrade {
		return b.tunnel(rs, up, nil)
	}

	if rs.h2 == nil && rs.hangup == nil {
		// A client that hangs up while its request waits on the upstream
		// ends the wait: at once for a reset; for a FIN (a half-close may
		// still want its answer, RFC 9112 9.6) once halfCloseGrace passed.
		rs.hangup = sock.Hangups(fctx.Conn(), time.Duration(halfCloseGrace.Load()))
	}
	h2 := rs.upstreamH2(rb)
	if rb.version == versionAuto {
		// backendTLS's alpn list, when it names h2, decides over the
		// request's protocol (agentgateway's ALPN-negotiated pools).
		if alpnH2, decided := up.ALPNVersion(); decided {
			h2 = alpnH2
		}
	}
	attempts := 1
	if retries {
		attempts = r.retry.attempts
	}
	// Whether the body streams, decided before the first attempt: writing a
	// streamed body consumes it, and fasthttp then drops the stream, so the
	// request would look replayable with only its pre-read bytes (or none).
	streamed := req.IsBodyStream()
	perAttempt := r.backendTimeout
	if rb.requestTimeout > 0 && (perAttempt == 0 || rb.requestTimeout < perAttempt) {
		perAttempt = rb.requestTimeout
	}
	for attempt := 1; ; attempt++ {
		attemptDeadline := deadline
		if perAttempt > 0 {
			if d := time.Now().Add(perAttempt); attemptDeadline.IsZero() || d.Before(attemptDeadline) {
				attemptDeadline = d
			}
		}
		span := rs.attempt(req, up.Addr, attempt)
		// A body still coming from the client is read within the
		// attempt's deadline: the exchange times out at it, not at the
		// client's next piece.
		rs.body.setDeadline(attemptDeadline)
		var err error
		if h2 {
			err = b.exchangeH2(rs, up, attemptDeadline)
			if errors.Is(err, backend.ErrPickedHTTP1) {
				// Offered h2 and http/1.1, the backend picked HTTP/1.1:
				// nothing was sent, the attempt goes in HTTP/1.1.
				h2 = false
				err = up.ExchangeWatched(rs.clientWatch(), req, &fctx.Response, attemptDeadline)
			}
		} else {
			err = up.ExchangeWatched(rs.clientWatch(), req, &fctx.Response, attemptDeadline)
		}
		if err == nil && fctx.Response.StatusCode() == fasthttp.StatusSwitchingProtocols {
			// The upstream request asked to switch (a backend's header
			// policy set Connection: upgrade and Upgrade) where the
			// client did not: relayed, the 101 would leave the client on
			// a connection nothing is spliced to (the exchange closed
			// the upstream's).
			err = backend.ErrUnsolicitedSwitch
		}
		if span != nil {
			endAttempt(span, fctx.Response.StatusCode(), err)
		}
		if rs.mirrorCopy != nil {
			b.sendMirrorCopy(rs) // the first attempt is over
		}
		// (An HTTP/2 exchange that got its answer may still be reading
		// the body, on the transport's goroutine: its failure then ends
		// the upstream stream, and so the response's; the body is not
		// looked at meanwhile.)
		if !rs.bodyAsync {
			if err := rs.body.failed(); err != nil {
				// The client's body failed: the upstream request was cut
				// off, and no attempt can send it whole.
				rs.upstreamErr = err
				return clientBodyStatus(fctx, err)
			}
		}
		if err != nil {
			var pf *policy.BodyFailure
			if errors.As(err, &pf) {
				// A policy's body failed the exchange (extProc's service
				// broke off): the failure is the policy's, answered as it
				// answers it, not the upstream's, and not retried.
				rs.upstreamErr = err
				pf.Respond(&fctx.Response)
				return pf.Status
			}
		}
		failure := backend.Classify(err)
		status := fctx.Response.StatusCode()
		if err != nil && rs.clientGone() {
			// Nobody waits for an answer: no retry.
			rs.upstreamErr = err
			return respondError(fctx, failure.Status(), failureMessage(failure))
		}
		if failure == backend.FailureNone && !(retries && r.retry.retryStatus(&rs.pc, status)) {
			finishResponse(&fctx.Response)
			rs.upstreamAnswered = true
			return status
		}
		if failure == backend.FailureConnect && !errors.Is(err, backend.ErrPoolFull) {
			rb.connectFailed(b.gw.log, err)
		}
		again := attempt < attempts && retryable(req, streamed, failure)
		if !again && attempt < attempts && streamed && !rs.bodyAsync {
			// A body of unknown length recorded as it streamed
			// (bufferBody) goes again whole: what the attempt left
			// unread is read within the request's deadline.
			rs.body.setDeadline(deadline)
			if body, ok := rs.body.recorded(); ok {
				req.SetBodyRaw(body)
				again = true
			}
		}
		if again {
			if rs.waitBackoff(r.retry, deadline) {
				// Discard the response being retried (this releases its
				// connection).
				fctx.Response.Reset()
				rs.bodyAsync = false
				continue
			}
			if rs.clientGone() {
				// The client went away before the next attempt (in the
				// backoff, or with the answer it would retry in hand):
				// nobody waits for an answer, and its body is not sent
				// again. Recorded as a hang-up in an attempt is.
				rs.upstreamErr = backend.ErrClientGone
				return respondError(fctx, backend.FailureProtocol.Status(), failureMessage(backend.FailureProtocol))
			}
		}
		if failure == backend.FailureNone {
			finishResponse(&fctx.Response)
			rs.upstreamAnswered = true
			return status
		}
		rs.upstreamErr = err
		return respondError(fctx, failure.Status(), errorMessage(err))
	}
}

// bufferBody reads a streamed request body whole where a policy needs it
// again: a retry may resend it (up to maxBufferSize), a mirror sends a copy
// (up to mirrorBodyLimit). A body of unknown length (chunked, or HTTP/2
// without content-length) streams, recorded up to that limit as it goes:
// a retry sends the recording (reading first what the first attempt left
// unread), a mirror copies it once the first attempt is over. A body too
// large stays a stream: it is not retried once sent, and not mirrored. ok
// is false when the client failed to send the body, with the status it
// was answered.
func (b *bind) bufferBody(rs *requestState, r *route, retries, mirrored bool) (status int, ok bool) {
	req := &rs.pc.Fast.Request
	if !rs.body.active() || req.BodyStream() != io.Reader(&rs.body) {
		// Not the client's stream: none, or one a policy made of it.
		return 0, true
	}
	limit := -1
	if retries {
		limit = rs.bind.frontend.maxBufferSize
	}
	if mirrored {
		limit = max(limit, mirrorBodyLimit)
	}
	n := req.Header.ContentLength()
	var err error
	switch {
	case limit < 0:
		return 0, true
	case n < 0:
		// Not read ahead: such a stream may be interactive (gRPC's, a
		// bidirectional one), its first bytes owed upstream before its
		// last come, and a route with a retry or a mirror held it whole.
		// It is recorded as it streams to the first attempt instead, for
		// a retry to send again or a mirror to copy once it ended
		// (agentgateway's retries record so too).
		rs.body.startRecording(limit)
		return 0, true
	case n <= limit:
		err = rs.body.readAll(req, n)
	}
	if err != nil {
		rs.upstreamErr = err
		return clientBodyStatus(rs.pc.Fast, err), false
	}
	return 0, true
}

// retryable reports whether another attempt may be made after a failure or
// a status the retry policy lists: a request that never reached the
// backend may always be retried; one that did when its body can be sent
// again (it is in memory, bufferBody), whatever its method, as agentgateway
// and Envoy retry: the policy (its codes, condition and precondition) says
// what may be sent twice. streamed says whether the body was a stream
// before the first attempt.
func retryable(req *fasthttp.Request, streamed bool, f backend.Failure) bool {
	if streamed {
		return f == backend.FailureConnect && req.Header.ContentLength() == 0
	}
	return true
}

// sendMirrorCopy sends the mirror its copy of a request whose body
// streamed to the first attempt, once that attempt is over: with the body
// as recorded when the attempt read it whole (and it is within
// mirrorBodyLimit), else not at all, as a body too large is not mirrored.
func (b *bind) sendMirrorCopy(rs *requestState) {
	cp := rs.mirrorCopy
	rs.mirrorCopy = nil
	body, ok := rs.body.recordedWhole()
	if !ok || rs.bodyAsync || len(body) > mirrorBodyLimit {
		fasthttp.ReleaseRequest(cp)
		return
	}
	cp.SetBody(body)
	// The trailer section came with the body's end, after the copy.
	h := &rs.pc.Fast.Request.Header
	for k := range h.Trailers() {
		if v := h.PeekBytes(k); v != nil && cp.Header.AddTrailerBytes(k) == nil {
			cp.Header.AddBytesKV(k, v)
		}
	}
	rs.route.mirror.launch(b.gw, cp)
}

// waitBackoff sleeps the retry backoff before another attempt. It reports
// false, at once, when that would pass the deadline or the client went away
// (clientWatch), and false as soon as the client goes during the sleep: a
// request whose client left holds neither its goroutine nor its buffered
// body for the rest of the backoff, and is not sent again.
func (rs *requestState) waitBackoff(rp *retryPolicy, deadline time.Time) bool {
	if rs.clientGone() {
		return false
	}
	if rp == nil || rp.backoff <= 0 {
		return deadline.IsZero() || time.Now().Before(deadline)
	}
	if !deadline.IsZero() && time.Now().Add(rp.backoff).After(deadline) {
		return false
	}
	t := time.NewTimer(rp.backoff)
	defer t.Stop()
	var gone <-chan struct{}
	switch {
	case rs.h2 != nil:
		// Done when the stream is reset or its connection ends.
		gone = rs.h2.context().Done()
	case rs.hangup != nil:
		c := make(chan struct{})
		rs.hangup.OnGone(func() { close(c) }) // runs once, at most
		defer rs.hangup.OnGone(nil)
		gone = c
	}
	select {
	case <-t.C:
		return true
	case <-gone:
		return false
	}
}

// errorMessage is the body of the gateway's answer to an exchange that
// failed with err: its failure class's message, or, when the gateway's own
// limit on connections to the backend was what failed (backend.ErrPoolFull),
// that.
func errorMessage(err error) string {
	if errors.Is(err, backend.ErrPoolFull) {
		return "upstream connection limit reached"
	}
	return failureMessage(backend.Classify(err))
}

func failureMessage(f backend.Failure) string {
	switch f {
	case backend.FailureConnect:
		return "upstream unavailable"
	case backend.FailureTimeout:
		return "upstream request timeout"
	}
	return "bad upstream response"
}

// prepareRequest turns the client's request into the upstream request in
// place: hop-by-hop headers go, X-Forwarded-* are appended, Host follows the
// backend, and the backend's request policies apply. fields says which of the
// fields it acts on the request may hold (requestFields): a field that is
// not there is not looked up, which would cost a pass over the headers each.
//
// A mirrored request's copy is taken once the request is what the route
// makes of it (hop-by-hop fields gone, X-Forwarded-* appended), before the
// backend's Host and policies apply.
//
// The error is a backendAuth secret that could not be read (a file gone):
// the request must not be sent.
func (b *bind) prepareRequest(rs *requestState, rb *routeBackend, up *backend.Upstream, upgrade bool, fields uint16, mirrored bool) error {
	fctx := rs.pc.Fast
	h := &fctx.Request.Header
	// Connection may come on several lines; each names fields to remove.
	// (Deleting fields leaves the values PeekAll returned in place.)
	if fields&fieldConnection != 0 {
		for _, v := range h.PeekAll(fasthttp.HeaderConnection) {
			if upgrade {
				// The upgrade tokens must reach the upstream: only other listed
				// headers go.
				removeConnectionTokens(v, delExceptUpgrade(h))
			} else {
				removeConnectionTokens(v, func(name []byte) { policy.DelRequestHeader(h, name) })
			}
		}
	}
	for i, name := range hopHeaders {
		if fields&(1<<i) == 0 || upgrade && 1<<i == fieldUpgrade {
			continue
		}
		policy.DelRequestHeader(h, name)
	}
	h.ResetConnectionClose()
	if upgrade {
		// Only the upgrade token goes on: the other tokens named fields that
		// are gone.
		h.SetBytesKV(headerConnection, headerUpgrade)
	}
	if fields&fieldExpect != 0 {
		policy.DelRequestHeader(h, headerExpect)
	}

	// X-Forwarded-For: every prior line, in order, then this hop, as one
	// line. X-Forwarded-Proto: this hop's scheme alone, as Envoy sets it at
	// the edge: most readers take its first value (Express's trust proxy,
	// agentgateway's forwarded_proto), so a client on plain HTTP that sent
	// "https" would otherwise be taken for one on TLS (secure cookies,
	// redirects to https).
	buf, prior := rs.pc.Scratch(), false
	if fields&fieldXFF != 0 {
		buf, prior = appendPrior(buf, h, fasthttp.HeaderXForwardedFor)
	}
	buf = appendIP(buf, fctx.RemoteAddr())
	if prior {
		policy.DelRequestHeader(h, headerXFF)
	}
	h.SetCanonical(headerXFF, buf)
	buf = append(buf[:0], rs.pc.Scheme...)
	if fields&fieldXFP != 0 {
		policy.DelRequestHeader(h, headerXFP)
	}
	h.SetCanonical(headerXFP, buf)
	rs.pc.KeepScratch(buf)
	if mirrored {
		// A body still streaming is copied once it ended (sendMirrorCopy).
		rs.mirrorCopy = rs.route.mirror.send(b.gw, &fctx.Request, rs.pc.HostRewritten)
	}

	// Hostname backends get their own name as Host, unless a rewrite already
	// chose one; IP backends keep the client's Host.
	// (up is nil for an LLM request, whose Host each attempt sets.)
	if up != nil && up.HostName != "" && !rs.pc.HostRewritten {
		h.SetHostBytes(up.HostHeader)
	}
	// backendAuth: the token authentication validated and removed
	// (passthrough), or fixed credentials.
	authErr := rb.auth.apply(rs)
	if rb.requestHeaders != nil {
		rs.applyRequestHeaders(rb.requestHeaders)
	}
	// The Host header, as set above or by policies, is what goes upstream
	// (fasthttp would otherwise rebuild it from the parsed request URI).
	fctx.Request.UseHostHeader = true
	return authErr
}

// appendPrior appends the values of every line of the header name, each
// followed by ", ", and reports whether the request had such a line.
func appendPrior(dst []byte, h *fasthttp.RequestHeader, name string) ([]byte, bool) {
	lines := h.PeekAll(name)
	for _, v := range lines {
		if v = bytes.TrimSpace(v); len(v) > 0 {
			dst = append(dst, v...)
			dst = append(dst, commaSpace...)
		}
	}
	return dst, len(lines) > 0
}

var (
	protoHTTP11      = []byte("HTTP/1.1")
	headerUpgrade    = []byte("Upgrade")
	headerConnection = []byte("Connection")
)

// delExceptUpgrade deletes a header unless it is Upgrade.
func delExceptUpgrade(h *fasthttp.RequestHeader) func([]byte) {
	return func(name []byte) {
		if !bytes.EqualFold(name, headerUpgrade) {
			policy.DelRequestHeader(h, name)
		}
	}
}

// finishResponse readies a backend response for the client. A streamed body
// may take long to come: its head goes out at once, so the client sees the
// response start (an event stream its opening) before the first bytes of
// body arrive.
//
// The status line is this hop's: HTTP/1.1 whatever version the backend
// spoke (RFC 9110 6.2). No Content-Type is made up for a body the backend
// sent without one.
func finishResponse(resp *fasthttp.Response) {
	cleanResponse(&resp.Header)
	if !resp.Header.IsHTTP11() {
		resp.Header.SetProtocol(protoHTTP11)
	}
	resp.Header.SetNoDefaultContentType(true)
	if resp.IsBodyStream() {
		resp.ImmediateHeaderFlush = true
	}
}

// cleanResponse removes hop-by-hop headers from a backend response; the
// client connection's persistence is the gateway's own business. One pass
// over the fields finds which are there; most responses have none, and a
// deletion by name costs a scan of its own.
func cleanResponse(h *fasthttp.ResponseHeader) {
	var present uint16
	for k := range h.All() {
		present |= fieldBit(k) & hopFields
	}
	if present&fieldConnection != 0 {
		for _, v := range h.PeekAll(fasthttp.HeaderConnection) {
			removeConnectionTokens(v, func(name []byte) { policy.DelResponseHeader(h, name) })
		}
	}
	for i, name := range hopHeaders {
		if present&(1<<i) != 0 {
			policy.DelResponseHeader(h, name)
		}
	}
	h.ResetConnectionClose()
}

// requestFields reports which of the fields the proxy path acts on (the
// bits of fieldBit) the request holds, in one pass over its headers. Each
// lookup by name (Peek, DelBytes) costs a pass and a key normalization of
// its own, and most requests hold none of these fields.
//
// The pass also goes over the cookies, which it collects as fasthttp's
// header count in handle already did; it does not see trailer fields, which
// only a chunked request has, so a chunked request gets every bit. It also
// marks a name holding a space (fieldBadName).
func requestFields(h *fasthttp.RequestHeader) uint16 {
	var present uint16
	for k := range h.All() {
		present |= fieldBit(k)
		if bytes.IndexByte(k, ' ') >= 0 {
			present |= fieldBadName
		}
	}
	if h.ContentLength() == -1 {
		present |= allFields
	}
	return present
}

// fieldBit returns the bit of a field name among the fields the proxy path
// acts on (hopHeaders, then Expect, X-Forwarded-For, X-Forwarded-Proto),
// whatever its case, or 0.
func fieldBit(name []byte) uint16 {
	var i int
	switch len(name) {
	case 2:
		i = 5 // Te
	case 6:
		return foldBit(name, headerExpect, fieldExpect)
	case 7:
		i = 6 // Upgrade
	case 10:
		if name[0]|0x20 == 'c' {
			i = 0 // Connection
		} else {
			i = 2 // Keep-Alive
		}
	case 15:
		return foldBit(name, headerXFF, fieldXFF)
	case 16:
		i = 1 // Proxy-Connection
	case 17:
		return foldBit(name, headerXFP, fieldXFP)
	case 18:
		i = 3 // Proxy-Authenticate
	case 19:
		i = 4 // Proxy-Authorization
	default:
		return 0
	}
	return foldBit(name, hopHeaders[i], 1<<i)
}

// foldBit returns bit if name is want in any case, else 0.
func foldBit(name, want []byte, bit uint16) uint16 {
	if bytes.EqualFold(name, want) {
		return bit
	}
	return 0
}

// removeConnectionTokens deletes the headers named in a Connection value.
func removeConnectionTokens(v []byte, del func([]byte)) {
	for tok := range bytes.SplitSeq(v, listComma) {
		tok = bytes.TrimSpace(tok)
		if len(tok) == 0 || bytes.EqualFold(tok, tokenClose) || bytes.EqualFold(tok, tokenKeepAliv) || framingField(tok) {
			continue
		}
		del(tok)
	}
}

// framingField reports whether a field name is one that frames or addresses
// the message (Host, Content-Length, Transfer-Encoding): naming it in
// Connection does not remove it, or the message forwarded would no longer
// match its body.
func framingField(name []byte) bool {
	return bytes.EqualFold(name, headerHost) || bytes.EqualFold(name, headerContentLength) || bytes.EqualFold(name, headerTransferEncoding)
}

var (
	headerHost             = []byte(fasthttp.HeaderHost)
	headerContentLength    = []byte(fasthttp.HeaderContentLength)
	headerTransferEncoding = []byte(fasthttp.HeaderTransferEncoding)
	headerAcceptEncoding   = []byte(fasthttp.HeaderAcceptEncoding)
	headerContentEncoding  = []byte(fasthttp.HeaderContentEncoding)
	headerWSExtensions     = []byte("Sec-WebSocket-Extensions")
)

// appendIP appends the IP of a TCP address without allocating.
func appendIP(dst []byte, a net.Addr) []byte {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip4 := ta.IP.To4(); ip4 != nil {
			return appendIPv4(dst, ip4)
		}
		return append(dst, ta.IP.String()...)
	}
	return append(dst, a.String()...)
}

func appendIPv4(dst []byte, ip net.IP) []byte {
	for i := 0; i < 4; i++ {
		if i > 0 {
			dst = append(dst, '.')
		}
		v := ip[i]
		if v >= 100 {
			dst = append(dst, '0'+v/100)
		}
		if v >= 10 {
			dst = append(dst, '0'+(v/10)%10)
		}
		dst = append(dst, '0'+v%10)
	}
	return dst
}

// isUpgrade reports whether a request asks to switch protocols upstream.
// An upgrade to h2c is this hop's alone (upgradeH2C); one not taken (over
// TLS, with a body) leaves an HTTP/1.1 request whose Upgrade and
// HTTP2-Settings go as any hop-by-hop field.
func isUpgrade(h *fasthttp.RequestHeader) bool {
	if !h.ConnectionUpgrade() || !h.IsHTTP11() {
		// (An HTTP/1.0 request's Upgrade is ignored: RFC 9110 7.8.)
		return false
	}
	offered := false
	for _, v := range h.PeekAll(fasthttp.HeaderUpgrade) {
		for tok := range bytes.SplitSeq(v, listComma) {
			tok = bytes.TrimSpace(tok)
			if bytes.EqualFold(tok, tokenH2C) {
				// h2c is this hop's alone, wherever it is offered
				// ("Upgrade: foo, h2c", a second Upgrade line): an
				// upstream's 101 would make the connection a tunnel
				// past routes and policies.
				return false
			}
			offered = offered || len(tok) > 0
		}
	}
	return offered
}

// onlyContinueExpected reports whether every Expect line of the request
// holds nothing but 100-continue (which fasthttp and expect answered), the
// only expectation HTTP defines.
func onlyContinueExpected(h *fasthttp.RequestHeader) bool {
	for _, v := range h.PeekAll(fasthttp.HeaderExpect) {
		for member := range bytes.SplitSeq(v, listComma) {
			member = bytes.TrimSpace(member)
			if len(member) > 0 && !bytes.EqualFold(member, continueExpectation) {
				return false
			}
		}
	}
	return true
}

var (
	continueExpectation = []byte("100-continue")
	listComma           = []byte(",") // separates the members of a field's list value
)

// tunnelOf is the CONNECT tunnel stream c is (or that terminated TLS or
// an HTTP/2 stream's connection carries), nil when c came otherwise.
func tunnelOf(c net.Conn) *tunnelConn {
	for {
		switch x := c.(type) {
		case *h2Stream:
			c = x.hc.conn
		case *tlsConn:
			c = x.raw
		case *tunnelConn:
			return x
		default:
			return nil
		}
	}
}
