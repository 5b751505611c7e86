package guardrail_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
)

func webhookYAML(addr, extra string) string {
	return "webhook:\n  target: {host: \"" + addr + "\"}\n" + extra
}

// upper masks by upper-casing every text.
func upper(c guardrailtest.WebhookCall) guardrailtest.WebhookAction {
	out := make([]guardrailtest.Message, len(c.Messages))
	for i, m := range c.Messages {
		out[i] = guardrailtest.Message{Role: m.Role, Content: strings.ToUpper(m.Content)}
	}
	return guardrailtest.WebhookAction{Mask: out, Reason: "shouting"}
}

func TestWebhookVerdicts(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	sent := msgs("system", "be brief", "user", "hello \"world\"\n")
	cases := []struct {
		desc   string
		answer bool
		judge  func(guardrailtest.WebhookCall) guardrailtest.WebhookAction
		want   guardrail.Verdict
	}{
		{desc: "prompt passes", judge: func(guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			return guardrailtest.WebhookAction{Reason: "fine"}
		}, want: guardrail.Verdict{Action: guardrail.Pass, Reason: "fine"}},
		{desc: "prompt passes without a reason", want: guardrail.Verdict{Action: guardrail.Pass}},
		{desc: "prompt masked", judge: upper, want: guardrail.Verdict{Action: guardrail.Mask, Reason: "shouting",
			Messages: msgs("system", "BE BRIEF", "user", "HELLO \"WORLD\"\n")}},
		{desc: "prompt rejected with the webhook's answer", judge: func(guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "not today", Status: 451}, Reason: "policy 7"}
		}, want: guardrail.Verdict{Action: guardrail.Reject, Reason: "policy 7",
			Rejection: &guardrail.Rejection{Status: 451, Body: []byte("not today")}}},
		{desc: "answer passes", answer: true, want: guardrail.Verdict{Action: guardrail.Pass}},
		{desc: "answer masked", answer: true, judge: upper, want: guardrail.Verdict{Action: guardrail.Mask, Reason: "shouting",
			Messages: msgs("system", "BE BRIEF", "user", "HELLO \"WORLD\"\n")}},
		{desc: "answer rejected", answer: true, judge: func(guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "{\"error\":\"no\"}", Status: 422}}
		}, want: guardrail.Verdict{Action: guardrail.Reject, Rejection: &guardrail.Rejection{Status: 422, Body: []byte(`{"error":"no"}`)}}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			wh.Configure(func() { wh.Judge = tc.judge })
			var g *guardrail.Guard
			if tc.answer {
				g = mustResponseGuard(t, webhookYAML(wh.Addr(), ""), guardrail.Options{})
			} else {
				g = mustRequestGuard(t, webhookYAML(wh.Addr(), ""), guardrail.Options{})
			}
			got, err := g.Check(testContext(t), sent, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("verdict\n got %+v\nwant %+v", got, tc.want)
			}
			r := wh.Last()
			wantPath, wantBody := "/request", `{"body":{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello \"world\"\n"}]}}`
			if tc.answer {
				wantPath, wantBody = "/response", `{"body":{"choices":[{"message":{"role":"system","content":"be brief"}},{"message":{"role":"user","content":"hello \"world\"\n"}}]}}`
			}
			if r.Method != "POST" || r.Path != wantPath || string(r.Body) != wantBody {
				t.Errorf("call %s %s %s", r.Method, r.Path, r.Body)
			}
			if r.Host != wh.Addr() || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Host %q Content-Type %q", r.Host, r.Header.Get("Content-Type"))
			}
		})
	}
}

// TestWebhookCallsWithoutText: a webhook is asked even about no text, as
// agentgateway does.
func TestWebhookCallsWithoutText(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	g := mustRequestGuard(t, webhookYAML(wh.Addr(), ""), guardrail.Options{})
	if _, err := g.Check(testContext(t), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(wh.Last().Body); got != `{"body":{"messages":[]}}` {
		t.Errorf("body %s", got)
	}
}

// TestWebhookFailureModes: whatever fails, failClosed rejects with the
// guard's rejection and failOpen passes, both marked Failed.
func TestWebhookFailureModes(t *testing.T) {
	failures := []struct {
		desc  string
		setup func(wh *guardrailtest.Webhook) (addr string)
	}{
		{"unreachable", func(*guardrailtest.Webhook) string { return guardrailtest.RefusedAddr(t) }},
		{"500", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 500})
			return wh.Addr()
		}},
		{"connection reset", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Reset: true})
			return wh.Addr()
		}},
		{"timeout", func(wh *guardrailtest.Webhook) string {
			t.Cleanup(wh.Hold())
			return wh.Addr()
		}},
		{"garbage body", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 200, Body: "<html>oops</html>"})
			return wh.Addr()
		}},
		{"no action", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 200, Body: `{"verdict":"pass"}`})
			return wh.Addr()
		}},
		{"rejection without status", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 200, Body: `{"action":{"body":"no"}}`})
			return wh.Addr()
		}},
		{"rejection status out of range", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 200, Body: `{"action":{"body":"no","status_code":101}}`})
			return wh.Addr()
		}},
		{"mask of another length", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 200, Body: `{"action":{"body":{"messages":[]}}}`})
			return wh.Addr()
		}},
		{"mask in the answer's shape", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 200, Body: `{"action":{"body":{"choices":[{"message":{"role":"user","content":"x"}}]}}}`})
			return wh.Addr()
		}},
		{"answer too large", func(wh *guardrailtest.Webhook) string {
			wh.Fail(guardrailtest.Failure{Status: 200, Body: `{"action":{"reason":"` + strings.Repeat("x", 20<<10) + `"}}`})
			return wh.Addr()
		}},
	}
	for _, f := range failures {
		for _, mode := range []string{"failClosed", "failOpen", ""} {
			t.Run(f.desc+"/"+mode, func(t *testing.T) {
				wh := guardrailtest.NewWebhook(t)
				addr := f.setup(wh)
				yaml := webhookYAML(addr, "")
				if mode != "" {
					yaml += "  failureMode: " + mode + "\n"
				}
				g := mustRequestGuard(t, yaml+"rejection: {status: 418, body: closed}\n", guardrail.Options{Timeout: 300 * time.Millisecond, MaxAnswer: 16 << 10})
				start := time.Now()
				v, err := g.Check(testContext(t), msgs("user", "hi"), nil)
				if err != nil {
					t.Fatalf("a webhook's failure is a verdict, got error %v", err)
				}
				if elapsed := time.Since(start); elapsed > 5*time.Second {
					t.Errorf("took %v", elapsed)
				}
				if !v.Failed || v.Reason == "" {
					t.Errorf("Failed %v reason %q", v.Failed, v.Reason)
				}
				if mode == "failOpen" {
					if v.Action != guardrail.Pass || v.Rejection != nil {
						t.Errorf("failOpen: %+v", v)
					}
					return
				}
				if v.Action != guardrail.Reject || v.Rejection != g.Rejection() || v.Rejection.Status != 418 || string(v.Rejection.Body) != "closed" {
					t.Errorf("failClosed: %+v", v)
				}
			})
		}
	}
}

// TestWebhookTimeoutFromContext: the context's deadline bounds the call
// when it is earlier than the guard's timeout.
func TestWebhookTimeoutFromContext(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	t.Cleanup(wh.Hold())
	g := mustRequestGuard(t, webhookYAML(wh.Addr(), "  failureMode: failOpen\n"), guardrail.Options{Timeout: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	v, err := g.Check(ctx, msgs("user", "hi"), nil)
	if err != nil || !v.Failed || v.Action != guardrail.Pass {
		t.Fatalf("verdict %+v err %v", v, err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("the context's deadline did not bound the call: %v", elapsed)
	}
}

func TestWebhookForwardHeaders(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	g := mustRequestGuard(t, webhookYAML(wh.Addr(), `  forwardHeaderMatches:
  - {name: X-Tenant, value: {exact: acme}}
  - {name: x-trace, value: {regex: "[0-9a-f]+"}}
  - {name: x-absent, value: {regex: ".*"}}
  - {name: authorization, value: {regex: "Bearer .*"}}
`), guardrail.Options{})
	cases := []struct {
		desc    string
		headers []string
		want    map[string][]string
	}{
		{"matching headers go with all their values",
			[]string{"x-tenant", "other", "X-Tenant", "acme", "X-Trace", "abc123", "Authorization", "Bearer t0k", "X-Unlisted", "v"},
			map[string][]string{"X-Tenant": {"other", "acme"}, "X-Trace": {"abc123"}, "Authorization": {"Bearer t0k"}, "X-Unlisted": nil}},
		{"a regex matches the whole value", []string{"X-Trace", "abc-123", "X-Tenant", "acme-corp"},
			map[string][]string{"X-Trace": nil, "X-Tenant": nil}},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			hdr, _ := clientRequest("/v1/chat/completions", nil, tc.headers...)
			if _, err := g.Check(testContext(t), msgs("user", "hi"), &guardrail.Input{Header: hdr}); err != nil {
				t.Fatal(err)
			}
			r := wh.Last()
			for name, want := range tc.want {
				if got := r.Header.Values(name); !reflect.DeepEqual(got, want) {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if r.Host != wh.Addr() || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Host %q Content-Type %q", r.Host, r.Header.Get("Content-Type"))
			}
		})
	}
	// Response headers (agentgateway forwards the provider's) work too.
	var resp fasthttp.ResponseHeader
	resp.Add("X-Tenant", "acme")
	if _, err := g.Check(testContext(t), msgs("user", "hi"), &guardrail.Input{Header: &resp}); err != nil {
		t.Fatal(err)
	}
	if got := wh.Last().Header.Get("X-Tenant"); got != "acme" {
		t.Errorf("from response headers: %q", got)
	}
}

func TestWebhookCELHeaders(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	headers := `  headers:
    x-tenant: 'request.headers["x-tenant"]'
    x-user: 'jwt.sub'
    x-model: 'llmRequest.model'
    x-static: '"fixed"'
    x-number: '42'
    x-forwarded-away: 'request.headers["missing"]'
    ":path": '"/v3/guardrails/" + request.headers["x-tenant"] + "/check"'
  forwardHeaderMatches:
  - {name: x-forwarded-away, value: {regex: ".*"}}
`
	prompt := mustRequestGuard(t, webhookYAML(wh.Addr(), headers), guardrail.Options{})
	answer := mustResponseGuard(t, webhookYAML(wh.Addr(), headers), guardrail.Options{})
	if !prompt.NeedsLLMRequest() || answer.NeedsLLMRequest() {
		t.Errorf("NeedsLLMRequest: prompt %v answer %v", prompt.NeedsLLMRequest(), answer.NeedsLLMRequest())
	}
	hdr, in := clientRequest("/v1/chat/completions", map[string]any{"sub": "user-123"},
		"X-Tenant", "acme", "X-Forwarded-Away", "client value")
	var llmRequest map[string]any
	if err := json.Unmarshal([]byte(`{"model":"llama3.2","max_tokens":5}`), &llmRequest); err != nil {
		t.Fatal(err)
	}
	input := &guardrail.Input{Header: hdr, Request: in, LLMRequest: llmRequest}

	cases := []struct {
		desc string
		g    *guardrail.Guard
		in   *guardrail.Input
		want map[string]string
		path string
	}{
		{"prompt", prompt, input, map[string]string{"X-Tenant": "acme", "X-User": "user-123", "X-Model": "llama3.2",
			"X-Static": "fixed", "X-Number": "", "X-Forwarded-Away": ""}, "/v3/guardrails/acme/check"},
		{"answer: no llmRequest", answer, input, map[string]string{"X-Tenant": "acme", "X-User": "user-123", "X-Model": "",
			"X-Static": "fixed"}, "/v3/guardrails/acme/check"},
		{"no client request: static expressions only", prompt, nil, map[string]string{"X-Tenant": "", "X-User": "",
			"X-Model": "", "X-Static": "fixed"}, "/request"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := tc.g.Check(testContext(t), msgs("user", "hi"), tc.in); err != nil {
				t.Fatal(err)
			}
			r := wh.Last()
			for name, want := range tc.want {
				if got := r.Header.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if r.Path != tc.path {
				t.Errorf("path %q, want %q", r.Path, tc.path)
			}
		})
	}
}

func TestWebhookPseudoHeaders(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	cases := []struct {
		desc, expr          string
		method, path, host  string
		header, headerValue string
	}{
		{desc: "method", expr: `":method": '"PUT"'`, method: "PUT", path: "/request", host: wh.Addr()},
		{desc: "authority", expr: `":authority": '"guard.internal:8080"'`, method: "POST", path: "/request", host: "guard.internal:8080"},
		{desc: "host header is the authority", expr: `host: '"guard.internal"'`, method: "POST", path: "/request", host: "guard.internal"},
		{desc: "path with a query", expr: `":path": '"/check?tenant=a"'`, method: "POST", path: "/check", host: wh.Addr()},
		{desc: "an invalid path is ignored", expr: `":path": '"no-slash"'`, method: "POST", path: "/request", host: wh.Addr()},
		{desc: "an invalid header value removes the header", expr: `x-bad: '"a\nb"'`, method: "POST", path: "/request", host: wh.Addr(),
			header: "X-Bad", headerValue: ""},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			g := mustRequestGuard(t, webhookYAML(wh.Addr(), "  headers:\n    "+tc.expr+"\n"), guardrail.Options{})
			if _, err := g.Check(testContext(t), msgs("user", "hi"), nil); err != nil {
				t.Fatal(err)
			}
			r := wh.Last()
			if r.Method != tc.method || r.Path != tc.path || r.Host != tc.host {
				t.Errorf("%s %s Host %s", r.Method, r.Path, r.Host)
			}
			if tc.header != "" && r.Header.Get(tc.header) != tc.headerValue {
				t.Errorf("%s: %q", tc.header, r.Header.Get(tc.header))
			}
		})
	}
}

func TestWebhookBackendTarget(t *testing.T) {
	wh := guardrailtest.NewWebhook(t)
	resolve := func(name string) (string, bool) {
		if name == "guards" {
			return wh.Addr(), true
		}
		return "", false
	}
	g := mustRequestGuard(t, "webhook:\n  target: {backend: guards}\n", guardrail.Options{ResolveBackend: resolve})
	if _, err := g.Check(testContext(t), msgs("user", "hi"), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(wh.Requests()); n != 1 {
		t.Fatalf("%d calls", n)
	}
	_, err := newRequestGuard("webhook:\n  target: {backend: other}\n", guardrail.Options{ResolveBackend: resolve})
	if got := fieldPath(err); got != "webhook.target.backend" {
		t.Errorf("unknown backend: %s (%v)", got, err)
	}
}
