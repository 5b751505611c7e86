package server

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// sdkError is what an official SDK made of an error answer: its status,
// type, code (OpenAI's only) and message, and the answer's headers.
type sdkError struct {
	status              int
	typ, code, message  string
	retryAfter, limited string
}

// sdkErrorOf reads err, an openai.Error or an anthropic.Error, as the SDK
// typed it; ok is false for any other error.
func sdkErrorOf(err error) (e sdkError, ok bool) {
	var oe *openai.Error
	if errors.As(err, &oe) {
		e = sdkError{status: oe.StatusCode, typ: oe.Type, code: oe.Code, message: oe.Message}
		if oe.Response != nil {
			e.retryAfter, e.limited = oe.Response.Header.Get("Retry-After"), oe.Response.Header.Get("X-Ratelimit-Limit")
		}
		return e, true
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		e = sdkError{status: ae.StatusCode, typ: string(ae.Type())}
		var body struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(ae.RawJSON()), &body) == nil {
			e.message = body.Error.Message
		}
		if ae.Response != nil {
			e.retryAfter, e.limited = ae.Response.Header.Get("Retry-After"), ae.Response.Header.Get("X-Ratelimit-Limit")
		}
		return e, true
	}
	return e, false
}

// TestLLMOwnErrorsInClientFormat: the errors the gateway makes itself on
// an LLM route (no route type for the path, a provider that does not serve
// the route type) reach each official SDK as a typed error with the
// status, a type and a message, in its API's words (Anthropic's
// not_found_error, OpenAI's invalid_request_error). They were text, which
// the SDKs read as an error with an empty type and message.
func TestLLMOwnErrorsInClientFormat(t *testing.T) {
	routes := `{"/v1/chat/completions": completions, "/v1/messages": messages, "/v1/messages/count_tokens": anthropicTokenCount, "/v1/responses": responses}`
	cfg := strings.Replace(llmConfig(`openAI: {}`, closedAddr(t), "backendAuth: {key: k}", ""), llmRoutes, routes, 1)
	tg := startGateway(t, cfg, nil)
	oc, ac := openaiVia(tg), anthropicVia(tg)
	ctx := llmCtx(t)
	for _, tc := range []struct {
		desc     string
		call     func() error
		typ      string
		inMsg    string
		anthropc bool
	}{
		{desc: "openai: no route type", typ: "invalid_request_error", inMsg: "no LLM route type", call: func() error {
			_, err := oc.Completions.New(ctx, openai.CompletionNewParams{Model: "m", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}})
			return err
		}},
		{desc: "anthropic: no route type", typ: "not_found_error", inMsg: "no LLM route type", anthropc: true, call: func() error {
			_, err := ac.Models.List(ctx, anthropic.ModelListParams{})
			return err
		}},
		{desc: "anthropic: route type not served", typ: "not_found_error", inMsg: "openAI does not serve anthropicTokenCount requests", anthropc: true, call: func() error {
			_, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
				Model:    "m",
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
			})
			return err
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.call()
			e, ok := sdkErrorOf(err)
			if !ok {
				t.Fatalf("not an SDK error: %v", err)
			}
			if e.status != 404 || e.typ != tc.typ || !strings.Contains(e.message, tc.inMsg) {
				t.Errorf("got status %d type %q message %q, want 404 %q with %q", e.status, e.typ, e.message, tc.typ, tc.inMsg)
			}
		})
	}
}

// TestLLMRateLimitInClientFormat: a request the route's token rate limit
// refuses gets its 429 with the x-ratelimit-* headers (and Retry-After
// when it can wait) and a body each official SDK reads as a rate-limit
// error: Anthropic's rate_limit_error, OpenAI's type "tokens" and code
// "rate_limit_exceeded", with the reason as the message. It was text, which
// the SDKs read as an error with an empty type and message.
func TestLLMRateLimitInClientFormat(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 60, OutputTokens: 60}})
	limits := `
localRateLimit:
- {maxTokens: 100, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits)
	cfg = strings.Replace(cfg, "          name: p\n", "          name: p\n          tokenize: true\n", 1)
	tg := startGateway(t, cfg, nil)
	oc, ac := openaiVia(tg), anthropicVia(tg)
	ctx := llmCtx(t)
	long := strings.Repeat("Count these words before sending them. ", 40) // about 280 tokens: never fits

	chat := func(prompt string) error {
		_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gpt-4o-mini",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		})
		return err
	}
	messages := func(prompt string) error {
		_, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
			Model: "gpt-4o-mini", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		})
		return err
	}
	resp := func(prompt string) error {
		_, err := oc.Responses.New(ctx, responses.ResponseNewParams{
			Model: "gpt-4o-mini",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		})
		return err
	}
	exceeds := "request exceeds the rate limit's capacity"
	cases := []struct {
		desc      string
		call      func(string) error
		prompt    string
		typ, code string
		msg       string
		wait      bool // a Retry-After
	}{
		{desc: "chat: beyond capacity", call: chat, prompt: long, typ: "tokens", code: "rate_limit_exceeded", msg: exceeds},
		{desc: "messages: beyond capacity", call: messages, prompt: long, typ: "rate_limit_error", msg: exceeds},
		{desc: "responses: beyond capacity", call: resp, prompt: long, typ: "tokens", code: "rate_limit_exceeded", msg: exceeds},
		{desc: "passes, empties the bucket", call: chat, prompt: "hi"},
		{desc: "chat: bucket empty", call: chat, prompt: "hi", typ: "tokens", code: "rate_limit_exceeded", msg: "rate limit exceeded", wait: true},
		{desc: "messages: bucket empty", call: messages, prompt: "hi", typ: "rate_limit_error", msg: "rate limit exceeded", wait: true},
		{desc: "responses: bucket empty", call: resp, prompt: "hi", typ: "tokens", code: "rate_limit_exceeded", msg: "rate limit exceeded", wait: true},
	}
	for _, tc := range cases {
		err := tc.call(tc.prompt)
		if tc.msg == "" {
			if err != nil {
				t.Fatalf("%s: %v", tc.desc, err)
			}
			continue
		}
		e, ok := sdkErrorOf(err)
		if !ok {
			t.Errorf("%s: not an SDK error: %v", tc.desc, err)
			continue
		}
		if e.status != 429 || e.typ != tc.typ || e.code != tc.code || e.message != tc.msg {
			t.Errorf("%s: got status %d type %q code %q message %q, want 429 %q %q %q", tc.desc, e.status, e.typ, e.code, e.message, tc.typ, tc.code, tc.msg)
		}
		if (e.retryAfter != "") != tc.wait || e.limited != "100" {
			t.Errorf("%s: Retry-After %q (want one: %v), X-Ratelimit-Limit %q", tc.desc, e.retryAfter, tc.wait, e.limited)
		}
	}
}

// TestLLMRequestRateLimitInClientFormat: a request the route's requests
// bucket refuses, before the ai backend is reached, gets a body each SDK
// reads as a rate-limit error (OpenAI's type "requests"), as the tokens
// buckets' refusals do. It was text/plain, read as an error with an empty
// type and message.
func TestLLMRequestRateLimitInClientFormat(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok"})
	limits := `
localRateLimit:
- {maxTokens: 1, tokensPerFill: 1, fillInterval: 1h, type: requests}
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits), nil)
	oc, ac := openaiVia(tg), anthropicVia(tg)
	ctx := llmCtx(t)
	if _, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}); err != nil {
		t.Fatalf("first request: %v", err)
	}
	_, chatErr := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	_, msgErr := ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "gpt-4o-mini", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	})
	for _, c := range []struct {
		desc      string
		err       error
		typ, code string
	}{
		{"chat", chatErr, "requests", "rate_limit_exceeded"},
		{"messages", msgErr, "rate_limit_error", ""},
	} {
		e, ok := sdkErrorOf(c.err)
		if !ok {
			t.Errorf("%s: not an SDK error: %v", c.desc, c.err)
			continue
		}
		if e.status != 429 || e.typ != c.typ || e.code != c.code || e.message != "rate limit exceeded" || e.retryAfter == "" {
			t.Errorf("%s: got status %d type %q code %q message %q Retry-After %q, want 429 %q %q \"rate limit exceeded\" and a Retry-After",
				c.desc, e.status, e.typ, e.code, e.message, e.retryAfter, c.typ, c.code)
		}
	}
	if n := len(o.Requests()); n != 1 {
		t.Errorf("the provider got %d requests, want 1", n)
	}
}
