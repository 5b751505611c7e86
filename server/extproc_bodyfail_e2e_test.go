package server

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestExtProcBodyPhaseFailure: a service that fails while the request's
// body is being processed (full-duplex, the default) fails the request as
// the service's failure, the same as one failing on the headers: 500
// `external processing failed`, the access line's upstream_error naming
// extProc, never 502 `bad upstream response` blaming the upstream. With
// failOpen, a body none of which went upstream yet (the pump keeps what it
// sent, up to maxBufferSize) goes on whole and unprocessed, as Envoy's
// failure_mode_allow does; once processed bytes went upstream it cannot,
// and fails the same in both modes. Over HTTP/1.1 and HTTP/2, each going
// upstream in its own protocol.
func TestExtProcBodyPhaseFailure(t *testing.T) {
	// whole: the bodies the upstream got whole, by request (X-Id)
	var mu sync.Mutex
	whole := map[string]string{}
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		mu.Lock()
		whole[r.Header.Get("X-Id")] = string(b)
		mu.Unlock()
		_, _ = w.Write(append([]byte("echo:"), b...))
	}))
	services := map[string]func(*extproctest.Stream, *procv3.ProcessingRequest) []*procv3.ProcessingResponse{
		// answers the request's headers, then closes the stream
		"headersThenEnd": func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
				return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, nil), extproctest.End}
			}
			return extproctest.Passthrough(st, m)
		},
		// answers the request's headers twice
		"headersTwice": func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
				return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, nil), extproctest.Reply(st, m, nil, nil)}
			}
			return extproctest.Passthrough(st, m)
		},
		// passes the body on without ending it, then closes the stream
		"chunkThenEnd": func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			if r, ok := m.Request.(*procv3.ProcessingRequest_RequestBody); ok {
				return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, extproctest.Chunk(r.RequestBody.GetBody(), false)), extproctest.End}
			}
			return extproctest.Passthrough(st, m)
		},
	}
	vars := map[string]string{"UP": up}
	cfg := "binds:\n- port: 3000\n  listeners:\n  - routes:\n"
	for name, answer := range services {
		vars[name] = extproctest.Start(t, &extproctest.Server{Answer: answer})
		for _, mode := range []string{"failClosed", "failOpen"} {
			cfg += "    - matches: [{path: {pathPrefix: /" + mode + "/" + name + "}}]\n" +
				"      policies:\n        extProc: {host: '${" + name + "}', failureMode: " + mode + "}\n" +
				"      backends: [{host: '${UP}'}]\n"
		}
	}
	tg := startGateway(t, cfg, vars)
	const payload = "0123456789"
	tests := []struct {
		service, mode string
		open          bool // the body goes on unprocessed
		bodyPhase     bool // the failure always comes in the body phase
	}{
		{"headersThenEnd", "failClosed", false, true},
		{"headersThenEnd", "failOpen", true, true},
		{"headersTwice", "failClosed", false, false},
		{"headersTwice", "failOpen", true, false},
		{"chunkThenEnd", "failClosed", false, true},
		{"chunkThenEnd", "failOpen", false, true}, // bytes went upstream
	}
	for _, c := range bothClients() {
		for _, tc := range tests {
			t.Run(c.name+"/"+tc.service+"/"+tc.mode, func(t *testing.T) {
				before := len(tg.accessLogs().FilterMessage("request").All())
				req, err := http.NewRequest(http.MethodPost, tg.url(3000)+"/"+tc.mode+"/"+tc.service, strings.NewReader(payload))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Id", t.Name())
				resp, body := doWith(t, c.client, req)
				mu.Lock()
				got, reached := whole[t.Name()]
				mu.Unlock()
				if tc.open {
					if resp.StatusCode != 200 || body != "echo:"+payload || got != payload {
						t.Fatalf("client got %d %q (upstream got %q), want the unprocessed body echoed", resp.StatusCode, body, got)
					}
					return
				}
				if resp.StatusCode != 500 || body != "external processing failed\n" {
					t.Fatalf("client got %d %q, want 500 external processing failed", resp.StatusCode, body)
				}
				if reached {
					t.Fatalf("the upstream got a whole request: %q", got)
				}
				if !tc.bodyPhase {
					return
				}
				var line map[string]any
				eventually(t, 5*time.Second, "the access line", func() bool {
					lines := tg.accessLogs().FilterMessage("request").All()
					if len(lines) > before {
						line = lines[len(lines)-1].ContextMap()
						return true
					}
					return false
				})
				if e, _ := line["upstream_error"].(string); !strings.HasPrefix(e, "extProc: ") {
					t.Errorf("upstream_error %q, want extProc's failure", e)
				}
			})
		}
	}
}

// TestExtProcBodyFailureReadByAnotherPolicy: a processed body that fails
// (a gateway-phase extProc's service closing its stream) fails the
// policies after it that read it as the service's failure too, not as
// the client's broken body (400) nor as a failure of their own: a route's
// extProc in buffered and in full-duplex mode, and transformations
// reading request.body, all answer 500 `external processing failed`.
func TestExtProcBodyFailureReadByAnotherPolicy(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	}))
	failing := extproctest.Start(t, &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_RequestHeaders); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, nil), extproctest.End}
		}
		return extproctest.Passthrough(st, m)
	}})
	passing := extproctest.Start(t, &extproctest.Server{})
	tg := startGateway(t, `
policies:
- name: {name: proc, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  phase: gateway
  policy:
    extProc: {host: '${FAILING}', processingOptions: {responseHeaderMode: skip, responseBodyMode: none}}
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /buffered}}]
      policies:
        extProc: {host: '${PASSING}', processingOptions: {requestBodyMode: buffered}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /duplex}}]
      policies:
        extProc: {host: '${PASSING}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /transform}}]
      policies:
        transformations: {request: {set: {x-length: 'string(size(request.body))'}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "FAILING": failing, "PASSING": passing})
	for _, path := range []string{"/buffered", "/duplex", "/transform"} {
		req, err := http.NewRequest(http.MethodPost, tg.url(3000)+path, strings.NewReader("0123456789"))
		if err != nil {
			t.Fatal(err)
		}
		resp, body := do(t, req)
		if resp.StatusCode != 500 || body != "external processing failed\n" {
			t.Errorf("%s: client got %d %q, want 500 external processing failed", path, resp.StatusCode, body)
		}
	}
}

// TestExtProcResponseBodyFailOpen: a service failing on the response's
// body before any of it went on (answering the response headers, then
// closing its stream) leaves the body to go on whole and unprocessed under
// failOpen, as on the request's side.
func TestExtProcResponseBodyFailOpen(t *testing.T) {
	// (HTTP/2 requests go upstream in HTTP/2.)
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "the upstream's answer")
	}))
	proc := extproctest.Start(t, &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if _, ok := m.Request.(*procv3.ProcessingRequest_ResponseHeaders); ok {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, nil, nil), extproctest.End}
		}
		return extproctest.Passthrough(st, m)
	}})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extProc: {host: '${PROC}', failureMode: failOpen}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "PROC": proc})
	for _, c := range bothClients() {
		req, err := http.NewRequest(http.MethodGet, tg.url(3000)+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := doWith(t, c.client, req)
		if resp.StatusCode != 200 || body != "the upstream's answer" {
			t.Errorf("%s: client got %d %q, want the upstream's answer unprocessed", c.name, resp.StatusCode, body)
		}
	}
}
