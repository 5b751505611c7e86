package server

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace collector: it keeps the spans it is
// sent.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	o.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			o.spans = append(o.spans, ss.GetSpans()...)
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Write(b)
}

func (o *otlpReceiver) all() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.spans...)
}

// TestTracingE2E: a request carrying a W3C trace gets a server span in that
// trace, exported over OTLP/HTTP, and the backend sees the trace continued
// from the gateway's span; a request without one starts none when
// randomSampling is off.
func TestTracingE2E(t *testing.T) {
	var mu sync.Mutex
	var seenParent string
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenParent = r.Header.Get("Traceparent")
		mu.Unlock()
		w.WriteHeader(201)
	}))
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: http
    randomSampling: false
    clientSampling: '!("x-trace-me" in request.headers && request.headers["x-trace-me"] == "no")'
binds:
- port: 3000
  listeners:
  - routes:
    - name: traced
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "COLLECTOR": collector})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	parent := "00-" + traceID + "-00f067aa0ba902b7-01"
	resp, _ := get(t, tg.url(3000)+"/a/b", "Traceparent", parent)
	if resp.StatusCode != 201 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	mu.Lock()
	got := seenParent
	mu.Unlock()
	if !strings.HasPrefix(got, "00-"+traceID+"-") || got == parent {
		t.Fatalf("the backend saw traceparent %q: want the trace continued from the gateway's span", got)
	}
	// Not sampled: no span, the client's trace context passed on as it was.
	// The spans end before the exporter's batch goes (1 s after the first):
	// had these two been sampled, they would be in it.
	get(t, tg.url(3000)+"/skip", "Traceparent", parent, "X-Trace-Me", "no")
	get(t, tg.url(3000)+"/no-trace")
	eventually(t, 10*time.Second, "the span at the collector", func() bool { return len(recv.all()) >= 1 })
	spans := recv.all()
	var span *tracepb.Span
	for _, s := range spans {
		if s.GetName() == "GET traced" && hexID(s.GetTraceId()) == traceID && span == nil {
			span = s
		} else {
			t.Errorf("a span %q in trace %x: only the first request was sampled", s.GetName(), s.GetTraceId())
		}
	}
	if span == nil {
		t.Fatalf("no span named \"GET traced\" among %d", len(spans))
	}
	if hexID(span.GetTraceId()) != traceID || hexID(span.GetParentSpanId()) != "00f067aa0ba902b7" || span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span trace %x parent %x kind %v", span.GetTraceId(), span.GetParentSpanId(), span.GetKind())
	}
	attrs := map[string]string{}
	for _, a := range span.GetAttributes() {
		v := a.GetValue()
		if s := v.GetStringValue(); s != "" {
			attrs[a.GetKey()] = s
		} else {
			attrs[a.GetKey()] = strings.TrimSpace(v.String())
		}
	}
	if attrs["http.request.method"] != "GET" || attrs["url.path"] != "/a/b" || attrs["http.route"] != "traced" || !strings.Contains(attrs["http.response.status_code"], "201") {
		t.Errorf("span attributes %v", attrs)
	}
	if !strings.HasSuffix(got, hexID(span.GetSpanId())+"-01") {
		t.Errorf("the backend's parent %q is not the gateway's span %x", got, span.GetSpanId())
	}
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// A reload that leaves config.tracing alone keeps its exporter, however
// many headers it sends (their order in the map is random).
func TestTracingExporterKeptAcrossReloads(t *testing.T) {
	cfg := `
config:
  tracing:
    otlpEndpoint: http://127.0.0.1:1
    otlpProtocol: http
    headers: {a: "1", b: "2", c: "3", d: "4"}
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: 127.0.0.1:1}]
`
	tg := startGateway(t, cfg, nil)
	first := tg.gw.snap.Load().binds[3000].tracing.provider
	for range 5 {
		tg.apply(cfg, nil)
		if got := tg.gw.snap.Load().binds[3000].tracing.provider; got != first {
			t.Fatal("a reload that changed nothing built a new exporter")
		}
	}
}
