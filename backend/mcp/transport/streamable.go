package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/codec/sse"
)

// StreamableOptions configure a Streamable HTTP connection.
type StreamableOptions struct {
	URL string
	// Client is required; the caller sets its timeouts and transport. A
	// Client.Timeout also cuts SSE streams.
	Client *http.Client
	// HeaderFunc, when set, gives headers for each request to the URL's
	// origin (credentials, which may rotate), where the transport sets no
	// such header itself; its error fails the request.
	HeaderFunc func() (http.Header, error)
	// SessionID resumes an existing upstream session: no initialize will
	// pass through this connection, so the standalone stream opens at once.
	SessionID string
	// ProtocolVersion is the MCP-Protocol-Version to send when resuming.
	ProtocolVersion string
	// ListenOnDemand opens the standalone GET stream only once Listen is
	// called (a gateway whose client opened its own stream), not as soon
	// as the session is initialized, and closes it at Unlisten (the
	// client's stream ended): a session nobody listens on holds no
	// upstream connection.
	ListenOnDemand bool
	// MaxMessageBytes bounds a JSON body and an SSE event (default 16 MiB).
	MaxMessageBytes int
	Logger          *zap.Logger
}

// DefaultMaxMessageBytes is StreamableOptions.MaxMessageBytes' default.
const DefaultMaxMessageBytes = 16 << 20

const (
	headerSessionID   = "Mcp-Session-Id"
	headerVersion     = "Mcp-Protocol-Version"
	headerLastEventID = "Last-Event-ID"
	headerMethod      = "Mcp-Method"
	headerName        = "Mcp-Name"

	// versionStandardHeaders is the first protocol version that wants
	// Mcp-Method and Mcp-Name, and has no standalone GET stream.
	versionStandardHeaders = "2026-07-28"

	// queueSize bounds messages read from the target but not yet taken by
	// Read; when it is full the streams stop reading (backpressure).
	queueSize = 64
	// maxErrorBody bounds what is read of an error response's body.
	maxErrorBody = 4 << 10
	// maxRetries bounds reconnections of a stream that makes no progress.
	maxRetries = 5
	// deleteTimeout bounds the DELETE that ends the session on Close.
	deleteTimeout = 2 * time.Second
	// maxPendingInits bounds initialize requests awaiting their result.
	maxPendingInits = 16
)

// Reconnection delays of SSE streams (variables for tests).
var (
	retryBase = 100 * time.Millisecond
	retryMax  = 10 * time.Second
	// retryServerMax caps a delay the server asks for with an SSE retry field.
	retryServerMax = time.Minute
)

// streamable is a client connection of the Streamable HTTP transport.
type streamable struct {
	url    string
	client *http.Client
	max    int
	log    *zap.Logger

	ctx      context.Context // ends with Close; every request derives from it
	cancel   context.CancelFunc
	incoming chan jsonrpc.Message
	done     chan struct{} // closed by Close

	mu        sync.Mutex
	sessionID string
	version   string
	expired   bool                    // the target refused our session id (refusedSession)
	inits     map[jsonrpc.ID]struct{} // initialize requests awaiting their result
	listening bool                    // the standalone GET stream was started
	ready     bool                    // initialized or resumed: the stream may open
	onDemand  bool                    // ... once wanted (Listen), until Unlisten
	wanted    bool
	noStream  bool               // the target offers no standalone stream
	unlisten  context.CancelFunc // ends the standalone stream's goroutine
	closed    bool
	wg        sync.WaitGroup // goroutines; Add only under mu while !closed

	closeOnce sync.Once
}

// DialStreamable returns a connection to a Streamable HTTP MCP endpoint. It
// sends nothing until the first Write (or, when resuming, opens the
// standalone stream in the background).
func DialStreamable(ctx context.Context, o StreamableOptions) (mcp.Connection, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.Client == nil {
		return nil, errors.New("streamable HTTP target: no HTTP client")
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, fmt.Errorf("streamable HTTP target: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("streamable HTTP target: URL %q is not an absolute http(s) URL", u.Redacted())
	}
	client := o.Client
	if o.HeaderFunc != nil {
		hc := withHeaders(o.Client, o.URL, o.HeaderFunc)
		client = &hc
	}
	c := &streamable{
		url:       o.URL,
		client:    client,
		max:       o.MaxMessageBytes,
		log:       o.Logger,
		incoming:  make(chan jsonrpc.Message, queueSize),
		done:      make(chan struct{}),
		inits:     map[jsonrpc.ID]struct{}{},
		sessionID: o.SessionID,
		onDemand:  o.ListenOnDemand,
	}
	if c.max <= 0 {
		c.max = DefaultMaxMessageBytes
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if o.SessionID != "" {
		c.version = o.ProtocolVersion
		c.mu.Lock()
		c.startListeningLocked()
		c.mu.Unlock()
	}
	return c, nil
}

// SessionID is the upstream session id ("" until initialize assigned one,
// and for targets without sessions).
func (c *streamable) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// Read returns the next message from the target.
func (c *streamable) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-c.done:
		return nil, io.EOF
	default:
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, io.EOF
	case m := <-c.incoming:
		select {
		case <-c.done:
			return nil, io.EOF
		default:
		}
		return m, nil
	}
}

// Write POSTs msg and returns once the response head is in; what the
// response carries is delivered to Read. A request the target refuses with
// an HTTP error is answered through Read with a made-up error response.
func (c *streamable) Write(ctx context.Context, msg jsonrpc.Message) error {
	var call *jsonrpc.Request // a request that expects a response
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.ID.IsValid() {
			call = m
		}
	case *jsonrpc.Response:
	default:
		return fmt.Errorf("streamable HTTP target: cannot send %T", msg)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	isInit := call != nil && call.Method == "initialize"

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return mcp.ErrConnectionClosed
	}
	if isInit {
		if len(c.inits) >= maxPendingInits {
			c.mu.Unlock()
			return errors.New("streamable HTTP target: too many initialize requests in flight")
		}
		c.inits[call.ID] = struct{}{}
	}
	c.wg.Add(1) // this Write; Close waits for it
	c.mu.Unlock()
	defer c.wg.Done()

	// The request lives with the connection (an SSE body outlasts Write);
	// ctx bounds it only until the head is in.
	reqCtx, cancelReq := context.WithCancel(c.ctx)
	stop := context.AfterFunc(ctx, cancelReq)
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, c.url, bytes.NewReader(data))
	if err != nil {
		stop()
		cancelReq()
		c.forgetInit(call, isInit)
		return err
	}
	sentSession := c.setHeaders(req.Header, !isInit)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if r, ok := msg.(*jsonrpc.Request); ok {
		setStandardHeaders(req.Header, r)
	}
	resp, err := c.client.Do(req)
	if !stop() {
		// ctx ended first; the request was (or is being) cancelled.
		if err == nil {
			resp.Body.Close()
		}
		cancelReq()
		c.forgetInit(call, isInit)
		return ctx.Err()
	}
	if err != nil {
		cancelReq()
		c.forgetInit(call, isInit)
		if c.ctx.Err() != nil {
			return mcp.ErrConnectionClosed
		}
		return fmt.Errorf("streamable HTTP target: %w", err)
	}
	if sid := resp.Header.Get(headerSessionID); sid != "" && resp.StatusCode/100 == 2 {
		c.mu.Lock()
		if isInit || c.sessionID == "" {
			c.sessionID, c.expired = sid, false
		}
		c.mu.Unlock()
	}
	if resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent {
		discard(resp.Body)
		cancelReq()
		c.forgetInit(call, isInit)
		return nil
	}
	if !c.spawn(func() {
		defer cancelReq()
		c.handleResponse(resp, msg, call, sentSession)
	}) {
		resp.Body.Close()
		cancelReq()
		return mcp.ErrConnectionClosed
	}
	return nil
}

// setHeaders adds, when withSession, the session and protocol version
// headers; it returns the session id it sent.
func (c *streamable) setHeaders(h http.Header, withSession bool) string {
	h.Del(headerSessionID)
	h.Del(headerVersion)
	if !withSession {
		return ""
	}
	c.mu.Lock()
	sid, version := c.sessionID, c.version
	c.mu.Unlock()
	if sid != "" {
		h.Set(headerSessionID, sid)
	}
	if version != "" {
		h.Set(headerVersion, version)
	}
	return sid
}

// setStandardHeaders adds Mcp-Method and Mcp-Name, which protocol versions
// from 2026-07-28 require on requests.
func setStandardHeaders(h http.Header, r *jsonrpc.Request) {
	if v := h.Get(headerVersion); v == "" || v < versionStandardHeaders {
		return
	}
	h.Set(headerMethod, r.Method)
	field := ""
	switch r.Method {
	case "tools/call", "prompts/get":
		field = "name"
	case "resources/read":
		field = "uri"
	default:
		return
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(r.Params, &p) != nil {
		return
	}
	var name string
	if json.Unmarshal(p[field], &name) == nil && headerSafe(name) {
		h.Set(headerName, name)
	}
}

// headerSafe reports a non-empty value of printable ASCII.
func headerSafe(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// forgetInit drops an initialize request that will get no result.
func (c *streamable) forgetInit(call *jsonrpc.Request, isInit bool) {
	if !isInit {
		return
	}
	c.mu.Lock()
	delete(c.inits, call.ID)
	c.mu.Unlock()
}

// spawn runs f in a goroutine Close waits for; false once closed.
func (c *streamable) spawn(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// handleResponse delivers what the response to a POST carries.
func (c *streamable) handleResponse(resp *http.Response, msg jsonrpc.Message, call *jsonrpc.Request, sentSession string) {
	defer resp.Body.Close()
	isInit := call != nil && call.Method == "initialize"
	if resp.StatusCode/100 != 2 {
		c.forgetInit(call, isInit)
		c.httpFailure(resp, msg, call, sentSession)
		return
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		c.readJSON(resp.Body, call)
	case "text/event-stream":
		c.readPostStream(resp.Body, call)
	default:
		if call != nil {
			discard(resp.Body)
			c.forgetInit(call, isInit)
			c.deliver(errorResponse(call.ID, newUpstreamError(nil, jsonrpc.CodeInternalError,
				"upstream MCP server answered %s with unsupported content type %q", call.Method, resp.Header.Get("Content-Type"))))
			return
		}
		discard(resp.Body)
	}
	if isInit {
		c.forgetInit(call, isInit) // no result came
	}
}

// httpFailure answers a request the target refused with an HTTP error.
func (c *streamable) httpFailure(resp *http.Response, msg jsonrpc.Message, call *jsonrpc.Request, sentSession string) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	expired := refusedSession(resp.StatusCode, body, call, sentSession)
	if expired {
		c.mu.Lock()
		if c.sessionID == sentSession {
			c.expired = true
		}
		c.mu.Unlock()
	}
	if call == nil {
		what := "notification"
		if r, ok := msg.(*jsonrpc.Request); ok {
			what = r.Method
		} else {
			what = "response"
		}
		c.log.Warn("mcp target refused a message", zap.String("message", what), zap.Int("status", resp.StatusCode))
		return
	}
	// Use the target's JSON-RPC error when the body carries one.
	code, detail := int64(jsonrpc.CodeInternalError), ""
	if e, ok := bodyError(body); ok {
		code, detail = e.Code, e.Message
	}
	if detail == "" {
		detail = textSnippet(body)
	}
	status := resp.StatusCode
	var err error
	switch {
	case expired:
		err = newUpstreamError(ErrSessionExpired, CodeSessionExpired, "upstream MCP session expired (HTTP %d%s)", status, suffix(detail))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		err = newUpstreamError(ErrUnauthorized, code, "upstream MCP server refused authorization (HTTP %d%s)", status, suffix(detail))
	case status >= 500:
		err = newUpstreamError(nil, code, "upstream MCP server error (HTTP %d%s)", status, suffix(detail))
	default:
		err = newUpstreamError(nil, code, "upstream MCP server rejected %s (HTTP %d%s)", call.Method, status, suffix(detail))
	}
	c.deliver(errorResponse(call.ID, err))
}

// refusedSession reports whether a target's HTTP error refuses the upstream
// session a request named (sentSession; initialize names none): 404, as
// the spec has it, or a 400 that does not answer the request, as servers
// built on the TypeScript SDK's examples refuse an id they do not know
// ("Bad Request: No valid session ID provided", -32000, no id). A 400
// whose body is a JSON-RPC answer to the request, or an error with one of
// JSON-RPC's own codes (-32700 parse error, -32600 invalid request,
// -32601..-32603), is the target refusing the request itself, not the
// session: the TypeScript SDK answers a message its schema refuses (a
// "_meta": null) with 400 -32700 and id null, and taking that for a
// refusal ended the client's session on every target.
func refusedSession(status int, body []byte, call *jsonrpc.Request, sentSession string) bool {
	switch {
	case sentSession == "":
		return false
	case status == http.StatusNotFound:
		return true
	case status != http.StatusBadRequest || call == nil:
		return false
	}
	if m, err := jsonrpc.DecodeMessage(body); err == nil {
		if r, ok := m.(*jsonrpc.Response); ok && r.ID == call.ID {
			return false
		}
	}
	if e, ok := bodyError(body); ok && messageRefused(e.Code) {
		return false
	}
	return true
}

// bodyError is the JSON-RPC error an HTTP error's body carries, whatever
// its id: servers answer a message they could not read with id null, or
// none, which the SDK's decoder refuses.
func bodyError(body []byte) (*jsonrpc.Error, bool) {
	var r struct {
		Error *struct {
			Code    *int64 `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &r) != nil || r.Error == nil || r.Error.Code == nil {
		return nil, false
	}
	return &jsonrpc.Error{Code: *r.Error.Code, Message: r.Error.Message}, true
}

// messageRefused reports one of the codes JSON-RPC defines for a message
// the server could not take (as opposed to the server-defined -32000 to
// -32099, which MCP servers use for "session not found").
func messageRefused(code int64) bool {
	switch code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams, jsonrpc.CodeInternalError:
		return true
	}
	return false
}

func suffix(detail string) string {
	if detail == "" {
		return ""
	}
	return ": " + detail
}

// textSnippet is the start of a plain-text body, when it is printable.
func textSnippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 200 {
		b = b[:200]
	}
	for _, ch := range b {
		if (ch < 0x20 && ch != '\t') || ch == 0x7f {
			return ""
		}
	}
	return string(b)
}

// readJSON delivers a JSON body: one message or an array of them.
func (c *streamable) readJSON(body io.Reader, call *jsonrpc.Request) {
	data, err := io.ReadAll(io.LimitReader(body, int64(c.max)+1))
	if err == nil && len(data) > c.max {
		err = fmt.Errorf("body larger than %d bytes", c.max)
	}
	if err == nil && call == nil && len(bytes.TrimSpace(data)) == 0 {
		return // some targets answer notifications with an empty 200
	}
	var msgs []jsonrpc.Message
	if err == nil {
		msgs, err = decodeBody(data)
	}
	if err != nil {
		if c.ctx.Err() != nil {
			return
		}
		c.log.Warn("mcp target sent a bad JSON response", zap.Error(err))
		if call != nil {
			c.deliver(errorResponse(call.ID, newUpstreamError(nil, jsonrpc.CodeInternalError, "bad response from the upstream MCP server: %v", err)))
		}
		return
	}
	answered := false
	for _, m := range msgs {
		if call != nil {
			if r, ok := m.(*jsonrpc.Response); ok {
				if r.ID != call.ID {
					// A JSON body answers the request it was sent for.
					c.log.Warn("mcp target answered another request id", zap.String("method", call.Method), zap.Any("id", r.ID.Raw()))
					continue
				}
				answered = true
			}
		}
		if !c.deliver(m) {
			return
		}
	}
	if call != nil && !answered {
		// Without this the call would wait for an answer that cannot come.
		c.forgetInit(call, call.Method == "initialize")
		c.deliver(errorResponse(call.ID, newUpstreamError(nil, jsonrpc.CodeInternalError,
			"bad response from the upstream MCP server: its JSON body does not answer %s", call.Method)))
	}
}

// decodeBody decodes one JSON-RPC message or a batch.
func decodeBody(data []byte) ([]jsonrpc.Message, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var raws []json.RawMessage
		if err := json.Unmarshal(data, &raws); err != nil {
			return nil, err
		}
		msgs := make([]jsonrpc.Message, 0, len(raws))
		for _, raw := range raws {
			m, err := jsonrpc.DecodeMessage(raw)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		}
		return msgs, nil
	}
	m, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, err
	}
	return []jsonrpc.Message{m}, nil
}

// streamResult is how an SSE stream ended.
type streamResult struct {
	answered bool   // the response to the stream's call arrived
	progress bool   // an event arrived or the last event id moved
	lastID   string // the stream's last event id
	retry    time.Duration
	err      error // io.EOF for a clean end
}

// readEvents delivers the message events of an SSE body until it ends, or
// until the response to call (when not nil) arrived.
func (c *streamable) readEvents(body io.Reader, call *jsonrpc.Request, lastID string) streamResult {
	r := sse.NewReader(body, c.max)
	res := streamResult{lastID: lastID}
	finish := func(err error) streamResult {
		if id := r.LastEventID(); id != "" && id != res.lastID {
			res.lastID, res.progress = id, true
		}
		if ms, ok := r.Retry(); ok {
			res.retry = min(time.Duration(ms)*time.Millisecond, retryServerMax)
		}
		res.err = err
		return res
	}
	for {
		ev, err := r.Next()
		if err != nil {
			return finish(err)
		}
		res.progress = true
		if ev.Type != "message" || len(ev.Data) == 0 {
			continue
		}
		m, err := jsonrpc.DecodeMessage(ev.Data) // copies what it keeps
		if err != nil {
			c.log.Warn("mcp target sent a bad SSE message", zap.Error(err))
			continue
		}
		if !c.deliver(m) {
			return finish(mcp.ErrConnectionClosed)
		}
		if resp, ok := m.(*jsonrpc.Response); ok && call != nil && resp.ID == call.ID {
			res.answered = true
			return finish(nil)
		}
	}
}

// readPostStream reads the SSE response to a POST; when it ends before the
// response to call, it resumes through GET with Last-Event-ID if the stream
// had event ids, and otherwise answers call with an error.
func (c *streamable) readPostStream(body io.Reader, call *jsonrpc.Request) {
	res := c.readEvents(body, call, "")
	if call == nil || res.answered || c.ctx.Err() != nil {
		return
	}
	failures := 0
	for res.lastID != "" && failures < maxRetries && c.ctx.Err() == nil {
		if res.progress {
			failures = 0
		} else {
			failures++
		}
		if !wait(c.ctx, delay(failures, res.retry)) {
			return
		}
		resp, err := c.get(c.ctx, res.lastID)
		if err != nil {
			continue
		}
		if resp.StatusCode/100 != 2 || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
			discard(resp.Body)
			break
		}
		res = c.readEvents(resp.Body, call, res.lastID)
		resp.Body.Close()
		if res.answered {
			return
		}
	}
	if c.ctx.Err() != nil {
		return
	}
	reason := "the upstream MCP server ended the stream before the response"
	if res.err != nil && res.err != io.EOF {
		// The error may name addresses: the log has it, the client the
		// class (an event over the bound is the target's doing).
		c.log.Warn("mcp target stream broke before the response", zap.String("method", call.Method), zap.Error(res.err))
		reason = "the stream from the upstream MCP server broke before the response"
		if errors.Is(res.err, sse.ErrEventTooLarge) {
			reason += ": an event too large"
		}
	}
	c.forgetInit(call, call.Method == "initialize")
	c.deliver(errorResponse(call.ID, newUpstreamError(nil, jsonrpc.CodeInternalError, "%s", reason)))
}

// deliver queues m for Read, blocking while the queue is full; false once
// the connection closed. It notes an initialize result on the way.
func (c *streamable) deliver(m jsonrpc.Message) bool {
	initialized := false
	if r, ok := m.(*jsonrpc.Response); ok {
		initialized = c.observe(r)
	}
	select {
	case c.incoming <- m:
		if initialized {
			// Only now: what the standalone stream brings must come after
			// the initialize result, not overtake it.
			c.mu.Lock()
			c.startListeningLocked()
			c.mu.Unlock()
		}
		return true
	case <-c.done:
		return false
	}
}

// observe notes the protocol version of an initialize result; true when
// it was one (the standalone stream is to open once it is delivered).
func (c *streamable) observe(r *jsonrpc.Response) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.inits[r.ID]; !ok {
		return false
	}
	delete(c.inits, r.ID)
	if r.Error != nil {
		return false
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(r.Result, &res) != nil || res.ProtocolVersion == "" {
		return false
	}
	c.version = res.ProtocolVersion
	return true
}

// Listen asks for the standalone GET stream (ListenOnDemand): it opens now
// if the session is initialized, else once it is.
func (c *streamable) Listen() {
	c.mu.Lock()
	c.wanted = true
	if c.ready {
		c.startListeningLocked()
	}
	c.mu.Unlock()
}

// Unlisten takes back Listen (ListenOnDemand): the standalone GET stream,
// if open, closes, and its upstream connection with it; the next Listen
// opens a new one. Nothing waits for the stream's goroutine here (Close
// does).
func (c *streamable) Unlisten() {
	c.mu.Lock()
	if !c.onDemand {
		c.mu.Unlock()
		return
	}
	c.wanted = false
	stop := c.unlisten
	c.unlisten = nil
	c.listening = false
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// startListeningLocked opens the standalone GET stream once, when the
// session is ready for it and, on demand, wanted.
func (c *streamable) startListeningLocked() {
	c.ready = true
	if c.onDemand && !c.wanted {
		return
	}
	if c.listening || c.closed || c.noStream || (c.version != "" && c.version >= versionStandardHeaders) {
		return
	}
	c.listening = true
	ctx, cancel := context.WithCancel(c.ctx)
	c.unlisten = cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer cancel()
		c.listen(ctx)
	}()
}

// listen keeps the standalone stream open until ctx ends: it reconnects
// when the stream ends, with backoff, and gives up after maxRetries
// attempts without progress (until the next Listen after an Unlisten). A
// target without the stream (405, not SSE, another 4xx) is left alone for
// good.
func (c *streamable) listen(ctx context.Context) {
	lastID := ""
	failures := 0
	var retry time.Duration
	for ctx.Err() == nil {
		resp, err := c.get(ctx, lastID)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			if failures > maxRetries {
				c.log.Warn("mcp target stream: giving up", zap.Error(err))
				return
			}
			if !wait(ctx, delay(failures, retry)) {
				return
			}
			continue
		}
		status, ctype := resp.StatusCode, mediaType(resp.Header.Get("Content-Type"))
		switch {
		case status/100 == 2 && ctype == "text/event-stream":
		case status == http.StatusMethodNotAllowed || status/100 == 2:
			discard(resp.Body)
			c.noStreamHere()
			return // the target offers no stream
		case status/100 == 4:
			discard(resp.Body)
			c.log.Debug("mcp target stream refused", zap.Int("status", status))
			c.noStreamHere()
			return
		default:
			discard(resp.Body)
			failures++
			if failures > maxRetries {
				c.log.Warn("mcp target stream: giving up", zap.Int("status", status))
				return
			}
			if !wait(ctx, delay(failures, retry)) {
				return
			}
			continue
		}
		res := c.readEvents(resp.Body, nil, lastID)
		resp.Body.Close()
		lastID = res.lastID
		if res.retry > 0 {
			retry = res.retry
		}
		if res.progress {
			failures = 0
		} else {
			failures++
		}
		if failures > maxRetries {
			c.log.Warn("mcp target stream: giving up after repeated ends without events")
			return
		}
		if !wait(ctx, delay(failures, retry)) {
			return
		}
	}
}

// noStreamHere notes that the target refused the standalone stream: no
// later Listen asks again.
func (c *streamable) noStreamHere() {
	c.mu.Lock()
	c.noStream = true
	c.mu.Unlock()
}

// get opens an SSE stream with GET, for as long as ctx lasts.
func (c *streamable) get(ctx context.Context, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	c.setHeaders(req.Header, true)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set(headerLastEventID, lastID)
	}
	return c.client.Do(req)
}

// delay is the wait before reconnection attempt n (0: after progress).
func delay(n int, server time.Duration) time.Duration {
	if server > 0 && n <= 1 {
		return server
	}
	d := retryBase << min(n, 16)
	d = min(d, retryMax)
	return d/2 + rand.N(d/2+1)
}

// wait pauses for d unless ctx ends (the connection closes, a stream is
// no longer wanted); false when it ended.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Close stops every stream and request, ends the upstream session with a
// DELETE (bounded by deleteTimeout) and makes Read return io.EOF.
func (c *streamable) Close() error {
	c.shutdown(true)
	return nil
}

// Release stops every stream and request like Close, but leaves the
// upstream session to the target, so that a session id that names it can
// resume it later (a gateway rebuilding its backend, or stopping while
// other replicas carry on).
func (c *streamable) Release() error {
	c.shutdown(false)
	return nil
}

func (c *streamable) shutdown(end bool) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		sid, expired := c.sessionID, c.expired
		c.mu.Unlock()
		close(c.done)
		c.cancel()
		if end && sid != "" && !expired {
			c.deleteSession()
		}
		c.wg.Wait()
	})
}

// deleteSession asks the target to end the session.
func (c *streamable) deleteSession() {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	c.setHeaders(req.Header, true)
	resp, err := c.client.Do(req)
	if err != nil {
		c.log.Debug("mcp target session delete failed", zap.Error(err))
		return
	}
	discard(resp.Body)
}

// discard reads a little of a body, so its connection can be reused, and
// closes it.
func discard(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, maxErrorBody)
	body.Close()
}

// mediaType is the lower-case media type of a Content-Type.
func mediaType(v string) string {
	t, _, err := mime.ParseMediaType(v)
	if err != nil {
		return ""
	}
	return t
}
