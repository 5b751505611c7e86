// Package policy owns the request and response policies of the gateway: each
// policy kind is compiled once from its config into a small immutable value whose
// OnRequest/OnResponse methods run on the hot path without allocating.
package policy

import (
	"bytes"
	"io"
	"time"

	"github.com/valyala/fasthttp"
)

// Result tells the pipeline what to do after a request policy ran.
type Result uint8

const (
	// Continue runs the next policy.
	Continue Result = iota
	// Done means the policy wrote the complete response into Ctx.Fast.Response;
	// no backend is contacted, response policies still run.
	Done
)

// Ctx is the per-request state shared by policies. The server owns it, resets it
// for each request and never shares it across goroutines.
type Ctx struct {
	// Fast is the request being served; policies read and modify Fast.Request and,
	// when they answer themselves, write Fast.Response.
	Fast *fasthttp.RequestCtx
	// Deadline is when the route's request timeout answers the request (zero:
	// none): a policy that waits (a fault's delay) waits no longer.
	Deadline time.Time
	// Host is the request host, lower-cased, without port.
	Host []byte
	// Path is the request path as received (no query, not decoded).
	Path []byte
	// MatchedPrefix is the path prefix of the route match that selected the
	// route, when it was a prefix match; URL rewrites with `prefix` replace it.
	MatchedPrefix []byte
	// Scheme is "http" or "https", as the client connected.
	Scheme []byte
	// HTTP2 says the client speaks HTTP/2 (Fast.Request's protocol says
	// HTTP/1.1 then, for the request path's sake).
	HTTP2 bool

	// HostRewritten is set by a policy that chose the upstream Host header, so
	// the proxy does not replace it with the backend's name.
	HostRewritten bool

	// CORS is set by the CORS policy whose answer depends on the Origin:
	// the response gets "Vary: Origin", and CORS headers when CORSOrigin
	// is set.
	CORS *CORS
	// CORSOrigin is the allowed request Origin (empty when none is),
	// copied so that request policies changing headers later cannot lose
	// it.
	CORSOrigin []byte

	// Claims are the claims of the request's validated JWT, set by jwtAuth or
	// mcpAuthentication; nil when the request carries no valid token.
	// Authorization rules and the MCP gateway read them.
	Claims map[string]any
	// BasicAuthUser is the user basicAuth authenticated ("" when none).
	BasicAuthUser string
	// APIKey is what CEL sees as `apiKey` for the key apiKey authenticated:
	// the key's metadata object, shared and never modified (nil when no key
	// was authenticated).
	APIKey map[string]any
	// TokenCharges are called with the request's LLM token count once it
	// is known (remoteRateLimit's token descriptors).
	TokenCharges []func(TokenUsage)
	// Responding is set once the response policies run: CEL sees
	// `response` from then on.
	Responding bool
	// ExtAuthz is the dynamic metadata the extAuthz service answered with,
	// what CEL sees as `extauthz` (nil when none).
	ExtAuthz map[string]any
	// Token is the validated bearer token. Authentication removes the
	// credential from the forwarded request; backendAuth passthrough and MCP
	// targets re-add it from here.
	Token []byte
	// ExtProc is the state of each extProc policy that saw this request
	// (the gateway phase's and the route's), carried from its request
	// phase to its response phase; Reset closes them.
	ExtProc []io.Closer
	// Trace is the request's span, the parent of the spans of the calls
	// policies make to external services; the zero Trace when the request
	// is not traced.
	Trace Trace
	// Backend is CEL's `backend` once the request's backend is picked
	// (name, type, protocol): shared, never modified; nil before.
	Backend map[string]any
	// Metadata is what transformations' `metadata` set for this request
	// (CEL's `metadata`); nil until one does.
	Metadata map[string]any
	// ExtProcMetadata is the dynamic metadata the external processor
	// answered with (CEL's `extproc`); nil when none.
	ExtProcMetadata map[string]any
	// ExprHead, once set, is the request head as it was before the
	// gateway put its own backend credentials on the request (backendAuth's
	// key and credentials, an AWS signature, an LLM provider's key or
	// token): the request has become the upstream one in place, and the
	// expressions that read it from then on (response policies, the
	// access log, spans, guards) read this head instead, so that the
	// gateway's secrets reach the upstream alone. nil: the request's own
	// head.
	ExprHead *fasthttp.RequestHeader
	// RequestBodyRead is set once a policy read the request's body whole
	// (ReadRequestBody): Fast.Request holds it, not a stream, and CEL
	// shows it as request.body. ResponseBodyRead is the same for the
	// response (ReadResponseBody, response.body).
	RequestBodyRead, ResponseBodyRead bool

	// ran are the policies of a conditional form that ran for this
	// request (MarkRan), whose response side runs then.
	ran []any
	// responseEdits are the response header edits request policies left
	// for their response side (KeepResponseEdit).
	responseEdits []responseEdit

	scratch []byte
}

// MarkRan notes that p ran for this request (a conditional form's chosen
// entry).
func (c *Ctx) MarkRan(p any) { c.ran = append(c.ran, p) }

// Ran reports whether MarkRan noted p for this request.
func (c *Ctx) Ran(p any) bool {
	for _, r := range c.ran {
		if r == p {
			return true
		}
	}
	return false
}

// responseEdit is a HeaderEdit kept for the response of the policy that
// made it.
type responseEdit struct {
	owner any
	HeaderEdit
}

// KeepResponseEdit keeps e for the response, for owner's response side to
// apply (ApplyResponseEdits): what an external service a request policy
// asked wants on the response (ext_authz's response_headers_to_add, the
// rate limit service's headers), whatever answers the request then.
func (c *Ctx) KeepResponseEdit(owner any, e HeaderEdit) {
	c.responseEdits = append(c.responseEdits, responseEdit{owner, e})
}

// ApplyResponseEdits makes on the response the edits owner kept, in the
// order kept, once.
func (c *Ctx) ApplyResponseEdits(owner any) {
	for i := range c.responseEdits {
		if e := &c.responseEdits[i]; e.owner == owner {
			e.Apply(&c.Fast.Response.Header)
			e.owner = nil
		}
	}
}

// Reset clears the context for reuse.
func (c *Ctx) Reset() {
	c.Fast = nil
	c.Deadline = time.Time{}
	c.Host = nil
	c.Path = nil
	c.MatchedPrefix = nil
	c.Scheme = nil
	c.HTTP2 = false
	c.CORS = nil
	c.CORSOrigin = c.CORSOrigin[:0]
	c.HostRewritten = false
	c.Claims = nil
	c.BasicAuthUser = ""
	c.APIKey = nil
	c.ExtAuthz = nil
	c.Responding = false
	c.RequestBodyRead, c.ResponseBodyRead = false, false
	c.Metadata, c.ExtProcMetadata, c.Backend = nil, nil, nil
	c.ExprHead = nil
	clear(c.TokenCharges)
	c.TokenCharges = c.TokenCharges[:0]
	c.Token = c.Token[:0]
	for i, x := range c.ExtProc {
		_ = x.Close()
		c.ExtProc[i] = nil
	}
	c.ExtProc = c.ExtProc[:0]
	c.Trace = Trace{}
	clear(c.ran)
	c.ran = c.ran[:0]
	clear(c.responseEdits)
	c.responseEdits = c.responseEdits[:0]
	c.scratch = c.scratch[:0]
}

// TokenUsage is what an LLM exchange came to, for TokenCharges.
type TokenUsage struct {
	// Total is the exchange's input and output tokens.
	Total int64
	// LLM returns the `llm` variable of CEL for the exchange (its token
	// counts, provider and models), built when asked for.
	LLM func() map[string]any
}

// RequestHead is the request head expressions read: ExprHead once set,
// else the request's own.
func (c *Ctx) RequestHead() *fasthttp.RequestHeader {
	if c.ExprHead != nil {
		return c.ExprHead
	}
	return &c.Fast.Request.Header
}

// PathFromTarget points c.Path at the path of the request's target as it
// now stands, its query left out: a policy that set the target (a
// transformation's or an external processor's :path) has later policies
// (urlRewrite, a redirect, CEL's request.path) see the new path.
func (c *Ctx) PathFromTarget() {
	t := c.Fast.Request.Header.RequestURI()
	if i := bytes.IndexByte(t, '?'); i >= 0 {
		t = t[:i]
	}
	c.Path = t
}

// Scratch returns a reusable buffer owned by the context, emptied.
func (c *Ctx) Scratch() []byte { return c.scratch[:0] }

// KeepScratch stores b (grown from Scratch) so its capacity is reused.
func (c *Ctx) KeepScratch(b []byte) { c.scratch = b[:0] }

// Request is a policy that runs before the backend is called.
type Request interface {
	OnRequest(c *Ctx) Result
}

// Response is a policy that runs on the response before it is sent.
type Response interface {
	OnResponse(c *Ctx)
}
