package server

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

// TestAuthorizationPolicy: HTTP-level CEL rules answer 403 unless a rule
// allows; deny rules win; claims-free rules see the request and source.
func TestAuthorizationPolicy(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        authorization:
          rules:
          - 'request.path.startsWith("/public")'
          - 'request.headers["x-role"] == "admin" && source.address == "127.0.0.1"'
          - deny: 'request.path == "/public/blocked"'
      backends: [{ host: '${UP}' }]
`, map[string]string{"UP": up})
	tests := []struct {
		path, role string
		want       int
	}{
		{"/public/a", "", http.StatusOK},
		{"/private", "", http.StatusForbidden},
		{"/private", "admin", http.StatusOK},
		{"/public/blocked", "admin", http.StatusForbidden},
	}
	for _, tc := range tests {
		var headers []string
		if tc.role != "" {
			headers = []string{"X-Role", tc.role}
		}
		resp, body := get(t, tg.url(3000)+tc.path, headers...)
		if resp.StatusCode != tc.want {
			t.Errorf("%s (role %q): %d %q, want %d", tc.path, tc.role, resp.StatusCode, body, tc.want)
		}
	}
}

// TestDenyRulesFailOpenWithAWarning: a deny rule whose expression fails to
// evaluate does not deny (agentgateway's semantics), so every load says so
// for each deny rule, naming its field; allow and require rules fail
// closed and are not warned about, nor are deny rules guarded as the
// warning advises (a conjunction with has(...) or a key's presence "in" a
// map; membership in a list literal guards nothing).
func TestDenyRulesFailOpenWithAWarning(t *testing.T) {
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        authorization:
          rules:
          - 'true'
          - deny: 'int(request.headers["x-level"]) > 5'
          - require: 'request.method == "GET"'
          - deny: 'has(request.headers.blocked) && request.headers.blocked == "yes"'
          - deny: 'request.headers["x-tier"] == "free" && "x-tier" in request.headers'
          - deny: 'request.method in ["DELETE"] && request.headers["x-owner"] != "me"'
      backends: [{ host: '${UP}' }]
`, map[string]string{"UP": up})
	for level, want := range map[string]int{"9": http.StatusForbidden, "1": http.StatusOK, "abc": http.StatusOK} {
		if resp, body := get(t, tg.url(3000)+"/", "X-Level", level); resp.StatusCode != want {
			t.Errorf("x-level %q: %d %q, want %d", level, resp.StatusCode, body, want)
		}
	}
	for _, h := range [][]string{{"Blocked", "yes"}, {"X-Tier", "free"}} {
		if resp, body := get(t, tg.url(3000)+"/", h...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d %q, want 403", h, resp.StatusCode, body)
		}
	}
	warned := tg.logs.FilterMessageSnippet("deny rule whose expression fails to evaluate").All()
	var fields []any
	for _, w := range warned {
		fields = append(fields, w.ContextMap()["field"])
	}
	const at = "binds[0].listeners[0].routes[0].policies.authorization.rules"
	if want := []any{at + "[1]", at + "[5]"}; !slices.Equal(fields, want) {
		t.Fatalf("warnings about deny rules at %v, want %v", fields, want)
	}
}

func TestAuthorizationBadRuleIsAConfigError(t *testing.T) {
	f, err := config.Parse([]byte(`
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        mcpAuthorization:
          rules: ['mcp.tool.name ==']
      backends: [{ host: 127.0.0.1:1 }]
`), func(string) (string, bool) { return "", false })
	if err == nil || f != nil {
		t.Fatal("a rule that does not compile was accepted")
	}
	if want := "binds[0].listeners[0].routes[0].policies.mcpAuthorization.rules[0]: invalid CEL expression"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
}

// TestAuthorizationRequestBody: a rule reading request.body sees the body
// the client sent (read whole, then forwarded whole); one over
// maxBufferSize is answered 413.
func TestAuthorizationRequestBody(t *testing.T) {
	up, last := bodyRecorder(t, nil)
	tg := startGateway(t, `
frontendPolicies:
  http: {maxBufferSize: 64}
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        authorization:
          rules: ['json(request.body).user == "alice"']
      backends: [{ host: '${UP}' }]
`, map[string]string{"UP": up})
	for _, tc := range []struct {
		body    string
		chunked bool
		want    int
	}{
		{`{"user": "alice"}`, false, http.StatusOK},
		{`{"user": "alice", "n": 1}`, true, http.StatusOK},
		{`{"user": "bob"}`, false, http.StatusForbidden},
		{`{"user": "alice", "padding": "` + strings.Repeat(".", 64) + `"}`, false, http.StatusRequestEntityTooLarge},
	} {
		_, before := last()
		resp, _ := postBody(t, tg.url(3000)+"/", tc.body, tc.chunked)
		seen, now := last()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.body, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusOK && (now != before+1 || string(seen.body) != tc.body) {
			t.Errorf("%s: the upstream got %q", tc.body, seen.body)
		}
		if tc.want != http.StatusOK && now != before {
			t.Errorf("%s: the upstream was called", tc.body)
		}
	}
}
