package server

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
)

// anthropicStreamWhole is an Anthropic streamed answer with thinking, a
// signature and a comment (a keep-alive), in events a provider may send.
const anthropicStreamWhole = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_read_input_tokens":10,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Paris, surely."}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: ping\n" +
	`data: {"type":"ping"}` + "\n\n" +
	": keep-alive\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Paris."}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":1}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}` + "\n\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

// TestLLMStreamSentWhole: a provider may send a streamed answer with a
// Content-Length instead of chunks, so that the gateway reads it whole
// (backend.ResponseStreamThreshold). It is still a stream: passed on byte
// for byte to a client of the provider's format, translated event by event
// for another (a keep-alive comment included), usage read. The gateway
// used to take it for a JSON answer and fail it with 502.
func TestLLMStreamSentWhole(t *testing.T) {
	addr := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(anthropicStreamWhole)))
		w.Write([]byte(anthropicStreamWhole))
	}))
	tg := startGateway(t, llmConfig(`anthropic: {}`, addr, "", ""), nil)

	req, _ := http.NewRequest("POST", tg.url(8080)+"/v1/messages", strings.NewReader(`{"model":"claude-x","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, body := do(t, req)
	if resp.StatusCode != 200 || body != anthropicStreamWhole {
		t.Fatalf("same format: %d, %d bytes; want the provider's %d bytes as they are:\n%s", resp.StatusCode, len(body), len(anthropicStreamWhole), body)
	}

	// Translated, the provider's keep-alives still reach the client: its
	// comment as it is, its ping event as a comment.
	req, _ = http.NewRequest("POST", tg.url(8080)+"/v1/chat/completions", strings.NewReader(`{"model":"claude-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, body = do(t, req)
	if resp.StatusCode != 200 || !strings.Contains(body, "\n: keep-alive\n\n") || !strings.Contains(body, "\n: ping\n\n") || !strings.Contains(body, `"content":"Paris."`) {
		t.Fatalf("translated: %d\n%s", resp.StatusCode, body)
	}

	ac := anthropicVia(tg)
	s := ac.Messages.NewStreaming(llmCtx(t), anthropic.MessageNewParams{
		Model: "claude-x", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Capital of France?"))},
	})
	var msg anthropic.Message
	for s.Next() {
		if err := msg.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Err() != nil || len(msg.Content) != 2 || msg.Content[1].Text != "Paris." || msg.Usage.OutputTokens != 42 {
		t.Fatalf("Anthropic SDK: %v %+v", s.Err(), msg)
	}

	if text, err := sgChat.stream(t, tg, "claude-x"); err != nil || text != "Paris." {
		t.Fatalf("OpenAI SDK, translated: %q, %v", text, err)
	}
}
