package server

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMSection: the top-level llm section on a port of its own, as
// agentgateway's llm-basic and llm-cost-routing examples use it: fixed
// names, wildcard names with a transformation, internal models behind a
// conditional virtual model, the model list, and unknown models.
func TestLLMSection(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "from openai"})
	a := llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Reply{Text: "from anthropic"})
	cfg := `
llm:
  port: 4000
  models:
  - name: smart
    provider: openAI
    params: {model: gpt-5.5, apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}
  - name: anthropic/*
    provider: anthropic
    params: {apiKey: ` + a.APIKey + `, baseUrl: "http://` + a.Addr() + `"}
    transformation:
      model: llmRequest.model.stripPrefix("anthropic/")
  - name: economy-model
    visibility: internal
    provider: openAI
    params: {model: gpt-4o-mini, apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}
  - name: premium-model
    visibility: internal
    provider: openAI
    params: {model: gpt-4o, apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}
  virtualModels:
  - name: smart-model
    routing:
      conditional:
        targets:
        - when: 'default(llmRequest.max_tokens, 1024) <= 1024'
          model: economy-model
        - model: premium-model
`
	tg := startGateway(t, cfg, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))

	resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("smart"))
	if err != nil || resp.Choices[0].Message.Content != "from openai" {
		t.Fatalf("smart: %v", err)
	}
	if m := o.Last().Model; m != "gpt-5.5" {
		t.Errorf("smart reached the provider as %q", m)
	}

	ac := anthropic.NewClient(anthropicopt.WithBaseURL(tg.url(4000)), anthropicopt.WithAPIKey("client"), anthropicopt.WithMaxRetries(0))
	msg, err := ac.Messages.New(llmCtx(t), messagesRequest("anthropic/claude-sonnet-4-5"))
	if err != nil || msg.Content[0].Text != "from anthropic" {
		t.Fatalf("anthropic/*: %v", err)
	}
	if m := a.Last().Model; m != "claude-sonnet-4-5" {
		t.Errorf("anthropic/* reached the provider as %q", m)
	}

	small := chatRequest("smart-model")
	small.MaxTokens = openai.Int(500)
	if _, err := c.Chat.Completions.New(llmCtx(t), small); err != nil {
		t.Fatal(err)
	}
	if m := o.Last().Model; m != "gpt-4o-mini" {
		t.Errorf("a small budget went to %q, want the economy model", m)
	}
	large := chatRequest("smart-model")
	large.MaxTokens = openai.Int(8000)
	if _, err := c.Chat.Completions.New(llmCtx(t), large); err != nil {
		t.Fatal(err)
	}
	if m := o.Last().Model; m != "gpt-4o" {
		t.Errorf("a large budget went to %q, want the premium model", m)
	}

	for _, name := range []string{"economy-model", "no-such-model"} {
		_, err := c.Chat.Completions.New(llmCtx(t), chatRequest(name))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("%s: %v, want 404 (internal and unknown models are not served directly)", name, err)
		}
	}

	_, body := get(t, tg.url(4000)+"/v1/models")
	var list struct {
		Data []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	if got := strings.Join(ids, ","); got != "smart,smart-model" {
		t.Errorf("models listed: %s", got)
	}
}

// TestLLMSectionFailoverAndWeights: a failover virtual model passes over a
// failing model within the request; a weighted one spreads requests.
func TestLLMSectionFailoverAndWeights(t *testing.T) {
	bad := llmtest.NewOpenAI(t)
	bad.SetDefault(llmtest.Failure{Status: 503})
	good := llmtest.NewOpenAI(t)
	good.SetDefault(llmtest.Reply{Text: "ok"})
	model := func(name, up, key string) string {
		return `
  - name: ` + name + `
    visibility: internal
    provider: openAI
    params: {apiKey: ` + key + `, hostOverride: "` + up + `"}`
	}
	cfg := `
llm:
  models:` + model("a", bad.Addr(), bad.APIKey) + model("b", good.Addr(), good.APIKey) + `
  virtualModels:
  - name: resilient
    routing: {failover: {targets: [{model: a, priority: 0}, {model: b, priority: 1}]}}
  - name: spread
    routing: {weighted: {targets: [{model: a, weight: 0}, {model: b, weight: 3}]}}
`
	tg := startGateway(t, cfg, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))
	for i := 0; i < 3; i++ {
		for _, name := range []string{"resilient", "spread"} {
			resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest(name))
			if err != nil || resp.Choices[0].Message.Content != "ok" {
				t.Fatalf("%s %d: %v", name, i, err)
			}
		}
	}
	if n := len(bad.Requests()); n != 1 {
		t.Errorf("the failing model got %d requests, want 1 (then evicted; weight 0 gets none)", n)
	}
}
