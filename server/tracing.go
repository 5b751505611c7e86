package server

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// tracing is the tracing settings at work (config.tracing, or its newer
// form frontendPolicies.tracing): an OTLP exporter (kept in the snapshot's
// lease, so a reload that leaves the settings alone keeps it and its
// queue), the sampling decisions, and the attributes computed by CEL.
//
// A sampled request gets a server span, begun when the request is read
// and ended when it is recorded, and a client span per upstream attempt
// (retries and LLM failover make several), each the parent of what that
// attempt sends upstream. The request's policies add a client span per call
// to an external service (policy.Trace, set in the request's policy.Ctx).
type tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	held     *keepProcessor // the provider's, which holds spans the filter decides
	random   sampling       // a request without a trace
	client   sampling       // a request with one
	// attrs are the attributes added by CEL, by name; remove the built-in
	// ones left out (nil: none).
	attrs  []traceAttr
	remove map[string]bool
	// filter exports a request's spans only when it holds (nil: all).
	filter *config.TelemetryProgram
	// llm, prompt, completion: what attrs and filter read of `llm`.
	llm, prompt, completion bool
}

type traceAttr struct {
	name string
	prog *config.TelemetryProgram
}

// sampling is a constant probability or a CEL expression giving one.
type sampling struct {
	p    float64
	prog cel.Program
}

// traceSettings is both forms of the tracing settings in one (agentgateway
// turns config.tracing into frontendPolicies.tracing).
type traceSettings struct {
	endpoint   string // host:port
	tls        bool
	protocol   string // grpc or http
	path       string // the HTTP protocol's path
	headers    map[string]string
	random     *config.Sampling
	client     *config.Sampling
	attributes map[string]config.TelemetryExpression
	resources  map[string]config.TelemetryExpression
	remove     []string
	filter     *config.TelemetryCondition
}

// traceBatchTimeout bounds how long a finished span waits to be exported.
const traceBatchTimeout = time.Second

// propagator reads and writes W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// exporterHolder is what the lease holds: the provider, shut down when no
// snapshot uses it any more.
type exporterHolder struct {
	provider *sdktrace.TracerProvider
	held     *keepProcessor
}

func (h *exporterHolder) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return h.provider.Shutdown(ctx)
}

// compileTracing builds the file's tracing settings; nil when it has none.
// (Both forms in one file are refused when it is parsed.)
func (c *compiler) compileTracing(f *config.File) (*tracing, error) {
	var s traceSettings
	var field string
	switch {
	case f.FrontendPolicies != nil && f.FrontendPolicies.Tracing != nil:
		ft := f.FrontendPolicies.Tracing
		field = "frontendPolicies.tracing"
		addr, err := c.serviceAddr(ft.Host, ft.Backend)
		if err != nil {
			return nil, kindError(field, err)
		}
		s = traceSettings{
			endpoint: addr, protocol: ft.Protocol, path: ft.Path, headers: ft.Policies.Headers(),
			random: ft.RandomSampling, client: ft.ClientSampling,
			attributes: ft.Attributes, resources: ft.Resources, remove: ft.Remove, filter: ft.Filter,
		}
	case f.Config != nil && f.Config.Tracing != nil:
		ct := f.Config.Tracing
		field = "config.tracing"
		u, err := url.Parse(ct.OTLPEndpoint)
		if err != nil {
			return nil, kindError(field, &policy.FieldError{Field: "otlpEndpoint", Msg: err.Error()})
		}
		s = traceSettings{
			endpoint: u.Host, tls: u.Scheme == "https", protocol: ct.OTLPProtocol, path: ct.Path, headers: map[string]string{},
			random: ct.RandomSampling, client: ct.ClientSampling,
		}
		if u.Path != "" && u.Path != "/" {
			// A path in the endpoint's URL is where spans go (as in
			// agentgateway, over the path setting).
			s.path = u.Path
		}
		for k, v := range ct.Headers {
			s.headers[k] = string(v)
		}
		if ct.Fields != nil {
			s.attributes, s.remove = ct.Fields.Add, ct.Fields.Remove
		}
	default:
		return nil, nil
	}
	if s.protocol == "" {
		s.protocol = "grpc"
	}
	if s.path == "" {
		s.path = "/v1/traces"
	}
	t, err := c.newTracing(&s)
	if err != nil {
		return nil, kindError(field, err)
	}
	return t, nil
}

// newTracing builds the exporter (through the lease), the samplers and
// the attributes. The exporter connects lazily: a collector that is down
// loses spans, never requests.
func (c *compiler) newTracing(s *traceSettings) (*tracing, error) {
	res := evalResources(s.resources)
	// The key holds the settings, the resources and the header values: the
	// same exporter only for the same ones.
	key, err := json.Marshal(struct {
		Endpoint, Protocol, Path string
		TLS                      bool
		Resources                []string
		Headers                  []string
	}{s.endpoint, s.protocol, s.path, s.tls, resourceKey(res), headerValues(s.headers)})
	if err != nil {
		return nil, err
	}
	holder, err := pool.LoadOrNew(c.lease, "tracing\x00"+string(key), func() (*exporterHolder, error) {
		exp, err := newExporter(s)
		if err != nil {
			return nil, err
		}
		held := &keepProcessor{next: sdktrace.NewBatchSpanProcessor(validSpans{exp}, sdktrace.WithBatchTimeout(traceBatchTimeout))}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(held), sdktrace.WithResource(resource.NewSchemaless(res...)))
		return &exporterHolder{provider: tp, held: held}, nil
	})
	if err != nil {
		return nil, &policy.FieldError{Msg: "the exporter: " + err.Error()}
	}
	t := &tracing{provider: holder.provider, tracer: holder.provider.Tracer("gateway"), held: holder.held, random: sampling{p: 0}, client: sampling{p: 1}}
	for _, smp := range []struct {
		cfg *config.Sampling
		out *sampling
	}{{s.random, &t.random}, {s.client, &t.client}} {
		if smp.cfg == nil {
			continue
		}
		if smp.cfg.Const != nil {
			*smp.out = sampling{p: *smp.cfg.Const}
			continue
		}
		prog, err := config.CompileValueExpression(smp.cfg.Expr, false)
		if err != nil {
			return nil, err
		}
		*smp.out = sampling{prog: prog}
	}
	for name, expr := range s.attributes {
		// Decoding compiled every expression already: an error here is not
		// one the file can hold.
		prog, err := config.CompileTelemetryExpression(string(expr), false)
		if err != nil {
			return nil, &policy.FieldError{Field: "attributes." + name, Msg: err.Error()}
		}
		t.attrs = append(t.attrs, traceAttr{name: name, prog: prog})
		t.reads(prog)
	}
	sort.Slice(t.attrs, func(i, j int) bool { return t.attrs[i].name < t.attrs[j].name })
	if len(s.remove) > 0 {
		t.remove = map[string]bool{}
		for _, name := range s.remove {
			t.remove[name] = true
		}
	}
	if s.filter != nil {
		prog, err := config.CompileTelemetryExpression(string(*s.filter), true)
		if err != nil {
			return nil, &policy.FieldError{Field: "filter", Msg: err.Error()}
		}
		t.filter = prog
		t.reads(prog)
	}
	return t, nil
}

// reads notes what p reads of `llm`.
func (t *tracing) reads(p *config.TelemetryProgram) {
	t.llm = t.llm || p.LLM
	t.prompt = t.prompt || p.Prompt
	t.completion = t.completion || p.Completion
}

// evalResources is the exporter's resource: service.name "gateway" unless
// the resources name another, and the resources, each evaluated once
// without a request (one that fails or gives null is left out).
func evalResources(exprs map[string]config.TelemetryExpression) []attribute.KeyValue {
	out := []attribute.KeyValue{attribute.String("service.name", "gateway")}
	names := make([]string, 0, len(exprs))
	for name := range exprs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		prog, err := config.CompileTelemetryExpression(string(exprs[name]), false)
		if err != nil {
			continue
		}
		v, err := celrules.EvalTelemetry(prog, nil, nil)
		if err != nil {
			continue
		}
		kv, ok := attributeOf(name, v)
		if !ok {
			continue
		}
		kv, _ = validKeyValue(kv)
		if name == "service.name" {
			out[0] = kv
			continue
		}
		out = append(out, kv)
	}
	return out
}

func resourceKey(res []attribute.KeyValue) []string {
	out := make([]string, 0, len(res))
	for _, kv := range res {
		out = append(out, string(kv.Key)+"="+kv.Value.Type().String()+":"+kv.Value.String())
	}
	return out
}

// headerValues lists the headers as name=value, sorted, so that the same
// headers make the same key whatever the map's order.
func headerValues(h map[string]string) []string {
	out := make([]string, 0, len(h))
	for k, v := range h {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func newExporter(s *traceSettings) (*otlptrace.Exporter, error) {
	ctx := context.Background()
	if s.protocol == "http" {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(s.endpoint), otlptracehttp.WithURLPath(s.path), otlptracehttp.WithHeaders(s.headers)}
		if !s.tls {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(s.endpoint), otlptracegrpc.WithHeaders(s.headers),
		otlptracegrpc.WithDialOption(policy.GRPCReconnect)}
	if !s.tls {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	return otlptracegrpc.New(ctx, opts...)
}

// sampled reports whether s picks the request (a failing expression does
// not).
func (s *sampling) sampled(c *policy.Ctx) bool {
	p := s.p
	if s.prog != nil {
		in := celrules.LiveInput(c)
		v, err := celrules.EvalLLM(s.prog, &in, nil)
		if err != nil {
			return false
		}
		switch x := v.(type) {
		case types.Bool:
			return bool(x)
		case types.Double:
			p = float64(x)
		case types.Int:
			p = float64(x)
		default:
			return false
		}
	}
	return p >= 1 || p > 0 && rand.Float64() < p
}

// start begins the request's span when the request is sampled: a child of
// the client's trace when it sent one (clientSampling), else a new trace
// (randomSampling). The span's context replaces traceparent in the request
// (each upstream attempt replaces it again with its own).
func (t *tracing) start(c *policy.Ctx, h2 bool) trace.Span {
	h := &c.Fast.Request.Header
	parent := propagator.Extract(context.Background(), policy.HeaderCarrier{H: h})
	s := &t.random
	if trace.SpanContextFromContext(parent).IsValid() {
		s = &t.client
	}
	if !s.sampled(c) {
		return nil
	}
	attrs := t.keep(append(methodAttributes(h.Method()),
		attribute.String("url.path", string(c.Path)),
		attribute.String("url.scheme", string(c.Scheme)),
		attribute.String("server.address", string(c.Host)),
		attribute.String("client.address", clientIP(c)),
		attribute.String("network.protocol.version", protocolVersion(h, h2)),
	))
	// Named by the method alone until a route matches (end names it by
	// the route): the path is the client's, and names must stay few (the
	// OpenTelemetry HTTP conventions) and carry nothing a path may hold.
	ctx, span := t.tracer.Start(parent, spanMethod(h.Method()), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if t.filter != nil {
		t.held.hold(span.SpanContext().SpanID())
	}
	injectTrace(ctx, span, h)
	return span
}

// headerTracestate is the W3C trace context's vendor state field.
var headerTracestate = []byte("tracestate")

// injectTrace puts span's context in h (traceparent, tracestate). A
// tracestate the client sent that the span does not carry (one without a
// valid traceparent, whose trace the span does not continue, or one the
// SDK refused, past 32 members) goes no further: beside the gateway's
// traceparent it would describe another trace (W3C Trace Context 3.3).
func injectTrace(ctx context.Context, span trace.Span, h *fasthttp.RequestHeader) {
	if span.SpanContext().TraceState().Len() == 0 {
		policy.DelRequestHeader(h, headerTracestate)
	}
	propagator.Inject(ctx, policy.HeaderCarrier{H: h})
}

// spanMethod is a span name's method: a standard method's name, "HTTP" for
// any other (the OpenTelemetry HTTP conventions' _OTHER), so that a client
// cannot make span names of its own.
func spanMethod(m []byte) string {
	if s, ok := logline.StandardMethod(m); ok {
		return s
	}
	return "HTTP"
}

// methodAttributes are a span's method attributes, as the OpenTelemetry
// HTTP conventions have them: http.request.method is a standard method's
// name or _OTHER, with the method as sent in http.request.method_original.
func methodAttributes(m []byte) []attribute.KeyValue {
	if s, ok := logline.StandardMethod(m); ok {
		return []attribute.KeyValue{attribute.String("http.request.method", s)}
	}
	return []attribute.KeyValue{attribute.String("http.request.method", "_OTHER"), attribute.String("http.request.method_original", string(m))}
}

func protocolVersion(h *fasthttp.RequestHeader, h2 bool) string {
	if h2 {
		return "2"
	}
	if h.IsHTTP11() {
		return "1.1"
	}
	return "1.0"
}

// keep leaves out of attrs the built-in attributes the settings remove.
func (t *tracing) keep(attrs []attribute.KeyValue) []attribute.KeyValue {
	if t.remove == nil {
		return attrs
	}
	out := attrs[:0]
	for _, kv := range attrs {
		if !t.remove[string(kv.Key)] {
			out = append(out, kv)
		}
	}
	return out
}

// attempt begins the span of one upstream attempt when the request is
// traced (nil otherwise, at no cost): a client span, child of the
// request's, whose context goes upstream in traceparent. addr is the
// upstream's host:port; n counts the attempts from 1.
func (rs *requestState) attempt(req *fasthttp.Request, addr string, n int) trace.Span {
	if rs.span == nil {
		return nil
	}
	return rs.bind.tracing.startAttempt(rs.span, req, addr, n)
}

func (t *tracing) startAttempt(parent trace.Span, req *fasthttp.Request, addr string, n int) trace.Span {
	attrs := methodAttributes(req.Header.Method())
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	attrs = append(attrs, attribute.String("server.address", host))
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	if n > 1 {
		attrs = append(attrs, attribute.Int("http.request.resend_count", n-1))
	}
	ctx, span := t.tracer.Start(trace.ContextWithSpan(context.Background(), parent), spanMethod(req.Header.Method()), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(t.keep(attrs)...))
	injectTrace(ctx, span, &req.Header)
	return span
}

// endAttempt ends an attempt's span with its outcome: the status the
// upstream answered, or the failure that ended it (error.type).
func endAttempt(span trace.Span, status int, err error) {
	if err != nil {
		span.SetAttributes(attribute.String("error.type", failureType(backend.Classify(err))))
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 400 {
			span.SetAttributes(attribute.String("error.type", strconv.Itoa(status)))
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}

// end finishes the request's span with what the request came to: the
// status and route, the GenAI attributes of an LLM request and the MCP
// ones of an MCP request, then the attributes computed by CEL. A routed
// request's span is named by its method and route (a request no route
// took keeps its method alone: the path would give a name per URL), an
// MCP request's by its MCP method, and "span.name" names it when set.
func (t *tracing) end(rs *requestState, method []byte, route string, status int) {
	span := rs.span
	attrs := make([]attribute.KeyValue, 0, 16)
	attrs = append(attrs, attribute.Int("http.response.status_code", status))
	name := ""
	if route != "" {
		attrs = append(attrs, attribute.String("http.route", route))
		name = spanMethod(method) + " " + route
	}
	if status >= 500 {
		attrs = append(attrs, attribute.String("error.type", strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
	if x := rs.llm; x != nil && x.prov != nil {
		attrs = x.genAIAttributes(attrs)
	}
	if m := &rs.mcp; m.Method != "" {
		name = logline.BoundValue(m.Method)
		attrs = append(attrs, attribute.String("mcp.method.name", name))
		if m.Target != "" {
			attrs = append(attrs, attribute.String("mcp.target", m.Target))
		}
		if m.Method == "tools/call" {
			attrs = append(attrs, attribute.String("gen_ai.operation.name", "execute_tool"))
			if m.Tool != "" {
				attrs = append(attrs, attribute.String("gen_ai.tool.name", logline.BoundValue(m.Tool)))
			}
		}
		if len(rs.mcpSession) > 0 {
			attrs = append(attrs, attribute.String("mcp.session.id", string(rs.mcpSession)))
		}
	}
	attrs = t.keep(attrs)
	keep := true
	if len(t.attrs) > 0 || t.filter != nil {
		in, llm := t.celInput(rs)
		for _, a := range t.attrs {
			v, err := celrules.EvalTelemetry(a.prog, &in, llm)
			if err != nil {
				continue
			}
			if a.name == "span.name" {
				if s, ok := v.(types.String); ok {
					name = string(s)
					continue
				}
			}
			attrs = appendAttribute(attrs, a.name, v, false)
		}
		if t.filter != nil {
			v, err := celrules.EvalTelemetry(t.filter.Program, &in, llm)
			b, isBool := v.(types.Bool)
			keep = err == nil && isBool && bool(b)
			t.held.decide(span.SpanContext().SpanID(), keep)
		}
	}
	span.SetAttributes(attrs...)
	if name != "" {
		span.SetName(name)
	}
	span.End()
}

// celInput is what the attributes and the filter see: the request and its
// response, the MCP item, and `llm` when they read it.
func (t *tracing) celInput(rs *requestState) (celrules.Input, map[string]any) {
	var in celrules.Input
	if rs.pc.Fast != nil {
		rs.pc.Responding = true
		in = celrules.LiveInput(&rs.pc)
	}
	if m := &rs.mcp; m.Tool != "" {
		in.MCP = &celrules.MCPItem{Kind: celrules.MCPTool, Name: m.Tool, Target: m.Target}
	}
	var llm map[string]any
	if x := rs.llm; t.llm && x != nil && x.prov != nil {
		var resp *fasthttp.Response
		if rs.pc.Fast != nil && !rs.pc.Fast.Response.IsBodyStream() {
			resp = &rs.pc.Fast.Response
		}
		llm = x.llmVariable(resp, t.prompt, t.completion)
	}
	return in, llm
}

// appendAttribute appends the attribute(s) a CEL value makes under key: a
// string, number or bool as itself, null as nothing, a list or map as JSON
// text; what flatten marked (and, when recursive, every list and map) one
// attribute per element under key.index or key.name.
func appendAttribute(out []attribute.KeyValue, key string, v ref.Val, recursive bool) []attribute.KeyValue {
	if inner, rec, ok := config.Flattened(v); ok {
		return spreadAttribute(out, key, inner, rec)
	}
	if recursive {
		switch v.(type) {
		case traits.Lister, traits.Mapper:
			return spreadAttribute(out, key, v, true)
		}
	}
	if kv, ok := attributeOf(key, v); ok {
		out = append(out, kv)
	}
	return out
}

func spreadAttribute(out []attribute.KeyValue, key string, v ref.Val, recursive bool) []attribute.KeyValue {
	switch x := v.(type) {
	case traits.Lister:
		n, _ := x.Size().(types.Int)
		for i := types.Int(0); i < n; i++ {
			out = appendAttribute(out, key+"."+strconv.Itoa(int(i)), x.Get(i), recursive)
		}
	case traits.Mapper:
		type entry struct {
			name string
			key  ref.Val
		}
		var entries []entry
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			entries = append(entries, entry{celrules.Text(k), k})
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
		for _, e := range entries {
			out = appendAttribute(out, key+"."+e.name, x.Get(e.key), recursive)
		}
	}
	return out
}

// attributeOf is the attribute a CEL value makes; false for null and
// errors.
func attributeOf(key string, v ref.Val) (attribute.KeyValue, bool) {
	switch x := v.(type) {
	case types.String:
		return attribute.String(key, string(x)), true
	case types.Int:
		return attribute.Int64(key, int64(x)), true
	case types.Uint:
		return attribute.Int64(key, int64(x)), true
	case types.Double:
		return attribute.Float64(key, float64(x)), true
	case types.Bool:
		return attribute.Bool(key, bool(x)), true
	case types.Null, *types.Err:
		return attribute.KeyValue{}, false
	}
	return attribute.String(key, celrules.Text(v)), true
}

func clientIP(c *policy.Ctx) string {
	if a := c.Fast.RemoteAddr(); a != nil {
		s := a.String()
		if i := strings.LastIndexByte(s, ':'); i > 0 {
			return strings.Trim(s[:i], "[]")
		}
		return s
	}
	return ""
}

// keepProcessor passes finished spans on to the exporter's processor,
// except those of requests the tracing filter decides: a held request's
// span and its children (the attempts and the policies' calls) wait for
// the request span's end, then go on together or are dropped together. A
// child begun before that end and ended after it (remoteRateLimit's token
// charge) follows the decision when it ends.
type keepProcessor struct {
	next sdktrace.SpanProcessor
	mu   sync.Mutex
	held map[trace.SpanID]*heldSpans
}

type heldSpans struct {
	keep     bool
	decided  bool // the request's span ended
	open     int  // children begun and not ended
	children []sdktrace.ReadOnlySpan
}

// hold makes the span of id and its children wait for decide.
func (p *keepProcessor) hold(id trace.SpanID) {
	p.mu.Lock()
	if p.held == nil {
		p.held = map[trace.SpanID]*heldSpans{}
	}
	p.held[id] = &heldSpans{}
	p.mu.Unlock()
}

// decide says whether the held span of id and its children are exported,
// before the span ends.
func (p *keepProcessor) decide(id trace.SpanID, keep bool) {
	p.mu.Lock()
	if h := p.held[id]; h != nil {
		h.keep = keep
	}
	p.mu.Unlock()
}

func (p *keepProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	p.mu.Lock()
	if len(p.held) > 0 {
		if h := p.held[s.Parent().SpanID()]; h != nil {
			h.open++
		}
	}
	p.mu.Unlock()
	p.next.OnStart(ctx, s)
}

func (p *keepProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	p.mu.Lock()
	if len(p.held) > 0 {
		id := s.SpanContext().SpanID()
		if h := p.held[id]; h != nil && !h.decided {
			// The request's span: its children so far go with it.
			h.decided = true
			children := h.children
			h.children = nil
			if h.open == 0 {
				delete(p.held, id)
			}
			p.mu.Unlock()
			if h.keep {
				for _, c := range children {
					p.next.OnEnd(c)
				}
				p.next.OnEnd(s)
			}
			return
		}
		parent := s.Parent().SpanID()
		if h := p.held[parent]; h != nil {
			h.open--
			if !h.decided {
				h.children = append(h.children, s)
				p.mu.Unlock()
				return
			}
			if h.open <= 0 {
				delete(p.held, parent)
			}
			p.mu.Unlock()
			if h.keep {
				p.next.OnEnd(s)
			}
			return
		}
	}
	p.mu.Unlock()
	p.next.OnEnd(s)
}

func (p *keepProcessor) Shutdown(ctx context.Context) error   { return p.next.Shutdown(ctx) }
func (p *keepProcessor) ForceFlush(ctx context.Context) error { return p.next.ForceFlush(ctx) }
