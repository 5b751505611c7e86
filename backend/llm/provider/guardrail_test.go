package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/config"
)

// TestBedrockGuardrail: a provider's guardrail goes to Bedrock in every
// Converse and ConverseStream request of a chat route; the emulated
// guardrail intervenes (stopReason guardrail_intervened), which a Chat
// client reads as finish_reason content_filter.
func TestBedrockGuardrail(t *testing.T) {
	b := llmtest.NewBedrock(t)
	b.Guardrail = &llmtest.Guardrail{ID: "gr-7b3", Version: "2", Message: "Blocked by policy."}
	auth := &config.BackendAuth{AWS: &config.AWSAuth{AccessKeyID: b.AccessKeyID, SecretAccessKey: config.SecretString(b.SecretAccessKey)}}
	provider := func(id, version *string) *config.NamedAIProvider {
		np := bedrockAt(b)
		np.Provider.Bedrock.GuardrailIdentifier, np.Provider.Bedrock.GuardrailVersion = id, version
		return np
	}
	tests := []struct {
		desc        string
		id, version *string
		x           exchange
		status      int
		guardrail   string // the guardrailConfig Bedrock got ("" none)
		stop        string // in the answer
	}{
		{"chat", ptr("gr-7b3"), ptr("2"), exchange{rt: Completions, body: chatFor(bedrockModel, false)}, 200,
			`{"guardrailIdentifier":"gr-7b3","guardrailVersion":"2","trace":"enabled"}`, "guardrail_intervened"},
		{"messages stream", ptr("gr-7b3"), ptr("2"), exchange{rt: Messages, body: `{"model":"` + bedrockModel + `","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`}, 200,
			`{"guardrailIdentifier":"gr-7b3","guardrailVersion":"2","trace":"enabled"}`, "guardrail_intervened"},
		{"responses, a version Bedrock does not have", ptr("gr-7b3"), ptr("3"), exchange{rt: Responses, body: `{"model":"` + bedrockModel + `","input":"hi"}`}, 400,
			`{"guardrailIdentifier":"gr-7b3","guardrailVersion":"3","trace":"enabled"}`, "does not exist"},
		{"no guardrail", nil, nil, exchange{rt: Completions, body: chatFor(bedrockModel, false)}, 200, "", "end_turn"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, provider(tt.id, tt.version), auth)
			res := send(t, p, tt.x)
			r := b.Last()
			if res.status != tt.status || r.AuthError != "" {
				t.Fatalf("status %d (auth error %q), want %d: %s", res.status, r.AuthError, tt.status, res.body)
			}
			var sent struct{ GuardrailConfig json.RawMessage }
			if err := json.Unmarshal(r.Body, &sent); err != nil || string(sent.GuardrailConfig) != tt.guardrail {
				t.Errorf("guardrailConfig %s, want %s (%v)", sent.GuardrailConfig, tt.guardrail, err)
			}
			if !strings.Contains(res.body, tt.stop) {
				t.Errorf("the answer does not say %q: %.300q", tt.stop, res.body)
			}
		})
	}
}

// TestGuardrailStopReason: backend/llm/convert maps an intervention to the
// client's content filter stop.
func TestGuardrailStopReason(t *testing.T) {
	b := llmtest.NewBedrock(t)
	b.Guardrail = &llmtest.Guardrail{Message: "Blocked by policy."}
	auth := &config.BackendAuth{AWS: &config.AWSAuth{AccessKeyID: b.AccessKeyID, SecretAccessKey: config.SecretString(b.SecretAccessKey)}}
	np := bedrockAt(b)
	np.Provider.Bedrock.GuardrailIdentifier, np.Provider.Bedrock.GuardrailVersion = ptr("gr-1"), ptr("DRAFT")
	p := mustNew(t, np, auth)
	tests := []struct {
		client convert.Format
		rt     RouteType
		body   string
		want   string
	}{
		{convert.Chat, Completions, chatFor(bedrockModel, false), `"finish_reason":"content_filter"`},
		{convert.Messages, Messages, `{"model":"` + bedrockModel + `","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, `"stop_reason":"refusal"`},
	}
	for _, tt := range tests {
		t.Run(tt.client.String(), func(t *testing.T) {
			res := send(t, p, exchange{rt: tt.rt, body: tt.body})
			if res.status != 200 {
				t.Fatalf("status %d: %s", res.status, res.body)
			}
			out, _, err := convert.Response(nil, []byte(res.body), convert.RequestInfo{Client: tt.client, Provider: convert.Bedrock, Model: bedrockModel})
			if err != nil || !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), "Blocked by policy.") {
				t.Errorf("translated answer %s (%v), want %s and the guardrail's message", out, err, tt.want)
			}
		})
	}
}
