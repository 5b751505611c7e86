package server

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestRecordedStatusIsTheClients: a response policy that changes the
// status the upstream (or the gateway) answered changes what the request's
// record reports: its access line, agentgateway_requests_total's status
// and its span's http.response.status_code say what the client got (a
// transformation's :status, the 502 of a transformation whose body is too
// large, an extProc's immediate response to the response headers, a
// gateway-phase transformation's :status on a request no route takes),
// not what the upstream sent. Over HTTP/1.1 and HTTP/2, with the record
// written after the response (deferRecord) and at once (a traced request).
func TestRecordedStatusIsTheClients(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("size"))
		io.WriteString(w, strings.Repeat("x", max(n, 1)))
	}))
	// proc answers the response headers with an immediate 403.
	proc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_ResponseHeaders); ok {
			return []*procv3.ProcessingResponse{{Response: &procv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &procv3.ImmediateResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden},
				Body:   []byte("blocked response"),
			}}}}
		}
		return extproctest.Passthrough(st, m)
	}}
	vars := map[string]string{"UP": up, "PROC": extproctest.Start(t, proc)}
	const routes = `
frontendPolicies:
  http: {maxBufferSize: 65536}
policies:
- name: {name: gwstatus, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  phase: gateway
  policy:
    transformations:
      response:
        set: {":status": 'int(request.headers["x-gw-status"])'}
binds:
- port: 3000
  listeners:
  - routes:
    - name: status
      matches: [{path: {pathPrefix: /status}}]
      policies:
        transformations:
          response:
            set: {":status": 'int(request.headers["x-status"])'}
      backends: [{host: '${UP}'}]
    - name: body
      matches: [{path: {pathPrefix: /body}}]
      policies:
        transformations:
          response:
            body: 'string(response.body) + string(response.body)'
      backends: [{host: '${UP}'}]
    - name: proc
      matches: [{path: {pathPrefix: /proc}}]
      policies:
        extProc:
          host: '${PROC}'
          processingOptions: {requestBodyMode: none, responseBodyMode: none}
      backends: [{host: '${UP}'}]
`
	tests := []struct {
		desc, path, route, backend string
		headers                    []string
		status                     int
		// h1Only: Go's HTTP/2 client takes the Content-Length of a 304
		// (RFC 9110 8.6 lets it stay) for a body that went missing.
		h1Only bool
	}{
		{desc: "upstream's status", path: "/status/a", route: "status", backend: up, status: 200},
		{desc: "transformation :status 201", path: "/status/b", headers: []string{"X-Status", "201"}, route: "status", backend: up, status: 201},
		{desc: "transformation :status 304", path: "/status/c", headers: []string{"X-Status", "304"}, route: "status", backend: up, status: 304, h1Only: true},
		{desc: "transformation body too large", path: "/body/x?size=100000", route: "body", backend: up, status: 502},
		{desc: "transformed body", path: "/body/y?size=10", route: "body", backend: up, status: 200},
		{desc: "extProc immediate response", path: "/proc/x", route: "proc", backend: up, status: 403},
		{desc: "gateway-phase :status on no route", path: "/nowhere", headers: []string{"X-Gw-Status", "418"}, route: "unknown", backend: "unknown", status: 418},
	}
	for _, traced := range []bool{false, true} {
		t.Run(map[bool]string{false: "untraced", true: "traced"}[traced], func(t *testing.T) {
			cfg := routes
			recv := &otlpReceiver{}
			if traced {
				vars["COLLECTOR"] = upstream(t, recv)
				cfg = `
config:
  tracing: {otlpEndpoint: 'http://${COLLECTOR}', otlpProtocol: http, randomSampling: true}
` + cfg
			}
			tg := startGateway(t, cfg, vars)
			lines, spans := 0, 0
			for _, tc := range tests {
				clients := bothClients()
				if tc.h1Only {
					clients = clients[:1]
				}
				for _, c := range clients {
					req, _ := http.NewRequest("GET", tg.url(3000)+tc.path, nil)
					for i := 0; i+1 < len(tc.headers); i += 2 {
						req.Header.Set(tc.headers[i], tc.headers[i+1])
					}
					resp, body := doWith(t, c.client, req)
					if resp.StatusCode != tc.status {
						t.Fatalf("%s over %s: the client got %d %q, want %d", tc.desc, c.name, resp.StatusCode, body, tc.status)
					}
					lines++
					spans++
					f := lastAccessLine(t, tg.accessLogs(), lines)
					if f["status"] != int64(tc.status) || f["path"] != strings.Split(tc.path, "?")[0] {
						t.Errorf("%s over %s: access line says %v for %v, want %d", tc.desc, c.name, f["status"], f["path"], tc.status)
					}
				}
				labels := map[string]string{"route": tc.route, "backend": tc.backend, "method": "GET", "status": strconv.Itoa(tc.status)}
				if got := scrapeValue(t, tg.gw, "agentgateway_requests_total", labels); got != float64(len(clients)) {
					t.Errorf("%s: agentgateway_requests_total%v = %v, want %d", tc.desc, labels, got, len(clients))
				}
			}
			if !traced {
				return
			}
			var server []*tracepb.Span
			eventually(t, 10*time.Second, "the request spans", func() bool {
				server = server[:0]
				for _, s := range recv.all() {
					if s.GetKind() == tracepb.Span_SPAN_KIND_SERVER {
						server = append(server, s)
					}
				}
				return len(server) >= spans
			})
			for _, tc := range tests {
				path := strings.Split(tc.path, "?")[0]
				n, want := 0, 2
				if tc.h1Only {
					want = 1
				}
				for _, s := range server {
					if a := spanAttrs(s); a["url.path"] == path {
						n++
						if got, want := a["http.response.status_code"], "int_value:"+strconv.Itoa(tc.status); got != want {
							t.Errorf("%s: span says %s, want %s", tc.desc, got, want)
						}
					}
				}
				if n != want {
					t.Errorf("%s: %d spans for %s, want %d", tc.desc, n, path, want)
				}
			}
		})
	}
}
