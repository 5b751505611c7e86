package aipolicy

import (
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
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
			if got := string(PromptText([]byte("pre:"), []byte(tc.body), tc.format)); got != "pre:"+tc.want {
				t.Errorf("got %q, want %q", got, "pre:"+tc.want)
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
