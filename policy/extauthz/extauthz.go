// Package extauthz owns the extAuthz policy: each request is checked by an
// external authorization service before it goes on, over Envoy's ext_authz
// v3 gRPC protocol (github.com/envoyproxy/go-control-plane and grpc-go) or
// over HTTP; and networkExtAuthz's check of a connection over HTTP
// (connection.go). Connections to the service are runtime state kept
// across reloads (pool.Lease).
package extauthz

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// DefaultTimeout bounds one check (agentgateway's default too).
const DefaultTimeout = 2 * time.Second

// maxAnswerBody bounds the body of an HTTP service's answer the client is
// given.
const maxAnswerBody = 64 << 10

// Options are what New needs beyond the config.
type Options struct {
	// Addr is the service's "host:port" (the named backend resolved).
	Addr string
	// MaxBuffer bounds a request body read whole to send part of it when
	// the body is another policy's stream that cannot be continued
	// (frontendPolicies.http.maxBufferSize); 0 is 2 MiB.
	MaxBuffer int
	// Lease holds the connections to the service; nil makes them the
	// policy's own.
	Lease   *pool.Lease
	Logger  *zap.Logger
	Timeout time.Duration // 0 is DefaultTimeout
}

// ExtAuthz is the compiled extAuthz policy; immutable (but for the
// throttle of its warnings) and safe for concurrent use.
//
// A request the service refuses gets the service's answer (gRPC: the
// denied response's status, default 403, headers and body; HTTP: the
// answer itself, or a 302 to `redirect` for 401 and 403). A service that
// cannot decide (unreachable, too slow, a malformed answer) is handled by
// failureMode: 403 `external authorization failed` by default.
type ExtAuthz struct {
	grpc  *grpcCheck
	http  *httpCheck
	cache *decisionCache // nil: none

	include    []string     // header names (lower-case) and pseudo-headers; nil: the protocol's default
	body       *bodyOptions // nil: the body is not sent
	failAllow  bool
	failStatus int
	timeout    time.Duration
	log        *zap.Logger
	// failLog throttles the lines about a service that could not decide;
	// now is its clock.
	failLog logline.Throttle
	now     func() time.Time
}

// logEvery bounds the lines about a service that cannot decide: an outage
// fails every request and connection (each in the access log already,
// refused or let through by failureMode allow), and a line for each said
// nothing more.
const logEvery = 10 * time.Second

var (
	contentTypeText = []byte("text/plain; charset=utf-8")
	bodyFailed      = []byte("external authorization failed\n")
	bodyForbidden   = []byte("forbidden\n")
)

// New compiles an extAuthz policy. Errors are *policy.FieldError naming
// the field below extAuthz.
func New(cfg *config.ExtAuthz, o Options) (*ExtAuthz, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	p := &ExtAuthz{failAllow: cfg.FailureMode.Allow, failStatus: cfg.FailureMode.DenyStatus, timeout: o.Timeout, log: o.Logger,
		failLog: logline.Throttle{Every: logEvery}, now: time.Now}
	if p.failStatus == 0 {
		p.failStatus = http.StatusForbidden
	}
	for _, h := range cfg.IncludeRequestHeaders {
		p.include = append(p.include, strings.ToLower(h))
	}
	if b := cfg.IncludeRequestBody; b != nil {
		p.body = &bodyOptions{max: 8192, partial: b.AllowPartialMessage, raw: b.PackAsBytes, buffer: o.MaxBuffer}
		if b.MaxRequestBytes != nil {
			p.body.max = *b.MaxRequestBytes
		}
		if p.body.buffer <= 0 {
			p.body.buffer = 2 << 20
		}
	}
	if cfg.Cache != nil {
		c, err := newDecisionCache(cfg.Cache)
		if err != nil {
			return nil, err
		}
		p.cache = c
	}
	proto := cfg.Protocol
	if proto == nil || proto.GRPC != nil {
		g := &config.ExtAuthzGRPC{}
		if proto != nil {
			g = proto.GRPC
		}
		check, err := newGRPCCheck(g, o)
		if err != nil {
			return nil, err
		}
		p.grpc = check
		return p, nil
	}
	check, err := newHTTPCheck(proto.HTTP, o)
	if err != nil {
		return nil, err
	}
	p.http = check
	if p.include == nil {
		p.include = []string{"authorization"}
	}
	return p, nil
}

// OnResponse adds to the response the headers the service asked for when
// it allowed the request (gRPC: the OK response's
// response_headers_to_add, as Envoy and agentgateway do).
func (p *ExtAuthz) OnResponse(c *policy.Ctx) { c.ApplyResponseEdits(p) }

// ReadsRequestBody reports whether the service is sent the request's body
// (policy.BodyReader).
func (p *ExtAuthz) ReadsRequestBody() bool { return p.body != nil }

// OnRequest asks the service (or the cache) and lets the request go on,
// or answers it.
func (p *ExtAuthz) OnRequest(c *policy.Ctx) policy.Result {
	var key [32]byte
	cacheable := false
	if p.cache != nil {
		in := celrules.LiveInput(c)
		if key, cacheable = p.cache.key(&in); cacheable {
			if d := p.cache.get(key); d != nil {
				return d.apply(p, c)
			}
		}
	}
	var body []byte
	var partial bool
	if p.body != nil {
		var err error
		if body, partial, err = p.body.read(c); err != nil {
			policy.RespondRequestBodyError(c, err)
			return policy.Done
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	ctx = withBody(ctx, body, partial)
	var d *decision
	var err error
	if p.grpc != nil {
		d, err = p.grpc.check(ctx, p, c)
	} else {
		d, err = p.http.check(ctx, p, c)
	}
	if err != nil {
		status := p.failStatus
		switch {
		case isExpressionError(err):
			// The check request could not be built: a fault of the
			// policy, not of the service, so failureMode does not let
			// the request through (as agentgateway: 403).
			p.log.Warn("extAuthz: the check request could not be built; denying", zap.Error(err))
			status = fasthttp.StatusForbidden
		case p.failAllow:
			p.warnFailed("extAuthz: the authorization service could not decide; allowing (failureMode allow)", err)
			return policy.Continue
		default:
			p.warnFailed("extAuthz: the authorization service could not decide; denying", err)
		}
		resp := &c.Fast.Response
		resp.Reset()
		resp.SetStatusCode(status)
		resp.Header.SetContentTypeBytes(contentTypeText)
		resp.SetBody(bodyFailed)
		return policy.Done
	}
	res := d.apply(p, c)
	if cacheable {
		in := celrules.LiveInput(c)
		p.cache.put(key, d, &in)
	}
	return res
}

// warnFailed logs msg and err about a service that could not decide, or
// counts them if a line went out within logEvery.
func (p *ExtAuthz) warnFailed(msg string, err error) {
	if dropped, ok := p.failLog.Allow(p.now()); ok {
		p.log.Warn(msg, zap.Error(err), logline.DroppedField(dropped))
	}
}

// decision is what the service decided about a request, kept as it can be
// applied again to another (the cache).
type decision struct {
	deny     bool
	metadata map[string]any // the extauthz variable

	ok         *authv3.OkHttpResponse     // gRPC: the request's edits
	denied     *authv3.DeniedHttpResponse // gRPC: the refusal
	setHeaders [][2]string                // HTTP: copied from the answer
	status     int                        // HTTP refusal: status, headers and body
	headers    [][2]string
	body       []byte
}

// apply makes p's decision on c.
func (d *decision) apply(p *ExtAuthz, c *policy.Ctx) policy.Result {
	if d.metadata != nil {
		c.ExtAuthz = d.metadata
	}
	if d.deny {
		if d.denied != nil {
			deny(p, c, d.denied)
			return policy.Done
		}
		resp := &c.Fast.Response
		resp.Reset()
		resp.SetStatusCode(d.status)
		for _, h := range d.headers {
			resp.Header.Add(h[0], h[1])
		}
		resp.SetBody(d.body)
		return policy.Done
	}
	if d.ok != nil {
		applyOK(p, c, d.ok)
	}
	for _, h := range d.setHeaders {
		policy.HeaderEdit{Name: h[0], Value: h[1]}.Apply(&c.Fast.Request.Header)
	}
	return policy.Continue
}

// bodyOptions is includeRequestBody compiled.
type bodyOptions struct {
	max     int  // bytes sent at most
	partial bool // a larger body sends its first max bytes
	raw     bool // gRPC raw_body
	buffer  int  // the most read whole of a stream that cannot be continued
}

// read returns the body to send: the whole body when it fits in max,
// else its first max bytes when partial messages are allowed (partial
// true). A body that fits is read whole by policy.ReadRequestBody and
// kept, so the backend still gets all of it; without partial messages a
// larger one is policy.ErrBodyTooLarge. Of a larger streamed body only the
// first max bytes (and one more, to know there are more) are read: the
// request's body becomes them followed by the rest of the stream, which
// goes on to the backend as it comes, whatever its size (Envoy's
// allow_partial_message). An error (too large, or the client's body broken
// or too slow) is for policy.RespondRequestBodyError.
func (b *bodyOptions) read(c *policy.Ctx) (body []byte, partial bool, err error) {
	req := &c.Fast.Request
	n := req.Header.ContentLength()
	switch {
	case !b.partial, !req.IsBodyStream() && len(req.Body()) <= b.max, req.IsBodyStream() && n >= 0 && n <= b.max:
		body, err = policy.ReadRequestBody(c, b.max)
		return body, false, err
	case !req.IsBodyStream():
		// In memory already (read whole before, by fasthttp or a policy).
		c.RequestBodyRead = true
		return req.Body()[:b.max:b.max], true, nil
	}
	src := req.BodyStream()
	if _, ok := src.(io.Closer); ok {
		// Another policy's stream (extProc's processed body), which
		// fasthttp would close when replaced: read whole, as far as the
		// buffer goes, and kept.
		if body, err = policy.ReadRequestBody(c, b.buffer); err != nil {
			return nil, false, err
		}
		if len(body) <= b.max {
			return body, false, nil
		}
		return body[:b.max:b.max], true, nil
	}
	buf := make([]byte, b.max+1)
	m, err := io.ReadFull(src, buf)
	switch {
	case err == nil:
		// Larger than max: sent in part, and the whole body goes on, its
		// declared length (or chunked framing) unchanged. The server's
		// guard of the client's stream (server/body.go) stays under it,
		// and checks the length and counts the bytes.
		req.SetBodyStream(&prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), src), src: src}, n)
		return buf[:b.max:b.max], true, nil
	case (err == io.EOF || err == io.ErrUnexpectedEOF) && n < 0:
		// A chunked body that fits: whole, kept as ReadRequestBody keeps
		// it.
		body = buf[:m:m]
		req.SetBodyRaw(body)
		req.Header.SetContentLength(m)
		c.RequestBodyRead = true
		return body, false, nil
	case err == io.EOF:
		err = io.ErrUnexpectedEOF // shorter than its Content-Length
	}
	return nil, false, err
}

// prefixedBody is a request body whose first bytes were read to be sent
// to the service, followed by the rest of the stream src they came from.
// It passes on what src tells of itself: to the exchange whether a read
// may wait for the client and how to interrupt one (the server's guard,
// backend.ReadInterrupter), to extProc whether the read that ends it
// writes the request's header (extproc.EndWritesHeader), and src itself
// (policy.Unwrapper).
type prefixedBody struct {
	io.Reader // the prefix, then src
	src       io.Reader
}

// Unwrap implements policy.Unwrapper.
func (p *prefixedBody) Unwrap() io.Reader { return p.src }

// InterruptRead interrupts a read of src, when it can be.
func (p *prefixedBody) InterruptRead() {
	if i, ok := p.src.(interface{ InterruptRead() }); ok {
		i.InterruptRead()
	}
}

// MayWait reports whether a read of src may wait for the client; false
// when src cannot be interrupted, so that nothing waits on it to be.
func (p *prefixedBody) MayWait() bool {
	w, ok := p.src.(interface{ MayWait() bool })
	return ok && w.MayWait()
}

// EndWritesHeader reports whether the read that ends src writes h; true
// when src does not say.
func (p *prefixedBody) EndWritesHeader(h *fasthttp.RequestHeader) bool {
	if e, ok := p.src.(interface {
		EndWritesHeader(*fasthttp.RequestHeader) bool
	}); ok {
		return e.EndWritesHeader(h)
	}
	return true
}

type bodyKey struct{}

type bodyValue struct {
	body    []byte
	partial bool
}

// withBody carries the body to send to the protocol's check.
func withBody(ctx context.Context, body []byte, partial bool) context.Context {
	if body == nil && !partial {
		return ctx
	}
	return context.WithValue(ctx, bodyKey{}, bodyValue{body, partial})
}

func bodyOf(ctx context.Context) (bodyValue, bool) {
	v, ok := ctx.Value(bodyKey{}).(bodyValue)
	return v, ok
}

// requestHeaders lists the request's headers as the service sees them:
// lower-case names, repeated ones joined with ",", and the pseudo-headers
// :method, :path, :authority and :scheme; only those in include, unless
// include is nil. For a protobuf message (proto), names and values are
// made UTF-8 (protoString).
func requestHeaders(req *fasthttp.Request, scheme []byte, include []string, proto bool) map[string]string {
	out := map[string]string{}
	want := func(name string) bool {
		if include == nil {
			return true
		}
		for _, i := range include {
			if i == name {
				return true
			}
		}
		return false
	}
	text := func(b []byte) string {
		if proto {
			return protoString(b)
		}
		return string(b)
	}
	pseudo := [...][2]string{
		{":method", text(req.Header.Method())},
		{":path", text(req.Header.RequestURI())},
		{":authority", text(req.Header.Host())},
		{":scheme", text(scheme)},
	}
	for _, ph := range pseudo {
		if want(ph[0]) {
			out[ph[0]] = ph[1]
		}
	}
	for k, v := range req.Header.All() {
		name := strings.ToLower(text(k))
		if !want(name) {
			continue
		}
		if prev, ok := out[name]; ok {
			out[name] = prev + "," + text(v)
		} else {
			out[name] = text(v)
		}
	}
	return out
}

// sourceAddr is the client's address and port.
func sourceAddr(c *policy.Ctx) (string, uint32) {
	if a, ok := c.Fast.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String(), uint32(a.Port)
	}
	return "", 0
}

// destinationAddr is the address and port the client connected to (the
// gateway's end of its connection), Envoy's attributes.destination.
func destinationAddr(c *policy.Ctx) (string, uint32) {
	if a, ok := c.Fast.LocalAddr().(*net.TCPAddr); ok {
		return a.IP.String(), uint32(a.Port)
	}
	return "", 0
}

// expressionError is the error of a check request that could not be built
// (an expression of the policy without a usable value): never let through
// by failureMode allow, which is for a service that could not decide.
type expressionError struct{ err error }

func (e *expressionError) Error() string { return e.err.Error() }
func (e *expressionError) Unwrap() error { return e.err }

func isExpressionError(err error) bool {
	var xe *expressionError
	return errors.As(err, &xe)
}

// evalString evaluates a CEL expression against in; a value that is not a
// string fails.
func evalString(p cel.Program, in *celrules.Input) (string, bool) {
	v, err := celrules.EvalLLM(p, in, nil)
	if err != nil {
		return "", false
	}
	s, ok := v.Value().(string)
	return s, ok
}

// wholeNumbers turns JSON numbers that are whole (as protobuf Structs and
// JSON decoding give them, float64) into int64, recursively, so that CEL
// arithmetic mixing them with integer literals works (extauthz.expires - 5).
func wholeNumbers(v any) any {
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
	case map[string]any:
		for k, e := range x {
			x[k] = wholeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = wholeNumbers(e)
		}
	}
	return v
}

// hopByHop are the headers of an HTTP answer that are not passed on.
var hopByHop = []string{"Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length", "Te", "Trailer", "Upgrade", "Proxy-Connection"}

func isHopByHop(name []byte) bool {
	for _, h := range hopByHop {
		if bytes.EqualFold(name, []byte(h)) {
			return true
		}
	}
	return false
}

var (
	_ policy.Request  = (*ExtAuthz)(nil)
	_ policy.Response = (*ExtAuthz)(nil)
)
