package server

import (
	"net/http"
	"testing"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/relaygate/gateway/policy/extproc/extproctest"
)

// TestGatewayPhasePolicies: top-level policies with phase gateway run
// before a route is selected, so what they change routes the request: a
// transformation's header picks a route by header match, an external
// processor's :path picks one by path. Refusals come before routing (a
// request for no route is refused 401, not 404), their response side
// decorates every answer, the route's own policies still run after, and a
// gateway-phase and a route-phase extProc each see the request once.
func TestGatewayPhasePolicies(t *testing.T) {
	upA := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a " + r.URL.Path + " " + r.Header.Get("X-Route-Stage")))
	}))
	upB := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("b " + r.URL.Path))
	}))
	gwProc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		if h := m.GetRequestHeaders(); h != nil && extproctest.Header(h.GetHeaders(), ":path") == "/old" {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{":path": "/new"}), nil)}
		}
		return extproctest.Passthrough(st, m)
	}}
	routeProc := &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
		return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{"x-route-stage": "seen"}), nil)}
	}}
	tg := startGateway(t, `
policies:
- name: {name: pick, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  phase: gateway
  policy:
    transformations:
      request:
        set: {x-pick: 'request.path.startsWith("/pick") ? "b" : "a"'}
      response:
        set: {x-gateway-phase: '"yes"'}
- name: {name: key, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default, listenerName: main}}
  phase: gateway
  policy:
    apiKey:
      keys: [{key: k1}]
- name: {name: proc, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  phase: gateway
  policy:
    extProc:
      host: '${GWPROC}'
      processingOptions: {requestBodyMode: none, responseBodyMode: none, responseHeaderMode: skip}
binds:
- port: 3000
  listeners:
  - name: main
    routes:
    - matches: [{headers: [{name: x-pick, value: {exact: b}}]}]
      backends: [{host: '${B}'}]
    - matches: [{path: {exact: /new}}]
      policies:
        extProc:
          host: '${ROUTEPROC}'
          processingOptions: {requestBodyMode: none, responseBodyMode: none, responseHeaderMode: skip}
      backends: [{host: '${A}'}]
    - matches: [{path: {pathPrefix: /a}}]
      backends: [{host: '${A}'}]
`, map[string]string{"A": upA, "B": upB, "GWPROC": extproctest.Start(t, gwProc), "ROUTEPROC": extproctest.Start(t, routeProc)})
	base := tg.url(3000)
	key := []string{"Authorization", "Bearer k1"}
	for _, tc := range []struct {
		desc, path string
		headers    []string
		wantStatus int
		wantBody   string
	}{
		{"a gateway transformation's header routes", "/pick/x", key, 200, "b /pick/x"},
		{"a gateway external processor's path routes; the route's processor runs after", "/old", key, 200, "a /new seen"},
		{"ordinary routing", "/a/1", key, 200, "a /a/1 "},
		{"refused before routing", "/nowhere", nil, 401, ""},
		{"no route once let in", "/nowhere", key, 404, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := get(t, base+tc.path, tc.headers...)
			if resp.StatusCode != tc.wantStatus || tc.wantBody != "" && body != tc.wantBody {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
			if resp.Header.Get("X-Gateway-Phase") != "yes" {
				t.Errorf("the gateway phase's response side did not run (headers %v)", resp.Header)
			}
		})
	}
	if n := len(routeProc.Streams()); n != 1 {
		t.Errorf("the route's processor saw %d requests, want 1", n)
	}
	if n := len(gwProc.Streams()); n != 4 {
		t.Errorf("the gateway's processor saw %d requests, want the 4 let in", n)
	}
}
