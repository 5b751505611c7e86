package aipolicy

import (
	"slices"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm"
)

// fuzzPolicy masks every builtin and a pattern in every scope, and adds
// fields and prompts, so that every stage edits the body.
const fuzzPolicy = `defaults: {temperature: 0.5, metadata: {a: [1, "x"]}}
overrides: {max_tokens: 10}
prompts:
  prepend: [{role: system, content: "sys 123-45-6789"}, {role: user, content: u}]
  append: [{role: assistant, content: "a@example.com"}]
promptGuard:
  request:
  - regex: {rules: [{builtin: ssn}, {builtin: creditCard}, {builtin: phoneNumber}, {builtin: email}, {builtin: caSin}]}
    scope: [systemPrompt, messages, toolInput, toolOutput]
  - regex: {rules: [{pattern: 'x+'}]}
    scope: [messages, toolInput]
`

// requireMembers fails unless members are out's top-level members as a
// walk of out finds them.
func requireMembers(t *testing.T, out []byte, members []Member) {
	t.Helper()
	var m llm.Members
	m.Reset(out)
	i := 0
	for ; m.Next(); i++ {
		if i >= len(members) {
			t.Fatalf("%d members reported, more in %q", len(members), out)
		}
		got := members[i]
		name, value := string(out[got.NameStart:got.NameEnd]), string(out[got.ValueStart:got.ValueEnd])
		if name != string(m.Name()) || value != string(m.Value()) || got.ValueEnd != m.ValueEnd() {
			t.Fatalf("member %d reported as %s:%s (ending at %d), walk finds %s:%s (ending at %d) in %q",
				i, name, value, got.ValueEnd, m.Name(), m.Value(), m.ValueEnd(), out)
		}
	}
	if i != len(members) {
		t.Fatalf("%d members reported, %d in %q", len(members), i, out)
	}
}

// FuzzRequest: whatever the body, Request never panics, refuses what is not
// a JSON object, and otherwise gives a JSON object whose top-level members
// are the ones RequestMembers reports; PromptText and Model read anything
// safely.
func FuzzRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"call 555-123-4567 or a@b.co xx"}]}`,
		`{"messages":[{"role":"tool","content":[{"type":"text","text":"4111 1111 1111 1111"}]},{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"x\":\"123-45-6789\"}"}}]}]}`,
		`{"system":"s 123 456 789","messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"xx\u00e9"}]},{"type":"tool_use","input":{"a":["x"]}}]}]}`,
		`{"instructions":"i","input":[{"role":"user","content":[{"type":"input_text","text":"x"}]},{"type":"function_call","arguments":"x"}]}`,
		`{"input":"x\"\\x"}`,
		`{"messages":[],"messages":null,"system":null}`,
		`{"a":"\ud800","messages":[{"content":"\u2028x"}]}`,
		`[1]`, `{"x":`, `{}`, ` { } `,
	} {
		f.Add([]byte(s), uint8(1))
	}
	// Nesting at and beyond llm.MaxDepth (the top object is one level).
	for _, n := range []int{llm.MaxDepth - 1, llm.MaxDepth} {
		f.Add([]byte(`{"a":`+strings.Repeat("[", n)+strings.Repeat("]", n)+`}`), uint8(1))
	}
	p := mustPolicy(f, fuzzPolicy)
	f.Fuzz(func(t *testing.T, body []byte, format uint8) {
		fm := convert.Format(format % 6)
		var members []Member
		out, rej, err := p.RequestMembers(nil, body, fm, nil, nil, &members)
		if err == nil && rej == nil {
			requireMembers(t, out, members)
		}
		valid := llm.ValidObject(body)
		switch {
		case !valid && err == nil:
			t.Fatalf("no error for %q", body)
		case valid && err != nil:
			t.Fatalf("error %v for %q", err, body)
		case rej != nil:
			t.Fatalf("a masking policy rejected %q", body)
		case err == nil && !llm.ValidObject(out):
			t.Fatalf("output %q is not a JSON object (input %q)", out, body)
		}
		// Validating while indexing agrees with ValidObject, and on a
		// valid body indexes what build indexes.
		for _, depth := range []int{topLevel, allLevels} {
			var plain, checked tape
			if ok := checked.buildValid(body, depth); ok != valid {
				t.Fatalf("buildValid %v, ValidObject %v for %q", ok, valid, body)
			}
			if plain.build(body, depth); valid && !slices.Equal(plain.nodes, checked.nodes) {
				t.Fatalf("depth %d: nodes differ for %q:\nbuild      %v\nbuildValid %v", depth, body, plain.nodes, checked.nodes)
			}
		}
		promptText(nil, body, fm)
		Model(body)
		if err == nil {
			// The masked output, read again, has every text still there.
			promptText(nil, out, fm)
		}
	})
}
