package convert

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/guard"
)

// chatRequest4K is a 4 KB Chat Completions request: a system prompt, a
// multi-turn conversation with a tool call and its result, two tools.
func chatRequest4K(tb testing.TB) []byte {
	tb.Helper()
	msgs := []any{map[string]any{"role": "system", "content": "You are a helpful assistant. " + strings.Repeat("Answer briefly. ", 10)}}
	for len(msgs) < 17 {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": "Question " + strings.Repeat("about the gateway and its providers ", 5)},
			map[string]any{"role": "assistant", "content": "Answer " + strings.Repeat("with some detail on routing ", 5)})
	}
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "18C and sunny"},
		map[string]any{"role": "user", "content": "Thanks, and tomorrow?"})
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}, "required": []string{"city"}}
	req := map[string]any{
		"model": "gpt-4o", "messages": msgs, "max_tokens": 512, "temperature": 0.3, "stream": true,
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather now", "parameters": schema}},
			map[string]any{"type": "function", "function": map[string]any{"name": "get_forecast", "description": "Weather later", "parameters": schema}},
		},
	}
	b, err := json.Marshal(req)
	if err != nil {
		tb.Fatal(err)
	}
	if len(b) < 3900 || len(b) > 4300 {
		tb.Fatalf("request is %d bytes, want about 4 KB", len(b))
	}
	return b
}

func benchRequest(b *testing.B, provider Format) {
	body := chatRequest4K(b)
	dst := make([]byte, 0, 8<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, _, err = Request(dst[:0], Chat, provider, body, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRequestChatToChat(b *testing.B)     { benchRequest(b, Chat) }
func BenchmarkRequestChatToMessages(b *testing.B) { benchRequest(b, Messages) }
func BenchmarkRequestChatToBedrock(b *testing.B)  { benchRequest(b, Bedrock) }
func BenchmarkRequestChatToGemini(b *testing.B)   { benchRequest(b, Gemini) }

// BenchmarkRequestMessagesToChat: the 4 KB conversation as a Messages
// client sends it (tool results as blocks) to a Chat provider.
func BenchmarkRequestMessagesToChat(b *testing.B) {
	body, _, err := Request(nil, Chat, Messages, chatRequest4K(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, 8<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if dst, _, err = Request(dst[:0], Messages, Chat, body, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// The error path: a same-format error in the client's shape is checked and
// copied; one in another shape is translated.
func benchProviderError(b *testing.B, body string) {
	dst := make([]byte, 0, 1024)
	info := RequestInfo{Client: Messages, Provider: Messages}
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = ProviderError(dst[:0], info, 429, []byte(body))
	}
}

func BenchmarkProviderErrorSameShape(b *testing.B) {
	benchProviderError(b, `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`)
}

func BenchmarkProviderErrorOtherShape(b *testing.B) {
	benchProviderError(b, `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model","status":"RESOURCE_EXHAUSTED"}}`)
}

func TestRequestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	body := chatRequest4K(t)
	dst := make([]byte, 0, 8<<10)
	for _, provider := range []Format{Messages, Bedrock, Gemini} {
		Request(dst[:0], Chat, provider, body, nil)
		n := testing.AllocsPerRun(100, func() {
			dst, _, _ = Request(dst[:0], Chat, provider, body, nil)
		})
		if n >= 20 {
			t.Errorf("chat -> %v: %.0f allocations per 4 KB request, want < 20", provider, n)
		}
	}
}

// benchChunk feeds one provider event over and over, after a prelude that
// opened a text block.
func benchChunk(b *testing.B, provider, client Format, prelude, chunk []byte) {
	s := NewStream(RequestInfo{Client: client, Provider: provider, Model: "m", IncludeUsage: true})
	out, err := s.Feed(nil, prelude)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err = s.Feed(out[:0], chunk); err != nil {
			b.Fatal(err)
		}
	}
	if len(out) == 0 {
		b.Fatal("no output")
	}
}

const (
	chatPrelude = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
	chatChunk   = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the gateway"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	anPrelude   = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	anChunk = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the gateway\"}}\n\n"
)

func BenchmarkChunkChatToChat(b *testing.B) {
	benchChunk(b, Chat, Chat, []byte(chatPrelude), []byte(chatChunk))
}

func BenchmarkChunkChatToMessages(b *testing.B) {
	benchChunk(b, Chat, Messages, []byte(chatPrelude), []byte(chatChunk))
}

func BenchmarkChunkMessagesToChat(b *testing.B) {
	benchChunk(b, Messages, Chat, []byte(anPrelude), []byte(anChunk))
}

func BenchmarkChunkBedrockToChat(b *testing.B) {
	prelude := bedrockFixture(b, []byte(`event messageStart {"role":"assistant"}`+"\n"+`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcdefgh"}`))
	chunk := bedrockFixture(b, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":" the gateway"},"p":"abcdefghijklmnopqrs"}`))
	benchChunk(b, Bedrock, Chat, prelude, chunk)
}

func BenchmarkChunkBedrockToResponses(b *testing.B) {
	prelude := bedrockFixture(b, []byte(`event messageStart {"role":"assistant"}`+"\n"+`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcdefgh"}`))
	chunk := bedrockFixture(b, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":" the gateway"},"p":"abcdefghijklmnopqrs"}`))
	benchChunk(b, Bedrock, Responses, prelude, chunk)
}

type chunkCase struct {
	desc             string
	provider, client Format
	prelude, chunk   []byte
}

const (
	rsPrelude = "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"gpt-5\",\"output\":[]}}\n\n" +
		"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"sequence_number\":1,\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":\"assistant\"}}\n\n" +
		"event: response.content_part.added\ndata: {\"type\":\"response.content_part.added\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"\"}}\n\n"
	rsChunk = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\" the gateway\",\"logprobs\":[],\"obfuscation\":\"abc\"}\n\n"
)

// maskedChunkCases are one text chunk per client format, translated and
// passed through, fed again and again after a prelude that opened a text.
func maskedChunkCases(tb testing.TB) []chunkCase {
	bedrockPrelude := bedrockFixture(tb, []byte(`event messageStart {"role":"assistant"}`+"\n"+`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcdefgh"}`))
	bedrockChunk := bedrockFixture(tb, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":" the gateway"},"p":"abcdefghijklmnopqrs"}`))
	return []chunkCase{
		{desc: "ChatToChat", provider: Chat, client: Chat, prelude: []byte(chatPrelude), chunk: []byte(chatChunk)},
		{desc: "ChatToMessages", provider: Chat, client: Messages, prelude: []byte(chatPrelude), chunk: []byte(chatChunk)},
		{desc: "MessagesToChat", provider: Messages, client: Chat, prelude: []byte(anPrelude), chunk: []byte(anChunk)},
		{desc: "MessagesToMessages", provider: Messages, client: Messages, prelude: []byte(anPrelude), chunk: []byte(anChunk)},
		{desc: "BedrockToChat", provider: Bedrock, client: Chat, prelude: bedrockPrelude, chunk: bedrockChunk},
		{desc: "BedrockToResponses", provider: Bedrock, client: Responses, prelude: bedrockPrelude, chunk: bedrockChunk},
		{desc: "ResponsesToResponses", provider: Responses, client: Responses, prelude: []byte(rsPrelude), chunk: []byte(rsChunk)},
	}
}

// BenchmarkChunkMasked is BenchmarkChunk* with a response guard of the five
// builtins: clean text, and text with an email in every chunk.
func BenchmarkChunkMasked(b *testing.B) {
	g := testGuard(b)
	for _, tc := range maskedChunkCases(b) {
		b.Run(tc.desc+"/clean", func(b *testing.B) { benchMaskedChunk(b, g, tc, tc.chunk) })
		email := bytes.Replace(tc.chunk, []byte(" the gateway"), []byte(" mail a@b.co"), 1)
		if tc.provider == Bedrock {
			email = bedrockFixture(b, []byte(`event contentBlockDelta {"contentBlockIndex":0,"delta":{"text":" mail a@b.co"},"p":"abcdefghijklmnopqrs"}`))
		}
		b.Run(tc.desc+"/email", func(b *testing.B) { benchMaskedChunk(b, g, tc, email) })
	}
}

func benchMaskedChunk(b *testing.B, g *guard.Guard, tc chunkCase, chunk []byte) {
	s := NewStream(RequestInfo{Client: tc.client, Provider: tc.provider, Model: "m", IncludeUsage: true, Mask: g})
	out, err := s.Feed(nil, tc.prelude)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if out, err = s.Feed(out[:0], chunk); err != nil {
			b.Fatal(err)
		}
	}
	if len(out) == 0 {
		b.Fatal("no output")
	}
}

// BenchmarkResponseMasked is a whole 1 KB answer, translated and passed
// through, without and with a response guard.
func BenchmarkResponseMasked(b *testing.B) {
	g := testGuard(b)
	text := strings.Repeat("The gateway routes the request to its provider. ", 20) + "Mail a@b.co or call (555) 123-4567."
	body, err := json.Marshal(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 200, "total_tokens": 210},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, client := range []Format{Chat, Messages} {
		for _, mask := range []struct {
			name string
			g    *guard.Guard
		}{{"plain", nil}, {"masked", g}} {
			b.Run("ChatTo"+strings.ToUpper(client.String()[:1])+client.String()[1:]+"/"+mask.name, func(b *testing.B) {
				info := RequestInfo{Client: client, Provider: Chat, Model: "m", Mask: mask.g}
				dst := make([]byte, 0, 4096)
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if dst, _, err = Response(dst[:0], body, info); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkResponseChatToChat: an answer in the client's own format, read
// for its usage only.
func BenchmarkResponseChatToChat(b *testing.B) {
	body := []byte(`{"id":"chatcmpl-bench","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"The benchmark answer, a few sentences long so that skipping it is measured. The benchmark answer, a few sentences long so that skipping it is measured."},"finish_reason":"stop"}],"usage":{"prompt_tokens":250,"completion_tokens":5,"total_tokens":255},"system_fingerprint":"fp_bench"}`)
	info := RequestInfo{Client: Chat, Provider: Chat}
	dst := make([]byte, 0, 1<<10)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		out, u, err := Response(dst[:0], body, info)
		if err != nil || u.InputTokens != 250 || len(out) != len(body) {
			b.Fatal(err, u)
		}
	}
}
