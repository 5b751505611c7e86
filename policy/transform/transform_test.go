package transform

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
)

func expr(s string) config.CELExpression { return config.CELExpression(s) }

func TestRequestTransform(t *testing.T) {
	p, err := New(&config.Transformations{Request: &config.Transform{
		Set: map[string]config.CELExpression{
			"x-user":     expr(`"u-" + request.headers["x-id"]`),
			"x-list":     expr(`["a", "b"]`),
			"x-json":     expr(`{"k": 1}`),
			"x-failing":  expr(`jwt.sub`),
			"x-bad":      expr(`"a\nb"`),
			":path":      expr(`"/rewritten?q=1"`),
			":method":    expr(`"PUT"`),
			":authority": expr(`"other.test"`),
		},
		Add:    map[string]config.CELExpression{"x-multi": expr(`"added"`), "x-num": expr(`1 + 2`)},
		Remove: []string{"x-secret"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/a", "X-Id", "7", "X-Multi", "first", "X-Secret", "s", "X-Failing", "kept"))
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("answered")
	}
	h := &c.Fast.Request.Header
	for _, tc := range []struct{ name, want string }{
		// A set that fails removes the client's value (agentgateway's
		// sanitizing): X-Failing and X-Bad are gone.
		{"X-User", "u-7"}, {"X-Json", `{"k":1}`}, {"X-Failing", ""}, {"X-Bad", ""}, {"X-Secret", ""}, {"X-Num", "3"}, {"Host", "other.test"},
	} {
		if got := string(h.Peek(tc.name)); got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := h.PeekAll("X-List"); len(got) != 2 || string(got[0]) != "a" || string(got[1]) != "b" {
		t.Errorf("X-List = %q", got)
	}
	if got := h.PeekAll("X-Multi"); len(got) != 2 {
		t.Errorf("X-Multi = %q", got)
	}
	if string(h.Method()) != "PUT" || string(h.RequestURI()) != "/rewritten?q=1" || !c.HostRewritten {
		t.Errorf("pseudo-headers: %s %s (host rewritten %v)", h.Method(), h.RequestURI(), c.HostRewritten)
	}
}

func TestReplaceAndResponse(t *testing.T) {
	p, err := New(&config.Transformations{
		Request: &config.Transform{Replace: ptr(expr(`{"x-only": request.headers["x-a"], "x-two": ["1", "2"], ":path": "/no"}`))},
		Response: &config.Transform{
			Set: map[string]config.CELExpression{
				"x-code":  expr(`string(response.code)`),
				"x-from":  expr(`response.headers["server"]`),
				":status": expr(`"203"`),
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("POST", "/p", "X-A", "a", "X-B", "b", "Content-Type", "text/plain"))
	p.OnRequest(c)
	h := &c.Fast.Request.Header
	if string(h.Peek("X-Only")) != "a" || h.Peek("X-B") != nil || len(h.PeekAll("X-Two")) != 2 || string(h.ContentType()) != "text/plain" || string(h.RequestURI()) != "/p" {
		t.Errorf("replaced headers: %s", h.String())
	}
	c.Fast.Response.SetStatusCode(200)
	c.Fast.Response.Header.Set("Server", "up")
	var ch policy.Chain
	ch.Response = append(ch.Response, p)
	ch.RunResponse(c)
	rh := &c.Fast.Response.Header
	if string(rh.Peek("X-Code")) != "200" || string(rh.Peek("X-From")) != "up" || c.Fast.Response.StatusCode() != 203 {
		t.Errorf("response: %d %s", c.Fast.Response.StatusCode(), rh.String())
	}
}

// Before the response exists, `response` is absent: an expression reading
// it fails and its header is left alone.
func TestNoResponseOnRequest(t *testing.T) {
	p, err := New(&config.Transformations{Request: &config.Transform{Set: map[string]config.CELExpression{"x-code": expr(`string(response.code)`)}}})
	if err != nil {
		t.Fatal(err)
	}
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	p.OnRequest(c)
	if v := c.Fast.Request.Header.Peek("X-Code"); v != nil {
		t.Errorf("x-code = %q", v)
	}
}

func TestCompileErrors(t *testing.T) {
	_, err := New(&config.Transformations{Response: &config.Transform{Add: map[string]config.CELExpression{"x-a": expr(`request.path ==`)}}})
	fe, ok := err.(*policy.FieldError)
	if !ok || fe.Field != "response.add.x-a" || !strings.Contains(fe.Msg, "invalid CEL expression") {
		t.Fatalf("err = %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestBody: a body computed from the request's JSON body replaces it, with
// its Content-Length; other values are JSON; a failing expression empties
// the body (agentgateway's rule).
func TestBody(t *testing.T) {
	for _, tc := range []struct {
		expr, want string
	}{
		{`json(request.body).name`, "n1"},
		{`request.body`, `{"name": "n1", "n": 2}`},
		{`b"\x00\x01"`, "\x00\x01"},
		{`json(request.body).n + 1`, "3"},
		{`{"got": json(request.body).name, "list": [1, true, null]}`, `{"got":"n1","list":[1,true,null]}`},
		{`json(request.body).missing`, ""},
		{`"x-" + request.headers["x-id"]`, "x-7"},
	} {
		p, err := NewWith(&config.Transformations{Request: &config.Transform{Body: ptr(expr(tc.expr))}}, Options{MaxBuffer: 100})
		if err != nil {
			t.Fatal(err)
		}
		if !p.ReadsRequestBody() {
			t.Errorf("%s: a body transformation must wait for the body", tc.expr)
		}
		fctx := policytest.NewRequest("POST", "/", "X-Id", "7")
		fctx.Request.SetBodyStream(strings.NewReader(`{"name": "n1", "n": 2}`), -1)
		c := policytest.Ctx(fctx)
		if p.OnRequest(c) != policy.Continue {
			t.Fatalf("%s: answered %d", tc.expr, fctx.Response.StatusCode())
		}
		req := &fctx.Request
		if req.IsBodyStream() || string(req.Body()) != tc.want || req.Header.ContentLength() != len(tc.want) {
			t.Errorf("%s: body %q (length %d), want %q", tc.expr, req.Body(), req.Header.ContentLength(), tc.want)
		}
	}
}

// TestBodyBuffering: only an expression naming the body has it read; one
// larger than MaxBuffer is answered 413 before any of it is read when its
// length says so, or once MaxBuffer is passed.
func TestBodyBuffering(t *testing.T) {
	headersOnly, err := NewWith(&config.Transformations{
		Request:  &config.Transform{Set: map[string]config.CELExpression{"x-a": expr(`request.path`)}},
		Response: &config.Transform{Set: map[string]config.CELExpression{"x-b": expr(`string(response.code)`)}},
	}, Options{MaxBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	if headersOnly.ReadsRequestBody() {
		t.Error("header expressions that do not name the body read it")
	}
	fctx := policytest.NewRequest("POST", "/")
	fctx.Request.SetBodyStream(strings.NewReader("a body longer than 4"), -1)
	c := policytest.Ctx(fctx)
	if headersOnly.OnRequest(c) != policy.Continue || !fctx.Request.IsBodyStream() || c.RequestBodyRead {
		t.Error("a transformation that does not read the body buffered it")
	}

	reads, err := NewWith(&config.Transformations{Response: &config.Transform{
		Set: map[string]config.CELExpression{"x-sent": expr(`string(request.body)`)},
	}}, Options{MaxBuffer: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !reads.ReadsRequestBody() {
		t.Error("a response expression reading request.body must have the request's body read")
	}
	for _, tc := range []struct {
		name   string
		body   string
		length int
		status int
	}{
		{"declared too large", "12345", 5, 413},
		{"chunked too large", "12345", -1, 413},
		{"cut short", "12", 3, 400},
		{"fits", "1234", -1, 0},
	} {
		fctx := policytest.NewRequest("POST", "/")
		fctx.Request.SetBodyStream(strings.NewReader(tc.body), tc.length)
		c := policytest.Ctx(fctx)
		res := reads.OnRequest(c)
		if tc.status == 0 {
			if res != policy.Continue || string(fctx.Request.Body()) != tc.body {
				t.Errorf("%s: %v, body %q", tc.name, res, fctx.Request.Body())
			}
			fctx.Response.SetStatusCode(200)
			var ch policy.Chain
			ch.Response = append(ch.Response, reads)
			ch.RunResponse(c)
			if got := string(fctx.Response.Header.Peek("X-Sent")); got != tc.body {
				t.Errorf("%s: x-sent %q", tc.name, got)
			}
			continue
		}
		if res != policy.Done || fctx.Response.StatusCode() != tc.status || !fctx.Response.ConnectionClose() {
			t.Errorf("%s: %v %d, want %d (connection closing)", tc.name, res, fctx.Response.StatusCode(), tc.status)
		}
		// The refusal is the gateway's: the response edits leave it alone.
		var ch policy.Chain
		ch.Response = append(ch.Response, reads)
		ch.RunResponse(c)
		if fctx.Response.StatusCode() != tc.status || fctx.Response.Header.Peek("X-Sent") != nil {
			t.Errorf("%s: the response edits changed the refusal: %d %s", tc.name, fctx.Response.StatusCode(), fctx.Response.Header.String())
		}
	}
}

// TestResponseBody: the response's body rewritten from itself; a body too
// large to read is answered 502; a response without a body keeps none.
func TestResponseBody(t *testing.T) {
	p, err := NewWith(&config.Transformations{Response: &config.Transform{
		Set:  map[string]config.CELExpression{"x-len": expr(`string(size(response.body))`)},
		Body: ptr(expr(`{"wrapped": json(response.body), "code": response.code}`)),
	}}, Options{MaxBuffer: 16})
	if err != nil {
		t.Fatal(err)
	}
	if p.ReadsRequestBody() {
		t.Error("a response transformation reads the request's body")
	}
	run := func(method string, code int, body string, length int) *policy.Ctx {
		fctx := policytest.NewRequest(method, "/")
		c := policytest.Ctx(fctx)
		fctx.Response.SetStatusCode(code)
		fctx.Response.SetBodyStream(strings.NewReader(body), length)
		var ch policy.Chain
		ch.Response = append(ch.Response, p)
		ch.RunResponse(c)
		return c
	}
	c := run("GET", 200, `{"a": 1}`, -1)
	resp := &c.Fast.Response
	if resp.StatusCode() != 200 || string(resp.Body()) != `{"code":200,"wrapped":{"a":1}}` || resp.Header.ContentLength() != len(resp.Body()) || string(resp.Header.Peek("X-Len")) != "8" {
		t.Errorf("%d %q (length %d, x-len %q)", resp.StatusCode(), resp.Body(), resp.Header.ContentLength(), resp.Header.Peek("X-Len"))
	}
	for _, length := range []int{-1, 20} {
		c = run("GET", 200, "a body of twenty...", length)
		if resp := &c.Fast.Response; resp.StatusCode() != 502 || resp.Header.Peek("X-Len") != nil {
			t.Errorf("too large (length %d): %d %q", length, resp.StatusCode(), resp.Body())
		}
	}
	c = run("GET", 200, "short", 10)
	if c.Fast.Response.StatusCode() != 502 {
		t.Errorf("cut short: %d", c.Fast.Response.StatusCode())
	}
	c = run("HEAD", 200, "", 0)
	if resp := &c.Fast.Response; len(resp.Body()) != 0 {
		t.Errorf("HEAD: body %q", resp.Body())
	}
}

// TestTransformOrderAndSanitizing: agentgateway's order (adds, then sets,
// then removes) and its sanitizing (a failing expression removes its
// header, so the client's value never stands in for the gateway's).
func TestTransformOrderAndSanitizing(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		set, add map[string]config.CELExpression
		remove   []string
		want     []string // X-A's values after
	}{
		{desc: "a failing set removes the client's value", set: map[string]config.CELExpression{"x-a": expr(`jwt.sub`)}},
		{desc: "a failing add removes the client's value", add: map[string]config.CELExpression{"x-a": expr(`jwt.sub`)}},
		{desc: "added and set: the set's value alone", set: map[string]config.CELExpression{"x-a": expr(`"set"`)}, add: map[string]config.CELExpression{"x-a": expr(`"added"`)}, want: []string{"set"}},
		{desc: "added and failing set: removed", set: map[string]config.CELExpression{"x-a": expr(`jwt.sub`)}, add: map[string]config.CELExpression{"x-a": expr(`"added"`)}},
		{desc: "set and removed: removed", set: map[string]config.CELExpression{"x-a": expr(`"set"`)}, remove: []string{"X-A"}},
		{desc: "added: after the client's", add: map[string]config.CELExpression{"x-a": expr(`"added"`)}, want: []string{"client", "added"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := New(&config.Transformations{Request: &config.Transform{Set: tc.set, Add: tc.add, Remove: tc.remove}})
			if err != nil {
				t.Fatal(err)
			}
			c := policytest.Ctx(policytest.NewRequest("GET", "/a", "X-A", "client"))
			if p.OnRequest(c) != policy.Continue {
				t.Fatal("answered")
			}
			var got []string
			for _, v := range c.Fast.Request.Header.PeekAll("X-A") {
				got = append(got, string(v))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("X-A = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestResponseStatus: :status takes a final status (200..599) only, and
// the status goes out with its own reason phrase, not the upstream's. A
// 1xx is not an answer (101 would claim a protocol switch): the upstream's
// status is kept.
func TestResponseStatus(t *testing.T) {
	for _, tc := range []struct {
		set, want string // want: the status line written
	}{
		{"201", "HTTP/1.1 201 Created"},
		{"404", "HTTP/1.1 404 Not Found"},
		{"100", "HTTP/1.1 200 Fine"},
		{"101", "HTTP/1.1 200 Fine"},
		{"103", "HTTP/1.1 200 Fine"},
		{"199", "HTTP/1.1 200 Fine"},
		{"600", "HTTP/1.1 200 Fine"},
		{"abc", "HTTP/1.1 200 Fine"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			p, err := New(&config.Transformations{Response: &config.Transform{
				Set: map[string]config.CELExpression{":status": expr(strconv.Quote(tc.set))},
			}})
			if err != nil {
				t.Fatal(err)
			}
			c := policytest.Ctx(policytest.NewRequest("GET", "/"))
			up := "HTTP/1.1 200 Fine\r\nContent-Length: 2\r\n\r\nok"
			if err := c.Fast.Response.Read(bufio.NewReader(strings.NewReader(up))); err != nil {
				t.Fatal(err)
			}
			p.OnResponse(c)
			line, _, _ := strings.Cut(c.Fast.Response.String(), "\r\n")
			if line != tc.want {
				t.Errorf("status line %q, want %q", line, tc.want)
			}
		})
	}
}

// TestReplaceKeepsReservedHeaders: replace's map cannot set the framing and
// hop-by-hop fields (policy.ReservedHeader), in either direction, as an
// external service's edits cannot: its Content-Length framed the request
// wrong upstream (502 "body stream exceeds content-length", or a 400
// blamed on the client). Nor does it remove them: the message's own stay,
// as with every edit of theirs.
func TestReplaceKeepsReservedHeaders(t *testing.T) {
	const m = `{"content-length": "2", "Transfer-Encoding": "chunked", "connection": "upgrade", "upgrade": "h2c", "te": "trailers", "keep-alive": "timeout=1", "proxy-connection": "x", "proxy-authorization": "Basic eA==", "proxy-authenticate": "Basic", "x-kept": "v"}`
	p, err := New(&config.Transformations{
		Request:  &config.Transform{Replace: ptr(expr(m))},
		Response: &config.Transform{Replace: ptr(expr(m))},
	})
	if err != nil {
		t.Fatal(err)
	}
	raw := "POST /p HTTP/1.1\r\nHost: gw.test\r\nContent-Length: 5\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Gone: g\r\n\r\nhello"
	c := policytest.Ctx(policytest.NewRequest("GET", "/"))
	if err := c.Fast.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatal(err)
	}
	if p.OnRequest(c) != policy.Continue {
		t.Fatal("answered")
	}
	var got []string
	for k, v := range c.Fast.Request.Header.All() {
		got = append(got, string(k)+": "+string(v))
	}
	if want := "Host: gw.test|Content-Length: 5|Connection: Upgrade|Upgrade: websocket|X-Kept: v"; strings.Join(got, "|") != want {
		t.Errorf("request fields %q\nwant %q", strings.Join(got, "|"), want)
	}
	up := "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Gone: g\r\n\r\nhello"
	if err := c.Fast.Response.Read(bufio.NewReader(strings.NewReader(up))); err != nil {
		t.Fatal(err)
	}
	c.Fast.Response.Header.SetNoDefaultContentType(true) // as the server has it
	p.OnResponse(c)
	got = got[:0]
	for k, v := range c.Fast.Response.Header.All() {
		got = append(got, string(k)+": "+string(v))
	}
	if want := "Content-Length: 5|X-Kept: v"; strings.Join(got, "|") != want {
		t.Errorf("response fields %q\nwant %q", strings.Join(got, "|"), want)
	}
}

// TestRequestMethod: :method takes a method token, but not CONNECT (an
// upstream answering it 2xx would make the pooled connection a tunnel),
// and never makes or unmakes a HEAD (the client reads its answer by its
// own method: a body sent to a HEAD client, or none to a GET client, would
// be read as the next answer); whatever the case. Any other value leaves
// the method alone, as a failing expression does.
func TestRequestMethod(t *testing.T) {
	for _, tc := range []struct {
		from, set, want string
	}{
		{"GET", "PUT", "PUT"},
		{"POST", "GET", "GET"},
		{"GET", "PROPFIND", "PROPFIND"},
		{"GET", "CONNECT", "GET"},
		{"GET", "connect", "GET"},
		{"POST", "Connect", "POST"},
		{"GET", "HEAD", "GET"},
		{"GET", "head", "GET"},
		{"HEAD", "GET", "HEAD"},
		{"HEAD", "POST", "HEAD"},
		{"HEAD", "head", "HEAD"},
		{"HEAD", "HEAD", "HEAD"},
		{"GET", "GE T", "GET"},
		{"GET", "", "GET"},
		{"GET", "GET\r\nX-Evil: 1", "GET"},
	} {
		t.Run(tc.from+" to "+tc.set, func(t *testing.T) {
			p, err := New(&config.Transformations{Request: &config.Transform{
				Set: map[string]config.CELExpression{":method": expr(strconv.Quote(tc.set))},
			}})
			if err != nil {
				t.Fatal(err)
			}
			c := policytest.Ctx(policytest.NewRequest(tc.from, "/"))
			if p.OnRequest(c) != policy.Continue {
				t.Fatal("answered")
			}
			if got := string(c.Fast.Request.Header.Method()); got != tc.want {
				t.Errorf("method %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRequestPathNormalized: a :path computed from the request is
// normalized as the client's path was before routing and authorization
// ran on it, unless paths are kept raw: "/a/../admin" went upstream as
// it was, for the upstream to resolve into /admin. One normalizing refuses
// leaves the path alone.
func TestRequestPathNormalized(t *testing.T) {
	for _, tc := range []struct {
		set, want string
		raw       bool
	}{
		{set: "/a/../admin", want: "/admin"},
		{set: "/a/%2E%2e/admin?x=/../y", want: "/admin?x=/../y"},
		{set: "//x//y/", want: "/x/y/"},
		{set: "/%7Euser/%3f", want: "/~user/%3F"},
		{set: "/ok?q=1", want: "/ok?q=1"},
		{set: "/a/%2Fb", want: "/orig?o=1"},
		{set: "/a%", want: "/orig?o=1"},
		{set: "/a/../admin", want: "/a/../admin", raw: true},
		{set: "/a/%2Fb", want: "/a/%2Fb", raw: true},
	} {
		t.Run(tc.set, func(t *testing.T) {
			p, err := NewWith(&config.Transformations{Request: &config.Transform{
				Set: map[string]config.CELExpression{":path": expr(`request.headers["x-p"]`)},
			}}, Options{RawPaths: tc.raw})
			if err != nil {
				t.Fatal(err)
			}
			c := policytest.Ctx(policytest.NewRequest("GET", "/orig?o=1", "X-P", tc.set))
			if p.OnRequest(c) != policy.Continue {
				t.Fatal("answered")
			}
			if got := string(c.Fast.Request.Header.RequestURI()); got != tc.want {
				t.Errorf("target %q, want %q", got, tc.want)
			}
			// Later policies (urlRewrite, CEL's request.path) see the path
			// the request now has, without its query.
			wantPath, _, _ := strings.Cut(tc.want, "?")
			if got := string(c.Path); got != wantPath {
				t.Errorf("c.Path %q, want %q", got, wantPath)
			}
		})
	}
}
