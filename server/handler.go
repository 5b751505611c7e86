package server

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaygate/gateway/backend"
	mcpgw "github.com/relaygate/gateway/backend/mcp"
	"github.com/relaygate/gateway/backend/sock"
	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/ratelimit"
)

// requestState is the pooled per-request state of the HTTP path.
type requestState struct {
	pc policy.Ctx
	// gateway is the listener's gateway-phase chain, when it has one.
	gateway *policy.Chain
	// chainPending: the request policies wait for the body (expect).
	chainPending bool
	// span is the request's trace span (config.tracing), nil when none.
	span    trace.Span
	host    []byte
	bind    *bindConfig
	route   *route
	backend *routeBackend
	// upstreamErr is the failure that ended the request, for the access log.
	upstreamErr error
	// mcp says what an MCP request was, for the access log.
	mcp mcpgw.Outcome
	// mcpSession is an MCP request's session id, kept for its span.
	mcpSession []byte
	// llm is the state of an LLM request (serveLLM), nil for others.
	llm *llmExchange
	// start is when the handler took the request (monoNow).
	start time.Duration
	// body stands for a streamed request body while it is forwarded.
	body requestBody
	// http10 says the client spoke HTTP/1.0 (the upstream request is
	// HTTP/1.1 whatever the client spoke).
	http10 bool
	// h2 is the stream of a client speaking HTTP/2, nil for HTTP/1.x.
	h2 *h2Stream
	// hangup watches an HTTP/1.x client's connection while an upstream
	// works on its answer (clientWatch); nil until then.
	hangup *sock.HangupWatch
	// grpc says the request is gRPC (isGRPC): answers the gateway makes
	// itself go as gRPC statuses (grpcLocalReply), and the upstream is
	// spoken to in HTTP/2 unless the backend says otherwise.
	grpc bool
	// upstreamAnswered says the response is the upstream's, not one the
	// gateway made.
	upstreamAnswered bool
	// bodyAsync says an HTTP/2 exchange may still be reading the request
	// body while its response streams: the body's count waits for the
	// stream's end (StreamClosed).
	bodyAsync bool
	// mirrorCopy is a mirror's copy of a request whose body streams,
	// sent with that body once the first attempt is over (sendMirrorCopy).
	mirrorCopy *fasthttp.Request
	// tunneled says the request became an upgrade tunnel: it is recorded
	// when the tunnel ends (tunnelEnded).
	tunneled bool
	// upgrade says the client's request asks to switch protocols
	// (isUpgrade), read from its head as it arrived, before any policy or
	// service could edit it: only such a request goes as an upgrade
	// (forward), so an external service's Connection: upgrade and Upgrade
	// cannot turn a plain request into a tunnel past routing and policies.
	upgrade bool
	// limit is localRateLimit's decision (runChain), when limited: its
	// x-ratelimit-* headers go on the response, and an LLM exchange
	// completes it (AdmitTokens) and charges its tokens to it.
	limit   ratelimit.Decision
	limited bool

	// What the record of the request needs once the request itself may be
	// gone (finish, record).
	srv          *bind
	status       int
	bytesIn      int
	method, path []byte
	remote       net.Addr
	bytesOut     int // the response's body bytes (deferRecord)
	// access is the access log's record while it is written (in the
	// state, so that handing it to the logger's interface does not move it
	// to the heap). Cleared after each line.
	access logline.Access
	// exprHead holds the request head expressions read once the gateway
	// put its credentials on the request (hideCredentials); its buffers
	// are reused.
	exprHead fasthttp.RequestHeader
}

var statePool = sync.Pool{New: func() any { return new(requestState) }}

func acquireState() *requestState { return statePool.Get().(*requestState) }

func releaseState(rs *requestState) {
	rs.pc.Reset()
	rs.host = rs.host[:0]
	rs.bind = nil
	rs.route = nil
	rs.backend = nil
	rs.upstreamErr = nil
	rs.mcp = mcpgw.Outcome{}
	rs.mcpSession = rs.mcpSession[:0]
	if rs.llm != nil {
		observeLLM(rs, rs.llm) // a request never recorded
		rs.llm.release()
		rs.llm = nil
	}
	rs.body.reset()
	if rs.mirrorCopy != nil {
		// (a request that never reached its first attempt's end)
		fasthttp.ReleaseRequest(rs.mirrorCopy)
		rs.mirrorCopy = nil
	}
	if rs.span != nil {
		// Not ended by record (a request that never got there).
		rs.span.End()
		rs.span = nil
	}
	rs.http10, rs.chainPending = false, false
	rs.h2, rs.grpc, rs.upstreamAnswered, rs.bodyAsync, rs.tunneled, rs.upgrade = nil, false, false, false, false, false
	rs.hangup = nil
	rs.gateway = nil
	rs.limit, rs.limited = ratelimit.Decision{}, false
	rs.srv, rs.status, rs.bytesIn, rs.bytesOut, rs.remote = nil, 0, 0, 0, nil
	rs.method, rs.path = rs.method[:0], rs.path[:0]
	statePool.Put(rs)
}

var (
	schemeHTTP  = []byte("http")
	schemeHTTPS = []byte("https")
	slash       = []byte("/")
)

// handle is the HTTP request path: select listener and route, run request
// policies, forward to a backend, run response policies, account. A request
// with Expect: 100-continue went through begin already (expect).
func (b *bind) handle(fctx *fasthttp.RequestCtx) {
	rs, _ := fctx.UserValue(expectStateKey).(*requestState)
	if rs == nil {
		var done bool
		if rs, _, done = b.begin(fctx, false); done {
			return
		}
	} else {
		fctx.RemoveUserValue(expectStateKey)
		if rs.chainPending {
			// The route's policies read the body, which is here now.
			rs.chainPending = false
			if _, done := b.runChain(rs); done {
				return
			}
		}
	}
	b.proceed(rs)
}

// expectStateKey holds, between expect and handle, the state of a request
// whose body the client waits to send.
const expectStateKey = "relaygate.expect"

// expect decides a request with Expect: 100-continue before its body is
// read (fasthttp's ExpectHandler): a request answered without a backend
// (no route, a direct response, a redirect, a refused authentication, a
// CORS preflight) gets its final status instead of 100, so the client never
// sends the body (RFC 9110 10.1.1); fasthttp then closes the connection,
// since the client may have started sending anyway. A request that goes on
// gets 100, and handle takes it up where begin left it.
//
// A route whose request policies read the body (extAuthz with
// includeRequestBody, extProc) runs them in handle instead, once the body
// can be read: run before it, they would see none and pass it unexamined.
func (b *bind) expect(fctx *fasthttp.RequestCtx) int {
	if b.current.Load().gatewayReadsBody {
		// Policies before routing read the body: all of it waits.
		return fasthttp.StatusContinue
	}
	rs, status, done := b.begin(fctx, true)
	if done {
		return status
	}
	fctx.SetUserValue(expectStateKey, rs)
	return fasthttp.StatusContinue
}

// begin takes a request through its route's request policies (up to them
// when expecting, for a route whose policies read the body: chainPending).
// done reports that it was answered (and finished); status is the status
// sent then.
func (b *bind) begin(fctx *fasthttp.RequestCtx, expecting bool) (rs *requestState, status int, done bool) {
	bc := b.current.Load()
	rs = acquireState() // finish releases it
	rs.start = monoNow()
	rs.bind = bc
	pc := &rs.pc
	pc.Fast = fctx
	pc.Scheme = schemeHTTP
	var tc *tlsConn
	switch c := fctx.Conn().(type) {
	case *tlsConn:
		tc = c
	case *h2Stream:
		rs.h2, tc = c, c.hc.tls
		pc.HTTP2 = true
	}
	overTLS := tc != nil
	if overTLS {
		pc.Scheme = schemeHTTPS
	}
	rs.http10 = !fctx.Request.Header.IsHTTP11()
	rs.grpc = isGRPC(fctx.Request.Header.ContentType())
	end := func(status int) (*requestState, int, bool) {
		if pc.Path == nil {
			// Answered before routing read the path (a CONNECT, served or
			// refused, or a request refused at its head): the line shows
			// the target as the request line had it, a CONNECT's host:port.
			pc.Path = requestPath(fctx)
		}
		b.finish(rs, status)
		return nil, status, true
	}
	if proto := fctx.Request.Header.Protocol(); len(proto) != 8 || proto[5] != '1' {
		// fasthttp accepts any "HTTP/d.d"; only HTTP/1.x is spoken here and
		// forwarded (RFC 9110 15.6.6).
		status := respondErrorClose(fctx, fasthttp.StatusHTTPVersionNotSupported, "HTTP version not supported")
		return end(status)
	}
	if n, upgrade, connection := headerCount(&fctx.Request.Header); n > bc.frontend.maxHeaders {
		status := respondErrorClose(fctx, fasthttp.StatusRequestHeaderFieldsTooLarge, "too many request headers")
		return end(status)
	} else if upgrade && !overTLS && rs.h2 == nil && !expecting && b.upgradeH2C(fctx) {
		// Served from here on in HTTP/2, this request on its stream 1.
		releaseState(rs)
		return nil, fasthttp.StatusSwitchingProtocols, true
	} else if connection {
		rs.upgrade = dropConnectionNamed(&fctx.Request.Header, upgrade)
	}
	if rs.h2 != nil && fctx.IsConnect() {
		// No tunnel is carried on a stream (RFC 9113 8.5 is not offered),
		// on a CONNECT bind or any other.
		return end(respondError(fctx, fasthttp.StatusNotImplemented, "CONNECT is not served over HTTP/2"))
	}
	if bc.connect {
		// A CONNECT bind: tunnels, not routes (connect.go).
		return end(b.connect(rs))
	}
	if fctx.IsConnect() {
		// Tunnels are a CONNECT bind's (tunnelProtocol: connect): here a
		// CONNECT in any form is refused, never forwarded as a request
		// (its origin form is no form of CONNECT: RFC 9112 3.2.3).
		return end(respondErrorClose(fctx, fasthttp.StatusNotImplemented, "CONNECT is not served on this listener"))
	}
	if uri := fctx.Request.Header.RequestURI(); bytes.IndexByte(uri, '#') >= 0 {
		// No form of request target holds a fragment (RFC 9112 3.2).
		status := respondErrorClose(fctx, fasthttp.StatusBadRequest, "fragment in request target")
		return end(status)
	} else if len(uri) > 0 && uri[0] != '/' && uri[0] != '*' {
		// Absolute form: its authority replaces Host (RFC 9112 3.2.2), for
		// routing and for what goes upstream.
		authority, ok := absoluteAuthority(uri)
		if !ok {
			status := respondErrorClose(fctx, fasthttp.StatusBadRequest, "invalid request target")
			return end(status)
		}
		if bytes.IndexByte(authority, '@') >= 0 {
			// Userinfo ("http://user:pw@host/"): a sender must not put it in
			// a request target, and a recipient should treat it as an error
			// (RFC 9110 4.2.4). Refused, never forwarded: fasthttp would
			// write it upstream as an Authorization field, replacing the
			// client's, a policy's or a passed-through token.
			status := respondErrorClose(fctx, fasthttp.StatusBadRequest, "userinfo in request target")
			return end(status)
		}
		fctx.Request.Header.SetHostBytes(authority)
		// The target goes on in origin form, its authority being Host
		// now. Made here, so that the path the route, the policies and
		// the log keep (pc.Path, a slice of the target) stays the
		// request's whatever later edits of the target do: a backendAuth
		// key put in the query rewrote an absolute target's buffer in
		// place, and the log and CEL's request.path showed other bytes,
		// parts of the key among them.
		if start, _ := pathBounds(uri); start < len(uri) && uri[start] == '/' {
			fctx.Request.SetRequestURIBytes(uri[start:])
		} else {
			fctx.Request.SetRequestURI("/" + string(uri[start:])) // "http://h?q" is "/?q"
		}
	}
	path := requestPath(fctx)
	if !bc.rawPaths && len(path) > 0 && path[0] == '/' && policy.PathNeedsNormalizing(path) {
		// Routing, policies and the upstream see the path in normal form
		// (policy/pathnorm.go); ordinary paths need nothing and cost one scan.
		var err error
		if path, err = normalizeTarget(&fctx.Request, pc); err != nil {
			return end(respondError(fctx, fasthttp.StatusBadRequest, err.Error()))
		}
	}
	var validHost bool
	rs.host, validHost = appendHost(rs.host[:0], fctx.Request.Header.Host())
	if !validHost {
		status := respondErrorClose(fctx, fasthttp.StatusBadRequest, "invalid Host header")
		return end(status)
	}
	pc.Host = rs.host
	pc.Path = path
	if bc.tracing != nil {
		if rs.span = bc.tracing.start(pc, rs.h2 != nil); rs.span != nil {
			// The parent of the policies' calls to external services.
			pc.Trace = policy.NewTrace(rs.span, bc.tracing.tracer, bc.tracing.remove)
		}
	}
	var l *listenerConfig
	if overTLS {
		// The connection's listener is the one its server name chose; a
		// reload may have changed it, or its TLS settings, since the
		// handshake (retire.go).
		if l = bc.httpsListenerFor(tc.sni); l == nil || l.tlsDigest != tc.tlsDigest {
			b.retireConn(rs)
		}
	} else if l = bc.listenerFor(rs.host); l == nil && !bc.servesPlain() {
		// The port serves no cleartext HTTP any more (a reload).
		b.retireConn(rs)
	}
	if l == nil {
		return end(respondError(fctx, fasthttp.StatusNotFound, "route not found"))
	}
	if l.gateway != nil {
		// The gateway phase: before a route is selected, so what it
		// changes (the host, the path, headers) is what routes.
		rs.gateway = l.gateway
		if l.gateway.ReadsBody {
			rs.guardBody()
		}
		if l.gateway.RunRequest(pc) == policy.Done {
			return end(rs.runResponse(fctx.Response.StatusCode()))
		}
		rs.host, validHost = appendHost(rs.host[:0], fctx.Request.Header.Host())
		if !validHost {
			status := respondErrorClose(fctx, fasthttp.StatusBadRequest, "invalid Host header")
			return end(rs.runResponse(status))
		}
		path = requestPath(fctx)
		pc.Host, pc.Path = rs.host, path
	}
	if overTLS {
		if status := bc.misdirected(l, rs.host); status != 0 {
			msg := "route not found"
			if status == fasthttp.StatusMisdirectedRequest {
				msg = "misdirected request: open a connection for this host"
			}
			status = respondError(fctx, status, msg)
			return end(rs.runResponse(status))
		}
	}
	v, ok := l.table.Match(&fctx.Request, rs.host, path)
	if !ok {
		status := respondError(fctx, fasthttp.StatusNotFound, "route not found")
		return end(rs.runResponse(status))
	}
	r := v.(*route)
	rs.route = r
	if r.needsPrefix {
		pc.MatchedPrefix = r.matchedPrefix(path)
	}
	if expecting && r.chain.ReadsBody {
		rs.chainPending = true
		return rs, 0, false
	}
	if status, done := b.runChain(rs); done {
		return nil, status, true
	}
	return rs, 0, false
}

// headerCount counts a request's header fields as the client sent them,
// and reports whether one of them is Upgrade, and one Connection, in the
// same pass. An HTTP/1 request's fields are counted in the block read
// (RawHeaders: a folded line continues its field), not by RequestHeader.All,
// which also yields the fields fasthttp made up (Content-Length: 0 on a
// request of a method that may have a body, sent without one; Connection:
// close on HTTP/1.0) and one Cookie for several: a CONNECT, OPTIONS or
// bodyless POST was refused at one field fewer than a GET. An HTTP/2
// request's fields, set one by one, have no block: All counts them.
func headerCount(h *fasthttp.RequestHeader) (n int, upgrade, connection bool) {
	raw := h.RawHeaders()
	if len(raw) == 0 {
		for k := range h.All() {
			n++
			upgrade, connection = isUpgradeOrConnection(k, upgrade, connection)
		}
		return n, upgrade, connection
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 || line[0] == ' ' || line[0] == '\t' || line[0] == '\r' {
			continue // a folded line, or the blank line that ends the block
		}
		n++
		if i := bytes.IndexByte(line, ':'); i > 0 {
			upgrade, connection = isUpgradeOrConnection(line[:i], upgrade, connection)
		}
	}
	return n, upgrade, connection
}

// isUpgradeOrConnection adds to upgrade and connection whether the field
// name k is Upgrade or Connection.
func isUpgradeOrConnection(k []byte, upgrade, connection bool) (bool, bool) {
	switch len(k) {
	case len(headerUpgrade):
		upgrade = upgrade || bytes.EqualFold(k, headerUpgrade)
	case len(headerConnection):
		connection = connection || bytes.EqualFold(k, headerConnection)
	}
	return upgrade, connection
}

// dropConnectionNamed removes the fields the client's Connection field
// names, which are this hop's alone (RFC 9110 7.6.1), before any policy
// runs: removed when the request goes upstream, they took the fields a
// policy set under the same names with them (a client naming
// x-gateway-verified in Connection stripped what a route set). Connection
// then says only what this hop keeps of it: the upgrade of an upgrade
// request (its Upgrade field stays), else nothing (close is the header's
// flag, kept). It reports whether the request asks for an upgrade
// (isUpgrade).
func dropConnectionNamed(h *fasthttp.RequestHeader, upgrade bool) bool {
	upgrade = upgrade && isUpgrade(h)
	del := func(name []byte) { policy.DelRequestHeader(h, name) }
	if upgrade {
		del = delExceptUpgrade(h)
	}
	// (Deleting fields leaves the values PeekAll returned in place.)
	for _, v := range h.PeekAll(fasthttp.HeaderConnection) {
		removeConnectionTokens(v, del)
	}
	if upgrade {
		h.SetBytesKV(headerConnection, headerUpgrade)
		return true
	}
	closing := h.ConnectionClose()
	policy.DelRequestHeader(h, headerConnection)
	if closing {
		h.SetConnectionClose()
	}
	return false
}

// runResponse runs the response policies: the route's (when one was
// selected), then the gateway phase's (when the listener has them). status
// is the status the request was answered before them; runResponse returns
// the one the client gets, which the request's record reports (its access
// line, its metrics, its span): status, unless a policy gave the response
// another (a transformation's :status, the 502 of one that could not read
// the body, an extProc's immediate response). A tunnel's answer is the
// upstream's head, written as it came: no policy changes it.
func (rs *requestState) runResponse(status int) int {
	resp := &rs.pc.Fast.Response
	before := resp.StatusCode()
	if rs.route != nil {
		rs.route.chain.RunResponse(&rs.pc)
	}
	if rs.gateway != nil {
		rs.gateway.RunResponse(&rs.pc)
	}
	if after := resp.StatusCode(); after != before && !rs.tunneled {
		return after
	}
	return status
}

// guardBody puts the server's guard (server/body.go) in front of a
// streamed request body before a policy reads it, so that a cut-off body
// is not taken for a whole one and what is read is counted; once.
func (rs *requestState) guardBody() {
	req := &rs.pc.Fast.Request
	if req.IsBodyStream() && !rs.body.active() {
		rs.body.wrap(req, rs.pc.Fast.Conn(), rs.bind.frontend.maxBufferSize)
	}
}

// runChain runs the route's request policies, and localRateLimit at its
// place among them (policy.Order, route.limitAt): a request it refuses meets
// none of the policies after it (remoteRateLimit, extProc, transformations,
// a delay, a redirect or direct response). done reports that the request was
// answered (and finished), with status.
func (b *bind) runChain(rs *requestState) (status int, done bool) {
	pc, r, fctx := &rs.pc, rs.route, rs.pc.Fast
	if r.chain.ReadsBody {
		rs.guardBody()
	}
	if r.timeout > 0 && r.chain.Waits {
		pc.Deadline = time.Now().Add(r.timeout - (monoNow() - rs.start))
	}
	if r.limiter == nil {
		if r.chain.RunRequest(pc) == policy.Done {
			return b.chainAnswered(rs), true
		}
	} else {
		if r.chain.RunRequestRange(pc, 0, r.limitAt) == policy.Done {
			return b.chainAnswered(rs), true
		}
		// (An LLM exchange checks the tokens buckets once its prompt is
		// known, and is charged its tokens after: llmAttempts.)
		rs.limit, rs.limited = r.limiter.AdmitCtx(pc), true
		if !rs.limit.Allowed {
			if r.llmErrors != nil {
				llmRateLimitBody(rs, r.llmErrors.routeType(pc.Path), "requests")
			}
			return b.chainAnswered(rs), true
		}
		if r.chain.RunRequestRange(pc, r.limitAt, len(r.chain.Request)) == policy.Done {
			rs.limitHeaders()
			return b.chainAnswered(rs), true
		}
	}
	if len(r.backends) == 0 {
		status = respondError(fctx, fasthttp.StatusInternalServerError, "route has no backends")
		rs.limitHeaders()
		status = rs.runResponse(status)
		b.finish(rs, status)
		return status, true
	}
	return 0, false
}

// chainAnswered finishes a request a request policy answered (or
// localRateLimit refused).
func (b *bind) chainAnswered(rs *requestState) int {
	status := rs.runResponse(rs.pc.Fast.Response.StatusCode())
	b.finish(rs, status)
	return status
}

// limitHeaders puts localRateLimit's x-ratelimit-* headers on the response
// of a request it let through (a refusal has them already), before the
// response policies run.
func (rs *requestState) limitHeaders() {
	if rs.limited && rs.limit.Allowed {
		rs.limit.WriteHeaders(&rs.pc.Fast.Response.Header)
	}
}

// proceed takes a request begin let through to its backend.
func (b *bind) proceed(rs *requestState) {
	fctx, pc, r := rs.pc.Fast, &rs.pc, rs.route
	rb := r.pick()
	rs.backend = rb
	pc.Backend = rb.cel
	if rb.redirect != nil && rb.redirect.OnRequest(pc) == policy.Done {
		rs.limitHeaders()
		b.finish(rs, rs.runResponse(fctx.Response.StatusCode()))
		return
	}
	status, answered := applyMaxForwards(fctx) // Max-Forwards (maxforwards.go)
	if !answered {
		status = rb.target.exchange(b, rs, r, rb)
	}
	rs.limitHeaders()
	if rb.responseHeaders != nil {
		rb.responseHeaders.ApplyResponse(&fctx.Response.Header)
	}
	b.finish(rs, rs.runResponse(status))
}

// finish readies the response to be written and records the request: at
// once, or, for a body streaming from the backend, when that stream closes
// (so that its duration and bytes are the whole response's). Either way rs
// is released then; the handler must not touch it after finish.
func (b *bind) finish(rs *requestState, status int) {
	fctx := rs.pc.Fast
	if b.closing.Load() != 0 && b.lastResponse(fctx.Conn()) || rs.bind.frontend.maxConnLife > 0 && connTooOld(fctx.Conn(), rs.start, rs.bind.frontend.maxConnLife) {
		// Draining, a reload retired the connection (retire.go), or it
		// reached maxConnectionDuration: this response is its last. (Set
		// here, after the backend's response replaced fctx.Response.)
		fctx.SetConnectionClose()
	}
	if rs.h2 == nil && !rs.bodyAsync && (rs.body.active() || fctx.Request.IsBodyStream()) {
		// A body answered before its end (a refusal, an upstream's early
		// answer): the client may still be sending it, and the
		// connection's close waits for it rather than reset it. (Once
		// an exchange read it, the request holds the body no more: the
		// guard that read it knows; one an HTTP/2 upstream's transport
		// may still be reading is not looked at.)
		setPeerOwes(fctx.Conn(), !rs.body.ended())
		if rs.body.interrupted.Load() {
			// The gateway cut the body's reading (its upstream hung up or
			// answered first) where fasthttp's reader may not have seen
			// it fail: the rest is still on the connection, which fasthttp
			// would otherwise wait on to discard it. Set here, after any
			// answer of the gateway's own (respondError resets it).
			fctx.SetConnectionClose()
		}
	}
	resp := &fctx.Response
	if rs.grpc && !rs.upstreamAnswered && status != fasthttp.StatusOK {
		// An answer of the gateway's own, in the form a gRPC client reads.
		status = grpcLocalReply(resp, status, backend.Classify(rs.upstreamErr) == backend.FailureTimeout)
	}
	if rs.http10 && resp.Header.ContentLength() == -1 {
		// HTTP/1.0 has no chunked framing (RFC 9112 6.1): a body of unknown
		// length goes close-delimited; a response without one (HEAD) loses
		// the Transfer-Encoding it carried.
		if resp.IsBodyStream() {
			b.closeDelimited(fctx)
		} else {
			policy.DelResponseHeader(&resp.Header, headerTransferEncoding)
			resp.Header.SetContentLength(-2)
		}
	}
	rs.srv, rs.status = b, status
	if !rs.bodyAsync {
		rs.bytesIn = rs.requestBytes()
	}
	if rs.tunneled {
		// An upgrade tunnel is recorded when it ends (tunnelEnded), with
		// the bytes that went through it and its whole duration, as Envoy
		// and nginx log an upgraded connection once, at its end. (The
		// request outlives the handler as long: fasthttp lets go of a
		// hijacked connection's once its tunnel returns.)
		rs.method = append(rs.method[:0], fctx.Method()...)
		rs.path = append(rs.path[:0], rs.pc.Path...)
		rs.remote = fctx.RemoteAddr()
		return
	}
	if resp.IsBodyStream() {
		if rs.h2 == nil {
			// A drain's cut (bind.cut) ends the wait for the upstream's
			// next bytes (an HTTP/2 stream's ends as its connection does).
			if w := sock.Cuts(fctx.Conn()); w != nil {
				backend.WatchStream(resp, w)
			}
		}
		// The request may be gone by the time the stream closes (a hijacked
		// connection's is reset first): keep what the record needs.
		rs.method = append(rs.method[:0], fctx.Method()...)
		rs.path = append(rs.path[:0], rs.pc.Path...)
		rs.remote = fctx.RemoteAddr()
		// A policy's body that can fail on its own once the head went out
		// (extProc's processed body) tells the record how it ended,
		// through the stream it wraps or, when nothing observes that one,
		// itself.
		var obs backend.StreamObserver = rs
		ob := policy.ObservedBodyOf(resp.BodyStream())
		if ob != nil {
			obs = ob.Observe(rs)
		}
		if backend.ObserveStream(resp, obs) {
			return
		}
		if ls, ok := policy.Innermost(resp.BodyStream()).(*llmStream); ok {
			ls.observe(b, rs, obs)
			return
		}
		if ob != nil {
			return
		}
	}
	if rs.bodyAsync {
		// The exchange's stream is no longer the response's: it was
		// closed, and the body is no longer read.
		rs.bytesIn = rs.requestBytes()
	}
	if b.deferRecord(rs, fctx) {
		return
	}
	b.record(rs, fctx.Method(), rs.pc.Path, fctx.RemoteAddr(), responseBytes(resp))
	releaseState(rs)
}

// deferRecord leaves the record of an HTTP/1.x request (its access line
// and metrics) to be written once its response is out, when fasthttp
// reports the connection idle (or closed, or hijacked): recordPending.
// The client does not wait for it, as nginx writes its access log in the
// log phase, after the response. The record then keeps copies of what it
// reads of the request, and its duration ends when the response was
// written (nginx's $request_time too). A request whose record reads the
// request itself (an accessLog policy's expressions, a trace span's end)
// is recorded now: fasthttp may have reset or pooled it by then; so is one
// with extProc sessions, whose closing (releaseState) may touch it. It
// reports whether the record was deferred.
func (b *bind) deferRecord(rs *requestState, fctx *fasthttp.RequestCtx) bool {
	if rs.h2 != nil || rs.span != nil || rs.bind == nil || rs.bind.frontend.accessLog != nil || len(rs.pc.ExtProc) > 0 || fctx.Response.IsBodyStream() {
		// (A stream nobody observes, an MCP event stream, is recorded as
		// it starts: it may last as long as the client stays.)
		return false
	}
	f := sock.ServerFields(fctx.Conn())
	if f == nil || f.ServerPending != nil {
		return false
	}
	rs.method = append(rs.method[:0], fctx.Method()...)
	rs.path = append(rs.path[:0], rs.pc.Path...)
	rs.remote = fctx.RemoteAddr()
	rs.bytesOut = responseBytes(&fctx.Response)
	f.ServerPending = rs
	f.ServerPendingSet.Store(true)
	return true
}

// recordPending writes the record deferRecord left on c, if any.
func recordPending(c net.Conn) {
	f := sock.ServerFields(c)
	if f == nil || f.ServerPending == nil {
		return
	}
	rs, _ := f.ServerPending.(*requestState)
	f.ServerPending = nil
	if rs != nil {
		rs.srv.record(rs, rs.method, rs.path, rs.remote, rs.bytesOut)
		releaseState(rs)
	}
	f.ServerPendingSet.Store(false)
}

// recordsPending counts the connections whose request's record is still
// to be written (deferRecord): a test reading the access log or the
// metrics waits for none.
func (b *bind) recordsPending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for c := range b.conns {
		if f := sock.ServerFields(c); f != nil && f.ServerPendingSet.Load() {
			n++
		}
	}
	return n
}

// StreamClosed records a request whose response body streamed, once the
// stream closed (backend.StreamObserver).
func (rs *requestState) StreamClosed(n int, err error) {
	if err != nil && rs.upstreamErr == nil {
		rs.upstreamErr = err
	}
	if rs.bodyAsync {
		// The stream's close stopped the request body's reading.
		rs.bytesIn = rs.requestBytes()
	}
	rs.srv.record(rs, rs.method, rs.path, rs.remote, n)
	releaseState(rs)
}

// tunnelEnded records a request that became an upgrade tunnel once the
// tunnel ended (or never started): in and out are the bytes that went
// through it from the client and to it.
func (rs *requestState) tunnelEnded(in, out int64) {
	rs.bytesIn += int(in)
	rs.srv.record(rs, rs.method, rs.path, rs.remote, int(out))
	releaseState(rs)
}

// record counts a request in the metrics and writes its access log line.
// out is the size of the response body sent.
func (b *bind) record(rs *requestState, method, path []byte, remote net.Addr, out int) {
	d := monoNow() - rs.start
	status, in := rs.status, rs.bytesIn
	r := rs.route
	switch {
	case rs.backend != nil:
		rs.backend.metrics.Observe(method, status, d, in, out)
	case r != nil:
		r.noBackend.Observe(method, status, d, in, out)
	default:
		b.unrouted.Observe(method, status, d, in, out)
	}
	a := &rs.access
	a.Method, a.Path, a.Status, a.Duration = method, path, status, d
	a.BytesIn, a.BytesOut, a.Src, a.UpstreamError = in, out, remote, rs.upstreamErr
	if at := b.cutAt.Load(); at != 0 && int64(rs.start) <= at {
		// In flight when a drain's time ran out (cut): whatever failure
		// the cut caused, the cut ended it.
		a.UpstreamError = errCutAtShutdown
	}
	if r != nil {
		a.Route = r.name
	}
	if rs.backend != nil {
		a.Backend = rs.backend.name
	}
	if m := &rs.mcp; m.Method != "" {
		a.MCP = logline.AccessMCP{Method: logline.BoundValue(m.Method), Target: m.Target, Tool: logline.BoundValue(m.Tool), Denied: m.Denied}
	}
	if x := rs.llm; x != nil && x.prov != nil {
		observeLLM(rs, x)
		x.accessFields(&a.LLM)
	}
	var sc trace.SpanContext
	if rs.span != nil {
		sc = rs.span.SpanContext()
		rs.bind.tracing.end(rs, method, a.Route, status)
		rs.span = nil
	}
	logged := true
	if rs.bind != nil && rs.bind.frontend.accessLog != nil && rs.pc.Fast != nil {
		p := rs.bind.frontend.accessLog
		logged = p.apply(&rs.pc, a, sc)
	}
	if logged {
		b.gw.accessLog.Log(a)
	}
	extra := a.Extra
	clear(extra)
	*a = logline.Access{Extra: extra[:0]} // the pooled state keeps no request's bytes
}

// errCutAtShutdown is the access line's upstream_error of a request a
// drain cut (bind.cut), as `end: shutdown` is a connection record's.
var errCutAtShutdown = errors.New("shutdown: the drain's time ran out with the request in flight")

// connTooOld reports whether a connection has reached its maximum duration
// (life) at now.
func connTooOld(c net.Conn, now, life time.Duration) bool {
	left, ok := connLifeLeft(c, now, life)
	return ok && left <= 0
}

// respondError writes a short plain-text error and returns its status.
func respondError(fctx *fasthttp.RequestCtx, status int, msg string) int {
	fctx.Response.Reset()
	fctx.Response.SetStatusCode(status)
	fctx.Response.Header.SetContentType("text/plain; charset=utf-8")
	fctx.Response.SetBodyString(msg + "\n")
	return status
}

// respondErrorClose is respondError for a request after which the
// connection cannot be trusted (a malformed or cut-short request): the
// connection closes after the answer.
func respondErrorClose(fctx *fasthttp.RequestCtx, status int, msg string) int {
	respondError(fctx, status, msg)
	fctx.SetConnectionClose() // after respondError, which resets the response
	return status
}

// handleParseError answers requests fasthttp could not parse (or whose
// body it could not read), and records them like any other: with their
// method and path when fasthttp kept the head it parsed (headKept), else
// with neither, as the line leaves any field it does not know empty
// (route, backend). fasthttp resets the request on every failure but that
// of a target it could not make a URI of: a head it could not parse or
// that did not fit (431), and a body cut short in the part (up to 8 KiB)
// it reads before the handler runs, so the line cannot say what such a
// request was; it used to say GET /, what the empty header answers.
func (b *bind) handleParseError(fctx *fasthttp.RequestCtx, err error) {
	var status int
	_, tooLarge := err.(*fasthttp.ErrSmallBuffer)
	switch {
	case tooLarge:
		status = respondErrorClose(fctx, fasthttp.StatusRequestHeaderFieldsTooLarge, "request headers too large")
	case sock.IsTimeout(err):
		status = respondErrorClose(fctx, fasthttp.StatusRequestTimeout, "request timeout")
	case errors.Is(err, sock.ErrBareLFHead):
		status = respondErrorClose(fctx, fasthttp.StatusBadRequest, "malformed request: the head must end with CRLF CRLF")
	default:
		status = respondErrorClose(fctx, fasthttp.StatusBadRequest, "malformed request")
	}
	rs := acquireState()
	rs.start, rs.bind, rs.status = monoNow(), b.current.Load(), status
	rs.pc.Fast = fctx
	var method, path []byte
	if headKept(&fctx.Request.Header) {
		method, path = fctx.Method(), requestPath(fctx)
	}
	b.record(rs, method, path, fctx.RemoteAddr(), responseBytes(&fctx.Response))
	releaseState(rs)
}

// headKept reports whether h holds a request line fasthttp parsed. An
// empty header's accessors answer defaults (Method GET, and one that writes
// it into h), but RequestURI answers fasthttp's own "/" without a copy:
// any other target was parsed. (Were fasthttp to answer a copy, every
// header would look kept, and the line say GET / as it did before.)
func headKept(h *fasthttp.RequestHeader) bool {
	uri := h.RequestURI()
	return len(uri) > 0 && &uri[0] != &emptyTarget[0]
}

// emptyTarget is RequestURI's answer for a header without a request line.
var emptyTarget = new(fasthttp.RequestHeader).RequestURI()

// requestPath returns the request path without the query, as the request
// target now holds it (normalized by begin unless pathNormalization is raw).
// An absolute-form request target ("http://host/path") yields its path, and
// "/" when it has none.
func requestPath(fctx *fasthttp.RequestCtx) []byte {
	uri := fctx.Request.Header.RequestURI()
	start, end := pathBounds(uri)
	if start == end {
		return slash
	}
	return uri[start:end]
}

// pathBounds returns where the path of a request target lies: from the
// start of an origin-form target, or from the end of an absolute-form
// target's authority, to the query. An absolute-form target without a path
// ("http://host" or "http://host?q") gives an empty one.
func pathBounds(uri []byte) (start, end int) {
	if len(uri) > 0 && uri[0] != '/' {
		if i := bytes.Index(uri, schemeSep); i >= 0 {
			start = i + len(schemeSep)
			j := bytes.IndexAny(uri[start:], "/?")
			if j < 0 {
				return len(uri), len(uri)
			}
			start += j
		}
	}
	end = len(uri)
	if i := bytes.IndexByte(uri[start:], '?'); i >= 0 {
		end = start + i
	}
	return start, end
}

// normalizeTarget replaces the path of the request target with its normal
// form (policy.AppendNormalizedPath), keeping what comes before it (an absolute
// form's scheme and authority) and the query as they are, and returns the
// new path; or the error that refuses the path, leaving the target alone.
func normalizeTarget(req *fasthttp.Request, pc *policy.Ctx) ([]byte, error) {
	uri := req.Header.RequestURI()
	start, end := pathBounds(uri)
	b := append(pc.Scratch(), uri[:start]...)
	b, err := policy.AppendNormalizedPath(b, uri[start:end])
	if err != nil {
		pc.KeepScratch(b)
		return nil, err
	}
	pathEnd := len(b)
	b = append(b, uri[end:]...)
	req.SetRequestURIBytes(b) // copies
	pc.KeepScratch(b)
	return req.Header.RequestURI()[start:pathEnd], nil
}

// absoluteAuthority returns the authority of an absolute-form request
// target ("http://host:port/path"), with its user information if it has any
// (begin refuses that); false when the target has no scheme or an empty
// host.
func absoluteAuthority(uri []byte) ([]byte, bool) {
	i := bytes.Index(uri, schemeSep)
	if i <= 0 {
		return nil, false
	}
	rest := uri[i+len(schemeSep):]
	end := len(rest)
	if j := bytes.IndexAny(rest, "/?"); j >= 0 {
		end = j
	}
	authority := rest[:end]
	host := authority
	if at := bytes.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	if len(host) == 0 || host[0] == ':' {
		return nil, false
	}
	return authority, true
}

var schemeSep = []byte("://")

// appendHost appends the host of a Host header value, lower-cased and without
// its port or a final dot (IPv6 literals keep their brackets). It reports false, appending
// nothing, for a value that is no host: a name with bytes a host cannot hold
// (RFC 3986 3.2.2), a port with anything but digits, an unclosed bracket.
// RFC 9112 3.2 has such a request answered 400.
func appendHost(dst, h []byte) ([]byte, bool) {
	end := len(h)
	literal := len(h) > 0 && h[0] == '['
	if literal {
		end = bytes.IndexByte(h, ']') + 1
		if end == 0 {
			return dst, false
		}
	} else if i := bytes.IndexByte(h, ':'); i >= 0 {
		end = i
	}
	if end < len(h) && (h[end] != ':' || !allDigits(h[end+1:])) {
		return dst, false
	}
	n := len(dst)
	if !literal && end > 1 && h[end-1] == '.' {
		end-- // "example.com." names example.com
	}
	for i, c := range h[:end] {
		if !hostByte[c] && !(literal && (c == ':' || i == 0 || i == end-1)) {
			return dst[:n], false
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst, true
}

// hostByte marks the bytes of a registered name (RFC 3986 3.2.2: unreserved,
// sub-delims, '%' of an escape). An IP literal may also hold ':' between its
// brackets.
var hostByte = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=%") {
		t[c] = true
	}
	return t
}()

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// matchedPrefix returns the longest of the route's prefixes that path matches
// on a segment boundary.
func (r *route) matchedPrefix(path []byte) []byte {
	for _, p := range r.prefixes {
		if !bytes.HasPrefix(path, p) {
			continue
		}
		if len(p) == 1 || len(path) == len(p) || path[len(p)] == '/' {
			return path[:len(p)]
		}
	}
	return nil
}

// pick chooses a backend by weight.
func (r *route) pick() *routeBackend {
	if len(r.backends) == 1 {
		return r.backends[0]
	}
	n := rand.IntN(r.total)
	for i, w := range r.weights {
		if n < w {
			return r.backends[i]
		}
	}
	return r.backends[len(r.backends)-1]
}

// requestBytes is the request body size: buffered bodies are counted, and
// streamed ones as far as they were read.
func (rs *requestState) requestBytes() int {
	if rs.body.active() {
		return rs.body.n
	}
	r := &rs.pc.Fast.Request
	if r.IsBodyStream() {
		return max(r.Header.ContentLength(), 0)
	}
	return len(r.Body())
}

// responseBytes is the response body size, counted like requestBytes.
func responseBytes(r *fasthttp.Response) int {
	if r.IsBodyStream() {
		return max(r.Header.ContentLength(), 0)
	}
	return len(r.Body())
}
