package llmtest_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

func anthropicClient(a *llmtest.Anthropic, opts ...option.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]option.RequestOption{
		option.WithBaseURL(a.BaseURL()), option.WithAPIKey(a.APIKey), option.WithMaxRetries(0),
	}, opts...)...)
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the capital of France?"))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
			Name:        "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}},
		}}},
	}
}

// checkAnthropicMessage asserts a message with text then one get_weather
// call.
func checkAnthropicMessage(t *testing.T, m *anthropic.Message, wantText string, u llmtest.Usage) {
	t.Helper()
	if len(m.Content) != 2 || m.Content[0].Type != "text" || m.Content[1].Type != "tool_use" {
		t.Fatalf("content %+v", m.Content)
	}
	if m.Content[0].Text != wantText {
		t.Errorf("text %q", m.Content[0].Text)
	}
	tu := m.Content[1].AsToolUse()
	if tu.Name != "get_weather" || string(tu.Input) != `{"city":"Paris"}` || tu.ID == "" {
		t.Errorf("tool use %+v (input %s)", tu, tu.Input)
	}
	if m.StopReason != anthropic.StopReasonToolUse || m.Role != "assistant" || m.Type != "message" || m.Model != "claude-sonnet-4-5" {
		t.Errorf("stop %q role %q type %q model %q", m.StopReason, m.Role, m.Type, m.Model)
	}
	if m.Usage.InputTokens != int64(u.InputTokens) || m.Usage.OutputTokens != int64(u.OutputTokens) || m.Usage.CacheReadInputTokens != int64(u.CachedInputTokens) {
		t.Errorf("usage %+v", m.Usage)
	}
}

func TestAnthropicMessages(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAnthropic(t)
	u := llmtest.Usage{InputTokens: 25, OutputTokens: 40, CachedInputTokens: 5}
	a.Enqueue(
		llmtest.Reply{Text: "Let me check.", ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: u},
		llmtest.Reply{Text: "Paris.", StopReason: "max_tokens"},
	)
	c := anthropicClient(a)
	m, err := c.Messages.New(testContext(t), messageParams())
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "message", m)
	checkAnthropicMessage(t, m, "Let me check.", u)
	r := a.Last()
	checkRecorded(t, r, "POST", "/v1/messages")
	if r.Header.Get("x-api-key") != a.APIKey || r.Header.Get("anthropic-version") != "2023-06-01" || r.Model != "claude-sonnet-4-5" {
		t.Errorf("x-api-key %q, anthropic-version %q, model %q", r.Header.Get("x-api-key"), r.Header.Get("anthropic-version"), r.Model)
	}

	m, err = c.Messages.New(testContext(t), messageParams())
	if err != nil {
		t.Fatal(err)
	}
	if m.StopReason != anthropic.StopReasonMaxTokens || m.Content[0].Text != "Paris." {
		t.Errorf("stop %q content %+v", m.StopReason, m.Content)
	}
}

func TestAnthropicMessagesStream(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAnthropic(t)
	u := llmtest.Usage{InputTokens: 25, OutputTokens: 40}
	a.Enqueue(llmtest.Reply{Chunks: []string{"Let ", "me ", "check."}, ToolCalls: []llmtest.ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, Usage: u})
	c := anthropicClient(a)
	stream := c.Messages.NewStreaming(testContext(t), messageParams())
	var m anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		noUnknownFields(t, ev.Type, ev)
		types = append(types, ev.Type)
		if err := m.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	checkAnthropicMessage(t, &m, "Let me check.", u)
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta",
		"content_block_stop", "content_block_start", "content_block_delta", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if len(types) != len(want) {
		t.Errorf("events %v", types)
	}
	r := a.Last()
	checkRecorded(t, r, "POST", "/v1/messages")
	if !r.Stream {
		t.Error("recorded as not streamed")
	}
}

func TestAnthropicCountTokens(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAnthropic(t)
	a.Enqueue(llmtest.Reply{Usage: llmtest.Usage{InputTokens: 77}})
	c := anthropicClient(a)
	n, err := c.Messages.CountTokens(testContext(t), anthropic.MessageCountTokensParams{
		Model:    "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	noUnknownFields(t, "count", n)
	if n.InputTokens != 77 {
		t.Errorf("input tokens %d", n.InputTokens)
	}
	r := a.Last()
	checkRecorded(t, r, "POST", "/v1/messages/count_tokens")
	if r.Op != "count_tokens" || r.Model != "claude-sonnet-4-5" {
		t.Errorf("op %q model %q", r.Op, r.Model)
	}
}

func TestAnthropicRefusals(t *testing.T) {
	t.Parallel()
	a := llmtest.NewAnthropic(t)
	c := anthropic.NewClient(option.WithBaseURL(a.BaseURL()), option.WithAPIKey("sk-ant-wrong"), option.WithMaxRetries(0))
	_, err := c.Messages.New(testContext(t), messageParams())
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Type() != "authentication_error" || apiErr.RequestID == "" {
		t.Fatalf("wrong key: %v", err)
	}
	if a.Last().AuthError == "" {
		t.Error("refusal not recorded")
	}
	// An OAuth access token, once one is configured.
	a.OAuthToken = "sk-ant-oat01-emulated"
	c = anthropic.NewClient(option.WithBaseURL(a.BaseURL()), option.WithAuthToken(a.OAuthToken), option.WithMaxRetries(0))
	if _, err := c.Messages.New(testContext(t), messageParams()); err != nil {
		t.Errorf("OAuth token: %v", err)
	}
	// Without max_tokens: the API's validation error.
	c = anthropicClient(a)
	_, err = c.Messages.New(testContext(t), messageParams(), option.WithJSONDel("max_tokens"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Type() != "invalid_request_error" {
		t.Fatalf("no max_tokens: %v", err)
	}
}
