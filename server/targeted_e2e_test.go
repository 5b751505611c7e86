package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// TestTargetedPoliciesE2E: top-level policies attach to the gateway, a
// listener, routes by name (and rule) and a named backend, below or above
// the inline policies as the spec's precedence says.
func TestTargetedPoliciesE2E(t *testing.T) {
	up, seen := headerRecorder(t, nil)
	tg := startGateway(t, `
policies:
- name: {name: gw-header, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  policy: {requestHeaderModifier: {set: {x-level: gateway}}}
- name: {name: listener-header, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default, listenerName: main}}
  policy: {requestHeaderModifier: {set: {x-level: listener}}}
- name: {name: api-rules, namespace: default}
  target: {route: {name: api, namespace: default}}
  policy: {authorization: {rules: [{require: 'request.headers["x-team"] == "blue"'}]}}
- name: {name: api-header, namespace: default}
  target: {route: {name: api, namespace: default}}
  policy: {requestHeaderModifier: {set: {x-level: route-target}}}
- name: {name: rule-header, namespace: default}
  target: {route: {name: api, namespace: default, ruleName: special}}
  policy: {requestHeaderModifier: {set: {x-level: rule}}}
- name: {name: named-backend, namespace: default}
  target: {backend: {backend: {name: svc, namespace: default}}}
  policy: {requestHeaderModifier: {set: {x-backend: targeted}}}
backends:
- name: svc
  host: '${UP}'
binds:
- port: 3000
  listeners:
  - name: main
    routes:
    - name: api
      matches: [{path: {pathPrefix: /api}}]
      policies:
        authorization: {rules: [{require: 'request.method == "GET"'}]}
      backends: [{backend: svc}]
    - name: api
      ruleName: special
      matches: [{path: {pathPrefix: /special}}]
      backends: [{host: '${UP}'}]
    - name: inline
      matches: [{path: {pathPrefix: /inline}}]
      policies:
        requestHeaderModifier: {set: {x-level: inline}}
      backends: [{host: '${UP}'}]
    - name: plain
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, tc := range []struct {
		desc, method, path, team string
		status                   int
		level, backendHeader     string
	}{
		{"a listener target wins over the gateway's", "GET", "/plain", "", 200, "listener", ""},
		{"inline route policies win over the listener's", "GET", "/inline", "", 200, "inline", ""},
		{"a route target wins over the listener's", "GET", "/api", "blue", 200, "route-target", "targeted"},
		{"require rules of the target and inline both hold: team", "GET", "/api", "red", 403, "", ""},
		{"require rules of the target and inline both hold: method", "POST", "/api", "blue", 403, "", ""},
		{"a rule target wins over the route's", "GET", "/special", "blue", 200, "rule", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tg.url(3000)+tc.path, nil)
			if tc.team != "" {
				req.Header.Set("X-Team", tc.team)
			}
			resp, _ := do(t, req)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != 200 {
				return
			}
			h := seen()
			if h.Get("X-Level") != tc.level || h.Get("X-Backend") != tc.backendHeader {
				t.Errorf("x-level %q x-backend %q, want %q %q", h.Get("X-Level"), h.Get("X-Backend"), tc.level, tc.backendHeader)
			}
		})
	}
}

// TestTargetedPolicyGatewayScopeE2E: a gateway target applies to the
// gateway it names and to no other: each entry of gateways is a gateway of
// its own and the listeners of binds are the gateway "default", so each
// gateway takes its own key only, and a gateway no policy names takes none.
func TestTargetedPolicyGatewayScopeE2E(t *testing.T) {
	tg := startGateway(t, `
gateways:
  pub:
    port: 1
  priv:
    port: 2
    listeners:
    - name: api
  open:
    port: 3
binds:
- port: 4
  listeners:
  - name: main
    routes:
    - policies: {directResponse: {status: 200, body: ok}}
routes:
- gateways: [pub, priv/api, open]
  policies: {directResponse: {status: 200, body: ok}}
policies:
- name: {name: p-priv, namespace: default}
  target: {gateway: {gatewayName: priv, gatewayNamespace: default, listenerName: api}}
  policy: {apiKey: {keys: [k-priv]}}
- name: {name: p-pub, namespace: default}
  target: {gateway: {gatewayName: pub, gatewayNamespace: default}}
  policy: {apiKey: {keys: [k-pub]}}
- name: {name: p-default, namespace: default}
  target: {gateway: {gatewayName: default, gatewayNamespace: default}}
  policy: {apiKey: {keys: [k-default]}}
`, nil)
	for _, tc := range []struct {
		port   int
		key    string
		status int
	}{
		{1, "k-pub", 200}, {1, "k-priv", 401}, {1, "k-default", 401}, {1, "", 401},
		{2, "k-priv", 200}, {2, "k-pub", 401}, {2, "k-default", 401}, {2, "", 401},
		{3, "", 200},
		{4, "k-default", 200}, {4, "k-pub", 401}, {4, "k-priv", 401},
	} {
		var headers []string
		if tc.key != "" {
			headers = []string{"Authorization", "Bearer " + tc.key}
		}
		resp, _ := get(t, tg.url(tc.port)+"/x", headers...)
		if resp.StatusCode != tc.status {
			t.Errorf("port %d key %q: %d, want %d", tc.port, tc.key, resp.StatusCode, tc.status)
		}
	}
}

// A top-level policy whose target matches nothing is a config error, as a
// dangling reference is.
func TestTargetedPolicyDangling(t *testing.T) {
	f := parseConfig(t, `
policies:
- name: {name: p, namespace: default}
  target: {route: {name: nope, namespace: default}}
  policy: {csrf: {}}
binds:
- port: 3000
  listeners:
  - routes:
    - name: api
      backends: [{host: 127.0.0.1:1}]
`, nil)
	err := Validate(f)
	if err == nil || !strings.Contains(err.Error(), "policies[0].target: matches no listener, route or backend") {
		t.Fatalf("err = %v", err)
	}
}

// A backend target names a top-level backend by name and namespace (they
// are in "default"): another namespace names no backend of the file.
func TestTargetedPolicyBackendNamespace(t *testing.T) {
	const cfg = `
policies:
- name: {name: p, namespace: default}
  target: {backend: {backend: {name: svc, namespace: NS}}}
  policy: {requestHeaderModifier: {set: {x-a: b}}}
backends:
- name: svc
  host: 127.0.0.1:1
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{backend: svc}]
`
	for _, ns := range []string{"default", `""`} {
		if err := Validate(parseConfig(t, strings.ReplaceAll(cfg, "NS", ns), nil)); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	}
	err := Validate(parseConfig(t, strings.ReplaceAll(cfg, "NS", "prod"), nil))
	if err == nil || !strings.Contains(err.Error(), "policies[0].target: matches no listener, route or backend") {
		t.Fatalf("namespace prod: err = %v", err)
	}
}

// Two top-level entries of one kind that attach at one level of one place
// have no order between them (agentgateway keeps them in a hash set), so
// one of them would be ignored: a config error naming both, at any level
// and phase, however the target names the place. Entries at different
// levels, on different places, or of authorization (every rule applies)
// are not in conflict.
func TestTargetedPolicySameKindSameTarget(t *testing.T) {
	const head = `
backends:
- name: svc
  host: 127.0.0.1:1
binds:
- port: 3000
  listeners:
  - name: main
    routes:
    - name: api
      ruleName: one
      backends: [{backend: svc}]
    - name: other
      backends: [{host: 127.0.0.1:1}]
policies:
`
	entry := func(name, target, policy string) string {
		return "- name: {name: " + name + ", namespace: default}\n  target: " + target + "\n  policy: " + policy + "\n"
	}
	entryPhase := func(name, target, policy string) string {
		return "- name: {name: " + name + ", namespace: default}\n  target: " + target + "\n  phase: gateway\n  policy: " + policy + "\n"
	}
	const (
		gateway  = "{gateway: {gatewayName: default, gatewayNamespace: default}}"
		byName   = "{gateway: {gatewayName: default, gatewayNamespace: default, listenerName: main}}"
		byPort   = "{gateway: {gatewayName: default, gatewayNamespace: default, port: 3000}}"
		route    = "{route: {name: api, namespace: default}}"
		other    = "{route: {name: other, namespace: default}}"
		rule     = "{route: {name: api, namespace: default, ruleName: one}}"
		backend  = "{backend: {backend: {name: svc, namespace: default}}}"
		keyA     = "{apiKey: {keys: [k-a]}}"
		keyB     = "{apiKey: {keys: [k-b]}}"
		jwtA     = "{jwtAuth: {issuer: a, jwks: {file: '${JWKS}'}}}"
		jwtB     = "{jwtAuth: {mode: permissive, issuer: b, jwks: {file: '${JWKS}'}}}"
		headerA  = "{requestHeaderModifier: {set: {x-a: a}}}"
		headerB  = "{requestHeaderModifier: {set: {x-b: b}}}"
		authzA   = "{authorization: {rules: [{require: 'true'}]}}"
		authzB   = "{authorization: {rules: [{require: 'true'}]}}"
		conflict = ": two entries of one kind on one target have no order, so one would be ignored (keep one)"
	)
	vars := map[string]string{"JWKS": jwttest.NewIssuer(t, "RS256").WriteJWKSFile(t)}
	for _, tc := range []struct {
		desc, policies string
		want           []string // the errors; none: valid
	}{
		{"two apiKey on the gateway", entry("a", gateway, keyA) + entry("b", gateway, keyB),
			[]string{"policies[1].policy.apiKey: also set for this gateway by policies[0]" + conflict}},
		{"two jwtAuth on a route, the later permissive", entry("x", gateway, headerA) + entry("a", route, jwtA) + entry("b", route, jwtB),
			[]string{"policies[2].policy.jwtAuth: also set for this route by policies[1]" + conflict}},
		{"one listener by name and by port", entry("a", byName, keyA) + entry("b", byPort, keyB),
			[]string{"policies[1].policy.apiKey: also set for this listener by policies[0]" + conflict}},
		{"two on a route rule", entry("a", rule, headerA) + entry("b", rule, headerB),
			[]string{"policies[1].policy.requestHeaderModifier: also set for this route rule by policies[0]" + conflict}},
		{"two on a backend", entry("a", backend, headerA) + entry("b", backend, headerB),
			[]string{"policies[1].policy.requestHeaderModifier: also set for this backend by policies[0]" + conflict}},
		{"three in the gateway phase", entryPhase("a", gateway, keyA) + entryPhase("b", gateway, keyB) + entryPhase("c", gateway, keyB),
			[]string{"policies[1].policy.apiKey: also set for this gateway by policies[0]" + conflict, "policies[2].policy.apiKey: also set for this gateway by policies[0]" + conflict}},
		{"authorization rules combine", entry("a", route, authzA) + entry("b", route, authzB), nil},
		{"different levels", entry("a", gateway, keyA) + entry("b", byName, keyB) + entry("c", route, keyA) + entry("d", rule, keyB), nil},
		{"different places", entry("a", route, keyA) + entry("b", other, keyB), nil},
		{"different phases", entry("a", gateway, keyA) + entryPhase("b", gateway, keyB), nil},
		{"different kinds", entry("a", route, keyA) + entry("b", route, headerA), nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := Validate(parseConfig(t, head+tc.policies, vars))
			var got []string
			if err != nil {
				for _, line := range strings.Split(err.Error(), "\n") {
					got = append(got, line[:strings.LastIndex(line, " (line ")])
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestTargetedAuthorizationEntriesCombineE2E: two authorization entries on
// one route both apply, as the rules of every level do.
func TestTargetedAuthorizationEntriesCombineE2E(t *testing.T) {
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - name: api
      policies: {directResponse: {status: 200, body: ok}}
policies:
- name: {name: team, namespace: default}
  target: {route: {name: api, namespace: default}}
  policy: {authorization: {rules: [{require: 'request.headers["x-team"] == "blue"'}]}}
- name: {name: method, namespace: default}
  target: {route: {name: api, namespace: default}}
  policy: {authorization: {rules: [{require: 'request.method == "GET"'}]}}
`, nil)
	for _, tc := range []struct {
		method, team string
		status       int
	}{{"GET", "blue", 200}, {"GET", "red", 403}, {"POST", "blue", 403}} {
		req, _ := http.NewRequest(tc.method, tg.url(3000)+"/x", nil)
		req.Header.Set("X-Team", tc.team)
		if resp, _ := do(t, req); resp.StatusCode != tc.status {
			t.Errorf("%s team %s: %d, want %d", tc.method, tc.team, resp.StatusCode, tc.status)
		}
	}
}
