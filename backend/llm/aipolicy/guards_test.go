package aipolicy

import (
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
)

const ssn = "123-45-6789"

// scopePolicy masks SSNs in the given scope.
func scopePolicy(t *testing.T, scope string) *Policy {
	yaml := "promptGuard:\n  request:\n  - regex: {rules: [{builtin: ssn}]}\n"
	if scope != "" {
		yaml += "    scope: [" + scope + "]\n"
	}
	return mustPolicy(t, yaml)
}

// TestGuardScopes: for each format, which texts each scope reads. An SSN
// sits in every place; the want lists where it is masked.
func TestGuardScopes(t *testing.T) {
	const (
		chatBody = `{"model":"m","messages":[` +
			`{"role":"system","content":"sys ` + ssn + `"},` +
			`{"role":"developer","content":[{"type":"text","text":"dev ` + ssn + `"}]},` +
			`{"role":"user","content":[{"type":"text","text":"user ` + ssn + `"},{"type":"image_url","image_url":{"url":"http://x/` + ssn + `"}}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"ssn\":\"` + ssn + `\"}"}}],"function_call":{"name":"g","arguments":"` + ssn + `"}},` +
			`{"role":"tool","tool_call_id":"c1","content":"out ` + ssn + `"}]}`
		messagesBody = `{"model":"m","system":[{"type":"text","text":"sys ` + ssn + `"}],"messages":[` +
			`{"role":"user","content":"user ` + ssn + `"},` +
			`{"role":"assistant","content":[{"type":"text","text":"a ` + ssn + `"},{"type":"tool_use","id":"t1","name":"f","input":{"q":"` + ssn + `","n":[1,"` + ssn + `"]}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"out ` + ssn + `"}]},{"type":"thinking","thinking":"` + ssn + `","signature":"s"}]}]}`
		responsesBody = `{"model":"m","instructions":"sys ` + ssn + `","input":[` +
			`{"type":"message","role":"developer","content":"dev ` + ssn + `"},` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"user ` + ssn + `"},{"type":"input_image","image_url":"` + ssn + `"}]},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a ` + ssn + `"},{"type":"refusal","refusal":"r ` + ssn + `"}]},` +
			`{"type":"function_call","call_id":"c","name":"f","arguments":"{\"q\":\"` + ssn + `\"}"},` +
			`{"type":"function_call_output","call_id":"c","output":"out ` + ssn + `"},` +
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"` + ssn + `"}]}]}`
	)
	tests := []struct {
		desc   string
		format convert.Format
		scope  string
		body   string
		want   string // the body with ssn where it stays and M where masked
	}{
		{"chat system", convert.Chat, "systemPrompt", chatBody,
			masked(chatBody, 0, 1)},
		{"chat messages", convert.Chat, "messages", chatBody,
			masked(chatBody, 2)},
		{"chat default scope", convert.Chat, "", chatBody,
			masked(chatBody, 0, 1, 2)},
		{"chat tool input", convert.Chat, "toolInput", chatBody,
			masked(chatBody, 4, 5)},
		{"chat tool output", convert.Chat, "toolOutput", chatBody,
			masked(chatBody, 6)},
		{"messages system", convert.Messages, "systemPrompt", messagesBody,
			masked(messagesBody, 0)},
		{"messages messages", convert.Messages, "messages", messagesBody,
			masked(messagesBody, 1, 2)},
		{"messages tool input", convert.Messages, "toolInput", messagesBody,
			masked(messagesBody, 3, 4)},
		{"messages tool output", convert.Messages, "toolOutput", messagesBody,
			masked(messagesBody, 5)},
		{"responses system", convert.Responses, "systemPrompt", responsesBody,
			masked(responsesBody, 0, 1)},
		{"responses messages", convert.Responses, "messages", responsesBody,
			masked(responsesBody, 2, 4, 5)},
		{"responses tool input", convert.Responses, "toolInput", responsesBody,
			masked(responsesBody, 6)},
		{"responses tool output", convert.Responses, "toolOutput", responsesBody,
			masked(responsesBody, 7)},
		{"all scopes", convert.Chat, "systemPrompt, messages, toolInput, toolOutput", chatBody,
			masked(chatBody, 0, 1, 2, 4, 5, 6)},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := scopePolicy(t, tc.scope)
			if got := apply(t, p, tc.body, tc.format, nil); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// masked replaces the listed occurrences (0-based) of ssn in body with the
// SSN label.
func masked(body string, which ...int) string {
	parts := strings.Split(body, ssn)
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(p)
		if i == len(parts)-1 {
			break
		}
		label := ssn
		for _, w := range which {
			if w == i {
				label = "<SSN>"
			}
		}
		b.WriteString(label)
	}
	return b.String()
}

// TestGuardMaskAndReject: guards run in order, each on what the one before
// left; the first reject stops; masked texts are written back escaped.
func TestGuardMaskAndReject(t *testing.T) {
	tests := []struct {
		desc, policy, body, want string
	}{
		{"nothing matches: the body itself",
			"promptGuard: {request: [{regex: {rules: [{builtin: ssn}, {builtin: email}]}}]}",
			`{"messages":[{"role":"user","content":"hello"}]}`,
			`{"messages":[{"role":"user","content":"hello"}]}`},
		{"mask, with escapes around the match kept as text",
			"promptGuard: {request: [{regex: {rules: [{builtin: email}]}}]}",
			`{"messages":[{"role":"user","content":"mail \"jane@example.com\"\n\u00e9"}]}`,
			`{"messages":[{"role":"user","content":"mail \"<EMAIL_ADDRESS>\"\né"}]}`},
		{"mask in a text without escapes: its bytes kept as sent, the label put in",
			"promptGuard: {request: [{regex: {rules: [{builtin: email}]}}]}",
			"{\"messages\":[{\"role\":\"user\",\"content\":\"é \u2028 jane@example.com 🍰\"}]}",
			"{\"messages\":[{\"role\":\"user\",\"content\":\"é \u2028 <EMAIL_ADDRESS> 🍰\"}]}"},
		{"reject",
			"promptGuard: {request: [{regex: {action: reject, rules: [{builtin: creditCard}]}}]}",
			`{"messages":[{"role":"user","content":"card 4111 1111 1111 1111"}]}`,
			`REJECT 403`},
		{"a mask before a reject hides the match from it",
			"promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}, {regex: {action: reject, rules: [{pattern: '\\d{3}-\\d{2}'}]}}]}",
			`{"messages":[{"role":"user","content":"` + ssn + `"}]}`,
			`{"messages":[{"role":"user","content":"<SSN>"}]}`},
		{"a later guard reads the earlier mask",
			"promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}, {regex: {action: reject, rules: [{pattern: '<SSN>'}]}}]}",
			`{"messages":[{"role":"user","content":"` + ssn + `"}]}`,
			`REJECT 403`},
		{"a reject out of its scope lets the request through",
			"promptGuard: {request: [{regex: {action: reject, rules: [{builtin: ssn}]}, scope: [systemPrompt]}]}",
			`{"messages":[{"role":"user","content":"` + ssn + `"}]}`,
			`{"messages":[{"role":"user","content":"` + ssn + `"}]}`},
		{"a message with two roles is read in both scopes",
			"promptGuard: {request: [{regex: {action: reject, rules: [{builtin: ssn}]}, scope: [systemPrompt]}]}",
			`{"messages":[{"role":"system","content":"` + ssn + `","role":"user"}]}`,
			`REJECT 403`},
		{"every member of a repeated name is read",
			"promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}]}",
			`{"messages":[{"role":"user","content":"` + ssn + `"}],"messages":[{"role":"user","content":"x ` + ssn + `"}]}`,
			`{"messages":[{"role":"user","content":"<SSN>"}],"messages":[{"role":"user","content":"x <SSN>"}]}`},
		{"prepended prompts are guarded too",
			"prompts: {prepend: [{role: user, content: 'my ssn " + ssn + "'}]}\npromptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}]}",
			`{"messages":[]}`,
			`{"messages":[{"role":"user","content":"my ssn <SSN>"}]}`},
		{"a mask in a tool's JSON arguments keeps them a JSON string",
			"promptGuard: {request: [{regex: {rules: [{pattern: '\"secret\"'}]}, scope: [toolInput]}]}",
			`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"secret\":1}"}}]}]}`,
			`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{<masked>:1}"}}]}]}`},
		{"a match split across a message's text blocks is rejected",
			"promptGuard: {request: [{regex: {action: reject, rules: [{pattern: forbidden}]}}]}",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"forbid"},{"type":"text","text":"den"}]}]}`,
			`REJECT 403`},
		{"a match split across blocks is masked once, where it starts; the blocks stay",
			"promptGuard: {request: [{regex: {rules: [{builtin: creditCard}]}}]}",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"card 4111 1111 "},{"type":"text","text":"1111 1111 thanks"},{"type":"text","text":" ok"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"card <CREDIT_CARD>"},{"type":"text","text":" thanks"},{"type":"text","text":" ok"}]}]}`},
		{"blocks of two messages are not joined",
			"promptGuard: {request: [{regex: {action: reject, rules: [{pattern: forbidden}]}}]}",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"forbid"}]},{"role":"user","content":[{"type":"text","text":"den"}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"forbid"}]},{"role":"user","content":[{"type":"text","text":"den"}]}]}`},
		{"escaped block types are read as their type",
			"promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}, scope: [toolInput]}]}",
			`{"messages":[{"role":"assistant","content":[{"type":"tool\u005fuse","input":{"a":"` + ssn + `"}}]}]}`,
			`{"messages":[{"role":"assistant","content":[{"type":"tool\u005fuse","input":{"a":"<SSN>"}}]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := mustPolicy(t, tc.policy)
			f := convert.Chat
			if strings.Contains(tc.body, "tool\\u005fuse") {
				f = convert.Messages
			}
			if got := apply(t, p, tc.body, f, nil); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRejection: the defaults and a configured answer, written to a
// response.
func TestRejection(t *testing.T) {
	tests := []struct {
		desc, rejection string
		status          int
		body            string
		headers         map[string]string
	}{
		{"defaults", "", 403, config.DefaultRequestRejectionBody, nil},
		{"configured", "\n    rejection: {status: 451, body: '{\"error\":\"pii\"}', headers: {set: {Content-Type: application/json, X-Guard: pii}}}", 451, `{"error":"pii"}`,
			map[string]string{"Content-Type": "application/json", "X-Guard": "pii"}},
		{"status only", "\n    rejection: {status: 400}", 400, config.DefaultRequestRejectionBody, nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := mustPolicy(t, "promptGuard:\n  request:\n  - regex: {action: reject, rules: [{builtin: ssn}]}"+tc.rejection)
			_, rej, err := p.Request(nil, []byte(`{"messages":[{"role":"user","content":"`+ssn+`"}]}`), convert.Chat, nil)
			if err != nil || rej == nil {
				t.Fatalf("rej %v err %v", rej, err)
			}
			var resp fasthttp.Response
			resp.Header.Set("X-Stale", "1")
			resp.SetBodyString("stale")
			if got := rej.Write(&resp); got != tc.status || resp.StatusCode() != tc.status {
				t.Errorf("status %d / %d, want %d", got, resp.StatusCode(), tc.status)
			}
			if string(resp.Body()) != tc.body {
				t.Errorf("body %q, want %q", resp.Body(), tc.body)
			}
			if len(resp.Header.Peek("X-Stale")) != 0 {
				t.Error("the response was not reset")
			}
			for k, v := range tc.headers {
				if got := string(resp.Header.Peek(k)); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestNewErrors: paths relative to policies.ai.
func TestNewErrors(t *testing.T) {
	tests := []struct {
		desc, policy, path, msg string
	}{
		{"moderation without a key", "promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}, {openAIModeration: {}}]}",
			"promptGuard.request[1].openAIModeration.policies.backendAuth", "needs a key"},
		{"azure response guard without analyzeText", "promptGuard: {response: [{regex: {rules: [{builtin: ssn}]}}, {azureContentSafety: {endpoint: x.example.com}}]}",
			"promptGuard.response[1].azureContentSafety.analyzeText", "required"},
		{"webhook naming a backend without a resolver", "promptGuard: {request: [{webhook: {target: {backend: b}}}]}",
			"promptGuard.request[0].webhook.target.backend", "no backend named"},
		{"rejection header", "promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}, rejection: {headers: {set: {X-A: \"a\\u0001\"}}}}]}",
			"promptGuard.request[0].rejection.headers.set.X-A", "control character"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var cfg config.AIPolicy
			if errs := decode.YAML([]byte(tc.policy), &cfg); errs != nil {
				t.Fatalf("decode: %v", errs)
			}
			_, err := New(&cfg)
			var fe *decode.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("err %v (%T), want a *decode.FieldError", err, err)
			}
			if fe.Path != tc.path || !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("got %s: %s\nwant %s: ...%s...", fe.Path, fe.Msg, tc.path, tc.msg)
			}
		})
	}
}

// TestNewRegexRuleError: a rule the guard refuses is named by its index
// among the rules (builtins and patterns together).
func TestNewRegexRuleError(t *testing.T) {
	cfg := &config.AIPolicy{PromptGuard: &config.PromptGuard{Request: []config.RequestGuard{{
		Regex: &config.RegexGuard{Rules: []config.RegexRule{{Builtin: "ssn"}, {Builtin: "nope"}}},
	}}}}
	_, err := New(cfg)
	var fe *decode.FieldError
	if !errors.As(err, &fe) || fe.Path != "promptGuard.request[0].regex.rules[1]" {
		t.Fatalf("err %v", err)
	}
}

// TestResponseGuard: regex response guards merge into one that masks, even
// when one says reject.
func TestResponseGuard(t *testing.T) {
	if mustPolicy(t, "defaults: {a: 1}").ResponseGuard() != nil {
		t.Fatal("a response guard without response guards")
	}
	p := mustPolicy(t, `promptGuard:
  response:
  - regex: {action: reject, rules: [{builtin: email}]}
  - regex: {rules: [{pattern: 'sk-[a-z]+'}]}
`)
	g := p.ResponseGuard()
	if g == nil {
		t.Fatal("no response guard")
	}
	got := string(g.Mask([]byte("mail a@example.com key sk-abc")))
	if want := "mail <EMAIL_ADDRESS> key <masked>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestFieldsNamingTheConversation: when a field sets the conversation
// itself, the prompts go into the new value and the guards read it.
func TestFieldsNamingTheConversation(t *testing.T) {
	tests := []struct {
		desc, policy string
		format       convert.Format
		body, want   string
	}{
		{"an override of messages gets the prompts and the masks",
			"overrides: {messages: [{role: user, content: 'ssn " + ssn + "'}]}\nprompts: {prepend: [{role: system, content: s}]}\npromptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}]}",
			convert.Chat,
			`{"model":"m","messages":[{"role":"user","content":"replaced"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"s"},{"content":"ssn <SSN>","role":"user"}]}`},
		{"a default system prompt, Messages",
			"defaults: {system: 'call " + ssn + "'}\nprompts: {append: [{role: system, content: tail}]}\npromptGuard: {request: [{regex: {rules: [{builtin: ssn}]}, scope: [systemPrompt]}]}",
			convert.Messages,
			`{"messages":[]}`,
			`{"messages":[],"system":[{"type":"text","text":"call <SSN>"},{"type":"text","text":"tail"}]}`},
		{"a transformation of the instructions, Responses",
			"transformations: {instructions: '\"ssn \" + llmRequest.user'}\npromptGuard: {request: [{regex: {action: reject, rules: [{builtin: ssn}]}}]}",
			convert.Responses,
			`{"user":"` + ssn + `","input":"hi"}`,
			`REJECT 403`},
		{"the fields change, the guards find nothing",
			"overrides: {input: hello}\npromptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}]}",
			convert.Responses,
			`{"input":"` + ssn + `"}`,
			`{"input":"hello"}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := mustPolicy(t, tc.policy)
			if got := apply(t, p, tc.body, tc.format, nil); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestGuardedPrompts: the prompts are guarded once, when the policy is
// compiled; a prompt a guard refuses refuses every request, in the order
// of the guards.
func TestGuardedPrompts(t *testing.T) {
	p := mustPolicy(t, `prompts: {append: [{role: system, content: "card 4111 1111 1111 1111"}]}
promptGuard:
  request:
  - regex: {action: reject, rules: [{builtin: email}]}
    rejection: {status: 400}
  - regex: {action: reject, rules: [{builtin: creditCard}]}
    rejection: {status: 451}
`)
	if got := apply(t, p, `{"messages":[]}`, convert.Chat, nil); got != "REJECT 451" {
		t.Errorf("clean body: %s", got)
	}
	if got := apply(t, p, `{"messages":[{"role":"user","content":"a@example.com"}]}`, convert.Chat, nil); got != "REJECT 400" {
		t.Errorf("an earlier guard refusing the body: %s", got)
	}
	// The prompt is out of a scope: nothing refused.
	q := mustPolicy(t, `prompts: {append: [{role: system, content: "card 4111 1111 1111 1111"}]}
promptGuard: {request: [{regex: {action: reject, rules: [{builtin: creditCard}]}, scope: [messages]}]}
`)
	if got := apply(t, q, `{"messages":[]}`, convert.Chat, nil); got != `{"messages":[{"role":"system","content":"card 4111 1111 1111 1111"}]}` {
		t.Errorf("out of scope: %s", got)
	}
}

// TestConcurrentRequests: one policy serves many requests at once, each
// with its own result (go test -race checks the sharing).
func TestConcurrentRequests(t *testing.T) {
	p := mustPolicy(t, fuzzPolicy)
	bodies := []string{
		`{"messages":[{"role":"user","content":"call 555-123-4567"}]}`,
		`{"messages":[{"role":"user","content":"mail a@example.com"}],"max_tokens":3}`,
		`{"messages":[{"role":"user","content":"nothing"}]}`,
	}
	want := make([]string, len(bodies))
	for i, b := range bodies {
		want[i] = apply(t, p, b, convert.Chat, nil)
	}
	errs := make(chan string, 8)
	for g := range 8 {
		go func() {
			var dst []byte
			for i := range 50 {
				k := (g + i) % len(bodies)
				out, _, err := p.Request(dst[:0], []byte(bodies[k]), convert.Chat, nil)
				if err != nil || string(out) != want[k] {
					errs <- string(out)
					return
				}
				dst = out
			}
			errs <- ""
		}()
	}
	for range 8 {
		if got := <-errs; got != "" {
			t.Errorf("a concurrent request got %s", got)
		}
	}
}
