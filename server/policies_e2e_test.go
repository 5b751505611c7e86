package server

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPolicyHeaderModifiers checks requestHeaderModifier and
// responseHeaderModifier (add, set, remove), on a route and on a route's
// backend, and setting Host through a modifier.
func TestPolicyHeaderModifiers(t *testing.T) {
	var seenMu sync.Mutex
	var seenHeader http.Header
	var seenHost string
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenMu.Lock()
		seenHeader, seenHost = r.Header.Clone(), r.Host
		seenMu.Unlock()
		w.Header().Add("X-Resp-Add", "upstream")
		w.Header().Set("X-Resp-Set", "upstream")
		w.Header().Set("X-Resp-Remove", "upstream")
		w.Header().Set("X-Resp-Keep", "upstream")
		io.WriteString(w, "ok")
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /route}}]
      policies:
        requestHeaderModifier: {add: {x-add: added}, set: {x-set: set}, remove: [x-remove]}
        responseHeaderModifier: {add: {x-resp-add: gateway}, set: {x-resp-set: gateway}, remove: [x-resp-remove]}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /backend}}]
      backends:
      - host: '${UP}'
        policies:
          requestHeaderModifier: {add: {x-add: added}, set: {x-set: set}, remove: [x-remove]}
          responseHeaderModifier: {add: {x-resp-add: gateway}, set: {x-resp-set: gateway}, remove: [x-resp-remove]}
    - matches: [{path: {pathPrefix: /host}}]
      policies:
        requestHeaderModifier: {set: {host: custom.test}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	for _, target := range []string{"/route", "/backend"} {
		t.Run("modifiers on "+target, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tg.url(3000)+target, nil)
			req.Header.Add("X-Add", "client")
			req.Header.Add("X-Set", "client1")
			req.Header.Add("X-Set", "client2")
			req.Header.Set("X-Remove", "client")
			req.Header.Set("X-Keep", "client")
			resp, _ := do(t, req)
			seenMu.Lock()
			h := seenHeader
			seenMu.Unlock()
			checks := []struct {
				desc      string
				got, want string
			}{
				{"add appends", strings.Join(h.Values("X-Add"), ","), "client,added"},
				{"set replaces every line", strings.Join(h.Values("X-Set"), ","), "set"},
				{"remove deletes", strings.Join(h.Values("X-Remove"), ","), ""},
				{"others are kept", h.Get("X-Keep"), "client"},
				{"response add appends", strings.Join(resp.Header.Values("X-Resp-Add"), ","), "upstream,gateway"},
				{"response set replaces", strings.Join(resp.Header.Values("X-Resp-Set"), ","), "gateway"},
				{"response remove deletes", resp.Header.Get("X-Resp-Remove"), ""},
				{"response others are kept", resp.Header.Get("X-Resp-Keep"), "upstream"},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s: got %q, want %q", c.desc, c.got, c.want)
				}
			}
		})
	}
	t.Run("set Host", func(t *testing.T) {
		resp, _ := get(t, tg.url(3000)+"/host", "Host", "client.test")
		seenMu.Lock()
		host := seenHost
		seenMu.Unlock()
		if resp.StatusCode != 200 || host != "custom.test" {
			t.Fatalf("got %d, upstream saw Host %q, want custom.test", resp.StatusCode, host)
		}
	})
}

// TestPolicyRequestRedirect checks requestRedirect: scheme, authority, full
// and prefix paths, the kept query, and the status.
func TestPolicyRequestRedirect(t *testing.T) {
	p := newProbe(t, "never")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /scheme}}]
      policies: {requestRedirect: {scheme: https}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /authority}}]
      policies: {requestRedirect: {authority: {full: 'other.test:9090'}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /hostname}}]
      policies: {requestRedirect: {authority: {host: other.test}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /port}}]
      policies: {requestRedirect: {authority: {port: 8443}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /full}}]
      policies: {requestRedirect: {path: {full: /elsewhere}}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /old}}]
      policies: {requestRedirect: {path: {prefix: /new}, status: 301}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /all}}]
      policies: {requestRedirect: {scheme: https, authority: {full: secure.test}, path: {prefix: /}, status: 308}}
`, map[string]string{"UP": p.addr})
	tests := []struct {
		desc, target, host string
		status             int
		location           string
	}{
		{desc: "scheme only, default status 302, port dropped", target: "/scheme/x?q=1", host: "site.test:8080", status: 302, location: "https://site.test/scheme/x?q=1"},
		{desc: "authority full", target: "/authority/x", host: "site.test:8080", status: 302, location: "http://other.test:9090/authority/x"},
		{desc: "authority host keeps the port", target: "/hostname", host: "site.test:8080", status: 302, location: "http://other.test:8080/hostname"},
		{desc: "authority port", target: "/port/y", host: "site.test", status: 302, location: "http://site.test:8443/port/y"},
		{desc: "path full keeps the query", target: "/full/a/b?k=v&k=w", host: "site.test", status: 302, location: "http://site.test/elsewhere?k=v&k=w"},
		{desc: "path prefix, explicit 301", target: "/old/a/b?z=1", host: "site.test", status: 301, location: "http://site.test/new/a/b?z=1"},
		{desc: "path prefix on the prefix itself", target: "/old", host: "site.test", status: 301, location: "http://site.test/new"},
		{desc: "everything at once", target: "/all/deep/er", host: "site.test:80", status: 308, location: "https://secure.test/deep/er"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := get(t, tg.url(3000)+tc.target, "Host", tc.host)
			if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location {
				t.Fatalf("got %d Location %q (%q), want %d %q", resp.StatusCode, resp.Header.Get("Location"), body, tc.status, tc.location)
			}
		})
	}
	if n := p.count(); n != 0 {
		t.Fatalf("redirected requests reached the upstream %d times", n)
	}
}

// TestPolicyURLRewrite checks urlRewrite: full paths, prefix replacement with
// the Gateway API trailing-slash cases, the query kept, and a full authority
// becoming the Host the upstream sees.
func TestPolicyURLRewrite(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - hostnames: [foo-xyz.test]
      matches: [{path: {pathPrefix: /foo}}]
      policies: {urlRewrite: {path: {prefix: /xyz}}}
      backends: [{host: '${UP}'}]
    - hostnames: [foo-xyzslash.test]
      matches: [{path: {pathPrefix: /foo}}]
      policies: {urlRewrite: {path: {prefix: /xyz/}}}
      backends: [{host: '${UP}'}]
    - hostnames: [fooslash-xyz.test]
      matches: [{path: {pathPrefix: /foo/}}]
      policies: {urlRewrite: {path: {prefix: /xyz}}}
      backends: [{host: '${UP}'}]
    - hostnames: [fooslash-xyzslash.test]
      matches: [{path: {pathPrefix: /foo/}}]
      policies: {urlRewrite: {path: {prefix: /xyz/}}}
      backends: [{host: '${UP}'}]
    - hostnames: [foo-root.test]
      matches: [{path: {pathPrefix: /foo}}]
      policies: {urlRewrite: {path: {prefix: /}}}
      backends: [{host: '${UP}'}]
    - hostnames: [full.test]
      matches: [{path: {pathPrefix: /f}}]
      policies: {urlRewrite: {path: {full: /fixed}}}
      backends: [{host: '${UP}'}]
    - hostnames: [authority.test]
      policies: {urlRewrite: {authority: {full: 'rewritten.test:1234'}}}
      backends: [{host: '${UP}'}]
    - hostnames: [both.test]
      matches: [{path: {pathPrefix: /api/v1}}]
      policies: {urlRewrite: {authority: {host: inner.test}, path: {prefix: /v2}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	// The Gateway API HTTPPathModifier table (ReplacePrefixMatch), minus the
	// empty replacement, which the config refuses.
	tests := []struct {
		desc, host, target string
		wantURI, wantHost  string
	}{
		{desc: "/foo -> /xyz: /foo/bar", host: "foo-xyz.test", target: "/foo/bar", wantURI: "/xyz/bar"},
		{desc: "/foo -> /xyz/: /foo/bar", host: "foo-xyzslash.test", target: "/foo/bar", wantURI: "/xyz/bar"},
		{desc: "/foo/ -> /xyz: /foo/bar", host: "fooslash-xyz.test", target: "/foo/bar", wantURI: "/xyz/bar"},
		{desc: "/foo/ -> /xyz/: /foo/bar", host: "fooslash-xyzslash.test", target: "/foo/bar", wantURI: "/xyz/bar"},
		{desc: "/foo -> /xyz: /foo", host: "foo-xyz.test", target: "/foo", wantURI: "/xyz"},
		{desc: "/foo -> /xyz: /foo/", host: "foo-xyz.test", target: "/foo/", wantURI: "/xyz/"},
		{desc: "/foo -> /: /foo/", host: "foo-root.test", target: "/foo/", wantURI: "/"},
		{desc: "/foo -> /: /foo", host: "foo-root.test", target: "/foo", wantURI: "/"},
		{desc: "/foo -> /: /foo/bar", host: "foo-root.test", target: "/foo/bar", wantURI: "/bar"},
		{desc: "prefix rewrite keeps the query", host: "foo-xyz.test", target: "/foo/bar?a=1&b=%20", wantURI: "/xyz/bar?a=1&b=%20"},
		{desc: "full path", host: "full.test", target: "/f/any/thing", wantURI: "/fixed"},
		{desc: "full path keeps the query", host: "full.test", target: "/f?x=1", wantURI: "/fixed?x=1"},
		{desc: "authority full sets Host", host: "authority.test", target: "/p?q=2", wantURI: "/p?q=2", wantHost: "rewritten.test:1234"},
		{desc: "authority host and path prefix", host: "both.test:8080", target: "/api/v1/users", wantURI: "/v2/users", wantHost: "inner.test"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := get(t, tg.url(3000)+tc.target, "Host", tc.host)
			if resp.StatusCode != 200 {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			got := p.last(t)
			wantHost := tc.wantHost
			if wantHost == "" {
				wantHost = tc.host
			}
			if got.uri != tc.wantURI || got.host != wantHost {
				t.Fatalf("upstream saw %q Host %q, want %q Host %q", got.uri, got.host, tc.wantURI, wantHost)
			}
		})
	}
}

// TestPrefixRewriteMixedMatches: on a route with a pathPrefix match beside
// a regex one, a prefix urlRewrite is applied per match, as agentgateway
// applies it: a request the prefix match selects is rewritten, one the regex
// match selects has no prefix to replace and is answered 500, never
// forwarded with its path unchanged. The load says so
// (TestPrefixRewriteNeedsAPrefixMatch: a route without a prefix match is
// refused).
func TestPrefixRewriteMixedMatches(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /aa}}, {path: {regex: "/re/.*"}}]
      policies: {urlRewrite: {path: {prefix: /x}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	warned := tg.logs.FilterMessageSnippet("no path prefix to replace").All()
	if len(warned) != 1 || warned[0].ContextMap()["field"] != "binds[0].listeners[0].routes[0].policies.urlRewrite.path.prefix" {
		t.Errorf("load warnings %v", warned)
	}
	resp, body := get(t, tg.url(3000)+"/aa/b?q=1")
	if got := p.last(t); resp.StatusCode != 200 || got.uri != "/x/b?q=1" {
		t.Fatalf("prefix match: %d %q, upstream saw %q", resp.StatusCode, body, got.uri)
	}
	resp, body = get(t, tg.url(3000)+"/re/b")
	if resp.StatusCode != 500 || p.count() != 1 {
		t.Fatalf("regex match: %d %q, %d requests upstream", resp.StatusCode, body, p.count())
	}
}

// TestPolicyDirectResponse: the gateway answers with the configured status
// and body and never contacts the backend.
func TestPolicyDirectResponse(t *testing.T) {
	p := newProbe(t, "never")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {exact: /teapot}}]
      policies: {directResponse: {status: 418, body: "short and stout"}}
    - matches: [{path: {exact: /maintenance}}]
      policies: {directResponse: {status: 503, body: "down for maintenance"}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {exact: /empty}}]
      policies: {directResponse: {status: 204}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	tests := []struct {
		desc, target, method string
		status               int
		body                 string
	}{
		{desc: "route without backends", target: "/teapot", status: 418, body: "short and stout"},
		{desc: "route with a backend", target: "/maintenance", status: 503, body: "down for maintenance"},
		{desc: "any method", target: "/maintenance", method: http.MethodDelete, status: 503, body: "down for maintenance"},
		{desc: "no body", target: "/empty", status: 204, body: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			m := tc.method
			if m == "" {
				m = http.MethodGet
			}
			req, _ := http.NewRequest(m, tg.url(3000)+tc.target, nil)
			resp, body := do(t, req)
			if resp.StatusCode != tc.status || body != tc.body {
				t.Fatalf("got %d %q, want %d %q", resp.StatusCode, body, tc.status, tc.body)
			}
		})
	}
	if n := p.count(); n != 0 {
		t.Fatalf("direct responses reached the upstream %d times", n)
	}
}

// TestPolicyCORS: preflights are answered by the gateway with the configured
// headers and never forwarded; actual requests from an allowed origin get
// Access-Control-Allow-Origin and -Expose-Headers; other origins get none.
func TestPolicyCORS(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        cors:
          allowOrigins: ['https://app.test', 'https://*.apps.test']
          allowMethods: [GET, POST, DELETE]
          allowHeaders: [content-type, mcp-protocol-version]
          exposeHeaders: [Mcp-Session-Id]
          allowCredentials: true
          maxAge: 10m
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	type want struct {
		status                            int
		forwarded                         bool
		allowOrigin, allowMethods, maxAge string
		allowHeaders, expose, credentials string
	}
	tests := []struct {
		desc, method string
		headers      []string
		want         want
	}{
		{desc: "preflight from an allowed origin", method: http.MethodOptions,
			headers: []string{"Origin", "https://app.test", "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type"},
			want:    want{status: 200, allowOrigin: "https://app.test", allowMethods: "GET,POST,DELETE", allowHeaders: "content-type,mcp-protocol-version", maxAge: "600", expose: "mcp-session-id", credentials: "true"}},
		{desc: "preflight from a wildcard origin", method: http.MethodOptions,
			headers: []string{"Origin", "https://x.apps.test", "Access-Control-Request-Method", "DELETE"},
			want:    want{status: 200, allowOrigin: "https://x.apps.test", allowMethods: "GET,POST,DELETE", allowHeaders: "content-type,mcp-protocol-version", maxAge: "600", expose: "mcp-session-id", credentials: "true"}},
		{desc: "preflight from another origin is answered without CORS headers", method: http.MethodOptions,
			headers: []string{"Origin", "https://evil.test", "Access-Control-Request-Method", "POST"},
			want:    want{status: 200}},
		{desc: "actual request from an allowed origin", method: http.MethodGet,
			headers: []string{"Origin", "https://app.test"},
			want:    want{status: 200, forwarded: true, allowOrigin: "https://app.test", expose: "mcp-session-id", credentials: "true"}},
		{desc: "actual POST from a wildcard origin", method: http.MethodPost,
			headers: []string{"Origin", "https://a.b.apps.test"},
			want:    want{status: 200, forwarded: true, allowOrigin: "https://a.b.apps.test", expose: "mcp-session-id", credentials: "true"}},
		{desc: "actual request from another origin gets no CORS headers", method: http.MethodGet,
			headers: []string{"Origin", "https://evil.test"},
			want:    want{status: 200, forwarded: true}},
		{desc: "scheme is part of the origin", method: http.MethodGet,
			headers: []string{"Origin", "http://app.test"},
			want:    want{status: 200, forwarded: true}},
		{desc: "request without Origin is left alone", method: http.MethodGet,
			want: want{status: 200, forwarded: true}},
		{desc: "OPTIONS without Origin is forwarded", method: http.MethodOptions,
			want: want{status: 200, forwarded: true}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := p.count()
			req, _ := http.NewRequest(tc.method, tg.url(3000)+"/mcp", nil)
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, _ := do(t, req)
			h := resp.Header
			got := want{
				status:       resp.StatusCode,
				forwarded:    p.count() > before,
				allowOrigin:  h.Get("Access-Control-Allow-Origin"),
				allowMethods: h.Get("Access-Control-Allow-Methods"),
				allowHeaders: h.Get("Access-Control-Allow-Headers"),
				maxAge:       h.Get("Access-Control-Max-Age"),
				expose:       strings.ToLower(h.Get("Access-Control-Expose-Headers")),
				credentials:  h.Get("Access-Control-Allow-Credentials"),
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if tc.want.allowOrigin != "" && !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
				t.Errorf("Vary %q lacks Origin", h.Values("Vary"))
			}
		})
	}
}

// TestPolicyCORSVary: every answer of a route whose CORS answer depends on
// the Origin says "Vary: Origin", those without CORS headers too (no
// Origin, an origin not allowed, a refused preflight, an answer by a later
// policy), lest a shared cache hand one of them to an allowed origin. An
// upstream's Vary is merged into one line, never repeated; one listing
// Origin or "*" is left alone. A route allowing no origin adds nothing.
func TestPolicyCORSVary(t *testing.T) {
	// (HTTP/2 requests go upstream in HTTP/2.)
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, v := range r.Header.Values("X-Vary") {
			w.Header().Add("Vary", v)
		}
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /direct}}]
      policies:
        cors: {allowOrigins: ['https://app.test']}
        directResponse: {status: 404, body: none}
    - matches: [{path: {pathPrefix: /any}}]
      policies:
        cors: {allowOrigins: ['*']}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /none}}]
      policies:
        cors: {allowMethods: [GET]}
      backends: [{host: '${UP}'}]
    - policies:
        cors: {allowOrigins: ['https://app.test'], allowMethods: [GET, POST]}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up})
	preflight := []string{"Origin", "https://evil.test", "Access-Control-Request-Method", "POST"}
	tests := []struct {
		desc, method, path string
		headers            []string
		want               []string // the Vary lines
	}{
		{"no origin", http.MethodGet, "/", nil, []string{"Origin"}},
		{"origin not allowed", http.MethodGet, "/", []string{"Origin", "https://evil.test"}, []string{"Origin"}},
		{"allowed origin", http.MethodGet, "/", []string{"Origin", "https://app.test"}, []string{"Origin"}},
		{"refused preflight", http.MethodOptions, "/", preflight, []string{"Origin"}},
		{"allowed preflight", http.MethodOptions, "/", []string{"Origin", "https://app.test", "Access-Control-Request-Method", "POST"}, []string{"Origin"}},
		{"no origin, upstream Vary merged", http.MethodGet, "/", []string{"X-Vary", "Accept-Encoding"}, []string{"Accept-Encoding, Origin"}},
		{"allowed origin, upstream Vary lines merged", http.MethodGet, "/", []string{"Origin", "https://app.test", "X-Vary", "Accept-Encoding", "X-Vary", "Accept-Language"}, []string{"Accept-Encoding, Accept-Language, Origin"}},
		{"upstream Vary listing Origin", http.MethodGet, "/", []string{"X-Vary", "accept, origin"}, []string{"accept, origin"}},
		{"upstream Vary *", http.MethodGet, "/", []string{"Origin", "https://evil.test", "X-Vary", "*"}, []string{"*"}},
		{"a later policy's answer", http.MethodGet, "/direct", nil, []string{"Origin"}},
		{"any origin, no origin", http.MethodGet, "/any", nil, []string{"Origin"}},
		{"no origin allowed", http.MethodGet, "/none", []string{"Origin", "https://app.test"}, nil},
		{"no origin allowed, preflight", http.MethodOptions, "/none", preflight, nil},
	}
	for _, c := range bothClients() {
		for _, tc := range tests {
			t.Run(c.name+"/"+tc.desc, func(t *testing.T) {
				req, err := http.NewRequest(tc.method, tg.url(3000)+tc.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i+1 < len(tc.headers); i += 2 {
					req.Header.Add(tc.headers[i], tc.headers[i+1])
				}
				resp, _ := doWith(t, c.client, req)
				if got := resp.Header.Values("Vary"); !slices.Equal(got, tc.want) {
					t.Errorf("%d: Vary lines %q, want %q", resp.StatusCode, got, tc.want)
				}
			})
		}
	}
}

// TestPolicyCSRF: a cross-site state-changing request is refused with 403;
// same-origin, safe methods and additionalOrigins pass.
func TestPolicyCSRF(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        csrf: {additionalOrigins: ['https://partner.test']}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	tests := []struct {
		desc, method string
		headers      []string
		status       int
	}{
		{desc: "cross-site POST", method: http.MethodPost, headers: []string{"Origin", "https://evil.test"}, status: 403},
		{desc: "cross-site DELETE", method: http.MethodDelete, headers: []string{"Origin", "https://evil.test"}, status: 403},
		{desc: "same host, other port", method: http.MethodPost, headers: []string{"Origin", "http://site.test:8080"}, status: 403},
		{desc: "same host, other scheme", method: http.MethodPost, headers: []string{"Origin", "https://site.test"}, status: 403},
		{desc: "same-origin POST", method: http.MethodPost, headers: []string{"Origin", "http://site.test"}, status: 200},
		{desc: "additional origin", method: http.MethodPost, headers: []string{"Origin", "https://partner.test"}, status: 200},
		{desc: "cross-site GET", method: http.MethodGet, headers: []string{"Origin", "https://evil.test"}, status: 200},
		{desc: "cross-site HEAD", method: http.MethodHead, headers: []string{"Origin", "https://evil.test"}, status: 200},
		{desc: "POST without Origin (not a browser)", method: http.MethodPost, status: 200},
		{desc: "Sec-Fetch-Site cross-site", method: http.MethodPost, headers: []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.test"}, status: 403},
		{desc: "Sec-Fetch-Site same-origin", method: http.MethodPost, headers: []string{"Sec-Fetch-Site", "same-origin", "Origin", "https://evil.test"}, status: 200},
		{desc: "Sec-Fetch-Site cross-site from an additional origin", method: http.MethodPost, headers: []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://partner.test"}, status: 200},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := p.count()
			req, _ := http.NewRequest(tc.method, tg.url(3000)+"/submit", strings.NewReader("form=1"))
			req.Host = "site.test"
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, body := do(t, req)
			forwarded := p.count() > before
			if resp.StatusCode != tc.status || forwarded != (tc.status == 200) {
				t.Fatalf("got %d (%q), forwarded %v; want %d", resp.StatusCode, body, forwarded, tc.status)
			}
		})
	}
}

// TestPolicyTimeouts: route timeout.requestTimeout, timeout.backendRequestTimeout
// and the backend policy http.requestTimeout each answer 504 when the
// upstream does not answer in time; an upstream that answers in time is
// unaffected.
func TestPolicyTimeouts(t *testing.T) {
	stop := make(chan struct{})
	slow := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("fast") == "" {
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}
		io.WriteString(w, "answered")
	}))
	t.Cleanup(func() { close(stop) })
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /route}}]
      policies: {timeout: {requestTimeout: 150ms}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /attempt}}]
      policies: {timeout: {backendRequestTimeout: 150ms}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /backend}}]
      backends: [{host: '${UP}', policies: {http: {requestTimeout: 150ms}}}]
`, map[string]string{"UP": slow})
	for _, target := range []string{"/route", "/attempt", "/backend"} {
		t.Run(target, func(t *testing.T) {
			start := time.Now()
			resp, _ := get(t, tg.url(3000)+target)
			elapsed := time.Since(start)
			if resp.StatusCode != http.StatusGatewayTimeout {
				t.Fatalf("got %d, want 504", resp.StatusCode)
			}
			if elapsed < 150*time.Millisecond || elapsed > 5*time.Second {
				t.Fatalf("504 after %v, want about 150ms", elapsed)
			}
			if resp, body := get(t, tg.url(3000)+target+"?fast=1"); resp.StatusCode != 200 || body != "answered" {
				t.Fatalf("fast request: %d %q", resp.StatusCode, body)
			}
		})
	}
}

// scriptedUpstream answers the i-th request (from 0) with statuses[i], and
// 200 once the script runs out; it counts the requests.
func scriptedUpstream(t *testing.T, statuses ...int) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	addr := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		i := int(n.Add(1)) - 1
		if i < len(statuses) {
			w.WriteHeader(statuses[i])
			io.WriteString(w, "failed")
			return
		}
		io.WriteString(w, "succeeded")
	}))
	return addr, &n
}

// TestPolicyRetry checks retry: status-code retries of any method whose body
// is in memory (narrowed by a precondition), retries of a refused
// connection, and the backoff kept within the request timeout.
func TestPolicyRetry(t *testing.T) {
	tests := []struct {
		desc, method string
		statuses     []int
		policy       string
		wantStatus   int
		wantAttempts int32
	}{
		{desc: "503 twice then 200", method: "GET", statuses: []int{503, 503}, policy: `{attempts: 3, codes: [503]}`, wantStatus: 200, wantAttempts: 3},
		// attempts counts the retries (agentgateway's proxy makes
		// attempts + 1 tries), 1 by default.
		{desc: "attempts run out: the last answer is sent", method: "GET", statuses: []int{503, 503, 503}, policy: `{attempts: 1, codes: [503]}`, wantStatus: 503, wantAttempts: 2},
		{desc: "one retry by default", method: "GET", statuses: []int{503, 503}, policy: `{codes: [503]}`, wantStatus: 503, wantAttempts: 2},
		{desc: "attempts 2: three tries", method: "GET", statuses: []int{503, 503, 503, 503}, policy: `{attempts: 2, codes: [503]}`, wantStatus: 503, wantAttempts: 3},
		{desc: "codes not listed are not retried", method: "GET", statuses: []int{500, 503}, policy: `{attempts: 3, codes: [503]}`, wantStatus: 500, wantAttempts: 1},
		{desc: "every listed code is retried", method: "GET", statuses: []int{502, 504}, policy: `{attempts: 3, codes: [502, 504]}`, wantStatus: 200, wantAttempts: 3},
		{desc: "PUT is idempotent", method: "PUT", statuses: []int{503}, policy: `{attempts: 2, codes: [503]}`, wantStatus: 200, wantAttempts: 2},
		// Any method is retried, its body sent again (agentgateway's and
		// Envoy's retries); a precondition narrows them.
		{desc: "POST is retried on a listed status", method: "POST", statuses: []int{503, 503}, policy: `{attempts: 3, codes: [503]}`, wantStatus: 200, wantAttempts: 3},
		{desc: "a precondition refusing POST keeps it to one attempt", method: "POST", statuses: []int{503, 503}, policy: `{attempts: 3, codes: [503], precondition: 'request.method == "GET"'}`, wantStatus: 503, wantAttempts: 1},
		{desc: "a precondition allowing POST", method: "POST", statuses: []int{503}, policy: `{attempts: 3, codes: [503], precondition: 'request.method == "POST"'}`, wantStatus: 200, wantAttempts: 2},
		{desc: "without retry policy one attempt", method: "GET", statuses: []int{503}, policy: ``, wantStatus: 503, wantAttempts: 1},
		// Statuses are any three digits on the wire.
		{desc: "a status above 599 is retried when listed", method: "GET", statuses: []int{799}, policy: `{attempts: 2, codes: [799]}`, wantStatus: 200, wantAttempts: 2},
		{desc: "a status above 599 not listed is passed on", method: "GET", statuses: []int{999}, policy: `{attempts: 2, codes: [503]}`, wantStatus: 999, wantAttempts: 1},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			addr, attempts := scriptedUpstream(t, tc.statuses...)
			policies := ""
			if tc.policy != "" {
				policies = "\n      policies: {retry: " + tc.policy + "}"
			}
			tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]`+policies+"\n", map[string]string{"UP": addr})
			var body io.Reader
			if tc.method != "GET" {
				body = strings.NewReader("payload")
			}
			req, _ := http.NewRequest(tc.method, tg.url(3000)+"/r", body)
			resp, _ := do(t, req)
			if resp.StatusCode != tc.wantStatus || attempts.Load() != tc.wantAttempts {
				t.Fatalf("got %d after %d attempts, want %d after %d", resp.StatusCode, attempts.Load(), tc.wantStatus, tc.wantAttempts)
			}
		})
	}

	// A refused connection never reached the backend, so even a POST is
	// retried: every attempt counts as a connect error, and the answer is a
	// quick 503.
	t.Run("POST to a refused backend is retried", func(t *testing.T) {
		closed := closedAddr(t)
		tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {retry: {attempts: 2, codes: [503]}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": closed})
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/r", strings.NewReader("payload"))
		resp, _ := do(t, req)
		if resp.StatusCode != http.StatusServiceUnavailable || time.Since(start) > 5*time.Second {
			t.Fatalf("got %d after %v, want a quick 503", resp.StatusCode, time.Since(start))
		}
		if got := scrapeValue(t, tg.gw, "agentgateway_upstream_connect_errors_total", map[string]string{"backend": closed}); got != 3 {
			t.Fatalf("connect errors %v, want 3 (one per attempt)", got)
		}
	})

	// Backoff is waited between attempts, and an attempt whose backoff would
	// end after the request timeout is not made.
	t.Run("backoff within the request timeout", func(t *testing.T) {
		addr, attempts := scriptedUpstream(t, 503, 503, 503, 503, 503, 503, 503, 503)
		tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /bounded}}]
      policies: {retry: {attempts: 8, backoff: 200ms, codes: [503]}, timeout: {requestTimeout: 500ms}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /unbounded}}]
      policies: {retry: {attempts: 3, backoff: 100ms, codes: [503]}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": addr})
		start := time.Now()
		resp, _ := get(t, tg.url(3000)+"/bounded")
		elapsed := time.Since(start)
		// Attempts at about 0, 200 and 400ms; a fourth would start at 600ms,
		// after the 500ms timeout. On a loaded machine an attempt may still
		// be in flight at the timeout: 504.
		if (resp.StatusCode != 503 && resp.StatusCode != 504) || attempts.Load() < 2 || attempts.Load() > 3 {
			t.Fatalf("bounded: %d after %d attempts, want 503 (or 504) after 2 or 3", resp.StatusCode, attempts.Load())
		}
		if elapsed < 200*time.Millisecond || elapsed > 2*time.Second {
			t.Fatalf("bounded: answered after %v, want between one backoff and the timeout", elapsed)
		}
		attempts.Store(6) // two more 503s, then 200
		start = time.Now()
		resp, _ = get(t, tg.url(3000)+"/unbounded")
		elapsed = time.Since(start)
		if resp.StatusCode != 200 || attempts.Load() != 9 || elapsed < 200*time.Millisecond {
			t.Fatalf("unbounded: %d after %d attempts in %v, want 200 after 3 attempts and two 100ms backoffs", resp.StatusCode, attempts.Load()-6, elapsed)
		}
	})
}

// TestPolicyRequestMirror: with percentage 1 the mirror receives a copy of
// every request; with 0 it receives none; either way the client gets the
// main backend's answer.
func TestPolicyRequestMirror(t *testing.T) {
	probes, vars := probeVars(t, "main", "mirror")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /always}}]
      policies: {requestMirror: {backend: {host: '${mirror}'}, percentage: 1.0}}
      backends: [{host: '${main}'}]
    - matches: [{path: {pathPrefix: /never}}]
      policies: {requestMirror: {backend: {host: '${mirror}'}, percentage: 0}}
      backends: [{host: '${main}'}]
`, vars)
	mirror := probes["mirror"]
	mirrorsIdle := func() bool { return len(tg.gw.mirrorSlots) == 0 }

	for range 10 {
		if resp, _ := get(t, tg.url(3000)+"/never"); resp.Header.Get("X-Upstream") != "main" {
			t.Fatalf("answered by %q", resp.Header.Get("X-Upstream"))
		}
	}
	// A copy holds a mirror slot from before the client's answer until the
	// mirror has answered, so once no slot is held every copy has arrived.
	eventually(t, 10*time.Second, "mirrored requests to finish", mirrorsIdle)
	if n := mirror.count(); n != 0 {
		t.Fatalf("percentage 0: the mirror received %d requests", n)
	}

	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/always/x?q=1", strings.NewReader("mirrored body"))
	req.Header.Set("X-Trace", "t1")
	req.Header.Set("X-Forwarded-For", "9.9.9.9")
	resp, body := do(t, req)
	if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "main" || !strings.HasPrefix(body, "main ") {
		t.Fatalf("client got %d from %q", resp.StatusCode, resp.Header.Get("X-Upstream"))
	}
	eventually(t, 10*time.Second, "the mirror to receive the copy", func() bool { return mirror.count() == 1 })
	got := mirror.last(t)
	if got.method != http.MethodPost || got.uri != "/always/x?q=1" || got.body != "mirrored body" || got.header.Get("X-Trace") != "t1" {
		t.Fatalf("mirror saw %+v", got)
	}
	// The copy is forwarded as the request itself is: this hop appended.
	if xff, xfp := got.header.Get("X-Forwarded-For"), got.header.Get("X-Forwarded-Proto"); xff != "9.9.9.9, 127.0.0.1" || xfp != "http" {
		t.Fatalf("mirror saw X-Forwarded-For %q, X-Forwarded-Proto %q", xff, xfp)
	}
	if main := probes["main"].last(t); main.body != "mirrored body" {
		t.Fatalf("main backend saw body %q", main.body)
	}
}

// TestPolicyBackendPolicies: policies on a route's backend. tcp (with
// connectTimeout) is accepted and the backend serves; request and response
// header modifiers apply; http.requestTimeout is covered by
// TestPolicyTimeouts.
func TestPolicyBackendPolicies(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - host: '${UP}'
        policies:
          tcp: {keepalives: {enabled: true, time: 30s}, connectTimeout: 2s}
          requestHeaderModifier: {set: {x-backend-req: yes}}
          responseHeaderModifier: {set: {x-backend-resp: yes}, remove: [x-upstream]}
`, map[string]string{"UP": p.addr})
	resp, body := get(t, tg.url(3000)+"/bp")
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "up ") {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if got := p.last(t); got.header.Get("X-Backend-Req") != "yes" {
		t.Errorf("upstream headers %v", got.header)
	}
	if resp.Header.Get("X-Backend-Resp") != "yes" || resp.Header.Get("X-Upstream") != "" {
		t.Errorf("response headers %v", resp.Header)
	}
}

// TestPolicyListenerCORS: a listener's cors applies to each of its routes,
// and a route's own cors replaces it.
func TestPolicyListenerCORS(t *testing.T) {
	p := newProbe(t, "up")
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - policies:
      cors: {allowOrigins: ['https://listener.test'], allowMethods: [GET]}
    routes:
    - matches: [{path: {pathPrefix: /inherits}}]
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /own}}]
      policies:
        cors: {allowOrigins: ['https://route.test'], allowMethods: [PUT]}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": p.addr})
	tests := []struct {
		desc, target, origin     string
		allowOrigin, allowMethod string
	}{
		{desc: "listener policy applies", target: "/inherits", origin: "https://listener.test", allowOrigin: "https://listener.test", allowMethod: "GET"},
		{desc: "listener policy refuses others", target: "/inherits", origin: "https://route.test"},
		{desc: "route policy replaces the listener's", target: "/own", origin: "https://route.test", allowOrigin: "https://route.test", allowMethod: "PUT"},
		{desc: "listener origins do not apply to a route with its own", target: "/own", origin: "https://listener.test"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodOptions, tg.url(3000)+tc.target, nil)
			req.Header.Set("Origin", tc.origin)
			req.Header.Set("Access-Control-Request-Method", "GET")
			resp, _ := do(t, req)
			if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != tc.allowOrigin || resp.Header.Get("Access-Control-Allow-Methods") != tc.allowMethod {
				t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
			}
		})
	}
	if n := p.count(); n != 0 {
		t.Fatalf("preflights reached the upstream %d times", n)
	}
}

// TestPolicyCORSWildcardWithCredentialsWarns: allowOrigins "*" with
// allowCredentials reflects every origin with credentials allowed (as
// agentgateway and Envoy do); the load says so, naming the field. A listed
// origin, or "*" without credentials, says nothing.
func TestPolicyCORSWildcardWithCredentialsWarns(t *testing.T) {
	for _, tc := range []struct {
		cors string
		warn bool
	}{
		{`{allowOrigins: ["*"], allowCredentials: true}`, true},
		{`{allowOrigins: ["https://app.example"], allowCredentials: true}`, false},
		{`{allowOrigins: ["*"]}`, false},
	} {
		tg := startGateway(t, `
binds:
- port: 8080
  listeners:
  - routes:
    - name: r
      policies:
        cors: `+tc.cors+`
        directResponse: {status: 200, body: ok}
`, nil)
		found := tg.logs.FilterMessageSnippet("allowOrigins \"*\" with allowCredentials").All()
		if (len(found) > 0) != tc.warn {
			t.Errorf("%s: warned %d times, want a warning: %v", tc.cors, len(found), tc.warn)
		}
		if tc.warn && len(found) > 0 && !strings.Contains(found[0].ContextMap()["field"].(string), "cors") {
			t.Errorf("the warning names %v", found[0].ContextMap())
		}
	}
}
