// Package extproc owns the extProc policy: an external processing service
// speaking Envoy's ext_proc v3 protocol (envoy.service.ext_proc.v3, over
// gRPC with github.com/envoyproxy/go-control-plane and grpc-go) sees a
// request's and its response's headers and bodies and may change them or
// answer the request itself. Each request has one bidirectional stream to
// the service (a session), carried from the request phase to the response
// phase in policy.Ctx. Connections to the service are runtime state kept
// across reloads (pool.Lease).
package extproc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"sort"
	"time"

	"cel.dev/cel-go/cel"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// DefaultTimeout bounds each wait for the service: opening the stream, and
// each answer, counted from the last message sent to it.
const DefaultTimeout = 10 * time.Second

// AttributesNamespace is the key of the attributes map the request and
// response attributes are sent under (Envoy's filter name).
const AttributesNamespace = "envoy.filters.http.ext_proc"

// GRPCMetadataNamespace is the metadataContext namespace whose keys and
// (string) values are sent as the stream's gRPC metadata instead
// (agentgateway's reserved namespace), for services that authenticate or
// route their callers by it.
const GRPCMetadataNamespace = config.ExtProcGRPCMetadata

// Options are what New needs beyond the config.
type Options struct {
	// Addr is the service's "host:port" (the named backend resolved).
	Addr string
	// MaxBuffer bounds a body read whole (buffered modes;
	// frontendPolicies.http.maxBufferSize); 0 is 2 MiB.
	MaxBuffer int
	// Lease holds the connections to the service; nil makes them the
	// policy's own.
	Lease   *pool.Lease
	Logger  *zap.Logger
	Timeout time.Duration // 0 is DefaultTimeout
	// RawPaths keeps a :path the service sets as it is, as request paths
	// are kept (frontendPolicies.http.pathNormalization raw); else it is
	// normalized as a client's would be (policy.NormalizeTarget).
	RawPaths bool
}

// bodyMode is how a body goes to the service.
type bodyMode uint8

const (
	bodyNone bodyMode = iota
	bodyBuffered
	bodyPartial
	bodyDuplex
)

func parseBodyMode(s string) bodyMode {
	switch s {
	case config.ExtProcBuffered:
		return bodyBuffered
	case config.ExtProcBufferedPartial:
		return bodyPartial
	case config.ExtProcBodyNone:
		return bodyNone
	}
	return bodyDuplex
}

func (m bodyMode) proto() filterv3.ProcessingMode_BodySendMode {
	switch m {
	case bodyBuffered:
		return filterv3.ProcessingMode_BUFFERED
	case bodyPartial:
		return filterv3.ProcessingMode_BUFFERED_PARTIAL
	case bodyDuplex:
		return filterv3.ProcessingMode_FULL_DUPLEX_STREAMED
	}
	return filterv3.ProcessingMode_NONE
}

// bodyModeOf is a mode override's body mode; ok is false for a mode this
// gateway does not offer (STREAMED).
func bodyModeOf(m filterv3.ProcessingMode_BodySendMode) (bodyMode, bool) {
	switch m {
	case filterv3.ProcessingMode_NONE:
		return bodyNone, true
	case filterv3.ProcessingMode_BUFFERED:
		return bodyBuffered, true
	case filterv3.ProcessingMode_BUFFERED_PARTIAL:
		return bodyPartial, true
	case filterv3.ProcessingMode_FULL_DUPLEX_STREAMED:
		return bodyDuplex, true
	}
	return 0, false
}

// ExtProc is the compiled extProc policy; immutable (but for the throttle
// of its warnings) and safe for concurrent use. It runs in the request
// chain (OnRequest) and on the way back (OnResponse).
//
// When the service fails (unreachable, too slow, a broken stream, an answer
// out of protocol or an invalid mutation), failureMode decides: failClosed
// answers 500 `external processing failed`; failOpen lets the request (or
// the response) go on unprocessed, as long as none of its body has been
// lost to the service, a full-duplex body too while none of it has gone on
// processed; a failure in the middle of a body already going on ends that
// body, whatever the mode, with a policy.BodyFailure that has its request
// answered as the same 500.
type ExtProc struct {
	conn *grpcConn
	addr string // the service's host:port, for the streams' spans

	failOpen                bool
	reqHeaders, respHeaders bool
	reqBody, respBody       bodyMode
	allowOverride           bool
	metadata                []metadataNamespace // sorted
	grpcMetadata            []attribute
	reqAttrs, respAttrs     []attribute // sorted by name
	maxBuffer               int
	rawPaths                bool
	timeout                 time.Duration
	log                     *zap.Logger
	// failLog throttles the lines about a failed exchange (the service
	// unreachable, too slow, out of protocol; a body that broke off); now
	// is its clock.
	failLog logline.Throttle
	now     func() time.Time
}

// logEvery bounds the lines about failed exchanges: an outage fails every
// request (each in the access log already, answered 500 or let through by
// failOpen), and a line for each said nothing more.
const logEvery = 10 * time.Second

type attribute struct {
	name string
	prog cel.Program
}

type metadataNamespace struct {
	name string
	keys []attribute
}

// grpcConn is a client connection to one service, kept in the lease.
type grpcConn struct {
	cc     *grpc.ClientConn
	client procv3.ExternalProcessorClient
}

// Close implements io.Closer for the lease.
func (g *grpcConn) Close() error { return g.cc.Close() }

// New compiles an extProc policy. Errors are *policy.FieldError naming the
// field below extProc.
func New(cfg *config.ExtProc, o Options) (*ExtProc, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.MaxBuffer <= 0 {
		o.MaxBuffer = 2 << 20
	}
	if po := cfg.ProcessingOptions; po != nil && (po.RequestTrailerMode == "send" || po.ResponseTrailerMode == "send") {
		// Not silent: the setting is accepted (agentgateway's files set
		// it) but not served yet.
		o.Logger.Warn("extProc: trailers are not sent to the service yet: trailer mode send acts as skip, and trailers pass on unprocessed")
	}
	opts := cfg.Options()
	p := &ExtProc{
		failOpen:      cfg.FailOpen(),
		reqHeaders:    opts.RequestHeaderMode != "skip",
		respHeaders:   opts.ResponseHeaderMode != "skip",
		reqBody:       parseBodyMode(opts.RequestBodyMode),
		respBody:      parseBodyMode(opts.ResponseBodyMode),
		allowOverride: opts.AllowModeOverride,
		maxBuffer:     o.MaxBuffer,
		rawPaths:      o.RawPaths,
		addr:          o.Addr,
		timeout:       o.Timeout,
		log:           o.Logger,
		failLog:       logline.Throttle{Every: logEvery},
		now:           time.Now,
	}
	var err error
	if p.reqAttrs, err = compileAttributes("requestAttributes", cfg.RequestAttributes); err != nil {
		return nil, err
	}
	if p.respAttrs, err = compileAttributes("responseAttributes", cfg.ResponseAttributes); err != nil {
		return nil, err
	}
	namespaces := make([]string, 0, len(cfg.MetadataContext))
	for ns := range cfg.MetadataContext {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		keys, err := compileAttributes("metadataContext."+ns, cfg.MetadataContext[ns])
		if err != nil {
			return nil, err
		}
		if ns == GRPCMetadataNamespace {
			p.grpcMetadata = keys
			continue
		}
		p.metadata = append(p.metadata, metadataNamespace{name: ns, keys: keys})
	}
	dial := func() (*grpcConn, error) {
		// Plain HTTP/2 (h2c); connecting is lazy, so an unreachable service
		// is the failure mode's business, per request. Answers may carry a
		// whole buffered body.
		recv := 4 << 20
		if o.MaxBuffer+1<<20 > recv {
			recv = o.MaxBuffer + 1<<20
		}
		cc, err := grpc.NewClient("passthrough:///"+o.Addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(recv)), policy.GRPCReconnect)
		if err != nil {
			return nil, err
		}
		return &grpcConn{cc: cc, client: procv3.NewExternalProcessorClient(cc)}, nil
	}
	if o.Lease != nil {
		p.conn, err = pool.LoadOrNew(o.Lease, fmt.Sprintf("extproc-grpc\x00%s\x00%d", o.Addr, o.MaxBuffer), dial)
	} else {
		p.conn, err = dial()
	}
	if err != nil {
		return nil, &policy.FieldError{Msg: fmt.Sprintf("cannot set up a gRPC client for %s: %v", o.Addr, err)}
	}
	return p, nil
}

func compileAttributes(field string, exprs map[string]config.ValueExpression) ([]attribute, error) {
	out := make([]attribute, 0, len(exprs))
	for name, expr := range exprs {
		prog, err := config.CompileValueExpression(string(expr), false)
		if err != nil {
			return nil, &policy.FieldError{Field: field + "." + name, Msg: err.Error()}
		}
		out = append(out, attribute{name: name, prog: prog})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// ReadsRequestBody reports whether the policy may read request bodies
// (policy.BodyReader).
func (p *ExtProc) ReadsRequestBody() bool {
	return p.reqBody != bodyNone || p.allowOverride
}

var (
	contentTypeText = []byte("text/plain; charset=utf-8")
	bodyFailed      = []byte("external processing failed\n")
	bodyTooLarge    = []byte("request body too large for external processing\n")
	bodyBroken      = []byte("malformed or incomplete request body\n")
	bodyTimeout     = []byte("request body timeout\n")
)

// OnRequest sends the request's headers and body to the service as the
// processing options say and applies its answers.
func (p *ExtProc) OnRequest(c *policy.Ctx) policy.Result {
	s := newSession(p)
	c.ExtProc = append(c.ExtProc, s)
	req := &c.Fast.Request
	hasBody := requestHasBody(req)
	if !p.reqHeaders && (!hasBody || s.reqBody == bodyNone) {
		return policy.Continue // the response side may still be processed
	}
	if err := s.open(c.Trace, p.grpcMD(c)); err != nil {
		return p.requestFailed(c, s, err, nil)
	}
	s.metadata = p.metadataContext(c)
	var pump *pump
	if p.reqHeaders {
		m := &procv3.ProcessingRequest{
			Request: &procv3.ProcessingRequest_RequestHeaders{RequestHeaders: &procv3.HttpHeaders{
				Headers:     requestHeaderMap(c),
				EndOfStream: !hasBody,
			}},
			Attributes: p.attributes(c, p.reqAttrs),
		}
		s.reqAttrSent = true
		if err := s.send(m); err != nil {
			return p.requestFailed(c, s, err, nil)
		}
		if hasBody && s.reqBody == bodyDuplex {
			// The service may take the whole body before it answers the
			// headers: it streams from now on, the header lent to the
			// pump while this waits.
			pump = s.startRequestPump(c, nil, true)
		}
		ans, err := s.wait(s.reqCh, pump.stopped())
		if err != nil {
			return p.requestFailed(c, s, err, pump)
		}
		// The edits below, and the request's way on (the policies after
		// this one, its head written upstream) use the header: the pump
		// gives it back first. If its read in progress is the body's
		// last, fasthttp has read the trailer section into the header
		// when this returns.
		pump.reclaim()
		hr, ok := ans.Response.(*procv3.ProcessingResponse_RequestHeaders)
		if !ok {
			return p.requestFailed(c, s, errOutOfOrder("request headers"), pump)
		}
		takeMetadata(c, ans)
		if pump == nil {
			s.override(ans, true)
		}
		cr := hr.RequestHeaders.GetResponse()
		if err := applyRequestMutation(c, cr.GetHeaderMutation(), p.rawPaths, p.log); err != nil {
			return p.requestFailed(c, s, err, pump)
		}
		if cr.GetStatus() == procv3.CommonResponse_CONTINUE_AND_REPLACE {
			if pump != nil {
				return p.requestFailed(c, s, &errService{"the service replaced a body it was streaming (CONTINUE_AND_REPLACE in full-duplex mode)"}, pump)
			}
			body := replacedBody(cr.GetBodyMutation(), nil)
			req.SetBody(body)
			return policy.Continue
		}
		if pump != nil {
			d := newDuplexBody(s, s.reqCh, pump)
			d.take(cr.GetBodyMutation())
			req.Header.Del("Content-Length")
			req.SetBodyStream(d, -1)
			return policy.Continue
		}
	}
	if !hasBody {
		return policy.Continue
	}
	switch s.reqBody {
	case bodyNone:
		return policy.Continue
	case bodyDuplex:
		var attrs map[string]*structpb.Struct
		if !s.reqAttrSent {
			attrs, s.reqAttrSent = p.attributes(c, p.reqAttrs), true
		}
		// The header stays the request's until its body is read.
		pump = s.startRequestPump(c, attrs, false)
		d := newDuplexBody(s, s.reqCh, pump)
		req.Header.Del("Content-Length")
		req.SetBodyStream(d, -1)
		return policy.Continue
	}
	// Buffered modes: the body, or its first maxBuffer bytes, in one
	// message.
	var stream io.Reader
	var buffered []byte
	if req.IsBodyStream() {
		stream = req.BodyStream()
	} else {
		buffered = req.Body()
	}
	body, rest, err := readBody(buffered, stream, req.Header.ContentLength(), p.maxBuffer, s.reqBody == bodyPartial)
	if err != nil {
		s.end()
		s.skipResp = true
		resp := &c.Fast.Response
		resp.Reset()
		resp.Header.SetContentTypeBytes(contentTypeText)
		if err == errTooLarge {
			resp.SetStatusCode(http.StatusRequestEntityTooLarge)
			resp.SetBody(bodyTooLarge)
		} else {
			respondBrokenBody(c, err)
		}
		return policy.Done
	}
	m := &procv3.ProcessingRequest{Request: &procv3.ProcessingRequest_RequestBody{RequestBody: &procv3.HttpBody{Body: body, EndOfStream: rest == nil}}}
	if !s.reqAttrSent {
		m.Attributes = p.attributes(c, p.reqAttrs)
		s.reqAttrSent = true
	}
	restore := func() { setRequestBody(req, body, rest) }
	if err := s.send(m); err != nil {
		restore()
		return p.requestFailed(c, s, err, nil)
	}
	ans, err := s.wait(s.reqCh, nil)
	if err != nil {
		restore()
		return p.requestFailed(c, s, err, nil)
	}
	br, ok := ans.Response.(*procv3.ProcessingResponse_RequestBody)
	if !ok {
		restore()
		return p.requestFailed(c, s, errOutOfOrder("request body"), nil)
	}
	takeMetadata(c, ans)
	cr := br.RequestBody.GetResponse()
	if err := applyRequestMutation(c, cr.GetHeaderMutation(), p.rawPaths, p.log); err != nil {
		restore()
		return p.requestFailed(c, s, err, nil)
	}
	setRequestBody(req, replacedBody(cr.GetBodyMutation(), body), rest)
	return policy.Continue
}

// startRequestPump streams the request's body to the service. A read of
// the client's body it is blocked in can be interrupted (the connection
// then closes after the response, its body unread to the end): through
// the server's guard of the body when it reads through one
// (sock.Interrupter), which then takes the failed read for the gateway's
// doing, not the client's, and closes the connection after whatever
// answer the request gets. When the read that ends the body writes the
// request's header (a chunked body's trailer section), the pump is gated:
// it reads only while the header is lent to it, from the start when lent.
func (s *session) startRequestPump(c *policy.Ctx, attrs map[string]*structpb.Struct, lent bool) *pump {
	req := &c.Fast.Request
	fc := c.Fast
	src := requestBodyReader(req)
	pm := newPump(s, src, false, req.Header.ContentLength(), s.p.maxBuffer, attrs)
	pm.gated = writesHeader(src, &req.Header)
	pm.lent = lent
	// The server's body guard (backend/sock's Interrupter; policies do
	// not import backend).
	guard, _ := src.(interface{ InterruptRead() })
	pm.interrupt = func() {
		fc.SetConnectionClose()
		if guard != nil {
			guard.InterruptRead()
			return
		}
		if conn := fc.Conn(); conn != nil {
			_ = conn.SetReadDeadline(time.Now())
		}
	}
	pm.start()
	s.reqPump = pm
	return pm
}

// requestFailed handles a failure of the request phase: the failure mode
// decides, but a body partly handed to the service and lost cannot go on.
func (p *ExtProc) requestFailed(c *policy.Ctx, s *session, err error, pm *pump) policy.Result {
	s.failed(err)
	if err == errImmediate {
		s.skipResp = true
		if pm != nil {
			// The body will not be read on: its pump ends before the
			// request does anything more (a read in progress interrupted,
			// the connection closed after the answer).
			pm.halt()
		}
		respondImmediate(c, s.immediate)
		s.end()
		return policy.Done
	}
	if err == errPumpStopped {
		// Not the service's failure: the client's body broke off.
		s.end()
		pm.halt()
		s.skipResp = true
		respondBrokenBody(c, pm.err)
		return policy.Done
	}
	replayable := true
	if pm != nil {
		s.end()
		replayable = pm.replay(&c.Fast.Request)
	}
	s.end()
	if p.failOpen && replayable {
		p.warnFailed("extProc: the external processing service failed; the request goes on unprocessed (failureMode failOpen)", err)
		s.skipResp = true
		return policy.Continue
	}
	p.warnFailed("extProc: the external processing service failed; answering 500", err)
	s.skipResp = true
	respondFailed(&c.Fast.Response)
	return policy.Done
}

// warnFailed logs msg and err about a failed exchange, or counts them if
// a line went out within logEvery.
func (p *ExtProc) warnFailed(msg string, err error) {
	if dropped, ok := p.failLog.Allow(p.now()); ok {
		p.log.Warn(msg, zap.Error(err), logline.DroppedField(dropped))
	}
}

// warnBodyFailed is warnFailed for a body, saying whose.
func (p *ExtProc) warnBodyFailed(msg string, response bool, err error) {
	if dropped, ok := p.failLog.Allow(p.now()); ok {
		p.log.Warn(msg, zap.Bool("response", response), zap.Error(err), logline.DroppedField(dropped))
	}
}

// respondBrokenBody answers a request whose body the client failed to
// send: 408 when it stopped sending in time, 400 otherwise; the connection
// closes, its body's end never found. A body another policy made that
// failed (another extProc's) gets that policy's answer.
func respondBrokenBody(c *policy.Ctx, err error) {
	resp := &c.Fast.Response
	resp.Reset()
	resp.Header.SetContentTypeBytes(contentTypeText)
	var ne net.Error
	var pf *policy.BodyFailure
	if errors.As(err, &pf) {
		pf.Respond(resp)
	} else if errors.As(err, &ne) && ne.Timeout() {
		resp.SetStatusCode(http.StatusRequestTimeout)
		resp.SetBody(bodyTimeout)
	} else {
		resp.SetStatusCode(http.StatusBadRequest)
		resp.SetBody(bodyBroken)
	}
	c.Fast.SetConnectionClose()
}

func respondFailed(resp *fasthttp.Response) {
	resp.Reset()
	resp.SetStatusCode(http.StatusInternalServerError)
	resp.Header.SetContentTypeBytes(contentTypeText)
	resp.SetBody(bodyFailed)
}

// sessionOf is the session p opened for c's request, nil when none.
func (p *ExtProc) sessionOf(c *policy.Ctx) *session {
	for _, x := range c.ExtProc {
		if s, ok := x.(*session); ok && s.p == p {
			return s
		}
	}
	return nil
}

// takeMetadata merges an answer's dynamic metadata into what CEL shows as
// `extproc`. (Answers to streamed body chunks come while the body is sent
// on, after the policies that could read it: their metadata is not read.)
func takeMetadata(c *policy.Ctx, ans *procv3.ProcessingResponse) {
	md := ans.GetDynamicMetadata()
	if md == nil || len(md.GetFields()) == 0 {
		return
	}
	if c.ExtProcMetadata == nil {
		c.ExtProcMetadata = make(map[string]any, len(md.GetFields()))
	}
	for k, v := range md.AsMap() {
		c.ExtProcMetadata[k] = v
	}
}

// override applies a mode override in an answer to a headers message, when
// the policy allows one.
func (s *session) override(ans *procv3.ProcessingResponse, request bool) {
	mo := ans.GetModeOverride()
	if mo == nil {
		return
	}
	if !s.p.allowOverride {
		s.p.log.Debug("extProc: the service sent a mode override; allowModeOverride is off, so it is ignored")
		return
	}
	if request {
		if m, ok := bodyModeOf(mo.GetRequestBodyMode()); ok {
			s.reqBody = m
		}
	}
	if m, ok := bodyModeOf(mo.GetResponseBodyMode()); ok {
		s.respBody = m
	}
	switch mo.GetResponseHeaderMode() {
	case filterv3.ProcessingMode_SEND:
		s.respHeaders = true
	case filterv3.ProcessingMode_SKIP:
		s.respHeaders = false
	}
}

func errOutOfOrder(want string) error {
	return &errService{"the external processing service answered out of order (expected an answer to the " + want + ")"}
}

// attributes evaluates attribute expressions into the message's
// attributes map; an expression that fails is left out.
func (p *ExtProc) attributes(c *policy.Ctx, attrs []attribute) map[string]*structpb.Struct {
	if len(attrs) == 0 {
		return nil
	}
	fields := map[string]*structpb.Value{}
	in := celrules.LiveInput(c)
	for _, a := range attrs {
		if v, ok := evalValue(a.prog, &in); ok {
			fields[a.name] = v
		}
	}
	return map[string]*structpb.Struct{AttributesNamespace: {Fields: fields}}
}

// metadataContext evaluates metadataContext; nil when there is none.
func (p *ExtProc) metadataContext(c *policy.Ctx) *corev3.Metadata {
	if len(p.metadata) == 0 {
		return nil
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	in := celrules.LiveInput(c)
	for _, ns := range p.metadata {
		fields := map[string]*structpb.Value{}
		for _, k := range ns.keys {
			if v, ok := evalValue(k.prog, &in); ok {
				fields[k.name] = v
			}
		}
		md.FilterMetadata[ns.name] = &structpb.Struct{Fields: fields}
	}
	return md
}

// grpcMD is the stream's gRPC metadata from the reserved namespace:
// values that are not strings are left out.
func (p *ExtProc) grpcMD(c *policy.Ctx) metadata.MD {
	if len(p.grpcMetadata) == 0 {
		return nil
	}
	md := metadata.MD{}
	in := celrules.LiveInput(c)
	for _, k := range p.grpcMetadata {
		v, err := celrules.EvalLLM(k.prog, &in, nil)
		if err != nil {
			continue
		}
		if s, ok := v.Value().(string); ok && policy.ValidHeaderValue(s) {
			md.Append(k.name, s)
		}
	}
	return md
}

func evalValue(prog cel.Program, in *celrules.Input) (*structpb.Value, bool) {
	v, err := celrules.EvalLLM(prog, in, nil)
	if err != nil {
		return nil, false
	}
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, false
	}
	sv, ok := native.(*structpb.Value)
	return sv, ok
}

// replacedBody is the body a body mutation leaves: the new body, none
// (clear_body), or orig when there is no whole-body mutation.
func replacedBody(m *procv3.BodyMutation, orig []byte) []byte {
	switch x := m.GetMutation().(type) {
	case *procv3.BodyMutation_Body:
		return x.Body
	case *procv3.BodyMutation_ClearBody:
		if x.ClearBody {
			return []byte{}
		}
	case *procv3.BodyMutation_StreamedResponse:
		return x.StreamedResponse.GetBody()
	}
	return orig
}

func closeReader(r io.Reader) {
	if cl, ok := r.(io.Closer); ok {
		_ = cl.Close()
	}
}

var (
	_ policy.Request  = (*ExtProc)(nil)
	_ policy.Response = (*ExtProc)(nil)
)
