package config

import (
	"encoding/json"
	"testing"
)

// TestNetworkExtAuthzErrorsGolden: every way networkExtAuthz can be
// wrong, reported at once with field paths (testdata/netextauthz_invalid.*).
func TestNetworkExtAuthzErrorsGolden(t *testing.T) {
	checkErrorsGolden(t, "netextauthz_invalid.yaml", "netextauthz_invalid.golden")
}

func TestNetworkExtAuthz(t *testing.T) {
	const head = "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends: [{host: 'b:1'}]\nfrontendPolicies:\n  networkExtAuthz:\n"
	tests := []struct {
		desc, yaml, wantErr string
	}{
		{"http", "    host: 'a:1'\n    protocol: {http: {}}\n", ""},
		{"every setting a connection uses", "    host: 'a:1'\n    failureMode: allow\n    protocol:\n      http:\n        path: '\"/check/\" + string(destination.port)'\n        body: 'source.address'\n        addRequestHeaders: {x-src: 'source.address', ':method': '\"POST\"'}\n        metadata: {ttl: 'response.headers[\"x-ttl\"]'}\n    cache: {key: ['source.address'], ttl: '\"1m\"'}\n", ""},
		{"a named backend", "    backend: authz\n    protocol: {http: {}}\nbackends:\n- {name: authz, host: 'a:1'}\n", ""},
		{"deny with a status", "    host: 'a:1'\n    protocol: {http: {}}\n    failureMode: {denyWithStatus: 503}\n", ""},
		{"protocol left to its default", "    host: 'a:1'\n", "frontendPolicies.networkExtAuthz.protocol: required: networkExtAuthz only supports protocol http"},
		{"grpc", "    host: 'a:1'\n    protocol: {grpc: {}}\n", "frontendPolicies.networkExtAuthz.protocol.grpc: networkExtAuthz only supports protocol http, not grpc"},
		{"no service", "    protocol: {http: {}}\n", "frontendPolicies.networkExtAuthz: exactly one of host, backend, service is required"},
		{"conditional", "    conditional: [{host: 'a:1', protocol: {http: {}}}]\n", "frontendPolicies.networkExtAuthz.conditional: networkExtAuthz has no conditional form"},
		{"request headers", "    host: 'a:1'\n    protocol: {http: {}}\n    includeRequestHeaders: [authorization]\n", "frontendPolicies.networkExtAuthz.includeRequestHeaders: has no effect on a connection check"},
		{"request body", "    host: 'a:1'\n    protocol: {http: {}}\n    includeRequestBody: {}\n", "frontendPolicies.networkExtAuthz.includeRequestBody: has no effect on a connection check"},
		{"response headers", "    host: 'a:1'\n    protocol: {http: {includeResponseHeaders: [x-user]}}\n", "frontendPolicies.networkExtAuthz.protocol.http.includeResponseHeaders: has no effect on a connection check"},
		{"redirect", "    host: 'a:1'\n    protocol: {http: {redirect: '\"/login\"'}}\n", "frontendPolicies.networkExtAuthz.protocol.http.redirect: has no effect on a connection check"},
		{"an unknown field", "    host: 'a:1'\n    protocol: {http: {}}\n    timeout: 1s\n", `frontendPolicies.networkExtAuthz.timeout: unknown field "timeout"`},
		{"a bad expression", "    host: 'a:1'\n    protocol: {http: {path: 'source.'}}\n", "frontendPolicies.networkExtAuthz.protocol.http.path: invalid CEL expression"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) { checkParse(t, head+tc.yaml, tc.wantErr) })
	}
}

// TestNetworkExtAuthzRoundTrip: the policy writes back in the file's form
// (extAuthz's fields at its top, as the schema has them).
func TestNetworkExtAuthzRoundTrip(t *testing.T) {
	f, err := Parse([]byte("frontendPolicies:\n  networkExtAuthz:\n    host: 'a:1'\n    failureMode: allow\n    protocol: {http: {path: 'request.path'}}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(f.FrontendPolicies)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"networkExtAuthz":{"host":"a:1","protocol":{"http":{"path":"request.path"}},"failureMode":"allow"}}`
	if string(out) != want {
		t.Fatalf("%s\nwant %s", out, want)
	}
	if _, err := Parse([]byte(`{"frontendPolicies":`+string(out)+`}`), noEnv); err != nil {
		t.Fatalf("the written form does not parse: %v", err)
	}
}
