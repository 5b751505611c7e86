package aipolicy

import (
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
)

// TestRequestMembers: RequestMembers reports the top-level members of what
// it returns on each of Request's paths: the body itself, the body written
// with edits (fields replaced, added, masked, prompts around the turns and
// a system prompt added), and the fields applied first (a field naming the
// conversation) then copied after dst's bytes.
func TestRequestMembers(t *testing.T) {
	tests := []struct {
		desc, policy string
		f            convert.Format
		body         string
	}{
		{"nothing changes: the body itself",
			"promptGuard: {request: [{regex: {rules: [{builtin: email}]}}]}", convert.Chat,
			`{"model" : "m", "messages":[{"role":"user","content":"hi"}] , "stream":true}`},
		{"a default added, an override replacing, a mask",
			"defaults: {temperature: 0.5}\noverrides: {model: fixed}\npromptGuard: {request: [{regex: {rules: [{builtin: email}]}}]}", convert.Chat,
			`{"model":"m","messages":[{"role":"user","content":"mail a@b.co"}],"stream":false}`},
		{"prompts around the turns and a system prompt added",
			"prompts: {prepend: [{role: system, content: s}, {role: user, content: u}], append: [{role: user, content: v}]}", convert.Messages,
			`{"model":"m", "messages": [{"role":"user","content":"hi"}]}`},
		{"a field naming the conversation: applied first",
			"overrides: {messages: [{role: user, content: 'x a@b.co'}]}\npromptGuard: {request: [{regex: {rules: [{pattern: 'zzz'}]}}]}", convert.Chat,
			`{"model":"m","messages":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			p := mustPolicy(t, tc.policy)
			dst := []byte("before")
			var members []Member
			out, rej, err := p.RequestMembers(dst, []byte(tc.body), tc.f, nil, nil, &members)
			if err != nil || rej != nil {
				t.Fatal(err, rej)
			}
			if len(out) >= len(dst) && string(out[:len(dst)]) == "before" {
				out = out[len(dst):]
			}
			requireMembers(t, out, members)
			if len(members) == 0 {
				t.Fatal("no members reported")
			}
		})
	}
}
