package transform

import (
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
		{"X-User", "u-7"}, {"X-Json", `{"k":1}`}, {"X-Failing", "kept"}, {"X-Bad", ""}, {"X-Secret", ""}, {"X-Num", "3"}, {"Host", "other.test"},
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
