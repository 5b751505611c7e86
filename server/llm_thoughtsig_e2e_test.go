package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMGeminiThoughtSignatures: a Gemini 3 model's function call comes
// with a thoughtSignature it wants back with the call; a Chat, Messages or
// Responses client, whole or streamed, of Gemini or Vertex, gets it in its
// own format and sends it back with the calls, so the next turn is served.
// The gateway dropped it: the next turn was Gemini's 400 "Function call
// is missing a thought_signature in functionCall parts".
func TestLLMGeminiThoughtSignatures(t *testing.T) {
	const sig = "U0lHLU9ORQ=="
	calls := llmtest.Reply{ToolCalls: []llmtest.ToolCall{
		{Name: "get_weather", Arguments: `{"city":"Paris"}`, ThoughtSignature: sig},
		{Name: "get_weather", Arguments: `{"city":"Oslo"}`},
	}}
	const answer = "Sunny in both."

	type emulator struct {
		srv  *llmtest.Server
		tg   *testGateway
		last func() llmtest.Request
	}
	providers := []struct {
		name  string
		start func(t *testing.T) emulator
	}{
		{"gemini", func(t *testing.T) emulator {
			g := llmtest.NewGemini(t)
			g.RequireThoughtSignatures()
			tg := startGateway(t, llmConfig(`gemini: {}`, g.Addr(), `backendAuth: {key: `+g.APIKey+`}`, ""), nil)
			return emulator{g.Server, tg, g.Last}
		}},
		{"vertex", func(t *testing.T) emulator {
			v := llmtest.NewVertex(t)
			v.RequireThoughtSignatures()
			provider := `vertex: {projectId: ` + v.Project + `, region: ` + v.Location + `}`
			auth := `backendAuth: {gcp: {credential: {file: ` + v.ServiceAccountFile() + `}}}`
			tg := startGateway(t, llmConfig(provider, v.Addr(), auth, ""), nil)
			return emulator{v.Server, tg, v.Last}
		}},
	}
	clients := []struct {
		name string
		// turns asks for the weather, then sends the calls' results back
		// with the history as the client's format has it; it returns the
		// second answer's text.
		turns func(t *testing.T, tg *testGateway, stream bool) string
	}{
		{"chat", chatSigTurns},
		{"messages", messagesSigTurns},
		{"responses", responsesSigTurns},
	}
	for _, p := range providers {
		e := p.start(t)
		for _, c := range clients {
			for _, stream := range []bool{false, true} {
				name := p.name + "/" + c.name
				if stream {
					name += "/stream"
				}
				t.Run(name, func(t *testing.T) {
					e.srv.Enqueue(calls)
					e.srv.SetDefault(llmtest.Reply{Text: answer})
					if got := c.turns(t, e.tg, stream); got != answer {
						t.Errorf("second answer %q, want %q", got, answer)
					}
					// The provider got the signature back on the first call
					// only, as it gave it.
					var body struct {
						Contents []struct {
							Role  string
							Parts []struct {
								FunctionCall     *struct{ Name string }
								ThoughtSignature string
							}
						}
					}
					if err := json.Unmarshal(e.last().Body, &body); err != nil {
						t.Fatal(err)
					}
					var got []string
					for _, c := range body.Contents {
						for _, part := range c.Parts {
							if part.FunctionCall != nil {
								got = append(got, part.ThoughtSignature)
							}
						}
					}
					if len(got) != 2 || got[0] != sig || got[1] != "" {
						t.Errorf("the calls' signatures sent back: %q, want [%q \"\"]", got, sig)
					}
				})
			}
		}
	}
}

const sigQuestion = "Weather in Paris and Oslo?"

// postSig posts a JSON body to the gateway's path and returns the answer,
// or the stream's data lines.
func postSig(t *testing.T, tg *testGateway, path string, body any, stream bool) (whole map[string]any, events []map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(tg.url(8080)+path, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e any
		_ = json.NewDecoder(resp.Body).Decode(&e)
		t.Fatalf("%s: %d %v", path, resp.StatusCode, e)
	}
	if !stream {
		if err := json.NewDecoder(resp.Body).Decode(&whole); err != nil {
			t.Fatal(err)
		}
		return whole, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		events = append(events, ev)
	}
	return nil, events
}

func chatSigTurns(t *testing.T, tg *testGateway, stream bool) string {
	tools := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	messages := []any{map[string]any{"role": "user", "content": sigQuestion}}
	whole, events := postSig(t, tg, "/v1/chat/completions", map[string]any{
		"model": "gemini-3-flash-preview", "stream": stream, "messages": messages, "tools": tools}, stream)
	var assistant map[string]any
	if !stream {
		assistant = whole["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	} else {
		// The calls as their chunks build them, each member kept.
		var toolCalls []any
		for _, ev := range events {
			choices, _ := ev["choices"].([]any)
			if len(choices) == 0 {
				continue
			}
			delta, _ := choices[0].(map[string]any)["delta"].(map[string]any)
			tcs, _ := delta["tool_calls"].([]any)
			for _, tc := range tcs {
				tc := tc.(map[string]any)
				i := int(tc["index"].(float64))
				for len(toolCalls) <= i {
					toolCalls = append(toolCalls, map[string]any{"function": map[string]any{"arguments": ""}})
				}
				call := toolCalls[i].(map[string]any)
				fn := call["function"].(map[string]any)
				for k, v := range tc {
					switch k {
					case "index":
					case "function":
						f := v.(map[string]any)
						if name, ok := f["name"]; ok {
							fn["name"] = name
						}
						fn["arguments"] = fn["arguments"].(string) + f["arguments"].(string)
					default:
						call[k] = v
					}
				}
			}
		}
		assistant = map[string]any{"role": "assistant", "content": nil, "tool_calls": toolCalls}
	}
	messages = append(messages, assistant)
	for _, tc := range assistant["tool_calls"].([]any) {
		messages = append(messages, map[string]any{"role": "tool", "tool_call_id": tc.(map[string]any)["id"], "content": "sunny"})
	}
	whole, events = postSig(t, tg, "/v1/chat/completions", map[string]any{
		"model": "gemini-3-flash-preview", "stream": stream, "messages": messages, "tools": tools}, stream)
	if !stream {
		return whole["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	}
	var text strings.Builder
	for _, ev := range events {
		if choices, _ := ev["choices"].([]any); len(choices) > 0 {
			if s, ok := choices[0].(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
				text.WriteString(s)
			}
		}
	}
	return text.String()
}

func responsesSigTurns(t *testing.T, tg *testGateway, stream bool) string {
	tools := []any{map[string]any{"type": "function", "name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}
	output := func(whole map[string]any, events []map[string]any) []any {
		if !stream {
			return whole["output"].([]any)
		}
		for _, ev := range events {
			if ev["type"] == "response.completed" {
				return ev["response"].(map[string]any)["output"].([]any)
			}
		}
		t.Fatal("no response.completed event")
		return nil
	}
	input := []any{map[string]any{"role": "user", "content": sigQuestion}}
	out := output(postSig(t, tg, "/v1/responses", map[string]any{
		"model": "gemini-3-flash-preview", "stream": stream, "input": input, "tools": tools}, stream))
	input = append(input, out...)
	for _, it := range out {
		if it := it.(map[string]any); it["type"] == "function_call" {
			input = append(input, map[string]any{"type": "function_call_output", "call_id": it["call_id"], "output": "sunny"})
		}
	}
	out = output(postSig(t, tg, "/v1/responses", map[string]any{
		"model": "gemini-3-flash-preview", "stream": stream, "input": input, "tools": tools}, stream))
	var text strings.Builder
	for _, it := range out {
		if it := it.(map[string]any); it["type"] == "message" {
			for _, c := range it["content"].([]any) {
				text.WriteString(c.(map[string]any)["text"].(string))
			}
		}
	}
	return text.String()
}

// messagesSigTurns is an Anthropic SDK client's: the answer goes back as
// the SDK makes it a parameter (Message.ToParam, after Accumulate for a
// stream).
func messagesSigTurns(t *testing.T, tg *testGateway, stream bool) string {
	c := anthropicVia(tg)
	params := anthropic.MessageNewParams{
		Model: "gemini-3-flash-preview", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(sigQuestion))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
	}
	ask := func() anthropic.Message {
		if !stream {
			msg, err := c.Messages.New(llmCtx(t), params)
			if err != nil {
				t.Fatalf("messages: %v", err)
			}
			return *msg
		}
		s := c.Messages.NewStreaming(llmCtx(t), params)
		var acc anthropic.Message
		for s.Next() {
			if err := acc.Accumulate(s.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("messages stream: %v", err)
		}
		return acc
	}
	msg := ask()
	params.Messages = append(params.Messages, msg.ToParam())
	var results []anthropic.ContentBlockParamUnion
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			results = append(results, anthropic.NewToolResultBlock(b.ID, "sunny", false))
		}
	}
	params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
	msg = ask()
	var text strings.Builder
	for _, b := range msg.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	return text.String()
}
