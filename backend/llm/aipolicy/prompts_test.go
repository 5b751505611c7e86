package aipolicy

import (
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
)

// agentgatewayPrompts are the prompts of agentgateway's golden tests
// (crates/llm/src/golden_tests.rs, apply_test_prompts_to).
const agentgatewayPrompts = `prompts:
  prepend:
  - {role: system, content: prepend system prompt}
  - {role: user, content: prepend user message}
  - {role: assistant, content: prepend assistant message}
  append:
  - {role: user, content: append user message}
  - {role: system, content: append system prompt}
  - {role: assistant, content: append assistant prompt}
`

// TestPromptEnrichment: per format, where prepended and appended messages
// go (the same items as agentgateway's golden snapshots in
// crates/llm/src/tests/requests/policies, member order aside).
func TestPromptEnrichment(t *testing.T) {
	const (
		chatPre  = `{"role":"system","content":"prepend system prompt"},{"role":"user","content":"prepend user message"},{"role":"assistant","content":"prepend assistant message"}`
		chatPost = `{"role":"user","content":"append user message"},{"role":"system","content":"append system prompt"},{"role":"assistant","content":"append assistant prompt"}`
		anPre    = `{"role":"user","content":"prepend user message"},{"role":"assistant","content":"prepend assistant message"}`
		anPost   = `{"role":"user","content":"append user message"},{"role":"assistant","content":"append assistant prompt"}`
		sysPre   = `{"type":"text","text":"prepend system prompt"}`
		sysPost  = `{"type":"text","text":"append system prompt"}`
		rsPre    = `{"type":"message","role":"system","content":[{"type":"input_text","text":"prepend system prompt"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"prepend user message"}]},{"type":"message","role":"assistant","content":"prepend assistant message"}`
		rsPost   = `{"type":"message","role":"user","content":[{"type":"input_text","text":"append user message"}]},{"type":"message","role":"system","content":[{"type":"input_text","text":"append system prompt"}]},{"type":"message","role":"assistant","content":"append assistant prompt"}`
	)
	tests := []struct {
		desc   string
		format convert.Format
		body   string
		want   string
	}{
		{"chat", convert.Chat,
			`{"model":"gpt-4o","messages":[ {"role":"user","content":"Hello, world"} ],"stream":true}`,
			`{"model":"gpt-4o","messages":[` + chatPre + `,{"role":"user","content":"Hello, world"},` + chatPost + `],"stream":true}`},
		{"chat, no messages yet", convert.Chat,
			`{"messages":[ ]}`,
			`{"messages":[` + chatPre + `,` + chatPost + `]}`},
		{"chat, messages missing: left to the translation to refuse", convert.Chat,
			`{"model":"m"}`,
			`{"model":"m"}`},
		{"chat, messages not an array: left as is", convert.Chat,
			`{"messages":null}`,
			`{"messages":null}`},
		{"messages, string system prompt becomes a block", convert.Messages,
			`{"model":"claude","max_tokens":1024,"system":"system prompt","messages":[{"role":"user","content":"Hello, world"}]}`,
			`{"model":"claude","max_tokens":1024,"system":[` + sysPre + `,{"type":"text","text":"system prompt"},` + sysPost + `],"messages":[` + anPre + `,{"role":"user","content":"Hello, world"},` + anPost + `]}`},
		{"messages, block system prompt keeps its blocks", convert.Messages,
			`{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[]}`,
			`{"system":[` + sysPre + `,{"type":"text","text":"s","cache_control":{"type":"ephemeral"}},` + sysPost + `],"messages":[` + anPre + `,` + anPost + `]}`},
		{"messages, no system prompt: one is added", convert.Messages,
			`{"messages":[{"role":"user","content":"hi"}]}`,
			`{"messages":[` + anPre + `,{"role":"user","content":"hi"},` + anPost + `],"system":[` + sysPre + `,` + sysPost + `]}`},
		{"messages, null system prompt", convert.Messages,
			`{"system":null,"messages":[]}`,
			`{"system":[` + sysPre + `,` + sysPost + `],"messages":[` + anPre + `,` + anPost + `]}`},
		{"responses, item input", convert.Responses,
			`{"model":"gpt-4o","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello, world"}]}],"max_output_tokens":1024}`,
			`{"model":"gpt-4o","input":[` + rsPre + `,{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello, world"}]},` + rsPost + `],"max_output_tokens":1024}`},
		{"responses, text input becomes a user message", convert.Responses,
			`{"model":"gpt-4o","input":"Hello, \"world\""}`,
			`{"model":"gpt-4o","input":[` + rsPre + `,{"type":"message","role":"user","content":[{"type":"input_text","text":"Hello, \"world\""}]},` + rsPost + `]}`},
		{"other route types get no prompts", convert.FormatUnknown,
			`{"model":"m","messages":[],"input":"x"}`,
			`{"model":"m","messages":[],"input":"x"}`},
	}
	p := mustPolicy(t, agentgatewayPrompts)
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := apply(t, p, tc.body, tc.format, nil); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestPromptEnrichmentOneSide: only prepend, only append, only system.
func TestPromptEnrichmentOneSide(t *testing.T) {
	tests := []struct {
		desc, policy string
		format       convert.Format
		body, want   string
	}{
		{"prepend only", "prompts: {prepend: [{role: system, content: be brief}]}", convert.Chat,
			`{"messages":[{"role":"user","content":"q"}]}`,
			`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"q"}]}`},
		{"append only", "prompts: {append: [{role: user, content: \"say \\\"hi\\\"\"}]}", convert.Chat,
			`{"messages":[{"role":"user","content":"q"}]}`,
			`{"messages":[{"role":"user","content":"q"},{"role":"user","content":"say \"hi\""}]}`},
		{"system only, Messages: the messages stay", "prompts: {append: [{role: system, content: s}]}", convert.Messages,
			`{"messages":[{"role":"user","content":"q"}],"system":"x"}`,
			`{"messages":[{"role":"user","content":"q"}],"system":[{"type":"text","text":"x"},{"type":"text","text":"s"}]}`},
		{"developer and other roles, Responses", "prompts: {prepend: [{role: developer, content: d}, {role: tool, content: t}]}", convert.Responses,
			`{"input":[]}`,
			`{"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"d"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"t"}]}]}`},
		{"every conversation member of a repeated name", "prompts: {append: [{role: user, content: a}]}", convert.Chat,
			`{"messages":[],"messages":[{"role":"user","content":"q"}]}`,
			`{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"q"},{"role":"user","content":"a"}]}`},
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

// TestEnrichmentWithMasks: a string turned into items keeps its mask.
func TestEnrichmentWithMasks(t *testing.T) {
	p := mustPolicy(t, `prompts: {prepend: [{role: system, content: s}]}
promptGuard: {request: [{regex: {rules: [{builtin: ssn}]}}]}
`)
	tests := []struct {
		desc       string
		format     convert.Format
		body, want string
	}{
		{"responses text input", convert.Responses,
			`{"input":"ssn 123-45-6789"}`,
			`{"input":[{"type":"message","role":"system","content":[{"type":"input_text","text":"s"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"ssn <SSN>"}]}]}`},
		{"messages string system prompt", convert.Messages,
			`{"system":"ssn 123-45-6789","messages":[{"role":"user","content":"and 987-65-4321"}]}`,
			`{"system":[{"type":"text","text":"s"},{"type":"text","text":"ssn <SSN>"}],"messages":[{"role":"user","content":"and <SSN>"}]}`},
		{"responses instructions", convert.Responses,
			`{"instructions":"ssn 123-45-6789","input":[]}`,
			`{"instructions":"ssn <SSN>","input":[{"type":"message","role":"system","content":[{"type":"input_text","text":"s"}]}]}`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := apply(t, p, tc.body, tc.format, nil); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
