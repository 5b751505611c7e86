package server

import (
	"net/http"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"

	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
	"github.com/relaygate/gateway/policy/extproc/extproctest"
	"github.com/relaygate/gateway/policy/remoteratelimit/rlstest"
)

// TestConditionalPolicyForms: extAuthz, extProc, transformations and
// remoteRateLimit in their conditional form. The first entry whose condition holds is the one
// that runs (its own service, its own settings), the fallback runs when
// none does, and with no fallback a request no condition holds for is left
// alone by the kind.
func TestConditionalPolicyForms(t *testing.T) {
	up, seen := headerRecorder(t, nil)
	allow := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }}
	deny := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Deny(codes.PermissionDenied) }}
	tag := func(name string) *extproctest.Server {
		return &extproctest.Server{Answer: func(st *extproctest.Stream, m *procv3.ProcessingRequest) []*procv3.ProcessingResponse {
			return []*procv3.ProcessingResponse{extproctest.Reply(st, m, extproctest.Set(map[string]string{"x-proc": name}), nil)}
		}}
	}
	procA, procB := tag("a"), tag("b")
	rls := &rlstest.Server{Limit: 1}
	vars := map[string]string{"UP": up, "ALLOW": extauthztest.Start(t, allow), "DENY": extauthztest.Start(t, deny),
		"PA": extproctest.Start(t, procA), "PB": extproctest.Start(t, procB), "RLS": rlstest.Start(t, rls)}
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /authz}}]
      policies:
        extAuthz:
          conditional:
          - condition: 'request.headers["x-team"] == "blocked"'
            host: '${DENY}'
          - host: '${ALLOW}'
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /proc}}]
      policies:
        extProc:
          conditional:
          - condition: 'request.path.endsWith("/a")'
            host: '${PA}'
            processingOptions: {requestBodyMode: none, responseBodyMode: none}
          - condition: 'request.path.endsWith("/b")'
            host: '${PB}'
            processingOptions: {requestBodyMode: none, responseBodyMode: none}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /tr}}]
      policies:
        transformations:
          conditional:
          - condition: 'request.headers["x-v"] == "1"'
            request: {set: {x-t: '"one"'}}
            response: {set: {x-r: '"one"'}}
          - request: {set: {x-t: '"other"'}}
            response: {set: {x-r: '"other"'}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /limited}}]
      policies:
        remoteRateLimit:
          conditional:
          - condition: 'request.headers["x-tier"] == "free"'
            host: '${RLS}'
            domain: gw
            descriptors: [{entries: [{key: tier, value: '"free"'}]}]
      backends: [{host: '${UP}'}]
`, vars)
	base := tg.url(3000)
	status := func(path string, headers ...string) (int, http.Header) {
		t.Helper()
		resp, _ := get(t, base+path, headers...)
		return resp.StatusCode, resp.Header
	}

	if code, _ := status("/authz", "X-Team", "blocked"); code != 403 {
		t.Errorf("the first entry's service should refuse: %d", code)
	}
	if code, _ := status("/authz", "X-Team", "eng"); code != 200 {
		t.Errorf("the fallback's service should allow: %d", code)
	}
	if len(deny.Checks()) != 1 || len(allow.Checks()) != 1 {
		t.Errorf("checks: deny %d, allow %d; want one each", len(deny.Checks()), len(allow.Checks()))
	}

	for _, tc := range []struct{ path, want string }{{"/proc/a", "a"}, {"/proc/b", "b"}, {"/proc/c", ""}} {
		code, h := status(tc.path)
		if code != 200 || seen().Get("X-Proc") != tc.want || h.Get("X-Proc") != tc.want {
			t.Errorf("%s: %d, upstream x-proc %q, client x-proc %q; want %q both ways", tc.path, code, seen().Get("X-Proc"), h.Get("X-Proc"), tc.want)
		}
	}
	// Each service saw only its own requests, both ways.
	if a, b := len(procA.Streams()), len(procB.Streams()); a != 1 || b != 1 {
		t.Errorf("streams: a %d, b %d; want one each", a, b)
	}
	if n := len(procA.Last(t).Messages()); n != 2 {
		t.Errorf("service a got %d messages, want request and response headers", n)
	}

	// The entry chosen for the request is the one whose response side runs.
	for _, tc := range []struct{ v, want string }{{"1", "one"}, {"2", "other"}} {
		code, h := status("/tr", "X-V", tc.v)
		if code != 200 || seen().Get("X-T") != tc.want || h.Get("X-R") != tc.want {
			t.Errorf("x-v %s: %d, upstream x-t %q, client x-r %q; want %q", tc.v, code, seen().Get("X-T"), h.Get("X-R"), tc.want)
		}
	}

	for i, want := range []int{200, 429} {
		if code, _ := status("/limited", "X-Tier", "free"); code != want {
			t.Errorf("free request %d: %d, want %d", i, code, want)
		}
	}
	for i := range 3 {
		if code, _ := status("/limited", "X-Tier", "paid"); code != 200 {
			t.Errorf("paid request %d (no entry applies): %d", i, code)
		}
	}
	if n := len(rls.Requests()); n != 2 {
		t.Errorf("the rate limit service was asked %d times, want 2 (free requests only)", n)
	}
}
