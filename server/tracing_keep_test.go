package server

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The tracing filter's hold: a request's children go with it or are
// dropped with it, those that end before it and one begun before its end
// that ends after (remoteRateLimit's token charge) alike; a span that is
// not held goes on at once.
func TestKeepProcessorHoldsLateChildren(t *testing.T) {
	for _, keep := range []bool{true, false} {
		rec := tracetest.NewSpanRecorder()
		p := &keepProcessor{next: rec}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
		tracer := tp.Tracer("test")
		ctx, req := tracer.Start(context.Background(), "request")
		p.hold(req.SpanContext().SpanID())
		_, early := tracer.Start(ctx, "early")
		_, late := tracer.Start(ctx, "late")
		_, other := tracer.Start(context.Background(), "other")
		early.End()
		other.End()
		if n := len(rec.Ended()); n != 1 {
			t.Fatalf("keep=%v: %d spans went on before the decision, want the unheld one", keep, n)
		}
		p.decide(req.SpanContext().SpanID(), keep)
		req.End()
		late.End()
		names := map[string]bool{}
		for _, s := range rec.Ended() {
			names[s.Name()] = true
		}
		for _, name := range []string{"request", "early", "late"} {
			if names[name] != keep {
				t.Errorf("keep=%v: span %q exported: %v", keep, name, names[name])
			}
		}
		p.mu.Lock()
		left := len(p.held)
		p.mu.Unlock()
		if left != 0 {
			t.Errorf("keep=%v: %d requests still held", keep, left)
		}
		_ = tp.Shutdown(context.Background())
	}
}
