package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestSensitiveHeader decides by the words of a header name.
func TestSensitiveHeader(t *testing.T) {
	tests := []struct {
		desc string
		name string
		want bool
	}{
		{"authorization", "Authorization", true},
		{"proxy authorization", "proxy-authorization", true},
		{"cookie", "Cookie", true},
		{"set-cookie", "Set-Cookie", true},
		{"x-api-key", "X-API-Key", true},
		{"api-key", "api-key", true},
		{"apikey", "x-apikey", true},
		{"auth token", "X-Auth-Token", true},
		{"underscores", "x_access_token", true},
		{"aws session token", "X-Amz-Security-Token", true},
		{"subscription key", "Ocp-Apim-Subscription-Key", true},
		{"gitlab", "Private-Token", true},
		{"webhook signature", "X-Hub-Signature", true},
		{"azure sas signature", "sig", true},
		{"signed, not a signature", "x-signed-by", false},
		{"plain", "x-env", false},
		{"identity, not a credential", "X-Authenticated-User", false},
		{"keep-alive", "Keep-Alive", false},
		{"pseudo-header", ":authority", false},
		{"camelCase query parameter", "accessToken", true},
		{"camelCase api key", "apiKey", true},
		{"PascalCase", "ClientSecret", true},
		{"a digit before the word", "oauth2Token", true},
		{"an acronym before the word", "APIKey", true},
		{"acronyms and words", "AWSAccessKeyId", true},
		{"camelCase, then a dash", "x-sessionId", true},
		{"camelCase, not a credential", "pageSize", false},
		{"OAuth is one word", "X-OAuth-Scopes", false},
		{"a word that holds a sensitive one", "monkeyBusiness", false},
		{"upper-case run", "X-API-KEY", true},
		{"a word longer than any sensitive one", "x-averyveryverylongwordindeed", false},
		{"token within a word", "x-apitoken", true},
		{"token within a long word", "x-upstream-authtoken", true},
		{"a long word holding a token", "x-averyveryverylongtokenindeed", true},
		{"jwt and assertion", "x-jwt-assertion", true},
		{"jwt within a word", "X-Forwarded-Jwt", true},
		{"client assertion", "client_assertion", true},
		{"secret within a word", "x-clientsecret", true},
		{"author is no auth", "X-Author", false},
		{"signal is no sig", "x-signal", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := SensitiveHeader(tc.name); got != tc.want {
				t.Fatalf("SensitiveHeader(%q) = %v, want %v", tc.name, got, tc.want)
			}
			if n := testing.AllocsPerRun(10, func() { SensitiveHeader(tc.name) }); n != 0 {
				t.Errorf("SensitiveHeader(%q) allocates %v times", tc.name, n)
			}
		})
	}
}

func BenchmarkSensitiveHeader(b *testing.B) {
	names := []string{"Authorization", "X-Request-Id", "accessToken", "Content-Type", "X-Amz-Security-Token", "pageSize"}
	for b.Loop() {
		for _, n := range names {
			SensitiveHeader(n)
		}
	}
}

// TestConfigDumpRedacts: header values a config sets or matches for
// sensitive headers, and an MCP target's URL password, are redacted in the
// dump, which still parses as a config; other values stay.
func TestConfigDumpRedacts(t *testing.T) {
	route := func(s string) string {
		return "binds:\n- port: 1\n  listeners:\n  - routes:\n    - " + s + "\n"
	}
	tests := []struct {
		desc   string
		yaml   string
		want   []string // fragments of the compact dump
		secret string
	}{
		{"request set", route(`policies: {requestHeaderModifier: {set: {Authorization: "Bearer s3cret"}}}`), []string{`"set":{"Authorization":"\u003credacted\u003e"}`}, "s3cret"},
		{"request add, others kept", route(`policies: {requestHeaderModifier: {add: {x-api-key: s3cret, x-env: prod}, remove: [cookie]}}`), []string{`"add":{"x-api-key":"\u003credacted\u003e","x-env":"prod"}`, `"remove":["cookie"]`}, "s3cret"},
		{"response set-cookie", route(`policies: {responseHeaderModifier: {set: {set-cookie: "sid=s3cret"}}}`), []string{`"set-cookie":"\u003credacted\u003e"`}, "s3cret"},
		{"route backend", route("backends: [{host: 'h:1', policies: {requestHeaderModifier: {set: {x-auth-token: s3cret}}}}]"), []string{`"x-auth-token":"\u003credacted\u003e"`}, "s3cret"},
		{"named backend", "backends:\n- name: b\n  host: h:1\n  policies: {requestHeaderModifier: {set: {proxy-authorization: s3cret}}}\n", []string{`"proxy-authorization":"\u003credacted\u003e"`}, "s3cret"},
		{"exact header match", route(`matches: [{headers: [{name: x-tenant, value: {exact: t1}}, {name: X-Api-Key, value: {exact: s3cret}}]}]`), []string{`{"name":"x-tenant","value":{"exact":"t1"}}`, `{"name":"X-Api-Key","value":{"exact":"\u003credacted\u003e"}}`}, "s3cret"},
		{"regex header match", route(`matches: [{headers: [{name: authorization, value: {regex: "Bearer s3cret.*"}}]}]`), []string{`{"name":"authorization","value":{"regex":"\u003credacted\u003e"}}`}, "s3cret"},
		{"query match", route(`matches: [{query: [{name: page, value: {exact: v1}}, {name: api_key, value: {exact: s3cret}}, {name: accessToken, value: {regex: "s3cret.*"}}]}]`), []string{`{"name":"page","value":{"exact":"v1"}}`, `{"name":"api_key","value":{"exact":"\u003credacted\u003e"}}`, `{"name":"accessToken","value":{"regex":"\u003credacted\u003e"}}`}, "s3cret"},
		{"headers with token or jwt within a name", route(`policies: {requestHeaderModifier: {set: {x-apitoken: s3cret, x-upstream-authtoken: s3cret2, x-jwt-assertion: s3cret3, x-env: prod}}}`), []string{`"x-apitoken":"\u003credacted\u003e"`, `"x-upstream-authtoken":"\u003credacted\u003e"`, `"x-jwt-assertion":"\u003credacted\u003e"`, `"x-env":"prod"`}, "s3cret"},
		{"tracing endpoint password", "config: {tracing: {otlpEndpoint: 'http://u:s3cret@h:4317'}}\n", []string{`"otlpEndpoint":"http://u:xxxxx@h:4317"`}, "s3cret"},
		{"tracing endpoint without password", "config: {tracing: {otlpEndpoint: 'http://h:4317/x?a=1'}}\n", []string{`"otlpEndpoint":"http://h:4317/x?a=1"`}, ""},
		{"jwks url password", route(`policies: {jwtAuth: {issuer: i, jwks: {url: 'https://u:s3cret@h/keys?token=s3cret2'}}}`), []string{`"url":"https://u:xxxxx@h/keys?token=%3Credacted%3E"`}, "s3cret"},
		{"stdio args", route("backends: [{mcp: {targets: [{name: t, stdio: {cmd: npx, args: [server, --api-key, s3cret, '--token=s3cret2', -v, --port, '8080', --client-secret, --verbose]}}]}}]"), []string{`"args":["server","--api-key","\u003credacted\u003e","--token=\u003credacted\u003e","-v","--port","8080","--client-secret","--verbose"]`}, "s3cret"},
		{"stdio env", route("backends: [{mcp: {targets: [{name: t, stdio: {cmd: npx, env: {TOKEN: s3cret, MODE: prod}}}]}}]"), []string{`"env":{"MODE":"\u003credacted\u003e","TOKEN":"\u003credacted\u003e"}`}, "s3cret"},
		{"MCP target password", route("backends: [{mcp: {targets: [{name: t, mcp: {host: 'http://u:s3cret@h:1/mcp'}}]}}]"), []string{`"host":"http://u:xxxxx@h:1/mcp"`}, "s3cret"},
		{"MCP target SAS signature", route("backends: [{mcp: {targets: [{name: t, mcp: {host: 'http://h:1/mcp?sv=2022&sig=s3cret'}}]}}]"), []string{`sig=%3Credacted%3E`, `sv=2022`}, "s3cret"},
		{"MCP target query token", route("backends: [{mcp: {targets: [{name: t, mcp: {host: 'http://h:1/mcp?api_key=s3cret&v=2'}}]}}]"), []string{`"host":"http://h:1/mcp?api_key=%3Credacted%3E\u0026v=2"`}, "s3cret"},
		{"MCP target camelCase query tokens", route("backends: [{mcp: {targets: [{name: t, mcp: {host: 'http://h:1/mcp?accessToken=s3cret&apiKey=s3cret2&pageSize=2'}}]}}]"), []string{`accessToken=%3Credacted%3E`, `apiKey=%3Credacted%3E`, `pageSize=2`}, "s3cret"},
		{"camelCase header", route(`policies: {requestHeaderModifier: {set: {xApiKey: s3cret, pageSize: "2"}}}`), []string{`"xApiKey":"\u003credacted\u003e"`, `"pageSize":"2"`}, "s3cret"},
		{"backend key", route(`policies: {backendAuth: {key: s3cret}}`), []string{`"backendAuth":{"key":"\u003credacted\u003e"}`}, "s3cret"},
		{"backend key with location", route(`policies: {backendAuth: {key: {value: s3cret, location: {header: {name: x-key}}}}}`), []string{`"value":"\u003credacted\u003e"`}, "s3cret"},
		{"backend key file shown", route(`policies: {backendAuth: {key: {file: /run/key}}}`), []string{`"key":{"file":"/run/key"}`}, ""},
		{"backend credentials", route(`policies: {backendAuth: {passthrough: {}, credentials: [{location: {header: {name: x-key}}, key: s3cret}]}}`), []string{`"key":"\u003credacted\u003e"`}, "s3cret"},
		{"aws keys", route(`policies: {backendAuth: {aws: {accessKeyId: AKIAEXAMPLE, secretAccessKey: s3cret, sessionToken: s3cret2}}}`), []string{`"accessKeyId":"AKIAEXAMPLE"`, `"secretAccessKey":"\u003credacted\u003e"`, `"sessionToken":"\u003credacted\u003e"`}, "s3cret"},
		{"azure client secret", route(`policies: {backendAuth: {azure: {explicitConfig: {clientSecret: {tenant_id: t, client_id: c, client_secret: s3cret}}}}}`), []string{`"client_secret":"\u003credacted\u003e"`, `"client_id":"c"`}, "s3cret"},
		{"gcp credential", route(`policies: {backendAuth: {gcp: {credential: '{"private_key": "s3cret"}'}}}`), []string{`"credential":"\u003credacted\u003e"`}, "s3cret"},
		{"ai provider key", route("backends: [{ai: {name: a, provider: {openAI: {}}, policies: {backendAuth: {key: s3cret}}}}]"), []string{`"key":"\u003credacted\u003e"`}, "s3cret"},
		{"guard service key", route(`policies: {ai: {promptGuard: {request: [{openAIModeration: {policies: {backendAuth: {key: s3cret}}}}]}}}`), []string{`"key":"\u003credacted\u003e"`}, "s3cret"},
		{"webhook header expression", route(`policies: {ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}, headers: {authorization: '"Bearer s3cret"', x-tenant: 'request.headers["x-tenant"]'}}}]}}}`), []string{`"authorization":"\"\u003credacted\u003e\""`, `"x-tenant":"request.headers[\"x-tenant\"]"`}, "s3cret"},
		{"transformation request set and add", route(`policies: {transformations: {request: {set: {authorization: 'jwt.token', x-tenant: 'request.headers["x-tenant"]'}, add: {cookie: '"session=s3cret2"'}}}}`), []string{`"authorization":"\"\u003credacted\u003e\""`, `"cookie":"\"\u003credacted\u003e\""`, `"x-tenant":"request.headers[\"x-tenant\"]"`}, "s3cret"},
		{"transformation response set and add", route(`policies: {transformations: {response: {set: {set-cookie: '"sid=s3cret"'}, add: {x-auth-token: '"s3cret2"'}}}}`), []string{`"set-cookie":"\"\u003credacted\u003e\""`, `"x-auth-token":"\"\u003credacted\u003e\""`}, "s3cret"},
		{"extAuthz check request header", route(`policies: {extAuthz: {host: 'a:1', protocol: {http: {addRequestHeaders: {authorization: '"Bearer s3cret"', x-tenant: 'request.headers["x-tenant"]'}}}}}`), []string{`"authorization":"\"\u003credacted\u003e\""`, `"x-tenant":"request.headers[\"x-tenant\"]"`}, "s3cret"},
		{"extProc gRPC metadata", route(`policies: {extProc: {host: 'p:1', metadataContext: {agentgateway.dev.grpc_initial_metadata: {x-api-key: 'request.headers["x-api-key"]', x-tenant: 'request.headers["x-tenant"]'}, gateway: {key: 'jwt.sub'}}}}`), []string{`"x-api-key":"\"\u003credacted\u003e\""`, `"x-tenant":"request.headers[\"x-tenant\"]"`, `"gateway":{"key":"jwt.sub"}`}, ""},
		{"webhook forwarded header match", route(`policies: {ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}, forwardHeaderMatches: [{name: x-api-key, value: {exact: s3cret}}]}}]}}}`), []string{`{"name":"x-api-key","value":{"exact":"\u003credacted\u003e"}}`}, "s3cret"},
		{"rejection headers", route(`policies: {ai: {promptGuard: {request: [{regex: {rules: []}, rejection: {headers: {set: {x-auth-token: s3cret}}}}]}}}`), []string{`"x-auth-token":"\u003credacted\u003e"`}, "s3cret"},
		{"llm api key", "llm: {models: [{name: m, provider: openAI, params: {apiKey: s3cret}}]}\n", []string{`"apiKey":"\u003credacted\u003e"`}, "s3cret"},
		{"llm api key file", "llm: {models: [{name: m, provider: openAI, params: {apiKey: {file: /run/k}}}]}\n", []string{`"apiKey":{"file":"/run/k"}`}, ""},
		{"llm provider key and auth", "llm: {providers: [{name: p, provider: openAI, params: {apiKey: s3cret}, defaults: {auth: {key: s3cret2}}}], models: []}\n", []string{`"apiKey":"\u003credacted\u003e"`, `"auth":{"key":"\u003credacted\u003e"}`}, "s3cret"},
		{"llm model headers", "llm: {models: [{name: m, provider: openAI, auth: {key: s3cret}, requestHeaders: {set: {authorization: s3cret2}}, matches: [{headers: [{name: x-api-key, value: {regex: s3cret3}}]}]}]}\n", []string{`"auth":{"key":"\u003credacted\u003e"}`, `"authorization":"\u003credacted\u003e"`, `{"name":"x-api-key","value":{"regex":"\u003credacted\u003e"}}`}, "s3cret"},
		{"inline jwks private members", route(`policies: {jwtAuth: {issuer: i, jwks: '{"keys":[{"kty":"EC","crv":"P-256","x":"pubx","y":"puby","d":"s3cretd"},{"kty":"oct","k":"s3cretk"}]}'}}`), []string{`\"x\":\"pubx\"`, `\"kty\":\"oct\"`}, "s3cret"},
		{"inline single jwk", route(`policies: {jwtAuth: {issuer: i, jwks: '{"kty":"RSA","n":"pubn","e":"AQAB","d":"s3cretd","p":"s3cretp"}'}}`), []string{`\"n\":\"pubn\"`}, "s3cret"},
		{"MCP target without password", route("backends: [{mcp: {targets: [{name: t, sse: {host: 'http://u@h:1/sse'}}]}}]"), []string{`"host":"http://u@h:1/sse"`}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			checkDump(t, tc.yaml, tc.want, tc.secret)
		})
	}
}

// TestLLMExampleDumpsRedacted: the API keys the LLM examples take from the
// environment are redacted in the dump, which still parses.
func TestLLMExampleDumpsRedacted(t *testing.T) {
	for _, name := range []string{"llm-basic.yaml", "llm-cost-routing.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "llm", name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(data, exampleEnv)
		if err != nil {
			t.Fatal(err)
		}
		dump, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"sk-test", "replace-me"} {
			if strings.Contains(string(dump), secret) {
				t.Errorf("%s: the dump shows %q:\n%s", name, secret, dump)
			}
		}
		if !strings.Contains(string(dump), `"apiKey":"\u003credacted\u003e"`) {
			t.Errorf("%s: no redacted apiKey in the dump:\n%s", name, dump)
		}
		if _, err := Parse(dump, noEnv); err != nil {
			t.Errorf("%s: the dump does not parse back: %v", name, err)
		}
	}
}

// TestConfigDumpRedactsEveryHeaderPlace: a config that sets a sensitive
// header's value at every place a config may (header modifiers,
// transformations, extAuthz's check request, extProc's gRPC metadata, a
// webhook guard; plain and conditional forms; listener, route, backend,
// targeted and llm policies) shows none of them in the dump, and keeps the
// values of other headers beside them.
func TestConfigDumpRedactsEveryHeaderPlace(t *testing.T) {
	// places holds each policy kind that sets header values, with a
	// sensitive header ("SECRET") and another ("KEEP") in each place.
	places := map[string]string{
		"transformations": `{request: {set: {authorization: '"Bearer SECRET"', x-a: 'request.headers["KEEP"]'}, add: {cookie: '"sid=SECRET"'}}, response: {set: {set-cookie: '"sid=SECRET"'}, add: {x-auth-token: '"SECRET"'}}}`,
		"extAuthz":        `{host: 'a:1', protocol: {http: {addRequestHeaders: {authorization: '"Bearer SECRET"', x-a: 'request.headers["KEEP"]'}}}}`,
		"extProc":         `{host: 'p:1', metadataContext: {agentgateway.dev.grpc_initial_metadata: {authorization: '"Bearer SECRET"', x-a: 'request.headers["KEEP"]'}}}`,
	}
	conditional := map[string]string{
		"transformations": `{conditional: [{condition: 'true', request: {set: {x-api-key: '"SECRET"'}}}, {response: {add: {set-cookie: '"SECRET"'}}}]}`,
		"extAuthz":        `{conditional: [{condition: 'true', host: 'a:1', protocol: {http: {addRequestHeaders: {x-api-key: '"SECRET"'}}}}, {host: 'a:1', protocol: {http: {addRequestHeaders: {proxy-authorization: '"SECRET"'}}}}]}`,
		"extProc":         `{conditional: [{condition: 'true', host: 'p:1', metadataContext: {agentgateway.dev.grpc_initial_metadata: {x-api-key: '"SECRET"'}}}, {host: 'p:1'}]}`,
	}
	policies := func(forms map[string]string) string {
		var b strings.Builder
		b.WriteString("{")
		for _, kind := range []string{"transformations", "extAuthz", "extProc"} {
			b.WriteString(kind + ": " + forms[kind] + ", ")
		}
		return strings.TrimSuffix(b.String(), ", ") + "}"
	}
	modifier := `{set: {authorization: SECRET, x-a: KEEP}, add: {cookie: SECRET}}`
	webhook := `{ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}, headers: {authorization: '"Bearer SECRET"', x-a: 'request.headers["KEEP"]'}}}], response: [{regex: {rules: []}, rejection: {headers: {set: {set-cookie: SECRET}}}}]}}}`
	var targeted strings.Builder
	for i, kind := range []string{"transformations", "extAuthz", "extProc"} {
		fmt.Fprintf(&targeted, "- name: {name: p%d, namespace: default}\n  target: {gateway: {gatewayName: default, gatewayNamespace: default}}\n  phase: gateway\n  policy: {%s: %s}\n", i, kind, places[kind])
		fmt.Fprintf(&targeted, "- name: {name: r%d, namespace: default}\n  target: {route: {name: cond, namespace: default}}\n  policy: {%s: %s}\n", i, kind, conditional[kind])
	}
	yaml := "binds:\n- port: 1\n  listeners:\n  - policies: " + policies(places) + "\n    routes:\n" +
		"    - name: plain\n      policies: " + strings.TrimSuffix(policies(places), "}") + ", requestHeaderModifier: " + modifier + ", responseHeaderModifier: " + modifier + "}\n" +
		"      backends: [{host: 'h:1', policies: {requestHeaderModifier: " + modifier + "}}]\n" +
		"    - name: cond\n      policies: " + policies(conditional) + "\n" +
		"    - name: guard\n      policies: " + webhook + "\n" +
		"backends:\n- name: b\n  host: h:1\n  policies: {requestHeaderModifier: " + modifier + ", responseHeaderModifier: " + modifier + "}\n" +
		"policies:\n" + targeted.String() +
		"llm:\n  port: 2\n  policies: " + policies(places) + "\n" +
		"  models: [{name: m, provider: openAI, requestHeaders: " + modifier + ", responseHeaders: " + modifier + "}]\n"
	f, err := Parse([]byte(yaml), noEnv)
	if err != nil {
		t.Fatalf("%v\n%s", err, yaml)
	}
	dump, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(dump), "SECRET") {
		t.Errorf("the dump shows a secret:\n%s", dump)
	}
	// Every place kept its other header: the rule hid the credentials
	// only. 3 kinds at the listener, the route and llm, 3 targeted, 5
	// modifiers on the route, its backend and the named backend, 2 on the
	// model, the webhook.
	if got, want := strings.Count(string(dump), "KEEP"), 3*3+3+5+2+1; got != want {
		t.Errorf("the dump keeps %d other header values, want %d:\n%s", got, want, dump)
	}
	if _, err := Parse(dump, noEnv); err != nil {
		t.Errorf("the dump does not parse back: %v\n%s", err, dump)
	}
}

// TestHeaderMapsRedact holds every map of the config to the redaction rule:
// a map of header values by name is of a type that redacts those of
// sensitive headers in the dump (HeaderValues, HeaderExpressions,
// HeaderValueExpressions, ExtProcMetadataContext), and any other map of
// strings is listed here as holding no header values. A new map field
// fails until it is one or the other.
func TestHeaderMapsRedact(t *testing.T) {
	redacting := map[reflect.Type]bool{
		reflect.TypeFor[HeaderValues]():           true,
		reflect.TypeFor[HeaderExpressions]():      true,
		reflect.TypeFor[HeaderValueExpressions](): true,
		reflect.TypeFor[ExtProcMetadataContext](): true,
	}
	notHeaders := map[string]string{
		"AIPolicy.Transformations":        "body fields",
		"AIPolicy.FinalTransformations":   "body fields",
		"AIPolicy.ModelAliases":           "model names",
		"LLMModel.FinalTransformation":    "body fields",
		"LLMModelPolicies.Transformation": "body fields",
		"ExtAuthzGRPC.Context":            "context_extensions",
		"ExtAuthzGRPC.Metadata":           "metadata_context",
		"ExtAuthzHTTP.Metadata":           "CEL's extauthz variable",
		"ExtProc.RequestAttributes":       "attributes",
		"ExtProc.ResponseAttributes":      "attributes",
		"Transform.Metadata":              "CEL's metadata variable",
		"MCPStdio.Env":                    "environment, shown by name only (MCPTarget.MarshalJSON)",
		"AIPolicy.Routes":                 "route types by path",
		"LogLevel.Modules":                "log levels",
		"AccessLogPolicy.Add":             "log fields",
		"AccessLogFields.Add":             "log fields",
		"TracingFields.Add":               "span attributes",
		"FrontendTracing.Attributes":      "span attributes",
		"FrontendTracing.Resources":       "resource attributes",
		"Tracing.Headers":                 "SecretString values, all redacted",
	}
	seen := map[reflect.Type]bool{}
	used := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		for field := range typ.Fields() {
			if !field.IsExported() || field.Tag.Get("json") == "-" {
				continue
			}
			ft := field.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.String && !redacting[ft] {
				elem := ft.Elem()
				if elem.Kind() == reflect.Map {
					elem = elem.Elem()
				}
				if elem.Kind() == reflect.String {
					name := typ.Name() + "." + field.Name
					if _, ok := notHeaders[name]; !ok {
						t.Errorf("%s (%s) is a map of strings: make it a header type that redacts (HeaderValues, HeaderExpressions, HeaderValueExpressions) or list it here as holding no header values", name, ft)
					}
					used[name] = true
				}
			}
			if ft.Kind() == reflect.Map {
				walk(ft.Elem())
				continue
			}
			walk(field.Type)
		}
	}
	walk(reflect.TypeFor[File]())
	for name := range notHeaders {
		if !used[name] {
			t.Errorf("%s is listed but is no map of strings the config holds: drop it", name)
		}
	}
}

// TestRedactCEL: an expression's string and bytes literals are redacted in
// every form of literal, but for the keys and parsed values that name what
// it reads, and the result compiles to the same type.
func TestRedactCEL(t *testing.T) {
	tests := []struct{ expr, want string }{
		{`request.headers["authorization"] == "Bearer s3cret"`, `request.headers["authorization"] == "<redacted>"`},
		{`request.headers[?"x-a"].orValue('s3cret') == jwt["sub"]`, `request.headers[?"x-a"].orValue("<redacted>") == jwt["sub"]`},
		{`{"token": "s3cret", 'b': 1}["token"]`, `{"token": "<redacted>", 'b': 1}["token"]`},
		{`"""tri"ple s3cret""" + '''s3cret''' + r"raw\" + R's3cret' + "esc\"aped s3cret"`, `"<redacted>" + "<redacted>" + "<redacted>" + "<redacted>" + "<redacted>"`},
		{`b"s3cret" == bytes(request.body) || B's3cret' == b"" || br"s3cret" == b'x' || bR'''s3cret''' == b"x"`, `b"<redacted>" == bytes(request.body) || b"<redacted>" == b"" || b"<redacted>" == b"<redacted>" || b"<redacted>" == b"<redacted>"`},
		{`request.path.replace("s3cret", "") // s3cret in a comment` + "\n" + `!= ""`, `request.path.replace("<redacted>", "") ` + "\n" + `!= ""`},
		{`"Bearer s3cret-%s %.2f 100%%".format([jwt.sub, 1.0])`, `"<redacted>%s%.2f".format([jwt.sub, 1.0])`},
		{`cidr("10.0.0.0/8").containsIP(ip("10.1.2.3")) && duration("5s") > duration("1s") && timestamp("2024-01-01T00:00:00Z") < timestamp(request.headers["date"]) && int("5") == 5 && bool("true")`,
			`cidr("10.0.0.0/8").containsIP(ip("10.1.2.3")) && duration("5s") > duration("1s") && timestamp("2024-01-01T00:00:00Z") < timestamp(request.headers["date"]) && int("5") == 5 && bool("true")`},
		{`string("s3cret") == request.headers["é"] + "s3cret"`, `string("<redacted>") == request.headers["é"] + "<redacted>"`},
		{`"s3cret" in jwt.roles && request.path.matches("^/s3cret") && request.path.regexReplace("s3cret", "x") != ""`, `"<redacted>" in jwt.roles && request.path.matches("<redacted>") && request.path.regexReplace("<redacted>", "<redacted>") != ""`},
		{`jwt.sub.with(s, s + "s3cret").size() > 0 && [1].exists(x, string(x) == "s3cret")`, `jwt.sub.with(s, s + "<redacted>").size() > 0 && [1].exists(x, string(x) == "<redacted>")`},
		{`request.path`, `request.path`},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			got := redactCEL(tc.expr)
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if again := redactCEL(got); again != got {
				t.Errorf("redacted again: %s", again)
			}
			_, a1, err := CompileLLMExpressionAst(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			_, a2, err := CompileLLMExpressionAst(got)
			if err != nil {
				t.Fatalf("the redacted expression does not compile: %v", err)
			}
			if a1.OutputType().String() != a2.OutputType().String() {
				t.Errorf("type %s, redacted %s", a1.OutputType(), a2.OutputType())
			}
		})
	}
}

// TestConfigDumpRedactsCELLiterals: a secret written as a literal in any
// kind of CEL expression (a transformation's header, body and metadata, a
// condition, an authorization rule, a log field, a sampling or delay
// expression, a rate limit descriptor, an LLM transformation) is not in the
// dump, which keeps each expression's shape and parses back.
func TestConfigDumpRedactsCELLiterals(t *testing.T) {
	yaml := `
frontendPolicies:
  accessLog: {filter: 'request.headers["x-key"] != "s3cret01"', add: {who: 'request.headers["x-tenant"] + "s3cret02"'}}
  tracing: {host: 'c:4317', randomSampling: 'request.headers["x-key"] == "s3cret03"', filter: 'request.path != "s3cret04"', attributes: {a: '"s3cret05"'}}
binds:
- port: 1
  listeners:
  - routes:
    - policies:
        authorization: {rules: ['request.headers["x-api-key"] == "s3cret06"', {deny: 'jwt.sub == "s3cret07"'}]}
        transformations:
          request:
            set: {x-upstream: '"s3cret08"'}
            body: 'string(request.body).replace("s3cret09", "x")'
            metadata: {m: '"s3cret10"'}
            replace: '{"x-a": "s3cret11"}'
        localRateLimit: {conditional: [{condition: 'request.headers["x-key"] == "s3cret12"', maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}]}
        delay: {duration: 'request.headers["x-key"] == "s3cret13" ? 1 : 2'}
        remoteRateLimit: {host: 'r:1', domain: d, descriptors: [{entries: [{key: k, value: '"s3cret14"'}]}]}
      backends: [{host: 'h:1'}]
llm:
  port: 2
  models: [{name: m, provider: openAI, transformation: {user: '"s3cret15"'}, authorization: {rules: ['jwt.sub != "s3cret16"']}}]
`
	f, err := Parse([]byte(yaml), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	dump, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 16; i++ {
		if secret := fmt.Sprintf("s3cret%02d", i); strings.Contains(string(dump), secret) {
			t.Errorf("the dump shows %s:\n%s", secret, dump)
		}
	}
	for _, w := range []string{
		`"filter":"request.headers[\"x-key\"] != \"\u003credacted\u003e\""`,
		`{"allow":"request.headers[\"x-api-key\"] == \"\u003credacted\u003e\""}`,
		`"body":"string(request.body).replace(\"\u003credacted\u003e\", \"\u003credacted\u003e\")"`,
		`"replace":"{\"x-a\": \"\u003credacted\u003e\"}"`,
	} {
		if !strings.Contains(string(dump), w) {
			t.Errorf("the dump lacks %s:\n%s", w, dump)
		}
	}
	if _, err := Parse(dump, noEnv); err != nil {
		t.Errorf("the dump does not parse back: %v\n%s", err, dump)
	}
}

// TestCELTypesRedact holds every string type of the config to the
// redaction rule: a CEL expression type marshals with its literals
// redacted (redactCEL), and any other is listed here as holding no
// expression. A new string type fails until it is one or the other.
func TestCELTypesRedact(t *testing.T) {
	expressions := map[reflect.Type]bool{
		reflect.TypeFor[CELExpression]():       true,
		reflect.TypeFor[CELCondition]():        true,
		reflect.TypeFor[ValueExpression]():     true,
		reflect.TypeFor[ValueCondition]():      true,
		reflect.TypeFor[TelemetryExpression](): true,
		reflect.TypeFor[TelemetryCondition]():  true,
		reflect.TypeFor[RateLimitCost]():       true,
	}
	notExpressions := map[reflect.Type]string{
		reflect.TypeFor[LLMRouteType](): "route type names",
		reflect.TypeFor[ALPNProtocol](): "protocol names",
		reflect.TypeFor[ContentScope](): "scope names",
		reflect.TypeFor[SecretString](): "redacted whole",
	}
	seen := map[reflect.Type]bool{}
	used := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if seen[typ] {
			return
		}
		seen[typ] = true
		if typ.Kind() == reflect.String && typ.Name() != "string" {
			used[typ] = true
			if expressions[typ] {
				v := reflect.New(typ).Elem()
				v.SetString(`"s3cret" == request.path`)
				out, err := json.Marshal(v.Interface())
				if err != nil || strings.Contains(string(out), "s3cret") {
					t.Errorf("%s marshals as %s (%v), want its literal redacted", typ, out, err)
				}
			} else if _, ok := notExpressions[typ]; !ok {
				t.Errorf("%s is a string type: give it a MarshalJSON that redacts its literals (redactCEL) and list it among the expressions, or list it here as holding none", typ)
			}
			return
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for field := range typ.Fields() {
			if field.IsExported() && field.Tag.Get("json") != "-" {
				walk(field.Type)
			}
		}
	}
	walk(reflect.TypeFor[File]())
	for typ := range expressions {
		if !used[typ] {
			t.Errorf("%s is listed but the config holds none", typ)
		}
	}
	for typ := range notExpressions {
		if !used[typ] {
			t.Errorf("%s is listed but the config holds none", typ)
		}
	}
}

// checkDump parses yaml, dumps it as /config_dump does, and checks that
// the dump holds every one of want, never shows secret (when not ""), and
// parses back as a config.
func checkDump(t *testing.T, yaml string, want []string, secret string) {
	t.Helper()
	f, err := Parse([]byte(yaml), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	dump, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, dump); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(compact.String(), w) {
			t.Errorf("dump lacks %s:\n%s", w, compact.String())
		}
	}
	if secret != "" && strings.Contains(string(dump), secret) {
		t.Errorf("dump shows %q:\n%s", secret, dump)
	}
	if _, err := Parse(dump, noEnv); err != nil {
		t.Errorf("the dump does not parse back: %v\n%s", err, dump)
	}
}
