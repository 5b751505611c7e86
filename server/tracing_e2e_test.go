package server

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
	"github.com/relaygate/gateway/policy/policytest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

// otlpReceiver is an OTLP/HTTP collector: it keeps the spans it is sent
// (with their resource's attributes) and, at /v1/logs, the log records.
type otlpReceiver struct {
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources map[*tracepb.Span]map[string]string
	logs      []*logspb.LogRecord
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var resp proto.Message
	if strings.HasSuffix(r.URL.Path, "/v1/logs") {
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		o.mu.Lock()
		for _, rl := range req.GetResourceLogs() {
			for _, sl := range rl.GetScopeLogs() {
				o.logs = append(o.logs, sl.GetLogRecords()...)
			}
		}
		o.mu.Unlock()
		resp = &collogspb.ExportLogsServiceResponse{}
	} else {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		o.mu.Lock()
		if o.resources == nil {
			o.resources = map[*tracepb.Span]map[string]string{}
		}
		for _, rs := range req.GetResourceSpans() {
			res := attrMap(rs.GetResource().GetAttributes())
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					o.resources[sp] = res
				}
				o.spans = append(o.spans, ss.GetSpans()...)
			}
		}
		o.mu.Unlock()
		resp = &coltracepb.ExportTraceServiceResponse{}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(resp)
	w.Write(b)
}

func (o *otlpReceiver) all() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.spans...)
}

func (o *otlpReceiver) resource(s *tracepb.Span) map[string]string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.resources[s]
}

func (o *otlpReceiver) logRecords() []*logspb.LogRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*logspb.LogRecord(nil), o.logs...)
}

// named returns the spans called name.
func (o *otlpReceiver) named(name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range o.all() {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// children returns the spans whose parent is s, in the order they started.
func (o *otlpReceiver) children(s *tracepb.Span) []*tracepb.Span {
	var out []*tracepb.Span
	for _, c := range o.all() {
		if bytes.Equal(c.GetParentSpanId(), s.GetSpanId()) && bytes.Equal(c.GetTraceId(), s.GetTraceId()) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetStartTimeUnixNano() < out[j].GetStartTimeUnixNano() })
	return out
}

// attrMap shows attributes as text: strings as they are, other values as
// the protobuf's text of them ("int_value:201").
func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	attrs := map[string]string{}
	for _, a := range kvs {
		v := a.GetValue()
		if _, ok := v.GetValue().(*commonpb.AnyValue_StringValue); ok {
			attrs[a.GetKey()] = v.GetStringValue()
		} else {
			attrs[a.GetKey()] = strings.Join(strings.Fields(v.String()), "")
		}
	}
	return attrs
}

func spanAttrs(s *tracepb.Span) map[string]string { return attrMap(s.GetAttributes()) }

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
	eventually(t, 10*time.Second, "the spans at the collector", func() bool { return len(recv.all()) >= 2 })
	spans := recv.all()
	var span, attempt *tracepb.Span
	for _, s := range spans {
		switch {
		case hexID(s.GetTraceId()) != traceID:
			t.Errorf("a span %q in trace %x: only the first request was sampled", s.GetName(), s.GetTraceId())
		case s.GetName() == "GET traced" && span == nil:
			span = s
		case s.GetName() == "GET" && attempt == nil:
			attempt = s
		default:
			t.Errorf("a span %q more", s.GetName())
		}
	}
	if span == nil || attempt == nil {
		t.Fatalf("no span named \"GET traced\" and its attempt among %d", len(spans))
	}
	if hexID(span.GetParentSpanId()) != "00f067aa0ba902b7" || span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span parent %x kind %v", span.GetParentSpanId(), span.GetKind())
	}
	attrs := spanAttrs(span)
	if attrs["http.request.method"] != "GET" || attrs["url.path"] != "/a/b" || attrs["http.route"] != "traced" || attrs["http.response.status_code"] != "int_value:201" {
		t.Errorf("span attributes %v", attrs)
	}
	// The attempt: a client span under the request's, the parent of what
	// the backend got.
	if !bytes.Equal(attempt.GetParentSpanId(), span.GetSpanId()) || attempt.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("attempt parent %x kind %v", attempt.GetParentSpanId(), attempt.GetKind())
	}
	host, port, _ := net.SplitHostPort(up)
	if a := spanAttrs(attempt); a["http.request.method"] != "GET" || a["server.address"] != host || a["server.port"] != "int_value:"+port || a["http.response.status_code"] != "int_value:201" || a["error.type"] != "" {
		t.Errorf("attempt attributes %v", a)
	}
	if !strings.HasSuffix(got, hexID(attempt.GetSpanId())+"-01") {
		t.Errorf("the backend's parent %q is not the attempt's span %x", got, attempt.GetSpanId())
	}
}

// TestTracingReplacesEveryTraceparent: a client that sends traceparent
// twice has no second copy reach the backend beside the gateway's trace
// context: the backend sees one traceparent, the gateway's (in the
// client's first trace). tracestate on two lines is one list (W3C trace
// context 3.3.1): the backend gets it whole, on one line. Over HTTP/1.1
// and HTTP/2 alike.
func TestTracingReplacesEveryTraceparent(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
	}))
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: http
    randomSampling: true
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "COLLECTOR": upstream(t, &otlpReceiver{})})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	first := "00-" + traceID + "-00f067aa0ba902b7-01"
	second := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range bothClients() {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, tg.url(3000)+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header["Traceparent"] = []string{first, second}
			req.Header["Tracestate"] = []string{"a=1", "b=2"}
			if resp, _ := doWith(t, tc.client, req); resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			mu.Lock()
			h := seen
			mu.Unlock()
			parents := h.Values("Traceparent")
			if len(parents) != 1 || !strings.HasPrefix(parents[0], "00-"+traceID+"-") || parents[0] == first {
				t.Errorf("the backend saw traceparent %q: want only the gateway's, in the client's first trace", parents)
			}
			if states := h.Values("Tracestate"); len(states) != 1 || states[0] != "a=1,b=2" {
				t.Errorf("the backend saw tracestate %q: want [a=1,b=2]", states)
			}
			// A tracestate without a traceparent, or one the trace does
			// not carry (past 32 members), describes no trace the gateway
			// continues: it goes no further beside the gateway's new one.
			many := make([]string, 40)
			for i := range many {
				many[i] = "k" + strconv.Itoa(i) + "=v"
			}
			for _, c := range []struct{ parent, state string }{
				{"", "a=1"},
				{first, strings.Join(many, ",")},
			} {
				req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+"/", nil)
				if c.parent != "" {
					req.Header.Set("Traceparent", c.parent)
				}
				req.Header.Set("Tracestate", c.state)
				if resp, _ := doWith(t, tc.client, req); resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				mu.Lock()
				h := seen
				mu.Unlock()
				if len(h.Values("Traceparent")) != 1 || len(h.Values("Tracestate")) != 0 {
					t.Errorf("traceparent %q, tracestate %.40q sent: the backend saw traceparent %q, tracestate %.40q; want the gateway's traceparent alone", c.parent, c.state, h.Values("Traceparent"), h.Values("Tracestate"))
				}
			}
		})
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

// waitSpan polls the collector for a span called name, and returns it.
func waitSpan(t *testing.T, recv *otlpReceiver, name string) *tracepb.Span {
	t.Helper()
	var span *tracepb.Span
	eventually(t, 10*time.Second, "a span "+name, func() bool {
		if s := recv.named(name); len(s) > 0 {
			span = s[0]
			return true
		}
		return false
	})
	return span
}

// TestTracingAttemptSpans: each upstream attempt of a request is a client
// span under the request's: a retried request has two, the first failed
// with the status it got, the second counted as a resend; a request whose
// backend refuses the connection has one, with error.type "connect".
func TestTracingAttemptSpans(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	var parents []string
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		parents = append(parents, r.Header.Get("Traceparent"))
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
	}))
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: http
    randomSampling: true
binds:
- port: 3000
  listeners:
  - routes:
    - name: retried
      matches: [{path: {pathPrefix: /retried}}]
      policies: {retry: {attempts: 2, codes: [503]}}
      backends: [{host: '${UP}'}]
    - name: refused
      backends: [{host: '${CLOSED}'}]
`, map[string]string{"UP": up, "COLLECTOR": collector, "CLOSED": closedAddr(t)})
	if resp, _ := get(t, tg.url(3000)+"/retried"); resp.StatusCode != 200 {
		t.Fatalf("retried: status %d", resp.StatusCode)
	}
	if resp, _ := get(t, tg.url(3000)+"/refused"); resp.StatusCode != 503 {
		t.Fatalf("refused: status %d", resp.StatusCode)
	}
	retried := waitSpan(t, recv, "GET retried")
	refused := waitSpan(t, recv, "GET refused")
	var attempts []*tracepb.Span
	eventually(t, 10*time.Second, "two attempt spans", func() bool {
		attempts = recv.children(retried)
		return len(attempts) == 2
	})
	first, second := spanAttrs(attempts[0]), spanAttrs(attempts[1])
	if first["http.response.status_code"] != "int_value:503" || first["error.type"] != "503" || first["http.request.resend_count"] != "" {
		t.Errorf("first attempt %v", first)
	}
	if attempts[0].GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("first attempt status %v", attempts[0].GetStatus())
	}
	if second["http.response.status_code"] != "int_value:200" || second["error.type"] != "" || second["http.request.resend_count"] != "int_value:1" {
		t.Errorf("second attempt %v", second)
	}
	for i, a := range attempts {
		if a.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || spanAttrs(a)["http.request.method"] != "GET" {
			t.Errorf("attempt %d: kind %v attributes %v", i, a.GetKind(), spanAttrs(a))
		}
	}
	mu.Lock()
	seen := append([]string(nil), parents...)
	mu.Unlock()
	if len(seen) != 2 || !strings.Contains(seen[0], hexID(attempts[0].GetSpanId())) || !strings.Contains(seen[1], hexID(attempts[1].GetSpanId())) {
		t.Errorf("the backend saw traceparents %q: want each attempt's own", seen)
	}
	if got := spanAttrs(retried)["http.response.status_code"]; got != "int_value:200" {
		t.Errorf("request span status %s", got)
	}
	var failed []*tracepb.Span
	eventually(t, 10*time.Second, "the refused attempt's span", func() bool {
		failed = recv.children(refused)
		return len(failed) == 1
	})
	if a := spanAttrs(failed[0]); a["error.type"] != "connect" || a["http.response.status_code"] != "" {
		t.Errorf("refused attempt %v", a)
	}
	if a := spanAttrs(refused); a["error.type"] != "503" || refused.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("refused request span %v %v", a, refused.GetStatus())
	}
}

// TestTracingFrontendPolicy: frontendPolicies.tracing sends spans to its
// collector with attributes computed by CEL (a failing one left out, a
// flattened list spread, span.name naming the span), its resources, the
// built-in attributes it removes left out, and the spans of requests its
// filter refuses dropped, attempts included.
func TestTracingFrontendPolicy(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
frontendPolicies:
  tracing:
    host: '${COLLECTOR}'
    protocol: http
    randomSampling: true
    filter: 'request.path != "/drop"'
    remove: [client.address]
    attributes:
      tenant: 'request.headers["x-tenant"]'
      missing: 'request.headers["x-absent"]'
      sum: '1 + 2'
      tags: 'flatten(["a", "b"])'
      nested: 'flattenRecursive({"k": ["x"]})'
      span.name: '"edge " + request.path'
    resources:
      service.name: '"edge-gateway"'
      deployment.environment: '"test"'
binds:
- port: 3000
  listeners:
  - routes:
    - name: r
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "COLLECTOR": collector})
	get(t, tg.url(3000)+"/drop")
	get(t, tg.url(3000)+"/keep", "X-Tenant", "acme")
	span := waitSpan(t, recv, "edge /keep")
	a := spanAttrs(span)
	for k, want := range map[string]string{"tenant": "acme", "sum": "int_value:3", "tags.0": "a", "tags.1": "b", "nested.k.0": "x", "http.route": "r", "url.path": "/keep"} {
		if a[k] != want {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, a[k], want, a)
		}
	}
	for _, k := range []string{"missing", "client.address", "span.name", "tags"} {
		if _, ok := a[k]; ok {
			t.Errorf("attribute %s present: %v", k, a)
		}
	}
	res := recv.resource(span)
	if res["service.name"] != "edge-gateway" || res["deployment.environment"] != "test" {
		t.Errorf("resource %v", res)
	}
	eventually(t, 10*time.Second, "the kept request's attempt", func() bool { return len(recv.children(span)) == 1 })
	// The dropped request ended before the kept one: its spans, had they
	// been exported, would have come in the same batch or an earlier one.
	for _, s := range recv.all() {
		if s.GetName() == "edge /drop" || !bytes.Equal(s.GetTraceId(), span.GetTraceId()) {
			t.Errorf("span %q of another trace exported: the filter drops it", s.GetName())
		}
	}
}

// TestTracingLLMGenAIAttributes: an LLM request's span carries the GenAI
// attributes (operation, provider, models, usage) and what config.tracing
// fields add from `llm` (prompt and completion spread by
// flattenRecursive), with a span per provider attempt under it: failover
// from a failing provider makes two.
func TestTracingLLMGenAIAttributes(t *testing.T) {
	failing := llmtest.NewOpenAI(t)
	failing.SetDefault(llmtest.Failure{Status: 500})
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "Paris.", Usage: llmtest.Usage{InputTokens: 20, OutputTokens: 5}})
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: http
    randomSampling: true
    fields:
      add:
        span.name: '"openai.chat"'
        gen_ai.system: 'llm.provider'
        gen_ai.prompt: 'flattenRecursive(llm.prompt)'
        gen_ai.completion: 'flattenRecursive(llm.completion.map(c, {"role": "assistant", "content": c}))'
        llm.is_streaming: 'llm.streaming'
        llm.usage.total_tokens: 'llm.totalTokens'
binds:
- port: 8080
  listeners:
  - routes:
    - name: llm
      backends:
      - ai:
          groups:
          - providers:
            - {name: failing, hostOverride: "${FAILING}", provider: {openAI: {}}, policies: {backendAuth: {key: `+failing.APIKey+`}}}
          - providers:
            - {name: good, hostOverride: "${GOOD}", provider: {openAI: {}}, policies: {backendAuth: {key: `+o.APIKey+`}}}
`, map[string]string{"COLLECTOR": collector, "FAILING": failing.Addr(), "GOOD": o.Addr()})
	c := openaiVia(tg)
	resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini"))
	if err != nil || resp.Choices[0].Message.Content != "Paris." {
		t.Fatalf("chat: %v %v", resp, err)
	}
	span := waitSpan(t, recv, "openai.chat")
	a := spanAttrs(span)
	for k, want := range map[string]string{
		"gen_ai.operation.name":       "chat",
		"gen_ai.provider.name":        "openai",
		"gen_ai.system":               "openai",
		"gen_ai.request.model":        "gpt-4o-mini",
		"gen_ai.response.model":       "gpt-4o-mini",
		"gen_ai.usage.input_tokens":   "int_value:20",
		"gen_ai.usage.output_tokens":  "int_value:5",
		"gen_ai.prompt.0.role":        "system",
		"gen_ai.prompt.0.content":     "Be brief.",
		"gen_ai.prompt.1.role":        "user",
		"gen_ai.prompt.1.content":     "What is the capital of France?",
		"gen_ai.completion.0.role":    "assistant",
		"gen_ai.completion.0.content": "Paris.",
		"llm.is_streaming":            "bool_value:false",
		"llm.usage.total_tokens":      "int_value:25",
		"http.route":                  "llm",
	} {
		if a[k] != want {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, a[k], want, a)
		}
	}
	var attempts []*tracepb.Span
	eventually(t, 10*time.Second, "two provider attempts", func() bool {
		attempts = recv.children(span)
		return len(attempts) == 2
	})
	for i, want := range []struct{ addr, status, errType string }{{failing.Addr(), "int_value:500", "500"}, {o.Addr(), "int_value:200", ""}} {
		host, port, _ := net.SplitHostPort(want.addr)
		got := spanAttrs(attempts[i])
		if got["http.request.method"] != "POST" || got["server.address"] != host || got["server.port"] != "int_value:"+port || got["http.response.status_code"] != want.status || got["error.type"] != want.errType {
			t.Errorf("attempt %d: %v", i, got)
		}
	}
}

// TestTracingMCPAttributes: an MCP tools/call's span is named by its
// method and carries the MCP attributes (method, tool, session), and the
// access log record, exported over OTLP (accessLog.otlp), names the span.
func TestTracingMCPAttributes(t *testing.T) {
	target, _ := mcpTarget(t, "b", "sum")
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
frontendPolicies:
  tracing:
    host: '${COLLECTOR}'
    protocol: http
    randomSampling: true
  accessLog:
    otlp:
      host: '${COLLECTOR}'
      protocol: http
      fields:
        add: {tenant: '"acme"', route: '"replaced"'}
        remove: [src]
binds:
- port: 3000
  listeners:
  - routes:
    - name: tools
      backends:
      - mcp:
          targets:
          - { name: b, mcp: { host: '${B}' } }
`, map[string]string{"B": target, "COLLECTOR": collector})
	cs, err := mcpConnect(t, tg.url(3000)+"/mcp", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "sum"}); err != nil {
		t.Fatal(err)
	}
	span := waitSpan(t, recv, "tools/call")
	a := spanAttrs(span)
	for k, want := range map[string]string{
		"mcp.method.name":       "tools/call",
		"gen_ai.tool.name":      "sum",
		"gen_ai.operation.name": "execute_tool",
		"mcp.target":            "b",
		"mcp.session.id":        cs.ID(),
		"http.route":            "tools",
	} {
		if a[k] != want || want == "" {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, a[k], want, a)
		}
	}
	var rec map[string]string
	var recTrace []byte
	routes := 0 // attributes named route: the added one replaces the built-in
	eventually(t, 10*time.Second, "the tools/call access record over OTLP", func() bool {
		for _, r := range recv.logRecords() {
			if m := attrMap(r.GetAttributes()); m["mcp.method"] == "tools/call" {
				rec, recTrace = m, r.GetTraceId()
				for _, kv := range r.GetAttributes() {
					if kv.GetKey() == "route" {
						routes++
					}
				}
				return true
			}
		}
		return false
	})
	if routes != 1 || rec["route"] != "replaced" {
		t.Errorf("%d route attributes, %q; want the added one alone", routes, rec["route"])
	}
	if rec["mcp.tool"] != "sum" || rec["tenant"] != "acme" || rec["span.id"] != hexID(span.GetSpanId()) || !bytes.Equal(recTrace, span.GetTraceId()) {
		t.Errorf("access record %v (trace %x, span's %x)", rec, recTrace, span.GetTraceId())
	}
	if _, ok := rec["src"]; ok {
		t.Errorf("removed field src exported: %v", rec)
	}
}

// grpcLogCollector is an OTLP/gRPC logs collector on 127.0.0.1.
type grpcLogCollector struct {
	collogspb.UnimplementedLogsServiceServer
	mu      sync.Mutex
	records []*logspb.LogRecord
	auth    []string
}

func (c *grpcLogCollector) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.auth = append(c.auth, md.Get("authorization")...)
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			c.records = append(c.records, sl.GetLogRecords()...)
		}
	}
	return &collogspb.ExportLogsServiceResponse{}, nil
}

func (c *grpcLogCollector) paths() map[string]map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]map[string]string{}
	for _, r := range c.records {
		m := attrMap(r.GetAttributes())
		out[m["path"]] = m
	}
	return out
}

// TestAccessLogOTLP: accessLog.otlp exports, over OTLP/gRPC by default,
// the records accessLog's filter keeps, with its added fields (of their
// values' types: a number is an int_value) and the headers its
// requestHeaderModifier sets.
func TestAccessLogOTLP(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	coll := &grpcLogCollector{}
	srv := grpc.NewServer()
	collogspb.RegisterLogsServiceServer(srv, coll)
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(srv.Stop)
	tg := startGateway(t, `
frontendPolicies:
  accessLog:
    filter: 'request.path != "/quiet"'
    add: {team: '"blue"', code: 'response.code'}
    otlp:
      host: '${COLLECTOR}'
      policies: {requestHeaderModifier: {set: {authorization: 'Bearer k'}}}
binds:
- port: 3000
  listeners:
  - routes:
    - name: r
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "COLLECTOR": ln.Addr().String()})
	get(t, tg.url(3000)+"/quiet")
	get(t, tg.url(3000)+"/loud")
	var rec map[string]string
	eventually(t, 10*time.Second, "the /loud record", func() bool {
		rec = coll.paths()["/loud"]
		return rec != nil
	})
	if rec["team"] != "blue" || rec["code"] != "int_value:204" || rec["status"] != "int_value:204" || rec["route"] != "r" || rec["method"] != "GET" {
		t.Errorf("record %v", rec)
	}
	if _, ok := coll.paths()["/quiet"]; ok {
		t.Error("the record accessLog's filter drops was exported")
	}
	coll.mu.Lock()
	auth := append([]string(nil), coll.auth...)
	coll.mu.Unlock()
	if len(auth) == 0 || auth[0] != "Bearer k" {
		t.Errorf("export authorization %q", auth)
	}
}

// policySpan finds among spans the one a policy's call made: its name,
// and the policy kind it names.
func policySpan(spans []*tracepb.Span, name, kind string) *tracepb.Span {
	for _, s := range spans {
		if s.GetName() == name && spanAttrs(s)["gateway.policy"] == kind {
			return s
		}
	}
	return nil
}

// traceparentOf is the W3C traceparent a span gives what it calls.
func traceparentOf(s *tracepb.Span) string {
	return "00-" + hexID(s.GetTraceId()) + "-" + hexID(s.GetSpanId()) + "-01"
}

// firstValue is the first value of a gRPC metadata key ("" when none).
func firstValue(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

const (
	checkSpan   = "envoy.service.auth.v3.Authorization/Check"
	rlsSpan     = "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
	processSpan = "envoy.service.ext_proc.v3.ExternalProcessor/Process"
)

// TestTracingPolicyCallSpans: each call a traced request's policies make to
// an external service (an extAuthz check over gRPC and over HTTP, a
// remoteRateLimit question, an extProc stream) is a client span under the
// request's, named and described as OpenTelemetry's RPC and HTTP
// conventions say, and the service gets the trace continued from it in
// traceparent; a call to a service that is down has an error status.
func TestTracingPolicyCallSpans(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	authz := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }}
	authzAddr := extauthztest.Start(t, authz)
	rls := &rlstest.Server{Limit: 1000}
	rlsAddr := rlstest.Start(t, rls)
	proc := &extproctest.Server{}
	procAddr := extproctest.Start(t, proc)
	var mu sync.Mutex
	var httpParent string
	httpAuthz := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		httpParent = r.Header.Get("Traceparent")
		mu.Unlock()
		w.WriteHeader(200)
	}))
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: http
    randomSampling: true
binds:
- port: 3000
  listeners:
  - routes:
    - name: checked
      matches: [{path: {pathPrefix: /checked}}]
      policies:
        extAuthz: {host: '${AUTHZ}'}
        remoteRateLimit: {domain: d, host: '${RLS}', descriptors: [{entries: [{key: k, value: '"v"'}]}]}
        extProc:
          host: '${PROC}'
          processingOptions: {requestBodyMode: none, responseBodyMode: none}
      backends: [{host: '${UP}'}]
    - name: http
      matches: [{path: {pathPrefix: /http}}]
      policies:
        extAuthz: {host: '${HTTP_AUTHZ}', protocol: {http: {}}}
      backends: [{host: '${UP}'}]
    - name: dead
      matches: [{path: {pathPrefix: /dead}}]
      policies:
        extAuthz: {host: '${DEAD}', failureMode: allow}
        remoteRateLimit: {domain: d, host: '${DEAD}', failureMode: failOpen, descriptors: [{entries: [{key: k, value: '"v"'}]}]}
        extProc:
          host: '${DEAD}'
          failureMode: failOpen
          processingOptions: {requestBodyMode: none, responseBodyMode: none}
      backends: [{host: '${UP}'}]
    - name: deadhttp
      matches: [{path: {pathPrefix: /deadhttp}}]
      policies:
        extAuthz: {host: '${DEAD}', protocol: {http: {}}}
      backends: [{host: '${UP}'}]
`, map[string]string{
		"UP": up, "COLLECTOR": collector, "AUTHZ": authzAddr, "RLS": rlsAddr, "PROC": procAddr,
		"HTTP_AUTHZ": strings.TrimPrefix(httpAuthz, "http://"), "DEAD": closedAddr(t),
	})
	for path, want := range map[string]int{"/checked": 200, "/http": 200, "/dead": 200, "/deadhttp": 403} {
		if resp, _ := get(t, tg.url(3000)+path); resp.StatusCode != want {
			t.Fatalf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
	}

	// Over gRPC: one span per call, each the parent of what the service got.
	checked := waitSpan(t, recv, "GET checked")
	var calls []*tracepb.Span
	eventually(t, 10*time.Second, "the checked request's attempt and three policy calls", func() bool {
		calls = recv.children(checked)
		return len(calls) == 4
	})
	for _, c := range []struct {
		name, kind, service, method, addr string
		md                                func() metadata.MD
	}{
		{checkSpan, "extAuthz", "envoy.service.auth.v3.Authorization", "Check", authzAddr, func() metadata.MD { return authz.Metadata()[0] }},
		{rlsSpan, "remoteRateLimit", "envoy.service.ratelimit.v3.RateLimitService", "ShouldRateLimit", rlsAddr, func() metadata.MD { return rls.Metadata()[0] }},
		{processSpan, "extProc", "envoy.service.ext_proc.v3.ExternalProcessor", "Process", procAddr, func() metadata.MD { return proc.Last(t).Metadata }},
	} {
		s := policySpan(calls, c.name, c.kind)
		if s == nil {
			t.Errorf("no %s span (%s) under the request's", c.name, c.kind)
			continue
		}
		host, port, _ := net.SplitHostPort(c.addr)
		a := spanAttrs(s)
		for k, want := range map[string]string{
			"rpc.system": "grpc", "rpc.service": c.service, "rpc.method": c.method, "rpc.grpc.status_code": "int_value:0",
			"server.address": host, "server.port": "int_value:" + port, "gateway.policy": c.kind,
		} {
			if c.kind == "extProc" && k == "rpc.grpc.status_code" && a[k] == "int_value:1" {
				continue // the gateway ended the stream (CANCELLED) before the service did (OK)
			}
			if a[k] != want {
				t.Errorf("%s: attribute %s = %q, want %q (all: %v)", c.name, k, a[k], want, a)
			}
		}
		if _, ok := a["error.type"]; ok || s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("%s: kind %v status %v attributes %v", c.name, s.GetKind(), s.GetStatus(), a)
		}
		if got := firstValue(c.md(), "traceparent"); got != traceparentOf(s) {
			t.Errorf("%s: the service got traceparent %q, want %q", c.name, got, traceparentOf(s))
		}
	}

	// Over HTTP: a span named by the method, the parent of what the
	// service got.
	httpReq := waitSpan(t, recv, "GET http")
	eventually(t, 10*time.Second, "the HTTP check and the attempt", func() bool {
		calls = recv.children(httpReq)
		return len(calls) == 2
	})
	check := policySpan(calls, "GET", "extAuthz")
	if check == nil {
		t.Fatalf("no HTTP check span among %v", calls)
	}
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(httpAuthz, "http://"))
	if a := spanAttrs(check); a["http.request.method"] != "GET" || a["server.address"] != host || a["server.port"] != "int_value:"+port || a["http.response.status_code"] != "int_value:200" || check.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("HTTP check: kind %v attributes %v", check.GetKind(), a)
	}
	mu.Lock()
	got := httpParent
	mu.Unlock()
	if got != traceparentOf(check) {
		t.Errorf("the HTTP service got traceparent %q, want %q", got, traceparentOf(check))
	}

	// Services that are down: each call's span failed.
	dead := waitSpan(t, recv, "GET dead")
	eventually(t, 10*time.Second, "the dead services' calls", func() bool {
		calls = recv.children(dead)
		return len(calls) == 4
	})
	for _, c := range []struct{ name, kind string }{{checkSpan, "extAuthz"}, {rlsSpan, "remoteRateLimit"}, {processSpan, "extProc"}} {
		s := policySpan(calls, c.name, c.kind)
		if s == nil {
			t.Errorf("no %s span for the dead service", c.name)
			continue
		}
		if a := spanAttrs(s); a["rpc.grpc.status_code"] != "int_value:14" || a["error.type"] != "UNAVAILABLE" || s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("%s to a dead service: status %v attributes %v", c.name, s.GetStatus(), a)
		}
	}
	deadHTTP := waitSpan(t, recv, "GET deadhttp")
	eventually(t, 10*time.Second, "the dead HTTP check", func() bool {
		calls = recv.children(deadHTTP)
		return len(calls) == 1
	})
	if a := spanAttrs(calls[0]); a["gateway.policy"] != "extAuthz" || a["error.type"] != "connect" || calls[0].GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("HTTP check to a dead service: status %v attributes %v", calls[0].GetStatus(), a)
	}
}

// TestTracingTokenChargeSpan: remoteRateLimit's token charge, made after
// an LLM answer completes, is a span under the request's like its check
// (held with it by the tracing filter, which keeps this request), with the
// tokens charged.
func TestTracingTokenChargeSpan(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 60, OutputTokens: 40}})
	rls := &rlstest.Server{Limit: 1000}
	addr := rlstest.Start(t, rls)
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	limits := `
remoteRateLimit:
  domain: llm
  host: '` + addr + `'
  descriptors:
  - entries: [{key: route, value: '"llm"'}]
    type: tokens
`
	tg := startGateway(t, `
frontendPolicies:
  tracing:
    host: '${COLLECTOR}'
    protocol: http
    randomSampling: true
    filter: 'response.code == 200'
`+llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits), map[string]string{"COLLECTOR": collector})
	c := openaiVia(tg)
	if _, err := c.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini")); err != nil {
		t.Fatal(err)
	}
	span := waitSpan(t, recv, "POST llm")
	var calls []*tracepb.Span
	eventually(t, 10*time.Second, "the attempt, the check and the charge", func() bool {
		calls = recv.children(span)
		return len(calls) == 3
	})
	var check, charge *tracepb.Span
	for _, s := range calls {
		if s.GetName() != rlsSpan {
			continue
		}
		if spanAttrs(s)["gateway.ratelimit.tokens"] != "" {
			charge = s
		} else {
			check = s
		}
	}
	if check == nil || charge == nil {
		t.Fatalf("want a check and a charge among %v", calls)
	}
	if a := spanAttrs(charge); a["gateway.ratelimit.tokens"] != "int_value:100" || a["gateway.policy"] != "remoteRateLimit" || a["rpc.grpc.status_code"] != "int_value:0" {
		t.Errorf("charge attributes %v", a)
	}
	var mds []metadata.MD
	eventually(t, 10*time.Second, "the service's two requests", func() bool {
		mds = rls.Metadata()
		return len(mds) == 2
	})
	if firstValue(mds[0], "traceparent") != traceparentOf(check) || firstValue(mds[1], "traceparent") != traceparentOf(charge) {
		t.Errorf("the service got traceparents %q and %q, want %q and %q", firstValue(mds[0], "traceparent"), firstValue(mds[1], "traceparent"), traceparentOf(check), traceparentOf(charge))
	}
}

// TestTracingGuardrailCallSpans: each call to a guard service (here a
// webhook, as a request and as a response guard) is a client span under
// the request's, and the service gets that span's traceparent.
func TestTracingGuardrailCallSpans(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 1}})
	wh := guardrailtest.NewWebhook(t)
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	policies := `
promptGuard:
  request:
  - webhook: {target: {host: ` + wh.Addr() + `}}
  response:
  - webhook: {target: {host: ` + wh.Addr() + `}}
`
	tg := startGateway(t, `
frontendPolicies:
  tracing:
    host: '${COLLECTOR}'
    protocol: http
    randomSampling: true
`+llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), map[string]string{"COLLECTOR": collector})
	c := openaiVia(tg)
	if _, err := c.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini")); err != nil {
		t.Fatal(err)
	}
	span := waitSpan(t, recv, "POST llm")
	var guards []*tracepb.Span
	eventually(t, 10*time.Second, "the two guard calls", func() bool {
		guards = guards[:0]
		for _, s := range recv.children(span) {
			if spanAttrs(s)["gateway.policy"] == "guardrails" {
				guards = append(guards, s)
			}
		}
		return len(guards) == 2
	})
	reqs := wh.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the webhook got %d calls", len(reqs))
	}
	for i, g := range guards {
		a := spanAttrs(g)
		if g.GetName() != "POST" || g.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || a["http.response.status_code"] != "int_value:200" {
			t.Errorf("guard span %d: %s %v %v", i, g.GetName(), g.GetKind(), a)
		}
	}
	sent := map[string]bool{reqs[0].Header.Get("Traceparent"): true, reqs[1].Header.Get("Traceparent"): true}
	for _, g := range guards {
		if !sent[traceparentOf(g)] {
			t.Errorf("the webhook got traceparents %v, none of them span %s's", sent, traceparentOf(g))
		}
	}
}

// TestAccessLogOTLPHTTP: protocol http posts the records, as protobuf, to
// the configured path, with the headers the policies set; the resource
// names the service and the scope the access log.
func TestAccessLogOTLPHTTP(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	var mu sync.Mutex
	var got []*collogspb.ExportLogsServiceRequest
	var seen []string // path, content type, authorization of each post
	collector := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collogspb.ExportLogsServiceRequest{}
		if err == nil {
			err = proto.Unmarshal(body, req)
		}
		if err != nil {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		got = append(got, req)
		seen = append(seen, r.URL.Path+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(200)
	}))
	tg := startGateway(t, `
frontendPolicies:
  accessLog:
    otlp:
      host: '${COLLECTOR}'
      protocol: http
      path: /collect/logs
      policies: {requestHeaderModifier: {set: {authorization: 'Bearer h'}}}
binds:
- port: 3000
  listeners:
  - routes:
    - name: r
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "COLLECTOR": collector})
	get(t, tg.url(3000)+"/one")
	var rec map[string]string
	var res, scope string
	eventually(t, 10*time.Second, "the /one record over OTLP/HTTP", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, req := range got {
			for _, rl := range req.GetResourceLogs() {
				for _, sl := range rl.GetScopeLogs() {
					for _, r := range sl.GetLogRecords() {
						if m := attrMap(r.GetAttributes()); m["path"] == "/one" {
							rec, res, scope = m, attrMap(rl.GetResource().GetAttributes())["service.name"], sl.GetScope().GetName()
							return true
						}
					}
				}
			}
		}
		return false
	})
	if rec["status"] != "int_value:204" || rec["route"] != "r" || res != "gateway" || scope != "gateway.access" {
		t.Errorf("record %v, service %q, scope %q", rec, res, scope)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen[0] != "/collect/logs application/x-protobuf Bearer h" {
		t.Errorf("post %q", seen[0])
	}
}

// TestTracingSpanNamesStayFew: a request no route takes is named by its
// method alone, not by the client's path (which may hold a token), a
// method outside the standard ones is "HTTP", and an HTTP/2 request's
// protocol version is 2.
func TestTracingSpanNamesStayFew(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	recv := &otlpReceiver{}
	collector := upstream(t, recv)
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: http
    randomSampling: true
binds:
- port: 3000
  listeners:
  - routes:
    - name: known
      matches: [{path: {exact: /known}}]
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "COLLECTOR": collector})
	get(t, tg.url(3000)+"/unrouted-secret-token-123")
	req, _ := http.NewRequest("BREW", tg.url(3000)+"/other-secret", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	// A routed one: its upstream attempt's span is named alike.
	req, _ = http.NewRequest("BREW", tg.url(3000)+"/known", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	resp, err := h2cClient().Get(tg.url(3000) + "/known")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	eventually(t, 10*time.Second, "the spans at the collector", func() bool {
		return len(recv.named("GET")) >= 1 && len(recv.named("HTTP")) >= 2 && len(recv.named("HTTP known")) >= 1 && len(recv.named("GET known")) >= 1
	})
	for _, s := range recv.all() {
		if strings.Contains(s.GetName(), "secret") || strings.Contains(s.GetName(), "BREW") {
			t.Errorf("a span named %q: the client's path or method", s.GetName())
		}
		// The OpenTelemetry HTTP conventions' method attributes.
		if a := spanAttrs(s); strings.HasPrefix(s.GetName(), "HTTP") && (a["http.request.method"] != "_OTHER" || a["http.request.method_original"] != "BREW") {
			t.Errorf("span %q: method %q, original %q; want _OTHER, BREW", s.GetName(), a["http.request.method"], a["http.request.method_original"])
		}
	}
	if v := spanAttrs(recv.named("GET known")[0])["network.protocol.version"]; v != "2" {
		t.Errorf("network.protocol.version %q over HTTP/2; want 2", v)
	}
}

// TestTracingGRPCCollectorReconnects: while an OTLP/gRPC collector fails
// (it accepts each connection and closes it), the exporter tries it again
// at least about once a second (grpc-go's default backoff grows to two
// minutes, and spans were lost that long after the collector's return).
func TestTracingGRPCCollectorReconnects(t *testing.T) {
	collector, attempts := policytest.ClosingService(t)
	tg := startGateway(t, `
config:
  tracing:
    otlpEndpoint: 'http://${COLLECTOR}'
    otlpProtocol: grpc
    randomSampling: true
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        directResponse: {status: 200}
`, map[string]string{"COLLECTOR": collector})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// A span to export every 100 ms.
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if resp, err := http.Get(tg.url(3000) + "/"); err == nil {
				resp.Body.Close()
			}
		}
	}()
	policytest.Reconnects(t, attempts, 4, 1800*time.Millisecond, 20*time.Second)
}
