package server

import (
	"net/http"
	"strings"
	"testing"
)

// TestTargetedPoliciesE2E: top-level policies attach to the gateway, a
// listener, routes by name (and rule) and a named backend, below or above
// the inline policies as the spec's precedence says.
func TestTargetedPoliciesE2E(t *testing.T) {
	up, seen := headerRecorder(t, nil)
	tg := startGateway(t, `
policies:
- name: {name: gw-header, namespace: default}
  target: {gateway: {gatewayName: gateway, gatewayNamespace: default}}
  policy: {requestHeaderModifier: {set: {x-level: gateway}}}
- name: {name: listener-header, namespace: default}
  target: {gateway: {gatewayName: gateway, gatewayNamespace: default, listenerName: main}}
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
