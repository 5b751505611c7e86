package aipolicy

import (
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm/tokens"
)

// TestPromptText: the system prompt and message texts, unescaped, one per
// line; tool traffic left out.
func TestPromptText(t *testing.T) {
	tests := []struct {
		desc   string
		format convert.Format
		body   string
		want   string
	}{
		{"chat", convert.Chat,
			`{"messages":[{"role":"system","content":"be \"brief\""},{"role":"user","content":[{"type":"text","text":"a\u00e9"},{"type":"text","text":"b"}]},{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]},{"role":"tool","content":"out"}]}`,
			"be \"brief\"\naé\nb"},
		{"messages", convert.Messages,
			`{"system":"s","messages":[{"role":"user","content":"q"},{"role":"user","content":[{"type":"tool_result","content":"out"},{"type":"text","text":"t"}]}]}`,
			"s\nq\nt"},
		{"responses", convert.Responses,
			`{"instructions":"i","input":[{"role":"user","content":"q"},{"type":"function_call_output","output":"o"}]}`,
			"i\nq"},
		{"responses text input", convert.Responses, `{"input":"just this"}`, "just this"},
		{"not JSON", convert.Chat, `{"messages":[{"content":"x`, ""},
		{"other formats", convert.Gemini, `{"contents":[{"parts":[{"text":"x"}]}]}`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := string(promptText([]byte("pre:"), []byte(tc.body), tc.format)); got != "pre:"+tc.want {
				t.Errorf("got %q, want %q", got, "pre:"+tc.want)
			}
		})
	}
}

// TestPromptTokens: agentgateway's formula over each message's text (4 a
// message, 3 for the answer), the same whether the count cache knows the
// texts or not; a message's texts (content parts) count as one.
func TestPromptTokens(t *testing.T) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) // cached: over 64 bytes
	tests := []struct {
		desc     string
		format   convert.Format
		body     string
		messages []string // the texts, one per message
	}{
		{"chat", convert.Chat,
			`{"messages":[{"role":"system","content":"be \"brief\""},{"role":"user","content":[{"type":"text","text":"a\u00e9"},{"type":"text","text":"b"}]},{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]},{"role":"tool","content":"out"}]}`,
			[]string{`be "brief"`, "aé\nb"}},
		{"chat, long history", convert.Chat,
			`{"messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"` + long + `1"},{"role":"assistant","content":"` + long + `2"}]}`,
			[]string{long, long + "1", long + "2"}},
		{"long parts joined", convert.Messages,
			`{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"text","text":"` + long + `"}]}]}`,
			[]string{"s", long + "\n" + long}},
		{"responses text input", convert.Responses, `{"input":"just this"}`, []string{"just this"}},
		{"no messages", convert.Chat, `{"messages":[]}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, e := range []tokens.Encoding{tokens.O200kBase, tokens.Cl100kBase} {
				want := 3
				for _, m := range tc.messages {
					want += 4 + tokens.CountEncoding(e, []byte(m))
				}
				var scratch []byte
				for round := range 2 { // the second finds the long texts cached
					var got int
					got, scratch = PromptTokens(scratch, []byte(tc.body), tc.format, e)
					if got != want {
						t.Errorf("%v round %d: %d tokens, want %d", e, round, got, want)
					}
				}
			}
		})
	}
}

func TestModel(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"model":"gpt-4o","messages":[]}`, "gpt-4o"},
		{`{"messages":[{"model":"inner"}]}`, ""},
		{`{"model":"a","model":"b"}`, "b"},
		{`{"model":"a\u002db"}`, "a-b"},
		{`{"model":null}`, ""},
		{`{"model":""}`, ""},
		{`{"contents":[]}`, ""},
		{`[]`, ""},
		{``, ""},
		{`{"model":"x`, ""},
	}
	for _, tc := range tests {
		if got := Model([]byte(tc.body)); got != tc.want {
			t.Errorf("Model(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}
