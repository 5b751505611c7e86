package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// maskThinkingProvider answers every request with reasoning, text and a
// send_mail tool call, each holding an e-mail address and a card number,
// whole or streamed with the address and the card split across deltas:
// an Anthropic provider (thinking blocks, input_json_delta) or a Chat one
// (reasoning_content, tool_calls arguments in pieces).
func maskThinkingProvider(t *testing.T, format string) string {
	const thinking = "Mail bob@example.com, card 4111 1111 1111 1111."
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		stream := strings.Contains(string(body), `"stream":true`)
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		switch {
		case format == "anthropic" && !stream:
			fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[`+
				`{"type":"thinking","thinking":%q,"signature":"c2ln"},`+
				`{"type":"text","text":"Sending to bob@example.com."},`+
				`{"type":"tool_use","id":"toolu_1","name":"send_mail","input":{"to":"bob@example.com","card":"4111 1111 1111 1111"}}],`+
				`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7}}`, thinking)
		case format == "anthropic":
			ev := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
			delta := func(i int, typ, field, text string) {
				ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":%q,%q:%q}}`, i, typ, field, text))
			}
			ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}`)
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
			for _, p := range []string{"Mail bob@exa", "mple.com, card 4111 1111 ", "1111 1111."} {
				delta(0, "thinking_delta", "thinking", p)
			}
			delta(0, "signature_delta", "signature", "c2ln")
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`)
			for _, p := range []string{"Sending to bob@exa", "mple.com."} {
				delta(1, "text_delta", "text", p)
			}
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
			ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"send_mail","input":{}}}`)
			for _, p := range []string{`{"to":"bob@exa`, `mple.com","card":"4111 1111`, ` 1111 1111"}`} {
				delta(2, "input_json_delta", "partial_json", p)
			}
			ev("content_block_stop", `{"type":"content_block_stop","index":2}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`)
			ev("message_stop", `{"type":"message_stop"}`)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			out := fmt.Sprintf(`[{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":%q}]},`+
				`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"text":"Sending to bob@example.com."}]},`+
				`{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"send_mail","arguments":"{\"to\":\"bob@example.com\",\"card\":\"4111 1111 1111 1111\"}"}]`, thinking)
			resp := func(status, output string) string {
				return `{"id":"resp_1","object":"response","created_at":1,"status":"` + status + `","model":"m","output":` + output +
					`,"usage":{"input_tokens":5,"output_tokens":7,"total_tokens":12}}`
			}
			if !stream {
				io.WriteString(w, resp("completed", out))
				return
			}
			seq := 0
			ev := func(typ, members string) {
				fmt.Fprintf(w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d,%s}\n\n", typ, typ, seq, members)
				seq++
			}
			ev("response.created", `"response":`+resp("in_progress", "[]"))
			ev("response.output_item.added", `"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`)
			for _, p := range []string{"Mail bob@exa", "mple.com, card 4111 1111 ", "1111 1111."} {
				ev("response.reasoning_summary_text.delta", fmt.Sprintf(`"item_id":"rs_1","output_index":0,"summary_index":0,"delta":%q`, p))
			}
			ev("response.reasoning_summary_text.done", fmt.Sprintf(`"item_id":"rs_1","output_index":0,"summary_index":0,"text":%q`, thinking))
			ev("response.output_item.done", fmt.Sprintf(`"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":%q}]}`, thinking))
			ev("response.output_item.added", `"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"send_mail","arguments":""}`)
			for _, p := range []string{`{"to":"bob@exa`, `mple.com","card":"4111 1111`, ` 1111 1111"}`} {
				ev("response.function_call_arguments.delta", fmt.Sprintf(`"item_id":"fc_1","output_index":1,"delta":%q`, p))
			}
			args := `{"to":"bob@example.com","card":"4111 1111 1111 1111"}`
			ev("response.function_call_arguments.done", fmt.Sprintf(`"item_id":"fc_1","output_index":1,"arguments":%q`, args))
			ev("response.output_item.done", fmt.Sprintf(`"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"send_mail","arguments":%q}`, args))
			ev("response.completed", `"response":`+resp("completed", out))
		case !stream:
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant",`+
				`"reasoning_content":%q,"content":"Sending to bob@example.com.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"send_mail",`+
				`"arguments":"{\"to\":\"bob@example.com\",\"card\":\"4111 1111 1111 1111\"}"}}]},"finish_reason":"tool_calls"}],`+
				`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`, thinking)
		default:
			chunk := func(delta string, finish string) {
				fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, finish)
			}
			for _, p := range []string{"Mail bob@exa", "mple.com, card 4111 1111 ", "1111 1111."} {
				chunk(fmt.Sprintf(`{"reasoning_content":%q}`, p), "null")
			}
			for _, p := range []string{"Sending to bob@exa", "mple.com."} {
				chunk(fmt.Sprintf(`{"content":%q}`, p), "null")
			}
			chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"send_mail","arguments":""}}]}`, "null")
			for _, p := range []string{`{"to":"bob@exa`, `mple.com","card":"4111 1111`, ` 1111 1111"}`} {
				chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"function":{"arguments":%q}}]}`, p), "null")
			}
			chunk(`{}`, `"tool_calls"`)
			io.WriteString(w, "data: [DONE]\n\n")
		}
	}))
	t.Cleanup(provider.Close)
	return strings.TrimPrefix(provider.URL, "http://")
}

// maskedAnswer is what a client read: every raw JSON document it was sent
// (responses, events), its reasoning and its tool call's arguments.
type maskedAnswer struct {
	raw       []string
	reasoning string
	args      string
}

// TestLLMResponseGuardMasksThinkingAndToolCalls: a response regex guard
// masks the model's reasoning and its tool calls' arguments as it masks
// its text, in every client format, whole and streamed, the same format as
// the provider's or translated; the arguments stay JSON. They used to
// reach the client unmasked.
func TestLLMResponseGuardMasksThinkingAndToolCalls(t *testing.T) {
	policies := `
promptGuard:
  response:
  - regex: {rules: [{builtin: creditCard}, {builtin: email}]}
`
	for _, provider := range []string{"anthropic", "openAI"} {
		addr := maskThinkingProvider(t, provider)
		tg := startGateway(t, llmConfig(provider+`: {}`, addr, `backendAuth: {key: k}`, policies), nil)
		oa, an := openaiVia(tg), anthropicVia(tg)
		for _, client := range []string{"messages", "chat", "responses"} {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%v", provider, client, stream), func(t *testing.T) {
					var got maskedAnswer
					switch client {
					case "messages":
						got = maskedMessages(t, an, stream)
					case "chat":
						got = maskedChat(t, oa, stream)
					case "responses":
						got = maskedResponses(t, oa, stream)
					}
					all := strings.Join(got.raw, "\n")
					for _, leak := range []string{"bob@", "@example.com", "4111"} {
						if strings.Contains(all, leak) {
							t.Errorf("%q reached the client:\n%s", leak, all)
						}
					}
					if want := "Mail <EMAIL_ADDRESS>, card <CREDIT_CARD>."; got.reasoning != want {
						t.Errorf("reasoning %q, want %q", got.reasoning, want)
					}
					var args map[string]string
					if err := json.Unmarshal([]byte(got.args), &args); err != nil {
						t.Fatalf("arguments %q: %v", got.args, err)
					}
					if args["to"] != "<EMAIL_ADDRESS>" || args["card"] != "<CREDIT_CARD>" {
						t.Errorf("arguments %q", got.args)
					}
				})
			}
		}
	}
}

func maskedMessages(t *testing.T, c anthropic.Client, stream bool) maskedAnswer {
	p := messagesRequest("m")
	var msg anthropic.Message
	var got maskedAnswer
	if stream {
		s := c.Messages.NewStreaming(llmCtx(t), p)
		for s.Next() {
			got.raw = append(got.raw, s.Current().RawJSON())
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	} else {
		m, err := c.Messages.New(llmCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		msg = *m
		got.raw = append(got.raw, m.RawJSON())
	}
	for _, b := range msg.Content {
		switch b.Type {
		case "thinking":
			got.reasoning += b.Thinking
		case "tool_use":
			got.args = string(b.Input)
		}
	}
	return got
}

func maskedChat(t *testing.T, c openai.Client, stream bool) maskedAnswer {
	p := chatRequest("m")
	var got maskedAnswer
	if !stream {
		resp, err := c.Chat.Completions.New(llmCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		got.raw = append(got.raw, resp.RawJSON())
		var m struct {
			Choices []struct {
				Message struct {
					ReasoningContent string `json:"reasoning_content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(resp.RawJSON()), &m); err != nil || len(m.Choices) == 0 {
			t.Fatalf("%s: %v", resp.RawJSON(), err)
		}
		got.reasoning = m.Choices[0].Message.ReasoningContent
		if calls := resp.Choices[0].Message.ToolCalls; len(calls) > 0 {
			got.args = calls[0].Function.Arguments
		}
		return got
	}
	s := c.Chat.Completions.NewStreaming(llmCtx(t), p)
	var acc openai.ChatCompletionAccumulator
	for s.Next() {
		ch := s.Current()
		got.raw = append(got.raw, ch.RawJSON())
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 {
			if f, ok := ch.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
				var piece string
				if err := json.Unmarshal([]byte(f.Raw()), &piece); err != nil {
					t.Fatal(err)
				}
				got.reasoning += piece
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) > 0 && len(acc.Choices[0].Message.ToolCalls) > 0 {
		got.args = acc.Choices[0].Message.ToolCalls[0].Function.Arguments
	}
	return got
}

func maskedResponses(t *testing.T, c openai.Client, stream bool) maskedAnswer {
	p := responses.ResponseNewParams{Model: "m", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
	var got maskedAnswer
	var final *responses.Response
	if stream {
		s := c.Responses.NewStreaming(llmCtx(t), p)
		var deltas, args string
		for s.Next() {
			ev := s.Current()
			got.raw = append(got.raw, ev.RawJSON())
			switch ev.Type {
			case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
				deltas += ev.Delta
			case "response.function_call_arguments.delta":
				args += ev.Delta
			case "response.completed":
				r := ev.Response
				final = &r
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if final == nil {
			t.Fatal("no response.completed")
		}
		defer func() {
			if deltas != got.reasoning || args != got.args {
				t.Errorf("streamed reasoning %q and arguments %q, final response's %q and %q", deltas, args, got.reasoning, got.args)
			}
		}()
	} else {
		resp, err := c.Responses.New(llmCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		got.raw = append(got.raw, resp.RawJSON())
		final = resp
	}
	for _, it := range final.Output {
		switch it.Type {
		case "reasoning":
			for _, s := range it.Summary {
				got.reasoning += s.Text
			}
			for _, c := range it.Content {
				got.reasoning += c.Text
			}
		case "function_call":
			got.args = it.Arguments.OfString
		}
	}
	return got
}
