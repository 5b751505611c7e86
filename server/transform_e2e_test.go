package server

import (
	"net/http"
	"testing"
)

// TestTransformationsE2E: request headers computed from the request and
// its API key reach the backend; response headers computed from the
// answer reach the client; a route's transformations replace its
// listener's.
func TestTransformationsE2E(t *testing.T) {
	up, seen := headerRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Upstream", "u1")
		w.WriteHeader(201)
	})
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - policies:
      transformations:
        request:
          set: {x-agentgateway-req-message: "'Hello from AgentGateway!'"}
    routes:
    - matches: [{path: {pathPrefix: /keyed}}]
      policies:
        apiKey:
          location: {header: {name: x-api-key}}
          keys: [{key: k1, metadata: {team: blue}}]
        transformations:
          request:
            set: {x-team: apiKey.team, x-path: request.path}
            remove: [x-drop]
          response:
            set: {x-was: 'string(response.code) + "/" + response.headers["x-upstream"]'}
      backends: [{host: '${UP}'}]
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	resp, _ := get(t, tg.url(3000)+"/keyed/x", "X-Api-Key", "k1", "X-Drop", "d")
	h := seen()
	if resp.StatusCode != 201 || h.Get("X-Team") != "blue" || h.Get("X-Path") != "/keyed/x" || h.Get("X-Drop") != "" {
		t.Errorf("%d; the backend saw x-team %q x-path %q x-drop %q", resp.StatusCode, h.Get("X-Team"), h.Get("X-Path"), h.Get("X-Drop"))
	}
	if h.Get("X-Agentgateway-Req-Message") != "" {
		t.Error("the listener's transformations ran beside the route's own")
	}
	if got := resp.Header.Get("X-Was"); got != "201/u1" {
		t.Errorf("x-was %q", got)
	}
	resp, _ = get(t, tg.url(3000)+"/other")
	h = seen()
	if resp.StatusCode != 201 || h.Get("X-Agentgateway-Req-Message") != "Hello from AgentGateway!" {
		t.Errorf("the listener's transformations did not apply: %q", h.Get("X-Agentgateway-Req-Message"))
	}
}
