package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

// routePolicies wraps a policies block (indented by 8) into a file.
func routePolicies(policies string) string {
	return "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n" + policies
}

const policiesPath = "binds[0].listeners[0].routes[0].policies."

// TestAuthTypesDecodable checks the cfg tags of the plain types the custom
// decoders use (TestTypesDecodable stops at types with DecodeNode).
func TestAuthTypesDecodable(t *testing.T) {
	for _, v := range []any{&jwtAuthFile{}, &jwksObject{}, &JWTProvider{}, &AuthLocation{}, &BackendAuthPassthrough{}, &MCPAuthentication{}} {
		if err := decode.CheckType(v); err != nil {
			t.Errorf("%T: %v", v, err)
		}
	}
}

// TestAuthDecode lists valid forms and errors (each naming its field path)
// of jwtAuth, mcpAuthentication and backendAuth.
func TestAuthDecode(t *testing.T) {
	long := strings.Repeat("a", 65537)
	var many strings.Builder
	for range 65 {
		many.WriteString("          - {issuer: i, jwks: {file: f}}\n")
	}
	tests := []struct {
		desc    string
		yaml    string
		wantErr string
	}{
		{"single issuer", routePolicies("        jwtAuth: {issuer: https://i, audiences: [a], jwks: {file: k.json}}\n"), ""},
		{"providers", routePolicies("        jwtAuth:\n          mode: optional\n          location: {queryParameter: {name: t}}\n          providers:\n          - {issuer: a, jwks: {url: 'https://a/jwks'}}\n          - {issuer: b, jwks: '{\"keys\":[]}', jwtValidationOptions: {requiredClaims: []}}\n"), ""},
		{"url with cache", routePolicies("        jwtAuth: {issuer: i, jwks: {url: 'http://127.0.0.1:1/k', cacheDuration: 30s}}\n"), ""},
		{"empty", routePolicies("        jwtAuth: {}\n"), policiesPath + "jwtAuth.issuer: required (or use providers)"},
		{"no jwks", routePolicies("        jwtAuth: {issuer: i}\n"), policiesPath + "jwtAuth.jwks: required"},
		{"empty issuer", routePolicies("        jwtAuth: {issuer: '', jwks: {file: f}}\n"), policiesPath + "jwtAuth.issuer: must not be empty"},
		{"both forms", routePolicies("        jwtAuth: {issuer: i, providers: [{issuer: i, jwks: {file: f}}]}\n"), policiesPath + "jwtAuth.issuer: not allowed together with providers"},
		{"no providers", routePolicies("        jwtAuth: {providers: []}\n"), policiesPath + "jwtAuth.providers: must have at least 1 item"},
		{"too many providers", routePolicies("        jwtAuth:\n          providers:\n" + many.String()), policiesPath + "jwtAuth.providers: must have at most 64 items"},
		{"provider without jwks", routePolicies("        jwtAuth: {providers: [{issuer: i}]}\n"), policiesPath + "jwtAuth.providers[0].jwks: required"},
		{"duplicate issuer", routePolicies("        jwtAuth: {providers: [{issuer: i, jwks: {file: f}}, {issuer: i, jwks: {file: g}}]}\n"), policiesPath + `jwtAuth.providers[1].issuer: issuer "i" is already used by providers[0]`},
		{"bad mode", routePolicies("        jwtAuth: {mode: Strict, issuer: i, jwks: {file: f}}\n"), policiesPath + "jwtAuth.mode: must be one of: strict, optional, permissive"},
		{"unknown field", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, audience: [a]}\n"), policiesPath + `jwtAuth.audience: unknown field "audience" (did you mean "audiences"?)`},
		{"inline too short", routePolicies("        jwtAuth: {issuer: i, jwks: '{'}\n"), policiesPath + "jwtAuth.jwks: an inline key set must be 2 to 65536 characters, got 1"},
		{"inline too long", routePolicies("        jwtAuth: {issuer: i, jwks: " + long + "}\n"), "an inline key set must be 2 to 65536 characters, got 65537"},
		{"jwks number", routePolicies("        jwtAuth: {issuer: i, jwks: 5}\n"), policiesPath + "jwtAuth.jwks: expected a key set as a string, {file: path} or {url: URL}"},
		{"jwks file and url", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f, url: 'https://x'}}\n"), policiesPath + "jwtAuth.jwks: exactly one of file, url is required, got file, url"},
		{"jwks bad url", routePolicies("        jwtAuth: {issuer: i, jwks: {url: 'ftp://x/k'}}\n"), policiesPath + "jwtAuth.jwks.url: must be an http or https URL"},
		{"jwks empty url", routePolicies("        jwtAuth: {providers: [{issuer: i, jwks: {url: ''}}]}\n"), policiesPath + "jwtAuth.providers[0].jwks.url: must not be empty"},
		{"jwks empty url single", routePolicies("        jwtAuth: {issuer: i, jwks: {url: ''}}\n"), policiesPath + "jwtAuth.jwks.url: must not be empty"},
		{"cache with file", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f, cacheDuration: 1m}}\n"), policiesPath + "jwtAuth.jwks.cacheDuration: only allowed with url"},
		{"cache zero", routePolicies("        jwtAuth: {issuer: i, jwks: {url: 'https://x', cacheDuration: 0s}}\n"), policiesPath + "jwtAuth.jwks.cacheDuration: must be > 0"},
		{"jwks unknown key", routePolicies("        jwtAuth: {issuer: i, jwks: {path: f}}\n"), policiesPath + `jwtAuth.jwks.path: unknown field "path"`},
		{"too many audiences", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, audiences: [" + strings.Repeat("a,", 64) + "a]}\n"), policiesPath + "jwtAuth.audiences: must have at most 64 items"},
		{"location two kinds", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, location: {header: {name: a}, cookie: {name: c}}}\n"), policiesPath + "jwtAuth.location: only one of header, queryParameter, cookie, expression may be set"},
		{"location none", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, location: {}}\n"), policiesPath + "jwtAuth.location: exactly one of header"},
		{"location expression", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, location: {expression: 'request.headers[\"x\"]'}}\n"), policiesPath + "jwtAuth.location.expression: not supported yet"},
		{"location bad header", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, location: {header: {name: 'a b'}}}\n"), policiesPath + `jwtAuth.location.header.name: invalid header name "a b"`},
		{"location header no name", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, location: {header: {prefix: 'Bearer '}}}\n"), policiesPath + "jwtAuth.location.header.name: required"},
		{"location bad cookie", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, location: {cookie: {name: 'a;b'}}}\n"), policiesPath + "jwtAuth.location.cookie.name: invalid cookie name"},
		{"required claim unknown", routePolicies("        jwtAuth: {issuer: i, jwks: {file: f}, jwtValidationOptions: {requiredClaims: [exp, jti]}}\n"), policiesPath + `jwtAuth.jwtValidationOptions.requiredClaims[1]: claim "jti" cannot be required (use any of: exp, nbf, aud, iss, sub)`},
		{"required claim twice", routePolicies("        jwtAuth: {providers: [{issuer: i, jwks: {file: f}, jwtValidationOptions: {requiredClaims: [sub, sub]}}]}\n"), policiesPath + `jwtAuth.providers[0].jwtValidationOptions.requiredClaims[1]: duplicate claim "sub"`},

		{"mcp minimal", routePolicies("        mcpAuthentication: {issuer: 'https://i', audiences: [], resourceMetadata: {}}\n"), ""},
		{"mcp full", routePolicies("        mcpAuthentication:\n          issuer: https://kc/realms/r\n          audiences: [a]\n          provider: {keycloak: {}}\n          mode: permissive\n          clientId: c\n          jwks: {url: ''}\n          authorizationLocation: {header: {name: authorization, prefix: 'Bearer '}}\n          jwtValidationOptions: {requiredClaims: [exp, sub]}\n          resourceMetadata: {resource: 'http://gw/mcp', scopesSupported: [a, b], n: 1}\n"), ""},
		{"mcp required", routePolicies("        mcpAuthentication: {issuer: i}\n"), policiesPath + "mcpAuthentication.audiences: required"},
		{"mcp metadata required", routePolicies("        mcpAuthentication: {issuer: i, audiences: []}\n"), policiesPath + "mcpAuthentication.resourceMetadata: required"},
		{"mcp provider later", routePolicies("        mcpAuthentication: {issuer: i, audiences: [], resourceMetadata: {}, provider: {okta: {}}}\n"), policiesPath + `mcpAuthentication.provider.okta: provider "okta" is not supported yet (use auth0 or keycloak)`},
		{"mcp provider unknown", routePolicies("        mcpAuthentication: {issuer: i, audiences: [], resourceMetadata: {}, provider: {google: {}}}\n"), policiesPath + `mcpAuthentication.provider.google: unknown field "google"`},
		{"mcp provider fields", routePolicies("        mcpAuthentication: {issuer: i, audiences: [], resourceMetadata: {}, provider: {auth0: {tenant: x}}}\n"), policiesPath + `mcpAuthentication.provider.auth0.tenant: unknown field "tenant"`},
		{"mcp client secret", routePolicies("        mcpAuthentication: {issuer: i, audiences: [], resourceMetadata: {}, clientSecret: s}\n"), policiesPath + "mcpAuthentication.clientSecret: not supported yet"},
		{"mcp empty audience", routePolicies("        mcpAuthentication: {issuer: i, audiences: [''], resourceMetadata: {}}\n"), policiesPath + "mcpAuthentication.audiences[0]: must not be empty"},
		{"mcp bad mode", routePolicies("        mcpAuthentication: {issuer: i, audiences: [], resourceMetadata: {}, mode: lax}\n"), policiesPath + "mcpAuthentication.mode: must be one of"},
		// The issuer is the authorization server clients discover: a URL.
		{"mcp issuer not a URL", routePolicies("        mcpAuthentication: {issuer: probe.iss, audiences: [], resourceMetadata: {}, jwks: {file: f}}\n"), policiesPath + "mcpAuthentication.issuer: must be an http or https URL"},
		{"mcp issuer without host", routePolicies("        mcpAuthentication: {issuer: 'https:///realms/r', audiences: [], resourceMetadata: {}, jwks: {file: f}}\n"), policiesPath + "mcpAuthentication.issuer: must be an http or https URL"},
		{"mcp issuer of another scheme", routePolicies("        mcpAuthentication: {issuer: 'urn:probe', audiences: [], resourceMetadata: {}, jwks: {file: f}}\n"), policiesPath + "mcpAuthentication.issuer: must be an http or https URL"},

		{"passthrough", routePolicies("        backendAuth: {passthrough: {}}\n"), ""},
		{"passthrough null", routePolicies("        backendAuth: {passthrough: null}\n"), ""},
		{"passthrough location", routePolicies("        backendAuth: {passthrough: {location: {header: {name: X-Token}}}}\n"), ""},
		{"passthrough bad location", routePolicies("        backendAuth: {passthrough: {location: {}}}\n"), policiesPath + "backendAuth.passthrough.location: exactly one of"},
		{"backend key", routePolicies("        backendAuth: {key: {value: s}}\n"), ""},
		{"backend aws", routePolicies("        backendAuth: {aws: {}}\n"), ""},
		{"backend copilot", routePolicies("        backendAuth: copilot\n"), ""},
		{"backend oauthTokenExchange later", routePolicies("        backendAuth: {oauthTokenExchange: {}}\n"), policiesPath + `backendAuth.oauthTokenExchange: backend auth "oauthTokenExchange" is not supported yet`},
		{"backend two kinds", routePolicies("        backendAuth: {passthrough: {}, gcp: {}}\n"), policiesPath + "backendAuth.gcp: only one of"},
		{"backend auth on a backend", "backends:\n- name: b\n  host: 127.0.0.1:1\n  policies:\n    backendAuth: {jwtSign: {}}\nbinds: []\n", `backends[0].policies.backendAuth.jwtSign: backend auth "jwtSign" is not supported yet`},
		{"backend passthrough on a route backend", "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: 127.0.0.1:1\n        policies:\n          backendAuth: {passthrough: {}}\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			checkParse(t, tc.yaml, tc.wantErr)
		})
	}
}

// TestAuthDecodedValues checks what the decoders produce.
func TestAuthDecodedValues(t *testing.T) {
	f, err := Parse([]byte(routePolicies(
		"        jwtAuth: {issuer: https://i, audiences: [a], jwks: {url: 'https://i/k', cacheDuration: 1m}}\n"+
			"        backendAuth: {passthrough: {}}\n"+
			"        mcpAuthentication: {issuer: https://i, audiences: [a], provider: {auth0: {}}, resourceMetadata: {resource: 'http://x', scopesSupported: [s]}}\n")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	p := f.Binds[0].Listeners[0].Routes[0].Policies
	j := p.JWTAuth
	if !j.Single || len(j.Providers) != 1 || j.Providers[0].Issuer != "https://i" || j.ModeOrDefault() != AuthModeStrict {
		t.Fatalf("jwtAuth = %+v", j)
	}
	if s := j.Providers[0].JWKS; s.Kind != JWKSURL || s.URL != "https://i/k" || s.CacheDuration.Minutes() != 1 {
		t.Fatalf("jwks = %+v", s)
	}
	if got := j.Providers[0].JWTValidationOptions.Required(); len(got) != 1 || got[0] != "exp" {
		t.Fatalf("required = %v", got)
	}
	if p.BackendAuth == nil || p.BackendAuth.Passthrough == nil {
		t.Fatal("passthrough lost")
	}
	m := p.MCPAuthentication
	if m.Provider.Kind != MCPProviderAuth0 || m.ModeOrDefault() != AuthModeStrict || m.ResourceMetadata["resource"] != "http://x" {
		t.Fatalf("mcpAuthentication = %+v", m)
	}
	// The dump form decodes again.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"jwks":{"cacheDuration":"1m0s","url":"https://i/k"}`, `"backendAuth":{"passthrough":{}}`, `"provider":{"auth0":{}}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("dump %s lacks %s", b, want)
		}
	}
	var again RoutePolicies
	if errs := decode.YAML(b, &again); len(errs) > 0 {
		t.Fatalf("dump does not decode: %v\n%s", errs, b)
	}
}

// TestAuthDumpRedactsURLs: a key set URL's password and credential query
// parameters, and an mcpAuthentication issuer's (the URLs fetched are
// derived from it), are redacted in the dump, which still parses; other
// URLs are shown as written.
func TestAuthDumpRedactsURLs(t *testing.T) {
	tests := []struct {
		desc   string
		yaml   string
		want   []string // fragments of the compact dump
		secret string
	}{
		{"jwks password and token", "        jwtAuth: {issuer: i, jwks: {url: 'http://u:s3cret@h:1/jwks.json?access_token=s3cret2&v=2', cacheDuration: 2s}}\n",
			[]string{`"url":"http://u:xxxxx@h:1/jwks.json?access_token=%3Credacted%3E\u0026v=2"`, `"cacheDuration":"2s"`}, "s3cret"},
		{"provider jwks", "        jwtAuth: {providers: [{issuer: i, jwks: {url: 'https://u:s3cret@h/k'}}]}\n",
			[]string{`"url":"https://u:xxxxx@h/k"`}, "s3cret"},
		{"jwks without credentials", "        jwtAuth: {issuer: i, jwks: {url: 'https://u@h/k?kid=a'}}\n",
			[]string{`"url":"https://u@h/k?kid=a"`}, ""},
		{"mcp issuer and jwks", "        mcpAuthentication: {issuer: 'http://u:s3cret@h/realm?apiKey=s3cret2', audiences: [a], resourceMetadata: {}, jwks: {url: 'http://h/k?token=s3cret3'}}\n",
			[]string{`"issuer":"http://u:xxxxx@h/realm?apiKey=%3Credacted%3E"`, `"url":"http://h/k?token=%3Credacted%3E"`}, "s3cret"},
		{"mcp issuer plain", "        mcpAuthentication: {issuer: 'https://kc/realms/r', audiences: [a], resourceMetadata: {}}\n",
			[]string{`"issuer":"https://kc/realms/r"`}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			checkDump(t, routePolicies(tc.yaml), tc.want, tc.secret)
		})
	}
}

// TestRedactURL: what log lines show of a configured URL.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://u:s3cret@h:1/jwks.json?access_token=s3cret2", "http://u:xxxxx@h:1/jwks.json?access_token=%3Credacted%3E"},
		{"https://h/k?kid=a", "https://h/k?kid=a"},
		{"http://u:s3cret@[::1", Redacted},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
