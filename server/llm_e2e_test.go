package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/guardrail/guardrailtest"
	"github.com/relaygate/gateway/backend/llm/llmtest"
)

// llmRoutes maps the three chat formats' paths to their route types.
const llmRoutes = `{"/v1/chat/completions": completions, "/v1/messages": messages, "/v1/responses": responses, "/v1/models": models, "/v1/embeddings": embeddings}`

// llmConfig is a gateway with one route to one ai backend; provider is the
// provider's YAML (`openAI: {}`), providerPolicies its policies, ai more of
// the route's ai policy, and route more route policies.
func llmConfig(provider, hostOverride, providerPolicies, ai string, route ...string) string {
	cfg := `
binds:
- port: 8080
  listeners:
  - routes:
    - name: llm
      policies:
        ai:
          routes: ` + llmRoutes + `
` + indent(ai, 10) + `
` + indent(strings.Join(route, "\n"), 8) + `
      backends:
      - ai:
          name: p
          hostOverride: ` + hostOverride + `
          provider: {` + provider + `}
`
	if providerPolicies != "" {
		cfg += "          policies:\n" + indent(providerPolicies, 12) + "\n"
	}
	return cfg
}

func indent(s string, n int) string {
	if s == "" {
		return ""
	}
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}

func llmCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openaiVia(tg *testGateway) openai.Client {
	return openai.NewClient(option.WithBaseURL(tg.url(8080)+"/v1"), option.WithAPIKey("client-key"), option.WithMaxRetries(0))
}

func anthropicVia(tg *testGateway) anthropic.Client {
	return anthropic.NewClient(anthropicopt.WithBaseURL(tg.url(8080)), anthropicopt.WithAPIKey("client-key"), anthropicopt.WithMaxRetries(0))
}

func chatRequest(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    openai.ChatModel(model),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("What is the capital of France?")},
	}
}

func messagesRequest(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 256,
		System:    []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the capital of France?"))},
	}
}

// openaiChat sends a chat request and its streaming twin through the
// gateway and checks both answers.
func openaiChat(t *testing.T, c openai.Client, model, want string) {
	t.Helper()
	resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest(model))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != want {
		t.Errorf("chat answer %q, want %q", got, want)
	}
	if resp.Usage.PromptTokens == 0 || resp.Usage.CompletionTokens == 0 {
		t.Errorf("chat usage %+v", resp.Usage)
	}
	s := c.Chat.Completions.NewStreaming(llmCtx(t), chatRequest(model))
	var text strings.Builder
	usageChunks := 0
	for s.Next() {
		ch := s.Current()
		if len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
		if ch.Usage.TotalTokens > 0 {
			usageChunks++
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("chat stream: %v", err)
	}
	if text.String() != want {
		t.Errorf("chat stream %q, want %q", text.String(), want)
	}
	if usageChunks != 0 {
		t.Errorf("the client did not ask for usage in its stream, got %d usage chunks", usageChunks)
	}
}

// anthropicChat is openaiChat for the Anthropic SDK.
func anthropicChat(t *testing.T, c anthropic.Client, model, want string) {
	t.Helper()
	msg, err := c.Messages.New(llmCtx(t), messagesRequest(model))
	if err != nil {
		t.Fatalf("messages: %v", err)
	}
	if len(msg.Content) == 0 || msg.Content[0].Text != want {
		t.Errorf("messages answer %+v, want %q", msg.Content, want)
	}
	if msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Errorf("messages usage %+v", msg.Usage)
	}
	s := c.Messages.NewStreaming(llmCtx(t), messagesRequest(model))
	var acc anthropic.Message
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("messages stream: %v", err)
	}
	if len(acc.Content) == 0 || acc.Content[0].Text != want {
		t.Errorf("messages stream %+v, want %q", acc.Content, want)
	}
}

func TestLLMProvidersThroughGateway(t *testing.T) {
	const answer = "Paris is the capital."
	reply := llmtest.Reply{Text: answer, Usage: llmtest.Usage{InputTokens: 20, OutputTokens: 5}}

	t.Run("openai", func(t *testing.T) {
		o := llmtest.NewOpenAI(t)
		o.SetDefault(reply)
		tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, ""), nil)
		openaiChat(t, openaiVia(tg), "gpt-4o-mini", answer)
		anthropicChat(t, anthropicVia(tg), "gpt-4o-mini", answer)
		for _, r := range o.Requests() {
			if r.AuthError != "" || r.Header.Get("Authorization") != "Bearer "+o.APIKey {
				t.Errorf("%s: auth %q (%s)", r.Path, r.Header.Get("Authorization"), r.AuthError)
			}
			if r.Stream {
				if so, _ := r.JSON()["stream_options"].(map[string]any); so["include_usage"] != true {
					t.Errorf("streamed request without include_usage: %s", r.Body)
				}
			}
		}
	})
	t.Run("anthropic", func(t *testing.T) {
		a := llmtest.NewAnthropic(t)
		a.SetDefault(reply)
		tg := startGateway(t, llmConfig(`anthropic: {}`, a.Addr(), `backendAuth: {key: `+a.APIKey+`}`, ""), nil)
		anthropicChat(t, anthropicVia(tg), "claude-sonnet-4-5", answer)
		openaiChat(t, openaiVia(tg), "claude-sonnet-4-5", answer)
		for _, r := range a.Requests() {
			if r.AuthError != "" || r.Path != "/v1/messages" {
				t.Errorf("%s: %s", r.Path, r.AuthError)
			}
		}
	})
	t.Run("gemini", func(t *testing.T) {
		g := llmtest.NewGemini(t)
		g.SetDefault(reply)
		tg := startGateway(t, llmConfig(`gemini: {}`, g.Addr(), `backendAuth: {key: `+g.APIKey+`}`, ""), nil)
		openaiChat(t, openaiVia(tg), "gemini-2.5-flash", answer)
		anthropicChat(t, anthropicVia(tg), "gemini-2.5-flash", answer)
		for _, r := range g.Requests() {
			if r.AuthError != "" || r.Model != "gemini-2.5-flash" {
				t.Errorf("%s: model %q auth %s", r.Path, r.Model, r.AuthError)
			}
		}
	})
	t.Run("vertex", func(t *testing.T) {
		v := llmtest.NewVertex(t)
		v.SetDefault(reply)
		provider := `vertex: {projectId: ` + v.Project + `, region: ` + v.Location + `}`
		auth := `backendAuth: {gcp: {credential: {file: ` + v.ServiceAccountFile() + `}}}`
		tg := startGateway(t, llmConfig(provider, v.Addr(), auth, ""), nil)
		openaiChat(t, openaiVia(tg), "gemini-2.5-pro", answer)
		anthropicChat(t, anthropicVia(tg), "claude-sonnet-4-5", answer)
		ops := map[string]int{}
		for _, r := range v.Requests() {
			if r.AuthError != "" {
				t.Errorf("%s: %s", r.Path, r.AuthError)
			}
			ops[r.Op]++
		}
		if ops["generateContent"]+ops["streamGenerateContent"] != 2 || ops["rawPredict"]+ops["streamRawPredict"] != 2 {
			t.Errorf("operations %v", ops)
		}
		if n := len(v.TokenRequests()); n != 1 {
			t.Errorf("%d token requests for 4 calls, want 1 (cached)", n)
		}
	})
	t.Run("bedrock", func(t *testing.T) {
		b := llmtest.NewBedrock(t)
		b.SetDefault(reply)
		provider := `bedrock: {region: ` + b.Region + `}`
		auth := `backendAuth: {aws: {accessKeyId: ` + b.AccessKeyID + `, secretAccessKey: ` + b.SecretAccessKey + `}}`
		tg := startGateway(t, llmConfig(provider, b.Addr(), auth, ""), nil)
		model := "anthropic.claude-3-haiku-20240307-v1:0"
		openaiChat(t, openaiVia(tg), model, answer)
		anthropicChat(t, anthropicVia(tg), model, answer)
		for _, r := range b.Requests() {
			if r.AuthError != "" || r.Model != model {
				t.Errorf("%s: model %q auth %s", r.Path, r.Model, r.AuthError)
			}
		}
	})
	t.Run("azure", func(t *testing.T) {
		az := llmtest.NewAzure(t)
		az.SetDefault(reply)
		provider := `azure: {resourceName: emulated, resourceType: openAI}`
		tg := startGateway(t, llmConfig(provider, az.Addr(), `backendAuth: {key: `+az.APIKey+`}`, ""), nil)
		openaiChat(t, openaiVia(tg), "gpt-4o", answer)
		anthropicChat(t, anthropicVia(tg), "gpt-4o", answer)
		for _, r := range az.Requests() {
			if r.AuthError != "" || !strings.HasPrefix(r.Path, "/openai/v1/") {
				t.Errorf("%s: %s", r.Path, r.AuthError)
			}
		}
	})
}

// TestLLMProviderErrorInClientShape: a provider's error reaches the client
// in its own SDK's error type, with the provider's status.
func TestLLMProviderErrorInClientShape(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Failure{Status: 400, Type: "invalid_request_error", Message: "max_tokens too large"})
	tg := startGateway(t, llmConfig(`anthropic: {}`, a.Addr(), `backendAuth: {key: `+a.APIKey+`}`, ""), nil)
	c := openaiVia(tg)
	_, err := c.Chat.Completions.New(llmCtx(t), chatRequest("claude-sonnet-4-5"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "max_tokens too large") {
		t.Fatalf("error %v", err)
	}
}

// TestLLMFailover: a dead provider and a 429-ing one are passed over
// within the client's request; the 429-ing one is evicted for a while.
func TestLLMFailover(t *testing.T) {
	limited := llmtest.NewOpenAI(t)
	limited.SetDefault(llmtest.Failure{Status: 429, RetryAfter: "30"})
	good := llmtest.NewOpenAI(t)
	good.SetDefault(llmtest.Reply{Text: "ok"})
	dead := strings.TrimPrefix(llmtest.RefusedURL(t), "http://")
	cfg := `
binds:
- port: 8080
  listeners:
  - routes:
    - name: llm
      backends:
      - ai:
          groups:
          - providers:
            - {name: dead, hostOverride: "` + dead + `", provider: {openAI: {}}}
            - {name: limited, hostOverride: "` + limited.Addr() + `", provider: {openAI: {}}, policies: {backendAuth: {key: ` + limited.APIKey + `}}}
          - providers:
            - {name: good, hostOverride: "` + good.Addr() + `", provider: {openAI: {}}, policies: {backendAuth: {key: ` + good.APIKey + `}}}
`
	tg := startGateway(t, cfg, nil)
	c := openaiVia(tg)
	for i := 0; i < 4; i++ {
		resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini"))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.Choices[0].Message.Content != "ok" {
			t.Fatalf("request %d answered %q", i, resp.Choices[0].Message.Content)
		}
	}
	if n := len(limited.Requests()); n != 1 {
		t.Errorf("the 429-ing provider got %d requests, want 1 (evicted after its Retry-After)", n)
	}
	if n := len(good.Requests()); n != 4 {
		t.Errorf("the good provider got %d requests, want 4", n)
	}
	var m bytes.Buffer
	tg.metrics().WritePrometheus(&m)
	for _, want := range []string{
		`agentgateway_gen_ai_provider_healthy{backend="llm",provider="limited"} 0`,
		`agentgateway_gen_ai_provider_healthy{backend="llm",provider="good"} 1`,
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	health, err := tg.gw.LLMProviders()
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Route     string
		Providers []struct {
			Name    string
			Evicted bool
		}
	}
	if err := json.Unmarshal(health, &got); err != nil {
		t.Fatal(err)
	}
	evicted := map[string]bool{}
	for _, b := range got {
		for _, p := range b.Providers {
			evicted[p.Name] = p.Evicted
		}
	}
	if !evicted["limited"] || !evicted["dead"] || evicted["good"] {
		t.Errorf("admin health %s", health)
	}
}

// TestLLMTokenMetricsAndCost: usage becomes GenAI token metrics, and a
// cost from config.modelCatalog, in the metrics and the access log.
func TestLLMTokenMetricsAndCost(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 1000, OutputTokens: 500}})
	cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "") + `
config:
  modelCatalog:
  - inline:
      providers:
        openai:
          models:
            gpt-4o-mini: {rates: {input: "0.15", output: "0.6"}}
`
	tg := startGateway(t, cfg, nil)
	c := openaiVia(tg)
	if _, err := c.Chat.Completions.New(llmCtx(t), chatRequest("gpt-4o-mini")); err != nil {
		t.Fatal(err)
	}
	var m bytes.Buffer
	tg.metrics().WritePrometheus(&m)
	for _, want := range []struct{ prefix, label, value string }{
		{"agentgateway_gen_ai_client_token_usage_sum{", `gen_ai_token_type="input"`, "1000"},
		{"agentgateway_gen_ai_client_token_usage_sum{", `gen_ai_token_type="output"`, "500"},
		{"agentgateway_gen_ai_client_cost_total{", `gen_ai_request_model="gpt-4o-mini"`, "0.00045"},
	} {
		found := false
		for _, line := range strings.Split(m.String(), "\n") {
			if strings.HasPrefix(line, want.prefix) && strings.Contains(line, want.label) && strings.HasSuffix(line, " "+want.value) {
				found = true
			}
		}
		if !found {
			t.Errorf("metrics lack %s...%s... %s:\n%s", want.prefix, want.label, want.value, m.String())
		}
	}
	// 1000 x 0.15/1M + 500 x 0.6/1M
	const want = 0.00045
	eventually(t, 5*time.Second, "the access log line", func() bool {
		for _, e := range tg.accessLogs().FilterMessage("request").All() {
			if v, ok := e.ContextMap()["llm.cost"].(float64); ok {
				if v < want-1e-12 || v > want+1e-12 {
					t.Errorf("logged cost %v, want %v", v, want)
				}
				if e.ContextMap()["llm.input_tokens"] != int64(1000) {
					t.Errorf("logged %v", e.ContextMap())
				}
				return true
			}
		}
		return false
	})
}

// TestLLMBodyTooLarge: a prompt beyond maxBufferSize is refused with 413
// before anything is sent.
func TestLLMBodyTooLarge(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	cfg := llmConfig(`openAI: {}`, o.Addr(), "", "") + `
frontendPolicies:
  http: {maxBufferSize: 1024}
`
	tg := startGateway(t, cfg, nil)
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 2000) + `"}]}`
	resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("status %d, want 413", resp.StatusCode)
	}
	if n := len(o.Requests()); n != 0 {
		t.Errorf("the provider got %d requests", n)
	}
}

// TestLLMPolicyEdits: aliases, defaults, overrides and prompt enrichment
// reach the provider; the client's own fields win over defaults only.
func TestLLMPolicyEdits(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok"})
	policies := `
modelAliases: {fast: gpt-4o-mini, "claude-*": gpt-4o}
defaults: {temperature: 0.5, max_tokens: 100}
overrides: {top_p: 0.9}
prompts:
  prepend: [{role: system, content: "Answer in French."}]
  append: [{role: user, content: "Thank you."}]
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
	c := openaiVia(tg)
	req := chatRequest("fast")
	req.Temperature = openai.Float(0.1)
	if _, err := c.Chat.Completions.New(llmCtx(t), req); err != nil {
		t.Fatal(err)
	}
	got := o.Last().JSON()
	if got["model"] != "gpt-4o-mini" || got["temperature"] != 0.1 || got["max_tokens"] != float64(100) || got["top_p"] != 0.9 {
		t.Errorf("provider got model %v temperature %v max_tokens %v top_p %v", got["model"], got["temperature"], got["max_tokens"], got["top_p"])
	}
	msgs, _ := got["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("messages %v", msgs)
	}
	first, _ := msgs[0].(map[string]any)
	last, _ := msgs[3].(map[string]any)
	if first["content"] != "Answer in French." || last["content"] != "Thank you." {
		t.Errorf("enrichment: first %v last %v", first, last)
	}
	// A wildcard alias, through the Anthropic SDK.
	a := anthropicVia(tg)
	if _, err := a.Messages.New(llmCtx(t), messagesRequest("claude-3-opus")); err != nil {
		t.Fatal(err)
	}
	if m := o.Last().JSON()["model"]; m != "gpt-4o" {
		t.Errorf("wildcard alias gave model %v", m)
	}
	// Embeddings: not translated, but aliased and given the defaults.
	emb, err := c.Embeddings.New(llmCtx(t), openai.EmbeddingNewParams{Model: "fast", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil || len(emb.Data) != 1 {
		t.Fatalf("embeddings: %v", err)
	}
	if last := o.Last(); last.Op != "embeddings" || last.Model != "gpt-4o-mini" {
		t.Errorf("embeddings reached the provider as %s model %q", last.Op, last.Model)
	}
}

// TestLLMRegexGuards: a rejecting request guard keeps the prompt from the
// provider; a masking one edits it; a response guard masks the answer,
// streamed or not.
func TestLLMRegexGuards(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	policies := `
promptGuard:
  request:
  - regex: {action: reject, rules: [{builtin: creditCard}]}
    rejection: {status: 422, body: "no cards"}
  - regex: {action: mask, rules: [{builtin: email}]}
  response:
  - regex: {rules: [{builtin: ssn}]}
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, policies), nil)
	c := openaiVia(tg)
	ask := func(prompt string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
	}

	_, err := c.Chat.Completions.New(llmCtx(t), ask("charge 4111 1111 1111 1111 please"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 422 {
		t.Fatalf("card prompt: %v", err)
	}
	settleRecords(t, tg.gw)
	fams := scrapeGateway(t, tg.gw)
	if s := seriesOf(fams, "agentgateway_gen_ai_server_request_duration_seconds", map[string]string{"error_type": "guardrail_rejected"}); s == nil || s.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("the rejected prompt in the duration metric: %v, want one request of error_type guardrail_rejected", s)
	}
	if n := len(o.Requests()); n != 0 {
		t.Fatalf("a rejected prompt reached the provider (%d requests)", n)
	}

	o.Enqueue(llmtest.Reply{Text: "ok"})
	if _, err := c.Chat.Completions.New(llmCtx(t), ask("mail bob@example.com")); err != nil {
		t.Fatal(err)
	}
	if body := string(o.Last().Body); strings.Contains(body, "bob@example.com") || !strings.Contains(body, "<EMAIL_ADDRESS>") {
		t.Errorf("masked prompt reached the provider as %s", body)
	}

	secret := "Your SSN is 078-05-1120, keep it safe."
	o.Enqueue(llmtest.Reply{Text: secret})
	resp, err := c.Chat.Completions.New(llmCtx(t), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; strings.Contains(got, "078-05-1120") {
		t.Errorf("answer not masked: %q", got)
	}
	// Streamed, the number split across chunks.
	o.Enqueue(llmtest.Reply{Chunks: []string{"Your SSN is 078-0", "5-11", "20, keep it safe."}})
	s := c.Chat.Completions.NewStreaming(llmCtx(t), ask("hi"))
	var text strings.Builder
	for s.Next() {
		if ch := s.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if got := text.String(); strings.Contains(got, "078-05-1120") || !strings.Contains(got, "keep it safe.") {
		t.Errorf("streamed answer %q", got)
	}
}

// TestLLMRateLimits: a request bucket refuses with 429 and the
// x-ratelimit-* headers; a token bucket charges the usage and refuses once
// spent.
func TestLLMRateLimits(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 60, OutputTokens: 40}})
	limits := `
localRateLimit:
- {maxTokens: 3, tokensPerFill: 1, fillInterval: 1h}
- {maxTokens: 150, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits), nil)
	post := func() *http.Response {
		t.Helper()
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
		resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// 150 tokens: the first exchange (100) leaves 50, the second (100)
	// takes the bucket to -50, the third is refused by the token bucket.
	for i, want := range []int{200, 200, 429} {
		resp := post()
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
		if resp.Header.Get("X-Ratelimit-Limit") == "" {
			t.Errorf("request %d: no x-ratelimit-limit", i)
		}
		if want == 429 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if n := len(o.Requests()); n != 2 {
		t.Errorf("provider got %d requests, want 2", n)
	}
	fams := scrapeGateway(t, tg.gw)
	if s := seriesOf(fams, "agentgateway_gen_ai_server_request_duration_seconds", map[string]string{"error_type": "rate_limited"}); s == nil || s.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("the refused request in the duration metric: %v, want once under error_type rate_limited", s)
	}
}

// TestLLMCutStreamChargesAnEstimate: a streamed answer cut before the
// provider's usage came (a broken stream here; a client that leaves
// mid-answer ends the same way) charges the token buckets an estimate: the
// prompt by the tokenizer and a token per delta streamed. It used to charge
// nothing, so a client could take most of every answer and leave before
// its usage, never spending its token budget. A complete stream charges the
// usage the provider reported, as before.
func TestLLMCutStreamChargesAnEstimate(t *testing.T) {
	limits := `
localRateLimit:
- {maxTokens: 100, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	words := make([]string, 300)
	for i := range words {
		words[i] = "tok "
	}
	for _, tc := range []struct {
		name     string
		provider string
		emulator func(t *testing.T) (*llmtest.Server, string)
	}{
		{"openAI, passed through", `openAI: {}`, func(t *testing.T) (*llmtest.Server, string) {
			o := llmtest.NewOpenAI(t)
			return o.Server, o.APIKey
		}},
		{"anthropic, translated", `anthropic: {}`, func(t *testing.T) (*llmtest.Server, string) {
			a := llmtest.NewAnthropic(t)
			return a.Server, a.APIKey
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, key := tc.emulator(t)
			tg := startGateway(t, llmConfig(tc.provider, e.Addr(), `backendAuth: {key: `+key+`}`, "", limits), nil)
			stream := func() {
				t.Helper()
				body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
				resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("stream: status %d", resp.StatusCode)
				}
			}
			post := func() int {
				t.Helper()
				body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
				resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			// A complete stream of 300 deltas whose usage says 10 tokens:
			// 10 are charged, the bucket keeps 90.
			e.Enqueue(llmtest.Reply{Chunks: words, Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
			stream()
			e.Enqueue(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
			if got := post(); got != 200 {
				t.Fatalf("after a complete stream: %d, want 200 (its reported usage charged)", got)
			}
			// Cut after 150 events: about 150 tokens streamed, no usage.
			e.Enqueue(llmtest.Reply{Chunks: words, DropAfter: 150})
			stream()
			e.Enqueue(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
			if got := post(); got != 429 {
				t.Fatalf("after a cut stream: %d, want 429 (its estimate charged)", got)
			}
		})
	}
}

// TestLLMBigStreamEventChargesUsage: a same-format stream with an event
// past convert.MaxEventBytes (a generated image in base64, a huge delta)
// reaches the client whole, and the token bucket is charged the usage the
// provider reported (in the big response.completed itself for Responses).
// Such a stream used to lose its usage and be charged its bytes over four
// as an estimate: one 1.2 MB stream put a 100k bucket in debt for every
// client (Retry-After: 720 s). A Chat client that did not ask for the
// usage gets the big chunk too, and not the usage chunk the gateway asked
// for; its stream used to end with an error event instead.
func TestLLMBigStreamEventChargesUsage(t *testing.T) {
	limits := `
localRateLimit:
- {maxTokens: 100000, tokensPerFill: 100000, fillInterval: 60s, type: tokens}
`
	o := llmtest.NewOpenAI(t)
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits), nil)
	huge := strings.Repeat("iVBORw0KGgo", 110000) // 1.2 MB
	remaining := 100000
	for _, tc := range []struct {
		name, path, body string
	}{
		{"responses", "/v1/responses", `{"model":"m","stream":true,"input":"hi"}`},
		{"chat with usage", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{"chat without usage", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o.Enqueue(llmtest.Reply{Chunks: []string{"a ", huge}, Usage: llmtest.Usage{InputTokens: 11, OutputTokens: 22}})
			resp, err := http.Post(tg.url(8080)+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), huge) {
				t.Fatalf("status %d, %v, %d bytes: the big event did not come through: %.300q", resp.StatusCode, err, len(body), body)
			}
			if strings.HasPrefix(tc.name, "chat") {
				usage := strings.Contains(string(body), `"usage":{`)
				if usage != strings.Contains(tc.body, "include_usage") || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
					t.Errorf("usage chunk sent: %v; stream ends %q", usage, body[len(body)-40:])
				}
			}
			remaining -= 33
			settleRecords(t, tg.gw)
			o.Enqueue(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
			after, _ := postJSON(t, tg.url(8080)+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if got := after.Header.Get("X-Ratelimit-Remaining"); after.StatusCode != 200 || got != strconv.Itoa(remaining) {
				t.Fatalf("next request: %d, %s tokens left, want 200 and %d (the usage charged, 33 tokens)", after.StatusCode, got, remaining)
			}
			remaining -= 10
		})
	}
}

// TestLLMClientGoneChargesThePrompt: a client that leaves before a whole
// (not streamed) answer came is charged its prompt, estimated by the
// tokenizer: the provider had read it. It used to be charged nothing, so
// long prompts sent and abandoned never spent the token budget.
func TestLLMClientGoneChargesThePrompt(t *testing.T) {
	limits := `
localRateLimit:
- {maxTokens: 100, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	o := llmtest.NewOpenAI(t)
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits), nil)
	post := func(ctx context.Context, content string) (int, error) {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + content + `"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", tg.url(8080)+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// A prompt of about 300 tokens; the provider thinks, the client leaves.
	o.Enqueue(llmtest.Reply{Text: "late", Delay: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := post(ctx, strings.Repeat("word ", 300)); done <- err }()
	eventually(t, 5*time.Second, "the provider reading the prompt", func() bool { return len(o.Requests()) == 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the abandoned request got an answer")
	}
	eventually(t, 5*time.Second, "the abandoned request's record", func() bool {
		return tg.accessLogs().FilterMessage("request").Len() == 1
	})
	o.Enqueue(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
	if got, err := post(context.Background(), "hi"); err != nil || got != 429 {
		t.Fatalf("after an abandoned long prompt: %d %v, want 429 (the prompt charged)", got, err)
	}
}

// TestLLMFailuresInTheMetrics: an LLM request that got no usable answer
// (its provider unreachable, its answer broken) is in the GenAI request
// duration metric under its error type, as the conventions ask for failed
// operations. Such requests used to be in no GenAI metric at all.
func TestLLMFailuresInTheMetrics(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	bind := func(port int, host, key string) string {
		return fmt.Sprintf(`
- port: %d
  listeners:
  - routes:
    - backends:
      - ai: {name: p, hostOverride: %s, provider: {openAI: {}}, policies: {backendAuth: {key: %s}}}`, port, host, key)
	}
	tg := startGateway(t, "binds:"+bind(8080, closedAddr(t), "k")+bind(8081, o.Addr(), o.APIKey)+"\n", nil)
	o.Enqueue(llmtest.Reply{Text: "half an answer", DropAfter: 1})
	for _, port := range []int{8080, 8081} {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
		resp, err := http.Post(tg.url(port)+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Fatalf("port %d: status %d, want a failure", port, resp.StatusCode)
		}
	}
	settleRecords(t, tg.gw)
	fams := scrapeGateway(t, tg.gw)
	for _, errType := range []string{"connect", "protocol"} {
		s := seriesOf(fams, "agentgateway_gen_ai_server_request_duration_seconds", map[string]string{"gen_ai_operation_name": "chat", "error_type": errType})
		if s == nil || s.GetHistogram().GetSampleCount() != 1 {
			t.Errorf("error_type %s: %v, want one failed request in the duration metric", errType, s)
		}
	}
}

// TestLLMTokenizeRefusesUpFront: with tokenize: true the prompt's tokens
// are estimated before the request is sent, so a prompt the token bucket
// cannot pay for is refused (429) without reaching the provider, the same
// prompt again too (its count now cached), while a short one still passes.
// A prompt larger than the bucket can ever hold gets no Retry-After (it
// used to get "Retry-After: 1" forever) and a body saying why; one that
// must wait for the bucket to fill gets one. Tool results and tool-call
// arguments count: they once passed uncounted.
func TestLLMTokenizeRefusesUpFront(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok", Usage: llmtest.Usage{InputTokens: 5, OutputTokens: 5}})
	limits := `
localRateLimit:
- {maxTokens: 100, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "", limits)
	cfg = strings.Replace(cfg, "          name: p\n", "          name: p\n          tokenize: true\n", 1)
	tg := startGateway(t, cfg, nil)
	post := func(prompt string, retry bool) int {
		t.Helper()
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + prompt + `"}]}`
		if strings.HasPrefix(prompt, "[") { // the messages themselves
			body = `{"model":"gpt-4o-mini","messages":` + prompt + `}`
		}
		resp, err := http.Post(tg.url(8080)+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 429 && (resp.Header.Get("Retry-After") != "") != retry {
			t.Errorf("429 with Retry-After %q, want one: %v", resp.Header.Get("Retry-After"), retry)
		}
		if resp.StatusCode == 429 && !retry && !strings.Contains(string(got), "exceeds the rate limit's capacity") {
			t.Errorf("429 body %q", got)
		}
		return resp.StatusCode
	}
	long := strings.Repeat("Count these words before sending them. ", 40) // about 280 tokens
	medium := strings.Repeat("Count these words. ", 20)                   // about 80 tokens
	for i, c := range []struct {
		prompt string
		retry  bool // a 429 says when to retry
		status int
		sent   int
	}{
		{"hi", false, 200, 1},
		{long, false, 429, 1},
		{long, false, 429, 1},
		{"hello again", false, 200, 2},
		{medium, true, 429, 2}, // more than the 80 left, less than 100: wait
		// An agent's prompt that is mostly tool output and arguments.
		{`[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"q\":\"` + medium + `\"}"}}]},{"role":"tool","tool_call_id":"c","content":"` + long + `"}]`, false, 429, 2},
	} {
		if got := post(c.prompt, c.retry); got != c.status {
			t.Fatalf("request %d: status %d, want %d", i, got, c.status)
		}
		if n := len(o.Requests()); n != c.sent {
			t.Fatalf("request %d: the provider has %d requests, want %d", i, n, c.sent)
		}
	}
}

// TestLLMBadRequests: what a client gets for requests the gateway cannot
// serve: each a clear status, in the client's error shape where it has
// one, and nothing sent to the provider.
func TestLLMBadRequests(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok"})
	cfg := llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, "") + `
frontendPolicies:
  http: {maxBufferSize: 4096}
`
	tg := startGateway(t, cfg, nil)
	for _, c := range []struct {
		desc, method, path, body string
		chunked                  bool
		status                   int
		contains                 string
	}{
		{"not JSON", "POST", "/v1/chat/completions", "hello", false, 400, `"error"`},
		{"JSON but not an object", "POST", "/v1/messages", `[1,2]`, false, 400, `"type":"error"`},
		{"nested deeper than the decoder goes", "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}]}`, false, 400, "nested at most 512 deep"},
		{"GET on a chat path", "GET", "/v1/chat/completions", "", false, 405, ""},
		{"chunked body beyond maxBufferSize", "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, true, 413, `{"error":{"message":"request body too large","type":"invalid_request_error"`},
		{"body beyond maxBufferSize, Anthropic's shape", "POST", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, false, 413, `{"type":"error","error":{"type":"request_too_large","message":"request body too large"}}`},
		{"unknown content coding", "POST", "/v1/chat/completions", "coding:zz", false, 415, `"message":"unsupported content encoding"`},
		{"content coding that does not decode", "POST", "/v1/messages", "coding:gzip", false, 400, `"message":"request body is not valid gzip"`},
	} {
		t.Run(c.desc, func(t *testing.T) {
			var body io.Reader = strings.NewReader(c.body)
			if c.chunked {
				body = io.MultiReader(strings.NewReader(c.body)) // no length: sent chunked
			}
			coding, isCoded := strings.CutPrefix(c.body, "coding:")
			if isCoded {
				body = strings.NewReader("not what it says it is")
			}
			req, _ := http.NewRequest(c.method, tg.url(8080)+c.path, body)
			req.Header.Set("Content-Type", "application/json")
			if isCoded {
				req.Header.Set("Content-Encoding", coding)
			}
			resp, got := do(t, req)
			if resp.StatusCode != c.status || !strings.Contains(got, c.contains) {
				t.Errorf("%d %q, want %d with %q", resp.StatusCode, got, c.status, c.contains)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json: SDKs read the gateway's own errors as JSON", ct)
			}
		})
	}
	if n := len(o.Requests()); n != 0 {
		t.Errorf("the provider got %d requests", n)
	}
}

// TestLLMProviderTimeoutAndCutStream: a provider that does not answer in
// time is a 504 in the client's shape; a stream the provider cuts ends
// with an error event, and the gateway keeps serving.
func TestLLMProviderTimeoutAndCutStream(t *testing.T) {
	a := llmtest.NewAnthropic(t)
	tg := startGateway(t, llmConfig(`anthropic: {}`, a.Addr(), `backendAuth: {key: `+a.APIKey+`}`, "", `timeout: {requestTimeout: 300ms}`), nil)
	release := a.Hold()
	c := openaiVia(tg)
	_, err := c.Chat.Completions.New(llmCtx(t), chatRequest("claude-sonnet-4-5"))
	release()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 504 {
		t.Fatalf("held provider: %v", err)
	}

	a.Enqueue(llmtest.Reply{Chunks: []string{"one ", "two ", "three"}, DropAfter: 2})
	s := c.Chat.Completions.NewStreaming(llmCtx(t), chatRequest("claude-sonnet-4-5"))
	for s.Next() {
	}
	if s.Err() == nil {
		t.Errorf("a cut stream ended without an error")
	}
	a.Enqueue(llmtest.Reply{Text: "fine"})
	resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("claude-sonnet-4-5"))
	if err != nil || resp.Choices[0].Message.Content != "fine" {
		t.Fatalf("after the cut stream: %v", err)
	}
}

// TestLLMPassedThroughStreamCut: a stream passed through in the client's
// own format that the provider cuts mid-answer is cut for the client too
// (its chunked body ends without its last chunk), as it would be without
// the gateway. It used to end cleanly, so the client took half an answer
// for a whole one: the OpenAI SDK saw no error.
func TestLLMPassedThroughStreamCut(t *testing.T) {
	for _, tc := range []struct {
		name, provider, path, body string
		emulator                   func(t *testing.T) (*llmtest.Server, string)
	}{
		{"openAI chat", `openAI: {}`, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T) (*llmtest.Server, string) { o := llmtest.NewOpenAI(t); return o.Server, o.APIKey }},
		{"anthropic messages", `anthropic: {}`, "/v1/messages", `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T) (*llmtest.Server, string) { a := llmtest.NewAnthropic(t); return a.Server, a.APIKey }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, key := tc.emulator(t)
			tg := startGateway(t, llmConfig(tc.provider, e.Addr(), `backendAuth: {key: `+key+`}`, ""), nil)
			for _, client := range []*http.Client{http.DefaultClient, h2cClient()} {
				e.Enqueue(llmtest.Reply{Chunks: []string{"one ", "two ", "three ", "four"}, DropAfter: 3})
				resp, err := client.Post(tg.url(8080)+tc.path, "application/json", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || len(got) == 0 {
					t.Fatalf("%s: status %d, %d bytes: want the stream's start", resp.Proto, resp.StatusCode, len(got))
				}
				if err == nil {
					t.Fatalf("%s: the cut stream ended cleanly for the client: %q", resp.Proto, got)
				}
			}
			// The gateway serves on.
			e.Enqueue(llmtest.Reply{Text: "fine"})
			resp, err := http.Post(tg.url(8080)+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !strings.Contains(string(got), "fine") {
				t.Fatalf("after the cut: %v %q", err, got)
			}
		})
	}
}

// TestLLMPromptCaching: promptCaching puts cache points into the request
// the provider gets (Bedrock cachePoint blocks, Anthropic cache_control).
func TestLLMPromptCaching(t *testing.T) {
	long := strings.Repeat("You are a careful assistant who knows a great deal about geography. ", 40)
	req := openai.ChatCompletionNewParams{
		Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(long), openai.UserMessage("What is the capital of France?"),
			openai.AssistantMessage("Paris."), openai.UserMessage("And of Spain?"),
		},
	}
	caching := `promptCaching: {minTokens: 100}`
	t.Run("anthropic", func(t *testing.T) {
		a := llmtest.NewAnthropic(t)
		a.SetDefault(llmtest.Reply{Text: "Madrid."})
		tg := startGateway(t, llmConfig(`anthropic: {}`, a.Addr(), `backendAuth: {key: `+a.APIKey+`}`, caching), nil)
		c := openaiVia(tg)
		if _, err := c.Chat.Completions.New(llmCtx(t), req); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(a.Last().Body), `"cache_control"`); n < 2 {
			t.Errorf("%d cache_control marks in %s", n, a.Last().Body)
		}
	})
	t.Run("bedrock", func(t *testing.T) {
		b := llmtest.NewBedrock(t)
		b.SetDefault(llmtest.Reply{Text: "Madrid."})
		auth := `backendAuth: {aws: {accessKeyId: ` + b.AccessKeyID + `, secretAccessKey: ` + b.SecretAccessKey + `}}`
		tg := startGateway(t, llmConfig(`bedrock: {region: `+b.Region+`}`, b.Addr(), auth, caching), nil)
		c := openaiVia(tg)
		r := req
		r.Model = "anthropic.claude-3-7-sonnet-20250219-v1:0"
		if _, err := c.Chat.Completions.New(llmCtx(t), r); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b.Last().Body), `"cachePoint"`); n < 2 {
			t.Errorf("%d cache points in %s", n, b.Last().Body)
		}
	})
}

// TestLLMAccessLogKeepsTheClientsPath: the provider's target replaces the
// request's, and the access log and CEL's request.path still say what the
// client asked for, also where the client's path is the longer one (it
// once showed the provider's path written over the client's, with the
// client's tail: "/v1/chat/completionsons").
func TestLLMAccessLogKeepsTheClientsPath(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	cfg := strings.Replace(llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, ""),
		"    - name: llm\n", "    - name: llm\n      matches: [{path: {pathPrefix: /team-a/}}]\n", 1) + `
frontendPolicies:
  accessLog:
    add: {celpath: request.path}
`
	tg := startGateway(t, cfg, nil)
	const path = "/team-a/v1/chat/completions"
	resp, body := postJSON(t, tg.url(8080)+path+"?trace=1", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := o.Requests(); len(got) != 1 || got[0].Path != "/v1/chat/completions" {
		t.Fatalf("provider saw %+v", got)
	}
	eventually(t, 5*time.Second, "the access log line", func() bool {
		lines := tg.accessLogs().FilterMessage("request").All()
		if len(lines) == 0 {
			return false
		}
		if m := lines[0].ContextMap(); m["path"] != path || m["celpath"] != path {
			t.Errorf("logged path %q, request.path %q; want %q", m["path"], m["celpath"], path)
		}
		return true
	})
}

// TestLLMAnswerWithoutUsageChargesAnEstimate: a provider that reports no
// usage (an OpenAI-compatible server without it, one that ignores
// stream_options.include_usage) is charged an estimate, whole answers and
// streams alike: the prompt by the tokenizer and the answer by its size.
// It used to be charged nothing, which made token budgets unlimited behind
// such a provider. A negative count from a provider counts as none: it
// reaches neither the budgets nor the access log.
func TestLLMAnswerWithoutUsageChargesAnEstimate(t *testing.T) {
	answer := strings.Repeat("word ", 200) // about 200 tokens, 1000 bytes
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		usage := ""
		if strings.Contains(r.Header.Get("X-Test"), "negative") {
			usage = `,"usage":{"prompt_tokens":-1000000,"completion_tokens":3,"total_tokens":-999997}`
		}
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, word := range strings.SplitAfter(answer, " ") {
				fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", word)
			}
			io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]%s}`, answer, usage)
	}))
	t.Cleanup(provider.Close)
	limits := `
localRateLimit:
- {maxTokens: 150, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	post := func(tg *testGateway, stream bool, header string) int {
		t.Helper()
		body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		resp, got := postJSON(t, tg.url(8080)+"/v1/chat/completions", body, "X-Test", header)
		if resp.StatusCode == 200 && !strings.Contains(got, "word") {
			t.Fatalf("answer %q", got)
		}
		return resp.StatusCode
	}
	addr := strings.TrimPrefix(provider.URL, "http://")
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			tg := startGateway(t, llmConfig(`openAI: {}`, addr, `backendAuth: {key: k}`, "", limits), nil)
			if got := post(tg, stream, ""); got != 200 {
				t.Fatalf("first answer: %d", got)
			}
			if got := post(tg, stream, ""); got != 429 {
				t.Fatalf("after an answer of about 200 tokens without usage: %d, want 429 (an estimate charged)", got)
			}
		})
	}
	t.Run("negative usage", func(t *testing.T) {
		tg := startGateway(t, llmConfig(`openAI: {}`, addr, `backendAuth: {key: k}`, "", limits), nil)
		if got := post(tg, false, "negative"); got != 200 {
			t.Fatalf("answer: %d", got)
		}
		eventually(t, 5*time.Second, "the access log line", func() bool {
			lines := tg.accessLogs().FilterMessage("request").All()
			if len(lines) == 0 {
				return false
			}
			if v := lines[0].ContextMap()["llm.input_tokens"]; v != int64(0) {
				t.Errorf("logged input tokens %v, want 0", v)
			}
			return true
		})
	})
}

// TestLLMRepeatedModelIsSentOnce: a body that names its model twice is
// routed, authorized and accounted by the last one, so the provider gets
// that one alone. It used to get the body as sent: a provider whose JSON
// parser takes the first member served a model the gateway never saw.
func TestLLMRepeatedModelIsSentOnce(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, ""), nil)
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"secret-1","model":"public-1","messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/embeddings", `{"model":"secret-1","input":"hi","model":"public-1"}`},
	} {
		resp, got := postJSON(t, tg.url(8080)+tc.path, tc.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", tc.path, resp.StatusCode, got)
		}
		sent := string(o.Last().Body)
		if strings.Count(sent, `"model"`) != 1 || !strings.Contains(sent, `"public-1"`) || strings.Contains(sent, "secret") {
			t.Errorf("%s: the provider got %s", tc.path, sent)
		}
	}
}

// TestLLMGeminiEmptyTextPart: Gemini often ends an answer with an empty
// text part after its function calls. It makes no content block for an
// Anthropic client (whose API refuses an empty text block when the turn
// is sent back) and no message item for a Responses client, streamed or
// not: the client sees the function call alone.
func TestLLMGeminiEmptyTextPart(t *testing.T) {
	g := llmtest.NewGemini(t)
	tg := startGateway(t, llmConfig(`gemini: {}`, g.Addr(), `backendAuth: {key: `+g.APIKey+`}`, ""), nil)
	call := llmtest.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}
	for _, tc := range []struct {
		path, body string
		// types are the kinds of the answer's blocks or items: for a
		// stream, those started and those of the final answer.
		types func(t *testing.T, body []byte, stream bool) []string
	}{
		{"/v1/messages", `{"model":"gemini-2.5-flash","max_tokens":50,"messages":[{"role":"user","content":"weather?"}]`, messagesBlockTypes},
		{"/v1/responses", `{"model":"gemini-2.5-flash","input":"weather?"`, responsesItemTypes},
	} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", tc.path, stream), func(t *testing.T) {
				g.Enqueue(llmtest.Reply{ToolCalls: []llmtest.ToolCall{call}, EmptyTextLast: true})
				body := tc.body + `}`
				if stream {
					body = tc.body + `,"stream":true}`
				}
				resp, err := http.Post(tg.url(8080)+tc.path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				out, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("%d %v: %s", resp.StatusCode, err, out)
				}
				want := "tool_use"
				if tc.path == "/v1/responses" {
					want = "function_call"
				}
				got := tc.types(t, out, stream)
				for _, typ := range got {
					if typ != want {
						t.Fatalf("the answer has %v; want %s alone:\n%s", got, want, out)
					}
				}
				if len(got) == 0 {
					t.Fatalf("no %s in the answer:\n%s", want, out)
				}
			})
		}
	}
}

// sseData is the JSON data of each event of an SSE stream.
func sseData(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// messagesBlockTypes are the types of a Messages answer's content blocks
// (a stream's started ones).
func messagesBlockTypes(t *testing.T, body []byte, stream bool) []string {
	var types []string
	if !stream {
		var m struct{ Content []struct{ Type string } }
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		for _, b := range m.Content {
			types = append(types, b.Type)
		}
		return types
	}
	for _, ev := range sseData(t, body) {
		if ev["type"] == "content_block_start" {
			b, _ := ev["content_block"].(map[string]any)
			types = append(types, fmt.Sprint(b["type"]))
		}
	}
	return types
}

// responsesItemTypes are the types of a Responses answer's output items
// (a stream's added ones and its completed response's).
func responsesItemTypes(t *testing.T, body []byte, stream bool) []string {
	var types []string
	output := func(r any) {
		m, _ := r.(map[string]any)
		items, _ := m["output"].([]any)
		for _, it := range items {
			i, _ := it.(map[string]any)
			types = append(types, fmt.Sprint(i["type"]))
		}
	}
	if !stream {
		var r map[string]any
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		output(r)
		return types
	}
	for _, ev := range sseData(t, body) {
		switch ev["type"] {
		case "response.output_item.added":
			i, _ := ev["item"].(map[string]any)
			types = append(types, fmt.Sprint(i["type"]))
		case "response.completed":
			output(ev["response"])
		}
	}
	return types
}

// TestLLMStreamWithoutLastBlankLine: a provider that sends its whole
// stream, its end marker included ("data: [DONE]", message_stop), but not
// the blank line after it has answered whole: the client gets a complete
// stream, ended as its format ends one, in its own format or translated,
// over HTTP/1.1 and HTTP/2. It used to be taken for a cut stream: a
// passed-through one was cut (the OpenAI SDK failed with "terminated"), a
// translated one ended with an error event.
func TestLLMStreamWithoutLastBlankLine(t *testing.T) {
	chat := func(usage bool) string {
		opt := ""
		if usage {
			opt = `"stream_options":{"include_usage":true},`
		}
		return `{"model":"m","stream":true,` + opt + `"messages":[{"role":"user","content":"hi"}]}`
	}
	const messages = `{"model":"m","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for _, tc := range []struct {
		name, provider, path, body, end string
		emulator                        func(t *testing.T) (*llmtest.Server, string)
	}{
		{"openAI to chat", `openAI: {}`, "/v1/chat/completions", chat(true), "data: [DONE]\n\n",
			func(t *testing.T) (*llmtest.Server, string) { o := llmtest.NewOpenAI(t); return o.Server, o.APIKey }},
		{"openAI to chat without usage", `openAI: {}`, "/v1/chat/completions", chat(false), "data: [DONE]\n\n",
			func(t *testing.T) (*llmtest.Server, string) { o := llmtest.NewOpenAI(t); return o.Server, o.APIKey }},
		{"openAI to messages", `openAI: {}`, "/v1/messages", messages, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			func(t *testing.T) (*llmtest.Server, string) { o := llmtest.NewOpenAI(t); return o.Server, o.APIKey }},
		{"anthropic to messages", `anthropic: {}`, "/v1/messages", messages, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			func(t *testing.T) (*llmtest.Server, string) { a := llmtest.NewAnthropic(t); return a.Server, a.APIKey }},
		{"anthropic to chat", `anthropic: {}`, "/v1/chat/completions", chat(false), "data: [DONE]\n\n",
			func(t *testing.T) (*llmtest.Server, string) { a := llmtest.NewAnthropic(t); return a.Server, a.APIKey }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, key := tc.emulator(t)
			tg := startGateway(t, llmConfig(tc.provider, e.Addr(), `backendAuth: {key: `+key+`}`, ""), nil)
			for _, client := range []*http.Client{http.DefaultClient, h2cClient()} {
				e.Enqueue(llmtest.Reply{Chunks: []string{"all ", "of ", "it"}, NoLastBlankLine: true})
				resp, err := client.Post(tg.url(8080)+tc.path, "application/json", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("%s: status %d, %v: the stream was cut:\n%s", resp.Proto, resp.StatusCode, err, got)
				}
				if !strings.HasSuffix(string(got), tc.end) || strings.Contains(string(got), "error") || !strings.Contains(string(got), `"it"`) {
					t.Fatalf("%s: want the whole answer, ended with %q:\n%s", resp.Proto, tc.end, got)
				}
			}
		})
	}
}

// TestLLMReloadOfASecretHeaderOnly: a reload that changes only a value the
// config dump redacts (the Authorization a webhook guard's call carries)
// makes the webhook get the new value. The provider set, kept across
// reloads on a key of its config, took that key from the redacted JSON, so
// the old value stayed until something else changed.
func TestLLMReloadOfASecretHeaderOnly(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	wh := guardrailtest.NewWebhook(t)
	cfg := func(token string) string {
		return llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, `
promptGuard:
  request:
  - webhook: {target: {host: `+wh.Addr()+`}, headers: {authorization: '"Bearer `+token+`"'}}
`)
	}
	tg := startGateway(t, cfg("one"), nil)
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	for _, token := range []string{"one", "two"} {
		if token != "one" {
			tg.apply(cfg(token), nil)
		}
		if resp, got := postJSON(t, tg.url(8080)+"/v1/chat/completions", body); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", token, resp.StatusCode, got)
		}
		if got := wh.Last().Header.Get("Authorization"); got != "Bearer "+token {
			t.Errorf("after the reload to %q the webhook got %q", token, got)
		}
	}
}

// TestLLMStreamOptionsKept: the gateway asks an OpenAI-format provider for
// a stream's usage by setting stream_options.include_usage, and keeps the
// client's other stream options (include_obfuscation); it used to replace
// the whole object. The client, which did not ask for the usage, gets no
// usage chunk. (The ai policy's defaults make the server read the body's
// head from the members it wrote; TestPassRequest reads it otherwise.)
func TestLLMStreamOptionsKept(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	tg := startGateway(t, llmConfig(`openAI: {}`, o.Addr(), `backendAuth: {key: `+o.APIKey+`}`, `defaults: {temperature: 0.5}`), nil)
	body := `{"model":"m","stream":true,"stream_options":{"include_obfuscation":false},"messages":[{"role":"user","content":"hi"}]}`
	resp, got := postJSON(t, tg.url(8080)+"/v1/chat/completions", body)
	if resp.StatusCode != 200 || strings.Contains(got, `"usage":{`) {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	so, _ := o.Last().JSON()["stream_options"].(map[string]any)
	if so["include_usage"] != true || so["include_obfuscation"] != false || len(so) != 2 {
		t.Errorf("the provider got stream_options %v, want the client's and include_usage", so)
	}
}

// TestLLMNoUsageReported: an answer whose provider reports no usage (an
// OpenAI-compatible server without it, a Gemini answer without
// usageMetadata) is logged without token counts, and a translated answer
// invents none for the client (Chat's usage member is left out, Responses'
// is null); the token buckets are still charged an estimate. It used to
// log 0 and 0, and give the client a usage of zeros.
func TestLLMNoUsageReported(t *testing.T) {
	g := llmtest.NewGemini(t)
	o := llmtest.NewOpenAI(t)
	limits := `
localRateLimit:
- {maxTokens: 1000, tokensPerFill: 1, fillInterval: 1h, type: tokens}
`
	for _, tc := range []struct {
		name, provider, auth, path, body string
		emulator                         *llmtest.Server
		answer                           string
		want, notWant                    string // in the client's answer
	}{
		{"gemini to chat", `gemini: {}`, `backendAuth: {key: ` + g.APIKey + `}`, "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, g.Server,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP"}]}`, `"content":"hello"`, `"usage"`},
		{"gemini to responses", `gemini: {}`, `backendAuth: {key: ` + g.APIKey + `}`, "/v1/responses",
			`{"model":"m","input":"hi"}`, g.Server,
			`{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP"}]}`, `"usage":null`, `"input_tokens"`},
		{"openai, passed on", `openAI: {}`, `backendAuth: {key: ` + o.APIKey + `}`, "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, o.Server,
			`{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`, `"content":"hello"`, `"usage"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := startGateway(t, llmConfig(tc.provider, tc.emulator.Addr(), tc.auth, "", limits), nil)
			tc.emulator.Enqueue(llmtest.Failure{Status: 200, Body: tc.answer})
			resp, got := postJSON(t, tg.url(8080)+tc.path, tc.body)
			if resp.StatusCode != 200 || !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) {
				t.Fatalf("status %d: %s; want %s in it, not %s", resp.StatusCode, got, tc.want, tc.notWant)
			}
			lines := tg.accessLogs().FilterMessage("request").All()
			if len(lines) != 1 {
				t.Fatalf("%d access lines", len(lines))
			}
			f := lines[0].ContextMap()
			for _, k := range []string{"llm.input_tokens", "llm.output_tokens"} {
				if v, ok := f[k]; ok {
					t.Errorf("%s logged (%v) though the provider reported no usage", k, v)
				}
			}
			tc.emulator.Enqueue(llmtest.Reply{Text: "ok"})
			next, _ := postJSON(t, tg.url(8080)+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if r := next.Header.Get("X-Ratelimit-Remaining"); r == "" || r == "1000" {
				t.Errorf("x-ratelimit-remaining %q after an answer without usage: want an estimate charged", r)
			}
		})
	}
}
