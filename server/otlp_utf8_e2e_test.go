package server

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// grpcOTLPCollector is an OTLP/gRPC collector on 127.0.0.1 keeping the
// spans and log records it is sent.
type grpcOTLPCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	collogspb.UnimplementedLogsServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	logs  []*logspb.LogRecord
}

func (c *grpcOTLPCollector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

type grpcOTLPLogs struct{ *grpcOTLPCollector }

func (c grpcOTLPLogs) Export(ctx context.Context, req *collogspb.ExportLogsServiceRequest) (*collogspb.ExportLogsServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rl := range req.GetResourceLogs() {
		for _, sl := range rl.GetScopeLogs() {
			c.logs = append(c.logs, sl.GetLogRecords()...)
		}
	}
	return &collogspb.ExportLogsServiceResponse{}, nil
}

func (c *grpcOTLPCollector) all() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

func (c *grpcOTLPCollector) logRecords() []*logspb.LogRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*logspb.LogRecord(nil), c.logs...)
}

// startGRPCOTLP serves c's trace and logs services on 127.0.0.1 and
// returns the address.
func startGRPCOTLP(t *testing.T, c *grpcOTLPCollector) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, c)
	collogspb.RegisterLogsServiceServer(srv, grpcOTLPLogs{c})
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// TestOTLPInvalidUTF8 holds that a client's bytes that are not UTF-8 (in
// the path, in a header an attribute or a field reads, in an LLM request's
// model) reach the collector as UTF-8, U+FFFD in place of each bad run, and
// do not cost the spans and access records of the requests around them.
// Protobuf refuses to marshal a string that is not UTF-8, and the exporter
// dropped the whole batch: a client sending one such request a second kept
// every span and OTLP access record from the collector. Over OTLP/HTTP and
// OTLP/gRPC, for traces and logs.
func TestOTLPInvalidUTF8(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	llm := llmtest.NewOpenAI(t)
	llm.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 2, OutputTokens: 1}})
	type source struct {
		spans func() []*tracepb.Span
		logs  func() []*logspb.LogRecord
	}
	httpRecv := &otlpReceiver{}
	httpAddr := upstream(t, httpRecv)
	grpcRecv := &grpcOTLPCollector{}
	grpcAddr := startGRPCOTLP(t, grpcRecv)
	httpSource := source{httpRecv.all, httpRecv.logRecords}
	grpcSource := source{grpcRecv.all, grpcRecv.logRecords}
	for _, tc := range []struct {
		name                 string
		traceProto, logProto string
		traceAddr, logAddr   string
		traces, logs         source
	}{
		{"traces over HTTP, logs over gRPC", "http", "grpc", httpAddr, grpcAddr, httpSource, grpcSource},
		{"traces over gRPC, logs over HTTP", "grpc", "http", grpcAddr, httpAddr, grpcSource, httpSource},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startGateway(t, `
frontendPolicies:
  tracing:
    host: '${TRACES}'
    protocol: ${TPROTO}
    randomSampling: true
    attributes:
      ua: 'request.headers["user-agent"]'
      hdrs: 'flatten(request.headers)'
      span.name: '"req " + request.path'
  accessLog:
    add:
      ua: 'request.headers["user-agent"]'
    otlp:
      host: '${LOGS}'
      protocol: ${LPROTO}
binds:
- port: 3000
  listeners:
  - routes:
    - name: llm
      matches: [{path: {pathPrefix: /v1}}]
      policies:
        ai:
          routes: {"/v1/chat/completions": completions}
      backends:
      - ai:
          name: p
          hostOverride: ${LLM}
          provider: {openAI: {}}
          policies: {backendAuth: {key: `+llm.APIKey+`}}
    - name: r
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "LLM": llm.Addr(), "TRACES": tc.traceAddr, "LOGS": tc.logAddr, "TPROTO": tc.traceProto, "LPROTO": tc.logProto})
			tag := strings.ReplaceAll(tc.traceProto, "http", "h") // paths of this run's own
			get(t, tg.url(3000)+"/before-"+tag)
			poison := []string{
				"GET /bad-" + tag + "\xff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
				"GET /badua-" + tag + " HTTP/1.1\r\nHost: x\r\nUser-Agent: a\xffb\r\nConnection: close\r\n\r\n",
			}
			body := `{"model":"gpt-` + tag + "\xff" + `","messages":[{"role":"user","content":"hi"}]}`
			poison = append(poison, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\nConnection: close\r\n\r\n"+body)
			for _, raw := range poison {
				c, br := rawConn(t, tg.addr(3000))
				if _, err := c.Write([]byte(raw)); err != nil {
					t.Fatal(err)
				}
				if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
					t.Fatalf("%q: status %d", strings.SplitN(raw, "\r\n", 2)[0], resp.StatusCode)
				}
			}
			get(t, tg.url(3000)+"/after-"+tag)

			spanOf := func(path string) map[string]string {
				for _, s := range tc.traces.spans() {
					if a := spanAttrs(s); a["url.path"] == path {
						a["span.name"] = s.GetName()
						return a
					}
				}
				return nil
			}
			logOf := func(path string) map[string]string {
				for _, r := range tc.logs.logs() {
					if a := attrMap(r.GetAttributes()); a["path"] == path {
						return a
					}
				}
				return nil
			}
			// The requests around the bad ones: their spans and records
			// were in the batches the bad ones spoiled.
			for _, p := range []string{"/before-" + tag, "/after-" + tag} {
				eventually(t, 10*time.Second, "the span of "+p, func() bool { return spanOf(p) != nil })
				eventually(t, 10*time.Second, "the access record of "+p, func() bool { return logOf(p) != nil })
			}
			// The bad ones themselves, made UTF-8.
			bad := "/bad-" + tag + "\uFFFD"
			eventually(t, 10*time.Second, "the span of "+bad, func() bool { return spanOf(bad) != nil })
			if a := spanOf(bad); a["span.name"] != "req "+bad {
				t.Errorf("span name %q, want %q", a["span.name"], "req "+bad)
			}
			eventually(t, 10*time.Second, "the access record of "+bad, func() bool { return logOf(bad) != nil })
			ua := "/badua-" + tag
			eventually(t, 10*time.Second, "the span and record of "+ua, func() bool { return spanOf(ua) != nil && logOf(ua) != nil })
			if a := spanOf(ua); a["ua"] != "a\uFFFDb" || a["hdrs.user-agent"] != "a\uFFFDb" {
				t.Errorf("span attributes ua %q, hdrs.user-agent %q; want %q", a["ua"], a["hdrs.user-agent"], "a\uFFFDb")
			}
			if a := logOf(ua); a["ua"] != "a\uFFFDb" {
				t.Errorf("access record ua %q; want %q", a["ua"], "a\uFFFDb")
			}
			model := "gpt-" + tag + "\uFFFD"
			eventually(t, 10*time.Second, "the LLM request's span and record", func() bool {
				a, r := spanOf("/v1/chat/completions"), logOf("/v1/chat/completions")
				return a != nil && r != nil && a["gen_ai.request.model"] == model && r["llm.request_model"] == model
			})
		})
	}
}
