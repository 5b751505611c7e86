package config

import (
	"strings"
	"testing"
)

// TestBackendTLSDecode lists valid forms of backendTLS and its errors,
// each naming its field path, at the route and the backend level.
func TestBackendTLSDecode(t *testing.T) {
	long := strings.Repeat("a", 65)
	many := "[" + strings.Repeat("http/1.1x,", 16) + "http/1.1]"
	backend := func(tls string) string {
		return "backends:\n- name: b\n  host: 127.0.0.1:1\n  policies:\n    backendTLS: " + tls + "\nbinds: []\n"
	}
	tests := []struct {
		desc    string
		yaml    string
		wantErr string
	}{
		{"empty", routePolicies("        backendTLS: {}\n"), ""},
		{"full", routePolicies("        backendTLS: {root: ca.pem, cert: c.pem, key: c.key, hostname: api.internal, alpn: [x-a, http/1.1], subjectAltNames: ['spiffe://td/ns/a/sa/b', api.internal, 10.0.0.1], keyExchangeGroups: [X25519_MLKEM768, X25519, P-256, P-384]}\n"), ""},
		{"insecure", routePolicies("        backendTLS: {insecure: true, hostname: 10.1.2.3}\n"), ""},
		{"insecureHost", routePolicies("        backendTLS: {insecureHost: true, root: ca.pem}\n"), ""},
		{"at a backend", backend("{root: ca.pem}"), ""},
		{"on a dynamic backend", "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends: [{dynamic: {}, policies: {backendTLS: {}}}]\n", ""},

		{"cert without key", routePolicies("        backendTLS: {cert: c.pem}\n"), policiesPath + "backendTLS.key: required with cert"},
		{"key without cert", backend("{key: c.key}"), "backends[0].policies.backendTLS.cert: required with key"},
		{"empty root", routePolicies("        backendTLS: {root: ''}\n"), policiesPath + "backendTLS.root: must be at least 1 character"},
		{"insecure and insecureHost", routePolicies("        backendTLS: {insecure: true, insecureHost: true}\n"), policiesPath + "backendTLS.insecureHost: not allowed together with insecure"},
		{"insecure and subjectAltNames", routePolicies("        backendTLS: {insecure: true, subjectAltNames: [a]}\n"), policiesPath + "backendTLS.subjectAltNames: not allowed together with insecure"},
		{"insecureHost and subjectAltNames", backend("{insecureHost: true, subjectAltNames: [a]}"), "backends[0].policies.backendTLS.subjectAltNames: not allowed together with insecureHost"},
		{"bad hostname", routePolicies("        backendTLS: {hostname: 'a b'}\n"), policiesPath + "backendTLS.hostname: must be a DNS name or an IP address: invalid character in label"},
		{"long hostname", routePolicies("        backendTLS: {hostname: " + strings.Repeat("a", 254) + "}\n"), policiesPath + "backendTLS.hostname: must be at most 253 characters"},
		// Which protocols a backend may be offered depends on its kind:
		// the server checks (TestBackendTLSALPNByKind); a TCP route offers any.
		{"alpn without http/1.1", routePolicies("        backendTLS: {alpn: [x-a]}\n"), ""},
		{"alpn h2", routePolicies("        backendTLS: {alpn: [h2, http/1.1]}\n"), ""},
		{"alpn empty list", routePolicies("        backendTLS: {alpn: []}\n"), policiesPath + "backendTLS.alpn: must have at least 1 item"},
		{"alpn too many", routePolicies("        backendTLS: {alpn: " + many + "}\n"), policiesPath + "backendTLS.alpn: must have at most 16 items"},
		{"alpn too long", routePolicies("        backendTLS: {alpn: [http/1.1, " + long + "]}\n"), policiesPath + "backendTLS.alpn[1]: must be 1 to 64 characters"},
		{"alpn empty item", routePolicies("        backendTLS: {alpn: [http/1.1, '']}\n"), policiesPath + "backendTLS.alpn[1]: must be 1 to 64 characters"},
		{"alpn twice", routePolicies("        backendTLS: {alpn: [http/1.1, http/1.1]}\n"), policiesPath + `backendTLS.alpn[1]: "http/1.1" is already listed at alpn[0]`},
		{"alpn space", routePolicies("        backendTLS: {alpn: [http/1.1, 'a b']}\n"), policiesPath + "backendTLS.alpn[1]: must not hold control characters or spaces"},
		{"san too long", routePolicies("        backendTLS: {subjectAltNames: [a, " + strings.Repeat("b", 257) + "]}\n"), policiesPath + "backendTLS.subjectAltNames[1]: must be 1 to 256 characters"},
		{"san control", routePolicies("        backendTLS: {subjectAltNames: [\"a\\nb\"]}\n"), policiesPath + "backendTLS.subjectAltNames[0]: must not hold control characters or spaces"},
		{"san too many", routePolicies("        backendTLS: {subjectAltNames: [" + strings.Repeat("a,", 16) + "a]}\n"), policiesPath + "backendTLS.subjectAltNames: must have at most 16 items"},
		{"san empty list", routePolicies("        backendTLS: {subjectAltNames: []}\n"), policiesPath + "backendTLS.subjectAltNames: must have at least 1 item"},
		{"unknown group", routePolicies("        backendTLS: {keyExchangeGroups: [X25519, P-521]}\n"), policiesPath + "backendTLS.keyExchangeGroups[1]: must be one of: X25519, P-256, P-384, X25519_MLKEM768"},
		{"group twice", routePolicies("        backendTLS: {keyExchangeGroups: [P-256, P-256]}\n"), policiesPath + `backendTLS.keyExchangeGroups[1]: "P-256" is already listed at keyExchangeGroups[0]`},
		{"spiffe", routePolicies("        backendTLS: {spiffe: {}}\n"), policiesPath + "backendTLS.spiffe: not supported yet"},
		{"unknown field", routePolicies("        backendTLS: {insecureSkipVerify: true}\n"), policiesPath + `backendTLS.insecureSkipVerify: unknown field "insecureSkipVerify"`},
		{"not a bool", routePolicies("        backendTLS: {insecure: yes please}\n"), policiesPath + "backendTLS.insecure:"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			checkParse(t, tc.yaml, tc.wantErr)
		})
	}
}

// TestBackendTLSErrorsGolden: every rule of backendTLS broken at once,
// each error with its path and position.
func TestBackendTLSErrorsGolden(t *testing.T) {
	checkErrorsGolden(t, "backendtls_invalid.yaml", "backendtls_invalid.golden")
}

// TestBackendTLSMerge: the backend level replaces the route's whole (no
// field of the route's survives), as the spec's merge does.
func TestBackendTLSMerge(t *testing.T) {
	var s PolicySet
	s.Attach(LevelRoute, "routes[0].policies", &RoutePolicies{BackendTLS: &BackendTLS{Root: "r.pem", Cert: "c.pem", Key: "c.key"}})
	var b PolicySet
	b.Inherit(&s, "backendTLS")
	b.Attach(LevelBackend, "routes[0].backends[0].policies", &BackendPolicies{BackendTLS: &BackendTLS{Hostname: "h"}})
	got := PolicyOf[BackendTLS](&b, "backendTLS")
	if got.Hostname != "h" || got.Cert != "" || got.Root != "" {
		t.Fatalf("merged %+v, want the backend's alone", got)
	}
	if o := b.Origins("backendTLS"); len(o) != 2 || o[0].Level != LevelRoute || b.Path("backendTLS") != "routes[0].backends[0].policies.backendTLS" {
		t.Fatalf("origins %+v", o)
	}
	var only PolicySet
	only.Inherit(&s, "backendTLS")
	only.Inherit(nil, "cors")
	if got := PolicyOf[BackendTLS](&only, "backendTLS"); got.Cert != "c.pem" || only.Has("cors") {
		t.Fatalf("inherited %+v", got)
	}
}
