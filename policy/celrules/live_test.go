package celrules

import (
	"runtime"
	"strings"
	"testing"

	"cel.dev/cel-go/common/types"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
)

var boolTrue = types.True

// liveExprs read every part of the request both ways: single lookups, and
// what needs the whole map.
var liveExprs = []string{
	`request.method == "GET"`,
	`request.path == "/a/b"`,
	`request.host == "api.example.com"`,
	`request.scheme == "http"`,
	`request.uri == "/a/b?x=1&y=%20z&x=2"`,
	`request.headers["x-role"] == "admin"`,
	`request.headers["x-multi"] == "first"`,
	`request.headers["x-empty"] == ""`,
	`"x-empty" in request.headers`,
	`"x-missing" in request.headers`,
	`request.headers["x-missing"] == ""`,
	`has(request.headers.x_role)`,
	`request.headers.exists(k, k.startsWith("x-r"))`,
	`request.headers.size() > 3`,
	`toJson(request.headers).contains("admin")`,
	`request.query["x"] == "1"`,
	`request.query["y"] == " z"`,
	`request.query.size() == 2`,
	`source.address == "10.1.2.3" && source.port == 4567`,
	`cidr("10.0.0.0/8").containsIP(source.address)`,
	`request.size() == 7`,
	`request == request`,
	// More names than a lookup keeps inline, and one read again.
	`request.headers["x-role"] == "admin" && request.headers["x-multi"] == "first" && request.query["x"] == "1" && request.path == "/a/b" && request.method == "GET" && request.headers["x-role"] == "admin"`,
	`json(toJson(request))["path"] == "/a/b"`,
}

// The live view answers every expression as the copied one does.
func TestLiveInputMatchesCopy(t *testing.T) {
	c := httpCtx("/a/b?x=1&y=%20z&x=2", "X-Role", "admin", "X-Multi", "first", "x-multi", "second", "X-Empty", "")
	copied := InputFromCtx(c)
	copied.Request["query"] = queryMap(c)
	live := LiveInput(c)
	for _, expr := range liveExprs {
		t.Run(expr, func(t *testing.T) {
			rs := compile(t, allow(expr))
			p := rs.allowAny[0].prog
			want, _, werr := p.Eval(&activation{in: &copied})
			got, _, gerr := p.Eval(&activation{in: &live})
			if (werr != nil) != (gerr != nil) || werr == nil && got.Equal(want) != boolTrue {
				t.Fatalf("live %v (%v), copied %v (%v)", got, gerr, want, werr)
			}
		})
	}
}

// FuzzLiveInput: whatever the request's target and headers, the live view
// and the copied one agree, and neither panics.
func FuzzLiveInput(f *testing.F) {
	f.Add("/a/b?x=1&y=%20z", "X-Role", "admin")
	f.Add("/?%zz=1&a", "x-a", "")
	f.Add("/%E2%82%AC?q=%E2%82%AC", "Cookie", "a=b")
	var progs []*RuleSet
	for _, expr := range liveExprs {
		rs, err := Compile(&config.CELRuleSet{Rules: []config.CELRule{{Expr: expr}}})
		if err != nil {
			f.Fatal(err)
		}
		progs = append(progs, rs)
	}
	f.Fuzz(func(t *testing.T, target, name, value string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target+name+value, "\r\n\x00") || strings.ContainsAny(name, " :\t") {
			return
		}
		c := httpCtx(target, name, value)
		copied := InputFromCtx(c)
		copied.Request["query"] = queryMap(c)
		live := LiveInput(c)
		for i, rs := range progs {
			p := rs.allowAny[0].prog
			want, _, werr := p.Eval(&activation{in: &copied})
			got, _, gerr := p.Eval(&activation{in: &live})
			if (werr != nil) != (gerr != nil) || werr == nil && got.Equal(want) != boolTrue {
				t.Fatalf("%s: live %v (%v), copied %v (%v)", liveExprs[i], got, gerr, want, werr)
			}
		}
	})
}

// Expressions whose worst case runs away are refused at load; the usual
// shapes are not.
func TestCostBound(t *testing.T) {
	for _, tc := range []struct {
		expr string
		ok   bool
	}{
		{`request.headers.exists(k, k.startsWith("x-") && request.headers[k] == "1")`, true},
		{`"admin" in jwt.roles && request.path.matches("^/a/[0-9]+$")`, true},
		{`sets.intersects(jwt.roles, jwt.groups)`, true},
		{`jwt.roles.exists(r, jwt.groups.exists(g, g == r))`, false},
		{`jwt.a.map(x, jwt.b.map(y, jwt.c.map(z, x + y + z))).size() > 0`, false},
	} {
		_, err := Compile(&config.CELRuleSet{Rules: []config.CELRule{{Expr: tc.expr}}})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.expr, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "too costly") {
			t.Errorf("%s: %v", tc.expr, err)
		}
	}
}

// TestLiveHeadersAbsentOnReusedRequest: on a request reused from a pool
// (the server's), a header that fasthttp keeps apart (User-Agent,
// Content-Type) and that the new request lacks is absent, not present and
// empty; one the request has is there.
func TestLiveHeadersAbsentOnReusedRequest(t *testing.T) {
	c := httpCtx("/a", "User-Agent", "old", "Content-Type", "text/plain")
	c.Fast.Request.Header.Reset()
	c.Fast.Request.Header.SetMethod("GET")
	c.Fast.Request.SetRequestURI("/a")
	c.Fast.Request.Header.SetHost("api.example.com")
	c.Fast.Request.Header.Add("X-Role", "admin")
	for _, tc := range []struct {
		expr string
		want bool
	}{
		{`"user-agent" in request.headers`, false},
		{`"content-type" in request.headers`, false},
		{`"x-role" in request.headers`, true},
		{`request.headers["x-role"] == "admin"`, true},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			rs := compile(t, allow(tc.expr))
			live := LiveInput(c)
			got, _, err := rs.allowAny[0].prog.Eval(&activation{in: &live})
			if err != nil {
				t.Fatal(err)
			}
			if (got == boolTrue) != tc.want {
				t.Fatalf("%v; want %v", got, tc.want)
			}
		})
	}
}

// Once the request head is kept aside (policy.Ctx.ExprHead: the gateway
// put its credentials on the request), both views read that head.
func TestInputReadsExprHead(t *testing.T) {
	c := httpCtx("/a?key=client", "Authorization", "Bearer client")
	var kept fasthttp.RequestHeader
	c.Fast.Request.Header.CopyTo(&kept)
	c.ExprHead = &kept
	c.Fast.Request.Header.Set("Authorization", "Bearer backend-secret")
	c.Fast.Request.Header.SetRequestURI("/a?key=backend-secret")
	copied := InputFromCtx(c)
	copied.Request["query"] = queryMap(c)
	live := LiveInput(c)
	for _, expr := range []string{
		`request.headers["authorization"] == "Bearer client"`,
		`request.uri == "/a?key=client"`,
		`request.query["key"] == "client"`,
		`!toJson(request).contains("backend-secret")`,
	} {
		rs := compile(t, allow(expr))
		p := rs.allowAny[0].prog
		for name, in := range map[string]*Input{"live": &live, "copied": &copied} {
			if got, _, err := p.Eval(&activation{in: in}); err != nil || got != boolTrue {
				t.Errorf("%s: %s = %v (%v)", name, expr, got, err)
			}
		}
	}
}

// TestLiveLookupsConvertOnce: an expression reading a value of the request
// inside a loop over the request's data converts it once per evaluation,
// not once per element: time and memory stay linear in the request's size
// (a header read in a loop over another's 4,000 parts was copied 4,000
// times: 64 MB for one evaluation of 16 KB values).
func TestLiveLookupsConvertOnce(t *testing.T) {
	const parts, size = 4000, 16 << 10
	big := strings.Repeat("y", size)
	c := httpCtx("/a?q="+big, "X", strings.Repeat(",", parts-1), "Y", big, "Z", "z")
	c.Fast.Response.Header.Set("Y", big)
	for _, tc := range []struct {
		expr       string
		responding bool
	}{
		{expr: `request.headers["x"].split(",").exists(v, v == request.headers["y"])`},
		{expr: `request.headers["x"].split(",").map(v, request.headers["y"]).size() == 0`},
		{expr: `request.headers["x"].split(",").exists(v, v == request.query["q"])`},
		{expr: `request.headers["x"].split(",").exists(v, v == request.uri)`},
		{expr: `request.headers["x"].split(",").exists(v, request.headers.size() == 0)`},
		{expr: `request.headers["x"].split(",").exists(v, request.headers[v + "y"] == v)`},
		{expr: `request.headers["x"].split(",").exists(v, v == response.headers["y"])`, responding: true},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			c.Responding = tc.responding
			rs := compile(t, allow(tc.expr))
			in := LiveInput(c)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if rs.Allowed(&in) {
				t.Fatal("allowed")
			}
			runtime.ReadMemStats(&after)
			// The split list and the loop's own values: a few hundred
			// bytes a part. A copy per part would be parts*size (64 MB).
			if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(4<<20); got > limit {
				t.Errorf("one evaluation allocated %d KiB, want at most %d KiB", got>>10, limit>>10)
			}
		})
	}
}
