package celrules

import (
	"testing"

	"cel.dev/cel-go/common/types"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/policytest"
)

// TestReadsBody: which expressions read a body, from the checked tree.
func TestReadsBody(t *testing.T) {
	for _, tc := range []struct {
		expr           string
		request, reply bool
	}{
		{`request.path`, false, false},
		{`request.headers["content-type"] == "x"`, false, false},
		{`request.headers.exists(k, k == "body")`, false, false},
		{`"request.body"`, false, false},
		{`request.body`, true, false},
		{`json(request.body).name`, true, false},
		{`string(response.body)`, false, true},
		{`request["body"]`, true, false},
		{`has(request.body)`, true, false},
		{`request[request.headers["x-field"]]`, true, false},
		{`toJson(request)`, true, false},
		{`request`, true, false},
		{`size(request) > 3`, true, false},
		{`request.exists(k, k == "x")`, true, false},
		{`request.with(r, r.path)`, false, false},
		{`request.with(r, r.body)`, true, false},
		{`request.with(r, r.with(s, json(s.body)))`, true, false},
		{`[request][0].path`, true, false},
		{`{"r": request}`, true, false},
		{`response.code == 200 && request.method == "GET"`, false, false},
		{`response.headers["x"] + string(response.body)`, false, true},
		{`[1, 2].map(request, request)`, true, false}, // a shadowing name: conservatively counted
	} {
		_, ast, err := config.CompileLLMExpressionAst(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if got := ReadsBody(ast, "request"); got != tc.request {
			t.Errorf("%s: reads request.body %v, want %v", tc.expr, got, tc.request)
		}
		if got := ReadsBody(ast, "response"); got != tc.reply {
			t.Errorf("%s: reads response.body %v, want %v", tc.expr, got, tc.reply)
		}
	}
	if ReadsBody(nil, "request") {
		t.Error("no expression reads a body")
	}
}

// TestLiveBody: request.body and response.body are there, as bytes, once
// a policy read them whole, and absent before.
func TestLiveBody(t *testing.T) {
	p, err := config.CompileLLMExpression(`json(request.body).name + "/" + string(response.body)`)
	if err != nil {
		t.Fatal(err)
	}
	fctx := policytest.NewRequest("POST", "/")
	fctx.Request.SetBodyString(`{"name": "n1"}`)
	fctx.Response.SetBodyString("answer")
	c := policytest.Ctx(fctx)
	c.Responding = true
	in := LiveInput(c)
	if _, err := EvalLLM(p, &in, nil); err == nil {
		t.Fatal("request.body read before a policy read the body")
	}
	if _, err := policy.ReadRequestBody(c, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.ReadResponseBody(c, 100); err != nil {
		t.Fatal(err)
	}
	v, err := EvalLLM(p, &in, nil)
	if err != nil || v.Value() != "n1/answer" {
		t.Fatalf("%v (%v)", v, err)
	}
	body, err := config.CompileLLMExpression(`request.body`)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := EvalLLM(body, &in, nil); err != nil || v.Type() != types.BytesType {
		t.Errorf("request.body is %v (%v), want bytes", v, err)
	}
	// The whole maps show the bodies too; a copy of the request's.
	whole := InputFromCtx(c)
	if b, ok := whole.Request["body"].([]byte); !ok || string(b) != `{"name": "n1"}` {
		t.Errorf("InputFromCtx body %q", whole.Request["body"])
	}
	all, err := config.CompileLLMExpression(`string(response.body) == "answer" && "body" in response && request.size() >= 7`)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := EvalLLM(all, &in, nil); err != nil || v != types.True {
		t.Errorf("whole maps: %v (%v)", v, err)
	}
}

// FuzzReadsBody: an expression ReadsBody says does not read a body gives
// the same result whether or not the body is there to read. (The other
// way round is allowed: the analysis errs on the side of reading.)
func FuzzReadsBody(f *testing.F) {
	for _, s := range []string{
		`request.path`, `request.body`, `request["bo" + "dy"]`, `request.with(r, r.body)`,
		`toJson(request)`, `"body" in request`, `request.headers.size()`, `response.body`,
		`has(request.body) ? 1 : 2`, `request.?body.orValue(b"")`, `[request].map(r, r.body)`,
		`request.with(r, [r][0].body)`, `response.with(x, x.code)`, `json(request.body).name`,
	} {
		f.Add(s)
	}
	eval := func(expr string, withBody bool) (string, bool) {
		p, err := config.CompileLLMExpression(expr)
		if err != nil {
			return "", false
		}
		fctx := policytest.NewRequest("POST", "/p?q=1", "X-A", "1")
		fctx.Request.SetBodyString(`{"name": "n"}`)
		fctx.Response.SetStatusCode(201)
		fctx.Response.SetBodyString(`answer`)
		c := policytest.Ctx(fctx)
		c.Responding = true
		c.RequestBodyRead, c.ResponseBodyRead = withBody, withBody
		in := LiveInput(c)
		v, err := EvalLLM(p, &in, nil)
		if err != nil {
			return "error", true
		}
		return Text(v), true
	}
	f.Fuzz(func(t *testing.T, expr string) {
		if len(expr) > 512 {
			return
		}
		_, ast, err := config.CompileLLMExpressionAst(expr)
		if err != nil || ReadsBody(ast, "request") || ReadsBody(ast, "response") {
			return
		}
		without, ok := eval(expr, false)
		if !ok {
			return
		}
		if with, _ := eval(expr, true); with != without {
			t.Fatalf("%s reads no body, by ReadsBody, but gives %q with the bodies and %q without", expr, with, without)
		}
	})
}
