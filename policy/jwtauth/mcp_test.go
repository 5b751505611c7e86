package jwtauth

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/relaygate/gateway/policy/policytest"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// fakeIdP is an identity provider on 127.0.0.1 serving a key set at both
// preset paths, RFC 8414 and OpenID metadata, and client registration.
type fakeIdP struct {
	url      string // issuer
	keyHits  atomic.Int64
	metaHits atomic.Int64
	mu       sync.Mutex
	regBody  string
	failMeta atomic.Bool
}

func newFakeIdP(t *testing.T, iss *jwttest.Issuer) *fakeIdP {
	idp := &fakeIdP{}
	mux := http.NewServeMux()
	keys := func(w http.ResponseWriter, _ *http.Request) {
		idp.keyHits.Add(1)
		w.Write(iss.JWKS()) //nolint:errcheck
	}
	meta := func(w http.ResponseWriter, _ *http.Request) {
		idp.metaHits.Add(1)
		if idp.failMeta.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck
			"issuer":                           idp.url,
			"authorization_endpoint":           idp.url + "/authorize",
			"token_endpoint":                   idp.url + "/token",
			"registration_endpoint":            idp.url + "/register",
			"code_challenge_methods_supported": []string{"S256"},
			"big_number":                       12345678901234567,
		})
	}
	mux.HandleFunc("/.well-known/jwks.json", keys)
	mux.HandleFunc("/protocol/openid-connect/certs", keys)
	mux.HandleFunc("/.well-known/oauth-authorization-server", meta)
	mux.HandleFunc("/.well-known/openid-configuration", meta)
	mux.HandleFunc("/clients-registrations/openid-connect", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		idp.mu.Lock()
		idp.regBody = r.Header.Get("Content-Type") + " " + string(b)
		idp.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"client_id":"from-idp"}`)) //nolint:errcheck
	})
	idp.url = jwttest.ServeHandler(t, mux)
	iss.Iss = idp.url
	return idp
}

func mcpConfig(issuer string, provider config.MCPProviderKind, meta map[string]any) *config.MCPAuthentication {
	cfg := &config.MCPAuthentication{Issuer: issuer, Audiences: []string{"mcp-aud"}, ResourceMetadata: meta}
	if provider != 0 {
		cfg.Provider = &config.MCPProvider{Kind: provider}
	}
	return cfg
}

func mustMCP(t *testing.T, cfg *config.MCPAuthentication) *MCPAuth {
	t.Helper()
	p, err := NewMCP(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return m
}

// TestMCPDerivedKeySet derives the key set URL from issuer and preset and
// authenticates with it.
func TestMCPDerivedKeySet(t *testing.T) {
	for _, prov := range []config.MCPProviderKind{0, config.MCPProviderAuth0, config.MCPProviderKeycloak} {
		iss := jwttest.NewIssuer(t, "ES256")
		idp := newFakeIdP(t, iss)
		p := mustMCP(t, mcpConfig(idp.url, prov, map[string]any{}))
		c := policytest.Ctx(policytest.NewRequest("POST", "/mcp", "Authorization", "Bearer "+iss.Sign(iss.Claims("u", "mcp-aud"))))
		if r := p.OnRequest(c); r != policy.Continue {
			t.Fatalf("provider %d: refused %d %s", prov, c.Fast.Response.StatusCode(), c.Fast.Response.Header.Peek("WWW-Authenticate"))
		}
		if c.Claims["sub"] != "u" || len(c.Fast.Request.Header.Peek("Authorization")) != 0 {
			t.Fatalf("claims %v, Authorization kept", c.Claims)
		}
		if idp.keyHits.Load() != 1 {
			t.Fatalf("provider %d: %d key fetches", prov, idp.keyHits.Load())
		}
	}
	if got := derivedJWKSURL("https://kc/realms/r", config.MCPProviderKeycloak); got != "https://kc/realms/r/protocol/openid-connect/certs" {
		t.Fatal(got)
	}
	if got := derivedJWKSURL("https://t.auth0.com", config.MCPProviderAuth0); got != "https://t.auth0.com/.well-known/jwks.json" {
		t.Fatal(got)
	}
}

// TestMCPUnauthenticated answers 401 with the resource metadata challenge.
func TestMCPUnauthenticated(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	inline := &config.JWKSource{Kind: config.JWKSInline, Inline: string(iss.JWKS())}
	cfg := mcpConfig(iss.Iss, 0, map[string]any{})
	cfg.JWKS = inline
	p := mustMCP(t, cfg)
	withResource := mcpConfig(iss.Iss, 0, map[string]any{"resource": "https://public.example/base/mcp?x=1"})
	withResource.JWKS = inline
	pr := mustMCP(t, withResource)
	expired := iss.Claims("u", "mcp-aud")
	expired["exp"] = 1000
	tests := []struct {
		name    string
		p       *MCPAuth
		uri     string
		headers []string
		www     string
		body    string
	}{
		{"no token", p, "/mcp", nil,
			`Bearer resource_metadata="http://gw.test/.well-known/oauth-protected-resource/mcp"`,
			`{"error":"unauthorized","error_description":"JWT token required"}`},
		{"forwarded https", p, "/a/mcp?q=1", []string{"X-Forwarded-Proto", "HTTPS, http"},
			`Bearer resource_metadata="https://gw.test/.well-known/oauth-protected-resource/a/mcp"`, ""},
		{"configured resource", pr, "/mcp", nil,
			`Bearer resource_metadata="https://public.example/.well-known/oauth-protected-resource/mcp"`, ""},
		{"quote in path", p, `/m"cp`, nil,
			`Bearer resource_metadata="http://gw.test/.well-known/oauth-protected-resource/m\"cp"`, ""},
		{"expired token", p, "/mcp", []string{"Authorization", "Bearer " + iss.Sign(expired)},
			`Bearer resource_metadata="http://gw.test/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="token expired"`,
			`{"error":"invalid_token","error_description":"token expired"}`},
		{"wrong audience", p, "/mcp", []string{"Authorization", "Bearer " + iss.Sign(iss.Claims("u", "other"))},
			`Bearer resource_metadata="http://gw.test/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="invalid audience"`, ""},
		{"look-alike well-known path needs a token", p, "/.well-known/oauth-protected-resource-evil", nil,
			`Bearer resource_metadata="http://gw.test/.well-known/oauth-protected-resource/.well-known/oauth-protected-resource-evil"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := policytest.Ctx(policytest.NewRequest("POST", tc.uri, tc.headers...))
			if tc.p.OnRequest(c) != policy.Done {
				t.Fatal("not refused")
			}
			resp := &c.Fast.Response
			if resp.StatusCode() != 401 || string(resp.Header.ContentType()) != "application/json" {
				t.Fatalf("status %d, content type %q", resp.StatusCode(), resp.Header.ContentType())
			}
			if got := string(resp.Header.Peek("WWW-Authenticate")); got != tc.www {
				t.Fatalf("WWW-Authenticate\n got %s\nwant %s", got, tc.www)
			}
			if tc.body != "" && string(resp.Body()) != tc.body {
				t.Fatalf("body %s, want %s", resp.Body(), tc.body)
			}
		})
	}
	// Claims validated by another policy (whose token is gone) are refused.
	c := policytest.Ctx(policytest.NewRequest("POST", "/mcp"))
	c.Claims = map[string]any{"sub": "x"}
	if p.OnRequest(c) != policy.Done || !strings.Contains(string(c.Fast.Response.Header.Peek("WWW-Authenticate")), "already validated") {
		t.Fatal("claims from another policy accepted")
	}
}

// TestMCPProtectedResource serves RFC 9728 metadata without a token.
func TestMCPProtectedResource(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	meta := map[string]any{
		"scopesSupported":        []any{"read:all"},
		"bearerMethodsSupported": []any{"header"},
		"resourcePolicyUri":      "https://docs.example/policy",
	}
	tests := []struct {
		name     string
		provider config.MCPProviderKind
		meta     map[string]any
		uri      string
		headers  []string
		want     map[string]any
	}{
		{"no provider", 0, meta, "/.well-known/oauth-protected-resource/mcp", nil, map[string]any{
			"resource": "http://gw.test/mcp", "authorization_servers": []any{iss.Iss},
			"mcp_protocol_version": MCPProtocolVersion, "resource_type": "mcp-server",
			"scopes_supported": []any{"read:all"}, "bearer_methods_supported": []any{"header"},
			"resource_policy_uri": "https://docs.example/policy",
		}},
		{"keycloak advertises the gateway", config.MCPProviderKeycloak, map[string]any{}, "/.well-known/oauth-protected-resource/kc/mcp", []string{"X-Forwarded-Proto", "https"}, map[string]any{
			"resource": "https://gw.test/kc/mcp", "authorization_servers": []any{"https://gw.test/kc/mcp"},
			"mcp_protocol_version": MCPProtocolVersion, "resource_type": "mcp-server",
		}},
		{"root", 0, map[string]any{"resource": "https://public.example/mcp"}, "/.well-known/oauth-protected-resource", nil, map[string]any{
			"resource": "https://public.example/mcp", "authorization_servers": []any{iss.Iss},
			"mcp_protocol_version": MCPProtocolVersion, "resource_type": "mcp-server",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := mcpConfig(iss.Iss, tc.provider, tc.meta)
			cfg.JWKS = &config.JWKSource{Kind: config.JWKSInline, Inline: string(iss.JWKS())}
			p := mustMCP(t, cfg)
			c := policytest.Ctx(policytest.NewRequest("GET", tc.uri, tc.headers...))
			if p.OnRequest(c) != policy.Done {
				t.Fatal("not answered")
			}
			resp := &c.Fast.Response
			if resp.StatusCode() != 200 || resp.Header.Peek("Access-Control-Allow-Origin")[0] != '*' {
				t.Fatalf("status %d, headers %s", resp.StatusCode(), resp.Header.String())
			}
			got := decodeJSON(t, resp.Body())
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tc.want)
			if string(gb) != string(wb) {
				t.Fatalf("document\n got %s\nwant %s", gb, wb)
			}
		})
	}
}

// TestMCPAuthorizationServer proxies and adapts the IdP's metadata.
func TestMCPAuthorizationServer(t *testing.T) {
	tests := []struct {
		name     string
		provider config.MCPProviderKind
		check    func(t *testing.T, idp string, doc map[string]any)
	}{
		{"no provider keeps the document", 0, func(t *testing.T, idp string, doc map[string]any) {
			if doc["issuer"] != idp || doc["authorization_endpoint"] != idp+"/authorize" || doc["registration_endpoint"] != idp+"/register" {
				t.Fatalf("document changed: %v", doc)
			}
		}},
		{"auth0 adds the audience", config.MCPProviderAuth0, func(t *testing.T, idp string, doc map[string]any) {
			if doc["authorization_endpoint"] != idp+"/authorize?audience=mcp-aud" {
				t.Fatalf("authorization_endpoint %v", doc["authorization_endpoint"])
			}
			if doc["issuer"] != "http://gw.test/mcp" {
				t.Fatalf("issuer %v", doc["issuer"])
			}
		}},
		{"keycloak proxies registration", config.MCPProviderKeycloak, func(t *testing.T, idp string, doc map[string]any) {
			if doc["registration_endpoint"] != "http://gw.test/.well-known/oauth-authorization-server/mcp/client-registration" {
				t.Fatalf("registration_endpoint %v", doc["registration_endpoint"])
			}
			if doc["issuer"] != "http://gw.test/mcp" || doc["token_endpoint"] != idp+"/token" {
				t.Fatalf("document %v", doc)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			iss := jwttest.NewIssuer(t, "ES256")
			idp := newFakeIdP(t, iss)
			p := mustMCP(t, mcpConfig(idp.url, tc.provider, map[string]any{}))
			for i := range 3 {
				c := policytest.Ctx(policytest.NewRequest("GET", "/.well-known/oauth-authorization-server/mcp"))
				if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 200 {
					t.Fatalf("request %d: %d %s", i, c.Fast.Response.StatusCode(), c.Fast.Response.Body())
				}
				doc := decodeJSON(t, c.Fast.Response.Body())
				tc.check(t, idp.url, doc)
				if !strings.Contains(string(c.Fast.Response.Body()), "12345678901234567") {
					t.Fatalf("number changed: %s", c.Fast.Response.Body())
				}
			}
			if n := idp.metaHits.Load(); n != 1 {
				t.Fatalf("%d metadata fetches, want 1 (cached)", n)
			}
		})
	}
	// A failing IdP answers 500 and is not retried at once.
	iss := jwttest.NewIssuer(t, "ES256")
	idp := newFakeIdP(t, iss)
	idp.failMeta.Store(true)
	p := mustMCP(t, mcpConfig(idp.url, config.MCPProviderKeycloak, map[string]any{}))
	for range 3 {
		c := policytest.Ctx(policytest.NewRequest("GET", "/.well-known/oauth-authorization-server/mcp"))
		if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 500 {
			t.Fatalf("status %d", c.Fast.Response.StatusCode())
		}
	}
	if n := idp.metaHits.Load(); n != 1 {
		t.Fatalf("%d fetches of a failing IdP, want 1", n)
	}
}

// TestMCPClientRegistration answers registration with the configured client
// or proxies it to the IdP.
func TestMCPClientRegistration(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	idp := newFakeIdP(t, iss)
	body := `{"redirect_uris":["http://localhost:3333/cb"],"client_name":"x"}`

	cfg := mcpConfig(idp.url, config.MCPProviderKeycloak, map[string]any{})
	id := "pre-registered"
	cfg.ClientID = &id
	p := mustMCP(t, cfg)
	fctx := policytest.NewRequest("POST", "/.well-known/oauth-authorization-server/mcp/client-registration", "Content-Type", "application/json")
	fctx.Request.SetBodyString(body)
	c := policytest.Ctx(fctx)
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 201 {
		t.Fatalf("status %d", c.Fast.Response.StatusCode())
	}
	doc := decodeJSON(t, c.Fast.Response.Body())
	if doc["client_id"] != id || doc["token_endpoint_auth_method"] != "none" || len(doc["redirect_uris"].([]any)) != 1 {
		t.Fatalf("registration %v", doc)
	}

	p = mustMCP(t, mcpConfig(idp.url, config.MCPProviderKeycloak, map[string]any{}))
	fctx = policytest.NewRequest("POST", "/.well-known/oauth-authorization-server/mcp/client-registration", "Content-Type", "application/json")
	fctx.Request.SetBodyString(body)
	c = policytest.Ctx(fctx)
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 201 {
		t.Fatalf("proxied: status %d %s", c.Fast.Response.StatusCode(), c.Fast.Response.Body())
	}
	if string(c.Fast.Response.Body()) != `{"client_id":"from-idp"}` || string(c.Fast.Response.Header.Peek("Access-Control-Allow-Origin")) != "*" {
		t.Fatalf("proxied answer %s %s", c.Fast.Response.Header.String(), c.Fast.Response.Body())
	}
	idp.mu.Lock()
	got := idp.regBody
	idp.mu.Unlock()
	if got != "application/json "+body {
		t.Fatalf("IdP got %q", got)
	}

	// Too large.
	fctx = policytest.NewRequest("POST", "/.well-known/oauth-authorization-server/mcp/client-registration")
	fctx.Request.SetBody(make([]byte, maxRegistrationBody+1))
	c = policytest.Ctx(fctx)
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 413 {
		t.Fatalf("large body: status %d", c.Fast.Response.StatusCode())
	}
}

// TestNewMCPErrors names the offending fields.
func TestNewMCPErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  *config.MCPAuthentication
		want string
	}{
		{"issuer not a URL and no jwks", mcpConfig("agentgateway.dev", 0, nil), "jwks: required: no key set URL can be derived"},
		{"bad mode", &config.MCPAuthentication{Issuer: "https://i", Mode: "x"}, "mode: must be one of"},
		{"bad location", &config.MCPAuthentication{Issuer: "https://i", AuthorizationLocation: &config.AuthLocation{}}, "authorizationLocation: exactly one of"},
		{"bad inline keys", &config.MCPAuthentication{Issuer: "https://i", JWKS: &config.JWKSource{Kind: config.JWKSInline, Inline: "{}"}}, "jwks: invalid key set"},
		{"credentials in the issuer", &config.MCPAuthentication{Issuer: "https://user:secret@idp.example/realms/r"}, "issuer: must not carry credentials"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewMCP(tc.cfg, Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want prefix %q", err, tc.want)
			}
		})
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"resource":               "resource",
		"scopesSupported":        "scopes_supported",
		"resourcePolicyUri":      "resource_policy_uri",
		"bearer_methods_support": "bearer_methods_support",
		"HTTPServer":             "http_server",
		"resourceURL":            "resource_url",
		"version2Name":           "version2_name",
		"a-b c":                  "a_b_c",
		"":                       "",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestASMetadataURL(t *testing.T) {
	for _, tc := range []struct {
		issuer string
		prov   config.MCPProviderKind
		want   string
	}{
		{"https://idp.example", 0, "https://idp.example/.well-known/oauth-authorization-server"},
		{"https://idp.example/", 0, "https://idp.example/.well-known/oauth-authorization-server"},
		{"https://idp.example/tenant/a", config.MCPProviderAuth0, "https://idp.example/.well-known/oauth-authorization-server/tenant/a"},
		{"https://kc.example/realms/mcp/", config.MCPProviderKeycloak, "https://kc.example/realms/mcp/.well-known/openid-configuration"},
		{"not a url", 0, "not a url/.well-known/oauth-authorization-server"},
	} {
		if got := asMetadataURL(tc.issuer, tc.prov); got != tc.want {
			t.Errorf("asMetadataURL(%q) = %q, want %q", tc.issuer, got, tc.want)
		}
	}
}

// TestFetchLogsRedactURLs: the WARN lines of failed fetches (key set,
// authorization server metadata, client registration) show the URLs, and
// the errors naming them, with the password and credential query
// parameters redacted.
func TestFetchLogsRedactURLs(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String() // nothing listens: every fetch fails to connect
	ln.Close()
	core, logs := observer.New(zap.WarnLevel)
	o := Options{Logger: zap.New(core), FetchTimeout: 2 * time.Second}

	jwt, err := New(&config.JWTAuth{Single: true, Providers: []config.JWTProvider{{Issuer: "i",
		JWKS: &config.JWKSource{Kind: config.JWKSURL, URL: "http://u:s3cret@" + down + "/jwks.json?access_token=s3cret2"}}}}, o)
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, jwt.Validator().providers[0].keys.remote)

	// (An issuer with a password is refused: TestNewMCPErrors.)
	cfg := mcpConfig("http://"+down+"/realm?token=s3cret2", config.MCPProviderKeycloak, map[string]any{})
	p, err := NewMCP(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	waitIdle(t, p.v.providers[0].keys.remote)
	c := policytest.Ctx(policytest.NewRequest("GET", "/.well-known/oauth-authorization-server/mcp"))
	if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 500 {
		t.Fatalf("metadata: %d", c.Fast.Response.StatusCode())
	}
	fctx := policytest.NewRequest("POST", "/.well-known/oauth-authorization-server/mcp/client-registration", "Content-Type", "application/json")
	fctx.Request.SetBodyString(`{}`)
	if p.OnRequest(policytest.Ctx(fctx)) != policy.Done || fctx.Response.StatusCode() != 500 {
		t.Fatalf("registration: %d", fctx.Response.StatusCode())
	}

	want := map[string]int{"jwtauth: cannot fetch key set": 2, "jwtauth: cannot fetch authorization server metadata": 1, "jwtauth: client registration failed": 1}
	got := map[string]int{}
	for _, e := range logs.All() {
		got[e.Message]++
		line := fmt.Sprint(e.ContextMap())
		if strings.Contains(line, "s3cret") || strings.Contains(line, "u:") && !strings.Contains(line, "u:xxxxx@") || !strings.Contains(line, "token=%3Credacted%3E") {
			t.Errorf("%s: %s", e.Message, line)
		}
		if errText, _ := e.ContextMap()["error"].(string); !strings.Contains(errText, down) {
			t.Errorf("%s: error %q does not name the URL", e.Message, errText)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("logged %v, want %v", got, want)
	}
}
