package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
)

// Streams whose provider sends its last event and then keeps its body open
// a moment (the end of its chunked framing comes later, or the connection
// is cut).
const (
	endChatStream = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Paris"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" it is."},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}` + "\n\n" +
		"data: [DONE]\n\n"
	endAnthropicStream = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Paris"}}` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" it is."}}` + "\n\n" +
		"event: content_block_stop\n" +
		`data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}` + "\n\n" +
		"event: message_stop\n" +
		`data: {"type":"message_stop"}` + "\n\n"
)

// TestLLMStreamCompleteOnceItsLastEventIsOut: an exchange whose stream's
// last event ([DONE], message_stop, response.completed) reached the client
// is complete, whatever happens next: the client closing its connection
// or resetting its stream at once (the OpenAI SDKs close theirs at
// [DONE]) while the provider's body has yet to end, or the provider
// cutting its connection after its last event. It is recorded as a
// success: no llm.error, no error_type, and in the time-to-first-token
// histogram. Such exchanges used to be recorded as client_gone (or as a
// failed stream), since the gateway waits for the end of the provider's
// body before it ends the client's.
func TestLLMStreamCompleteOnceItsLastEventIsOut(t *testing.T) {
	for _, tc := range []struct {
		desc, provider, stream, path, body, last string
		h2                                       bool
		// cut: the provider cuts its connection after its last event
		// (else it holds its body open until the gateway lets go).
		cut bool
		// guard: remote response guards judge the stream, which holds
		// its events back until a window is judged: the last ones go
		// out once they are read.
		guard bool
	}{
		{desc: "chat passed through, client closes", provider: "openAI", stream: endChatStream,
			path: "/v1/chat/completions", last: "data: [DONE]\n\n"},
		{desc: "anthropic to chat, client closes", provider: "anthropic", stream: endAnthropicStream,
			path: "/v1/chat/completions", last: "data: [DONE]\n\n"},
		{desc: "anthropic passed through, client closes", provider: "anthropic", stream: endAnthropicStream,
			path: "/v1/messages", last: "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{desc: "anthropic to responses, client closes", provider: "anthropic", stream: endAnthropicStream,
			path: "/v1/responses", last: "event: response.completed\n", body: `{"model":"m","stream":true,"input":"capital of France?"}`},
		{desc: "anthropic to chat, HTTP/2 client resets", provider: "anthropic", stream: endAnthropicStream,
			path: "/v1/chat/completions", last: "data: [DONE]\n\n", h2: true},
		{desc: "anthropic to chat, provider cuts", provider: "anthropic", stream: endAnthropicStream,
			path: "/v1/chat/completions", last: "data: [DONE]\n\n", cut: true},
		{desc: "anthropic to chat, guarded, client closes", provider: "anthropic", stream: endAnthropicStream,
			path: "/v1/chat/completions", last: "data: [DONE]\n\n", guard: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			released := make(chan struct{})
			provider := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(200)
				io.WriteString(w, tc.stream)
				w.(http.Flusher).Flush()
				if tc.cut {
					conn, _, err := http.NewResponseController(w).Hijack()
					if err == nil {
						conn.Close()
					}
					return
				}
				select {
				case <-r.Context().Done():
				case <-released:
				case <-time.After(10 * time.Second):
				}
			}))
			defer close(released)
			guard := ""
			if tc.guard {
				guard = ", promptGuard: {streaming: Enabled, response: [{webhook: {target: {host: " + guardrailtest.NewWebhook(t).Addr() + "}}}]}"
			}
			tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies: {ai: {routes: `+llmRoutes+guard+`}}
      backends: [{ai: {name: p, hostOverride: "${UP}", provider: {${KIND}: {}}, policies: {backendAuth: {key: k}}}}]
`, map[string]string{"UP": provider, "KIND": tc.provider})
			body := tc.body
			if body == "" {
				body = `{"model":"m","stream":true,"max_tokens":10,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"capital of France?"}]}`
			}
			var got []byte
			if tc.h2 {
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(3000)+tc.path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := h2cClient().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got = readUntil(t, resp.Body, tc.last)
				cancel() // RST_STREAM once the last event is in
				resp.Body.Close()
			} else {
				conn := dialTest(t, tg.addr(3000))
				io.WriteString(conn, "POST "+tc.path+" HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: "+itoa(len(body))+"\r\n\r\n"+body)
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				got = readUntil(t, resp.Body, tc.last)
				if !tc.cut {
					conn.Close() // as the OpenAI SDKs do at [DONE]
				}
			}
			if !bytes.Contains(got, []byte("Paris")) {
				t.Fatalf("the answer:\n%s", got)
			}

			eventually(t, 10*time.Second, "the request's access line", func() bool {
				return len(tg.accessLogs().FilterMessage("request").All()) == 1
			})
			f := tg.accessLogs().FilterMessage("request").All()[0].ContextMap()
			if e, ok := f["llm.error"]; ok {
				t.Errorf("llm.error %v, want none: the client had the whole answer", e)
			}
			fams := scrapeGateway(t, tg.gw)
			if s := seriesOf(fams, "agentgateway_gen_ai_server_time_to_first_token_seconds", map[string]string{"gen_ai_operation_name": "chat"}); s == nil || s.GetHistogram().GetSampleCount() != 1 {
				t.Errorf("time to first token: %v, want the exchange", s)
			}
			for _, m := range fams["agentgateway_gen_ai_server_request_duration_seconds"].GetMetric() {
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "error_type" && lp.GetValue() != "" {
						t.Errorf("request duration under error_type %q", lp.GetValue())
					}
				}
			}
		})
	}
}

// readUntil reads r until what it read ends with last.
func readUntil(t *testing.T, r io.Reader, last string) []byte {
	t.Helper()
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte(last)) {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil && !bytes.Contains(got, []byte(last)) {
			t.Fatalf("%v before %q:\n%s", err, last, got)
		}
	}
	return got
}
