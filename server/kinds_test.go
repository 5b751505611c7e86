package server

import (
	"reflect"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// Every policy a route or listener can hold is a routeKind, and every one a
// backend can hold is a backendKind: a kind the file accepts is never
// compiled by nobody.
func TestEveryPolicyFieldIsAKind(t *testing.T) {
	route := map[string]bool{}
	for _, k := range routeKinds {
		if route[k.name] {
			t.Errorf("routeKinds lists %q twice", k.name)
		}
		route[k.name] = true
	}
	for _, c := range []struct {
		level any
		known map[string]bool
	}{
		{config.RoutePolicies{}, route},
		{config.ListenerPolicy{}, route},
		{config.BackendPolicies{}, backendKinds},
	} {
		lt := reflect.TypeOf(c.level)
		for i := range lt.NumField() {
			f := lt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Type == reflect.TypeFor[config.Unsupported]() || name == "" {
				continue
			}
			if !c.known[name] {
				t.Errorf("%s.%s (%s) is not a kind the compiler knows", lt.Name(), f.Name, name)
			}
		}
	}
}

// Every setting of llm.policies reaches the section's route (llmBind):
// each is copied there, or is guardrails, which the models read.
func TestLLMPoliciesServed(t *testing.T) {
	served := map[string]bool{"jwtAuth": true, "authorization": true, "cors": true, "basicAuth": true, "apiKey": true,
		"extAuthz": true, "transformations": true, "localRateLimit": true, "guardrails": true, "remoteRateLimit": true, "extProc": true}
	lt := reflect.TypeOf(config.LLMPolicies{})
	for i := range lt.NumField() {
		f := lt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Type == reflect.TypeFor[config.Unsupported]() {
			continue
		}
		if !served[name] {
			t.Errorf("llm.policies.%s is decoded but llmBind does not pass it on", name)
		}
	}
}

// A kind's error about a field below it names that field's whole path and
// the field's line, whatever the type of error its constructor returned
// (localRateLimit's are *decode.FieldError with a path of their own).
func TestKindErrorNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		desc, policies, want string
	}{
		{"a list entry", `
        localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s}, {maxTokens: 2000000000000000000, tokensPerFill: 1, fillInterval: 1s}]`,
			"binds[0].listeners[0].routes[0].policies.localRateLimit[1].maxTokens: must be at most 2^60 (1152921504606846976) (line 7:91)"},
		{"a conditional entry", `
        localRateLimit:
          conditional:
          - condition: 'true'
            maxTokens: 2000000000000000000
            tokensPerFill: 1
            fillInterval: 1s`,
			"binds[0].listeners[0].routes[0].policies.localRateLimit.conditional[0].maxTokens: must be at most 2^60 (1152921504606846976) (line 10:24)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := Validate(parseConfig(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:`+tc.policies+`
      backends: [{host: 127.0.0.1:1}]
`, nil))
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v\nwant %s", err, tc.want)
			}
		})
	}
}

// A `tokens` bucket of localRateLimit counts LLM tokens, which only ai
// backends' exchanges are charged: on a route without one it would stay
// full and never refuse anything, so it is refused, as other settings a
// route would not apply are, naming the bucket's type. It used to load and
// do nothing (x-ratelimit-remaining stayed full). A `tokens` descriptor of
// remoteRateLimit likewise: it was never sent. Routes with an ai backend,
// and the llm section's, keep theirs.
func TestTokenBucketNeedsAnAIBackend(t *testing.T) {
	const ai = `[{ai: {name: p, hostOverride: 127.0.0.1:1, provider: {openAI: {}}}}]`
	for _, tc := range []struct {
		desc, cfg, want string
	}{
		{"a host backend's route", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s}, {maxTokens: 10, tokensPerFill: 1, fillInterval: 1s, type: tokens}]
      backends: [{host: 127.0.0.1:1}]
`, "binds[0].listeners[0].routes[0].policies.localRateLimit[1].type: counts LLM tokens, which only an ai backend's exchanges are charged, and this route has none: the bucket would never refuse anything (remove it, or count requests) (line 7:"},
		{"a conditional entry of a direct response's route", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        directResponse: {status: 200}
        localRateLimit:
          conditional:
          - {condition: 'true', maxTokens: 10, tokensPerFill: 1, fillInterval: 1s, type: tokens}
          - {maxTokens: 10, tokensPerFill: 1, fillInterval: 1s}
`, "binds[0].listeners[0].routes[0].policies.localRateLimit.conditional[0].type: counts LLM tokens"},
		{"a policy attached to a gateway: it covers routes with and without ai", `
policies:
- name: {name: limit, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  policy: {localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s, type: tokens}]}
binds:
- port: 3000
  listeners:
  - routes: [{backends: [{host: 127.0.0.1:1}]}]
`, ""},
		{"a policy targeting a route", `
policies:
- name: {name: limit, namespace: default}
  target: {route: {name: r, namespace: default}}
  policy: {localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s, type: tokens}]}
binds:
- port: 3000
  listeners:
  - routes: [{name: r, backends: [{host: 127.0.0.1:1}]}]
`, "policies[0].policy.localRateLimit[0].type: counts LLM tokens"},
		{"an ai backend's route", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s, type: tokens}]
      backends: ` + ai + `
`, ""},
		{"an ai backend beside a host backend", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s, type: tokens}]
      backends: [{host: 127.0.0.1:1}, ` + strings.Trim(ai, "[]") + `]
`, ""},
		{"a remoteRateLimit tokens descriptor on a host backend's route", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        remoteRateLimit:
          host: 127.0.0.1:1
          domain: d
          descriptors:
          - entries: [{key: k, value: '"v"'}]
          - entries: [{key: k, value: '"v"'}]
            type: tokens
      backends: [{host: 127.0.0.1:1}]
`, "binds[0].listeners[0].routes[0].policies.remoteRateLimit.descriptors[1].type: counts LLM tokens, which only an ai backend's exchanges are charged, and this route has none: the descriptor would never be sent (remove it, or count requests) (line 13:"},
		{"a conditional remoteRateLimit's tokens descriptor", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        remoteRateLimit:
          conditional:
          - condition: 'true'
            host: 127.0.0.1:1
            domain: d
            descriptors: [{entries: [{key: k, value: '"v"'}], type: tokens}]
      backends: [{host: 127.0.0.1:1}]
`, "binds[0].listeners[0].routes[0].policies.remoteRateLimit.conditional[0].descriptors[0].type: counts LLM tokens"},
		{"a remoteRateLimit tokens descriptor on an ai backend's route", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        remoteRateLimit: {host: 127.0.0.1:1, domain: d, descriptors: [{entries: [{key: k, value: '"v"'}], type: tokens}]}
      backends: ` + ai + `
`, ""},
		{"a remoteRateLimit tokens descriptor attached to a gateway", `
policies:
- name: {name: limit, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  policy: {remoteRateLimit: {host: 127.0.0.1:1, domain: d, descriptors: [{entries: [{key: k, value: '"v"'}], type: tokens}]}}
binds:
- port: 3000
  listeners:
  - routes: [{backends: [{host: 127.0.0.1:1}]}]
`, ""},
		{"the llm section", `
llm:
  port: 4000
  policies:
    localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s, type: tokens}]
  models:
  - {name: m, provider: openAI, params: {apiKey: k, hostOverride: "127.0.0.1:1"}}
`, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := Validate(parseConfig(t, tc.cfg, nil))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("err = %v\nwant %s...", err, tc.want)
			}
		})
	}
}

// A urlRewrite or requestRedirect replacing the matched path prefix needs a
// pathPrefix match to take the prefix from, as the Gateway API has it
// (ReplacePrefixMatch with a PathPrefix match only): on a route that
// matches by exact path or regex alone it is refused, naming the field. It
// used to load, and every request was answered 500. A route with a prefix
// match among others keeps agentgateway's per-match outcome
// (TestPrefixRewriteMixedMatches), and so does a rewrite attached to a
// gateway, which covers the routes that match by prefix.
func TestPrefixRewriteNeedsAPrefixMatch(t *testing.T) {
	const up = `[{host: 127.0.0.1:1}]`
	for _, tc := range []struct {
		desc, cfg, want string
	}{
		{"urlRewrite on a regex match", `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {regex: "/re/(.*)"}}]
      policies: {urlRewrite: {path: {prefix: /x}}}
      backends: ` + up + `
`, "binds[0].listeners[0].routes[0].policies.urlRewrite.path.prefix: replaces the path prefix the request matched, and none of the route's matches is a pathPrefix match (exact and regex matches have no prefix to replace): match by pathPrefix, or give the full path (line 7:"},
		{"urlRewrite on an exact match", `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /ex}}, {path: {regex: "/ey.*"}, headers: [{name: x, value: {exact: "1"}}]}]
      policies: {urlRewrite: {path: {prefix: /y}}}
      backends: ` + up + `
`, "binds[0].listeners[0].routes[0].policies.urlRewrite.path.prefix: replaces the path prefix"},
		{"requestRedirect on a regex match", `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {regex: "/rr/.*"}}]
      policies: {requestRedirect: {path: {prefix: /new}}}
`, "binds[0].listeners[0].routes[0].policies.requestRedirect.path.prefix: replaces the path prefix"},
		{"a route backend's requestRedirect", `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /shop}}]
      backends: [{host: 127.0.0.1:1, policies: {requestRedirect: {path: {prefix: /store}}}}]
`, "binds[0].listeners[0].routes[0].backends[0].policies.requestRedirect.path.prefix: replaces the path prefix"},
		{"a named backend's requestRedirect names the route", `
backends:
- name: shop
  host: 127.0.0.1:1
  policies: {requestRedirect: {path: {prefix: /store}}}
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /shop}}]
      backends: [{backend: shop}]
`, "backends[0].policies.requestRedirect.path.prefix: replaces the path prefix the request matched, and none of the route's matches is a pathPrefix match (exact and regex matches have no prefix to replace): match by pathPrefix, or give the full path (route binds[0].listeners[0].routes[0]) (line 5:"},
		{"a policy targeting the route", `
policies:
- name: {name: rw, namespace: default}
  target: {route: {name: r, namespace: default}}
  policy: {urlRewrite: {path: {prefix: /x}}}
binds:
- port: 3000
  listeners:
  - routes: [{name: r, matches: [{path: {regex: "/r.*"}}], backends: ` + up + `}]
`, "policies[0].policy.urlRewrite.path.prefix: replaces the path prefix the request matched, and none of the route's matches is a pathPrefix match (exact and regex matches have no prefix to replace): match by pathPrefix, or give the full path (route binds[0].listeners[0].routes[0])"},
		{"a full path on a regex match", `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {regex: "/re/(.*)"}}]
      policies: {urlRewrite: {path: {full: /x}}, requestRedirect: {path: {full: /y}}}
      backends: ` + up + `
`, ""},
		{"a prefix match among others", `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /ex}}, {path: {pathPrefix: /aa}}]
      policies: {urlRewrite: {path: {prefix: /x}}}
      backends: ` + up + `
`, ""},
		{"a match without a path is a prefix match of /", `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{headers: [{name: x-h, value: {exact: "1"}}]}]
      policies: {urlRewrite: {path: {prefix: /z}}}
      backends: ` + up + `
`, ""},
		{"no matches is a prefix match of /", `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {requestRedirect: {path: {prefix: /z}}}
`, ""},
		{"a rewrite attached to a gateway covers the routes that match by prefix", `
policies:
- name: {name: rw, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  policy: {urlRewrite: {path: {prefix: /x}}}
binds:
- port: 3000
  listeners:
  - routes:
    - {matches: [{path: {pathPrefix: /p}}], backends: ` + up + `}
    - {matches: [{path: {exact: /e}}], backends: ` + up + `}
`, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := Validate(parseConfig(t, tc.cfg, nil))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Fatalf("err = %v\nwant %s...", err, tc.want)
			}
		})
	}
}
