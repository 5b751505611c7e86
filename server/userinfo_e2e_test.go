package server

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// TestUserinfoInRequestTargetRefused: userinfo in an absolute-form request
// target ("http://evil:pw@host/x") is refused with 400 and nothing reaches
// the upstream, whatever the route does with Authorization (the client's
// field, a route's requestHeaderModifier, the JWT passthrough), on retried
// and mirrored routes, for upgrades, without a Host field and with Expect:
// 100-continue. fasthttp's URI parser turns userinfo into an Authorization
// field when it writes the request, which replaced all of those (RFC 9110
// 4.2.4: a sender must not put userinfo in a request target, and a
// recipient should treat it as an error). A '@' outside the authority, or
// an origin-form target that looks like an authority, is no userinfo and
// is forwarded without an Authorization field it did not have.
func TestUserinfoInRequestTargetRefused(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	token := iss.Sign(iss.Claims("alice"))
	const cfg = `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /retry}}]
      policies: {retry: {attempts: 2, codes: [503]}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /mirror}}]
      policies: {requestMirror: {backend: {host: '${MIRROR}'}, percentage: 1}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /set}}]
      policies: {requestHeaderModifier: {set: {authorization: Bearer route}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /passthrough}}]
      policies:
        jwtAuth: {issuer: '${ISS}', jwks: {file: '${JWKS_FILE}'}}
        backendAuth: {passthrough: {}}
      backends: [{host: '${UP}'}]
    - backends: [{host: '${UP}'}]
`
	const frontendRaw = "frontendPolicies: {http: {pathNormalization: raw}}\n"
	bearer := "Authorization: Bearer " + token + "\r\n"
	tests := []struct {
		desc     string
		req      string // raw request; the upstream's address replaces UP
		method   string
		want     int
		mirrored bool // the route mirrors: the mirror must see what the upstream sees
		// For a forwarded request: the target and Authorization the upstream
		// must see (normalized and raw path handling may differ in target).
		wantTarget, wantTargetRaw, wantAuth string
	}{
		{desc: "user and password replacing the client's Authorization", req: "GET http://evil:pw@{UP}/x HTTP/1.1\r\nHost: {UP}\r\nAuthorization: Bearer client\r\n\r\n", want: 400},
		{desc: "user alone", req: "GET http://evil@{UP}/x HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 400},
		{desc: "password alone", req: "GET http://:pw@{UP}/x HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 400},
		{desc: "userinfo before a query, no path", req: "GET http://evil:pw@{UP}?q=1 HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 400},
		{desc: "userinfo, no Host field (HTTP/1.0)", req: "GET http://evil:pw@{UP}/x HTTP/1.0\r\n\r\n", want: 400},
		{desc: "userinfo, no Host field (HTTP/1.1)", req: "GET http://evil:pw@{UP}/x HTTP/1.1\r\n\r\n", want: 400},
		{desc: "userinfo on a retried route", req: "GET http://evil:pw@{UP}/retry HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 400},
		{desc: "userinfo on a mirrored route", req: "GET http://evil:pw@{UP}/mirror HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 400, mirrored: true},
		{desc: "userinfo against a route's requestHeaderModifier", req: "GET http://evil:pw@{UP}/set HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 400},
		{desc: "userinfo against the JWT passthrough", req: "GET http://evil:pw@{UP}/passthrough HTTP/1.1\r\nHost: {UP}\r\n" + bearer + "\r\n", want: 400},
		{desc: "userinfo on an upgrade", req: "GET http://evil:pw@{UP}/ws HTTP/1.1\r\nHost: {UP}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", want: 400},
		{desc: "userinfo with Expect: 100-continue is refused before the body", req: "POST http://evil:pw@{UP}/x HTTP/1.1\r\nHost: {UP}\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", method: "POST", want: 400},

		{desc: "absolute form keeps the client's Authorization", req: "GET http://{UP}/x HTTP/1.1\r\nHost: {UP}\r\nAuthorization: Bearer client\r\n\r\n", want: 200, wantTarget: "/x", wantAuth: "Bearer client"},
		{desc: "@ in the path is no userinfo", req: "GET http://{UP}/a@b:c HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 200, wantTarget: "/a@b:c"},
		{desc: "@ in the query is no userinfo", req: "GET http://{UP}/x?u=evil:pw@h HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 200, wantTarget: "/x?u=evil:pw@h"},
		{desc: "origin form that looks like an authority, no Host (HTTP/1.0)", req: "GET //evil:pw@{UP}/x HTTP/1.0\r\n\r\n", want: 200, wantTarget: "/evil:pw@{UP}/x", wantTargetRaw: "//evil:pw@{UP}/x"},
		{desc: "origin form that looks like a URI, no Host (HTTP/1.0)", req: "GET //evil:pw@{UP}/x://y HTTP/1.0\r\n\r\n", want: 200, wantTarget: "/evil:pw@{UP}/x:/y", wantTargetRaw: "//evil:pw@{UP}/x://y"},
		{desc: "route's requestHeaderModifier on absolute form", req: "GET http://{UP}/set HTTP/1.1\r\nHost: {UP}\r\nAuthorization: Bearer client\r\n\r\n", want: 200, wantTarget: "/set", wantAuth: "Bearer route"},
		{desc: "JWT passthrough on absolute form", req: "GET http://{UP}/passthrough HTTP/1.1\r\nHost: {UP}\r\n" + bearer + "\r\n", want: 200, wantTarget: "/passthrough", wantAuth: "Bearer " + token},
		{desc: "mirrored absolute form without userinfo", req: "GET http://{UP}/mirror HTTP/1.1\r\nHost: {UP}\r\n\r\n", want: 200, mirrored: true, wantTarget: "/mirror"},
	}
	for _, tr := range e2eTransports {
		for _, mode := range []string{"normalize", "raw"} {
			t.Run(string(tr)+"/"+mode, func(t *testing.T) {
				up, seen := rawHTTPUpstream(t, okAnswer)
				mirror, mirrorSeen := rawHTTPUpstream(t, okAnswer)
				yaml := cfg
				if mode == "raw" {
					yaml += frontendRaw
				}
				tg := startGatewayWith(t, yaml, map[string]string{
					"UP": up, "MIRROR": mirror, "ISS": iss.Iss, "JWKS_FILE": iss.WriteJWKSFile(t),
				}, tr)
				var controls atomic.Int64
				control := func(mirrored bool) string {
					path := "/control" + strconv.FormatInt(controls.Add(1), 10)
					if mirrored {
						path = "/mirror" + path
					}
					return path
				}
				upstreams := func(mirrored bool) []<-chan message {
					if mirrored {
						return []<-chan message{seen, mirrorSeen}
					}
					return []<-chan message{seen}
				}
				for _, tc := range tests {
					t.Run(tc.desc, func(t *testing.T) {
						t.Cleanup(func() {
							if t.Failed() {
								// Leave no stray request to the next case.
								syncUpstreams(t, tg.addr(3000), control(true), upstreams(true)...)
							}
						})
						method := tc.method
						if method == "" {
							method = "GET"
						}
						c, br := dialRaw(t, tg.addr(3000))
						m := roundTripRaw(t, c, br, method, strings.ReplaceAll(tc.req, "{UP}", up))
						if m.status() != tc.want {
							t.Errorf("status %d (%q), want %d", m.status(), m.body, tc.want)
						}
						if tc.want != 200 {
							// Nothing was forwarded: the next request each
							// upstream sees is a control request sent now.
							for _, m := range syncUpstreams(t, tg.addr(3000), control(tc.mirrored), upstreams(tc.mirrored)...) {
								t.Errorf("forwarded: %q with Authorization %q", m.line, m.fields.values("Authorization"))
							}
							return
						}
						if t.Failed() {
							return
						}
						want := tc.wantTarget
						if mode == "raw" && tc.wantTargetRaw != "" {
							want = tc.wantTargetRaw
						}
						want = strings.ReplaceAll(want, "{UP}", up)
						check := func(who string, got message) {
							t.Helper()
							if got.target() != want {
								t.Errorf("%s got target %q, want %q", who, got.target(), want)
							}
							if auth := got.fields.values("Authorization"); tc.wantAuth == "" && len(auth) > 0 || tc.wantAuth != "" && (len(auth) != 1 || auth[0] != tc.wantAuth) {
								t.Errorf("%s got Authorization %q, want %q", who, auth, tc.wantAuth)
							}
						}
						check("upstream", nextSeen(t, seen))
						if tc.mirrored {
							check("mirror", nextSeen(t, mirrorSeen))
						}
					})
				}
			})
		}
	}
}
