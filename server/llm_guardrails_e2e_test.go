package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/backend/llm/llmtest"
)

func guardAsk(prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
}

// TestLLMWebhookGuards: a webhook request guard among regex ones passes,
// masks (the provider sees the mask) and rejects (the provider sees
// nothing); as a response guard it masks and rejects whole answers.
func TestLLMWebhookGuards(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	wh := guardrailtest.NewWebhook(t)
	wh.Judge = func(c guardrailtest.WebhookCall) guardrailtest.WebhookAction {
		for _, m := range c.Messages {
			switch {
			case strings.Contains(m.Content, "forbidden"):
				return guardrailtest.WebhookAction{Reject: &guardrailtest.WebhookRejection{Body: "webhook says no", Status: 451}}
			case strings.Contains(m.Content, "secret"):
				masked := make([]guardrailtest.Message, len(c.Messages))
				for i, m := range c.Messages {
					masked[i] = guardrailtest.Message{Role: m.Role, Content: strings.ReplaceAll(m.Content, "secret", "[MASKED]")}
				}
				return guardrailtest.WebhookAction{Mask: masked}
			}
		}
		return guardrailtest.WebhookAction{}
	}
	policies := `
promptGuard:
  request:
  - regex: {action: mask, rules: [{builtin: email}]}
  - webhook: {target: {host: ` + wh.Addr() + `}, forwardHeaderMatches: [{name: x-tenant, value: {exact: acme}}]}
  response:
  - webhook: {target: {host: ` + wh.Addr() + `}}
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
	c := openaiVia(tg)

	tests := []struct {
		desc, prompt, answer string
		status               int    // 0: answered
		sent, notSent        string // in / not in the provider's body
		got, notGot          string // in / not in the answer
		webhookSaw           string
	}{
		{desc: "pass", prompt: "hello there", answer: "hi", sent: "hello there", got: "hi"},
		{desc: "mask after regex", prompt: "my secret is bob@example.com", answer: "ok", sent: "[MASKED]", notSent: "secret", webhookSaw: "<EMAIL_ADDRESS>", got: "ok"},
		{desc: "reject", prompt: "something forbidden", status: 451},
		{desc: "answer masked", prompt: "hi", answer: "the secret word", got: "[MASKED] word", notGot: "secret"},
		{desc: "answer rejected", prompt: "hi", answer: "a forbidden answer", status: 451},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			before := len(o.Requests())
			if tc.answer != "" {
				o.Enqueue(llmtest.Reply{Text: tc.answer})
			}
			calls := len(wh.Requests())
			resp, err := c.Chat.Completions.New(llmCtx(t), guardAsk(tc.prompt), option.WithHeader("x-tenant", "acme"))
			if tc.status != 0 {
				var apiErr *openai.Error
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
					t.Fatalf("err %v, want status %d", err, tc.status)
				}
				if tc.answer == "" && len(o.Requests()) != before {
					t.Fatal("a rejected prompt reached the provider")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body := string(o.Last().Body)
			if tc.sent != "" && !strings.Contains(body, tc.sent) || tc.notSent != "" && strings.Contains(body, tc.notSent) {
				t.Errorf("provider got %s", body)
			}
			got := resp.Choices[0].Message.Content
			if !strings.Contains(got, tc.got) || tc.notGot != "" && strings.Contains(got, tc.notGot) {
				t.Errorf("answer %q", got)
			}
			reqs := wh.Requests()[calls:]
			if len(reqs) == 0 {
				t.Fatal("the webhook was not asked")
			}
			if reqs[0].Header.Get("x-tenant") != "acme" {
				t.Errorf("forwarded headers %v", reqs[0].Header)
			}
			if tc.webhookSaw != "" && !strings.Contains(string(reqs[0].Body), tc.webhookSaw) {
				t.Errorf("webhook saw %s", reqs[0].Body)
			}
		})
	}
}

// TestLLMWebhookFailureModes: with the webhook down, failClosed rejects and
// failOpen passes.
func TestLLMWebhookFailureModes(t *testing.T) {
	down := guardrailtest.RefusedAddr(t)
	for _, tc := range []struct {
		mode   string
		status int
	}{{"failClosed", 403}, {"failOpen", 0}} {
		t.Run(tc.mode, func(t *testing.T) {
			o := llmtest.NewOpenAI(t)
			policies := "promptGuard:\n  request:\n  - webhook: {target: {host: " + down + "}, failureMode: " + tc.mode + "}\n"
			tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
			o.Enqueue(llmtest.Reply{Text: "ok"})
			c := openaiVia(tg)
			_, err := c.Chat.Completions.New(llmCtx(t), guardAsk("hello"))
			if tc.status == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status {
				t.Fatalf("err %v, want %d", err, tc.status)
			}
			if len(o.Requests()) != 0 {
				t.Fatal("the provider was asked")
			}
		})
	}
}

// TestLLMModerationGuard: OpenAI moderation as a request guard: a flagged
// prompt gets the default 403 and never reaches the provider, a clean one
// passes, and an unreachable moderation service is a 503.
func TestLLMModerationGuard(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok"})
	mod := guardrailtest.NewModeration(t)
	mod.Configure(func() { mod.Flag = map[string]string{"bomb": "violence"} })
	prev := guardrailHostOverride
	guardrailHostOverride = map[string]string{"api.openai.com": mod.Addr()}
	t.Cleanup(func() { guardrailHostOverride = prev })
	policies := `
promptGuard:
  request:
  - openAIModeration: {policies: {backendAuth: {key: ` + mod.APIKey + `}}}
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(8080)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))

	_, err := c.Chat.Completions.New(llmCtx(t), guardAsk("how do I build a bomb"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 {
		t.Fatalf("flagged prompt: %v, want 403", err)
	}
	if n := len(o.Requests()); n != 0 {
		t.Fatalf("a flagged prompt reached the provider (%d requests)", n)
	}
	if _, err := c.Chat.Completions.New(llmCtx(t), guardAsk("what is the capital of France")); err != nil {
		t.Fatalf("clean prompt: %v", err)
	}
	if n := len(mod.Requests()); n != 2 {
		t.Errorf("moderation got %d requests, want 2", n)
	}
	mod.Close()
	_, err = c.Chat.Completions.New(llmCtx(t), guardAsk("hello"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Errorf("moderation down: %v, want 503", err)
	}
}
