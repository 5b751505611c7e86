package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaygate/gateway/backend/llm/llmtest"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
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

// routerErrorBody is agentgateway's model router error, whatever the
// client's format.
func routerErrorBody(msg, code string) string {
	return `{"error":{"message":"` + msg + `","type":"invalid_request_error","code":"` + code + `"}}`
}

// postJSON posts body to url with the headers (name, value pairs) and
// returns the response with its body read.
func postJSON(t *testing.T, url, body string, headers ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	return do(t, req)
}

// sectionModel is a model of llm.models on an OpenAI emulator, with more
// YAML for its entry.
func sectionModel(name string, o *llmtest.OpenAI, more ...string) string {
	s := `
  - name: ` + name + `
    provider: openAI
    params: {apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}`
	for _, m := range more {
		s += "\n    " + m
	}
	return s
}

// TestLLMSectionHeaderMatches: two entries of one model name are told apart
// by header matches (exact and regex, any of several matches); a request
// that fits neither, like an unknown name, gets agentgateway's 404; a
// weighted virtual model's choice is resolved with the same matches.
func TestLLMSectionHeaderMatches(t *testing.T) {
	premium := llmtest.NewOpenAI(t)
	premium.SetDefault(llmtest.Reply{Text: "premium"})
	basic := llmtest.NewOpenAI(t)
	basic.SetDefault(llmtest.Reply{Text: "basic"})
	cfg := `
llm:
  models:` +
		sectionModel("smart", premium, `matches: [{headers: [{name: X-Tier, value: {exact: premium}}, {name: x-region, value: {regex: 'eu-.*'}}]}]`) +
		sectionModel("smart", basic, `matches: [{headers: [{name: x-tier, value: {regex: 'free|basic'}}]}, {headers: [{name: x-trial, value: {exact: "yes"}}]}]`) + `
  virtualModels:
  - name: auto
    routing: {weighted: {targets: [{model: smart}]}}
`
	tg := startGateway(t, cfg, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))
	tests := []struct {
		desc    string
		model   string
		headers []string
		want    string // the answer; "" for the 404 below
		code    string
	}{
		{"every header of the first match", "smart", []string{"x-tier", "premium", "X-Region", "eu-west-1"}, "premium", ""},
		{"a regex of the second entry", "smart", []string{"X-Tier", "basic"}, "basic", ""},
		{"the second match of the second entry", "smart", []string{"x-trial", "yes"}, "basic", ""},
		{"one header of the first match is not enough", "smart", []string{"x-tier", "premium"}, "", "model_not_found"},
		{"a regex matches the whole value", "smart", []string{"x-tier", "basic-plus"}, "", "model_not_found"},
		{"no header", "smart", nil, "", "model_not_found"},
		{"an unknown name", "dumb", []string{"x-tier", "premium", "x-region", "eu-west-1"}, "", "model_not_found"},
		{"a virtual model's choice fits", "auto", []string{"x-tier", "free"}, "basic", ""},
		{"a virtual model's choice fits no entry", "auto", nil, "", "virtual_model_target_not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var opts []option.RequestOption
			for i := 0; i < len(tc.headers); i += 2 {
				opts = append(opts, option.WithHeader(tc.headers[i], tc.headers[i+1]))
			}
			resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest(tc.model), opts...)
			if tc.want != "" {
				if err != nil || resp.Choices[0].Message.Content != tc.want {
					t.Fatalf("answer %v, %v; want %q", resp, err, tc.want)
				}
				return
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != tc.code || apiErr.Type != "invalid_request_error" {
				t.Fatalf("%v, want 404 %s", err, tc.code)
			}
		})
	}
	// The body byte for byte, as agentgateway's router writes it.
	resp, body := postJSON(t, tg.url(4000)+"/v1/chat/completions", `{"model":"smart","messages":[]}`)
	if want := routerErrorBody("Model not found", "model_not_found"); resp.StatusCode != http.StatusNotFound || body != want ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%d %s %q, want 404 application/json %s", resp.StatusCode, resp.Header.Get("Content-Type"), body, want)
	}
	resp, body = postJSON(t, tg.url(4000)+"/v1/chat/completions", `{"messages":[]}`)
	if want := routerErrorBody("LLM request body is missing string field 'model'", "missing_model"); resp.StatusCode != http.StatusBadRequest || body != want {
		t.Errorf("no model: %d %q, want 400 %s", resp.StatusCode, body, want)
	}
	resp, body = postJSON(t, tg.url(4000)+"/v1/chat/completions", `{"model":`)
	if want := routerErrorBody("LLM request body must be valid JSON", "invalid_request_body"); resp.StatusCode != http.StatusBadRequest || body != want {
		t.Errorf("bad JSON: %d %q, want 400 %s", resp.StatusCode, body, want)
	}
	if n, m := len(premium.Requests()), len(basic.Requests()); n != 1 || m != 3 {
		t.Errorf("the providers got %d and %d requests, want 1 and 3", n, m)
	}
	// Both entries are one name in the model list.
	_, list := get(t, tg.url(4000)+"/v1/models")
	if !strings.Contains(list, `"id":"smart"`) || strings.Count(list, `"id":"smart"`) != 1 {
		t.Errorf("model list %s: want smart once", list)
	}
}

// TestLLMSectionModelAuthorization: a model's authorization (JWT claims,
// headers) picks among entries of one name; when every entry that fits
// refuses, the answer is agentgateway's 403, and the model list leaves the
// model out. An internal model reached through a virtual model is checked
// too.
func TestLLMSectionModelAuthorization(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	gold := llmtest.NewOpenAI(t)
	gold.SetDefault(llmtest.Reply{Text: "gold"})
	research := llmtest.NewOpenAI(t)
	research.SetDefault(llmtest.Reply{Text: "research"})
	open := llmtest.NewOpenAI(t)
	open.SetDefault(llmtest.Reply{Text: "open"})
	cfg := `
llm:
  policies:
    jwtAuth: {issuer: '${ISS}', jwks: '${JWKS}'}
  models:` +
		sectionModel("report", gold, `authorization: {rules: ['jwt.tier == "gold"']}`) +
		sectionModel("report", research, `authorization: {rules: ['request.headers["x-team"] == "research"', {deny: 'jwt.sub == "mallory"'}]}`) +
		sectionModel("open", open) +
		sectionModel("vault", gold, "visibility: internal", `authorization: {rules: ['jwt.tier == "gold"']}`) + `
  virtualModels:
  - name: archive
    routing: {conditional: {targets: [{model: vault}]}}
`
	tg := startGateway(t, cfg, map[string]string{"ISS": iss.Iss, "JWKS": string(iss.JWKS())})
	token := func(sub, tier string) string {
		claims := iss.Claims(sub)
		claims["tier"] = tier
		return iss.Sign(claims)
	}
	tests := []struct {
		desc        string
		sub, tier   string
		model, team string
		want        string // the answer; "" for 403
	}{
		{"a claim allows the first entry", "alice", "gold", "report", "", "gold"},
		{"a header allows the second", "bob", "silver", "report", "research", "research"},
		{"the first entry that allows wins", "alice", "gold", "report", "research", "gold"},
		{"a deny rule refuses", "mallory", "silver", "report", "research", ""},
		{"neither allows", "bob", "silver", "report", "", ""},
		{"a model without authorization", "bob", "silver", "open", "", "open"},
		{"an internal model allows a virtual model's choice", "alice", "gold", "archive", "", "gold"},
		{"an internal model refuses a virtual model's choice", "bob", "silver", "archive", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey(token(tc.sub, tc.tier)), option.WithMaxRetries(0))
			var opts []option.RequestOption
			if tc.team != "" {
				opts = append(opts, option.WithHeader("X-Team", tc.team))
			}
			resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest(tc.model), opts...)
			if tc.want != "" {
				if err != nil || resp.Choices[0].Message.Content != tc.want {
					t.Fatalf("answer %v, %v; want %q", resp, err, tc.want)
				}
				return
			}
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusForbidden || apiErr.Code != "model_authorization_denied" {
				t.Fatalf("%v, want 403 model_authorization_denied", err)
			}
		})
	}
	resp, body := postJSON(t, tg.url(4000)+"/v1/chat/completions", `{"model":"report","messages":[]}`, "Authorization", "Bearer "+token("bob", "silver"))
	if want := routerErrorBody("Model authorization denied", "model_authorization_denied"); resp.StatusCode != http.StatusForbidden || body != want {
		t.Errorf("%d %q, want 403 %s", resp.StatusCode, body, want)
	}
	// The list shows what the caller may use.
	for _, tc := range []struct{ tier, want string }{{"gold", "report,open,archive"}, {"silver", "open,archive"}} {
		_, body := get(t, tg.url(4000)+"/v1/models", "Authorization", "Bearer "+token("carol", tc.tier))
		var list struct{ Data []struct{ ID string } }
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		var ids []string
		for _, d := range list.Data {
			ids = append(ids, d.ID)
		}
		if got := strings.Join(ids, ","); got != tc.want {
			t.Errorf("tier %s lists %s, want %s", tc.tier, got, tc.want)
		}
	}
}

// TestLLMSectionPassthroughOpaque: as agentgateway's llm_route_types, a
// passthrough model changes only paths the section names no route type
// for: those go to the provider byte for byte, untranslated, without usage
// (no token metrics); chat paths are still translated.
func TestLLMSectionPassthroughOpaque(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	a := llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Reply{Text: "from anthropic"})
	cfg := `
llm:
  models:` + sectionModel("tts-*", o, "passthrough: opaque") + `
  - name: claude-*
    provider: anthropic
    passthrough: opaque
    params: {apiKey: ` + a.APIKey + `, baseUrl: "http://` + a.Addr() + `"}
`
	tg := startGateway(t, cfg, nil)
	const body = "{\"model\" : \"tts-1\",\n  \"input\":\"hi\", \"voice\":\"alloy\", \"x_unknown\": {\"keep\": [1, 2.50]} }"
	resp, got := postJSON(t, tg.url(4000)+"/v1/audio/speech?format=mp3", body, "Authorization", "Bearer client-key")
	rec := o.Last()
	if string(rec.Body) != body || rec.Path != "/v1/audio/speech" || rec.Query.Get("format") != "mp3" {
		t.Errorf("the provider got %s %q, want the client's path and body byte for byte", rec.Path, rec.Body)
	}
	if auth := rec.Header.Get("Authorization"); auth != "Bearer "+o.APIKey {
		t.Errorf("the provider got Authorization %q, want its own key", auth)
	}
	// The provider's answer as it is (the emulator serves no speech: its
	// own 404, in its own shape).
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(got, "Invalid URL (POST /v1/audio/speech)") {
		t.Errorf("the client got %d %q, want the provider's answer", resp.StatusCode, got)
	}
	fams := scrapeGateway(t, tg.gw)
	if s := seriesOf(fams, "agentgateway_gen_ai_client_token_usage", map[string]string{"gen_ai_operation_name": "passthrough"}); s != nil {
		t.Errorf("an opaque request has token usage: %v", s)
	}
	if s := seriesOf(fams, "agentgateway_gen_ai_server_request_duration_seconds", map[string]string{"gen_ai_operation_name": "passthrough"}); s == nil {
		t.Error("an opaque request is not in the request duration metric")
	}

	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))
	chat, err := c.Chat.Completions.New(llmCtx(t), chatRequest("claude-sonnet-4-5"))
	if err != nil || chat.Choices[0].Message.Content != "from anthropic" {
		t.Fatalf("chat on a passthrough model: %v", err)
	}
	if op := a.Last().Op; op != "messages" {
		t.Errorf("a chat request on a passthrough model reached the provider as %q, want translated to messages", op)
	}
}

// TestLLMSectionHeaders: requestHeaders reach the provider (add, set,
// remove) and responseHeaders the client, streamed or not, from the
// provider's defaults unless the model gives its own (which replace them
// whole, as agentgateway's defaults do); the client's credential headers
// never reach a provider with a key. A failover virtual model's answer gets
// the responseHeaders of the model that gave it.
func TestLLMSectionHeaders(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	down := llmtest.NewOpenAI(t)
	down.SetDefault(llmtest.Failure{Status: 503})
	a := llmtest.NewAnthropic(t)
	cfg := `
llm:
  providers:
  - name: oa
    provider: openAI
    params: {apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}
    defaults:
      requestHeaders: {add: {x-trace: gateway}, set: {x-org: acme}, remove: [x-drop]}
      responseHeaders: {set: {x-served-by: defaults}}
  models:
  - name: inherits
    provider: {reference: oa}
  - name: overrides
    provider: {reference: oa}
    requestHeaders: {set: {x-org: own}}
    responseHeaders: {add: {x-model: overrides}}
  - name: down
    visibility: internal
    provider: openAI
    params: {apiKey: ` + down.APIKey + `, hostOverride: "` + down.Addr() + `"}
    requestHeaders: {set: {x-org: down-only}}
    responseHeaders: {set: {x-model: down}}
  - name: claude-*
    provider: anthropic
    params: {apiKey: ` + a.APIKey + `, baseUrl: "http://` + a.Addr() + `"}
    responseHeaders: {remove: [request-id]}
  - name: claude-plain
    provider: anthropic
    params: {apiKey: ` + a.APIKey + `, baseUrl: "http://` + a.Addr() + `"}
  virtualModels:
  - name: resilient
    routing: {failover: {targets: [{model: down, priority: 0}, {model: overrides, priority: 1}]}}
`
	tg := startGateway(t, cfg, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client-key"), option.WithMaxRetries(0),
		option.WithHeader("X-Trace", "client"), option.WithHeader("X-Drop", "secret"), option.WithHeader("X-Api-Key", "client-x"))
	tests := []struct {
		model    string
		org      string
		trace    []string
		drop     string
		response map[string]string // header: value ("" for absent)
	}{
		{"inherits", "acme", []string{"client", "gateway"}, "", map[string]string{"X-Served-By": "defaults", "X-Model": ""}},
		{"overrides", "own", []string{"client"}, "secret", map[string]string{"X-Served-By": "", "X-Model": "overrides"}},
		{"resilient", "own", []string{"client"}, "secret", map[string]string{"X-Served-By": "", "X-Model": "overrides"}},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			var httpResp *http.Response
			if _, err := c.Chat.Completions.New(llmCtx(t), chatRequest(tc.model), option.WithResponseInto(&httpResp)); err != nil {
				t.Fatal(err)
			}
			rec := o.Last()
			if got := rec.Header.Get("X-Org"); got != tc.org {
				t.Errorf("X-Org %q, want %q", got, tc.org)
			}
			if got := rec.Header.Values("X-Trace"); strings.Join(got, ",") != strings.Join(tc.trace, ",") {
				t.Errorf("X-Trace %q, want %q", got, tc.trace)
			}
			if got := rec.Header.Get("X-Drop"); got != tc.drop {
				t.Errorf("X-Drop %q, want %q", got, tc.drop)
			}
			if got := rec.Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+o.APIKey || rec.Header.Get("X-Api-Key") != "" {
				t.Errorf("credentials %q, X-Api-Key %q: want the provider's key only", got, rec.Header.Get("X-Api-Key"))
			}
			for name, want := range tc.response {
				if got := httpResp.Header.Get(name); got != want {
					t.Errorf("response %s %q, want %q", name, got, want)
				}
			}
			// The streamed answer gets them too.
			s := c.Chat.Completions.NewStreaming(llmCtx(t), chatRequest(tc.model), option.WithResponseInto(&httpResp))
			for s.Next() {
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			for name, want := range tc.response {
				if got := httpResp.Header.Get(name); got != want {
					t.Errorf("streamed response %s %q, want %q", name, got, want)
				}
			}
		})
	}
	if n := len(down.Requests()); n != 1 {
		t.Errorf("the failing model got %d requests, want 1 (then evicted)", n)
	} else if got := down.Requests()[0].Header.Get("X-Org"); got != "down-only" {
		// Each provider of a failover gets its own model's requestHeaders.
		t.Errorf("the failing model got X-Org %q, want down-only", got)
	}

	// remove: the provider's own response header goes; a model without
	// the setting keeps it.
	ac := anthropic.NewClient(anthropicopt.WithBaseURL(tg.url(4000)), anthropicopt.WithAPIKey("client"), anthropicopt.WithMaxRetries(0))
	for model, kept := range map[string]bool{"claude-haiku-4-5": false, "claude-plain": true} {
		var httpResp *http.Response
		if _, err := ac.Messages.New(llmCtx(t), messagesRequest(model), anthropicopt.WithResponseInto(&httpResp)); err != nil {
			t.Fatal(err)
		}
		if got := httpResp.Header.Get("Request-Id") != ""; got != kept {
			t.Errorf("%s: request-id kept %v, want %v", model, got, kept)
		}
	}
}

// TestLLMSectionSettingsNotServed: the model settings that need a hook in
// the attempt loop are refused by Apply and by --validate-only (Validate),
// with the same errors, as is a header matched twice in one match.
func TestLLMSectionSettingsNotServed(t *testing.T) {
	model := func(more ...string) string {
		s := "\n  - name: m\n    provider: openAI\n    params: {apiKey: k, hostOverride: \"127.0.0.1:1\"}"
		for _, m := range more {
			s += "\n    " + m
		}
		return s
	}
	tests := []struct {
		desc, models, virtual string
		want                  string // "" for a file that is served
	}{
		{desc: "detect", models: model("passthrough: detect"),
			want: `llm.models[0].passthrough: passthrough "detect" is not implemented yet`},
		{desc: "opaque", models: model("passthrough: opaque")},
		{desc: "the credential header", models: model("requestHeaders: {set: {Authorization: 'Bearer x'}}")},
		{desc: "a credential header removed", models: model("requestHeaders: {remove: [x-foo, X-API-KEY]}")},
		{desc: "a key's own header", models: "\n  - {name: m, provider: openAI, params: {hostOverride: \"127.0.0.1:1\"}, auth: {key: {value: k, location: {header: {name: X-Key}}}}, requestHeaders: {add: {x-key: v}}}"},
		{desc: "Bedrock's default credentials", models: "\n  - {name: m, provider: bedrock, params: {awsRegion: us-east-1}, requestHeaders: {set: {authorization: v}}}",
			want: "llm.models[0].requestHeaders.set.authorization: requestHeaders on a header of the model's SigV4 signature are not implemented yet"},
		{desc: "a signed header", models: "\n  - {name: m, provider: bedrock, params: {awsRegion: us-east-1}, auth: {aws: {accessKeyId: a, secretAccessKey: s}}, requestHeaders: {remove: [X-Amz-Date]}}",
			want: "llm.models[0].requestHeaders.remove[0]: requestHeaders on a header of the model's SigV4 signature"},
		{desc: "Bedrock, another header", models: "\n  - {name: m, provider: bedrock, params: {awsRegion: us-east-1}, requestHeaders: {set: {x-team: a}}}"},
		{desc: "no credentials", models: "\n  - {name: m, provider: openAI, params: {hostOverride: \"127.0.0.1:1\"}, requestHeaders: {set: {authorization: v}}}"},
		{desc: "credentials passed through", models: "\n  - {name: m, provider: openAI, params: {hostOverride: \"127.0.0.1:1\"}, auth: {passthrough: {}}, requestHeaders: {set: {authorization: v}}}"},
		{desc: "Host", models: model("requestHeaders: {set: {Host: example.com}}"),
			want: "llm.models[0].requestHeaders.set.Host: requestHeaders on Host are not implemented yet"},
		{desc: "failover to a model with authorization", models: model("authorization: {rules: ['true']}"),
			virtual: "{name: v, routing: {failover: {targets: [{model: m, priority: 0}]}}}"},
		{desc: "failover among different requestHeaders", models: model("requestHeaders: {set: {x-a: '1'}}") + "\n  - {name: n, provider: openAI, params: {apiKey: k, hostOverride: \"127.0.0.1:1\"}}",
			virtual: "{name: v, routing: {failover: {targets: [{model: m, priority: 0}, {model: n, priority: 1}]}}}"},
		{desc: "failover among the same requestHeaders", models: model("requestHeaders: {set: {x-a: '1'}}", "responseHeaders: {set: {x-b: '1'}}") + "\n  - {name: n, provider: openAI, params: {apiKey: k, hostOverride: \"127.0.0.1:1\"}, requestHeaders: {set: {x-a: '1'}}}",
			virtual: "{name: v, routing: {failover: {targets: [{model: m, priority: 0}, {model: n, priority: 1}]}}}"},
		{desc: "a header twice in one match", models: model("matches: [{headers: [{name: x-a, value: {exact: '1'}}, {name: X-A, value: {exact: '2'}}]}]"),
			want: `llm.models[0].matches[0].headers[1].name: header "X-A" is already matched by headers[0] of this match`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			yaml := "llm:\n  port: 4000\n  models:" + tc.models + "\n"
			if tc.virtual != "" {
				yaml += "  virtualModels: [" + tc.virtual + "]\n"
			}
			f := parseConfig(t, yaml, nil)
			gw := New(Options{ListenAddr: func(int) string { return "127.0.0.1:0" }})
			t.Cleanup(func() { gw.Shutdown(expiredContext()) })
			err := gw.Apply(f)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if verr := Validate(f); fmt.Sprint(verr) != fmt.Sprint(err) {
				t.Errorf("Validate: %v, want Apply's error: %v", verr, err)
			}
		})
	}
}

// TestLLMSectionVirtualModelNamesItsTarget: a virtual model's request goes
// on naming the model it chose, as agentgateway rewrites the body's model,
// so a wildcard model's transformation reads the target's name (the
// README's example: a failover to anthropic/claude-haiku-4-5), for
// failover (per provider attempt), weighted and conditional routing.
func TestLLMSectionVirtualModelNamesItsTarget(t *testing.T) {
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
    params: {apiKey: ` + o.APIKey + `, hostOverride: "` + o.Addr() + `"}
  - name: anthropic/*
    provider: anthropic
    params: {apiKey: ` + a.APIKey + `, baseUrl: "http://` + a.Addr() + `"}
    transformation: { model: 'llmRequest.model.stripPrefix("anthropic/")' }
  virtualModels:
  - name: cheap-first
    routing: { failover: { targets: [{ model: smart, priority: 0 }, { model: anthropic/claude-haiku-4-5, priority: 1 }] } }
  - name: cheap-weighted
    routing: { weighted: { targets: [{ model: anthropic/claude-opus-4-1, weight: 1 }] } }
  - name: cheap-when
    routing: { conditional: { targets: [{ model: anthropic/claude-sonnet-4-5 }] } }
`
	tg := startGateway(t, cfg, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))

	// The failover's first provider answers, asked for its own name.
	if _, err := c.Chat.Completions.New(llmCtx(t), chatRequest("cheap-first")); err != nil {
		t.Fatal(err)
	}
	if m := o.Last().Model; m != "smart" {
		t.Errorf("the failover's first target got model %q, want smart", m)
	}
	// It fails: the next target is asked for its name, transformed.
	o.SetDefault(llmtest.Failure{Status: 503})
	resp, err := c.Chat.Completions.New(llmCtx(t), chatRequest("cheap-first"))
	if err != nil || resp.Choices[0].Message.Content != "from anthropic" {
		t.Fatalf("failover: %v", err)
	}
	if m := a.Last().Model; m != "claude-haiku-4-5" {
		t.Errorf("the failover's second target got model %q, want claude-haiku-4-5", m)
	}
	for vm, want := range map[string]string{"cheap-weighted": "claude-opus-4-1", "cheap-when": "claude-sonnet-4-5"} {
		if _, err := c.Chat.Completions.New(llmCtx(t), chatRequest(vm)); err != nil {
			t.Fatalf("%s: %v", vm, err)
		}
		if m := a.Last().Model; m != want {
			t.Errorf("%s reached the provider as %q, want %q", vm, m, want)
		}
	}
}

// TestLLMSectionRequestHeadersAfterCredentials: a model's requestHeaders
// apply after its provider's credentials, as agentgateway applies them, so
// they may replace the credential header: here the model's key is wrong and
// its requestHeaders carry the right one.
func TestLLMSectionRequestHeadersAfterCredentials(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	o.SetDefault(llmtest.Reply{Text: "ok"})
	cfg := `
llm:
  port: 4000
  models:
  - name: m
    provider: openAI
    params: {apiKey: wrong-key, hostOverride: "` + o.Addr() + `"}
    requestHeaders: {set: {Authorization: "Bearer ` + o.APIKey + `"}}
`
	tg := startGateway(t, cfg, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))
	if _, err := c.Chat.Completions.New(llmCtx(t), chatRequest("m")); err != nil {
		t.Fatalf("the requestHeaders' key did not reach the provider: %v", err)
	}
	if got := o.Last().Header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer "+o.APIKey {
		t.Fatalf("Authorization %q", got)
	}
}

// TestLLMSectionFailoverModelAuthorization: a failover virtual model checks
// each target model's authorization on its attempt: a provider whose model
// refuses the request is skipped, and when every one refuses the answer is
// 403 model_authorization_denied. (agentgateway does not check it on
// failover; skipping keeps a model's authorization from being bypassed
// through a virtual model.)
func TestLLMSectionFailoverModelAuthorization(t *testing.T) {
	gold := llmtest.NewOpenAI(t)
	gold.SetDefault(llmtest.Reply{Text: "gold"})
	std := llmtest.NewOpenAI(t)
	std.SetDefault(llmtest.Reply{Text: "standard"})
	cfg := `
llm:
  port: 4000
  models:
  - name: gold
    visibility: internal
    provider: openAI
    params: {apiKey: ` + gold.APIKey + `, hostOverride: "` + gold.Addr() + `"}
    authorization: {rules: ['request.headers["x-tier"] == "gold"']}
  - name: standard
    visibility: internal
    provider: openAI
    params: {apiKey: ` + std.APIKey + `, hostOverride: "` + std.Addr() + `"}
  virtualModels:
  - name: best
    routing: {failover: {targets: [{model: gold, priority: 0}, {model: standard, priority: 1}]}}
  - name: gold-only
    routing: {failover: {targets: [{model: gold, priority: 0}]}}
`
	tg := startGateway(t, cfg, nil)
	for _, tc := range []struct {
		model, tier string
		status      int
		want        string
	}{
		{"best", "gold", 200, "gold"},
		{"best", "", 200, "standard"},
		{"gold-only", "gold", 200, "gold"},
		{"gold-only", "", 403, "model_authorization_denied"},
	} {
		req, _ := http.NewRequest("POST", tg.url(4000)+"/v1/chat/completions",
			strings.NewReader(`{"model":"`+tc.model+`","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if tc.tier != "" {
			req.Header.Set("X-Tier", tc.tier)
		}
		resp, body := do(t, req)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s with tier %q: %d %s, want %d with %q", tc.model, tc.tier, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	if n := len(gold.Requests()); n != 2 {
		t.Errorf("the gold provider got %d requests, want 2 (only the gold tier's)", n)
	}
}

// TestLLMSectionGuardrailsMerge: a model's own guardrails run after the
// section's policies.guardrails, as agentgateway's merge_prompt_guards
// concatenates them: a model with only a response guard still has the
// section's request guard (a rejected prompt never reaches the provider)
// and both response guards; a model without guardrails has the section's.
func TestLLMSectionGuardrailsMerge(t *testing.T) {
	o := llmtest.NewOpenAI(t)
	cfg := `
llm:
  models:` + sectionModel("own-guards", o, `guardrails: {response: [{regex: {action: mask, rules: [{builtin: creditCard}]}}]}`) +
		sectionModel("no-guards", o) + `
  policies:
    guardrails:
      request: [{regex: {action: reject, rules: [{builtin: ssn}]}}]
      response: [{regex: {action: mask, rules: [{builtin: email}]}}]
`
	tg := startGateway(t, cfg, nil)
	c := openai.NewClient(option.WithBaseURL(tg.url(4000)+"/v1"), option.WithAPIKey("client"), option.WithMaxRetries(0))
	tests := []struct {
		model, want, notWant string
	}{
		{"own-guards", "<EMAIL_ADDRESS>", "4111"},
		{"no-guards", "4111 1111 1111 1111", "x@y.com"},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			before := len(o.Requests())
			ask := func(prompt string) openai.ChatCompletionNewParams {
				p := guardAsk(prompt)
				p.Model = tc.model
				return p
			}
			_, err := c.Chat.Completions.New(llmCtx(t), ask("my ssn is 123-45-6789"))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode/100 != 4 {
				t.Errorf("a prompt with an SSN: %v, want refused by the section's request guard", err)
			}
			if len(o.Requests()) != before {
				t.Errorf("a prompt with an SSN reached the provider: %s", o.Last().Body)
			}
			o.Enqueue(llmtest.Reply{Text: "mail x@y.com card 4111 1111 1111 1111"})
			resp, err := c.Chat.Completions.New(llmCtx(t), ask("hello"))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Choices[0].Message.Content
			if !strings.Contains(got, tc.want) || strings.Contains(got, tc.notWant) || strings.Contains(got, "x@y.com") {
				t.Errorf("answer %q, want %q in it and neither %q nor the email", got, tc.want, tc.notWant)
			}
		})
	}
}

// TestLLMSectionRepeatedMembers: a body that gives a member twice is routed,
// authorized and counted on the last value (as every reader of the gateway
// takes it), and the provider gets that value alone: a provider whose
// parser takes the first would otherwise serve another budget, stream mode
// or conversation than the one the gateway checked.
func TestLLMSectionRepeatedMembers(t *testing.T) {
	cheap := llmtest.NewOpenAI(t)
	cheap.SetDefault(llmtest.Reply{Text: "cheap"})
	expensive := llmtest.NewOpenAI(t)
	expensive.SetDefault(llmtest.Reply{Text: "expensive"})
	a := llmtest.NewAnthropic(t)
	a.SetDefault(llmtest.Reply{Text: "claude"})
	cfg := `
llm:
  models:` + sectionModel("cheap", cheap, "visibility: internal") + sectionModel("expensive", expensive, "visibility: internal") + `
  - name: claude
    provider: anthropic
    params: {apiKey: ` + a.APIKey + `, baseUrl: "http://` + a.Addr() + `"}
  virtualModels:
  - name: cond
    routing:
      conditional:
        targets:
        - {when: 'default(llmRequest.max_tokens, 0) <= 100', model: cheap}
        - {model: expensive}
`
	tg := startGateway(t, cfg, nil)
	for _, tc := range []struct {
		desc, path, body string
		emu              interface{ Requests() []llmtest.Request }
		answer, sent     string
	}{
		{desc: "chat", path: "/v1/chat/completions", emu: cheap, answer: "cheap",
			body: `{"model":"cond","max_tokens":5000,"stream":true,"messages":[{"role":"user","content":"first"}],"max_tokens":10,"stream":false,"messages":[{"role":"user","content":"last"}]}`,
			sent: `{"max_tokens":10,"stream":false,"messages":[{"role":"user","content":"last"}],"model":"gpt-4o-mini"}`},
		{desc: "messages", path: "/v1/messages", emu: a, answer: "claude",
			body: `{"model":"claude","max_tokens":5000,"messages":[{"role":"user","content":"first"}],"max_tokens":10,"messages":[{"role":"user","content":"last"}]}`,
			sent: `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"last"}]}`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := postJSON(t, tg.url(4000)+tc.path, tc.body)
			if resp.StatusCode != 200 || !strings.Contains(body, tc.answer) {
				t.Fatalf("%d %s, want the %s model's answer", resp.StatusCode, body, tc.answer)
			}
			reqs := tc.emu.Requests()
			var got, want map[string]any
			sent := reqs[len(reqs)-1].Body
			if err := json.Unmarshal(sent, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.sent), &want); err != nil {
				t.Fatal(err)
			}
			delete(got, "model")
			delete(want, "model")
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("the provider got %s, want %s", sent, tc.sent)
			}
			for _, name := range []string{`"max_tokens"`, `"messages"`, `"stream"`, `"model"`} {
				if n := strings.Count(string(sent), name); n > 1 {
					t.Errorf("the provider got %s %d times: %s", name, n, sent)
				}
			}
		})
	}
}

// TestLLMSectionWeightedAuthorization: a weighted virtual model whose
// targets have different authorization serves a caller from the targets
// that allow it, every time (it was 200 or 403 at random for the same
// caller), and refuses one that none allows with agentgateway's 403.
func TestLLMSectionWeightedAuthorization(t *testing.T) {
	cheap := llmtest.NewOpenAI(t)
	cheap.SetDefault(llmtest.Reply{Text: "cheap"})
	expensive := llmtest.NewOpenAI(t)
	expensive.SetDefault(llmtest.Reply{Text: "expensive"})
	cfg := `
llm:
  models:` + sectionModel("cheap", cheap, "visibility: internal") +
		sectionModel("expensive", expensive, "visibility: internal", `authorization: {rules: ['request.headers["x-team"] == "a"']}`) + `
  virtualModels:
  - name: w
    routing: {weighted: {targets: [{model: cheap}, {model: expensive}]}}
  - name: closed
    routing: {weighted: {targets: [{model: expensive}]}}
`
	tg := startGateway(t, cfg, nil)
	const body = `{"model":%q,"messages":[{"role":"user","content":"x"}]}`
	// 30 requests: at random, all would be served with odds of 2^-30.
	for i := range 30 {
		resp, got := postJSON(t, tg.url(4000)+"/v1/chat/completions", fmt.Sprintf(body, "w"))
		if resp.StatusCode != 200 || !strings.Contains(got, "cheap") {
			t.Fatalf("request %d without the team: %d %s, want the cheap model's answer", i, resp.StatusCode, got)
		}
	}
	if n := len(expensive.Requests()); n != 0 {
		t.Errorf("the model that refuses the caller got %d requests", n)
	}
	// The team may use both: both are drawn (each missed with odds of 2^-39).
	for range 40 {
		if resp, got := postJSON(t, tg.url(4000)+"/v1/chat/completions", fmt.Sprintf(body, "w"), "X-Team", "a"); resp.StatusCode != 200 {
			t.Fatalf("the team: %d %s", resp.StatusCode, got)
		}
	}
	if len(expensive.Requests()) == 0 || len(cheap.Requests()) == 30 {
		t.Errorf("the team's requests went %d to cheap, %d to expensive: want both drawn", len(cheap.Requests())-30, len(expensive.Requests()))
	}
	resp, got := postJSON(t, tg.url(4000)+"/v1/chat/completions", fmt.Sprintf(body, "closed"))
	if want := routerErrorBody("Model authorization denied", "model_authorization_denied"); resp.StatusCode != 403 || got != want {
		t.Errorf("no target allows the caller: %d %s, want 403 %s", resp.StatusCode, got, want)
	}
}
