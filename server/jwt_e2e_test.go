package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// jwtSeen is what the upstream received.
type jwtSeen struct {
	Target        string
	Authorization string
	XToken        string
	Cookie        string
}

// jwtRecordingUpstream answers 200 "ok" and records each request it gets.
func jwtRecordingUpstream(t *testing.T) (string, func() jwtSeen) {
	var mu sync.Mutex
	var last jwtSeen
	addr := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		last = jwtSeen{Target: r.RequestURI, Authorization: r.Header.Get("Authorization"), XToken: r.Header.Get("X-Token"), Cookie: r.Header.Get("Cookie")}
		mu.Unlock()
		w.Write([]byte("ok")) //nolint:errcheck
	}))
	return addr, func() jwtSeen {
		mu.Lock()
		defer mu.Unlock()
		s := last
		last = jwtSeen{}
		return s
	}
}

// TestJWTAuthE2E runs jwtAuth through the gateway: modes, stripping,
// passthrough, locations, CORS before authentication and URL key sets.
func TestJWTAuthE2E(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	remote := jwttest.NewIssuer(t, "ES256")
	remote.Iss = "https://remote.test"
	keys := jwttest.ServeJWKS(t, remote.JWKS())
	up, seen := jwtRecordingUpstream(t)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /strict}}]
      policies:
        cors: {allowOrigins: ['https://app.test'], allowHeaders: [authorization]}
        jwtAuth: {issuer: '${ISS}', audiences: [gateway.test], jwks: '${JWKS}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /optional}}]
      policies:
        jwtAuth: {mode: optional, issuer: '${ISS}', jwks: {file: '${JWKS_FILE}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /permissive}}]
      policies:
        jwtAuth: {mode: permissive, issuer: '${ISS}', jwks: {file: '${JWKS_FILE}'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /passthrough}}]
      policies:
        jwtAuth: {issuer: '${ISS}', jwks: {file: '${JWKS_FILE}'}}
        backendAuth: {passthrough: {}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /backend-passthrough}}]
      policies:
        jwtAuth: {issuer: '${ISS}', jwks: {file: '${JWKS_FILE}'}, location: {queryParameter: {name: access_token}}}
      backends:
      - host: '${UP}'
        policies:
          backendAuth: {passthrough: {location: {header: {name: X-Token}}}}
    - matches: [{path: {pathPrefix: /cookie}}]
      policies:
        jwtAuth: {issuer: '${ISS}', jwks: {file: '${JWKS_FILE}'}, location: {cookie: {name: session}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /remote}}]
      policies:
        jwtAuth:
          providers:
          - {issuer: '${ISS}', jwks: {file: '${JWKS_FILE}'}}
          - {issuer: 'https://remote.test', jwks: {url: '${KEYS_URL}'}}
      backends: [{host: '${UP}'}]
`, map[string]string{
		"UP": up, "ISS": iss.Iss, "JWKS": string(iss.JWKS()), "JWKS_FILE": iss.WriteJWKSFile(t), "KEYS_URL": keys.URL,
	})
	base := tg.url(3000)
	valid := iss.Sign(iss.Claims("alice"))
	expiredClaims := iss.Claims("alice")
	expiredClaims["exp"] = 1000
	expired := iss.Sign(expiredClaims)
	bearer := func(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

	tests := []struct {
		name     string
		path     string
		headers  []string
		status   int
		www      string             // WWW-Authenticate, when refused
		upstream func(jwtSeen) bool // what the upstream saw, when forwarded
	}{
		{"strict without token", "/strict", nil, 401, `Bearer realm="gateway"`, nil},
		{"strict expired", "/strict", bearer(expired), 401, `Bearer realm="gateway", error="invalid_token", error_description="token expired"`, nil},
		{"strict wrong audience", "/strict", bearer(iss.Sign(iss.Claims("alice", "other"))), 401, `Bearer realm="gateway", error="invalid_token", error_description="invalid audience"`, nil},
		{"strict alg none", "/strict", bearer(jwttest.Unsigned(iss.Kid, iss.Claims("alice"))), 401, `Bearer realm="gateway", error="invalid_token", error_description="unsupported signing algorithm"`, nil},
		{"strict valid is stripped", "/strict", bearer(valid), 200, "", func(s jwtSeen) bool { return s.Authorization == "" && s.Target == "/strict" }},
		{"optional without token", "/optional", nil, 200, "", func(s jwtSeen) bool { return s.Authorization == "" }},
		{"optional keeps other schemes", "/optional", []string{"Authorization", "Basic dTpw"}, 200, "", func(s jwtSeen) bool { return s.Authorization == "Basic dTpw" }},
		{"optional expired", "/optional", bearer(expired), 401, `Bearer realm="gateway", error="invalid_token", error_description="token expired"`, nil},
		{"optional valid", "/optional", bearer(valid), 200, "", func(s jwtSeen) bool { return s.Authorization == "" }},
		{"permissive expired is forwarded untouched", "/permissive", bearer(expired), 200, "", func(s jwtSeen) bool { return s.Authorization == "Bearer "+expired }},
		{"permissive garbage", "/permissive", bearer("garbage"), 200, "", func(s jwtSeen) bool { return s.Authorization == "Bearer garbage" }},
		{"permissive valid is stripped", "/permissive", bearer(valid), 200, "", func(s jwtSeen) bool { return s.Authorization == "" }},
		{"passthrough re-adds the token", "/passthrough", []string{"Authorization", "bearer " + valid}, 200, "", func(s jwtSeen) bool { return s.Authorization == "Bearer "+valid }},
		{"backend passthrough at its location", "/backend-passthrough/x?a=1&access_token=" + valid + "&b=2", nil, 200, "", func(s jwtSeen) bool {
			return s.Target == "/backend-passthrough/x?a=1&b=2" && s.XToken == valid && s.Authorization == ""
		}},
		{"query token missing", "/backend-passthrough/x?a=1", nil, 401, `Bearer realm="gateway"`, nil},
		{"cookie stripped", "/cookie", []string{"Cookie", "a=1; session=" + valid}, 200, "", func(s jwtSeen) bool { return s.Cookie == "a=1" }},
		{"remote key set", "/remote", bearer(remote.Sign(remote.Claims("bob"))), 200, "", func(s jwtSeen) bool { return s.Authorization == "" }},
		{"file provider of several", "/remote", bearer(valid), 200, "", nil},
		{"unknown issuer", "/remote", bearer(jwttest.NewIssuer(t, "ES256").Sign(jwt3rd())), 401, `Bearer realm="gateway", error="invalid_token", error_description="untrusted issuer"`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := get(t, base+tc.path, tc.headers...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tc.status, body)
			}
			s := seen()
			if tc.status == 401 {
				if got := resp.Header.Get("WWW-Authenticate"); got != tc.www {
					t.Fatalf("WWW-Authenticate %q, want %q", got, tc.www)
				}
				if s.Target != "" {
					t.Fatal("refused request reached the upstream")
				}
				return
			}
			if body != "ok" {
				t.Fatalf("body %q", body)
			}
			if tc.upstream != nil && !tc.upstream(s) {
				t.Fatalf("upstream saw %+v", s)
			}
		})
	}

	t.Run("CORS preflight is answered before authentication", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodOptions, base+"/strict", nil)
		req.Header.Set("Origin", "https://app.test")
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization")
		resp, _ := do(t, req)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.test" || resp.Header.Get("Access-Control-Allow-Headers") != "authorization" {
			t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
		}
		// The refusal of the real request is readable by the page.
		resp, _ = get(t, base+"/strict", "Origin", "https://app.test")
		if resp.StatusCode != 401 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.test" {
			t.Fatalf("401: %d %v", resp.StatusCode, resp.Header)
		}
	})
	if keys.Hits() != 1 {
		t.Fatalf("key server hit %d times, want 1", keys.Hits())
	}
}

func jwt3rd() map[string]any {
	return map[string]any{"iss": "https://third.test", "exp": 4102444800}
}

// TestMCPAuthenticationE2E serves the protected resource metadata and
// challenges unauthenticated MCP requests through the gateway.
func TestMCPAuthenticationE2E(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	keys := jwttest.ServeJWKS(t, iss.JWKS())
	up, seen := jwtRecordingUpstream(t)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches:
      - path: {exact: /mcp}
      - path: {exact: /.well-known/oauth-protected-resource/mcp}
      policies:
        cors: {allowOrigins: ['*'], allowHeaders: [mcp-protocol-version, content-type, authorization]}
        mcpAuthentication:
          issuer: '${ISS}'
          audiences: [mcp-aud]
          jwks: {url: '${KEYS_URL}'}
          resourceMetadata:
            scopesSupported: [read:all]
            bearerMethodsSupported: [header]
        backendAuth: {passthrough: {}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "ISS": iss.Iss, "KEYS_URL": keys.URL})
	base := tg.url(3000)
	host := tg.addr(3000)

	t.Run("metadata", func(t *testing.T) {
		resp, body := get(t, base+"/.well-known/oauth-protected-resource/mcp")
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatal(err)
		}
		if doc["resource"] != "http://"+host+"/mcp" || doc["authorization_servers"].([]any)[0] != iss.Iss ||
			doc["scopes_supported"].([]any)[0] != "read:all" || doc["resource_type"] != "mcp-server" {
			t.Fatalf("document %v", doc)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") == "" {
			t.Fatal("no CORS header on the metadata")
		}
	})
	t.Run("preflight", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodOptions, base+"/mcp", nil)
		req.Header.Set("Origin", "http://localhost:6274")
		req.Header.Set("Access-Control-Request-Method", "POST")
		resp, _ := do(t, req)
		if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:6274" {
			t.Fatalf("preflight %d %v", resp.StatusCode, resp.Header)
		}
	})
	t.Run("challenge", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}`))
		req.Header.Set("Origin", "http://localhost:6274")
		resp, body := do(t, req)
		want := `Bearer resource_metadata="http://` + host + `/.well-known/oauth-protected-resource/mcp"`
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != want {
			t.Fatalf("%d %q, want %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
		}
		if body != `{"error":"unauthorized","error_description":"JWT token required"}` || resp.Header.Get("Access-Control-Allow-Origin") == "" {
			t.Fatalf("body %s headers %v", body, resp.Header)
		}
		if seen().Target != "" {
			t.Fatal("refused request reached the upstream")
		}
	})
	t.Run("authenticated with passthrough", func(t *testing.T) {
		tok := iss.Sign(iss.Claims("alice", "mcp-aud"))
		resp, body := get(t, base+"/mcp", "Authorization", "Bearer "+tok)
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if s := seen(); s.Authorization != "Bearer "+tok {
			t.Fatalf("upstream saw %+v", s)
		}
	})
}

// TestJWTAuthConfigErrorsE2E: compile errors name the field.
func TestJWTAuthConfigErrorsE2E(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	tests := []struct {
		name, yaml, want string
	}{
		{"missing key file", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        jwtAuth: {issuer: i, jwks: {file: /nonexistent/jwks.json}}
      backends: [{host: '127.0.0.1:1'}]
`, "binds[0].listeners[0].routes[0].policies.jwtAuth.jwks.file: cannot load key set"},
		{"bad inline key set", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        jwtAuth: {providers: [{issuer: i, jwks: '{"keys":[{"kty":"oct","kid":"k","k":"AA"}]}'}]}
      backends: [{host: '127.0.0.1:1'}]
`, "binds[0].listeners[0].routes[0].policies.jwtAuth.providers[0].jwks: invalid key set: keys[0]: symmetric (oct) keys are not accepted"},
		{"both authentications", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        jwtAuth: {issuer: i, jwks: '` + string(iss.JWKS()) + `'}
        mcpAuthentication: {issuer: 'https://i', audiences: [], resourceMetadata: {}, jwks: '` + string(iss.JWKS()) + `'}
      backends: [{host: '127.0.0.1:1'}]
`, "binds[0].listeners[0].routes[0].policies.mcpAuthentication: cannot be combined with jwtAuth"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := config.Parse([]byte(tc.yaml), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
