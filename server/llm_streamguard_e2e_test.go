package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/guardrail"
	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
)

// Remote response guards on streamed answers (promptGuard.streaming:
// Enabled): the answer is held back and judged in windows of at least
// aipolicy.StreamWindowText bytes of new text, each starting with the
// last aipolicy.StreamWindowOverlap bytes of the one before.

// sgAnswer is a long answer: about 50 KB of text in 100-byte deltas, so
// that the gateway reads it in several pieces (16 KiB at most each) and
// judges at least three windows whatever the pieces are.
func sgAnswer() []string {
	chunks := make([]string, 500)
	for i := range chunks {
		chunks[i] = fmt.Sprintf("segment %03d of the long streamed answer, written to fill windows of text; %-40s", i, "keep going.")
	}
	return chunks
}

// sgClient streams a question through the gateway with one SDK and
// returns the text it received and how the stream ended.
type sgClient struct {
	name   string
	stream func(t *testing.T, tg *testGateway, model string) (string, error)
}

var sgChat = sgClient{"chat", func(t *testing.T, tg *testGateway, model string) (string, error) {
	c := openaiVia(tg)
	s := c.Chat.Completions.NewStreaming(llmCtx(t), chatRequest(model))
	var text strings.Builder
	for s.Next() {
		if ch := s.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	return text.String(), s.Err()
}}

var sgMessages = sgClient{"messages", func(t *testing.T, tg *testGateway, model string) (string, error) {
	c := anthropicVia(tg)
	s := c.Messages.NewStreaming(llmCtx(t), messagesRequest(model))
	var text strings.Builder
	for s.Next() {
		if ev := s.Current(); ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			text.WriteString(ev.Delta.Text)
		}
	}
	return text.String(), s.Err()
}}

// sgResponses reads a Responses stream; an error event ends it with an
// error made of its code and message.
var sgResponses = sgClient{"responses", func(t *testing.T, tg *testGateway, model string) (string, error) {
	c := openaiVia(tg)
	s := c.Responses.NewStreaming(llmCtx(t), responses.ResponseNewParams{
		Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the capital of France?")},
	})
	var text strings.Builder
	var evErr error
	for s.Next() {
		switch ev := s.Current(); ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "error":
			evErr = fmt.Errorf("error event %s: %s", ev.Code, ev.Message)
		}
	}
	if evErr != nil {
		return text.String(), evErr
	}
	return text.String(), s.Err()
}}

// sgProvider is an emulated provider behind the gateway.
type sgProvider struct {
	name  string
	model string
	start func(t *testing.T) (emu sgEmulator, yaml, addr, auth string)
}

type sgEmulator interface{ Enqueue(...llmtest.Answer) }

var sgOpenAI = sgProvider{"openai", "gpt-4o-mini", func(t *testing.T) (sgEmulator, string, string, string) {
	o := llmtest.NewOpenAI(t)
	return o, `openAI: {}`, o.Addr(), `backendAuth: {key: ` + o.APIKey + `}`
}}

var sgAnthropic = sgProvider{"anthropic", "claude-sonnet-4-5", func(t *testing.T) (sgEmulator, string, string, string) {
	a := llmtest.NewAnthropic(t)
	return a, `anthropic: {}`, a.Addr(), `backendAuth: {key: ` + a.APIKey + `}`
}}

// sgWindows are the texts the webhook judged in calls[from:].
func sgWindows(t *testing.T, wh *guardrailtest.Webhook, from int) []string {
	t.Helper()
	var out []string
	for _, r := range wh.Requests()[from:] {
		var call struct {
			Body struct {
				Choices []struct{ Message guardrailtest.Message } `json:"choices"`
			} `json:"body"`
		}
		mustJSON(t, r.Body, &call)
		if len(call.Body.Choices) != 1 || call.Body.Choices[0].Message.Role != "assistant" {
			t.Fatalf("webhook call %s, want one assistant choice", r.Body)
		}
		out = append(out, call.Body.Choices[0].Message.Content)
	}
	return out
}

// sgNewText checks that windows overlap as they must (each starts with the
// last StreamWindowOverlap bytes of the one before; every window but the
// last brings at least StreamWindowText new bytes) and returns the new
// text of each.
func sgNewText(t *testing.T, windows []string) []string {
	t.Helper()
	news := make([]string, len(windows))
	for i, w := range windows {
		overlap := ""
		if i > 0 {
			prev := windows[i-1]
			overlap = prev[max(0, len(prev)-aipolicy.StreamWindowOverlap):]
		}
		if !strings.HasPrefix(w, overlap) {
			t.Fatalf("window %d does not start with the last %d bytes of window %d:\n%.80q...\nwant prefix %.80q...", i, len(overlap), i-1, w, overlap)
		}
		news[i] = w[len(overlap):]
		if i < len(windows)-1 && len(news[i]) < aipolicy.StreamWindowText {
			t.Errorf("window %d judged %d new bytes, fewer than %d", i, len(news[i]), aipolicy.StreamWindowText)
		}
	}
	return news
}

// sgGuardLogged waits for the access log line and checks its llm.guard.
func sgGuardLogged(t *testing.T, tg *testGateway, want string) {
	t.Helper()
	eventually(t, 5*time.Second, "the access log line", func() bool { return tg.accessLogs().FilterMessage("request").Len() > 0 })
	fields := tg.accessLogs().FilterMessage("request").All()[0].ContextMap()
	if got, _ := fields["llm.guard"].(string); got != want {
		t.Errorf("llm.guard %q, want %q (line %v)", got, want, fields)
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

// sgRejected is what a stream the webhook blocked must end with.
func sgRejected(t *testing.T, c sgClient, err error, body string) {
	t.Helper()
	if err == nil {
		t.Fatal("the blocked stream ended without an error")
	}
	msg := err.Error()
	wantType := "guardrail_intervention" // Chat's code, Responses' code
	if c.name == "messages" {
		wantType = "guardrail_blocked"
	}
	if !strings.Contains(msg, wantType) || !strings.Contains(msg, body) {
		t.Errorf("stream error %q, want %q and %q", msg, wantType, body)
	}
	// An error event comes after a 200 (the Anthropic SDK reports it as
	// an error of that status), never as an error status.
	var apiErr *openai.Error
	if errors.As(err, &apiErr) && apiErr.StatusCode != 200 {
		t.Errorf("the stream failed with status %d, want an error event after a 200", apiErr.StatusCode)
	}
	var anErr *anthropic.Error
	if errors.As(err, &anErr) && anErr.StatusCode != 200 {
		t.Errorf("the stream failed with status %d, want an error event after a 200", anErr.StatusCode)
	}
}

// TestLLMStreamGuard: a webhook response guard judges streamed answers
// window by window, translated or not, for each SDK.
func TestLLMStreamGuard(t *testing.T) {
	answer := sgAnswer()
	full := strings.Join(answer, "")
	wh := guardrailtest.NewWebhook(t)
	var calls atomic.Int32
	judges := map[string]func(guardrailtest.WebhookCall) guardrailtest.WebhookAction{
		"pass": func(guardrailtest.WebhookCall) guardrailtest.WebhookAction { return guardrailtest.WebhookAction{} },
		"reject 1st": func(guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "not this answer", Status: 451}}
		},
		"reject 2nd": func(guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			if calls.Add(1) == 2 {
				return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "not this answer", Status: 451}}
			}
			return guardrailtest.WebhookAction{}
		},
		"mask": func(c guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			return guardrailtest.WebhookAction{Mask: []guardrailtest.Message{{Role: "assistant", Content: "[MASKED]"}}}
		},
	}
	tests := []struct {
		desc     string
		client   sgClient
		provider sgProvider
		judge    string
		blockAt  int // the window blocked, 1-based (0: none)
	}{
		{desc: "chat to chat passes unchanged", client: sgChat, provider: sgOpenAI, judge: "pass"},
		{desc: "chat to chat blocked in the 2nd window", client: sgChat, provider: sgOpenAI, judge: "reject 2nd", blockAt: 2},
		{desc: "chat to chat blocked in the 1st window", client: sgChat, provider: sgOpenAI, judge: "reject 1st", blockAt: 1},
		{desc: "a webhook's mask passes unchanged", client: sgChat, provider: sgOpenAI, judge: "mask"},
		{desc: "chat to anthropic passes unchanged", client: sgChat, provider: sgAnthropic, judge: "pass"},
		{desc: "chat to anthropic blocked in the 2nd window", client: sgChat, provider: sgAnthropic, judge: "reject 2nd", blockAt: 2},
		{desc: "messages to anthropic passes unchanged", client: sgMessages, provider: sgAnthropic, judge: "pass"},
		{desc: "messages to anthropic blocked in the 2nd window", client: sgMessages, provider: sgAnthropic, judge: "reject 2nd", blockAt: 2},
		{desc: "messages to openai blocked in the 1st window", client: sgMessages, provider: sgOpenAI, judge: "reject 1st", blockAt: 1},
		{desc: "responses to openai blocked in the 2nd window", client: sgResponses, provider: sgOpenAI, judge: "reject 2nd", blockAt: 2},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			emu, provider, addr, auth := tc.provider.start(t)
			calls.Store(0)
			wh.Configure(func() { wh.Judge = judges[tc.judge] })
			policies := "promptGuard: {streaming: Enabled, response: [{webhook: {target: {host: " + wh.Addr() + "}}}]}"
			tg := startGateway(t, llmConfig(provider, addr, auth, policies), nil)
			before := len(wh.Requests())
			emu.Enqueue(llmtest.Reply{Chunks: answer})

			got, err := tc.client.stream(t, tg, tc.provider.model)
			windows := sgWindows(t, wh, before)
			news := sgNewText(t, windows)
			switch tc.blockAt {
			case 0:
				if err != nil {
					t.Fatalf("stream: %v", err)
				}
				if got != full {
					t.Fatalf("the client got %d bytes of text, want the answer's %d unchanged", len(got), len(full))
				}
				if len(windows) < 3 || strings.Join(news, "") != full {
					t.Fatalf("%d windows whose new texts join to %d bytes, want at least 3 joining to the answer", len(windows), len(strings.Join(news, "")))
				}
				sgGuardLogged(t, tg, "")
			default:
				sgRejected(t, tc.client, err, "not this answer")
				if len(windows) != tc.blockAt {
					t.Fatalf("%d windows judged, want %d", len(windows), tc.blockAt)
				}
				// The client got the text of the windows that passed, and
				// nothing of the blocked one.
				if want := strings.Join(news[:tc.blockAt-1], ""); got != want {
					t.Fatalf("the client got %d bytes of text, want the %d of the windows before the blocked one", len(got), len(want))
				}
				if !strings.HasPrefix(full, strings.Join(news, "")) {
					t.Fatal("the windows are not the answer's text in order")
				}
				sgGuardLogged(t, tg, "rejected")
			}
		})
	}
}

// TestLLMStreamGuardFailures: a webhook that cannot be reached follows its
// failureMode on streams: failOpen passes every window (logged at warn and
// as llm.guard failed_open), failClosed blocks the first with the guard's
// rejection.
func TestLLMStreamGuardFailures(t *testing.T) {
	down := guardrailtest.RefusedAddr(t)
	answer := sgAnswer()
	for _, tc := range []struct {
		mode    string
		blocked bool
	}{{"failOpen", false}, {"failClosed", true}} {
		t.Run(tc.mode, func(t *testing.T) {
			o := llmtest.NewOpenAI(t)
			policies := "promptGuard: {streaming: Enabled, response: [{webhook: {target: {host: " + down + "}, failureMode: " + tc.mode + "}, rejection: {body: guard unavailable}}]}"
			tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
			o.Enqueue(llmtest.Reply{Chunks: answer})
			got, err := sgChat.stream(t, tg, "gpt-4o-mini")
			if tc.blocked {
				sgRejected(t, sgChat, err, "guard unavailable")
				if got != "" {
					t.Errorf("the client got %d bytes of text before the first window", len(got))
				}
				sgGuardLogged(t, tg, "rejected")
				return
			}
			if err != nil || got != strings.Join(answer, "") {
				t.Fatalf("stream: %v, %d bytes", err, len(got))
			}
			sgGuardLogged(t, tg, "failed_open")
			if n := tg.accessLogs().FilterMessage("streaming prompt guard failed: the window passes").Len(); n < 3 {
				t.Errorf("%d warnings, want one per window (at least 3)", n)
			}
		})
	}
}

// TestLLMStreamGuardAfterRegexMask: the regex response guard masks the
// stream before the windows are cut: the webhook judges the masked text.
func TestLLMStreamGuardAfterRegexMask(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	wh := guardrailtest.NewWebhook(t)
	policies := "promptGuard: {streaming: Enabled, response: [{regex: {rules: [{builtin: ssn}]}}, {webhook: {target: {host: " + wh.Addr() + "}}}]}"
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
	o.Enqueue(llmtest.Reply{Chunks: []string{"Your SSN is 078-0", "5-11", "20, keep it safe."}})
	got, err := sgChat.stream(t, tg, "gpt-4o-mini")
	if err != nil {
		t.Fatal(err)
	}
	windows := sgWindows(t, wh, 0)
	if len(windows) != 1 || windows[0] != got {
		t.Fatalf("the webhook judged %q, the client got %q", windows, got)
	}
	if strings.Contains(got, "078-05-1120") || !strings.Contains(got, "keep it safe.") {
		t.Errorf("streamed answer %q", got)
	}
}

// TestLLMStreamGuardNotEnabled: without streaming: Enabled the remote
// response guards judge whole answers only, as agentgateway's do.
func TestLLMStreamGuardNotEnabled(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	wh := guardrailtest.NewWebhook(t)
	wh.Configure(func() {
		wh.Judge = func(guardrailtest.WebhookCall) guardrailtest.WebhookAction {
			return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "no", Status: 451}}
		}
	})
	policies := "promptGuard: {response: [{webhook: {target: {host: " + wh.Addr() + "}}}]}"
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
	o.Enqueue(llmtest.Reply{Text: "a streamed answer"})
	got, err := sgChat.stream(t, tg, "gpt-4o-mini")
	if err != nil || got != "a streamed answer" {
		t.Fatalf("stream: %v %q", err, got)
	}
	if n := len(wh.Requests()); n != 0 {
		t.Errorf("the webhook judged a stream %d times", n)
	}
}

// BenchmarkLLMStreamGuard is one provider chunk through llmStream: plain,
// and guarded by a webhook on 127.0.0.1 (its calls, one per window of
// about 85 chunks, included).
func BenchmarkLLMStreamGuard(b *testing.B) {
	wh := guardrailtest.NewWebhook(b)
	var cfg config.AIPolicy
	if errs := decode.YAML([]byte("promptGuard: {streaming: Enabled, response: [{webhook: {target: {host: "+wh.Addr()+"}}}]}"), &cfg); errs != nil {
		b.Fatal(errs)
	}
	pol, err := aipolicy.NewWithOptions(&cfg, guardrail.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pol.Close)
	const (
		chatPrelude = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
		chatChunk   = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" the gateway"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
		chatEnd     = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
		anPrelude   = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
		anChunk = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" the gateway\"}}\n\n"
		anEnd   = "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":5}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	)
	for _, f := range []struct {
		name                   string
		client, provider       convert.Format
		prelude, chunk, ending string
	}{
		{"ChatToChat", convert.Chat, convert.Chat, chatPrelude, chatChunk, chatEnd},
		{"MessagesToChat", convert.Chat, convert.Messages, anPrelude, anChunk, anEnd},
	} {
		for _, guarded := range []bool{false, true} {
			name := f.name + "/plain"
			if guarded {
				name = f.name + "/guarded"
			}
			b.Run(name, func(b *testing.B) {
				x := &llmExchange{upResp: fasthttp.AcquireResponse()}
				defer fasthttp.ReleaseResponse(x.upResp)
				buf := make([]byte, 32<<10)
				b.SetBytes(int64(len(f.chunk)))
				b.ReportAllocs()
				b.ResetTimer()
				src := &sgChunks{prelude: f.prelude, chunk: f.chunk, end: f.ending, n: b.N}
				s := convert.AcquireStream(convert.RequestInfo{Client: f.client, Provider: f.provider, Stream: true})
				ls := acquireLLMStream(x, s, src)
				if guarded {
					ls.guardWith(pol, &aipolicy.RemoteInput{}, func() {}, zap.NewNop())
				}
				for {
					_, err := ls.Read(buf)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				failed := ls.failed
				_ = ls.Close()
				b.StopTimer()
				if failed != nil || x.guard == "rejected" {
					b.Fatalf("the stream failed: %v %q", failed, x.guard)
				}
			})
		}
	}
}

// sgChunks is a provider's stream: prelude, n chunks (one per Read), end.
type sgChunks struct {
	prelude, chunk, end string
	n                   int
	state               int
	pending             string
}

func (c *sgChunks) Read(p []byte) (int, error) {
	if c.pending == "" {
		switch {
		case c.state == 0:
			c.pending = c.prelude
		case c.state <= c.n:
			c.pending = c.chunk
		case c.state == c.n+1:
			c.pending = c.end
		default:
			return 0, io.EOF
		}
		c.state++
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}
