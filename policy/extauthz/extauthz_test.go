package extauthz

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/extauthz/extauthztest"
	"github.com/relaygate/gateway/policy/extproc"
	"github.com/relaygate/gateway/policy/policytest"
)

func header(k, v string, action corev3.HeaderValueOption_HeaderAppendAction) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}, AppendAction: action}
}

func newPolicy(t *testing.T, cfg config.ExtAuthz, addr string) *ExtAuthz {
	t.Helper()
	p, err := New(&cfg, Options{Addr: addr, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGRPCAllowEditsTheRequest(t *testing.T) {
	s := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse {
		return extauthztest.Allow(&authv3.OkHttpResponse{
			Headers: []*corev3.HeaderValueOption{
				header("x-user", "alice", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
				{Header: &corev3.HeaderValue{Key: "x-multi", Value: "2"}, Append: wrapperspb.Bool(true)},
				header("x-absent", "set", corev3.HeaderValueOption_ADD_IF_ABSENT),
				header("x-kept", "not-set", corev3.HeaderValueOption_ADD_IF_ABSENT),
				header("x-bad", "a\r\nb", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
				// Routing headers are not the service's to change (Envoy's
				// default header mutation rules).
				header("host", "evil.example", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
				header("Host", "evil.example", corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD),
				header(":authority", "evil.example", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			},
			HeadersToRemove:         []string{"x-secret", "host", ":path"},
			QueryParametersToSet:    []*corev3.QueryParameter{{Key: "tenant", Value: "t1"}},
			QueryParametersToRemove: []string{"debug"},
		}, map[string]any{"user": "alice", "groups": []any{"eng"}})
	}}
	addr := extauthztest.Start(t, s)
	md := config.ValueExpression(`{"path": request.path}`)
	p := newPolicy(t, config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{GRPC: &config.ExtAuthzGRPC{
		Context:  map[string]string{"route": "r1"},
		Metadata: map[string]config.ValueExpression{"gw": md},
	}}}, addr)
	c := policytest.Ctx(policytest.NewRequest("GET", "/a/b?debug=1&x=2",
		"Authorization", "Bearer t", "X-Secret", "s", "X-Multi", "1", "X-User", "mallory", "X-Kept", "k"))
	if res := p.OnRequest(c); res != policy.Continue {
		t.Fatalf("refused: %d %s", c.Fast.Response.StatusCode(), c.Fast.Response.Body())
	}
	req := &c.Fast.Request
	for _, tc := range []struct{ name, want string }{
		{"X-User", "alice"}, {"X-Absent", "set"}, {"X-Kept", "k"}, {"X-Secret", ""}, {"X-Bad", ""}, {"Host", "gw.test"},
	} {
		if got := string(req.Header.Peek(tc.name)); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := req.Header.PeekAll("Host"); len(got) != 1 || string(req.Host()) != "gw.test" {
		t.Errorf("Host %q, %q; want only gw.test", got, req.Host())
	}
	if got := req.Header.PeekAll("X-Multi"); len(got) != 2 {
		t.Errorf("X-Multi = %q, want both values", got)
	}
	if got := string(req.Header.RequestURI()); got != "/a/b?x=2&tenant=t1" {
		t.Errorf("forwarded target %q", got)
	}
	if c.ExtAuthz["user"] != "alice" {
		t.Errorf("extauthz = %v", c.ExtAuthz)
	}
	// What the service saw.
	check := s.Last(t)
	h := check.GetAttributes().GetRequest().GetHttp()
	if h.GetMethod() != "GET" || h.GetPath() != "/a/b?debug=1&x=2" || h.GetHost() != "gw.test" || h.GetHeaders()["authorization"] != "Bearer t" || h.GetHeaders()[":path"] != "/a/b?debug=1&x=2" {
		t.Errorf("check request http = %v", h)
	}
	if got := check.GetAttributes().GetContextExtensions()["route"]; got != "r1" {
		t.Errorf("context extensions %v", check.GetAttributes().GetContextExtensions())
	}
	if got := check.GetAttributes().GetMetadataContext().GetFilterMetadata()["gw"].AsMap()["path"]; got != "/a/b" {
		t.Errorf("metadata %v", check.GetAttributes().GetMetadataContext())
	}
}

func withDenied(r *authv3.CheckResponse, d *authv3.DeniedHttpResponse) *authv3.CheckResponse {
	r.HttpResponse = &authv3.CheckResponse_DeniedResponse{DeniedResponse: d}
	return r
}

func TestGRPCDeny(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		resp       *authv3.CheckResponse
		wantStatus int
		wantBody   string
		wantHeader [2]string
	}{
		{
			desc: "the denied response as the service wrote it",
			resp: withDenied(extauthztest.Deny(codes.Unauthenticated), &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
				Headers: []*corev3.HeaderValueOption{header("www-authenticate", `Bearer realm="x"`, 0)},
				Body:    "log in first",
			}),
			wantStatus: 401, wantBody: "log in first", wantHeader: [2]string{"WWW-Authenticate", `Bearer realm="x"`},
		},
		{
			desc:       "a bare refusal is 403",
			resp:       extauthztest.Deny(codes.PermissionDenied),
			wantStatus: 403, wantBody: "forbidden\n",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			addr := extauthztest.Start(t, &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return tc.resp }})
			p := newPolicy(t, config.ExtAuthz{}, addr)
			c := policytest.Ctx(policytest.NewRequest("GET", "/"))
			if p.OnRequest(c) != policy.Done {
				t.Fatal("allowed")
			}
			resp := &c.Fast.Response
			if resp.StatusCode() != tc.wantStatus || string(resp.Body()) != tc.wantBody {
				t.Errorf("%d %q, want %d %q", resp.StatusCode(), resp.Body(), tc.wantStatus, tc.wantBody)
			}
			if tc.wantHeader[0] != "" && string(resp.Header.Peek(tc.wantHeader[0])) != tc.wantHeader[1] {
				t.Errorf("%s = %q", tc.wantHeader[0], resp.Header.Peek(tc.wantHeader[0]))
			}
		})
	}
}

func TestIncludeRequestHeaders(t *testing.T) {
	s := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }}
	addr := extauthztest.Start(t, s)
	p := newPolicy(t, config.ExtAuthz{IncludeRequestHeaders: []string{"X-Keep", ":method"}}, addr)
	c := policytest.Ctx(policytest.NewRequest("POST", "/", "X-Keep", "1", "X-Drop", "2", "Authorization", "secret"))
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("refused")
	}
	got := s.Last(t).GetAttributes().GetRequest().GetHttp().GetHeaders()
	if len(got) != 2 || got["x-keep"] != "1" || got[":method"] != "POST" {
		t.Errorf("headers sent: %v", got)
	}
}

// A service that cannot decide is the failure mode's business; a check
// request the policy cannot build is refused whatever the mode.
func TestFailureModes(t *testing.T) {
	dead := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}()
	slow := extauthztest.Start(t, &extauthztest.Server{Delay: 5 * time.Second, Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }})
	noValue := config.ValueExpression(`request.headers["x-missing"]`)
	for _, tc := range []struct {
		desc, addr string
		mode       config.ExtAuthzFailureMode
		http       bool
		wantStatus int                     // 0: allowed
		path, body *config.ValueExpression // HTTP's
	}{
		{"unreachable, deny", dead, config.ExtAuthzFailureMode{}, false, 403, nil, nil},
		{"unreachable, allow", dead, config.ExtAuthzFailureMode{Allow: true}, false, 0, nil, nil},
		{"unreachable, deny with status", dead, config.ExtAuthzFailureMode{DenyStatus: 503}, false, 503, nil, nil},
		{"too slow, deny", slow, config.ExtAuthzFailureMode{}, false, 403, nil, nil},
		{"unreachable over HTTP, deny", dead, config.ExtAuthzFailureMode{}, true, 403, nil, nil},
		{"unreachable over HTTP, allow", dead, config.ExtAuthzFailureMode{Allow: true}, true, 0, nil, nil},
		// A check request that cannot be built is the policy's fault, not
		// the service's: refused 403 whatever the failure mode says (as
		// agentgateway).
		{"a path without a value, allow", dead, config.ExtAuthzFailureMode{Allow: true}, true, 403, &noValue, nil},
		{"a body without a value, allow", dead, config.ExtAuthzFailureMode{Allow: true}, true, 403, nil, &noValue},
		{"a path without a value, deny with status", dead, config.ExtAuthzFailureMode{DenyStatus: 503}, true, 403, &noValue, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg := config.ExtAuthz{FailureMode: tc.mode}
			if tc.http {
				cfg.Protocol = &config.ExtAuthzProtocol{HTTP: &config.ExtAuthzHTTP{Path: tc.path, Body: tc.body}}
			}
			p := newPolicy(t, cfg, tc.addr)
			c := policytest.Ctx(policytest.NewRequest("GET", "/"))
			start := time.Now()
			res := p.OnRequest(c)
			if time.Since(start) > 3*time.Second {
				t.Errorf("the check took %v: the timeout did not hold", time.Since(start))
			}
			if tc.wantStatus == 0 {
				if res != policy.Continue {
					t.Fatalf("refused with %d", c.Fast.Response.StatusCode())
				}
				return
			}
			if res != policy.Done || c.Fast.Response.StatusCode() != tc.wantStatus || string(c.Fast.Response.Body()) != "external authorization failed\n" {
				t.Fatalf("%v %d %q, want %d", res, c.Fast.Response.StatusCode(), c.Fast.Response.Body(), tc.wantStatus)
			}
		})
	}
}

func TestHTTPProtocol(t *testing.T) {
	var mu sync.Mutex
	var seen *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Clone(context.Background())
		mu.Unlock()
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			w.Header().Set("X-Auth-User", "alice")
			w.Header().Set("X-Not-Copied", "1")
			w.WriteHeader(200)
		case "Bearer teapot":
			w.WriteHeader(418)
			io.WriteString(w, "no tea")
		default:
			w.Header().Set("WWW-Authenticate", "Basic")
			w.WriteHeader(401)
			io.WriteString(w, "who are you")
		}
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	path := config.ValueExpression(`"/check" + request.path`)
	redirect := config.ValueExpression(`"https://login.example/?to=" + request.path`)
	tenant := config.ValueExpression(`"t-" + request.headers["x-tenant"]`)
	base := config.ExtAuthzHTTP{Path: &path, IncludeResponseHeaders: []string{"X-Auth-User"}, AddRequestHeaders: map[string]config.ValueExpression{"X-Tenant-Id": tenant}}
	withRedirect := base
	withRedirect.Redirect = &redirect
	plain := newPolicy(t, config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{HTTP: &base}}, addr)
	redirecting := newPolicy(t, config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{HTTP: &withRedirect}}, addr)

	c := policytest.Ctx(policytest.NewRequest("POST", "/x?y=1", "Authorization", "Bearer good", "X-Tenant", "9", "X-Other", "o"))
	if plain.OnRequest(c) != policy.Continue {
		t.Fatalf("refused: %d", c.Fast.Response.StatusCode())
	}
	if got := string(c.Fast.Request.Header.Peek("X-Auth-User")); got != "alice" || c.Fast.Request.Header.Peek("X-Not-Copied") != nil {
		t.Errorf("copied headers: x-auth-user %q, x-not-copied %q", got, c.Fast.Request.Header.Peek("X-Not-Copied"))
	}
	mu.Lock()
	if seen.Method != "POST" || seen.URL.Path != "/check/x" || seen.Header.Get("X-Tenant-Id") != "t-9" || seen.Header.Get("X-Other") != "" {
		t.Errorf("the service saw %s %s, headers %v", seen.Method, seen.URL, seen.Header)
	}
	mu.Unlock()

	for _, tc := range []struct {
		desc       string
		p          *ExtAuthz
		auth       string
		wantStatus int
		wantBody   string
		wantHeader [2]string
	}{
		{"the service's refusal as it answered", plain, "Bearer bad", 401, "who are you", [2]string{"WWW-Authenticate", "Basic"}},
		{"another status passes through", redirecting, "Bearer teapot", 418, "no tea", [2]string{}},
		{"401 with redirect", redirecting, "Bearer bad", 302, "", [2]string{"Location", "https://login.example/?to=/x"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := policytest.Ctx(policytest.NewRequest("GET", "/x", "Authorization", tc.auth))
			if tc.p.OnRequest(c) != policy.Done {
				t.Fatal("allowed")
			}
			resp := &c.Fast.Response
			if resp.StatusCode() != tc.wantStatus || string(resp.Body()) != tc.wantBody {
				t.Errorf("%d %q, want %d %q", resp.StatusCode(), resp.Body(), tc.wantStatus, tc.wantBody)
			}
			if tc.wantHeader[0] != "" && string(resp.Header.Peek(tc.wantHeader[0])) != tc.wantHeader[1] {
				t.Errorf("%s = %q", tc.wantHeader[0], resp.Header.Peek(tc.wantHeader[0]))
			}
		})
	}
}

func TestDecisionCache(t *testing.T) {
	s := &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		switch r.GetAttributes().GetRequest().GetHttp().GetHeaders()["authorization"] {
		case "Bearer ok":
			return extauthztest.Allow(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{header("x-user", "alice", 0)}},
				map[string]any{"expires": float64(time.Now().Add(time.Hour).Unix())})
		case "Bearer stale":
			return extauthztest.Allow(nil, map[string]any{"expires": float64(time.Now().Add(-time.Hour).Unix())})
		}
		return extauthztest.Deny(codes.PermissionDenied)
	}}
	addr := extauthztest.Start(t, s)
	key := config.ValueExpression(`request.headers["authorization"]`)
	for _, tc := range []struct {
		desc string
		ttl  config.ValueExpression
	}{{"a duration", `duration("1m")`}, {"a Unix time from the answer", `extauthz.expires - 5`}} {
		t.Run(tc.desc, func(t *testing.T) {
			p := newPolicy(t, config.ExtAuthz{Cache: &config.ExtAuthzCache{Key: []config.ValueExpression{key}, TTL: tc.ttl}}, addr)
			now := time.Now()
			p.cache.now = func() time.Time { return now }
			before := len(s.Checks())
			ask := func(token string) *policy.Ctx {
				c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", "Bearer "+token))
				p.OnRequest(c)
				return c
			}
			for range 3 {
				if c := ask("ok"); c.Fast.Response.StatusCode() != 200 || string(c.Fast.Request.Header.Peek("X-User")) != "alice" {
					t.Fatalf("a cached allow did not edit the request: %s", c.Fast.Request.Header.Peek("X-User"))
				}
			}
			if n := len(s.Checks()) - before; n != 1 {
				t.Fatalf("%d checks for one token, want 1", n)
			}
			if tc.ttl == `duration("1m")` {
				for range 2 {
					if c := ask("bad"); c.Fast.Response.StatusCode() != 403 {
						t.Fatalf("a cached denial: %d", c.Fast.Response.StatusCode())
					}
				}
				if n := len(s.Checks()) - before; n != 2 {
					t.Fatalf("%d checks after a refused token twice, want 2", n)
				}
				now = now.Add(2 * time.Minute)
				ask("ok")
				if n := len(s.Checks()) - before; n != 3 {
					t.Fatalf("%d checks after the ttl, want 3", n)
				}
				return
			}
			// A ttl already past keeps nothing.
			ask("stale")
			ask("stale")
			if n := len(s.Checks()) - before; n != 3 {
				t.Fatalf("%d checks, want 3 (the stale answer is not cached)", n)
			}
		})
	}
}

// TestHTTPServiceErrorsCarryNoAnswerBytes: a service's malformed answer
// fails the check, and the warning logged for it does not quote the
// answer, which may carry credentials.
func TestHTTPServiceErrorsCarryNoAnswerBytes(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nX-Token: bearer-s3cr3t\x01\r\nContent-Length: 0\r\n\r\n"))
			}()
		}
	}()
	core, logs := observer.New(zap.WarnLevel)
	cfg := config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}
	p, err := NewConnectionCheck(&cfg, Options{Addr: ln.Addr().String(), Timeout: 5 * time.Second, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.CheckConnection(connSource, connDest); v != Failed {
		t.Fatalf("verdict %d, want Failed", v)
	}
	if logs.Len() == 0 {
		t.Fatal("nothing logged")
	}
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.Interface != nil && strings.Contains(fmt.Sprint(f.Interface), "s3cr3t") {
				t.Errorf("%s logs the service's bytes: %v", e.Message, f.Interface)
			}
		}
	}
}

// TestHTTPResponseHeadersKeepHost: the HTTP service cannot change the
// request's Host, even were Host among includeResponseHeaders (a config
// error since, TestHTTPIncludeResponseHeadersNeverCopiedRefused: the
// check stays as a second line).
func TestHTTPResponseHeadersKeepHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Host", "evil.example")
		w.Header().Set("X-User", "alice")
	}))
	t.Cleanup(srv.Close)
	p := newPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{IncludeResponseHeaders: []string{"X-User"}})}, strings.TrimPrefix(srv.URL, "http://"))
	p.http.responseHeaders = []string{"Host", "X-User"}
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	if res := p.OnRequest(c); res != policy.Continue {
		t.Fatalf("refused: %d", c.Fast.Response.StatusCode())
	}
	req := &c.Fast.Request
	if got := req.Header.PeekAll("Host"); len(got) != 1 || string(req.Host()) != "gw.test" {
		t.Errorf("Host %q, %q; want only gw.test", got, req.Host())
	}
	if got := string(req.Header.Peek("X-User")); got != "alice" {
		t.Errorf("X-User %q, want alice", got)
	}
}

// TestSetReplacesEveryValue: a header the service sets replaces every
// value the client sent under its name, not only the first (fasthttp's
// Set), so a client's second copy never reaches the backend beside it.
func TestSetReplacesEveryValue(t *testing.T) {
	s := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse {
		return extauthztest.Allow(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
			header("x-user", "alice", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			header("x-role", "admin", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS),
			{Header: &corev3.HeaderValue{Key: "x-team", Value: "eng"}, Append: wrapperspb.Bool(false)},
		}}, nil)
	}}
	grpcAddr := extauthztest.Start(t, s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-User", "alice")
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		desc  string
		p     *ExtAuthz
		names []string
	}{
		{"gRPC", newPolicy(t, config.ExtAuthz{}, grpcAddr), []string{"X-User", "X-Role", "X-Team"}},
		{"HTTP includeResponseHeaders", newPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{IncludeResponseHeaders: []string{"X-User"}})}, strings.TrimPrefix(srv.URL, "http://")), []string{"X-User"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := policytest.Ctx(policytest.NewRequest("GET", "/",
				"X-User", "m1", "X-User", "m2", "X-Role", "r1", "X-Role", "r2", "X-Team", "t1", "X-Team", "t2"))
			if res := tc.p.OnRequest(c); res != policy.Continue {
				t.Fatalf("refused: %d", c.Fast.Response.StatusCode())
			}
			want := map[string]string{"X-User": "alice", "X-Role": "admin", "X-Team": "eng"}
			for _, name := range tc.names {
				if got := c.Fast.Request.Header.PeekAll(name); len(got) != 1 || string(got[0]) != want[name] {
					t.Errorf("%s = %q, want only %q", name, got, want[name])
				}
			}
		})
	}
}

// TestJWTClaimsByDefault: without metadata, the check carries the
// request's verified JWT claims (c.Claims, set by jwtAuth) where Envoy's
// jwt_authn filter leaves them, as the spec and agentgateway say; the
// policy's own metadata replaces them.
func TestJWTClaimsByDefault(t *testing.T) {
	s := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }}
	addr := extauthztest.Start(t, s)
	own := config.ValueExpression(`{"m": request.method}`)
	const jwtAuthn = "envoy.filters.http.jwt_authn"
	claims := map[string]any{"sub": "alice", "aud": "api", "exp": float64(1893456000), "groups": []any{"eng"}}
	for _, tc := range []struct {
		desc     string
		metadata map[string]config.ValueExpression
		claims   map[string]any
		want     []string // filter metadata keys
	}{
		{"a verified token", nil, claims, []string{jwtAuthn}},
		{"no token", nil, nil, nil},
		{"the policy's metadata", map[string]config.ValueExpression{"gw": own}, claims, []string{"gw"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := newPolicy(t, config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{GRPC: &config.ExtAuthzGRPC{Metadata: tc.metadata}}}, addr)
			c := policytest.Ctx(policytest.NewRequest("GET", "/"))
			c.Claims = tc.claims
			if p.OnRequest(c) != policy.Continue {
				t.Fatal("refused")
			}
			md := s.Last(t).GetAttributes().GetMetadataContext()
			if md == nil {
				t.Fatal("no metadata context")
			}
			got := md.GetFilterMetadata()
			if len(got) != len(tc.want) {
				t.Fatalf("filter metadata %v, want keys %v", got, tc.want)
			}
			for _, k := range tc.want {
				if got[k] == nil {
					t.Fatalf("filter metadata %v, want keys %v", got, tc.want)
				}
			}
			if tc.want == nil || tc.want[0] != jwtAuthn {
				return
			}
			payload, _ := got[jwtAuthn].AsMap()["jwt_payload"].(map[string]any)
			if payload["sub"] != "alice" || payload["exp"] != float64(1893456000) || fmt.Sprint(payload["groups"]) != "[eng]" {
				t.Errorf("jwt_payload %v", payload)
			}
		})
	}
}

// TestResponseHeadersToAdd: the OK response's response_headers_to_add go
// on the response (Envoy's contract, agentgateway's response_headers),
// each as its append action says, whatever answered the request; from
// the cache too. A refusal's answer gets none.
func TestResponseHeadersToAdd(t *testing.T) {
	s := &extauthztest.Server{Decide: func(r *authv3.CheckRequest) *authv3.CheckResponse {
		if r.GetAttributes().GetRequest().GetHttp().GetHeaders()["authorization"] != "Bearer ok" {
			return extauthztest.Deny(codes.PermissionDenied)
		}
		return extauthztest.Allow(&authv3.OkHttpResponse{
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{
				header("x-session", "s1", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
				{Header: &corev3.HeaderValue{Key: "x-trail", Value: "authz"}, Append: wrapperspb.Bool(true)},
				header("x-absent", "authz", corev3.HeaderValueOption_ADD_IF_ABSENT),
				header("x-kept", "authz", corev3.HeaderValueOption_ADD_IF_ABSENT),
				header("x-missing", "authz", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS),
				header("content-length", "0", corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD),
			},
		}, nil)
	}}
	addr := extauthztest.Start(t, s)
	key := config.ValueExpression(`request.headers["authorization"]`)
	p := newPolicy(t, config.ExtAuthz{Cache: &config.ExtAuthzCache{Key: []config.ValueExpression{key}, TTL: `duration("1m")`}}, addr)
	b := policy.NewChainBuilder()
	b.Add(policy.KindExtAuthz, p)
	chain := b.Build()
	for _, tc := range []struct {
		desc, token string
		want        map[string][]string // nil: the refusal, no header added
	}{
		{"allowed", "ok", map[string][]string{
			"X-Session": {"s1"}, "X-Trail": {"backend", "authz"}, "X-Absent": {"authz"}, "X-Kept": {"backend"}, "X-Missing": nil,
		}},
		{"allowed from the cache", "ok", map[string][]string{"X-Session": {"s1"}, "X-Trail": {"backend", "authz"}}},
		{"refused", "no", nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := policytest.Ctx(policytest.NewRequest("GET", "/", "Authorization", "Bearer "+tc.token))
			resp := &c.Fast.Response
			if chain.RunRequest(c) == policy.Continue {
				// The backend's answer.
				resp.Header.Add("X-Session", "b1")
				resp.Header.Add("X-Session", "b2")
				resp.Header.Add("X-Trail", "backend")
				resp.Header.Add("X-Kept", "backend")
				resp.SetBodyString("from the backend")
			} else if tc.want != nil {
				t.Fatalf("refused: %d", resp.StatusCode())
			}
			chain.RunResponse(c)
			if tc.want == nil {
				if resp.StatusCode() != 403 || resp.Header.Peek("X-Session") != nil {
					t.Fatalf("refusal %d with x-session %q", resp.StatusCode(), resp.Header.Peek("X-Session"))
				}
				return
			}
			for name, want := range tc.want {
				got := resp.Header.PeekAll(name)
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) && !(len(got) == 0 && len(want) == 0) {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if string(resp.Body()) != "from the backend" {
				t.Errorf("body %q: a framing header was applied", resp.Body())
			}
		})
	}
	if n := len(s.Checks()); n != 2 {
		t.Errorf("%d checks, want 2 (one cached)", n)
	}
}

// The partial body passes on what the server's guard of the client's
// stream tells of itself.
var (
	_ backend.ReadInterrupter = (*prefixedBody)(nil)
	_ extproc.EndWritesHeader = (*prefixedBody)(nil)
	_ policy.Unwrapper        = (*prefixedBody)(nil)
)

// closeTracker is a body stream that records whether it was closed before
// it was read to its end (another policy's stream, such as extProc's).
type closeTracker struct {
	io.Reader
	eof, closedEarly bool
}

func (c *closeTracker) Read(p []byte) (int, error) {
	n, err := c.Reader.Read(p)
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

func (c *closeTracker) Close() error {
	c.closedEarly = c.closedEarly || !c.eof
	return nil
}

// TestPartialBody: with allowPartialMessage, the service gets the first
// maxRequestBytes; a larger streamed body is read that far and goes on
// whole, as declared (Content-Length, or chunked), and one that fits is
// read whole and kept. A stream that would be closed when replaced is
// read whole instead (up to the buffer).
func TestPartialBody(t *testing.T) {
	s := &extauthztest.Server{Decide: func(*authv3.CheckRequest) *authv3.CheckResponse { return extauthztest.Allow(nil, nil) }}
	addr := extauthztest.Start(t, s)
	max := 8
	cfg := config.ExtAuthz{IncludeRequestBody: &config.ExtAuthzBody{MaxRequestBytes: &max, AllowPartialMessage: true}}
	p, err := New(&cfg, Options{Addr: addr, Timeout: 2 * time.Second, MaxBuffer: 64})
	if err != nil {
		t.Fatal(err)
	}
	long := "0123456789abcdefghij"
	for _, tc := range []struct {
		desc       string
		body       string
		length     int  // declared; -1 chunked
		closer     bool // the stream is an io.Closer
		wantSent   string
		wantStream bool // the body stays a stream
		wantLength int  // the request's Content-Length after
	}{
		{"declared, larger", long, len(long), false, long[:8], true, len(long)},
		{"chunked, larger", long, -1, false, long[:8], true, -1},
		{"chunked, fits", "short", -1, false, "short", false, 5},
		{"chunked, max bytes exactly", long[:8], -1, false, long[:8], false, 8},
		{"a closer, larger", long, -1, true, long[:8], false, len(long)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			fctx := policytest.NewRequest("POST", "/")
			src := &closeTracker{Reader: strings.NewReader(tc.body)}
			var stream io.Reader = struct{ io.Reader }{src} // no Close
			if tc.closer {
				stream = src
			}
			fctx.Request.SetBodyStream(stream, tc.length)
			c := policytest.Ctx(fctx)
			if res := p.OnRequest(c); res != policy.Continue {
				t.Fatalf("refused: %d %s", c.Fast.Response.StatusCode(), c.Fast.Response.Body())
			}
			h := s.Last(t).GetAttributes().GetRequest().GetHttp()
			partial := h.GetHeaders()["x-envoy-auth-partial-body"] == "true"
			if h.GetBody() != tc.wantSent || partial != (len(tc.body) > max) {
				t.Errorf("the service got %q (partial %v), want %q", h.GetBody(), partial, tc.wantSent)
			}
			req := &c.Fast.Request
			if req.IsBodyStream() != tc.wantStream || req.Header.ContentLength() != tc.wantLength {
				t.Errorf("stream %v, Content-Length %d; want %v, %d", req.IsBodyStream(), req.Header.ContentLength(), tc.wantStream, tc.wantLength)
			}
			var got []byte
			if req.IsBodyStream() {
				got, _ = io.ReadAll(req.BodyStream())
			} else {
				got = req.Body()
			}
			if string(got) != tc.body {
				t.Errorf("the backend would get %q, want %q", got, tc.body)
			}
			if src.closedEarly {
				t.Error("the client's stream was closed before its end")
			}
		})
	}
}

// failingAuthz answers every check with a gRPC error of its own words.
type failingAuthz struct {
	authv3.UnimplementedAuthorizationServer
	msg string
}

func (f *failingAuthz) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return nil, status.Error(codes.Unavailable, f.msg)
}

// TestServiceErrorBounded: a service's error text is bounded where it is
// logged (and on the call's span): a 100 KB message made a 100 KB warning
// per request. The failure mode still sees the service's failure.
func TestServiceErrorBounded(t *testing.T) {
	for _, tc := range []struct {
		desc, msg string
		cut       bool
	}{
		{"a short message, whole", "overloaded", false},
		{"a long message, cut", strings.Repeat("x", 100<<10), true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			addr := policytest.ServeGRPC(t, func(s *grpc.Server) { authv3.RegisterAuthorizationServer(s, &failingAuthz{msg: tc.msg}) })
			core, logs := observer.New(zap.WarnLevel)
			p, err := New(&config.ExtAuthz{}, Options{Addr: addr, Timeout: 2 * time.Second, Logger: zap.New(core)})
			if err != nil {
				t.Fatal(err)
			}
			c := policytest.Ctx(policytest.NewRequest("GET", "/"))
			if p.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 403 {
				t.Fatalf("%d, want the failure mode's 403", c.Fast.Response.StatusCode())
			}
			if logs.Len() != 1 {
				t.Fatalf("%d lines logged, want 1", logs.Len())
			}
			text := fmt.Sprint(logs.All()[0].ContextMap()["error"])
			switch {
			case !tc.cut && !strings.Contains(text, tc.msg):
				t.Errorf("logged %q, want the whole message", text)
			case tc.cut && (len(text) > 400 || !strings.Contains(text, "truncated") || !strings.Contains(text, "xxxx")):
				t.Errorf("logged %d bytes (%.80q...), want its first bytes, marked as truncated", len(text), text)
			}
		})
	}
}

// TestHTTPOnly200Allows: the HTTP protocol's service must answer 200 to
// allow. Another 2xx (201, 204) is a service that could not decide, for
// failureMode: denied by default, let through by failureMode allow, never
// relayed (a 204 would tell the client its request succeeded). Before,
// any 2xx allowed.
func TestHTTPOnly200Allows(t *testing.T) {
	for _, status := range []int{201, 204, 299} {
		s := &extauthztest.HTTP{Decide: func(*http.Request) int { return status }}
		addr := extauthztest.StartHTTP(t, s)
		deny := newPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}, addr)
		allow := newPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{}), FailureMode: config.ExtAuthzFailureMode{Allow: true}}, addr)
		c := policytest.Ctx(policytest.NewRequest("GET", "/x", "Authorization", "Bearer a"))
		if deny.OnRequest(c) != policy.Done || c.Fast.Response.StatusCode() != 403 || string(c.Fast.Response.Body()) != string(bodyFailed) {
			t.Errorf("%d, failureMode deny: %d %q, want the failure's 403", status, c.Fast.Response.StatusCode(), c.Fast.Response.Body())
		}
		c = policytest.Ctx(policytest.NewRequest("GET", "/x", "Authorization", "Bearer a"))
		if allow.OnRequest(c) != policy.Continue {
			t.Errorf("%d, failureMode allow: refused %d", status, c.Fast.Response.StatusCode())
		}
		if v := connPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}, addr, time.Second).CheckConnection(connSource, connDest); v != Failed {
			t.Errorf("%d, networkExtAuthz: verdict %d, want Failed", status, v)
		}
	}
	s := &extauthztest.HTTP{}
	ok := newPolicy(t, config.ExtAuthz{Protocol: httpProto(config.ExtAuthzHTTP{})}, extauthztest.StartHTTP(t, s))
	if c := policytest.Ctx(policytest.NewRequest("GET", "/x")); ok.OnRequest(c) != policy.Continue {
		t.Errorf("200: refused %d", c.Fast.Response.StatusCode())
	}
}

// TestHTTPIncludeResponseHeadersNeverCopiedRefused: a header the gateway
// never copies from the service's answer (Host, pseudo-headers, hop-by-hop
// fields) is a config error naming the entry, not a setting that silently
// does nothing.
func TestHTTPIncludeResponseHeadersNeverCopiedRefused(t *testing.T) {
	for _, name := range []string{"Host", ":authority", "Connection", "upgrade", "Keep-Alive", "TE", "Proxy-Authorization"} {
		cfg := config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{HTTP: &config.ExtAuthzHTTP{IncludeResponseHeaders: []string{"x-user", name}}}}
		_, err := New(&cfg, Options{Addr: "127.0.0.1:1"})
		var fe *policy.FieldError
		if !errors.As(err, &fe) || fe.Field != "protocol.http.includeResponseHeaders[1]" || !strings.Contains(fe.Msg, name) {
			t.Errorf("%s: error %v, want one naming protocol.http.includeResponseHeaders[1]", name, err)
		}
	}
	cfg := config.ExtAuthz{Protocol: &config.ExtAuthzProtocol{HTTP: &config.ExtAuthzHTTP{IncludeResponseHeaders: []string{"x-user", "Authorization"}}}}
	if _, err := New(&cfg, Options{Addr: "127.0.0.1:1"}); err != nil {
		t.Errorf("ordinary headers refused: %v", err)
	}
}
