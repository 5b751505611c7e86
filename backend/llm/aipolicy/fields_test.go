package aipolicy

import (
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
)

// TestBodyMutations: defaults fill absent fields only, overrides replace,
// transformations beat overrides, in agentgateway's order; values may be
// any JSON; unchanged bodies come back as they are.
func TestBodyMutations(t *testing.T) {
	tests := []struct {
		desc, policy, body, want string
	}{
		{
			desc:   "a default fills an absent field, at the end",
			policy: "defaults: {temperature: 0.5}",
			body:   `{"model":"m","messages":[]}`,
			want:   `{"model":"m","messages":[],"temperature":0.5}`,
		},
		{
			desc:   "a default leaves a present field as it is, spacing included",
			policy: "defaults: {temperature: 0.5}",
			body:   `{ "model" : "m", "temperature" : 1 }`,
			want:   `{ "model" : "m", "temperature" : 1 }`,
		},
		{
			desc:   "a default leaves a present null",
			policy: "defaults: {temperature: 0.5}",
			body:   `{"temperature":null}`,
			want:   `{"temperature":null}`,
		},
		{
			desc:   "an override replaces in place, other members byte for byte",
			policy: "overrides: {temperature: 0.2}",
			body:   `{"model" : "m","temperature":1,"messages":[ {"role":"user"} ]}`,
			want:   `{"model" : "m","temperature":0.2,"messages":[ {"role":"user"} ]}`,
		},
		{
			desc:   "an override adds an absent field",
			policy: "overrides: {max_tokens: 100}",
			body:   `{"model":"m"}`,
			want:   `{"model":"m","max_tokens":100}`,
		},
		{
			desc:   "an override equal to the body changes nothing",
			policy: "overrides: {max_tokens: 100}",
			body:   `{"max_tokens":100}`,
			want:   `{"max_tokens":100}`,
		},
		{
			desc:   "an override drops a repeated member",
			policy: "overrides: {model: b}",
			body:   `{"model":"a","x":1,"model":"c"}`,
			want:   `{"model":"b","x":1}`,
		},
		{
			desc:   "an override names the member through escapes",
			policy: "overrides: {model: b}",
			body:   `{"mod\u0065l":"a"}`,
			want:   `{"mod\u0065l":"b"}`,
		},
		{
			desc:   "nested values: objects and arrays",
			policy: "defaults: {metadata: {team: a, tags: [x, 1, true, null]}}\noverrides: {stop: [\"\\n\\n\", END]}",
			body:   `{"stop":"x"}`,
			want:   `{"stop":["\n\n","END"],"metadata":{"tags":["x",1,true,null],"team":"a"}}`,
		},
		{
			desc:   "a null override sets null",
			policy: "overrides: {user: null}",
			body:   `{"user":"u"}`,
			want:   `{"user":null}`,
		},
		{
			desc:   "fields added in name order",
			policy: "defaults: {b: 1, a: 2}\noverrides: {c: 3}",
			body:   `{}`,
			want:   `{"a":2,"b":1,"c":3}`,
		},
		{
			desc:   "both a default and an override: the override",
			policy: "defaults: {top_p: 1}\noverrides: {top_p: 0.9}",
			body:   `{"top_p":0.5}`,
			want:   `{"top_p":0.9}`,
		},
		{
			desc:   "a transformation beats an override",
			policy: "overrides: {max_tokens: 1}\ntransformations: {max_tokens: 'llmRequest.max_tokens * 2'}",
			body:   `{"max_tokens":21}`,
			want:   `{"max_tokens":42}`,
		},
		{
			desc:   "a transformation reads the client's body, not the overrides",
			policy: "overrides: {model: forced}\ntransformations: {user: 'llmRequest.model'}",
			body:   `{"model":"asked"}`,
			want:   `{"model":"forced","user":"asked"}`,
		},
		{
			desc:   "a failed transformation removes its field",
			policy: "transformations: {user: 'llmRequest.absent'}",
			body:   `{"user":"u","model":"m"}`,
			want:   `{"model":"m"}`,
		},
		{
			desc:   "a failed transformation removes an override, and the default fills in",
			policy: "defaults: {user: d}\noverrides: {user: o}\ntransformations: {user: 'llmRequest.absent'}",
			body:   `{"user":"u"}`,
			want:   `{"user":"d"}`,
		},
		{
			desc:   "a null result sets null",
			policy: "transformations: {user: 'null'}",
			body:   `{"user":"u"}`,
			want:   `{"user":null}`,
		},
		{
			desc:   "a map result, keys sorted",
			policy: "transformations: {metadata: '{\"b\": llmRequest.messages.size(), \"a\": [1.5, 2.0, b\"hi\", duration(\"1.5s\")]}'}",
			body:   `{"messages":[{},{}]}`,
			want:   `{"messages":[{},{}],"metadata":{"a":[1.5,2.0,"aGk=","1.5s"],"b":2}}`,
		},
		{
			desc:   "types, timestamps, int keys and infinities as agentgateway writes them",
			policy: "transformations: {a: 'type(1)', b: 'timestamp(\"2024-01-02T03:04:05.5+01:00\")', c: '{2: \"x\", 1: true}', d: '1.0/0.0', e: 'duration(\"-90s\")'}",
			body:   `{}`,
			want:   `{"a":"int","b":"2024-01-02T02:04:05.5Z","c":{"1":true,"2":"x"},"d":null,"e":"-90s"}`,
		},
		{
			desc:   "integers stay integers, large ones too",
			policy: "transformations: {n: 'llmRequest.big + 1u', m: 'llmRequest.small - 1', f: 'llmRequest.real * 2.0'}",
			body:   `{"big":18446744073709551614,"small":-9223372036854775807,"real":1.25}`,
			want:   `{"big":18446744073709551614,"small":-9223372036854775807,"real":1.25,"f":2.5,"m":-9223372036854775808,"n":18446744073709551615}`,
		},
		{
			desc:   "llmRequest sees escapes decoded and nested members",
			policy: "transformations: {user: 'llmRequest.metadata[\"k\\\"1\"] + \"/\" + llmRequest.messages[0].content'}",
			body:   `{"metadata":{"k\"1":"v\u00e9"},"messages":[{"role":"user","content":"hi\n"}]}`,
			want:   `{"metadata":{"k\"1":"v\u00e9"},"messages":[{"role":"user","content":"hi\n"}],"user":"vé/hi\n"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := mustPolicy(t, tc.policy)
			if got := apply(t, p, tc.body, convert.Chat, nil); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestTransformationsReadTheRequest: request headers, path and source are
// there beside llmRequest; without an input they are absent and the
// expression fails (its field removed).
func TestTransformationsReadTheRequest(t *testing.T) {
	p := mustPolicy(t, `transformations:
  user: 'request.headers["x-user"] + "@" + source.address'
  metadata: '{"path": request.path, "model": llmRequest.model}'
`)
	in := requestInput("/v1/chat/completions", "X-User", "alice")
	got := apply(t, p, `{"model":"gpt"}`, convert.Chat, in)
	want := `{"model":"gpt","metadata":{"model":"gpt","path":"/v1/chat/completions"},"user":"alice@10.0.0.7"}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// Without an input request.path and the header fail: both fields go.
	got = apply(t, p, `{"model":"gpt","user":"u"}`, convert.Chat, nil)
	want = `{"model":"gpt"}`
	if got != want {
		t.Errorf("without input: got %s\nwant %s", got, want)
	}
}

// TestFinal: finalTransformations on the provider's body.
func TestFinal(t *testing.T) {
	p := mustPolicy(t, `finalTransformations:
  anthropic_version: '"bedrock-2023-05-31"'
  model: 'llmRequest.absent'
  maxTokens: 'llmRequest.inferenceConfig.maxTokens + 1'
`)
	if !p.NeedsCEL() {
		t.Fatal("NeedsCEL false with final transformations")
	}
	body := []byte(`{"model":"x","inferenceConfig":{"maxTokens":9},"messages":[]}`)
	out, err := p.Final([]byte("pre"), body, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `pre{"inferenceConfig":{"maxTokens":9},"messages":[],"anthropic_version":"bedrock-2023-05-31","maxTokens":10}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	if _, err := p.Final(nil, []byte(`[1]`), nil); err != errFinalNotObject {
		t.Errorf("array body: err %v", err)
	}
	none := mustPolicy(t, `defaults: {a: 1}`)
	if none.NeedsCEL() {
		t.Error("NeedsCEL true without transformations")
	}
	if out, err := none.Final(nil, body, nil); err != nil || &out[0] != &body[0] {
		t.Errorf("no final transformations: the body itself expected (err %v)", err)
	}
}

// TestNotAnObject: 400-worthy errors with short messages.
func TestNotAnObject(t *testing.T) {
	p := mustPolicy(t, "defaults: {a: 1}")
	for _, body := range []string{``, `[]`, `"x"`, `{"a":`, `{"a":"\0"}`, `{} {}`, `{"a":1,}`} {
		if got := apply(t, p, body, convert.Chat, nil); got != "ERROR "+ErrNotObject.Error() {
			t.Errorf("%q: %s", body, got)
		}
	}
}

// TestUnchangedIsTheBody: when nothing changes, Request returns the body
// itself, not a copy.
func TestUnchangedIsTheBody(t *testing.T) {
	tests := []struct {
		desc, policy string
		format       convert.Format
		body         string
	}{
		{"a default present", "defaults: {a: 1}", convert.Chat, `{"a":2}`},
		{"an override equal", "overrides: {a: [1, {b: x}]}", convert.Chat, `{"a":[1,{"b":"x"}]}`},
		{"prompts with nowhere to go", "prompts: {append: [{role: user, content: x}]}", convert.Chat, `{"messages":null}`},
		{"a clean text", "promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}]}", convert.Chat, `{"messages":[{"role":"user","content":"hi"}]}`},
		{"a field naming the conversation, unchanged", "defaults: {messages: []}\npromptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}]}", convert.Chat, `{"messages":[{"role":"user","content":"hi"}]}`},
		{"a failed transformation of an absent field", "transformations: {a: 'llmRequest.nope'}", convert.Chat, `{"b":1}`},
		{"another route type", "prompts: {append: [{role: user, content: x}]}\npromptGuard: {request: [{regex: {action: reject, rules: [{builtin: ssn}]}}]}", convert.FormatUnknown, `{"input":"123-45-6789"}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := mustPolicy(t, tc.policy)
			body := []byte(tc.body)
			out, rej, err := p.Request(make([]byte, 0, 64), body, tc.format, nil)
			if err != nil || rej != nil {
				t.Fatalf("err %v rej %v", err, rej)
			}
			if len(out) != len(body) || &out[0] != &body[0] {
				t.Errorf("got a copy: %s", out)
			}
		})
	}
}
