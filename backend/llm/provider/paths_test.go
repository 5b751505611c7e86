package provider

import (
	"bytes"
	"net/url"
	"strings"
	"testing"

	"github.com/relaygate/gateway/config"
)

func TestAppendPath(t *testing.T) {
	const bedrockARN = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20240620-v1:0"
	with := func(k config.AIProvider, edit func(*config.NamedAIProvider)) *config.NamedAIProvider {
		np := named(k)
		edit(np)
		return np
	}
	prefix := func(s string) func(*config.NamedAIProvider) {
		return func(np *config.NamedAIProvider) { np.PathPrefix = &s }
	}
	override := func(s string) func(*config.NamedAIProvider) {
		return func(np *config.NamedAIProvider) { np.PathOverride = &s }
	}
	host := func(np *config.NamedAIProvider) { np.HostOverride = "127.0.0.1:1" }
	tests := []struct {
		desc     string
		provider *config.NamedAIProvider
		rt       RouteType
		model    string
		stream   bool
		client   string
		want     string
	}{
		// OpenAI
		{"openAI chat", named(openAI()), Completions, "gpt-4o", false, "/v1/chat/completions", "/v1/chat/completions"},
		{"openAI messages go to chat", named(openAI()), Messages, "gpt-4o", true, "/v1/messages", "/v1/chat/completions"},
		{"openAI responses", named(openAI()), Responses, "gpt-4o", false, "/v1/responses", "/v1/responses"},
		{"openAI embeddings", named(openAI()), Embeddings, "text-embedding-3-small", false, "/embed", "/v1/embeddings"},
		{"openAI keeps the client's query", named(openAI()), Completions, "gpt-4o", false, "/v1/chat/completions?a=1&alt=2", "/v1/chat/completions?a=1&alt=2"},
		{"openAI prefix replaces /v1", with(openAI(), prefix("/openai/")), Completions, "gpt-4o", false, "/x", "/openai/chat/completions"},
		{"openAI models keep the client's path", named(openAI()), Models, "", false, "/v1/models", "/v1/models"},
		{"openAI passthrough keeps path and query", named(openAI()), Passthrough, "", false, "/v1/files?limit=2", "/v1/files?limit=2"},
		{"openAI passthrough prefix replaces /v1", with(openAI(), prefix("/proxy/openai")), Passthrough, "", false, "/v1/files?limit=2", "/proxy/openai/files?limit=2"},
		{"openAI passthrough prefix on another path", with(openAI(), prefix("/proxy")), Passthrough, "", false, "/v10/files", "/proxy/v10/files"},
		{"openAI passthrough of an empty path", named(openAI()), Passthrough, "", false, "", "/"},
		{"path override replaces everything", with(openAI(), override("/custom/chat")), Completions, "gpt-4o", false, "/v1/chat/completions?a=1", "/custom/chat"},
		{"path override on passthrough", with(openAI(), override("/fixed")), Passthrough, "", false, "/v1/files", "/fixed"},
		{"route refused keeps the client's target", named(anthropic()), Embeddings, "m", false, "/v1/embeddings?x=1", "/v1/embeddings?x=1"},

		// Azure
		{"azure v1", named(azure("openAI", nil)), Completions, "gpt-4o", false, "/v1/chat/completions", "/openai/v1/chat/completions"},
		{"azure v1 responses", named(azure("openAI", ptr("v1"))), Responses, "gpt-4o", false, "/v1/responses", "/openai/v1/responses"},
		{"azure v1 embeddings", named(azure("openAI", nil)), Embeddings, "e", false, "/v1/embeddings", "/openai/v1/embeddings"},
		{"azure preview", named(azure("openAI", ptr("preview"))), Completions, "gpt-4o", false, "/", "/openai/v1/chat/completions?api-version=preview"},
		{"azure dated", named(azure("openAI", ptr("2024-10-21"))), Completions, "gpt-4o", false, "/", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"},
		{"azure dated with the client's query", named(azure("openAI", ptr("2024-10-21"))), Messages, "gpt-4o", false, "/?x=1", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21&x=1"},
		{"azure dated embeddings", named(azure("openAI", ptr("2024-02-15-preview"))), Embeddings, "text-embedding-3-small", false, "/",
			"/openai/deployments/text-embedding-3-small/embeddings?api-version=2024-02-15-preview"},
		{"azure dated responses", named(azure("openAI", ptr("2025-04-01-preview"))), Responses, "gpt-4o", false, "/", "/openai/responses?api-version=2025-04-01-preview"},
		{"azure deployment escaped", named(azure("openAI", ptr("2024-10-21"))), Completions, "../../x?y", false, "/", "/openai/deployments/..%2F..%2Fx%3Fy/chat/completions?api-version=2024-10-21"},
		{"azure deployment dot segment", named(azure("openAI", ptr("2024-10-21"))), Completions, "..", false, "/", "/openai/deployments/%2E%2E/chat/completions?api-version=2024-10-21"},
		{"azure foundry", named(azure("foundry", nil)), Completions, "gpt-4o", false, "/", "/api/projects/res/openai/v1/chat/completions"},
		{"azure foundry project", named(config.AIProvider{Azure: &config.AzureProvider{ResourceName: "res", ResourceType: "foundry", ProjectName: ptr("my proj")}}),
			Embeddings, "e", false, "/", "/api/projects/my%20proj/openai/v1/embeddings"},
		{"azure foundry claude messages", named(azure("foundry", nil)), Messages, "claude-haiku-4-5", false, "/", "/anthropic/v1/messages"},
		{"azure foundry claude count tokens", named(azure("foundry", nil)), AnthropicTokenCount, "claude-haiku-4-5", false, "/", "/anthropic/v1/messages/count_tokens"},
		{"azure foundry claude chat", named(azure("foundry", nil)), Completions, "claude-haiku-4-5", false, "/", "/api/projects/res/openai/v1/chat/completions"},
		{"azure prefix goes first", with(azure("openAI", nil), prefix("/gw")), Completions, "gpt-4o", false, "/", "/gw/openai/v1/chat/completions"},

		// Anthropic
		{"anthropic messages", named(anthropic()), Messages, "claude", false, "/v1/messages", "/v1/messages"},
		{"anthropic chat goes to messages", named(anthropic()), Completions, "claude", true, "/v1/chat/completions", "/v1/messages"},
		{"anthropic count tokens", named(anthropic()), AnthropicTokenCount, "claude", false, "/v1/messages/count_tokens", "/v1/messages/count_tokens"},
		{"anthropic prefix", with(anthropic(), prefix("/anthropic")), Messages, "claude", false, "/", "/anthropic/messages"},
		{"anthropic passthrough prefix", with(anthropic(), prefix("/a/")), Passthrough, "", false, "/v1/files", "/a/files"},

		// Gemini
		{"gemini", named(gemini()), Completions, "gemini-2.5-flash", false, "/v1/chat/completions", "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"gemini stream", named(gemini()), Messages, "gemini-2.5-flash", true, "/v1/messages", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{"gemini stream drops the client's alt", named(gemini()), Completions, "gemini-2.5-flash", true, "/v1/chat/completions?alt=json&b=2&alternative=3",
			"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&b=2&alternative=3"},
		{"gemini drops the client's alt", named(gemini()), Completions, "gemini-2.5-flash", false, "/?alt=sse", "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"gemini resource name", named(gemini()), Completions, "models/gemini-2.5-flash", false, "/", "/v1beta/models/gemini-2.5-flash:generateContent"},
		{"gemini tuned model", named(gemini()), Completions, "tunedModels/abc", true, "/", "/v1beta/tunedModels/abc:streamGenerateContent?alt=sse"},
		{"gemini traversal stays in the segment", named(gemini()), Completions, "gemini-2.5-flash/../../v1beta/models/other", false, "/",
			"/v1beta/models/gemini-2.5-flash%2F..%2F..%2Fv1beta%2Fmodels%2Fother:generateContent"},
		{"gemini method in the model", named(gemini()), Completions, "x:streamGenerateContent", false, "/", "/v1beta/models/x%3AstreamGenerateContent:generateContent"},
		{"gemini embeddings", named(gemini()), Embeddings, "text-embedding-004", false, "/v1/embeddings", "/v1beta/openai/embeddings"},
		{"gemini prefix goes first", with(gemini(), prefix("/g")), Completions, "gemini-2.5-flash", false, "/", "/g/v1beta/models/gemini-2.5-flash:generateContent"},
		{"gemini passthrough prefix goes first", with(gemini(), prefix("/g")), Passthrough, "", false, "/v1beta/models", "/g/v1beta/models"},

		// Vertex
		{"vertex gemini", named(vertex("us-central1")), Completions, "gemini-2.5-flash", false, "/",
			"/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"},
		{"vertex gemini stream", named(vertex("global")), Responses, "publishers/google/models/gemini-2.5-flash", true, "/?alt=json",
			"/v1/projects/proj/locations/global/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{"vertex claude", named(vertex("us-east5")), Messages, "claude-sonnet-4-5", false, "/",
			"/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5:rawPredict"},
		{"vertex claude stream dated", named(vertex("us-east5")), Completions, "claude-3-5-sonnet-20241022", true, "/",
			"/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-3-5-sonnet@20241022:streamRawPredict"},
		{"vertex claude by publisher", named(vertex("us-east5")), Messages, "publishers/anthropic/models/claude-haiku-4-5-20251001", false, "/",
			"/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-haiku-4-5@20251001:rawPredict"},
		{"vertex claude with a non-date suffix", named(vertex("us-east5")), Messages, "anthropic/claude-haiku-4-5-2025abcd", false, "/",
			"/v1/projects/proj/locations/us-east5/publishers/anthropic/models/claude-haiku-4-5-2025abcd:rawPredict"},
		{"vertex claude count tokens", named(vertex("us-east5")), AnthropicTokenCount, "claude-sonnet-4-5", false, "/v1/messages/count_tokens",
			"/v1/projects/proj/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict"},
		{"vertex other model", named(vertex("us-central1")), Completions, "meta/llama-3.3-70b-instruct-maas", true, "/",
			"/v1/projects/proj/locations/us-central1/endpoints/openapi/chat/completions"},
		{"vertex traversal is no gemini model", named(vertex("global")), Completions, "gemini-2.5-flash/../../x", false, "/",
			"/v1/projects/proj/locations/global/endpoints/openapi/chat/completions"},
		{"vertex multi-region path", named(vertex("eu")), Completions, "gemini-2.5-flash", false, "/",
			"/v1/projects/proj/locations/eu/publishers/google/models/gemini-2.5-flash:generateContent"},
		{"vertex passthrough", with(vertex("global"), prefix("/vx")), Passthrough, "", false, "/v1/projects/proj/x", "/vx/v1/projects/proj/x"},

		// Bedrock
		{"bedrock converse", named(bedrock("us-east-1")), Completions, "anthropic.claude-3-5-sonnet-20240620-v1:0", false, "/",
			"/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"},
		{"bedrock converse stream", named(bedrock("us-east-1")), Messages, "amazon.nova-lite-v1:0", true, "/",
			"/model/amazon.nova-lite-v1%3A0/converse-stream"},
		{"bedrock ARN", named(bedrock("us-east-1")), Responses, bedrockARN, false, "/",
			"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"},
		{"bedrock prefix goes first", with(bedrock("us-east-1"), prefix("/b")), Completions, "m", false, "/", "/b/model/m/converse"},

		// Custom
		{"custom completions", with(custom(config.ProviderFormat{Type: "completions"}), host), Completions, "m", false, "/", "/v1/chat/completions"},
		{"custom responses to completions", with(custom(config.ProviderFormat{Type: "completions"}), host), Responses, "m", false, "/", "/v1/chat/completions"},
		{"custom messages", with(custom(config.ProviderFormat{Type: "messages"}), host), Completions, "m", false, "/", "/v1/messages"},
		{"custom count tokens", with(custom(config.ProviderFormat{Type: "anthropicTokenCount"}), host), AnthropicTokenCount, "m", false, "/", "/v1/messages/count_tokens"},
		{"custom format path", with(custom(config.ProviderFormat{Type: "completions", Path: ptr("/compatibility/v1/chat/completions")}), host),
			Messages, "m", false, "/", "/compatibility/v1/chat/completions"},
		{"custom format path ignores the prefix", with(custom(config.ProviderFormat{Type: "messages", Path: ptr("/anthropic/v1/messages")}), func(np *config.NamedAIProvider) {
			host(np)
			prefix("/p")(np)
		}), Messages, "m", false, "/", "/anthropic/v1/messages"},
		{"custom prefix", with(custom(config.ProviderFormat{Type: "embeddings"}), func(np *config.NamedAIProvider) {
			host(np)
			prefix("/api/v2")(np)
		}), Embeddings, "m", false, "/", "/api/v2/embeddings"},
		{"custom passthrough prefix goes first", with(custom(config.ProviderFormat{Type: "completions"}), func(np *config.NamedAIProvider) {
			host(np)
			prefix("/p")(np)
		}), Passthrough, "", false, "/v1/x", "/p/v1/x"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, tt.provider, &config.BackendAuth{Passthrough: &config.BackendAuthPassthrough{}})
			dst := []byte("keep")
			got := p.AppendPath(dst, tt.rt, tt.model, tt.stream, []byte(tt.client))
			if !bytes.HasPrefix(got, []byte("keep")) {
				t.Fatalf("AppendPath lost dst: %q", got)
			}
			if string(got[4:]) != tt.want {
				t.Errorf("AppendPath = %q\nwant          %q", got[4:], tt.want)
			}
		})
	}
}

// TestAppendPathDropsWhatTheGatewaySets: the client's query goes with
// the provider's path (agentgateway's rule), but not what the gateway sets
// itself: a parameter the provider's path already has (Azure's
// api-version), Gemini's alt, and a Google provider's key when the
// gateway puts its own credentials on (on passthrough routes too). A
// client's key used to reach Gemini beside the gateway's x-goog-api-key,
// and Azure got two api-versions.
func TestAppendPathDropsWhatTheGatewaySets(t *testing.T) {
	key := &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "gateway-key"}}}
	pass := &config.BackendAuth{Passthrough: &config.BackendAuthPassthrough{}}
	gcp := &config.BackendAuth{GCP: &config.GCPAuth{}}
	tests := []struct {
		desc     string
		provider *config.NamedAIProvider
		auth     *config.BackendAuth
		rt       RouteType
		stream   bool
		client   string
		want     string
	}{
		{"gemini with a key drops the client's", named(gemini()), key, Completions, true, "/v1/chat/completions?key=CLIENTKEY&x=1",
			"/v1beta/models/m:streamGenerateContent?alt=sse&x=1"},
		{"gemini with a key drops it percent-encoded", named(gemini()), key, Completions, false, "/v1/chat/completions?k%65y=CLIENTKEY&keys=1&key",
			"/v1beta/models/m:generateContent?keys=1"},
		{"gemini passthrough route with a key", named(gemini()), key, Passthrough, false, "/v1beta/models/m:generateContent?key=CLIENTKEY&y=2",
			"/v1beta/models/m:generateContent?y=2"},
		{"gemini passthrough route, only the key", named(gemini()), key, Passthrough, false, "/v1beta/models?key=CLIENTKEY",
			"/v1beta/models"},
		{"gemini without the gateway's key keeps the client's", named(gemini()), pass, Completions, false, "/v1/chat/completions?key=CLIENTKEY",
			"/v1beta/models/m:generateContent?key=CLIENTKEY"},
		{"vertex drops the client's key", named(vertex("global")), gcp, Completions, false, "/v1/chat/completions?key=CLIENTKEY&z=3",
			"/v1/projects/proj/locations/global/endpoints/openapi/chat/completions?z=3"},
		{"gemini drops the client's alt", named(gemini()), key, Completions, true, "/v1/chat/completions?%61lt=json",
			"/v1beta/models/m:streamGenerateContent?alt=sse"},
		{"openAI keeps a key", named(openAI()), key, Completions, false, "/v1/chat/completions?key=1",
			"/v1/chat/completions?key=1"},
		{"azure dated drops the client's api-version", named(azure("openAI", ptr("2024-10-21"))), key, Completions, false, "/v1/chat/completions?api-version=2023-05-15&x=1",
			"/openai/deployments/m/chat/completions?api-version=2024-10-21&x=1"},
		{"azure dated responses", named(azure("openAI", ptr("2025-04-01-preview"))), key, Responses, false, "/v1/responses?api%2Dversion=2023-05-15",
			"/openai/responses?api-version=2025-04-01-preview"},
		{"azure preview", named(azure("openAI", ptr("preview"))), key, Completions, false, "/v1/chat/completions?api-version=2023-05-15",
			"/openai/v1/chat/completions?api-version=preview"},
		{"azure v1 sets none: the client's stays", named(azure("openAI", nil)), key, Completions, false, "/v1/chat/completions?api-version=2023-05-15",
			"/openai/v1/chat/completions?api-version=2023-05-15"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, tt.provider, tt.auth)
			if got := string(p.AppendPath(nil, tt.rt, "m", tt.stream, []byte(tt.client))); got != tt.want {
				t.Errorf("AppendPath = %q\nwant          %q", got, tt.want)
			}
		})
	}
}

// FuzzAppendPath: whatever the client names, the target is an origin-form
// request target with nothing that could end the request line or start a
// fragment, and the model stays within its path segment.
func FuzzAppendPath(f *testing.F) {
	for _, s := range []string{"gpt-4o", "../../x", "a/b:c?d#e f", "..", ".", "claude-3-5-sonnet-20241022", "models/x", "\r\nHost: evil", "%2e%2e"} {
		f.Add(s, "/v1/chat/completions?alt=1&b=2", true)
	}
	providers := []*Provider{
		mustNew(f, named(bedrock("us-east-1")), nil),
		mustNew(f, named(gemini()), nil),
		mustNew(f, named(vertex("global")), &config.BackendAuth{Passthrough: &config.BackendAuthPassthrough{}}),
		mustNew(f, named(azure("openAI", ptr("2024-10-21"))), nil),
	}
	// Each provider's path is the model segment between a fixed head and
	// a fixed tail.
	heads := []string{"/model/", "/v1beta/models/", "/v1/projects/proj/locations/global/publishers/", "/openai/deployments/"}
	f.Fuzz(func(t *testing.T, model, client string, stream bool) {
		if _, err := url.ParseRequestURI(client); err != nil || strings.ContainsAny(client, " #") || !strings.HasPrefix(client, "/") {
			return // the server hands over a target it parsed
		}
		for i, p := range providers {
			target := string(p.AppendPath(nil, Completions, model, stream, []byte(client)))
			if strings.ContainsAny(target, "\r\n #\x00") || !strings.HasPrefix(target, "/") {
				t.Fatalf("%s: target %q", p.Kind(), target)
			}
			u, err := url.ParseRequestURI(target)
			if err != nil {
				t.Fatalf("%s: target %q does not parse: %v", p.Kind(), target, err)
			}
			if !strings.HasPrefix(target, heads[i]) {
				if p.kind == kindVertex && strings.HasSuffix(u.Path, "/endpoints/openapi/chat/completions") {
					continue
				}
				t.Fatalf("%s: target %q", p.Kind(), target)
			}
			rest := strings.TrimPrefix(u.EscapedPath(), heads[i])
			if p.kind == kindVertex {
				rest = rest[strings.IndexByte(rest, '/')+1:] // publisher/
				rest = strings.TrimPrefix(rest, "models/")
			}
			seg, _, _ := strings.Cut(rest, "/")
			if p.kind == kindBedrock && rest != seg+"/converse" && rest != seg+"/converse-stream" {
				t.Fatalf("bedrock: model %q escaped out of its segment: %q", model, target)
			}
			if seg == "." || seg == ".." {
				t.Fatalf("%s: dot segment in %q", p.Kind(), target)
			}
			if p.kind == kindGemini || p.kind == kindVertex {
				if strings.Count(seg, ":") != 1 {
					t.Fatalf("%s: model %q gives method segment %q", p.Kind(), model, seg)
				}
			}
		}
	})
}

// guarded is a Bedrock provider with a guardrail.
func guarded(id, version string) *config.NamedAIProvider {
	return named(config.AIProvider{Bedrock: &config.BedrockProvider{Region: "us-east-1", GuardrailIdentifier: &id, GuardrailVersion: &version}})
}

func TestPrepareBody(t *testing.T) {
	const msgs = `"max_tokens":10,"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		desc     string
		provider *config.NamedAIProvider
		rt       RouteType
		body     string
		want     string // "" : body returned as is
	}{
		{"vertex claude", named(vertex("us-east5")), Messages, `{"model":"claude-sonnet-4-5",` + msgs + `}`,
			`{"anthropic_version":"vertex-2023-10-16",` + msgs + `}`},
		{"vertex claude replaces a version", named(vertex("us-east5")), Completions, `{"anthropic_version":"x","model":"anthropic/claude-3",` + msgs + `,"stream":true}`,
			`{"anthropic_version":"vertex-2023-10-16",` + msgs + `,"stream":true}`},
		{"vertex claude with an escaped name", named(vertex("us-east5")), Messages, `{"mod\u0065l":"claude-3",` + msgs + `}`,
			`{"anthropic_version":"vertex-2023-10-16",` + msgs + `}`},
		{"vertex fixed claude model", named(config.AIProvider{Vertex: &config.VertexProvider{Region: "r", ProjectID: "p", Model: ptr("claude-3")}}),
			Responses, `{"model":"claude-3",` + msgs + `}`, `{"anthropic_version":"vertex-2023-10-16",` + msgs + `}`},
		{"vertex count tokens keeps the model", named(vertex("us-east5")), AnthropicTokenCount, `{"model":"claude-3",` + msgs + `}`,
			`{"anthropic_version":"vertex-2023-10-16","model":"claude-3",` + msgs + `}`},
		{"vertex gemini unchanged", named(vertex("us-east5")), Completions, `{"contents":[]}`, ""},
		{"vertex other model unchanged", named(vertex("us-east5")), Completions, `{"model":"meta/llama"}`, ""},
		{"vertex passthrough unchanged", named(vertex("us-east5")), Passthrough, `{"model":"claude-3"}`, ""},
		{"vertex not an object", named(vertex("us-east5")), AnthropicTokenCount, `[1]`, ""},
		{"anthropic unchanged", named(anthropic()), Messages, `{"model":"claude-3"}`, ""},
		{"bedrock unchanged", named(bedrock("us-east-1")), Messages, `{"messages":[]}`, ""},
		{"bedrock guardrail", guarded("gr-1", "DRAFT"), Completions, `{"messages":[],"inferenceConfig":{}}`,
			`{"messages":[],"inferenceConfig":{},"guardrailConfig":{"guardrailIdentifier":"gr-1","guardrailVersion":"DRAFT","trace":"enabled"}}`},
		{"bedrock guardrail replaces the client's", guarded("arn:aws:bedrock:us-east-1:1:guardrail/g\"x", "1"), Messages,
			`{"guardrailConfig":{"guardrailIdentifier":"other"},"messages":[],"guardrailConfig":null}`,
			`{"guardrailConfig":{"guardrailIdentifier":"arn:aws:bedrock:us-east-1:1:guardrail/g\"x","guardrailVersion":"1","trace":"enabled"},"messages":[]}`},
		{"bedrock guardrail, passthrough unchanged", guarded("gr-1", "1"), Passthrough, `{"messages":[]}`, ""},
		{"bedrock guardrail, not an object", guarded("gr-1", "1"), Responses, `[]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, tt.provider, &config.BackendAuth{Passthrough: &config.BackendAuthPassthrough{}})
			body := []byte(tt.body)
			got := p.PrepareBody(make([]byte, 0, 256), body, tt.rt)
			if tt.want == "" {
				if &got[0] != &body[0] || len(got) != len(body) {
					t.Errorf("PrepareBody = %q, want the body itself", got)
				}
				return
			}
			if string(got) != tt.want {
				t.Errorf("PrepareBody = %s\nwant          %s", got, tt.want)
			}
		})
	}
}
