package server

import (
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// TestPathNormalization: the request path is normalized before routing and
// forwarded normalized (frontendPolicies.http.pathNormalization, default
// normalize): dot segments removed (RFC 3986 5.2.4), repeated slashes
// merged, unreserved characters decoded and escapes upper-cased, and an
// encoded "/" or "\", a literal "\" or a broken escape refused with 400. So
// "/raw/../admin" is the admin route's request, not one the /raw route
// forwards for an upstream to resolve into /admin. Route matching (prefix,
// exact, the :path pseudo-header) and the prefix rewrite see the normalized
// path; the query goes as it came. With pathNormalization: raw the path is
// matched and forwarded byte for byte, refused nowhere.
func TestPathNormalization(t *testing.T) {
	const cfg = `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /admin}}]
      policies: {directResponse: {status: 403, body: admin}}
    - matches: [{path: {pathPrefix: /rw}}]
      policies: {urlRewrite: {path: {prefix: /v1}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {exact: /exact/a}}]
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /hdr}, headers: [{name: ':path', value: {exact: /hdr/x?k=v}}]}]
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /raw}}]
      backends: [{host: '${UP}'}]
    - policies: {directResponse: {status: 404, body: fallback}}
`
	type tcase struct {
		desc   string
		target string
		want   int
		body   string // the answer's body, when the gateway answers itself
		up     string // the target the upstream must see, when forwarded
	}
	normalized := []tcase{
		{desc: "dot-dot out of an open prefix reaches the admin route", target: "/raw/../admin", want: 403, body: "admin"},
		{desc: "encoded dot-dot", target: "/raw/%2e%2e/admin", want: 403, body: "admin"},
		{desc: "half-encoded dot-dot, upper case", target: "/raw/.%2E/admin/x", want: 403, body: "admin"},
		{desc: "dot-dot behind a repeated slash", target: "/raw//..//admin", want: 403, body: "admin"},
		{desc: "absolute form", target: "http://h.example/raw/../admin", want: 403, body: "admin"},
		{desc: "dot segment", target: "/raw/./x", want: 200, up: "/raw/x"},
		{desc: "repeated slashes", target: "//raw//x//", want: 200, up: "/raw/x/"},
		{desc: "dot-dot above the root", target: "/../../raw/x", want: 200, up: "/raw/x"},
		{desc: "final dot-dot keeps the slash", target: "/raw/x/y/..", want: 200, up: "/raw/x/"},
		{desc: "final dot keeps the slash", target: "/raw/x/.", want: 200, up: "/raw/x/"},
		{desc: "unreserved decoded, escapes upper-cased", target: "/raw/%7euser/%41%2d%5F%2E/%c3%a9%20", want: 200, up: "/raw/~user/A-_./%C3%A9%20"},
		{desc: "query untouched", target: "/raw/./x?q=/../a%2F&b=%7e&c=\\", want: 200, up: "/raw/x?q=/../a%2F&b=%7e&c=\\"},
		{desc: "empty query kept", target: "/raw//x?", want: 200, up: "/raw/x?"},
		{desc: "ordinary path goes as it came", target: "/raw/a-b_c.d~e/f;g=h/%20/..x/.y?x=1", want: 200, up: "/raw/a-b_c.d~e/f;g=h/%20/..x/.y?x=1"},
		{desc: "exact match after normalizing", target: "/exact/./b/../a", want: 200, up: "/exact/a"},
		{desc: ":path sees the normalized path", target: "/hdr//x?k=v", want: 200, up: "/hdr/x?k=v"},
		{desc: "prefix rewrite of the normalized path", target: "/rw/../rw/a/./b?k=v", want: 200, up: "/v1/a/b?k=v"},
		{desc: "absolute form forwarded normalized", target: "http://h.example/raw//x/%7E?q", want: 200, up: "/raw/x/~?q"},
		{desc: "encoded slash", target: "/raw/a%2Fb", want: 400},
		{desc: "encoded slash, lower case", target: "/raw/a%2fb", want: 400},
		{desc: "encoded backslash", target: "/raw/a%5Cb", want: 400},
		{desc: "encoded backslash, lower case", target: "/raw/a%5c..%5cadmin", want: 400},
		{desc: "literal backslash", target: "/raw\\..\\admin", want: 400},
		{desc: "broken escape", target: "/raw/%zz", want: 400},
		{desc: "escape cut short", target: "/raw/a%4", want: 400},
		{desc: "escape that would build one", target: "/raw/%%32%65%%32%65/admin", want: 400},
		{desc: "encoded slash in the query is no path's", target: "/raw/x?p=a%2Fb", want: 200, up: "/raw/x?p=a%2Fb"},
		{desc: "absolute form without a path: the query is no path", target: "http://h.example?q=/raw/x", want: 404, body: "fallback"},
	}
	raw := []tcase{
		{desc: "dot-dot goes as it came", target: "/raw/../admin", want: 200, up: "/raw/../admin"},
		{desc: "encoded slash goes as it came", target: "/raw/a%2Fb/%7e", want: 200, up: "/raw/a%2Fb/%7e"},
		{desc: "repeated slashes and dots go as they came", target: "/raw//x/./y/..", want: 200, up: "/raw//x/./y/.."},
		{desc: "backslash goes as it came", target: "/raw/a\\..\\b", want: 200, up: "/raw/a\\..\\b"},
		{desc: "absolute form", target: "http://h.example/raw/%2e%2e/admin?q", want: 200, up: "/raw/%2e%2e/admin?q"},
		{desc: "repeated leading slash matches no prefix", target: "//raw/x", want: 404, body: "fallback"},
		{desc: "absolute form without a path: the query is no path", target: "http://h.example?q=/raw/x", want: 404, body: "fallback"},
	}
	for _, tr := range e2eTransports {
		for _, mode := range []struct {
			name, frontend string
			cases          []tcase
		}{
			{"default", "", normalized},
			{"normalize", "frontendPolicies: {http: {pathNormalization: normalize}}\n", normalized},
			{"raw", "frontendPolicies: {http: {pathNormalization: raw}}\n", raw},
		} {
			t.Run(string(tr)+"/"+mode.name, func(t *testing.T) {
				up, seen := rawHTTPUpstream(t, okAnswer)
				tg := startGatewayWith(t, cfg+mode.frontend, map[string]string{"UP": up}, tr)
				var controls atomic.Int64
				for _, tc := range mode.cases {
					t.Run(tc.desc, func(t *testing.T) {
						t.Cleanup(func() {
							if t.Failed() {
								// Leave no stray request to the next case.
								syncUpstreams(t, tg.addr(3000), "/raw/control"+strconv.FormatInt(controls.Add(1), 10), seen)
							}
						})
						c, br := dialRaw(t, tg.addr(3000))
						m := roundTripRaw(t, c, br, "GET", "GET "+tc.target+" HTTP/1.1\r\nHost: h.example\r\n\r\n")
						if m.status() != tc.want || tc.body != "" && string(m.body) != tc.body {
							t.Fatalf("answer %d %q, want %d %q", m.status(), m.body, tc.want, tc.body)
						}
						if tc.want == 200 {
							if got := nextSeen(t, seen).target(); got != tc.up {
								t.Fatalf("upstream got target %q, want %q", got, tc.up)
							}
							return
						}
						// Nothing was forwarded: the next request the upstream
						// sees is a control request sent now.
						path := "/raw/control" + strconv.FormatInt(controls.Add(1), 10)
						if stray := syncUpstreams(t, tg.addr(3000), path, seen); len(stray) > 0 {
							t.Fatalf("the upstream got %q before the control request", stray[0].line)
						}
					})
				}
			})
		}
	}
}

// TestPathNormalizationKeepsConnection: a path refused as malformed is a
// well-formed request: the 400 leaves the connection open for the next one.
func TestPathNormalizationKeepsConnection(t *testing.T) {
	for _, tr := range e2eTransports {
		t.Run(string(tr), func(t *testing.T) {
			up, seen := rawHTTPUpstream(t, okAnswer)
			tg := startGatewayWith(t, oneRoute(up), nil, tr)
			c, br := dialRaw(t, tg.addr(3000))
			for _, step := range []struct {
				desc, target string
				want         int
			}{
				{"refused", "/a%2Fb", 400},
				{"next request on the same connection", "/a/./b", 200},
			} {
				m := roundTripRaw(t, c, br, "GET", "GET "+step.target+" HTTP/1.1\r\nHost: x\r\n\r\n")
				if m.status() != step.want {
					t.Fatalf("%s: status %d (%q), want %d", step.desc, m.status(), m.body, step.want)
				}
				if step.want == 400 && !strings.Contains(string(m.body), "path") {
					t.Fatalf("%s: body %q does not say what was wrong", step.desc, m.body)
				}
			}
			if got := nextSeen(t, seen).target(); got != "/a/b" {
				t.Fatalf("upstream got %q, want /a/b", got)
			}
		})
	}
}

// syncUpstreams sends a GET for path (which must reach every upstream in
// seens, each through its route or a mirror) to the gateway at addr and
// waits until each upstream has received it. It returns the requests the
// upstreams received before it: none, when the gateway forwarded nothing
// since the last look.
func syncUpstreams(t *testing.T, addr, path string, seens ...<-chan message) (stray []message) {
	t.Helper()
	c, br := dialRaw(t, addr)
	if m := roundTripRaw(t, c, br, "GET", "GET "+path+" HTTP/1.1\r\nHost: h.example\r\n\r\n"); m.status() != 200 {
		t.Errorf("control request %s: status %d (%q)", path, m.status(), m.body)
		return nil
	}
	for _, seen := range seens {
		for {
			m := nextSeen(t, seen)
			if m.target() == path {
				break
			}
			stray = append(stray, m)
		}
	}
	return stray
}
