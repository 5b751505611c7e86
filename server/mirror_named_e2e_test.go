package server

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMirrorToNamedBackendTakesItsPolicies: a copy mirrored to a named
// backend goes as that backend's own requests do, with its
// requestHeaderModifier (it went without it: the backend's policies but
// backendTLS were left out in silence); one whose backendAuth or
// requestRedirect a copy cannot take is a config error naming them.
func TestMirrorToNamedBackendTakesItsPolicies(t *testing.T) {
	seen := make(chan http.Header, 4)
	mirrorUp := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen <- r.Header.Clone() }))
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	tg := startGateway(t, `
backends:
- name: shadow
  host: ${MIRROR}
  policies:
    requestHeaderModifier: {set: {x-shadow: "1"}, remove: [x-private]}
    http: {requestTimeout: 5s}
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {requestMirror: {backend: {backend: shadow}, percentage: 1.0}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "MIRROR": mirrorUp})
	if resp, body := get(t, tg.url(3000)+"/a", "X-Private", "p"); resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	select {
	case h := <-seen:
		if h.Get("X-Shadow") != "1" || h.Get("X-Private") != "" {
			t.Errorf("the copy's headers: x-shadow %q, x-private %q; want 1 and none", h.Get("X-Shadow"), h.Get("X-Private"))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no copy reached the mirror")
	}

	for _, tc := range []struct{ policy, want string }{
		{`backendAuth: {key: secret}`, `requestMirror.backend.backend: mirroring to backend "shadow", whose backendAuth (backends[0].policies.backendAuth) is not applied`},
		{`requestRedirect: {scheme: https}`, `whose requestRedirect (backends[0].policies.requestRedirect) would answer the copy`},
	} {
		err := Validate(parseConfig(t, `
backends:
- {name: shadow, host: 127.0.0.1:1, policies: {`+tc.policy+`}}
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {requestMirror: {backend: {backend: shadow}, percentage: 1.0}}
      backends: [{host: 127.0.0.1:2}]
`, nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want it to contain %q", tc.policy, err, tc.want)
		}
	}
}
