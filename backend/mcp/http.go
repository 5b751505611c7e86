package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend"
	codec "github.com/relaygate/gateway/codec/jsonrpc"
	"github.com/relaygate/gateway/codec/sse"
)

// Request is one HTTP request to the MCP endpoint of a route.
type Request struct {
	Fast  *fasthttp.RequestCtx
	Authz Authorizer
	// Credentials, when set, authenticate the gateway to HTTP targets
	// (backendAuth); Token is the client's validated token, for a
	// passthrough.
	Credentials Credentials
	Token       []byte
	// Timeout bounds one call (the route's request timeout); zero means the
	// backend's default.
	Timeout time.Duration
	// MaxBody bounds the request body (frontendPolicies.http.maxBufferSize).
	MaxBody int
	// Subject is the fingerprint of the request's authenticated identity
	// (see Subject), or "". A session answers only the identity that opened
	// it.
	Subject string
	// Context, when set, ends when the client goes away (an HTTP/2 stream
	// reset, an HTTP/1.x connection's hang-up); it must last until the
	// response, a streamed one included, has been written. A call then
	// ends, and its target is told (notifications/cancelled), instead of
	// running on for an answer nobody reads.
	Context context.Context
}

// Credentials give the headers that authenticate the gateway to HTTP
// targets, token being the client's validated token (for a passthrough).
// They are asked when a target is connected (an error fails the connect)
// and for each request to it, so that a rotated secret reaches sessions
// already open.
type Credentials interface {
	Header(token []byte) (http.Header, error)
}

// Outcome says what an MCP request was, for the access log and metrics.
type Outcome struct {
	Method, Tool, Target string
	// Denied: an authorization rule refused the item.
	Denied bool
}

// metricTool is the tool the call's metrics are labelled with: its Tool,
// or none (tool="unknown", what the client is answered) when an
// authorization rule refused the call. A refused name is only what the
// client sent; labelled by it, junk names would fill the route's series
// cap and have the tools it does call counted as "other". The access log
// keeps the name, with mcp.denied.
func (o *Outcome) metricTool() string {
	if o.Denied {
		return ""
	}
	return o.Tool
}

const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	// LatestProtocolVersion is what stateless upstream sessions are opened
	// with when the client names none.
	LatestProtocolVersion = "2025-06-18"
	sseKeepAlive          = 25 * time.Second
	// legacyKeepAlive is shorter: a legacy SSE session ends with its stream,
	// and a write is how a closed stream is noticed when the request has
	// no Context (or the client's going is not seen, a silent network).
	legacyKeepAlive = 5 * time.Second
	// listenLinger is how long the targets' standalone streams stay open
	// after the client's stream ended (Session.streamEnded).
	listenLinger   = 5 * time.Second
	defaultMaxBody = 2 << 20
)

// knownVersions are the protocol versions the SDK speaks (read once: the
// SDK returns a copy). The gateway accepts these in Mcp-Protocol-Version,
// and negotiates only these (negotiable, mergeInitialize).
var knownVersions = sdk.SupportedProtocolVersions()

// versionWithoutInitialize is the first protocol version that opens no
// session with initialize.
const versionWithoutInitialize = "2026-07-28"

// initializeVersion is what an initialize naming a version the gateway does
// not know negotiates: the newest it knows that still has initialize, as a
// server answers with the latest version it supports.
var initializeVersion = func() string {
	newest := ""
	for _, v := range knownVersions {
		if v < versionWithoutInitialize && v > newest {
			newest = v
		}
	}
	return newest
}()

// supportedVersion reports whether the gateway speaks a protocol version a
// client names in Mcp-Protocol-Version.
func supportedVersion(v []byte) bool {
	return knownVersion(string(v))
}

func knownVersion(v string) bool {
	for _, known := range knownVersions {
		if v == known {
			return true
		}
	}
	return false
}

// Serve answers one HTTP request to the MCP endpoint: streamable HTTP
// (POST, GET, DELETE) and the legacy SSE transport (GET on a path ending in
// /sse, then POSTs with ?sessionId=).
func (b *Backend) Serve(r *Request) Outcome {
	fctx := r.Fast
	if v := fctx.Request.Header.Peek(headerProtocolVersion); len(v) > 0 && !supportedVersion(v) {
		httpError(fctx, fasthttp.StatusBadRequest, "Bad Request: Unsupported protocol version: "+string(v))
		return Outcome{}
	}
	legacyID := fctx.QueryArgs().Peek("sessionId")
	switch {
	case fctx.IsGet() && bytes.HasSuffix(fctx.Path(), []byte("/sse")):
		b.serveLegacyStream(r)
		return Outcome{Method: "sse"}
	case fctx.IsPost() && len(legacyID) > 0:
		return b.serveLegacyPost(r, string(legacyID))
	case fctx.IsPost():
		return b.servePost(r)
	case fctx.IsGet():
		b.serveStream(r)
		return Outcome{Method: "stream"}
	case fctx.IsDelete():
		b.serveDelete(r)
		return Outcome{Method: "delete"}
	}
	fctx.Response.Header.Set("Allow", "GET, POST, DELETE")
	httpError(fctx, fasthttp.StatusMethodNotAllowed, "method not allowed")
	return Outcome{}
}

// httpError answers with a status and a JSON-RPC error body without id, as
// the MCP transports do for requests they refuse before reading a message.
func httpError(fctx *fasthttp.RequestCtx, status int, msg string) {
	fctx.Response.SetStatusCode(status)
	fctx.Response.Header.SetContentType("application/json")
	body, _ := codec.Encode(codec.ErrorResponse(jsonrpc.ID{}, codec.CodeInvalidRequest, msg))
	fctx.Response.SetBody(body)
}

// tooManySessions refuses a new session: the backend holds its most, all
// in use.
func tooManySessions(fctx *fasthttp.RequestCtx) {
	httpError(fctx, tooManyStatus, errTooManySessions.Error())
	fctx.Response.Header.Set("Retry-After", tooManyRetryAfter)
}

func writeJSON(fctx *fasthttp.RequestCtx, msg jsonrpc.Message) {
	data, err := codec.Encode(msg)
	if err != nil {
		httpError(fctx, fasthttp.StatusInternalServerError, "cannot encode response")
		return
	}
	fctx.Response.SetStatusCode(fasthttp.StatusOK)
	fctx.Response.Header.SetContentType("application/json")
	fctx.Response.SetBody(data)
}

// readBody reads a bounded request body.
func readBody(req *fasthttp.Request, max int) ([]byte, bool) {
	if max <= 0 {
		max = defaultMaxBody
	}
	if s := req.BodyStream(); s != nil {
		data, err := io.ReadAll(io.LimitReader(s, int64(max)+1))
		return data, err == nil && len(data) <= max
	}
	body := req.Body()
	return body, len(body) <= max
}

func (b *Backend) callContext(r *Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.callTimeout(r))
}

// clientContext is callContext for work done only for the request's
// client, which ends too when the client goes away (Request.Context): an
// initialize, a call. Work others share or that must finish (a resume
// other requests wait for, DELETEs, the legacy transport's calls, which
// outlive their POST) keeps callContext.
func (b *Backend) clientContext(r *Request) (context.Context, context.CancelFunc) {
	parent := r.Context
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, b.callTimeout(r))
}

func (b *Backend) callTimeout(r *Request) time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return b.opts.CallTimeout
}

// connectOptions are how r's session s connects its targets: with r's
// credentials, and the client's latest token for a passthrough (each of the
// session's requests keeps its token, noteToken).
func (b *Backend) connectOptions(r *Request, s *Session) connectOptions {
	o := connectOptions{}
	if cred := r.Credentials; cred != nil {
		s.noteToken(r.Token)
		o.headers = func() (http.Header, error) { return cred.Header(s.currentToken()) }
	}
	return o
}

// decode reads one JSON-RPC message from the body, answering the client
// itself when it cannot.
func decode(r *Request) (jsonrpc.Message, bool) {
	fctx := r.Fast
	ct := fctx.Request.Header.ContentType()
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if !bytes.EqualFold(bytes.TrimSpace(ct), []byte("application/json")) {
		httpError(fctx, fasthttp.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return nil, false
	}
	body, ok := readBody(&fctx.Request, r.MaxBody)
	if !ok {
		httpError(fctx, fasthttp.StatusRequestEntityTooLarge, "request body too large")
		return nil, false
	}
	msgs, batch, err := codec.Decode(body, len(body))
	if err == nil && batch {
		// JSON-RPC batches left MCP in 2025-06-18.
		err = &codec.DecodeError{Code: codec.CodeInvalidRequest, Msg: "JSON-RPC batches are not supported"}
	}
	if err != nil {
		de, ok := err.(*codec.DecodeError)
		if !ok {
			de = &codec.DecodeError{Code: codec.CodeParseError, Msg: "invalid JSON-RPC message"}
		}
		fctx.Response.SetStatusCode(fasthttp.StatusBadRequest)
		fctx.Response.Header.SetContentType("application/json")
		data, _ := codec.Encode(codec.ErrorResponse(jsonrpc.ID{}, de.Code, de.Msg))
		fctx.Response.SetBody(data)
		return nil, false
	}
	return msgs[0], true
}

func acceptsSSE(fctx *fasthttp.RequestCtx) bool {
	return bytes.Contains(fctx.Request.Header.Peek("Accept"), []byte("text/event-stream"))
}

// servePost handles a streamable HTTP POST.
func (b *Backend) servePost(r *Request) Outcome {
	fctx := r.Fast
	msg, ok := decode(r)
	if !ok {
		return Outcome{}
	}
	req, isReq := msg.(*jsonrpc.Request)
	if isReq {
		if problem := paramsProblem(req.Params); problem != "" {
			refuseParams(fctx, req, problem)
			return Outcome{Method: req.Method}
		}
	}
	if isReq && req.Method == "initialize" && req.ID.IsValid() {
		b.serveInitialize(r, req)
		return Outcome{Method: req.Method}
	}
	out := Outcome{}
	if isReq {
		out.Method = req.Method
	}
	s, temporary := b.sessionFor(r, out.Method)
	if s == nil {
		return out
	}
	owned := false // the answer's stream closes a temporary session
	if temporary {
		defer func() {
			if !owned {
				b.closeTemporary(s)
			}
		}()
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		ctx, cancel := b.callContext(r)
		s.clientResponse(ctx, m)
		cancel()
		fctx.SetStatusCode(fasthttp.StatusAccepted)
		return out
	case *jsonrpc.Request:
		if !m.ID.IsValid() {
			ctx, cancel := b.callContext(r)
			s.clientNotification(ctx, m)
			cancel()
			fctx.SetStatusCode(fasthttp.StatusAccepted)
			return out
		}
		if !s.takeCall() {
			b.tooManyCalls(fctx, m.ID)
			return out
		}
		start := time.Now()
		if acceptsSSE(fctx) && streamable(m.Method) {
			var after func()
			if temporary {
				after = func() { b.closeTemporary(s) }
			}
			owned = b.streamCall(r, s, m, &out, after, start)
			return out
		}
		ctx, cancel := b.clientContext(r)
		resp := s.dispatch(ctx, m, r.Authz, nil, &out)
		cancel()
		s.doneCall()
		b.observe(m.Method, out.Target, out.metricTool(), resp.Error != nil, start)
		if s.ended() && !temporary {
			// A target no longer knows this session: it ended elsewhere.
			httpError(fctx, fasthttp.StatusNotFound, "Session not found")
			return out
		}
		writeJSON(fctx, resp)
	}
	return out
}

// streamable reports whether a method may see related messages (progress,
// requests to the client) before its response, which then goes as SSE.
func streamable(method string) bool {
	switch method {
	case "tools/call", "prompts/get", "resources/read", "completion/complete":
		return true
	}
	return false
}

// sessionFor finds the session of a request after initialize. In stateless
// mode it opens a temporary one.
func (b *Backend) sessionFor(r *Request, method string) (*Session, bool) {
	fctx := r.Fast
	if b.stateless {
		s := b.newSession()
		ctx, cancel := b.clientContext(r)
		defer cancel()
		version := string(fctx.Request.Header.Peek(headerProtocolVersion))
		if version == "" {
			version = LatestProtocolVersion
		}
		params, _ := json.Marshal(map[string]any{
			"protocolVersion": version,
			"capabilities":    map[string]any{},
			"clientInfo":      map[string]any{"name": "relaygate", "version": Version},
		})
		id, _ := jsonrpc.MakeID("init")
		if resp := s.initialize(ctx, id, params, b.connectOptions(r, s)); resp.Error != nil {
			s.close()
			writeJSON(fctx, errorResponse(jsonrpc.ID{}, jsonrpc.CodeInternalError, errorText(resp.Error)))
			return nil, false
		}
		s.clientNotification(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
		return s, true
	}
	id := string(fctx.Request.Header.Peek(headerSessionID))
	if id == "" {
		httpError(fctx, fasthttp.StatusBadRequest, "Bad Request: Mcp-Session-Id header is required")
		return nil, false
	}
	if s := b.find(r, id); s != nil {
		return s, false
	}
	httpError(fctx, fasthttp.StatusNotFound, "Session not found")
	return nil, false
}

// find returns the session an id names for this request: the one held
// here, or one resumed from the id. Sessions answer only the identity that
// opened them, and never after they ended.
func (b *Backend) find(r *Request, id string) *Session {
	if s := b.lookup(id, r.Subject); s != nil {
		s.noteToken(r.Token)
		return s
	}
	if b.isEnded(id) {
		return nil
	}
	st, err := b.decodeSessionID(id)
	if err != nil || st.Subject != r.Subject || !b.resumable(st) {
		return nil
	}
	return b.resumeOnce(r, id, st)
}

// resumable reports whether a session that left this process (or was held
// by another replica) may be resumed from its id: within the session TTL
// of its issue, and only when it has upstream sessions that can tell
// whether it still lives. See "Session ids" in docs/ARCHITECTURE.md.
func (b *Backend) resumable(st *sessionState) bool {
	if len(st.Init) == 0 || len(st.Upstream) == 0 {
		return false
	}
	return time.Since(time.UnixMilli(st.Issued)) < b.ttl
}

// resumeOnce resumes a session from its id, once however many requests
// for it arrive together: the others wait for the first and use its
// session.
func (b *Backend) resumeOnce(r *Request, id string, st *sessionState) *Session {
	for {
		b.mu.Lock()
		if s := b.sessions[id]; s != nil {
			b.mu.Unlock()
			s.touch()
			return s
		}
		if _, ended := b.ended[id]; ended || b.closed {
			b.mu.Unlock()
			return nil
		}
		wait, busy := b.resuming[id]
		if !busy {
			done := make(chan struct{})
			b.resuming[id] = done
			b.mu.Unlock()
			s := b.resume(r, id, st)
			b.mu.Lock()
			delete(b.resuming, id)
			b.mu.Unlock()
			close(done)
			return s
		}
		b.mu.Unlock()
		select {
		case <-wait:
		case <-time.After(b.opts.CallTimeout):
			return nil
		}
	}
}

func errorText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (b *Backend) closeTemporary(s *Session) { b.closeLater(s) }

// serveInitialize opens a session: every target initialized, the results
// merged, the session id returned.
func (b *Backend) serveInitialize(r *Request, req *jsonrpc.Request) {
	fctx := r.Fast
	if !b.stateless && !b.admit() {
		tooManySessions(fctx)
		return
	}
	s := b.newSession()
	ctx, cancel := b.clientContext(r)
	defer cancel()
	start := time.Now()
	resp := s.initialize(ctx, req.ID, req.Params, b.connectOptions(r, s))
	b.observe("initialize", "", "", resp.Error != nil, start)
	if resp.Error != nil || b.stateless {
		b.closeLater(s)
		writeJSON(fctx, resp)
		return
	}
	st := &sessionState{Subject: r.Subject, Upstream: s.upstreamSessions(), Version: s.version, Init: s.resumeParams()}
	id, err := b.encodeSessionID(st)
	if err != nil {
		b.closeLater(s)
		if errors.Is(err, errSessionIDTooLarge) {
			// The client's capabilities (and the targets' session ids)
			// would make an id too large to send back.
			b.log.Info("mcp initialize refused: session state too large for a session id", zap.String("backend", b.opts.Name), zap.Int("capabilities_bytes", len(st.Init)))
			writeJSON(fctx, errorResponse(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf(
				"initialize params too large for a session id: it carries the client's protocolVersion, capabilities and clientInfo name, title and version (and the targets' session ids), at most %d bytes", maxSessionIDBytes)))
			return
		}
		writeJSON(fctx, errorResponse(req.ID, jsonrpc.CodeInternalError, "cannot create session"))
		return
	}
	s.id, s.issued, s.subject = id, st.Issued, r.Subject
	if err := b.register(s); err != nil {
		b.closeLater(s)
		if err == errTooManySessions {
			tooManySessions(fctx)
			return
		}
		writeJSON(fctx, errorResponse(req.ID, jsonrpc.CodeInternalError, err.Error()))
		return
	}
	fctx.Response.Header.Set(headerSessionID, id)
	writeJSON(fctx, resp)
}

// resume rebuilds a session this process does not hold from its id:
// streamable HTTP targets continue their upstream sessions (each must still
// hold it), the others are initialized again with the client's original
// params.
func (b *Backend) resume(r *Request, id string, st *sessionState) *Session {
	s := b.newSession()
	s.id, s.issued, s.subject, s.version = id, st.Issued, st.Subject, st.Version
	ctx, cancel := b.callContext(r)
	defer cancel()
	o := b.connectOptions(r, s)
	o.resume = st.Upstream
	o.version = st.Version
	o.proceed = func() bool { return !b.isEnded(id) }
	initID, _ := jsonrpc.MakeID("resume")
	if resp := s.initialize(ctx, initID, st.Init, o); resp.Error != nil {
		b.log.Info("mcp session not resumed", zap.String("backend", b.opts.Name), zap.Error(resp.Error))
		b.closeLater(s)
		return nil
	}
	// Targets initialized again need to hear that the client is ready.
	for _, u := range s.live() {
		s.mu.Lock()
		fresh := s.fresh[u.idx]
		s.mu.Unlock()
		if fresh {
			_ = u.conn.Write(ctx, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)})
		}
	}
	if err := b.register(s); err != nil {
		b.log.Info("mcp session not resumed", zap.String("backend", b.opts.Name), zap.Error(err))
		b.closeLater(s)
		return nil
	}
	b.log.Info("mcp session resumed", zap.String("backend", b.opts.Name))
	return s
}

// streamCall answers a call as an SSE stream: messages the target sends
// while working on it (progress, requests to the client) come first, the
// response last. When the answer is a stream, after runs once the stream
// ends, and streamCall reports true; otherwise the caller runs it. The
// call is counted in the metrics (from start) once its answer is out.
func (b *Backend) streamCall(r *Request, s *Session, m *jsonrpc.Request, out *Outcome, after func(), start time.Time) bool {
	fctx := r.Fast
	ctx, cancel := b.clientContext(r)
	k := newSink()
	// Authorization and routing answer before the stream starts.
	done := make(chan *jsonrpc.Response, 1)
	probe := *out
	go func() {
		defer s.doneCall() // the caller took it
		done <- s.dispatch(ctx, m, r.Authz, k, &probe)
	}()
	// Wait for either the answer or the first related message, so that a
	// refused call is a plain JSON answer with its outcome known.
	var first []byte
	select {
	case resp := <-done:
		if len(k.ch) == 0 {
			cancel()
			*out = probe
			k.close()
			b.observe(m.Method, out.Target, out.metricTool(), resp.Error != nil || s.ended() && after == nil, start)
			if s.ended() && after == nil {
				httpError(fctx, fasthttp.StatusNotFound, "Session not found")
				return false
			}
			writeJSON(fctx, resp)
			return false
		}
		// Related messages came first: they go before the response.
		first = <-k.ch
		done <- resp
	case first = <-k.ch:
	}
	out.Target, out.Tool = probe.Target, probe.Tool
	target, tool := out.Target, out.metricTool()
	fctx.Response.Header.SetContentType("text/event-stream")
	fctx.Response.Header.Set("Cache-Control", "no-cache")
	// Detachable: a response policy (extProc) may take the stream.
	fctx.Response.SetBodyStream(backend.Detachable(fasthttp.NewStreamReader(func(w *bufio.Writer) {
		defer cancel()
		defer k.close()
		if after != nil {
			defer after()
		}
		// The call is counted when its stream ends: failed unless the
		// client took an answer that is not an error.
		failed := true
		defer func() { b.observe(m.Method, target, tool, failed, start) }()
		buf := sse.AppendEvent(nil, sse.Event{Type: "message", Data: first})
		for {
			if _, err := w.Write(buf); err != nil || w.Flush() != nil {
				return // the client left: ctx ends the call upstream
			}
			buf = buf[:0]
			select {
			case data := <-k.ch:
				buf = sse.AppendEvent(buf, sse.Event{Type: "message", Data: data})
			case <-k.done:
				return // the client read too slowly (sink.put): ctx ends the call
			case resp := <-done:
				// Related messages queued before the response go first.
				for drained := false; !drained; {
					select {
					case data := <-k.ch:
						buf = sse.AppendEvent(buf, sse.Event{Type: "message", Data: data})
					default:
						drained = true
					}
				}
				data, err := codec.Encode(resp)
				if err == nil {
					buf = sse.AppendEvent(buf, sse.Event{Type: "message", Data: data})
				}
				_, werr := w.Write(buf)
				failed = err != nil || resp.Error != nil || werr != nil || w.Flush() != nil
				return
			}
		}
	})), -1)
	return true
}

// serveStream opens the client's stream for messages targets send outside
// any call (streamable HTTP GET).
func (b *Backend) serveStream(r *Request) {
	fctx := r.Fast
	if !acceptsSSE(fctx) {
		httpError(fctx, fasthttp.StatusNotAcceptable, "Accept must include text/event-stream")
		return
	}
	if b.stateless {
		fctx.Response.Header.Set("Allow", "POST")
		httpError(fctx, fasthttp.StatusMethodNotAllowed, "stateless MCP backends have no stream")
		return
	}
	s, _ := b.sessionFor(r, "")
	if s == nil {
		return
	}
	b.pump(r, s, nil, b.keepAlive, nil)
}

// pump writes the session's stream to the client until either ends (the
// client's going included, r.Context); prefix is written first (the
// legacy endpoint event), a comment every keepAlive keeps it open, and
// after runs when it ended. A keep-alive the client's connection took
// counts as the session's use, as of when it was sent: a client listening
// on its stream keeps it, one that left does not.
func (b *Backend) pump(r *Request, s *Session, prefix []byte, keepAlive time.Duration, after func()) {
	fctx := r.Fast
	client := r.Context
	if client == nil {
		client = context.Background()
	}
	k := newSink()
	k.stalled = after // a legacy session ends with its stream at once
	s.mu.Lock()
	backlog := s.backlog
	s.backlog = nil
	if s.closed || b.draining.Load() {
		if s.stream != nil {
			s.stream.close()
		}
		s.stream = k
		k.close()
	} else {
		s.streamOpenedLocked(k)
	}
	s.mu.Unlock()
	fctx.Response.Header.SetContentType("text/event-stream")
	fctx.Response.Header.Set("Cache-Control", "no-cache")
	// Detachable: a response policy (extProc) may take the stream.
	fctx.Response.SetBodyStream(backend.Detachable(fasthttp.NewStreamReader(func(w *bufio.Writer) {
		defer s.streamEnded(k)
		defer k.close()
		if after != nil {
			defer after()
		}
		tick := time.NewTicker(keepAlive)
		defer tick.Stop()
		buf := append([]byte(nil), prefix...)
		for _, data := range backlog {
			buf = sse.AppendEvent(buf, sse.Event{Type: "message", Data: data})
		}
		if len(buf) == 0 {
			buf = append(buf, ": stream open\n\n"...)
		}
		// A write's success says only that fasthttp's stream took it; the
		// next one's that the client's connection took it too (fasthttp
		// ends the stream when writing to the connection fails). So a
		// keep-alive counts once the next write succeeds, and not when
		// the client is known to have gone.
		var sent, pending int64 // unix ns of the keep-alive in the last write, in buf; or 0
		for {
			if _, err := w.Write(buf); err != nil || w.Flush() != nil {
				return
			}
			if sent != 0 && client.Err() == nil {
				s.usedAt(sent)
			}
			sent, pending = pending, 0
			buf = buf[:0]
			select {
			case data := <-k.ch:
				buf = sse.AppendEvent(buf, sse.Event{Type: "message", Data: data})
			case <-tick.C:
				buf, pending = append(buf, ": keep-alive\n\n"...), time.Now().UnixNano()
			case <-k.done:
				return
			case <-client.Done():
				return // the client left (a hang-up, a stream reset)
			}
		}
	})), -1)
}

// serveDelete ends a session. It answers at once: the targets' sessions and
// processes stop in the background.
func (b *Backend) serveDelete(r *Request) {
	fctx := r.Fast
	id := string(fctx.Request.Header.Peek(headerSessionID))
	if id == "" {
		httpError(fctx, fasthttp.StatusBadRequest, "Bad Request: Mcp-Session-Id header is required")
		return
	}
	if b.stateless {
		fctx.Response.Header.Set("Allow", "POST")
		httpError(fctx, fasthttp.StatusMethodNotAllowed, "stateless MCP backends have no sessions")
		return
	}
	if s := b.lookup(id, r.Subject); s != nil {
		b.end(id)
		fctx.SetStatusCode(fasthttp.StatusOK)
		return
	}
	st, err := b.decodeSessionID(id)
	if err != nil || st.Subject != r.Subject || b.isEnded(id) || !b.resumable(st) {
		httpError(fctx, fasthttp.StatusNotFound, "Session not found")
		return
	}
	// Another replica's session: end its upstream sessions, so that no
	// replica can resume it, and remember it here.
	b.end(id)
	b.endUpstreams(r, st)
	fctx.SetStatusCode(fasthttp.StatusOK)
}

// endUpstreams ends the upstream sessions a session id names (bounded by
// the transport's DELETE timeout).
func (b *Backend) endUpstreams(r *Request, st *sessionState) {
	s := b.newSession()
	o := b.connectOptions(r, s)
	o.resume = st.Upstream
	o.version = st.Version
	ctx, cancel := b.callContext(r)
	defer cancel()
	var wg sync.WaitGroup
	for i, t := range b.targets {
		if st.Upstream[t.Name] == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if conn, err := s.dial(ctx, i, o); err == nil {
				_ = conn.Close() // a streamable connection's Close sends DELETE
			}
		}()
	}
	wg.Wait()
}

// serveLegacyStream opens a legacy SSE session: the first event names the
// URL to POST messages to; answers come on this stream.
func (b *Backend) serveLegacyStream(r *Request) {
	fctx := r.Fast
	if b.stateless {
		httpError(fctx, fasthttp.StatusMethodNotAllowed, "the SSE transport needs a stateful MCP backend")
		return
	}
	s := b.newSession()
	id, err := b.encodeSessionID(&sessionState{})
	if err != nil {
		httpError(fctx, fasthttp.StatusInternalServerError, "cannot create session")
		return
	}
	s.id, s.subject = id, r.Subject
	if err := b.register(s); err != nil {
		if err == errTooManySessions {
			tooManySessions(fctx)
			return
		}
		httpError(fctx, fasthttp.StatusServiceUnavailable, err.Error())
		return
	}
	endpoint := fmt.Sprintf("%s?sessionId=%s", fctx.Path(), id)
	// The stream is the session: when the client closes it, the session
	// and its targets' processes end.
	b.pump(r, s, sse.AppendEvent(nil, sse.Event{Type: "endpoint", Data: []byte(endpoint)}), b.legacyKeepAlive, func() { b.end(id) })
}

// serveLegacyPost takes a message for a legacy SSE session; the answer goes
// on the session's stream.
func (b *Backend) serveLegacyPost(r *Request, id string) Outcome {
	fctx := r.Fast
	s := b.lookup(id, r.Subject)
	if s == nil || !s.streaming() {
		// A session whose stream ended is over: an answer would have
		// nowhere to go.
		httpError(fctx, fasthttp.StatusNotFound, "Session not found")
		return Outcome{}
	}
	msg, ok := decode(r)
	if !ok {
		return Outcome{}
	}
	out := Outcome{}
	fctx.SetStatusCode(fasthttp.StatusAccepted)
	switch m := msg.(type) {
	case *jsonrpc.Response:
		ctx, cancel := b.callContext(r)
		s.clientResponse(ctx, m)
		cancel()
	case *jsonrpc.Request:
		out.Method = m.Method
		if problem := paramsProblem(m.Params); problem != "" {
			if m.ID.IsValid() {
				s.toClient(-1, "", errorResponse(m.ID, jsonrpc.CodeInvalidParams, "Invalid params: "+problem))
			} else {
				b.log.Debug("mcp client notification dropped: invalid params", zap.String("backend", b.opts.Name), zap.String("method", m.Method), zap.String("problem", problem))
			}
			return out
		}
		if !m.ID.IsValid() {
			ctx, cancel := b.callContext(r)
			s.clientNotification(ctx, m)
			cancel()
			return out
		}
		if m.Method == "initialize" && !s.claimInitialize() {
			// initialize opens a session, once: a second one would connect
			// every target again over the first's upstreams, which nothing
			// would ever close.
			s.toClient(-1, "", errorResponse(m.ID, jsonrpc.CodeInvalidRequest, "session already initialized: initialize is sent once per session"))
			return out
		}
		if !s.takeCall() {
			b.tooManyCalls(fctx, m.ID)
			return out
		}
		o := b.connectOptions(r, s)
		go func() {
			defer s.doneCall() // once the answer is on the stream
			ctx, cancel := b.callContext(r)
			defer cancel()
			var resp *jsonrpc.Response
			info := Outcome{}
			start := time.Now()
			if m.Method == "initialize" {
				resp = s.initialize(ctx, m.ID, m.Params, o)
			} else {
				s.mu.Lock()
				k := s.stream
				s.mu.Unlock()
				resp = s.dispatch(ctx, m, r.Authz, k, &info)
			}
			b.observe(m.Method, info.Target, info.metricTool(), resp.Error != nil, start)
			s.toClient(-1, "", resp)
		}()
	}
	return out
}
