package celrules

import (
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// httpCtx is a policy context for GET target from 10.1.2.3:4567 with the
// given header pairs, set up as the server does.
func httpCtx(target string, headers ...string) *policy.Ctx {
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI(target)
	req.Header.SetHost("API.example.com")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	fc := new(fasthttp.RequestCtx)
	fc.Init(&req, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4567}, nil)
	path := fc.Request.URI().PathOriginal()
	return &policy.Ctx{Fast: fc, Host: []byte("api.example.com"), Path: path, Scheme: []byte("http")}
}

// TestInputFromCtx: every request and source variable rules can read.
func TestInputFromCtx(t *testing.T) {
	c := httpCtx("/a/b?x=1", "X-Role", "admin", "X-Multi", "first", "x-multi", "second")
	tests := []struct {
		expr string
		want bool
	}{
		{`request.method == "GET"`, true},
		{`request.path == "/a/b"`, true},
		{`request.uri == "/a/b?x=1"`, true},
		{`request.host == "api.example.com"`, true},
		{`request.scheme == "http"`, true},
		{`request.query["x"] == "1"`, true}, // MCP rules read the copy: it once had no query
		{`"y" in request.query`, false},
		{`request.headers["x-role"] == "admin"`, true},
		{`request.headers["X-Role"] == "admin"`, false}, // names are lower-case
		{`request.headers["x-multi"] == "first"`, true},
		{`request.headers["host"] == "API.example.com"`, true},
		{`"x-absent" in request.headers`, false},
		{`source.address == "10.1.2.3"`, true},
		{`source.port == 4567`, true},
		{`jwt.sub == "u"`, false}, // no token: jwt is absent
		{`mcp.tool.name == "x"`, false},
	}
	in := InputFromCtx(c)
	for _, tc := range tests {
		rs := compile(t, allow(tc.expr))
		if got := rs.Allowed(&in); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// TestHTTPPolicy: 403 with a short body unless allowed; the request goes on
// untouched when allowed.
func TestHTTPPolicy(t *testing.T) {
	h := HTTP{Rules: compile(t,
		allow(`request.path.startsWith("/public")`),
		allow(`request.headers["x-role"] == "admin" && source.address == "10.1.2.3"`),
		deny(`request.path == "/public/blocked"`),
	)}
	tests := []struct {
		path, role string
		want       bool
	}{
		{"/public/a", "", true},
		{"/private", "", false},
		{"/private", "admin", true},
		{"/private", "user", false},
		{"/public/blocked", "admin", false},
	}
	for _, tc := range tests {
		var headers []string
		if tc.role != "" {
			headers = []string{"X-Role", tc.role}
		}
		c := httpCtx(tc.path, headers...)
		res := h.OnRequest(c)
		if got := res == policy.Continue; got != tc.want {
			t.Errorf("%s role %q: allowed %v, want %v", tc.path, tc.role, got, tc.want)
			continue
		}
		resp := &c.Fast.Response
		if !tc.want && (resp.StatusCode() != fasthttp.StatusForbidden || string(resp.Body()) != "forbidden\n") {
			t.Errorf("%s: %d %q, want 403 forbidden", tc.path, resp.StatusCode(), resp.Body())
		}
		if tc.want && len(resp.Body()) != 0 {
			t.Errorf("%s: allowed request got a response body %q", tc.path, resp.Body())
		}
	}
}

// TestIndexConfinesRules: a rule indexed under an item is filed only there,
// so it never evaluates for another item; rules naming no item and require
// rules stay unindexed.
func TestIndexConfinesRules(t *testing.T) {
	rs := compile(t, indexRules...)
	want := map[itemKey][]int{
		{MCPTool, "a"}:   {0},
		{MCPTool, "b"}:   {1},
		{MCPPrompt, "c"}: {2},
	}
	if len(rs.allow) != len(want) {
		t.Fatalf("allow index has %d items, want %d", len(rs.allow), len(want))
	}
	for k, idx := range want {
		got := rs.allow[k]
		if len(got) != len(idx) || got[0].idx != idx[0] {
			t.Errorf("%+v: rules %+v, want %v", k, got, idx)
		}
	}
	if d := rs.deny[itemKey{MCPTool, "d"}]; len(rs.deny) != 1 || len(d) != 1 || d[0].idx != 3 {
		t.Errorf("deny index %+v", rs.deny)
	}
	if len(rs.require) != 1 || len(rs.allowAny) != 2 || len(rs.denyAny) != 0 {
		t.Errorf("unindexed: require %d, allowAny %d, denyAny %d", len(rs.require), len(rs.allowAny), len(rs.denyAny))
	}
}

// TestCombinations: agentgateway's order — any deny denies, then every
// require must hold, then any allow allows; without allow rules the default
// is allow (deny-list semantics), with them deny (allow-list semantics).
func TestCombinations(t *testing.T) {
	T, F, E := `true`, `false`, `jwt.missing == 1` // E fails to evaluate
	tests := []struct {
		desc  string
		rules []config.CELRule
		want  bool
	}{
		{"empty rule list", nil, true},
		{"allow true", []config.CELRule{allow(T)}, true},
		{"allow false", []config.CELRule{allow(F)}, false},
		{"allow error", []config.CELRule{allow(E)}, false},
		{"one allow of two", []config.CELRule{allow(F), allow(T)}, true},
		{"deny only, false", []config.CELRule{deny(F)}, true},
		{"deny only, true", []config.CELRule{deny(T)}, false},
		{"deny error does not deny", []config.CELRule{deny(E)}, true},
		{"deny beats allow", []config.CELRule{allow(T), deny(T)}, false},
		{"require only, true", []config.CELRule{require(T)}, true},
		{"require only, false", []config.CELRule{require(F)}, false},
		{"require error fails", []config.CELRule{require(E)}, false},
		{"require and allow", []config.CELRule{require(T), allow(T)}, true},
		{"require holds, no allow true", []config.CELRule{require(T), allow(F)}, false},
		{"every require", []config.CELRule{require(T), require(F), allow(T)}, false},
		{"deny false, allow false", []config.CELRule{deny(F), allow(F)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			rs := compile(t, tc.rules...)
			for _, item := range []*MCPItem{nil, {Kind: MCPTool, Name: "x"}} {
				in := Input{Claims: map[string]any{"sub": "u"}, MCP: item}
				if got := rs.Allowed(&in); got != tc.want {
					t.Fatalf("item %v: Allowed = %v, want %v", item, got, tc.want)
				}
			}
		})
	}
}

// BenchmarkAllowedHTTP: the `authorization` policy on one request — the
// input copied from the request and three rules.
func BenchmarkAllowedHTTP(b *testing.B) {
	h := HTTP{Rules: compile(b,
		deny(`request.path == "/blocked"`),
		allow(`request.path.startsWith("/public")`),
		allow(`request.headers["x-role"] == "admin" && source.address == "10.1.2.3"`),
	)}
	c := httpCtx("/private/x", "X-Role", "admin", "Accept", "*/*", "User-Agent", "bench", "X-Request-Id", "abc")
	b.ReportAllocs()
	for b.Loop() {
		if h.OnRequest(c) != policy.Continue {
			b.Fatal("denied")
		}
	}
}

// TestHTTPPolicyBody: a rule reading request.body has the body read whole
// first (kept for the backend); one over MaxBuffer is answered 413; rules
// that do not name the body leave it streaming.
func TestHTTPPolicyBody(t *testing.T) {
	h := HTTP{Rules: compile(t, allow(`json(request.body).user == "alice"`)), MaxBuffer: 32}
	if !h.ReadsRequestBody() {
		t.Fatal("a rule reading request.body does not read the body")
	}
	for _, tc := range []struct {
		body   string
		status int // 0: let through
	}{
		{`{"user": "alice"}`, 0},
		{`{"user": "bob"}`, 403},
		{`{"user": "alice", "padding": "............"}`, 413},
	} {
		c := httpCtx("/")
		c.Fast.Request.SetBodyStream(strings.NewReader(tc.body), -1)
		res := h.OnRequest(c)
		switch {
		case tc.status == 0 && (res != policy.Continue || string(c.Fast.Request.Body()) != tc.body):
			t.Errorf("%s: %v, the backend would get %q", tc.body, res, c.Fast.Request.Body())
		case tc.status != 0 && (res != policy.Done || c.Fast.Response.StatusCode() != tc.status):
			t.Errorf("%s: %v %d, want %d", tc.body, res, c.Fast.Response.StatusCode(), tc.status)
		}
	}
	plain := HTTP{Rules: compile(t, allow(`request.path == "/"`))}
	if plain.ReadsRequestBody() {
		t.Error("a rule not naming the body reads it")
	}
	c := httpCtx("/")
	c.Fast.Request.SetBodyStream(strings.NewReader("streaming"), -1)
	if plain.OnRequest(c) != policy.Continue || !c.Fast.Request.IsBodyStream() {
		t.Error("the body was read")
	}
}

// TestHTTPCostlyRuleFailsClosed: an allow rule whose worst case exceeds
// config.MaxCELRuntimeCost is counted as it runs; on a request that makes
// it run away it fails, and the request is refused (403), having cost a
// bounded amount, where it used to allow after encoding every header once
// per character of one (here 5,000 times 20 KB: 500 MB). A pattern taken
// from the request is measured before it is compiled (this one matched,
// after a second).
func TestHTTPCostlyRuleFailsClosed(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		headers []string
		allowed bool
	}{
		{`request.headers["x"].split("").map(c, toJson(request.headers)).size() > 0`, []string{"X", "abc"}, true},
		{`request.headers["x"].split("").map(c, toJson(request.headers)).size() > 0`, []string{"X", strings.Repeat("x", 5000), "Y", strings.Repeat("y", 20000)}, false},
		{`request.headers["x"].matches(request.headers["p"])`, []string{"X", "ab", "P", "^a"}, true},
		{`request.headers["x"].matches(request.headers["p"])`, []string{"X", strings.Repeat("ab", 8000) + "a" + strings.Repeat("b", 1000) + "c", "P", "(a|b)*a(a|b){1000}c"}, false},
	} {
		h := HTTP{Rules: compile(t, allow(tc.rule))}
		c := httpCtx("/", tc.headers...)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		res := h.OnRequest(c)
		runtime.ReadMemStats(&after)
		if got := res == policy.Continue; got != tc.allowed {
			t.Errorf("%s with %d header bytes: allowed %v, want %v", tc.rule, len(strings.Join(tc.headers, "")), got, tc.allowed)
		}
		if !tc.allowed && c.Fast.Response.StatusCode() != fasthttp.StatusForbidden {
			t.Errorf("%s: status %d, want 403", tc.rule, c.Fast.Response.StatusCode())
		}
		// Stopped at its cost limit, the loop allocates some tens of MiB
		// (more under -race); unbounded, it built 500 MB.
		if got := after.TotalAlloc - before.TotalAlloc; got > 160<<20 {
			t.Errorf("%s: one request allocated %d MiB, want at most 160", tc.rule, got>>20)
		}
	}
}
