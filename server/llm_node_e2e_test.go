package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/backend/mcp/mcptest/nodemcp"
)

// TestLLMNodeSDKs: the official TypeScript SDKs (openai, @anthropic-ai/sdk
// from npm; testdata/node/llm-client.mjs) as clients of the gateway, in
// front of each provider kind: chat completions, messages and responses,
// plain, streamed and with a tool call, so each format both as it is and
// translated.
func TestLLMNodeSDKs(t *testing.T) {
	nodemcp.Require(t)
	const answer = "Paris is the capital."
	usage := llmtest.Usage{InputTokens: 12, OutputTokens: 6}
	tool := llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: usage}
	text := llmtest.Reply{Text: answer, Usage: usage}
	// The script's steps, in order, and the answer each gets.
	steps := []struct {
		name  string
		reply llmtest.Reply
		want  map[string]any
	}{
		{"chat", text, map[string]any{"text": answer, "usage": 18.0, "finish": "stop"}},
		{"chatStream", text, map[string]any{"text": answer, "usage": 18.0}},
		{"chatTool", tool, map[string]any{"name": "get_weather", "args": map[string]any{"city": "Paris"}, "finish": "tool_calls"}},
		{"messages", text, map[string]any{"text": answer, "usage": 18.0, "stop": "end_turn"}},
		{"messagesStream", text, map[string]any{"text": answer, "usage": 18.0, "stop": "end_turn"}},
		{"messagesTool", tool, map[string]any{"name": "get_weather", "args": map[string]any{"city": "Paris"}, "stop": "tool_use"}},
		{"responses", text, map[string]any{"text": answer, "usage": 18.0}},
		{"responsesStream", text, map[string]any{"text": answer, "usage": 18.0}},
	}
	for _, p := range translateProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			up, provider, auth := p.start(t)
			for _, s := range steps {
				up.Enqueue(s.reply)
			}
			tg := startGateway(t, llmConfig(provider, up.Addr(), auth, ""), nil)
			cfg, _ := json.Marshal(map[string]string{"base": tg.url(8080), "model": p.model})
			stdout, err := nodemcp.Script(llmCtx(t), t, "llm-client.mjs", string(cfg))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]map[string]any
			if err := json.Unmarshal(stdout, &got); err != nil {
				t.Fatalf("%v: %s", err, stdout)
			}
			for _, s := range steps {
				if !reflect.DeepEqual(got[s.name], s.want) {
					t.Errorf("%s: got %v, want %v", s.name, got[s.name], s.want)
				}
			}
			if n := len(up.Requests()); n != len(steps) {
				t.Errorf("the provider got %d requests, want %d", n, len(steps))
			}
		})
	}
}
