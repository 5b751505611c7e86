package server

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestRequestTargetForms: an absolute-form target's authority replaces Host
// for routing and upstream (RFC 9112 3.2.2); a target with a fragment, a
// field name holding a space, an absolute target without a host and one
// with userinfo (TestUserinfoInRequestTargetRefused) are refused with 400,
// never forwarded.
func TestRequestTargetForms(t *testing.T) {
	addr, seen := rawHTTPUpstream(t, echoAnswer)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - hostname: a.example.com
    routes:
    - backends: [{host: ${UP}}]
  - routes:
    - policies: {directResponse: {status: 404, body: other}}
`, map[string]string{"UP": addr})
	c, br := dialRaw(t, tg.addr(3000))
	m := roundTripRaw(t, c, br, "GET", "GET http://a.example.com/zz?q=1 HTTP/1.1\r\nHost: other\r\n\r\n")
	if m.status() != 200 {
		t.Fatalf("absolute form: status %d (%q): the target's authority must choose the listener", m.status(), m.body)
	}
	got := nextSeen(t, seen)
	if got.target() != "/zz?q=1" || got.fields.get("Host") != "a.example.com" {
		t.Fatalf("upstream got %q with Host %q, want /zz?q=1 with Host a.example.com", got.line, got.fields.get("Host"))
	}
	for _, tc := range []struct{ name, req string }{
		{"fragment", "GET /zz#frag HTTP/1.1\r\nHost: a.example.com\r\n\r\n"},
		{"space in a field name", "GET /zz HTTP/1.1\r\nHost: a.example.com\r\nBad Name: v\r\n\r\n"},
		{"absolute form without a host", "GET http:///zz HTTP/1.1\r\nHost: a.example.com\r\n\r\n"},
		{"absolute form with userinfo", "GET http://user@a.example.com/zz HTTP/1.1\r\nHost: a.example.com\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := dialRaw(t, tg.addr(3000))
			if m := roundTripRaw(t, c, br, "GET", tc.req); m.status() != 400 {
				t.Fatalf("status %d (%q), want 400", m.status(), m.body)
			}
			select {
			case m := <-seen:
				t.Fatalf("forwarded: %q", m.line)
			default:
			}
		})
	}
}

// TestExpectContinueOnlyWhenForwarded: a request with Expect: 100-continue
// that the gateway answers itself (no route, a direct response, a refused
// authorization) gets its final answer instead of 100 Continue, so the
// client never sends the body; one that goes to a backend gets 100 and its
// body arrives whole.
func TestExpectContinueOnlyWhenForwarded(t *testing.T) {
	addr, seen := rawHTTPUpstream(t, echoAnswer)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /direct}}]
      policies: {directResponse: {status: 202, body: direct}}
    - matches: [{path: {pathPrefix: /auth}}]
      policies: {authorization: {rules: ['request.method == "GET"']}}
      backends: [{host: ${UP}}]
    - matches: [{path: {pathPrefix: /up}}]
      backends: [{host: ${UP}}]
`, map[string]string{"UP": addr})
	head := func(path string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
	}
	for _, tc := range []struct {
		path string
		want int
		body string
	}{
		{"/direct", 202, "direct"},
		{"/nowhere", 404, "route not found\n"},
		{"/auth", 403, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			c, br := dialRaw(t, tg.addr(3000))
			if _, err := io.WriteString(c, head(tc.path)); err != nil {
				t.Fatal(err)
			}
			m, err := readReply(br, "POST")
			if err != nil {
				t.Fatal(err)
			}
			if m.status() != tc.want || (tc.body != "" && string(m.body) != tc.body) {
				t.Fatalf("answer %q %q, want %d %q instead of 100 Continue", m.line, m.body, tc.want, tc.body)
			}
		})
	}
	c, br := dialRaw(t, tg.addr(3000))
	if _, err := io.WriteString(c, head("/up")); err != nil {
		t.Fatal(err)
	}
	if m, err := readReply(br, "POST"); err != nil || m.status() != 100 {
		t.Fatalf("forwarded request: %q, %v; want 100 Continue first", m.line, err)
	}
	m := roundTripRaw(t, c, br, "POST", "hello")
	if m.status() != 200 || !strings.HasSuffix(string(m.body), "\nhello") {
		t.Fatalf("forwarded request: %q %q", m.line, m.body)
	}
	nextSeen(t, seen)
}

// TestHostnamesWithFinalDotOrUnderscore: "example.com." names the same host
// as "example.com", in the config and in Host; underscores are accepted in
// names (internal hosts use them), as agentgateway accepts them.
func TestHostnamesWithFinalDotOrUnderscore(t *testing.T) {
	addr, _ := rawHTTPUpstream(t, okAnswer)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - hostname: example.com.
    routes:
    - backends: [{host: ${UP}}]
  - hostname: my_host.local
    routes:
    - backends: [{host: ${UP}}]
  - routes:
    - policies: {directResponse: {status: 404, body: other}}
`, map[string]string{"UP": addr})
	for _, host := range []string{"example.com", "Example.COM.", "example.com.:3000", "my_host.local"} {
		c, br := dialRaw(t, tg.addr(3000))
		if m := roundTripRaw(t, c, br, "GET", "GET / HTTP/1.1\r\nHost: "+host+"\r\n\r\n"); m.status() != 200 {
			t.Errorf("Host %q: status %d (%q), want the named listener's 200", host, m.status(), m.body)
		}
	}
}

// TestUnsupportedExpectationGets417: an expectation other than 100-continue
// cannot be met and must not be dropped silently: 417, the connection
// closes (a body may follow), and nothing reaches the upstream. 100-continue
// in any case, alone or listed twice, still goes through.
func TestUnsupportedExpectationGets417(t *testing.T) {
	addr, seen := rawHTTPUpstream(t, echoAnswer)
	tg := startGateway(t, oneRoute(addr), nil)
	for _, tc := range []struct {
		expect string
		want   int
	}{
		{"something-else", 417},
		{"100-continue, x-other", 417},
		{"100-Continue", 200},
		{"100-continue, 100-continue", 200},
	} {
		t.Run(tc.expect, func(t *testing.T) {
			c, br := dialRaw(t, tg.addr(3000))
			// The body is sent with the head: a client that does not wait.
			req := "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: " + tc.expect + "\r\n\r\nhello"
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			m, err := readReply(br, "POST")
			if err == nil && m.status() == 100 {
				m, err = readReply(br, "POST")
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.status() != tc.want {
				t.Fatalf("answer %q %q, want %d", m.line, m.body, tc.want)
			}
			if tc.want == 200 {
				if up := nextSeen(t, seen); up.fields.has("Expect") || string(up.body) != "hello" {
					t.Fatalf("upstream got %q with body %q; want no Expect and the body", up.fields, up.body)
				}
				return
			}
			if _, err := br.ReadByte(); !isClosed(err) {
				t.Fatalf("connection still open after 417: %v", err)
			}
			select {
			case m := <-seen:
				t.Fatalf("the upstream got %q", m.line)
			default:
			}
		})
	}
}

// TestAbsoluteFormPathKept: the path of an absolute-form target, as the
// route, the policies and the access log keep it, stays the request's
// when the target is rewritten for the upstream (a backendAuth key put in
// the query). It was a slice of the target's buffer, which forwarding
// rewrote in place: the log and CEL's request.path showed other bytes,
// among them parts of the backend's key.
func TestAbsoluteFormPathKept(t *testing.T) {
	addr, seen := rawHTTPUpstream(t, echoAnswer)
	tg := startGateway(t, `
frontendPolicies:
  accessLog:
    add: { celpath: request.path }
binds:
- port: 3000
  listeners:
  - routes:
    - backends:
      - host: ${UP}
        policies:
          backendAuth: { key: { value: QSECRETKEY123, location: { queryParameter: { name: key } } } }
`, map[string]string{"UP": addr})
	n := 0
	for _, host := range []string{"h.ex", strings.Repeat("h", 13) + ".ex", strings.Repeat("h", 31) + ".ex"} {
		for _, path := range []string{"/p", "/ppppp", "/" + strings.Repeat("p", 30)} {
			for _, query := range []string{"", "?q=1", "?" + strings.Repeat("q", 25) + "=1"} {
				n++
				target := "http://" + host + path + query
				c, br := dialRaw(t, tg.addr(3000))
				if m := roundTripRaw(t, c, br, "GET", "GET "+target+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); m.status() != 200 {
					t.Fatalf("%s: status %d (%q)", target, m.status(), m.body)
				}
				sep := "?"
				if query != "" {
					sep = "&"
				}
				if got, want := nextSeen(t, seen).target(), path+query+sep+"key=QSECRETKEY123"; got != want {
					t.Errorf("%s: upstream got %q, want %q", target, got, want)
				}
				eventually(t, 5*time.Second, "the request's access line", func() bool {
					return len(tg.accessLogs().FilterMessage("request").All()) >= n
				})
				line := tg.accessLogs().FilterMessage("request").All()[n-1].ContextMap()
				if line["path"] != path || line["celpath"] != path {
					t.Errorf("%s: logged path %q, request.path %q, want %q", target, line["path"], line["celpath"], path)
				}
			}
		}
	}
}
