package config

import (
	"bytes"
	"encoding/json"
	"github.com/relaygate/gateway/config/decode"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// roundTrip parses yaml, writes the result as JSON the way /config_dump
// does, parses that JSON again and checks that it is the same
// configuration. The dump redacts the literals of CEL expressions
// (redactCEL): it is checked to parse back into a configuration whose dump
// is the same, and the rest is checked with the literals kept. It returns
// the dump with the literals kept.
func roundTrip(t *testing.T, name string, yaml []byte) []byte {
	t.Helper()
	f1, err := Parse(yaml, noEnv)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	redacted, err := json.MarshalIndent(f1, "", "  ")
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	f3, err := Parse(redacted, noEnv)
	if err != nil {
		t.Fatalf("%s: the dump does not parse back:\n%v\ndump:\n%s", name, err, redacted)
	}
	if again, err := json.MarshalIndent(f3, "", "  "); err != nil || !bytes.Equal(again, redacted) {
		t.Fatalf("%s: the dump of the dump differs (%v):\n%s\n----\n%s", name, err, redacted, again)
	}
	redactCELLiterals = false
	defer func() { redactCELLiterals = true }()
	dump, err := json.MarshalIndent(f1, "", "  ")
	if err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	f2, err := Parse(dump, noEnv)
	if err != nil {
		t.Fatalf("%s: the dump does not parse back:\n%v\ndump:\n%s", name, err, dump)
	}
	// The settings, not where the two documents put them.
	c1, c2 := *f1, *f2
	c1.pos, c2.pos = decode.Positions{}, decode.Positions{}
	if !reflect.DeepEqual(c1, c2) {
		dump2, _ := json.MarshalIndent(f2, "", "  ")
		t.Fatalf("%s: the dump parses into another configuration\nfirst dump:\n%s\nsecond dump:\n%s", name, dump, dump2)
	}
	dump2, err := json.MarshalIndent(f2, "", "  ")
	if err != nil || !bytes.Equal(dump, dump2) {
		t.Fatalf("%s: the dump of the dump differs (%v):\n%s\n----\n%s", name, err, dump, dump2)
	}
	return dump
}

// TestConfigDumpRoundTrip: the JSON /config_dump serves (json.Marshal of the
// parsed File) is in the file format: fed back to the gateway it parses into
// the same configuration. It covers the shipped examples and a file using
// most fields.
func TestConfigDumpRoundTrip(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples found: %v", err)
	}
	// gateways.yaml: the dump writes the gateways, routes and sections as
	// the file did, and parsed again they make the same binds.
	files = append(files, filepath.Join("testdata", "roundtrip.yaml"), filepath.Join("testdata", "llm_roundtrip.yaml"), filepath.Join("testdata", "gateways.yaml"))
	// The LLM examples without inline secrets (those are dumped redacted:
	// TestConfigDumpRedacts).
	llm, err := filepath.Glob(filepath.Join("testdata", "llm", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range llm {
		if b := filepath.Base(name); b != "llm-basic.yaml" && b != "llm-cost-routing.yaml" {
			files = append(files, name)
		}
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, name, data)
		})
	}
}

// TestValueMarshalJSON: each value type with its own decoder writes the
// form that decoder reads back, and that form is the one a user would write.
func TestValueMarshalJSON(t *testing.T) {
	route := func(policies string) string {
		return "binds:\n- port: 1\n  listeners:\n  - routes:\n    - policies:\n        " + policies + "\n"
	}
	tests := []struct {
		desc string
		yaml string
		want string // a fragment of the compact dump
	}{
		{"log level", "config: {logging: {level: info}}", `"logging":{"level":"info"}`},
		{"log level with modules", "config: {logging: {level: 'info,access=warn'}}", `"level":"info,access=warn"`},
		{"log level list, modules sorted", "config: {logging: {level: [WARN, mcp=off, access=debug]}}", `"level":"warn,access=debug,mcp=off"`},
		{"log level modules only", "config: {logging: {level: access=error}}", `"level":"access=error"`},
		{"log level empty", "config: {logging: {level: ''}}", `"level":""`},
		{"worker threads auto", "config: {workerThreads: auto}", `"workerThreads":"auto"`},
		{"worker threads number", "config: {workerThreads: 4}", `"workerThreads":4`},
		{"worker threads numeric string", "config: {workerThreads: '8'}", `"workerThreads":8`},
		{"duration", "config: {connectionTerminationDeadline: 90s}", `"connectionTerminationDeadline":"1m30s"`},
		{"body with control characters", route(`directResponse: {status: 200, body: "a\x01b\tc\u2028"}`), `"body":"a\u0001b\tc\u2028"`},
		{"body as bytes", route(`directResponse: {status: 200, body: [104, 105]}`), `"body":"hi"`},
		{"body as bytes, not UTF-8", route(`directResponse: {status: 200, body: [255, 0, 65]}`), `"body":[255,0,65]`},
		{"exact match with a control character", "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches:\n      - headers: [{name: x, value: {exact: \"a\\x01\"}}]\n", `"value":{"exact":"a\u0001"}`},
		{"regex with a non-ASCII letter", "binds:\n- port: 1\n  listeners:\n  - routes:\n    - matches:\n      - path: {regex: \"/caf\u00e9\\\\d\"}\n", `"path":{"regex":"/café\\d"}`},
		{"host rewrite", route(`urlRewrite: {authority: {host: "h\u00e9"}}`), `"authority":{"host":"hé"}`},
		{"path rewrite", route(`urlRewrite: {path: {full: "/\x01"}}`), `"path":{"full":"/\u0001"}`},
		{"jwt single issuer form kept", route(`jwtAuth: {issuer: i, jwks: {file: k}}`), `"jwtAuth":{"issuer":"i","jwks":{"file":"k"}}`},
		{"jwt providers form kept", route(`jwtAuth: {providers: [{issuer: i, jwks: {file: k}}]}`), `"jwtAuth":{"providers":[{"issuer":"i","jwks":{"file":"k"}}]}`},
		{"no required claims stays none", route(`jwtAuth: {issuer: i, jwks: {file: k}, jwtValidationOptions: {requiredClaims: []}}`), `"jwtValidationOptions":{"requiredClaims":[]}`},
		{"default required claims stay default", route(`jwtAuth: {issuer: i, jwks: {file: k}, jwtValidationOptions: {}}`), `"jwtValidationOptions":{}`},
		{"rule with a control character", route(`authorization: {rules: ["request.path == \"\x01\""]}`), `"rules":[{"allow":"request.path == \"\u0001\""}]`},
		{"ai backend groups form kept", "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - ai: {groups: [{providers: [{name: a, provider: {openAI: {}}}]}]}\n", `"ai":{"groups":[{"providers":[{"name":"a","provider":{"openAI":{}}}]}]}`},
		{"ai backend provider form kept", "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - ai: {name: a, provider: {bedrock: {}}}\n", `"ai":{"name":"a","provider":{"bedrock":{}}}`},
		{"rate limit list", route(`localRateLimit: [{maxTokens: 2, tokensPerFill: 1, fillInterval: 90s}]`), `"localRateLimit":[{"maxTokens":2,"tokensPerFill":1,"fillInterval":"1m30s"}]`},
		{"rate limit conditional", route(`localRateLimit: {conditional: [{condition: 'true', maxTokens: 2, tokensPerFill: 1, fillInterval: 1s, type: tokens}]}`), `"localRateLimit":{"conditional":[{"condition":"true","maxTokens":2,"tokensPerFill":1,"fillInterval":"1s","type":"tokens"}]}`},
		{"backend key file, short form kept", route(`backendAuth: {key: {file: /k}}`), `"backendAuth":{"key":{"file":"/k"}}`},
		{"backend key with location", route(`backendAuth: {key: {value: {file: /k}, location: {header: {name: x-key}}}}`), `"backendAuth":{"key":{"location":{"header":{"name":"x-key"}},"value":{"file":"/k"}}}`},
		{"copilot auth", route(`backendAuth: copilot`), `"backendAuth":"copilot"`},
		{"aws session name forms", route(`backendAuth: {aws: {assumeRole: {roleArn: r, sessionName: fixed-name}}}`), `"sessionName":"fixed-name"`},
		{"regex rules", route(`ai: {promptGuard: {request: [{regex: {rules: [{builtin: ssn}, {pattern: '\d{3}'}]}}]}}`), `"rules":[{"builtin":"ssn"},{"pattern":"\\d{3}"}]`},
		{"model provider forms", "llm:\n  providers: [{name: p, provider: groq}]\n  models: [{name: a, provider: openai}, {name: b, provider: {reference: p}}]\n", `"models":[{"name":"a","provider":"openAI"},{"name":"b","provider":{"reference":"p"}}]`},
		{"stdio clear_env kept", "binds:\n- port: 1\n  listeners:\n  - routes:\n    - backends:\n      - mcp: {targets: [{name: t, stdio: {cmd: x, clear_env: true}}]}\n", `"clear_env":true`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dump := roundTrip(t, tc.desc, []byte(tc.yaml))
			var compact bytes.Buffer
			if err := json.Compact(&compact, dump); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(compact.String(), tc.want) {
				t.Errorf("dump lacks %s:\n%s", tc.want, compact.String())
			}
		})
	}
}
