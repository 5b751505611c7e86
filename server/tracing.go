package server

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
)

// tracing is config.tracing at work: an OTLP exporter (kept in the
// snapshot's lease, so a reload that leaves the settings alone keeps it
// and its queue) and the sampling decisions.
type tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	random   sampling // a request without a trace
	client   sampling // a request with one
}

// sampling is a constant probability or a CEL expression giving one.
type sampling struct {
	p    float64
	prog cel.Program
}

// traceBatchTimeout bounds how long a finished span waits to be exported.
const traceBatchTimeout = time.Second

// propagator reads and writes W3C trace context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// exporterHolder is what the lease holds: the provider, shut down when no
// snapshot uses it any more.
type exporterHolder struct{ provider *sdktrace.TracerProvider }

func (h *exporterHolder) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return h.provider.Shutdown(ctx)
}

// newTracing builds config.tracing's exporter (through the lease) and
// samplers. The exporter connects lazily: a collector that is down loses
// spans, never requests.
func (c *compiler) newTracing(cfg *config.Tracing) (*tracing, error) {
	// The key holds the settings and the header values, which the
	// settings' JSON redacts: the same exporter only for the same ones.
	key, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for k, v := range cfg.Headers {
		headers[k] = string(v)
	}
	holder, err := pool.LoadOrNew(c.lease, "tracing\x00"+string(key)+"\x00"+strings.Join(headerValues(headers), "\x00"), func() (*exporterHolder, error) {
		exp, err := newExporter(cfg, headers)
		if err != nil {
			return nil, err
		}
		res := resource.NewSchemaless(attribute.String("service.name", "gateway"))
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(traceBatchTimeout)), sdktrace.WithResource(res))
		return &exporterHolder{provider: tp}, nil
	})
	if err != nil {
		return nil, &policy.FieldError{Field: "otlpEndpoint", Msg: err.Error()}
	}
	t := &tracing{provider: holder.provider, tracer: holder.provider.Tracer("gateway"), random: sampling{p: 0}, client: sampling{p: 1}}
	for _, s := range []struct {
		cfg *config.Sampling
		out *sampling
	}{{cfg.RandomSampling, &t.random}, {cfg.ClientSampling, &t.client}} {
		if s.cfg == nil {
			continue
		}
		if s.cfg.Const != nil {
			*s.out = sampling{p: *s.cfg.Const}
			continue
		}
		prog, err := config.CompileValueExpression(s.cfg.Expr, false)
		if err != nil {
			return nil, err
		}
		*s.out = sampling{prog: prog}
	}
	return t, nil
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

func newExporter(cfg *config.Tracing, headers map[string]string) (*otlptrace.Exporter, error) {
	u, err := url.Parse(cfg.OTLPEndpoint)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if cfg.OTLPProtocol == "http" {
		path := cfg.Path
		if path == "" {
			path = "/v1/traces"
		}
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host), otlptracehttp.WithURLPath(path), otlptracehttp.WithHeaders(headers)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithHeaders(headers)}
	if u.Scheme == "http" {
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

// headerCarrier reads and writes a fasthttp request's headers for the
// propagator.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	var out []string
	for k := range c.h.All() {
		out = append(out, string(k))
	}
	return out
}

// start begins the request's span when the request is sampled: a child of
// the client's trace when it sent one (clientSampling), else a new trace
// (randomSampling). The span's context replaces traceparent in the request
// the backend gets.
func (t *tracing) start(c *policy.Ctx) trace.Span {
	h := &c.Fast.Request.Header
	parent := propagator.Extract(context.Background(), headerCarrier{h})
	s := &t.random
	if trace.SpanContextFromContext(parent).IsValid() {
		s = &t.client
	}
	if !s.sampled(c) {
		return nil
	}
	ctx, span := t.tracer.Start(parent, string(h.Method())+" "+string(c.Path), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("http.request.method", string(h.Method())),
			attribute.String("url.path", string(c.Path)),
			attribute.String("server.address", string(c.Host)),
			attribute.String("client.address", clientIP(c)),
		))
	propagator.Inject(ctx, headerCarrier{h})
	return span
}

// endSpan finishes a span with what the request came to. A routed
// request's span is named by its method and route (the path, which named
// it until then, would give a name per URL).
func endSpan(span trace.Span, method []byte, route string, status int) {
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if route != "" {
		span.SetAttributes(attribute.String("http.route", route))
		span.SetName(string(method) + " " + route)
	}
	if status >= 500 {
		span.SetAttributes(attribute.Bool("error", true))
	}
	span.End()
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
