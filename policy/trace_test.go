package policy

import (
	"context"
	"errors"
	"testing"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// newTracedTrace is a request span and its Trace, recorded by rec.
func newTracedTrace(t *testing.T, remove map[string]bool) (Trace, trace.Span, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("gateway")
	_, parent := tracer.Start(context.Background(), "GET r", trace.WithSpanKind(trace.SpanKindServer))
	return NewTrace(parent, tracer, remove), parent, rec
}

func attrsOf(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// An untraced request's calls start no span and cost nothing.
func TestUntracedCallsCostNothing(t *testing.T) {
	var tr Trace
	ctx := context.Background()
	req := &fasthttp.Request{}
	allocs := testing.AllocsPerRun(100, func() {
		cctx, call := tr.StartGRPC(ctx, KindExtAuthz, "/envoy.service.auth.v3.Authorization/Check", "127.0.0.1:9000")
		if cctx != ctx || call.Recording() {
			t.Fatal("an untraced call changed the context or has a span")
		}
		call.EndGRPC(nil)
		hc := tr.StartHTTP(KindExtAuthz, req, "127.0.0.1:9000")
		hc.EndHTTP(200, nil)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per untraced call, want 0", allocs)
	}
	if tr.Traced() {
		t.Error("the zero Trace is traced")
	}
}

// A traced gRPC call: a client span under the request's, named and
// described by the RPC conventions, whose traceparent goes out in the
// call's metadata along with what was there.
func TestStartGRPC(t *testing.T) {
	tr, parent, rec := newTracedTrace(t, nil)
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	ctx, call := tr.StartGRPC(ctx, KindRemoteRateLimit, "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", "127.0.0.1:8081")
	md, _ := metadata.FromOutgoingContext(ctx)
	call.EndGRPC(nil)
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name() != "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("span %q kind %v parent %v", s.Name(), s.SpanKind(), s.Parent().SpanID())
	}
	want := map[string]string{
		"rpc.system": "grpc", "rpc.service": "envoy.service.ratelimit.v3.RateLimitService", "rpc.method": "ShouldRateLimit",
		"server.address": "127.0.0.1", "server.port": "8081", "gateway.policy": "remoteRateLimit", "rpc.grpc.status_code": "0",
	}
	got := attrsOf(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, got[k], v)
		}
	}
	if s.Status().Code == codes.Error {
		t.Errorf("status %v", s.Status())
	}
	tp := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
	if v := md.Get("traceparent"); len(v) != 1 || v[0] != tp {
		t.Errorf("traceparent %q, want %q", v, tp)
	}
	if v := md.Get("x-tenant"); len(v) != 1 || v[0] != "acme" {
		t.Errorf("the metadata already there was lost: %v", md)
	}
}

// A failed gRPC call: its code, its name as error.type, an error status;
// the settings' remove leaves attributes out.
func TestEndGRPCFailure(t *testing.T) {
	tr, _, rec := newTracedTrace(t, map[string]bool{"server.port": true})
	_, call := tr.StartGRPC(context.Background(), KindExtAuthz, "/envoy.service.auth.v3.Authorization/Check", "127.0.0.1:9000")
	call.EndGRPC(status.Error(grpccodes.DeadlineExceeded, "too slow"))
	_, other := tr.StartGRPC(context.Background(), KindExtProc, "/envoy.service.ext_proc.v3.ExternalProcessor/Process", "127.0.0.1:9001")
	other.EndGRPCStatus(grpccodes.Canceled, errors.New("an answer out of order"))
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	for i, want := range []struct{ code, errType string }{{"4", "DEADLINE_EXCEEDED"}, {"1", "_OTHER"}} {
		a := attrsOf(spans[i])
		if a["rpc.grpc.status_code"] != want.code || a["error.type"] != want.errType || spans[i].Status().Code != codes.Error {
			t.Errorf("span %d: status %v attributes %v", i, spans[i].Status(), a)
		}
		if _, ok := a["server.port"]; ok {
			t.Errorf("span %d: server.port removed, yet there", i)
		}
	}
}

// A traced HTTP call: named by its method, its traceparent on the request,
// its status; a refusal (from 400 on) and a failure are errors.
func TestStartHTTP(t *testing.T) {
	tr, parent, rec := newTracedTrace(t, nil)
	for _, c := range []struct {
		status  int
		err     error
		errType string
	}{{200, nil, ""}, {403, nil, "403"}, {0, fasthttp.ErrTimeout, "timeout"}} {
		req := &fasthttp.Request{}
		req.Header.SetMethod("POST")
		call := tr.StartHTTP(KindExtAuthz, req, "127.0.0.1:9000")
		call.EndHTTP(c.status, c.err)
		spans := rec.Ended()
		s := spans[len(spans)-1]
		a := attrsOf(s)
		tp := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"
		if s.Name() != "POST" || s.Parent().SpanID() != parent.SpanContext().SpanID() || string(req.Header.Peek("traceparent")) != tp {
			t.Errorf("span %q parent %v; request's traceparent %q, want %q", s.Name(), s.Parent().SpanID(), req.Header.Peek("traceparent"), tp)
		}
		if a["http.request.method"] != "POST" || a["gateway.policy"] != "extAuthz" || a["error.type"] != c.errType || (c.errType != "") != (s.Status().Code == codes.Error) {
			t.Errorf("status %d err %v: span status %v attributes %v", c.status, c.err, s.Status(), a)
		}
	}
}

func TestCodeName(t *testing.T) {
	for code, want := range map[grpccodes.Code]string{
		grpccodes.OK: "OK", grpccodes.Unavailable: "UNAVAILABLE", grpccodes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		grpccodes.ResourceExhausted: "RESOURCE_EXHAUSTED", grpccodes.Code(40): "40",
	} {
		if got := codeName(code); got != want {
			t.Errorf("codeName(%d) = %q, want %q", code, got, want)
		}
	}
}
