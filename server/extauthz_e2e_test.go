package server

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"

	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
)

// TestExtAuthzE2E drives a listener's extAuthz (a real gRPC Authorization
// service) through the gateway: the service decides by the token, the
// header it adds reaches the backend and the one it adds to the response
// the client, its metadata feeds a route's authorization rule, and an
// HTTP-protocol service on another route.
func TestExtAuthzE2E(t *testing.T) {
	up, seen := headerRecorder(t, nil)
	authz := &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		switch r.GetAttributes().GetRequest().GetHttp().GetHeaders()["authorization"] {
		case "Bearer eng":
			return extauthztest.Allow(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "x-user", Value: "alice"}},
			}, ResponseHeadersToAdd: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "x-authz-session", Value: "s1"}},
			}}, map[string]any{"group": "eng"})
		case "Bearer ops":
			return extauthztest.Allow(nil, map[string]any{"group": "ops"})
		}
		return extauthztest.Deny(codes.PermissionDenied)
	}}
	addr := extauthztest.Start(t, authz)
	httpAuthz := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer web" { // one the gRPC service refuses
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(200)
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - policies:
      extAuthz:
        host: '${AUTHZ}'
        protocol: {grpc: {context: {listener: main}}}
    routes:
    - matches: [{path: {pathPrefix: /eng}}]
      policies:
        authorization: {rules: ['extauthz.group == "eng"']}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /http}}]
      policies:
        extAuthz:
          host: '${HTTP_AUTHZ}'
          protocol: {http: {redirect: '"/login?to=" + request.path'}}
      backends: [{host: '${UP}'}]
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": addr, "HTTP_AUTHZ": strings.TrimPrefix(httpAuthz, "http://")})
	for _, tc := range []struct {
		desc, path, token string
		wantStatus        int
	}{
		{"allowed", "/", "eng", 200},
		{"refused by the service", "/", "nobody", 403},
		{"metadata in a rule: allowed", "/eng", "eng", 200},
		{"metadata in a rule: refused", "/eng", "ops", 403},
		{"the route's own service replaces the listener's", "/http", "web", 200},
		{"the HTTP service's refusal redirects", "/http/x", "ops", 302},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, _ := get(t, tg.url(3000)+tc.path, "Authorization", "Bearer "+tc.token)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if tc.wantStatus == 302 && resp.Header.Get("Location") != "/login?to=/http/x" {
				t.Errorf("Location %q", resp.Header.Get("Location"))
			}
		})
	}
	resp, _ := get(t, tg.url(3000)+"/", "Authorization", "Bearer eng")
	user := seen().Get("X-User")
	if resp.StatusCode != 200 || user != "alice" {
		t.Errorf("the backend saw x-user %q", user)
	}
	if got := resp.Header.Values("X-Authz-Session"); len(got) != 1 || got[0] != "s1" {
		t.Errorf("the client got x-authz-session %q, want s1 (response_headers_to_add)", got)
	}
	if got := authz.Last(t).GetAttributes().GetContextExtensions()["listener"]; got != "main" {
		t.Errorf("context extensions %v", authz.Last(t).GetAttributes().GetContextExtensions())
	}
}

// TestExtAuthzTokenExchangeE2E: the shape of agentgateway's token-exchange
// example. The HTTP check is a POST of a form to a token endpoint; its
// answer's token, read by metadata expressions (json(response.body),
// unvalidatedJwtPayload), replaces the client's credential through a
// transformation. :method and :authority set the check's method and Host.
func TestExtAuthzTokenExchangeE2E(t *testing.T) {
	exchanged := "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"svc","aud":"target-client","exp":4102444800}`)) + ".sig"
	var mu sync.Mutex
	var form, method, basic, host, seenAuth string
	idp := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		form, method, basic, host = r.PostForm.Encode(), r.Method, r.Header.Get("Authorization"), r.Host
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"access_token":"`+exchanged+`","token_type":"Bearer"}`)
	}))
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenAuth = r.Header.Get("Authorization")
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - backends: [{host: '${UP}'}]
      policies:
        extAuthz:
          host: '${IDP}'
          protocol:
            http:
              path: '"/realms/backend-oauth/protocol/openid-connect/token"'
              addRequestHeaders:
                content-type: '"application/x-www-form-urlencoded"'
                authorization: '"Basic " + base64.encode("requester-client:requester-secret")'
                :method: '"POST"'
                :authority: '"idp.internal"'
              body: |
                form.encode({
                  "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                  "subject_token": request.headers["authorization"].split(" ")[1],
                  "audience": "target-client"
                })
              metadata:
                token: json(response.body).access_token
                subject: unvalidatedJwtPayload(json(response.body).access_token).sub
        transformations:
          request:
            set:
              authorization: '"Bearer " + extauthz.token'
              x-subject: extauthz.subject
`, map[string]string{"UP": up, "IDP": strings.TrimPrefix(idp, "http://")})
	resp, body := get(t, tg.url(3000)+"/", "Authorization", "Bearer user-token")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if method != "POST" || !strings.Contains(form, "subject_token=user-token") || basic != "Basic cmVxdWVzdGVyLWNsaWVudDpyZXF1ZXN0ZXItc2VjcmV0" || host != "idp.internal" {
		t.Errorf("the token endpoint got %s %q with %q for host %q", method, form, basic, host)
	}
	if seenAuth != "Bearer "+exchanged {
		t.Errorf("the backend got authorization %q", seenAuth)
	}
}

// TestExtAuthzRequestBodyE2E: the service sees the body (whole, or its
// first bytes marked partial), the backend still gets all of it, and a body
// over the bound without partial messages is refused with 413.
func TestExtAuthzRequestBodyE2E(t *testing.T) {
	var mu sync.Mutex
	var backendGot string
	up := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		backendGot = string(b)
		mu.Unlock()
		w.Write([]byte("ok"))
	}))
	authz := &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		if strings.HasPrefix(r.GetAttributes().GetRequest().GetHttp().GetBody(), "allow") {
			return extauthztest.Allow(nil, nil)
		}
		return extauthztest.Deny(codes.PermissionDenied)
	}}
	addr := extauthztest.Start(t, authz)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /whole}}]
      policies:
        extAuthz: {host: '${AUTHZ}', includeRequestBody: {maxRequestBytes: 16}}
      backends: [{host: '${UP}'}]
    - policies:
        extAuthz: {host: '${AUTHZ}', includeRequestBody: {maxRequestBytes: 16, allowPartialMessage: true}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": addr})
	long := "allow" + strings.Repeat("x", 995)
	post := func(path, body string, chunked bool) int {
		t.Helper()
		var r io.Reader = strings.NewReader(body)
		if chunked {
			r = io.MultiReader(strings.NewReader(body)) // no length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+path, r)
		resp, _ := do(t, req)
		return resp.StatusCode
	}
	for _, tc := range []struct {
		desc, path, body string
		chunked          bool
		want             int
		wantPartial      bool
	}{
		{"a short body, whole", "/whole", "allow-me", false, 200, false},
		{"a short body refused by its content", "/whole", "deny-me", false, 403, false},
		{"over the bound without partial messages", "/whole", long, false, 413, false},
		{"over the bound, partial", "/p", long, false, 200, true},
		{"chunked, partial", "/p", long, true, 200, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			before := len(authz.Checks())
			if got := post(tc.path, tc.body, tc.chunked); got != tc.want {
				t.Fatalf("%d, want %d", got, tc.want)
			}
			if tc.want == 413 {
				if len(authz.Checks()) != before {
					t.Error("the service was asked about a body it could not see")
				}
				return
			}
			h := authz.Last(t).GetAttributes().GetRequest().GetHttp()
			if tc.wantPartial != (h.GetHeaders()["x-envoy-auth-partial-body"] == "true") || len(h.GetBody()) > 16 {
				t.Errorf("the service saw %d bytes, headers %v", len(h.GetBody()), h.GetHeaders())
			}
			if tc.want == 200 {
				mu.Lock()
				got := backendGot
				mu.Unlock()
				if got != tc.body {
					t.Errorf("the backend got %d bytes, want %d", len(got), len(tc.body))
				}
			}
		})
	}
	// A body the client cuts short is the client's fault (400), not a body
	// too large, and the service is not asked about it.
	for _, path := range []string{"/whole", "/p"} {
		before := len(authz.Checks())
		c, err := net.Dial("tcp", tg.addr(3000))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		sendAndHalfClose(t, c, "POST "+path+" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nallow\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || resp.StatusCode != 400 {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Errorf("%s, body cut short: %d, %v; want 400", path, status, err)
		}
		if len(authz.Checks()) != before {
			t.Errorf("%s: the service was asked about a body cut short", path)
		}
	}
}

// TestExtAuthzCannotBreakFraming: a check service that sets or removes
// Content-Length or Transfer-Encoding on the request it allows changes
// nothing of how the body is framed. Before, a Content-Length of 0 set, or
// the header removed, failed every POST with 502 and nothing reached the
// backend; a larger one answered the client 400.
func TestExtAuthzCannotBreakFraming(t *testing.T) {
	up, last := bodyRecorder(t, nil)
	for _, tc := range []struct {
		desc string
		ok   *authv3.OkHttpResponse
	}{
		{desc: "content-length 0 set", ok: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "content-length", Value: "0"}}}}},
		{desc: "a larger content-length set", ok: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "Content-Length", Value: "100"}}}}},
		{desc: "transfer-encoding set", ok: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "transfer-encoding", Value: "chunked"}}}}},
		{desc: "content-length removed", ok: &authv3.OkHttpResponse{HeadersToRemove: []string{"content-length"}}},
		{desc: "transfer-encoding removed", ok: &authv3.OkHttpResponse{HeadersToRemove: []string{"Transfer-Encoding"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			addr := extauthztest.Start(t, &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse {
				return extauthztest.Allow(tc.ok, nil)
			}})
			tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - policies:
      extAuthz: {host: '${AUTHZ}', protocol: {grpc: {}}}
    routes:
    - backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": addr})
			for _, chunked := range []bool{false, true} {
				_, before := last()
				resp, body := postBody(t, tg.url(3000)+"/", `{"hello":"world"}`, chunked)
				if seen, n := last(); resp.StatusCode != 200 || body != "ok" || n != before+1 || string(seen.body) != `{"hello":"world"}` {
					t.Errorf("chunked %v: %d %q; the backend got %d requests, the last with %q", chunked, resp.StatusCode, body, n-before, seen.body)
				}
			}
		})
	}
}

// TestExtAuthzRequestSizeAndProtocolE2E: the check's request size and
// protocol, as Envoy's attribute context says them, whatever the client
// speaks: size is the Content-Length, 0 without a body, -1 when unknown
// (a chunked body, an HTTP/2 one without Content-Length), the whole
// body's length once includeRequestBody read it (a larger body sent in
// part streams on: its size is as declared); protocol HTTP/1.0, HTTP/1.1
// or HTTP/2.
func TestExtAuthzRequestSizeAndProtocolE2E(t *testing.T) {
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	authz := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }}
	addr := extauthztest.Start(t, authz)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /body}}]
      policies:
        extAuthz: {host: '${AUTHZ}', includeRequestBody: {maxRequestBytes: 16, allowPartialMessage: true}}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /partial}}]
      policies:
        extAuthz: {host: '${AUTHZ}', includeRequestBody: {maxRequestBytes: 4, allowPartialMessage: true}}
      backends: [{host: '${UP}'}]
    - policies:
        extAuthz: {host: '${AUTHZ}'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": addr})
	base := tg.url(3000)
	// streamed is a body of unknown length: chunked in HTTP/1.1, DATA
	// frames without Content-Length in HTTP/2.
	streamed := func() io.Reader { return io.MultiReader(strings.NewReader("hello "), strings.NewReader("world")) }
	for _, tc := range []struct {
		desc         string
		h2           bool
		method, path string
		body         func() io.Reader
		length       int64 // the request's ContentLength (-1: unknown)
		wantSize     int64
		wantProtocol string
	}{
		{"HTTP/1.1 GET", false, "GET", "/", nil, 0, 0, "HTTP/1.1"},
		{"HTTP/1.1 POST", false, "POST", "/", func() io.Reader { return strings.NewReader("hello") }, 5, 5, "HTTP/1.1"},
		{"HTTP/1.1 chunked POST", false, "POST", "/", streamed, -1, -1, "HTTP/1.1"},
		{"HTTP/1.1 chunked POST, body read", false, "POST", "/body", streamed, -1, 11, "HTTP/1.1"},
		{"HTTP/1.1 chunked POST, body sent in part", false, "POST", "/partial", streamed, -1, -1, "HTTP/1.1"},
		{"HTTP/1.1 POST, body sent in part", false, "POST", "/partial", streamed, 11, 11, "HTTP/1.1"},
		{"HTTP/2 GET", true, "GET", "/", nil, 0, 0, "HTTP/2"},
		{"HTTP/2 POST", true, "POST", "/", func() io.Reader { return strings.NewReader("hello") }, 5, 5, "HTTP/2"},
		{"HTTP/2 POST without Content-Length", true, "POST", "/", streamed, -1, -1, "HTTP/2"},
		{"HTTP/2 POST without Content-Length, body read", true, "POST", "/body", streamed, -1, 11, "HTTP/2"},
		{"HTTP/2 POST without Content-Length, body sent in part", true, "POST", "/partial", streamed, -1, -1, "HTTP/2"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var body io.Reader
			if tc.body != nil {
				body = tc.body()
			}
			req, err := http.NewRequest(tc.method, base+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tc.length
			client := testClient
			if tc.h2 {
				client = h2cClient()
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			h := authz.Last(t).GetAttributes().GetRequest().GetHttp()
			if h.GetSize() != tc.wantSize || h.GetProtocol() != tc.wantProtocol {
				t.Errorf("size %d, protocol %q; want %d, %q", h.GetSize(), h.GetProtocol(), tc.wantSize, tc.wantProtocol)
			}
		})
	}
	t.Run("HTTP/1.0 GET", func(t *testing.T) {
		c, err := net.Dial("tcp", tg.addr(3000))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.0\r\nHost: gw.test\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v", resp, err)
		}
		h := authz.Last(t).GetAttributes().GetRequest().GetHttp()
		if h.GetSize() != 0 || h.GetProtocol() != "HTTP/1.0" {
			t.Errorf("size %d, protocol %q; want 0, HTTP/1.0", h.GetSize(), h.GetProtocol())
		}
	})
}

// TestExtAuthzInvalidUTF8E2E: a request with bytes that are not UTF-8 (in
// a header, the path, the query, the body) is still checked. The gRPC
// check request's strings must be UTF-8, and grpc-go refuses to marshal
// one that is not, so the check never left and counted as a service that
// could not decide: with failureMode allow the request passed unchecked,
// and by default any such request was refused 403. The service now sees
// each run of such bytes as U+FFFD; the HTTP protocol passes them as
// they are.
func TestExtAuthzInvalidUTF8E2E(t *testing.T) {
	up, _ := headerRecorder(t, nil)
	authz := &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		if r.GetAttributes().GetRequest().GetHttp().GetHeaders()["x-authz"] == "deny" {
			return withStatus(extauthztest.Deny(codes.PermissionDenied), 402)
		}
		return extauthztest.Allow(nil, nil)
	}}
	addr := extauthztest.Start(t, authz)
	var mu sync.Mutex
	var httpJunk string
	httpAuthz := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		httpJunk = r.Header.Get("X-Junk")
		mu.Unlock()
		if r.Header.Get("X-Authz") == "deny" {
			w.WriteHeader(402)
		}
	}))
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - matches: [{path: {pathPrefix: /strict}}]
      policies:
        extAuthz: {host: '${AUTHZ}'}
      backends: [{host: '${UP}'}]
    - matches: [{path: {pathPrefix: /http}}]
      policies:
        extAuthz:
          host: '${HTTP_AUTHZ}'
          failureMode: allow
          includeRequestHeaders: [x-authz, x-junk]
          protocol: {http: {}}
      backends: [{host: '${UP}'}]
    - policies:
        extAuthz:
          host: '${AUTHZ}'
          failureMode: allow
          includeRequestBody: {maxRequestBytes: 1000}
          protocol: {grpc: {metadata: {gw: '{"junk": request.headers["x-junk"], "list": [request.headers["x-junk"]], "map": {request.headers["x-junk"]: 1}}'}}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": addr, "HTTP_AUTHZ": strings.TrimPrefix(httpAuthz, "http://")})
	raw := func(req string) int {
		t.Helper()
		c := dialTest(t, tg.addr(3000))
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	h2 := func(path string, headers ...string) int {
		t.Helper()
		u, _ := url.Parse(tg.url(3000))
		u.Opaque = path
		req := &http.Request{Method: "GET", URL: u, Header: http.Header{}, Host: u.Host}
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		resp, _ := doWith(t, h2cClient(), req)
		return resp.StatusCode
	}
	seen := func() *authv3.AttributeContext_HttpRequest {
		return authz.Last(t).GetAttributes().GetRequest().GetHttp()
	}
	header := func(name string) func() string { return func() string { return seen().GetHeaders()[name] } }
	for _, tc := range []struct {
		desc string
		send func() int
		want int
		seen func() string // what the service saw of the bytes; nil: not looked at
	}{
		{"a header, denied", func() int {
			return raw("GET /x HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\nX-Junk: a\xffb\r\n\r\n")
		}, 402, header("x-junk")},
		{"a header, in the metadata", func() int {
			return raw("GET /x HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\nX-Junk: a\xffb\r\n\r\n")
		}, 402, func() string {
			// In a string, a list and a key: all of them.
			gw := authz.Last(t).GetAttributes().GetMetadataContext().GetFilterMetadata()["gw"].AsMap()
			list, _ := gw["list"].([]any)
			m, _ := gw["map"].(map[string]any)
			_, key := m["a\uFFFDb"]
			if len(list) != 1 || list[0] != "a\uFFFDb" || !key {
				return fmt.Sprint(gw)
			}
			s, _ := gw["junk"].(string)
			return s
		}},
		{"the path", func() int { return raw("GET /x/a\xffb HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\n\r\n") }, 402,
			func() string { return seen().GetPath() }},
		{"the query", func() int { return raw("GET /x?q=a\xffb HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\n\r\n") }, 402,
			func() string { return seen().GetQuery() }},
		{"the body", func() int {
			return raw("POST /x HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\nContent-Length: 3\r\n\r\na\xffb")
		}, 402, func() string { return seen().GetBody() }},
		{"a chunked body", func() int {
			return raw("POST /x HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\xffb\r\n0\r\n\r\n")
		}, 402, func() string { return seen().GetBody() }},
		{"HTTP/2, a header", func() int { return h2("/x", "X-Authz", "deny", "X-Junk", "a\xffb") }, 402, header("x-junk")},
		{"HTTP/2, the path", func() int { return h2("/x/a\xffb", "X-Authz", "deny") }, 402, func() string { return seen().GetPath() }},
		{"failure mode deny: allowed", func() int {
			return raw("GET /strict HTTP/1.1\r\nHost: a\r\nX-Junk: a\xffb\r\n\r\n")
		}, 200, header("x-junk")},
		{"failure mode deny: denied", func() int {
			return raw("GET /strict HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\nX-Junk: a\xffb\r\n\r\n")
		}, 402, header("x-junk")},
		{"the HTTP protocol", func() int {
			return raw("GET /http HTTP/1.1\r\nHost: a\r\nX-Authz: deny\r\nX-Junk: a\xffb\r\n\r\n")
		}, 402, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.send(); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
			if tc.seen != nil {
				if got := tc.seen(); !strings.Contains(got, "a\uFFFDb") {
					t.Errorf("the service saw %q, want a U+FFFD for the byte", got)
				}
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if httpJunk != "a\xffb" {
		t.Errorf("the HTTP service saw x-junk %q, want the client's bytes", httpJunk)
	}
}

// withStatus gives a refusal the HTTP status status.
func withStatus(r *authv3.CheckResponse, status int) *authv3.CheckResponse {
	r.HttpResponse = &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{Code: typev3.StatusCode(status)}}}
	return r
}

// TestExtAuthzPartialBodyStreamsE2E: with allowPartialMessage, the service
// gets the body's first maxRequestBytes and the whole body streams on to
// the backend, whatever its size: before, the body was read whole up to
// maxBufferSize to be kept, and a larger one was refused 413. The backend
// starts getting the body before the client has sent all of it (the rest
// is sent only once the backend has a byte), its length as declared.
func TestExtAuthzPartialBodyStreamsE2E(t *testing.T) {
	type received struct {
		body   []byte
		length int64
		err    error
	}
	started := make(chan struct{}, 1)
	results := make(chan received, 1)
	up := upstreamH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := make([]byte, 1)
		_, err := io.ReadFull(r.Body, first)
		select {
		case started <- struct{}{}:
		default:
		}
		rest, err2 := io.ReadAll(r.Body)
		if err == nil {
			err = err2
		}
		select {
		case results <- received{append(first, rest...), r.ContentLength, err}:
		default:
		}
		w.Write([]byte("ok"))
	}))
	authz := &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		if strings.HasPrefix(r.GetAttributes().GetRequest().GetHttp().GetBody(), "allow") {
			return extauthztest.Allow(nil, nil)
		}
		return extauthztest.Deny(codes.PermissionDenied)
	}}
	addr := extauthztest.Start(t, authz)
	tg := startGateway(t, `
frontendPolicies:
  http: {maxBufferSize: 4096}
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        extAuthz: {host: '${AUTHZ}', includeRequestBody: {maxRequestBytes: 16, allowPartialMessage: true}}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "AUTHZ": addr})
	body := []byte("allow" + strings.Repeat("0123456789abcdef", 16<<10)) // 256 KiB
	// head is sent before the backend has a byte of the body.
	const head = 128 << 10
	for _, c := range bothClients() {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, chunked %v", c.name, chunked), func(t *testing.T) {
				// The rest of the body goes once the backend has a byte of
				// it: a gateway that waited for the whole body would never
				// send it one.
				gated := readerFunc(func(p []byte) (int, error) {
					select {
					case <-started:
					case <-time.After(5 * time.Second):
						return 0, fmt.Errorf("the backend got nothing of the first %d bytes", head)
					}
					return 0, io.EOF
				})
				var r io.Reader = io.MultiReader(bytes.NewReader(body[:head]), gated, bytes.NewReader(body[head:]))
				req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/", r)
				req.ContentLength = int64(len(body))
				if chunked {
					req.ContentLength = -1
				}
				resp, answer := doWith(t, c.client, req)
				if resp.StatusCode != 200 || answer != "ok" {
					t.Fatalf("%d %q", resp.StatusCode, answer)
				}
				var got received
				select {
				case got = <-results:
				case <-time.After(5 * time.Second):
					t.Fatal("the backend got no request")
				}
				if got.err != nil || !bytes.Equal(got.body, body) {
					t.Fatalf("the backend got %d bytes (%v), want the %d sent", len(got.body), got.err, len(body))
				}
				if got.length != req.ContentLength {
					t.Errorf("the backend got Content-Length %d, want %d", got.length, req.ContentLength)
				}
				h := authz.Last(t).GetAttributes().GetRequest().GetHttp()
				if h.GetBody() != string(body[:16]) || h.GetHeaders()["x-envoy-auth-partial-body"] != "true" {
					t.Errorf("the service saw body %q, headers %v", h.GetBody(), h.GetHeaders())
				}
				if want := req.ContentLength; h.GetSize() != want {
					t.Errorf("the service saw size %d, want %d", h.GetSize(), want)
				}
			})
		}
	}
	// A refusal by the body's first bytes answers before the rest is read.
	req, _ := http.NewRequest(http.MethodPost, tg.url(3000)+"/", bytes.NewReader(append([]byte("deny!"), body...)))
	if resp, _ := do(t, req); resp.StatusCode != 403 {
		t.Errorf("refused by its first bytes: %d, want 403", resp.StatusCode)
	}
}

// readerFunc is a function as an io.Reader.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
