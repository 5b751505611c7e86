package extproc

import (
	"context"
	"strings"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// A traced request's stream is one client span under the request's, from
// open to end, and the service gets its traceparent: without an error when
// the exchange went through, with the policy's failure when the service
// answered out of protocol (an invalid header).
func TestStreamSpan(t *testing.T) {
	svc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if extproctest.Header(m.GetRequestHeaders().GetHeaders(), ":path") == "/bad" {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{"bad name": "v"}), nil)}
		}
		return extproctest.Passthrough(st, m)
	}}
	addr := extproctest.Start(t, svc)
	p := compile(t, addr, false, 5*time.Second)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("gateway")
	for i, path := range []string{"/ok", "/bad"} {
		_, parent := tracer.Start(context.Background(), "GET r")
		c := newCtx("GET", path, "")
		c.Trace = policy.NewTrace(parent, tracer, nil)
		want := policy.Continue
		if path == "/bad" {
			want = policy.Done
		}
		if res := p.OnRequest(c); res != want {
			t.Fatalf("%s: %v, want %v", path, res, want)
		}
		c.Fast.Response.SetBodyString("answer")
		p.OnResponse(c)
		if got := string(c.Fast.Response.Body()); path == "/ok" && got != "answer" { // read through the stream
			t.Errorf("/ok: response body %q", got)
		}
		_ = c.Fast.Response.CloseBodyStream()
		c.Reset()
		var span sdktrace.ReadOnlySpan
		deadline := time.Now().Add(10 * time.Second)
		for span == nil {
			for _, s := range rec.Ended() {
				if s.Parent().SpanID() == parent.SpanContext().SpanID() {
					span = s
				}
			}
			if span == nil && time.Now().After(deadline) {
				t.Fatalf("%s: no stream span", path)
			}
			time.Sleep(time.Millisecond)
		}
		if span.Name() != "envoy.service.ext_proc.v3.ExternalProcessor/Process" || span.SpanKind() != trace.SpanKindClient {
			t.Errorf("%s: span %q kind %v", path, span.Name(), span.SpanKind())
		}
		tpHeader := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
		if got := svc.Streams()[i].Metadata.Get("traceparent"); len(got) != 1 || got[0] != tpHeader {
			t.Errorf("%s: the service got traceparent %q, want %q", path, got, tpHeader)
		}
		var errType string
		for _, kv := range span.Attributes() {
			if kv.Key == "error.type" {
				errType = kv.Value.String()
			}
		}
		switch path {
		case "/ok":
			if span.Status().Code == codes.Error || errType != "" {
				t.Errorf("/ok: status %v error.type %q", span.Status(), errType)
			}
		case "/bad":
			if span.Status().Code != codes.Error || errType != "_OTHER" || !strings.Contains(span.Status().Description, "invalid header") {
				t.Errorf("/bad: status %v error.type %q", span.Status(), errType)
			}
		}
		parent.End()
	}
}
