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

// TestPromptTokens: OpenAI's formula over each message's text (4 a
// message, 3 for the answer), the same whether the count cache knows the
// texts or not; a message's texts (content parts) count as one; tool
// results and tool-call arguments are texts too, and tool definitions count
// as their JSON text.
func TestPromptTokens(t *testing.T) {
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) // cached: over 64 bytes
	const chatTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	const anthropicTools = `[{"name":"get_weather","description":"Weather for a city","input_schema":{"type":"object"}}]`
	tests := []struct {
		desc     string
		format   convert.Format
		body     string
		messages []string // the texts, one per message
		tools    []string // the tool definitions' JSON texts
	}{
		{"chat", convert.Chat,
			`{"messages":[{"role":"system","content":"be \"brief\""},{"role":"user","content":[{"type":"text","text":"a\u00e9"},{"type":"text","text":"b"}]},{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","content":"` + long + `"}]}`,
			[]string{`be "brief"`, "aé\nb", `{"city":"Paris"}`, long}, nil},
		{"chat tools and legacy functions", convert.Chat,
			`{"tools":` + chatTools + `,"functions":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`,
			[]string{"hi"}, []string{chatTools, `[{"name":"f"}]`}},
		{"messages tool use and result", convert.Messages,
			`{"tools":` + anthropicTools + `,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"` + long + `"}]}]}`,
			[]string{"Paris", long}, []string{anthropicTools}},
		{"responses tool items", convert.Responses,
			`{"tools":[{"type":"function","name":"f"}],"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"` + long + `"}]}`,
			[]string{"{}", long}, []string{`[{"type":"function","name":"f"}]`}},
		{"tools member of another format ignored", convert.Chat, `{"messages":[],"tools":{"not":"a list"}}`, nil, nil},
		{"chat, long history", convert.Chat,
			`{"messages":[{"role":"system","content":"` + long + `"},{"role":"user","content":"` + long + `1"},{"role":"assistant","content":"` + long + `2"}]}`,
			[]string{long, long + "1", long + "2"}, nil},
		{"long parts joined", convert.Messages,
			`{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"` + long + `"},{"type":"text","text":"` + long + `"}]}]}`,
			[]string{"s", long + "\n" + long}, nil},
		{"responses text input", convert.Responses, `{"input":"just this"}`, []string{"just this"}, nil},
		{"no messages", convert.Chat, `{"messages":[]}`, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			for _, e := range []tokens.Encoding{tokens.O200kBase, tokens.Cl100kBase} {
				want := 3
				for _, m := range tc.messages {
					want += 4 + tokens.CountEncoding(e, []byte(m))
				}
				for _, d := range tc.tools {
					want += tokens.CountEncoding(e, []byte(d))
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
