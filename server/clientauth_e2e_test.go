package server

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// TestClientAuthAndPrecedenceE2E drives basicAuth, apiKey and
// authorization attached at listener and route level through the real
// gateway, and checks the merge precedence of the spec: a route's own
// setting of a kind replaces the listener's, authorization rules of both
// levels apply, and kinds set at different levels all run.
func TestClientAuthAndPrecedenceE2E(t *testing.T) {
	up, seenHeaders := headerRecorder(t, nil)
	// Users made by `openssl passwd -apr1 -salt saltsalt secret1` ($ written
	// $$ against environment expansion) and a
	// SHA-1 of "secret5".
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - policies:
      apiKey:
        location: {header: {name: x-api-key}}
        keys:
        - {key: eng-key, metadata: {group: eng}}
        - {key: ops-key, metadata: {group: ops}}
      authorization:
        rules:
        - require: 'apiKey.group == "eng" || request.path.startsWith("/ops")'
      cors: {allowOrigins: ["https://listener.example"]}
    routes:
    - name: inherits
      matches: [{path: {pathPrefix: /inherits}}]
      backends: [{host: '${UP}'}]
    - name: own-keys
      matches: [{path: {pathPrefix: /own-keys}}]
      policies:
        apiKey:
          mode: optional
          location: {header: {name: x-api-key}}
          keys: [{key: route-key, metadata: {group: eng}}]
      backends: [{host: '${UP}'}]
    - name: more-rules
      matches: [{path: {pathPrefix: /ops}}]
      policies:
        authorization:
          rules: ['apiKey.group == "ops"']
      backends: [{host: '${UP}'}]
    - name: basic
      matches: [{path: {pathPrefix: /basic}}]
      policies:
        basicAuth:
          realm: staff
          htpasswd: |
            alice:$$apr1$$saltsalt$$5MCuaE4VxZK/CDugVarlJ.
            bob:{SHA}CBdexjHDZ4kfVcYV+41xChABNis=
        authorization:
          rules: ['basicAuth.username == "alice"']
        cors: {allowOrigins: ["https://route.example"]}
      backends: [{host: '${UP}'}]
    - name: passthrough
      matches: [{path: {pathPrefix: /passthrough}}]
      policies:
        backendAuth: {passthrough: {}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	tests := []struct {
		desc       string
		path       string
		headers    []string
		wantStatus int
		wantBody   string // prefix
	}{
		{"listener apiKey applies to a route without its own", "/inherits", nil, 401, "authentication failure: no API key"},
		{"listener key accepted", "/inherits", []string{"X-Api-Key", "eng-key"}, 200, "ok"},
		{"wrong key", "/inherits", []string{"X-Api-Key", "eng-ke"}, 401, "authentication failure: invalid API key"},
		{"listener authorization: ops is not eng", "/inherits", []string{"X-Api-Key", "ops-key"}, 403, ""},
		{"route apiKey replaces the listener's: its key", "/own-keys", []string{"X-Api-Key", "route-key"}, 200, "ok"},
		{"route apiKey replaces the listener's: not the listener's keys", "/own-keys", []string{"X-Api-Key", "eng-key"}, 401, "authentication failure: invalid API key"},
		{"route apiKey replaces the listener's: its mode", "/own-keys/x", nil, 403, ""},
		{"rules of both levels: both hold", "/ops", []string{"X-Api-Key", "ops-key"}, 200, "ok"},
		{"rules of both levels: the route's fails", "/ops", []string{"X-Api-Key", "eng-key"}, 403, ""},
		{"kinds of both levels run: no basic credentials", "/basic", []string{"X-Api-Key", "eng-key"}, 401, "authentication failure: no credentials"},
		{"kinds of both levels run: no key", "/basic", []string{"Authorization", basic("alice", "secret1")}, 401, "authentication failure: no API key"},
		{"basic and key", "/basic", []string{"X-Api-Key", "eng-key", "Authorization", basic("alice", "secret1")}, 200, "ok"},
		{"basic wrong password", "/basic", []string{"X-Api-Key", "eng-key", "Authorization", basic("alice", "secret5")}, 401, "authentication failure: invalid credentials"},
		{"basicAuth.username in a rule", "/basic", []string{"X-Api-Key", "eng-key", "Authorization", basic("bob", "secret5")}, 403, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := get(t, tg.url(3000)+tc.path, tc.headers...)
			if resp.StatusCode != tc.wantStatus || !strings.HasPrefix(body, tc.wantBody) {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
		})
	}

	t.Run("basic refusal names the realm", func(t *testing.T) {
		resp, _ := get(t, tg.url(3000)+"/basic", "X-Api-Key", "eng-key")
		if got := resp.Header.Get("WWW-Authenticate"); got != `Basic realm="staff", charset="UTF-8"` {
			t.Errorf("WWW-Authenticate %q", got)
		}
	})
	t.Run("the key is removed before forwarding, basic credentials are not", func(t *testing.T) {
		resp, _ := get(t, tg.url(3000)+"/basic", "X-Api-Key", "eng-key", "Authorization", basic("alice", "secret1"))
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		seen := seenHeaders()
		if seen.Get("X-Api-Key") != "" || seen.Get("Authorization") != basic("alice", "secret1") {
			t.Errorf("upstream saw x-api-key %q, authorization %q", seen.Get("X-Api-Key"), seen.Get("Authorization"))
		}
	})
	t.Run("backendAuth passthrough puts the key back", func(t *testing.T) {
		resp, _ := get(t, tg.url(3000)+"/passthrough", "X-Api-Key", "eng-key")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := seenHeaders().Get("Authorization"); got != "Bearer eng-key" {
			t.Errorf("upstream saw authorization %q", got)
		}
	})
	t.Run("route cors replaces the listener's", func(t *testing.T) {
		for _, c := range []struct{ path, origin, want string }{
			{"/inherits", "https://listener.example", "https://listener.example"},
			{"/basic", "https://listener.example", ""},
			{"/basic", "https://route.example", "https://route.example"},
		} {
			req, _ := http.NewRequest(http.MethodOptions, tg.url(3000)+c.path, nil)
			req.Header.Set("Origin", c.origin)
			req.Header.Set("Access-Control-Request-Method", "GET")
			resp, _ := do(t, req)
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != c.want {
				t.Errorf("%s from %s: allow-origin %q, want %q", c.path, c.origin, got, c.want)
			}
		}
	})
}
