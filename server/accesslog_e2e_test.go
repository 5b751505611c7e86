package server

import (
	"net/http"
	"testing"
)

// TestAccessLogPolicyE2E: frontendPolicies.accessLog leaves out the
// requests its filter refuses, adds its fields, computed from the request,
// its credentials and its response (one named like a built-in field
// replaces it), and removes the built-in fields it names.
func TestAccessLogPolicyE2E(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Served-By", "up-1")
		w.Write([]byte("ok"))
	}))
	tg := startGateway(t, `
frontendPolicies:
  accessLog:
    filter: '!request.path.startsWith("/healthz")'
    add:
      client.team: apiKey.team
      upstream.server: response.headers["x-served-by"]
      request.query: request.query
      missing: jwt.sub
      route: '"replaced"'
    remove: [src, bytes_in]
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        apiKey:
          mode: optional
          location: {header: {name: x-api-key}}
          keys: [{key: k1, metadata: {team: blue}}]
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	get(t, tg.url(3000)+"/healthz")
	get(t, tg.url(3000)+"/a?x=1", "X-Api-Key", "k1")
	line := lastAccessLine(t, tg.accessLogs(), 1) // the health check is not logged
	for k, want := range map[string]string{
		"path": "/a", "client.team": "blue", "upstream.server": "up-1", "request.query": `{"x":"1"}`,
		"route": "replaced", // an added field named like a built-in one replaces it
	} {
		if got, _ := line[k].(string); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if _, ok := line["missing"]; ok {
		t.Error("a field whose expression failed is in the line")
	}
	for _, removed := range []string{"src", "bytes_in"} {
		if _, ok := line[removed]; ok {
			t.Errorf("removed field %s is in the line", removed)
		}
	}
	if _, ok := line["bytes_out"]; !ok {
		t.Error("a field not removed is missing")
	}
}
