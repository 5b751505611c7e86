package convert

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestResponseGolden(t *testing.T) {
	cases := []struct{ desc, file string }{
		{desc: "chat: text with cached tokens", file: "text.chat.json"},
		{desc: "chat: two tool calls, one without arguments", file: "tools.chat.json"},
		{desc: "chat: an empty content beside tool calls makes no text block", file: "tools-empty.chat.json"},
		{desc: "chat: cut at max tokens, with reasoning", file: "length.chat.json"},
		{desc: "messages: thinking, text, cache usage", file: "thinking.messages.json"},
		{desc: "messages: tool use; server tool block dropped", file: "tools.messages.json"},
		{desc: "messages: stop sequence", file: "stop-sequence.messages.json"},
		{desc: "gemini: thought and text parts, cached and thought tokens", file: "text.gemini.json"},
		{desc: "gemini: function call without id", file: "call.gemini.json"},
		{desc: "gemini: empty text parts around a function call make no block", file: "call-empty.gemini.json"},
		{desc: "gemini: blocked by safety", file: "safety.gemini.json"},
		{desc: "gemini: a text part's signature, after a thought without one", file: "think-sig.gemini.json"},
		{desc: "gemini: a signed thought, text, parallel calls the first signed", file: "calls-sig.gemini.json"},
		{desc: "bedrock: max tokens, cache read and write", file: "text.bedrock.json"},
		{desc: "bedrock: reasoning, text and tool use", file: "tools.bedrock.json"},
		{desc: "bedrock: guardrail intervened", file: "guardrail.bedrock.json"},
		{desc: "bedrock: an empty text block after a tool use makes none", file: "tool-empty.bedrock.json"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			in := readFile(t, filepath.Join("testdata/responses", tc.file))
			base := strings.TrimSuffix(tc.file, ".json")
			provider, _ := ParseFormat(base[strings.LastIndexByte(base, '.')+1:])
			for _, client := range clientFormats {
				if client == provider {
					out, usage, err := Response(nil, in, RequestInfo{Client: client, Provider: provider})
					if err != nil || string(out) != string(in) {
						t.Errorf("passthrough to %v changed the body (err %v)", client, err)
					}
					_ = usage
					continue
				}
				resetIDs()
				info := RequestInfo{Client: client, Provider: provider, Model: "requested-model"}
				out, usage, err := Response(nil, in, info)
				var got []byte
				if err != nil {
					got = errorGolden(err)
				} else {
					got = indent(t, out)
					got = append(got, usageLine(usage)...)
				}
				checkGolden(t, filepath.Join("testdata/responses", base+"."+client.String()+".golden"), got)
			}
		})
	}
}

func usageLine(u Usage) string {
	return "// usage: input=" + itoa(int(u.InputTokens)) + " output=" + itoa(int(u.OutputTokens)) +
		" cached=" + itoa(int(u.CachedInputTokens)) + " cache_write=" + itoa(int(u.CacheWriteInputTokens)) +
		" reasoning=" + itoa(int(u.ReasoningTokens)) + "\n"
}
