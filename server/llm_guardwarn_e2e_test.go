package server

import (
	"slices"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// TestLLMResponseGuardRejectWarns: a regex response guard masks what it
// matches whatever its action says, so its action: reject and rejection
// do nothing. agentgateway honors them (its files may carry them), so the
// file loads, with a warning naming each such field, at the route's, the
// backend's and a provider's policies; an answer is still masked, not
// refused. They used to be accepted without a word.
func TestLLMResponseGuardRejectWarns(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "card 4111 1111 1111 1111", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
	routeAI := `
promptGuard:
  request:
  - regex: {action: reject, rules: [{pattern: FORBIDDEN}]}
    rejection: {status: 422, body: "forbidden word"}
  response:
  - regex: {action: mask, rules: [{builtin: email}]}
  - regex: {action: reject, rules: [{builtin: creditCard}]}
    rejection: {status: 451, body: "card in answer"}
`
	providerPolicies := `backendAuth: {key: ` + o.APIKey + `}
ai:
  promptGuard:
    response:
    - regex: {rules: [{builtin: ssn}]}
      rejection: {status: 451}
    - regex: {action: reject, rules: [{builtin: creditCard}]}
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), providerPolicies, routeAI), nil)

	var fields []string
	for _, e := range tg.logs.FilterMessageSnippet("regex response guard masks").All() {
		fields = append(fields, e.ContextMap()["field"].(string))
	}
	slices.Sort(fields)
	want := []string{
		"backends[0].ai.policies.ai.promptGuard.response[0].rejection",
		"backends[0].ai.policies.ai.promptGuard.response[1].regex.action",
		"binds[0].listeners[0].routes[0].policies.ai.promptGuard.response[1].regex.action",
		"binds[0].listeners[0].routes[0].policies.ai.promptGuard.response[1].rejection",
	}
	prefix := "binds[0].listeners[0].routes[0]."
	for i := range want {
		if !strings.HasPrefix(want[i], prefix) {
			want[i] = prefix + want[i]
		}
	}
	if !slices.Equal(fields, want) {
		t.Errorf("warned of\n  %s\nwant\n  %s", strings.Join(fields, "\n  "), strings.Join(want, "\n  "))
	}

	// The warnings say true: the card is masked, the answer not refused.
	c := openaiVia(tg)
	got, err := c.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini"))
	if err != nil {
		t.Fatal(err)
	}
	if text := got.Choices[0].Message.Content; strings.Contains(text, "4111") || !strings.Contains(text, "<CREDIT_CARD>") {
		t.Errorf("answer %q, want the card masked", text)
	}
}

// TestLLMSectionResponseGuardRejectWarns: the llm section's guardrails
// and a model's warn of the same fields.
func TestLLMSectionResponseGuardRejectWarns(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	cfg := `
llm:
  models:` + sectionModel("m", o, `guardrails: {response: [{regex: {action: reject, rules: [{builtin: creditCard}]}}]}`) + `
  policies:
    guardrails:
      response:
      - regex: {action: mask, rules: [{builtin: email}]}
        rejection: {status: 451}
`
	tg := startGateway(t, cfg, nil)
	var fields []string
	for _, e := range tg.logs.FilterMessageSnippet("regex response guard masks").All() {
		fields = append(fields, e.ContextMap()["field"].(string))
	}
	slices.Sort(fields)
	want := []string{"llm.models[0].guardrails.response[0].regex.action", "llm.policies.guardrails.response[0].rejection"}
	if !slices.Equal(fields, want) {
		t.Errorf("warned of %q, want %q", fields, want)
	}
}
