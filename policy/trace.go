package policy

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Trace is a traced request's span as policies see it: the parent of the
// spans of the calls they make to external services (an extAuthz check, a
// remoteRateLimit question, an extProc stream), and how those spans are
// made. The server sets Ctx.Trace for a traced request only; the zero Trace
// (an untraced request) starts no span, at no cost.
//
// A Trace is a value that outlives its request: a call made after the
// request was answered (remoteRateLimit's token charge) keeps a copy, and
// its span is still a child of the request's.
type Trace struct {
	parent trace.Span
	tracer trace.Tracer
	remove map[string]bool
}

// NewTrace is the Trace of a request whose span is parent: its calls'
// spans are begun by tracer, without the built-in attributes named in
// remove (the tracing settings' remove; nil: none).
func NewTrace(parent trace.Span, tracer trace.Tracer, remove map[string]bool) Trace {
	return Trace{parent: parent, tracer: tracer, remove: remove}
}

// Traced reports whether the request is traced.
func (t Trace) Traced() bool { return t.parent != nil }

// Call is the span of one call to an external service. The zero Call (an
// untraced request's) does nothing.
type Call struct {
	span   trace.Span
	remove map[string]bool
}

// Recording reports whether the call has a span (its request is traced).
func (c Call) Recording() bool { return c.span != nil }

// propagator writes W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// StartGRPC begins the span of a gRPC call the policy of kind k makes to
// method ("/package.Service/Method") of the service at addr (host:port):
// a client span named as OpenTelemetry's RPC conventions say
// ("package.Service/Method"), with rpc.system, rpc.service, rpc.method,
// server.address, server.port and gateway.policy. The context returned
// carries the span, and its outgoing gRPC metadata the span's traceparent
// (the metadata ctx already had kept). Untraced, ctx comes back as it was.
func (t Trace) StartGRPC(ctx context.Context, k Kind, method, addr string) (context.Context, Call) {
	if t.parent == nil {
		return ctx, Call{}
	}
	name := strings.TrimPrefix(method, "/")
	service, short, _ := strings.Cut(name, "/")
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs,
		attribute.String("rpc.system", "grpc"),
		attribute.String("rpc.service", service),
		attribute.String("rpc.method", short),
	)
	attrs = appendServer(attrs, addr)
	attrs = append(attrs, attribute.String("gateway.policy", string(k)))
	ctx, span := t.tracer.Start(trace.ContextWithSpan(ctx, t.parent), name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(t.keep(attrs)...))
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = metadata.MD{}
	}
	propagator.Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md), Call{span: span, remove: t.remove}
}

// StartHTTP begins the span of an HTTP call the policy of kind k makes
// with method to the service at addr: a client span named by the method,
// as OpenTelemetry's HTTP conventions say, with http.request.method,
// server.address, server.port and gateway.policy; the span's traceparent
// is set on req.
func (t Trace) StartHTTP(k Kind, req *fasthttp.Request, addr string) Call {
	if t.parent == nil {
		return Call{}
	}
	method := string(req.Header.Method())
	attrs := make([]attribute.KeyValue, 0, 4)
	attrs = append(attrs, attribute.String("http.request.method", method))
	attrs = appendServer(attrs, addr)
	attrs = append(attrs, attribute.String("gateway.policy", string(k)))
	ctx, span := t.tracer.Start(trace.ContextWithSpan(context.Background(), t.parent), method,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(t.keep(attrs)...))
	propagator.Inject(ctx, HeaderCarrier{&req.Header})
	return Call{span: span, remove: t.remove}
}

func appendServer(attrs []attribute.KeyValue, addr string) []attribute.KeyValue {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return append(attrs, attribute.String("server.address", addr))
	}
	attrs = append(attrs, attribute.String("server.address", host))
	if p, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", p))
	}
	return attrs
}

// keep leaves out of attrs the built-in attributes the settings remove.
func (t Trace) keep(attrs []attribute.KeyValue) []attribute.KeyValue {
	return keepAttrs(t.remove, attrs)
}

func keepAttrs(remove map[string]bool, attrs []attribute.KeyValue) []attribute.KeyValue {
	if remove == nil {
		return attrs
	}
	out := attrs[:0]
	for _, kv := range attrs {
		if !remove[string(kv.Key)] {
			out = append(out, kv)
		}
	}
	return out
}

// SetAttributes adds attributes to the call's span (guard it with
// Recording where an untraced call must not allocate: the variadic slice
// escapes).
func (c Call) SetAttributes(attrs ...attribute.KeyValue) {
	if c.span == nil {
		return
	}
	c.span.SetAttributes(keepAttrs(c.remove, attrs)...)
}

// EndGRPC ends a gRPC call's span with the call's outcome: its status code
// (rpc.grpc.status_code; OK when err is nil) and, when it failed, an error
// status.
func (c Call) EndGRPC(err error) {
	if c.span == nil {
		return
	}
	c.EndGRPCStatus(status.Code(err), err)
}

// EndGRPCStatus ends a gRPC call's span with the status code the call (or
// stream) ended with and failure, why it failed (nil: it did not, whatever
// the code). error.type is the name of the gRPC status the failure
// carries (DEADLINE_EXCEEDED), or _OTHER for one that carries none (an
// answer out of protocol).
func (c Call) EndGRPCStatus(code grpccodes.Code, failure error) {
	if c.span == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.Int("rpc.grpc.status_code", int(code))}
	if failure != nil {
		errType := "_OTHER"
		if s, ok := status.FromError(failure); ok && s.Code() != grpccodes.OK {
			errType = codeName(s.Code())
		}
		attrs = append(attrs, attribute.String("error.type", errType))
		c.span.SetStatus(codes.Error, failure.Error())
	}
	c.span.SetAttributes(keepAttrs(c.remove, attrs)...)
	c.span.End()
}

// EndHTTP ends an HTTP call's span with the status the service answered
// (an error from 400 on, as OpenTelemetry's conventions for client spans
// say), or err, the failure that left it without an answer (error.type
// timeout, connect or _OTHER).
func (c Call) EndHTTP(statusCode int, err error) {
	if c.span == nil {
		return
	}
	var attrs []attribute.KeyValue
	switch {
	case err != nil:
		attrs = append(attrs, attribute.String("error.type", httpFailure(err)))
		c.span.SetStatus(codes.Error, err.Error())
	default:
		attrs = append(attrs, attribute.Int("http.response.status_code", statusCode))
		if statusCode >= 400 {
			attrs = append(attrs, attribute.String("error.type", strconv.Itoa(statusCode)))
			c.span.SetStatus(codes.Error, "")
		}
	}
	c.span.SetAttributes(keepAttrs(c.remove, attrs)...)
	c.span.End()
}

// httpFailure classes a failed HTTP call: timeout, connect (the service
// could not be reached) or _OTHER.
func httpFailure(err error) string {
	var netErr net.Error
	var opErr *net.OpError
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, fasthttp.ErrNoFreeConns),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &opErr) && opErr.Op == "dial":
		return "connect"
	case errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	}
	return "_OTHER"
}

// codeName is a gRPC status code's name as the RPC conventions write it
// (DEADLINE_EXCEEDED).
func codeName(c grpccodes.Code) string {
	s := c.String() // "DeadlineExceeded", "OK", "Code(17)"
	if c > grpccodes.Unauthenticated {
		return strconv.Itoa(int(c))
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' && s != "OK" {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// mdCarrier writes trace context into gRPC metadata.
type mdCarrier metadata.MD

func (m mdCarrier) Get(key string) string {
	if v := metadata.MD(m).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (m mdCarrier) Set(key, value string) { metadata.MD(m).Set(key, value) }
func (m mdCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// HeaderCarrier reads and writes trace context in a fasthttp request's
// headers, for OpenTelemetry's propagators.
type HeaderCarrier struct{ H *fasthttp.RequestHeader }

// Get returns the header's value ("" when none). A field on several lines
// is one list, its lines joined with commas (RFC 9110 5.3), as W3C trace
// context says of tracestate; traceparent is one value, and a second line
// of it is not read.
func (c HeaderCarrier) Get(key string) string {
	lines := c.H.PeekAll(key)
	switch {
	case len(lines) == 0:
		return ""
	case len(lines) == 1 || strings.EqualFold(key, "traceparent"):
		return string(lines[0])
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(l)
	}
	return b.String()
}

// Set sets the header, replacing every value it had (SetRequestHeader):
// only the gateway's trace context goes on, never a client's second
// traceparent beside it.
func (c HeaderCarrier) Set(key, value string) { SetRequestHeader(c.H, key, value) }

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	var out []string
	for k := range c.H.All() {
		out = append(out, string(k))
	}
	return out
}
