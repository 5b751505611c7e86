package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config/decode"
)

var update = flag.Bool("update", false, "rewrite golden files")

func noEnv(string) (string, bool) { return "", false }

// TestParseErrorsGolden checks that one file with many mistakes reports all of
// them at once, each with its field path.
func TestParseErrorsGolden(t *testing.T) {
	checkErrorsGolden(t, "invalid.yaml", "invalid.golden")
}

// TestParseHintsGolden checks the errors of mistakes a new user makes:
// each says what was meant, not only what is wrong.
func TestParseHintsGolden(t *testing.T) {
	checkErrorsGolden(t, "hints_invalid.yaml", "hints_invalid.golden")
}

// checkErrorsGolden parses testdata/input, which must fail, and compares
// its errors with testdata/golden (rewritten with -update).
func checkErrorsGolden(t *testing.T, input, golden string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", input))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(data, noEnv)
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	got := err.Error() + "\n"
	golden = filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("errors differ from %s (run with -update to accept):\n got:\n%s\nwant:\n%s", golden, got, want)
	}
}

// checkParse parses yaml and checks the outcome: no error when wantErr is
// empty, else an error containing wantErr.
func checkParse(t *testing.T, yaml, wantErr string) {
	t.Helper()
	_, err := Parse([]byte(yaml), noEnv)
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("unexpected error:\n%v", err)
	case wantErr != "" && err == nil:
		t.Fatalf("accepted; want error containing %q", wantErr)
	case wantErr != "" && !strings.Contains(err.Error(), wantErr):
		t.Fatalf("error\n%v\ndoes not contain %q", err, wantErr)
	}
}

// TestTypesDecodable catches cfg tags and field types the decoder cannot use.
func TestTypesDecodable(t *testing.T) {
	if err := decode.CheckType(&File{}); err != nil {
		t.Fatal(err)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		desc    string
		yaml    string
		wantErr string // substring; empty means valid
		single  bool   // the error is the only one
	}{
		{desc: "minimal", yaml: "binds:\n- port: 3000\n  listeners:\n  - routes:\n    - backends:\n      - host: 127.0.0.1:8080\n"},
		{desc: "empty file", yaml: ""},
		{desc: "json input", yaml: `{"binds":[{"port":3000,"listeners":[{"routes":[{"backends":[{"host":"localhost:1"}]}]}]}]}`},
		{desc: "unknown top-level field", yaml: "bindz: []\n", wantErr: `unknown field "bindz" (did you mean "binds"?)`},
		{desc: "port required", yaml: "binds:\n- listeners: []\n", wantErr: "binds[0].port: required"},
		{desc: "port range", yaml: "binds:\n- port: 0\n  listeners: []\n", wantErr: "binds[0].port: must be >= 1"},
		{desc: "port type", yaml: "binds:\n- port: abc\n  listeners: []\n", wantErr: "binds[0].port: expected integer"},
		{desc: "unsupported feature", yaml: "ui: {}\n", wantErr: "ui: not supported yet"},
		{desc: "route policies pasted as a whole file", yaml: "policies:\n  cors: {allowOrigins: ['*']}\n", wantErr: "policies: expected list, got map; top-level policies is a list of targeted policies (- name: ... target: ... policy: ...); a route's policies go under binds[].listeners[].routes[].policies (line 2:3)", single: true},
		{desc: "mcp target needs a kind", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - name: a\n", wantErr: "targets[0]: exactly one of mcp, sse, stdio is required; not supported yet: openapi"},
		{desc: "mcp target name", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - name: a_b\n            stdio: {cmd: x}\n", wantErr: "targets[0].name: must be 1 to 64 letters"},
		{desc: "mcp duplicate target", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - {name: a, stdio: {cmd: x}}\n          - {name: a, stdio: {cmd: y}}\n", wantErr: "targets[1].name: target \"a\" is already defined by targets[0]"},
		{desc: "mcp target url", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - {name: a, mcp: {host: 'ftp://x/'}}\n", wantErr: "targets[0].mcp.host: must be an http(s) URL"},
		{desc: "mcp stdio needs cmd", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - {name: a, stdio: {args: [x]}}\n", wantErr: "targets[0].stdio.cmd: required"},
		{desc: "mcp modes", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          prefixMode: sometimes\n          targets:\n          - {name: a, stdio: {cmd: x}}\n", wantErr: "mcp.prefixMode: must be one of"},
		{desc: "session key", yaml: "config:\n  session: {key: abc}\n", wantErr: "config.session.key: must be 64 hex digits"},
		{desc: "conditional extAuthz", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {conditional: [{condition: 'request.path == \"/a\"', host: 'a:1'}, {host: 'b:1'}]}\n", wantErr: ""},
		{desc: "conditional extProc and remoteRateLimit", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extProc: {conditional: [{condition: 'true', host: 'a:1', failureMode: failOpen}]}\n        remoteRateLimit: {conditional: [{host: 'a:1', domain: d, descriptors: [{entries: [{key: k, value: '\"v\"'}]}]}]}\n", wantErr: ""},
		{desc: "conditional beside other fields", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {host: 'a:1', conditional: [{host: 'b:1'}]}\n", wantErr: "policies.extAuthz.conditional: not allowed together with the kind's other fields"},
		{desc: "conditional fallback not last", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extProc: {conditional: [{host: 'a:1'}, {condition: 'true', host: 'b:1'}]}\n", wantErr: "policies.extProc.conditional[0].condition: required: only the last entry may go without a condition"},
		{desc: "conditional entry checked as the kind", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        remoteRateLimit: {conditional: [{condition: 'true', host: 'a:1', descriptors: []}]}\n", wantErr: "policies.remoteRateLimit.conditional[0].domain: required"},
		{desc: "conditional nested", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {conditional: [{conditional: [{host: 'b:1'}]}]}\n", wantErr: "policies.extAuthz.conditional[0].conditional: entries cannot be conditional themselves"},
		{desc: "extAuthz grpc metadata a string", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {host: 'a:1', protocol: {grpc: {metadata: {m1: '\"x\"'}}}}\n", wantErr: "extAuthz.protocol.grpc.metadata.m1: the result is string, not a map"},
		{desc: "extAuthz grpc metadata a list", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {host: 'a:1', protocol: {grpc: {metadata: {m1: '[1]'}}}}\n", wantErr: "metadata.m1: the result is list(int), not a map"},
		{desc: "extAuthz grpc metadata int keys", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {host: 'a:1', protocol: {grpc: {metadata: {m1: '{1: 2}'}}}}\n", wantErr: "metadata.m1: the result is map(int, int), not a map with string keys"},
		{desc: "extAuthz grpc metadata maps and dyn", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {host: 'a:1', protocol: {grpc: {metadata: {m1: '{\"p\": request.path}', m2: 'jwt', m3: 'request.headers'}}}}\n", wantErr: ""},
		{desc: "conditional empty", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {conditional: []}\n", wantErr: "policies.extAuthz.conditional: must have at least 1 item"},
		{desc: "conditional bad condition", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        extAuthz: {conditional: [{condition: 'nope(', host: 'a:1'}]}\n", wantErr: "policies.extAuthz.conditional[0].condition:"},
		{desc: "access log remove", yaml: "frontendPolicies:\n  accessLog: {remove: [src, llm.cost]}\n", wantErr: ""},
		{desc: "access log remove unknown", yaml: "frontendPolicies:\n  accessLog: {remove: [srcc]}\n", wantErr: "frontendPolicies.accessLog.remove[0]: \"srcc\" is not a field of the access line"},
		{desc: "access log remove level", yaml: "frontendPolicies:\n  accessLog: {remove: [level]}\n", wantErr: "frontendPolicies.accessLog.remove[0]: \"level\" is on every line and cannot be removed"},
		{desc: "gateway phase", yaml: "policies:\n- name: {name: p, namespace: default}\n  target: {gateway: {gatewayName: default, gatewayNamespace: default}}\n  phase: gateway\n  policy: {cors: {allowOrigins: ['*']}}\nbinds:\n- port: 1\n  listeners:\n  - routes:\n    - name: r\n      backends: [{host: 'a:1'}]\n", wantErr: ""},
		{desc: "gateway phase needs a gateway target", yaml: "policies:\n- name: {name: p, namespace: default}\n  target: {route: {name: r, namespace: default}}\n  phase: gateway\n  policy: {cors: {allowOrigins: ['*']}}\nbinds:\n- port: 1\n  listeners:\n  - routes:\n    - name: r\n      backends: [{host: 'a:1'}]\n", wantErr: "policies[0].phase: gateway runs before a route is selected, so it needs a gateway target"},
		{desc: "gateway phase kinds", yaml: "policies:\n- name: {name: p, namespace: default}\n  target: {gateway: {gatewayName: default, gatewayNamespace: default}}\n  phase: gateway\n  policy: {timeout: {requestTimeout: 1s}}\nbinds:\n- port: 1\n  listeners:\n  - routes:\n    - name: r\n      backends: [{host: 'a:1'}]\n", wantErr: "policies[0].policy.timeout: cannot run in the gateway phase"},
		{desc: "direct response body expression", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {status: 200, bodyExpression: '\"hi\"'}\n", wantErr: "policies.directResponse.bodyExpression: not supported yet (line 6:55)", single: true},
		{desc: "conditional direct response body expression", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {conditional: [{condition: 'true', status: 200, bodyExpression: '\"hi\"'}]}\n", wantErr: "policies.directResponse.conditional[0].bodyExpression: not supported yet (line 6:89)", single: true},
		{desc: "conditional direct response headers", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {conditional: [{status: 200, headers: {x-a: '\"1\"'}}]}\n", wantErr: "policies.directResponse.conditional[0].headers: not supported yet (line 6:63)", single: true},
		{desc: "unsupported route policy", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        buffer: {}\n", wantErr: "binds[0].listeners[0].routes[0].policies.buffer: not supported yet"},
		{desc: "basicAuth needs htpasswd", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        basicAuth: {}\n", wantErr: "routes[0].policies.basicAuth.htpasswd: required"},
		{desc: "basicAuth realm quoted", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      basicAuth: {htpasswd: 'a:{SHA}x', realm: 'a\"b'}\n", wantErr: "listeners[0].policies.basicAuth.realm: must not hold control characters, quotes or backslashes"},
		{desc: "basicAuth mode", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      basicAuth: {htpasswd: 'a:{SHA}x', mode: permissive}\n", wantErr: "basicAuth.mode: must be one of"},
		{desc: "apiKey needs keys", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: []}\n", wantErr: "policies.apiKey.keys: must have at least 1 item"},
		{desc: "apiKey key or hash", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: [{metadata: {a: 1}}]}\n", wantErr: "policies.apiKey.keys[0]: exactly one of key, keyHash is required"},
		{desc: "apiKey both", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: [{key: k, keyHash: 'sha256:00'}]}\n", wantErr: "policies.apiKey.keys[0].keyHash: not allowed together with key"},
		{desc: "apiKey hash form", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: [{keyHash: 'md5:00'}]}\n", wantErr: "policies.apiKey.keys[0].keyHash: must be sha256:<64 hex digits>"},
		{desc: "apiKey twice", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: [{key: k1}, {key: k2}, {key: k1}]}\n", wantErr: "policies.apiKey.keys[2]: the same key as keys[0]"},
		{desc: "apiKey plain keys and a file", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: [k1, {key: k2}, {key: {file: /k3}}]}\n    - policies:\n        apiKey: {keys: {file: /keys.yaml}}\n"},
		{desc: "apiKey keys shape", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: k1}\n", wantErr: `policies.apiKey.keys: expected a list of keys or {file: path}, got string "k1"`},
		{desc: "extAuthz needs a service", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      extAuthz: {protocol: {grpc: {}}}\n", wantErr: "listeners[0].policies.extAuthz: exactly one of host, backend, service is required"},
		{desc: "extAuthz one protocol", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      extAuthz: {host: 'a:1', protocol: {grpc: {}, http: {}}}\n", wantErr: "extAuthz.protocol: exactly one of grpc, http"},
		{desc: "extAuthz failure mode", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      extAuthz: {host: 'a:1', failureMode: maybe}\n", wantErr: "extAuthz.failureMode: must be deny, allow or {denyWithStatus: code}"},
		{desc: "extAuthz deny status", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      extAuthz: {host: 'a:1', failureMode: {denyWithStatus: 42}}\n", wantErr: "extAuthz.failureMode.denyWithStatus: must be >= 200"},
		{desc: "extAuthz forms", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      extAuthz: {host: 'a:1', failureMode: {denyWithStatus: 503}, includeRequestHeaders: [':path', x-a], protocol: {http: {path: '\"/c\"', addRequestHeaders: {x-b: '\"1\"'}}}}\n    routes:\n    - policies:\n        extAuthz: {host: 'a:1', failureMode: allow, protocol: {grpc: {context: {a: b}, metadata: {m: '{\"a\": 1}'}}}}\n"},
		{desc: "extAuthz body", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      extAuthz: {host: 'a:1', includeRequestBody: {maxRequestBytes: 10, allowPartialMessage: true, packAsBytes: true}}\n"},
		{desc: "transformations forms", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      transformations: {request: {set: {x-a: '\"1\"', ':path': '\"/\"'}, add: {x-b: 'request.path'}, remove: [x-c], replace: '{\"a\": \"b\"}'}, response: {set: {':status': '\"200\"'}}}\n"},
		{desc: "transformations pseudo per direction", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      transformations: {response: {set: {':path': '\"/\"'}}}\n", wantErr: `transformations.response.set.:path: invalid header name ":path"`},
		{desc: "transformations bad expression", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      transformations: {request: {add: {x-a: 'request.path =='}}}\n", wantErr: "transformations.request.add.x-a: invalid CEL expression"},
		{desc: "transformations body", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      transformations: {request: {body: 'json(request.body).name'}, response: {body: '{\"wrapped\": string(response.body)}'}}\n"},
		{desc: "transformations bad body", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      transformations: {response: {body: 'response.body +'}}\n", wantErr: "transformations.response.body: invalid CEL expression"},
		{desc: "transformations metadata", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      transformations: {request: {metadata: {a: '\"x\"'}}}\n", wantErr: ""},
		{desc: "transformations bad metadata", yaml: "binds:\n- port: 1\n  listeners:\n  - policies:\n      transformations: {request: {metadata: {a: 'nope('}}}\n", wantErr: "transformations.request.metadata.a:"},
		{desc: "accessLog", yaml: "frontendPolicies:\n  accessLog: {filter: 'response.code >= 400', add: {a.b: 'request.path', c: 'random()'}}\n"},
		{desc: "accessLog adds a field every line has", yaml: "frontendPolicies:\n  accessLog: {add: {msg: '1'}}\n", wantErr: "frontendPolicies.accessLog.add.msg: \"msg\" is on every line and cannot be replaced"},
		{desc: "remoteRateLimit", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        remoteRateLimit: {domain: d, host: 'a:1', failureMode: FailOpen, descriptors: [{entries: [{key: k, value: request.path}], cost: '2'}]}\n"},
		{desc: "remoteRateLimit needs descriptors", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        remoteRateLimit: {domain: d, host: 'a:1'}\n", wantErr: "remoteRateLimit.descriptors: required"},
		{desc: "remoteRateLimit tokens", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        remoteRateLimit: {domain: d, host: 'a:1', descriptors: [{entries: [{key: k, value: '\"v\"'}], type: tokens}]}\n"},
		{desc: "remoteRateLimit tokens cost", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        remoteRateLimit: {domain: d, host: 'a:1', descriptors: [{entries: [{key: k, value: '\"v\"'}], type: tokens, cost: 'llm.outputTokens * 2'}]}\n", wantErr: ""},
		{desc: "remoteRateLimit requests cost cannot read llm", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        remoteRateLimit: {domain: d, host: 'a:1', descriptors: [{entries: [{key: k, value: '\"v\"'}], cost: 'llm.outputTokens'}]}\n", wantErr: "descriptors[0].cost: invalid CEL expression"},
		{desc: "retry condition alone", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        retry: {attempts: 2, condition: 'response.code >= 500', precondition: 'request.method == \"GET\"'}\n"},
		{desc: "retry needs codes or a condition", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        retry: {attempts: 2}\n", wantErr: "retry.codes: required (or a condition)"},
		{desc: "tracing", yaml: "config:\n  tracing: {otlpEndpoint: 'http://c:4317', otlpProtocol: grpc, headers: {authorization: secret}, randomSampling: 0.25, clientSampling: 'request.path != \"/healthz\"'}\n"},
		{desc: "tracing endpoint", yaml: "config:\n  tracing: {otlpEndpoint: 'ftp://c:4317'}\n", wantErr: "config.tracing.otlpEndpoint: must be an http:// or https:// URL"},
		{desc: "tracing probability", yaml: "config:\n  tracing: {otlpEndpoint: 'http://c:4317', randomSampling: 1.5}\n", wantErr: "config.tracing.randomSampling: a probability must be between 0 and 1"},
		{desc: "tracing fields", yaml: "config:\n  tracing: {otlpEndpoint: 'http://c:4317', fields: {add: {span.name: '\"x\"', gen_ai.prompt: 'flattenRecursive(llm.prompt)', n: 'llm.inputTokens'}, remove: [url.path]}}\n"},
		{desc: "tracing fields expression", yaml: "config:\n  tracing: {otlpEndpoint: 'http://c:4317', fields: {add: {x: 'llm.'}}}\n", wantErr: "config.tracing.fields.add.x: invalid CEL expression"},
		{desc: "frontend tracing", yaml: "frontendPolicies:\n  tracing: {host: 'c:4317', protocol: http, path: /t, randomSampling: 'request.path == \"/\"', clientSampling: false, filter: 'response.code >= 500', remove: [url.path], attributes: {a: 'llm.provider', b: 'flatten([1])'}, resources: {service.name: '\"s\"'}, policies: {requestHeaderModifier: {set: {authorization: x}}}}\n"},
		{desc: "frontend tracing needs a collector", yaml: "frontendPolicies:\n  tracing: {randomSampling: true}\n", wantErr: "frontendPolicies.tracing: exactly one of host, backend, service is required"},
		{desc: "frontend tracing service later", yaml: "frontendPolicies:\n  tracing: {service: {name: a, port: 1}}\n", wantErr: "frontendPolicies.tracing.service: not supported yet"},
		{desc: "frontend tracing backend", yaml: "frontendPolicies:\n  tracing: {backend: nope}\n", wantErr: `frontendPolicies.tracing.backend: no backend named "nope"`},
		{desc: "frontend tracing filter is a condition", yaml: "frontendPolicies:\n  tracing: {host: 'c:1', filter: '1'}\n", wantErr: "frontendPolicies.tracing.filter: invalid CEL expression: the result is int, not bool"},
		{desc: "frontend tracing collector policies", yaml: "frontendPolicies:\n  tracing: {host: 'c:1', policies: {backendTLS: {}}}\n", wantErr: "frontendPolicies.tracing.policies.backendTLS: not supported yet"},
		{desc: "tracing in both places", yaml: "config:\n  tracing: {otlpEndpoint: 'http://c:4317'}\nfrontendPolicies:\n  tracing: {host: 'c:4317'}\n", wantErr: "frontendPolicies.tracing: config.tracing is also set: use one of them"},
		{desc: "flatten only in telemetry", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        authorization: {rules: ['flattenRecursive([1]) == 1']}\n", wantErr: "undeclared reference to 'flattenRecursive'"},
		{desc: "accessLog otlp", yaml: "frontendPolicies:\n  accessLog: {otlp: {host: 'c:4317', protocol: http, path: /l, filter: 'response.code >= 400', fields: {add: {a: '\"1\"'}, remove: [src]}}}\n"},
		{desc: "accessLog otlp header removal", yaml: "frontendPolicies:\n  accessLog: {otlp: {host: 'c:4317', policies: {requestHeaderModifier: {remove: [x]}}}}\n", wantErr: "frontendPolicies.accessLog.otlp.policies.requestHeaderModifier.remove: an export sends no header to remove"},
		{desc: "targeted policy: one kind", yaml: "policies:\n- name: {name: p, namespace: d}\n  target: {route: {name: r, namespace: d}}\n  policy: {cors: {}, csrf: {}}\n", wantErr: "policies[0].policy: must hold exactly one policy, not 2"},
		{desc: "targeted policy: one target", yaml: "policies:\n- name: {name: p, namespace: d}\n  target: {route: {name: r, namespace: d}, backend: {backend: {name: b, namespace: d}}}\n  policy: {csrf: {}}\n", wantErr: "policies[0].target: exactly one of gateway, route, backend, listenerSet"},
		{desc: "apiKey allowedModels later", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        apiKey: {keys: [{key: k1, allowedModels: [a]}]}\n", wantErr: "policies.apiKey.keys[0].allowedModels: not supported yet"},
		{desc: "path union needs one", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches:\n      - path: {}\n", wantErr: "binds[0].listeners[0].routes[0].matches[0].path: exactly one of exact, pathPrefix, regex is required"},
		{desc: "path must start with slash", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches:\n      - path: {pathPrefix: api}\n", wantErr: "matches[0].path.pathPrefix: must start with"},
		{desc: "bad regex", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches:\n      - path: {regex: '['}\n", wantErr: "path.regex: invalid regular expression"},
		{desc: "backend host needs port", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: example.com\n", wantErr: "backends[0].host: must be host:port"},
		{desc: "backend host null", yaml: "backends: [{name: b, host: null}]\n", wantErr: "backends[0].host: must be host:port"},
		{desc: "two backend kinds", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        dynamic: {}\n", wantErr: "only one backend kind may be set"},
		{desc: "dangling backend ref", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - backend: nope\n", wantErr: `no backend named "nope"`},
		{desc: "named backend ok", yaml: "backends:\n- name: b\n  host: 127.0.0.1:9\nbinds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - backend: b\n"},
		{desc: "named backend ref written as agentgateway keys it", yaml: "backends:\n- name: b\n  host: 127.0.0.1:9\nbinds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        requestMirror: {backend: {backend: /b}, percentage: 1}\n      backends:\n      - backend: /b\n"},
		{desc: "dangling slash ref", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - backend: /nope\n", wantErr: `no backend named "nope"`},
		{desc: "empty slash ref", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - backend: /\n", wantErr: "backends[0].backend: must not be empty"},
		{desc: "duplicate ports", yaml: "binds:\n- port: 1\n  listeners: []\n- port: 1\n  listeners: []\n", wantErr: "binds[1].port: port 1 is already used by binds[0]"},
		{desc: "https needs tls", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HTTPS\n", wantErr: "binds[0].listeners[0].tls: required: an HTTPS listener needs a certificate"},
		{desc: "http has no tls", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HTTP\n    tls: {cert: a, key: b}\n", wantErr: "binds[0].listeners[0].tls: a HTTP listener has no TLS"},
		{desc: "tls needs cert and key", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HTTPS\n    tls: {root: r}\n", wantErr: "binds[0].listeners[0].tls.cert: required"},
		{desc: "tls 1.1 refused", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HTTPS\n    tls: {cert: a, key: b, minTLSVersion: TLS_V1_1}\n", wantErr: "tls.minTLSVersion: TLS_V1_1 is not allowed: only TLS 1.2 and 1.3 are supported"},
		{desc: "tls versions both spellings", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HTTPS\n    tls: {cert: a, key: b, minTLSVersion: TLS_V1_2, minTlsVersion: TLS_V1_3}\n", wantErr: "tls.minTlsVersion: only one of minTLSVersion and minTlsVersion may be set"},
		{desc: "tls max below min", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HTTPS\n    tls: {cert: a, key: b, minTlsVersion: TLS_V1_3, maxTlsVersion: TLS_V1_2}\n", wantErr: "tls.maxTLSVersion: TLS_V1_2 is below the minimum TLS_V1_3"},
		{desc: "unknown cipher suite", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HTTPS\n    tls: {cert: a, key: b, cipherSuites: [TLS_RSA_WITH_RC4_128_SHA]}\n", wantErr: "tls.cipherSuites[0]: unknown cipher suite \"TLS_RSA_WITH_RC4_128_SHA\""},
		{desc: "unknown group", yaml: "frontendPolicies:\n  tls: {keyExchangeGroups: [P-521]}\n", wantErr: "frontendPolicies.tls.keyExchangeGroups[0]: unknown key exchange group \"P-521\""},
		{desc: "frontend tls 1.0", yaml: "frontendPolicies:\n  tls: {minVersion: TLS_V1_0}\n", wantErr: "frontendPolicies.tls.minVersion: TLS_V1_0 is not allowed"},
		{desc: "alpn byte out of range", yaml: "frontendPolicies:\n  tls: {alpn: [[104, 300]]}\n", wantErr: "frontendPolicies.tls.alpn[0][1]: must be a byte (0..255)"},
		{desc: "frontend tcp needs keepalives", yaml: "frontendPolicies:\n  tcp: {}\n", wantErr: "frontendPolicies.tcp.keepalives: required"},
		{desc: "tcp listener with routes", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TCP\n    routes: [{backends: [{host: 'a:1'}]}]\n", wantErr: "binds[0].listeners[0].routes: a TCP listener forwards connections: use tcpRoutes"},
		{desc: "http listener with tcp routes", yaml: "binds:\n- port: 1\n  listeners:\n  - tcpRoutes: [{backends: [{host: 'a:1'}]}]\n", wantErr: "binds[0].listeners[0].tcpRoutes: an HTTP listener takes routes, not tcpRoutes"},
		{desc: "tcp route needs backends", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TCP\n    tcpRoutes: [{}]\n", wantErr: "binds[0].listeners[0].tcpRoutes[0].backends: required"},
		{desc: "tcp route hostnames on tcp", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TCP\n    tcpRoutes: [{hostnames: [a.example], backends: [{host: 'a:1'}]}]\n", wantErr: "tcpRoutes[0].hostnames: a TCP listener sees no server name"},
		{desc: "tcp route dynamic on tcp", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TCP\n    tcpRoutes: [{backends: [{dynamic: {}}]}]\n", wantErr: "tcpRoutes[0].backends[0].dynamic: a dynamic TCP backend takes its destination from TLS SNI"},
		{desc: "tcp route bad hostname", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TLS\n    tcpRoutes: [{hostnames: ['bad host'], backends: [{host: 'a:1'}]}]\n", wantErr: "tcpRoutes[0].hostnames[0]: invalid hostname \"bad host\""},
		{desc: "tcp route unknown backend", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TLS\n    tcpRoutes: [{backends: [{backend: nope}]}]\n", wantErr: "tcpRoutes[0].backends[0].backend: no backend named \"nope\""},
		{desc: "tcp route mcp backend kind", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TLS\n    tcpRoutes: [{backends: [{mcp: {targets: []}}]}]\n", wantErr: "tcpRoutes[0].backends[0].mcp: unknown field \"mcp\""},
		{desc: "two tcp listeners on a port", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TCP\n    tcpRoutes: [{backends: [{host: 'a:1'}]}]\n  - protocol: TCP\n    tcpRoutes: [{backends: [{host: 'a:1'}]}]\n", wantErr: "binds[0].listeners[1].protocol: listeners[0] is already a TCP listener on this port"},
		{desc: "tcp beside http", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TCP\n    tcpRoutes: [{backends: [{host: 'a:1'}]}]\n  - protocol: HTTP\n", wantErr: "binds[0].listeners[0].protocol: a TCP listener must be alone on its port (listeners[1] shares it)"},
		{desc: "two tls listeners one hostname", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TLS\n    hostname: a.example\n    tcpRoutes: [{backends: [{host: 'a:1'}]}]\n  - protocol: HTTPS\n    hostname: a.example\n    tls: {cert: a, key: b}\n", wantErr: "binds[0].listeners[1].hostname: binds[0].listeners[0] already serves TLS for \"a.example\" on this port"},
		{desc: "two tls listeners one hostname in two cases", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: TLS\n    hostname: a.example\n    tcpRoutes: [{backends: [{host: 'a:1'}]}]\n  - protocol: TLS\n    hostname: A.Example\n    tcpRoutes: [{backends: [{host: 'a:1'}]}]\n", wantErr: "binds[0].listeners[1].hostname: binds[0].listeners[0] already serves TLS for \"a.example\" on this port", single: true},
		{desc: "two http listeners without hostname", yaml: "binds:\n- port: 1\n  listeners:\n  - name: x\n    routes: [{backends: [{host: 'a:1'}]}]\n  - name: y\n    hostname: '*'\n    routes: [{backends: [{host: 'b:1'}]}]\n", wantErr: "binds[0].listeners[1].hostname: binds[0].listeners[0] already serves HTTP for every hostname on this port: this listener would never be chosen (line 7:15)", single: true},
		{desc: "two http listeners one hostname in two cases", yaml: "binds:\n- port: 1\n  listeners:\n  - {hostname: a.example.com, routes: [{backends: [{host: 'a:1'}]}]}\n  - {hostname: A.example.com, routes: [{backends: [{host: 'b:1'}]}]}\n", wantErr: "binds[0].listeners[1].hostname: binds[0].listeners[0] already serves HTTP for \"a.example.com\" on this port", single: true},
		{desc: "two gateway listeners one hostname", yaml: "gateways:\n  web:\n    port: 1\n    listeners:\n    - {name: a, hostname: x.example}\n    - {name: b, hostname: x.example}\nroutes: [{gateways: [web], backends: [{host: 'a:1'}]}]\n", wantErr: "gateways.web.listeners[1].hostname: gateways.web.listeners[0] already serves HTTP for \"x.example\" on this port", single: true},
		{desc: "http listeners of distinct hostnames, and an https one of the same", yaml: "binds:\n- port: 1\n  listeners:\n  - {hostname: a.example, routes: [{backends: [{host: 'a:1'}]}]}\n  - {hostname: '*.example', routes: [{backends: [{host: 'a:1'}]}]}\n  - {routes: [{backends: [{host: 'a:1'}]}]}\n  - {protocol: HTTPS, hostname: a.example, tls: {cert: a, key: b}, routes: [{backends: [{host: 'a:1'}]}]}\n"},
		{desc: "hbone listener later", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: HBONE\n", wantErr: "HBONE listeners are not supported yet"},
		{desc: "bad duration", yaml: "config:\n  backend:\n    connectTimeout: 5 sec\n", wantErr: "config.backend.connectTimeout: invalid duration"},
		{desc: "direct response status range", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {status: 99}\n", wantErr: "directResponse.status: must be >= 200"},
		{desc: "retry codes", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        retry: {codes: [1000]}\n", wantErr: "retry.codes[0]: must be an HTTP status code (100..999)"},
		{desc: "mirror percentage", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        requestMirror: {backend: {host: 'a:1'}, percentage: 2}\n", wantErr: "requestMirror.percentage: must be <= 1"},
		{desc: "log level list", yaml: "config:\n  logging:\n    level: [info, access=warn]\n"},
		{desc: "bad log level", yaml: "config:\n  logging:\n    level: chatty\n", wantErr: `unknown log level "chatty"`},
		{desc: "backend http2", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        policies:\n          http: {version: HTTP2}\n"},
		{desc: "backend http/1.0 refused", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        policies:\n          http: {version: HTTP/1.0}\n", wantErr: "http.version: HTTP/1.0 is not supported yet"},
		{desc: "frontend http2 settings", yaml: "frontendPolicies:\n  http: {http2WindowSize: 1048576, http2ConnectionWindowSize: 4194304, http2FrameSize: 32768, http2MaxHeaderSize: 65536, http2KeepaliveInterval: 30s, http2KeepaliveTimeout: 5s}\n"},
		{desc: "frontend http2 frame size", yaml: "frontendPolicies:\n  http: {http2FrameSize: 1024}\n", wantErr: "frontendPolicies.http.http2FrameSize: must be >= 16384"},
		{desc: "frontend http2 frame size as declared", yaml: "frontendPolicies:\n  http: {http2FrameSize: 16777215}\n", wantErr: "frontendPolicies.http.http2FrameSize: must be <= 1677215"},
		{desc: "frontend http2 window", yaml: "frontendPolicies:\n  http: {http2WindowSize: 0}\n", wantErr: "frontendPolicies.http.http2WindowSize: must be >= 1"},
		{desc: "frontend http2 connection window", yaml: "frontendPolicies:\n  http: {http2ConnectionWindowSize: 1000}\n", wantErr: "frontendPolicies.http.http2ConnectionWindowSize: must be at least 65535"},
		{desc: "frontend http2 keepalive timeout alone", yaml: "frontendPolicies:\n  http: {http2KeepaliveTimeout: 5s}\n", wantErr: "frontendPolicies.http.http2KeepaliveTimeout: needs http2KeepaliveInterval"},
		{desc: "backend http version as agentgateway writes it", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        policies:\n          http: {version: HTTP/1.1}\n"},
		{desc: "backend http version enum", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        policies:\n          http: {version: HTTP1}\n"},
		{desc: "backend http/2.0", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        policies:\n          http: {version: HTTP/2.0}\n"},
		{desc: "backend http version unknown", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: a:1\n        policies:\n          http: {version: HTTP/1.2}\n", wantErr: "http.version: must be one of: HTTP/1.1"},
		{desc: "empty rewrite paths", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches: [{path: {pathPrefix: /api}}]\n      policies:\n        urlRewrite: {path: {prefix: ''}}\n    - policies:\n        requestRedirect: {path: {full: ''}}\n"},
		{desc: "native histograms later", yaml: "config: {histograms: both}\n", wantErr: `config.histograms: "both" is not supported yet`},
		{desc: "tunnel protocol later", yaml: "binds:\n- port: 1\n  tunnelProtocol: hboneGateway\n  listeners: []\n", wantErr: `binds[0].tunnelProtocol: "hboneGateway" is not supported yet`},
		{desc: "tunnel protocol proxy", yaml: "binds:\n- port: 1\n  tunnelProtocol: proxy\n  listeners: []\n"},
		{desc: "proxy protocol", yaml: "frontendPolicies:\n  proxy: {version: all, mode: optional}\n"},
		{desc: "proxy protocol other name", yaml: "frontendPolicies:\n  proxyProtocol: {}\n"},
		{desc: "proxy protocol twice", yaml: "frontendPolicies:\n  proxy: {}\n  proxyProtocol: {}\n", wantErr: "frontendPolicies.proxyProtocol: set one of proxy and proxyProtocol"},
		{desc: "proxy protocol version", yaml: "frontendPolicies:\n  proxy: {version: v3}\n", wantErr: "frontendPolicies.proxy.version: must be one of: v1, v2, all"},
		{desc: "proxy protocol mode", yaml: "frontendPolicies:\n  proxy: {mode: lax}\n", wantErr: "frontendPolicies.proxy.mode: must be one of: strict, optional"},
		{desc: "two wildcard internal binds", yaml: "binds:\n- mode: internal\n  listeners: []\n- mode: internal\n  listeners: []\n", wantErr: `binds[1].port: binds[0] is already the internal bind of every port`},
		{desc: "connect bind with http listener", yaml: "binds:\n- port: 1\n  tunnelProtocol: connect\n  listeners: [{routes: []}]\n", wantErr: `binds[0].listeners[0].protocol: a CONNECT bind (tunnelProtocol: connect) serves CONNECT requests only`},
		{desc: "lowercase protocol: one error", yaml: "binds:\n- port: 1\n  listeners:\n  - protocol: http\n", wantErr: `protocol: must be one of: HTTP, HTTPS, TLS, TCP, HBONE (did you mean "HTTP"?) (line 4:15)`, single: true},
		{desc: "conditional direct response", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {conditional: [{condition: 'random() < 0.1', status: 503, body: x}, {status: 404}]}\n"},
		{desc: "conditional direct response: a fallback last", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {conditional: [{status: 404}, {condition: 'true', status: 503}]}\n", wantErr: "directResponse.conditional[0].condition: required: only the last entry may go without a condition"},
		{desc: "conditional direct response: one form", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {status: 200, conditional: [{status: 404}]}\n", wantErr: "directResponse.conditional: not allowed together with status and body"},
		{desc: "random is for faults only", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        authorization: {rules: ['random() < 0.5']}\n", wantErr: "random() is agentgateway's, and not available in rules"},
		{desc: "delay forms", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        delay: {duration: 2s}\n    - policies:\n        delay: {duration: 'random() < 0.1 ? 2000 : 0'}\n    - policies:\n        delay: {duration: 'duration(\"500ms\")'}\n"},
		{desc: "delay bound", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        delay: {duration: 1h}\n", wantErr: "delay.duration: must be between 0s and 5m0s"},
		{desc: "delay garbage", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        delay: {duration: 'soon'}\n", wantErr: "delay.duration: neither a duration nor a valid CEL expression"},
		{desc: "direct response body at most 4096 characters", yaml: routePolicies("        directResponse: {status: 200, body: '" + strings.Repeat("é", 4096) + "'}")},
		{desc: "direct response body too long", yaml: routePolicies("        directResponse: {status: 200, body: '" + strings.Repeat("x", 4097) + "'}"), wantErr: "policies.directResponse.body: must be at most 4096 characters, not 4097 (line 6:45)", single: true},
		{desc: "direct response body too long as bytes", yaml: routePolicies("        directResponse: {status: 200, body: [" + strings.Repeat("255, ", 4096) + "255]}"), wantErr: "policies.directResponse.body: must be at most 4096 characters, not 4097"},
		{desc: "direct response body empty", yaml: routePolicies("        directResponse: {status: 200, body: ''}"), wantErr: "policies.directResponse.body: must not be empty (omit it for an answer without a body) (line 6:45)", single: true},
		{desc: "direct response body empty list", yaml: routePolicies("        directResponse: {status: 200, body: []}"), wantErr: "policies.directResponse.body: must not be empty"},
		{desc: "direct response body null", yaml: routePolicies("        directResponse: {status: 200, body: null}")},
		{desc: "conditional direct response body bounds", yaml: routePolicies("        directResponse: {conditional: [{condition: 'true', status: 200, body: ''}, {status: 200, body: '" + strings.Repeat("x", 4097) + "'}]}"), wantErr: "policies.directResponse.conditional[1].body: must be at most 4096 characters, not 4097"},
		{desc: "conditional direct response body empty", yaml: routePolicies("        directResponse: {conditional: [{condition: 'true', status: 200, body: ''}, {status: 200}]}"), wantErr: "policies.directResponse.conditional[0].body: must not be empty", single: true},
		{desc: "direct response needs a status", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        directResponse: {body: x}\n", wantErr: "directResponse.status: required"},
		{desc: "backend auth credentials need a location", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        backendAuth: {credentials: [{key: abc}]}\n", wantErr: `backendAuth.credentials[0].location: required`},
		{desc: "backend auth jwtSign later", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        backendAuth: {jwtSign: {signingKey: k}}\n", wantErr: `backendAuth.jwtSign: backend auth "jwtSign" is not supported yet`},
		{desc: "unix backend later", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - host: unix:/tmp/s\n", wantErr: "host: unix socket backends are not supported yet"},
		{desc: "pseudo-header matches", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches:\n      - headers:\n        - {name: ':method', value: {exact: GET}}\n        - {name: ':Authority', value: {regex: 'a.*'}}\n"},
		{desc: "match header name invalid", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches:\n      - headers:\n        - {name: ':status', value: {exact: '200'}}\n        - {name: 'a b', value: {exact: x}}\n", wantErr: "matches[0].headers[0].name: invalid header name \":status\""},
		{desc: "side server addresses checked", yaml: "config:\n  adminAddr: garbage\n  statsAddr: 'unix:'\n  readinessAddr: 'localhost:99999'\n", wantErr: "config.adminAddr: address \"garbage\": want host:port"},
		{desc: "side server address error once, with its position", yaml: "config:\n  adminAddr: garbage\n", wantErr: `config.adminAddr: address "garbage": want host:port, unix:/path or off: address garbage: missing port in address (line 2:14)`, single: true},
		{desc: "side server address checked beside a failing setting", yaml: "config:\n  workerThreads: many\n  readinessAddr: 'localhost:99999'\n", wantErr: `config.readinessAddr: address "localhost:99999": port "99999" is not a number in 0..65535`},
		{desc: "side server address checked beside an unsupported setting", yaml: "config:\n  tracing: {}\n  statsAddr: 'unix:'\n", wantErr: `config.statsAddr: address "unix:": empty unix socket path`},
		{desc: "side server addresses valid", yaml: "config:\n  adminAddr: 'unix:/run/gw.sock'\n  statsAddr: 'off'\n  readinessAddr: '[::]:15021'\n"},
		{desc: "header name invalid", yaml: "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        requestHeaderModifier: {remove: ['bad name']}\n", wantErr: "requestHeaderModifier.remove[0]: invalid header name"},
		{desc: "hostnames wildcard", yaml: "binds:\n- port: 1\n  listeners:\n  - hostname: '*.example.com'\n    routes:\n    - hostnames: ['*.a.example.com', b.example.com]\n"},
		{desc: "workerThreads", yaml: "config:\n  workerThreads: auto\n"},
		{desc: "workerThreads bad", yaml: "config:\n  workerThreads: many\n", wantErr: "config.workerThreads: must be"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), noEnv)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error:\n%v", err)
			case tc.wantErr != "" && err == nil:
				t.Fatalf("accepted; want error containing %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Fatalf("error\n%v\ndoes not contain %q", err, tc.wantErr)
			case tc.single && strings.Contains(err.Error(), "\n"):
				t.Fatalf("error\n%v\nhas more than the one wanted", err)
			}
		})
	}
}

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"PORT": "3000", "EMPTY": "", "HOST": "127.0.0.1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		desc, in, want, wantErr string
	}{
		{desc: "plain", in: "port: $PORT", want: "port: 3000"},
		{desc: "braces", in: "host: ${HOST}:${PORT}", want: "host: 127.0.0.1:3000"},
		{desc: "default unused", in: "${PORT:-1}", want: "3000"},
		{desc: "default used", in: "${NOPE:-8080}", want: "8080"},
		{desc: "default for empty", in: "${EMPTY:-x}", want: "x"},
		{desc: "empty defined", in: "[${EMPTY}]", want: "[]"},
		{desc: "escape", in: "cost: $$5", want: "cost: $5"},
		{desc: "dollar before non-name kept", in: `regex: "^/a$"`, want: `regex: "^/a$"`},
		{desc: "trailing dollar", in: "a$", want: "a$"},
		{desc: "comment lines untouched", in: "# uses ${NOPE}\n  # and $NOPE\nport: $PORT # ${PORT}", want: "# uses ${NOPE}\n  # and $NOPE\nport: 3000 # 3000"},
		{desc: "undefined", in: "a: 1\nb: $NOPE", wantErr: "line 2: environment variable NOPE is not defined"},
		{desc: "undefined braces", in: "${NOPE}", wantErr: "environment variable NOPE is not defined"},
		{desc: "a hash is not a variable", in: "h: a:$apr1$salt$x", wantErr: "line 1: environment variable apr1 is not defined (a $ inside a value such as a password hash is written $$)"},
		{desc: "unterminated", in: "${PORT", wantErr: "unterminated"},
		{desc: "invalid name", in: "${1X}", wantErr: "invalid environment variable name"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, errs := ExpandEnv([]byte(tc.in), lookup)
			if tc.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(Errors(errs).Error(), tc.wantErr) {
					t.Fatalf("errors %v, want %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("unexpected errors %v", errs)
			}
			if string(out) != tc.want {
				t.Fatalf("got %q want %q", out, tc.want)
			}
		})
	}
}

// TestExamplesValid keeps every shipped example valid.
func TestExamplesValid(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(data, noEnv); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	llm, _ := filepath.Glob("testdata/llm/*.yaml") // agentgateway's LLM examples
	seeds = append(seeds, llm...)
	seeds = append(seeds, "../examples/quickstart.yaml")
	for _, s := range seeds {
		if data, err := os.ReadFile(s); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("binds:\n- port: ${P:-1}\n  listeners: [{routes: [{backends: [{host: 'a:1'}]}]}]\n"))
	f.Add([]byte("llm: {models: [{name: 'a*', provider: {reference: p}}], providers: [{name: p, provider: vertex}], virtualModels: [{name: v, routing: {conditional: {targets: [{when: 'llmRequest.x', model: ab}, {model: a}]}}}]}\n"))
	f.Add([]byte("binds: [{port: 1, listeners: [{routes: [{policies: {localRateLimit: {conditional: [{condition: 'true', maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}]}, ai: {transformations: {m: 'llmRequest.model'}, promptGuard: {request: [{regex: {rules: [{pattern: 'a+'}]}, scope: [messages]}]}}}, backends: [{ai: {groups: [{providers: [{name: a, provider: {azure: {resourceName: r, resourceType: foundry}}}]}]}}]}]}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, noEnv)
		if err == nil && file == nil {
			t.Fatal("nil file without error")
		}
	})
}

func TestTopLevelMCPSection(t *testing.T) {
	f, err := Parse([]byte("mcp:\n  targets:\n  - {name: a, stdio: {cmd: x}}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Binds) != 1 || *f.Binds[0].Port != 3000 || f.Binds[0].origin != "mcp" {
		t.Fatalf("not desugared into a bind on 3000: %+v", f)
	}
	r := f.Binds[0].Listeners[0].Routes[0]
	if r.Backends[0].Kind != BackendMCP || r.Backends[0].MCP.Targets[0].Name != "a" {
		t.Fatalf("route %+v", r)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"binds:\n- port: 3000\n  listeners: []\nmcp:\n  targets:\n  - {name: a, stdio: {cmd: x}}\n", "mcp.port: port 3000 is already used by binds[0]"},
		{"mcp:\n  targets:\n  - {name: a, stdio: {cmd: x}}\n  - {name: a, stdio: {cmd: y}}\n", `mcp.targets[1].name: target "a" is already defined by targets[0]`},
		{"mcp:\n  gateways: [default]\n  targets:\n  - {name: a, stdio: {cmd: x}}\n", `mcp.gateways[0]: no gateway named "default"`},
		{"gateways: {web: {port: 3000}}\nmcp:\n  port: 3000\n  targets:\n  - {name: a, stdio: {cmd: x}}\n", "mcp.port: port 3000 is already used by gateways.web; attach the mcp section to it with mcp.gateways instead"},
		{"gateways: {web: {port: 80}}\nmcp:\n  port: 3000\n  gateways: web\n  targets:\n  - {name: a, stdio: {cmd: x}}\n", "mcp.gateways: not allowed together with mcp.port"},
		{"mcp: {}\n", "mcp.targets: required"},
	} {
		_, err := Parse([]byte(tc.yaml), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestMCPTargetURLForms(t *testing.T) {
	for _, tc := range []struct{ target, want string }{
		{"mcp: {host: 'http://127.0.0.1:3001/mcp'}", "http://127.0.0.1:3001/mcp"},
		{"mcp: {host: 'https://example.com'}", "https://example.com/mcp"},
		{"mcp: {host: 'example.com:8080'}", "http://example.com:8080/mcp"},
		{"mcp: {host: 10.0.0.1, port: 9000, path: /x}", "http://10.0.0.1:9000/x"},
		{"sse: {host: 10.0.0.1, port: 9000}", "http://10.0.0.1:9000/sse"},
		{"sse: {host: 'http://h:1', path: /events}", "http://h:1/events"},
	} {
		yaml := "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp:\n          targets:\n          - {name: a, " + tc.target + "}\n"
		f, err := Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%s: %v", tc.target, err)
		}
		if got := f.Binds[0].Listeners[0].Routes[0].Backends[0].MCP.Targets[0].URL; got != tc.want {
			t.Errorf("%s: URL %q, want %q", tc.target, got, tc.want)
		}
	}
}

// TestEmptyRewritePathsMeanRoot: agentgateway reads an empty full path as
// "/" and an empty prefix as dropping the matched prefix, which is what "/"
// does.
func TestEmptyRewritePathsMeanRoot(t *testing.T) {
	f, err := Parse([]byte("binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        urlRewrite: {path: {prefix: ''}}\n    - policies:\n        requestRedirect: {path: {full: ''}}\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	routes := f.Binds[0].Listeners[0].Routes
	if p := routes[0].Policies.URLRewrite.Path.Prefix; p == nil || *p != "/" {
		t.Errorf("urlRewrite prefix = %v, want \"/\"", p)
	}
	if p := routes[1].Policies.RequestRedirect.Path.Full; p == nil || *p != "/" {
		t.Errorf("requestRedirect full = %v, want \"/\"", p)
	}
}

// TestBackendRefSpellings: "/name" (agentgateway's key for a file's backend)
// and "name" decode to the same reference.
func TestBackendRefSpellings(t *testing.T) {
	f, err := Parse([]byte("backends:\n- name: b\n  host: 127.0.0.1:9\nbinds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        requestMirror: {backend: {backend: /b}, percentage: 1}\n      backends:\n      - backend: /b\n      - backend: b\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	r := f.Binds[0].Listeners[0].Routes[0]
	for i, rb := range r.Backends {
		if rb.Backend != "b" {
			t.Errorf("backends[%d].backend = %q, want %q", i, rb.Backend, "b")
		}
	}
	if got := r.Policies.RequestMirror.Backend.Backend; got != "b" {
		t.Errorf("requestMirror backend = %q, want %q", got, "b")
	}
}

// TestBlank: a file that holds nothing (no value, or a `binds:` with none
// and no section that makes a bind) is blank; `binds: []` and a file that
// listens through another section are not.
func TestBlank(t *testing.T) {
	for _, tc := range []struct {
		yaml  string
		blank bool
	}{
		{"", true},
		{"  \n# only a comment\n", true},
		{"---\n", true},
		{"...\n", true},
		{"--- # c\n...\n", true},
		{"null\n", true},
		{"~\n", true},
		{"config: {adminAddr: 'off'}\nbinds:\n", true},
		{"binds: ~\n", true},
		{"{}", false},
		{"binds: []\n", false},
		{"config: {adminAddr: 'off'}\n", false},
		{"binds:\nmcp: {port: 3000, targets: [{name: a, stdio: {cmd: x}}]}\n", false},
		{"binds:\n- port: 3000\n  listeners: []\n", false},
	} {
		f, err := Parse([]byte(tc.yaml), noEnv)
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := f.Blank(); got != tc.blank {
			t.Errorf("%q: Blank() = %v, want %v", tc.yaml, got, tc.blank)
		}
	}
}

// TestResourcesNotSupported: a file that is one of the spec's declarative
// resources (or another resource) is refused with one error naming its kind,
// not an "unknown field" per envelope field; a config file with a stray
// kind field is a config file.
func TestResourcesNotSupported(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"apiVersion: gateway.example/v1alpha1\nkind: ProxyBackend\nmetadata: {name: b1}\nspec:\n  static: {host: 127.0.0.1, port: 1}\n",
			"kind: ProxyBackend resources are not supported yet: gateway -f reads a config file (config, binds, backends, policies, ...), not the declarative resources (ProxyBackend, ProxyPolicy, ProxyParameters) (line 2:7)"},
		{"kind: ProxyPolicy\nspec: {}\n", "kind: ProxyPolicy resources are not supported yet"},
		{`{"apiVersion": "x/v1alpha1", "kind": "ProxyParameters", "spec": {}}`, "kind: ProxyParameters resources are not supported yet"},
		{"apiVersion: apps/v1\nkind: Deployment\n", `kind: the file is a resource (kind "Deployment"), not a config file`},
		{"apiVersion: x/v1\nspec: {}\n", `apiVersion: the file is a resource (apiVersion "x/v1"), not a config file`},
		{"kind: ProxyBackend\nbinds: []\n", `kind: unknown field "kind"`},
	} {
		_, err := Parse([]byte(tc.yaml), noEnv)
		if err == nil {
			t.Fatalf("%q: accepted", tc.yaml)
		}
		errs, _ := err.(Errors)
		if len(errs) != 1 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %d errors:\n%v\nwant one holding %q", tc.yaml, len(errs), err, tc.want)
		}
	}
}

// TestByteOrderMark: one leading UTF-8 byte order mark, which YAML allows
// and Windows editors write, is not part of the document, in YAML and JSON;
// positions are counted without it.
func TestByteOrderMark(t *testing.T) {
	const bom = "\ufeff"
	for _, doc := range []string{
		"config: {adminAddr: 'off'}\nbinds: []\n",
		`{"config": {"adminAddr": "off"}, "binds": []}`,
	} {
		f, err := Parse([]byte(bom+doc), noEnv)
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if f.Config == nil || f.Config.AdminAddr == nil || *f.Config.AdminAddr != "off" || f.Binds == nil {
			t.Errorf("%q: decoded %+v", doc, f)
		}
	}
	checkParse(t, bom+"binds:\n- port: 0\n  listeners: []\n", "binds[0].port: must be >= 1 (line 2:9)")
	checkParse(t, bom+"port: 1\n", `port: unknown field "port" (line 1:1)`)
	checkParse(t, bom+bom+"binds: []\n", "unknown field")
}

// TestUTF16IsRefused: a config in UTF-16 (with its byte order mark, as
// Windows PowerShell writes it), little- or big-endian, is refused with
// one error saying it must be UTF-8, not the decoder's view of its bytes.
func TestUTF16IsRefused(t *testing.T) {
	doc := "binds: []\n"
	le, be := []byte{0xff, 0xfe}, []byte{0xfe, 0xff}
	for _, r := range doc {
		le = append(le, byte(r), 0)
		be = append(be, 0, byte(r))
	}
	for name, data := range map[string][]byte{"little-endian": le, "big-endian": be} {
		_, err := Parse(data, noEnv)
		errs, _ := err.(Errors)
		if len(errs) != 1 || !strings.Contains(err.Error(), "UTF-16") || !strings.Contains(err.Error(), "must be UTF-8") {
			t.Errorf("%s: %v; want one error saying the config must be UTF-8", name, err)
		}
		if f, err := ParsePartial(data, noEnv); f != nil || err == nil {
			t.Errorf("%s: ParsePartial decoded %+v, %v", name, f, err)
		}
	}
}
