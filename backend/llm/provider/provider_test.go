package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
)

func ptr[T any](v T) *T { return &v }

// named wraps a provider kind into a NamedAIProvider.
func named(kind config.AIProvider) *config.NamedAIProvider {
	return &config.NamedAIProvider{Name: "p", Provider: kind}
}

func openAI() config.AIProvider { return config.AIProvider{OpenAI: &config.OpenAIProvider{}} }
func anthropic() config.AIProvider {
	return config.AIProvider{Anthropic: &config.AnthropicProvider{}}
}
func gemini() config.AIProvider { return config.AIProvider{Gemini: &config.GeminiProvider{}} }
func vertex(region string) config.AIProvider {
	return config.AIProvider{Vertex: &config.VertexProvider{Region: region, ProjectID: "proj"}}
}
func bedrock(region string) config.AIProvider {
	return config.AIProvider{Bedrock: &config.BedrockProvider{Region: region}}
}
func azure(typ string, version *string) config.AIProvider {
	return config.AIProvider{Azure: &config.AzureProvider{ResourceName: "res", ResourceType: typ, APIVersion: version}}
}
func custom(formats ...config.ProviderFormat) config.AIProvider {
	return config.AIProvider{Custom: &config.CustomProvider{Formats: formats}}
}

func mustNew(t testing.TB, np *config.NamedAIProvider, auth *config.BackendAuth) *Provider {
	t.Helper()
	p, err := New(np, auth)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func TestNewErrors(t *testing.T) {
	withHost := func(k config.AIProvider) *config.NamedAIProvider {
		np := named(k)
		np.HostOverride = "127.0.0.1:1"
		return np
	}
	key := func(s string) *config.BackendAuth {
		return &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: s}, Short: true}}
	}
	tests := []struct {
		desc     string
		provider *config.NamedAIProvider
		auth     *config.BackendAuth
		path     string
	}{
		{"copilot provider", named(config.AIProvider{Copilot: &config.CopilotProvider{}}), nil, "provider.copilot"},
		{"no kind", named(config.AIProvider{}), nil, "provider"},
		{"azure tenant that is no tenant", named(azure("openAI", nil)), &config.BackendAuth{Azure: &config.AzureAuth{ExplicitConfig: &config.AzureExplicitConfig{
			ClientSecret: &config.AzureClientSecret{TenantID: "t/../../x", ClientID: "c", ClientSecret: "sk-a"}}}}, "policies.backendAuth.azure.explicitConfig.clientSecret.tenant_id"},
		{"azure auth of no form", named(azure("openAI", nil)), &config.BackendAuth{Azure: &config.AzureAuth{ExplicitConfig: &config.AzureExplicitConfig{}}}, "policies.backendAuth.azure"},
		{"copilot auth", named(openAI()), &config.BackendAuth{Copilot: true}, "policies.backendAuth"},
		{"gcp idToken", named(vertex("us-central1")), &config.BackendAuth{GCP: &config.GCPAuth{Type: "idToken"}}, "policies.backendAuth.gcp.type"},
		{"aws assumeRole", named(bedrock("us-east-1")), &config.BackendAuth{AWS: &config.AWSAuth{AssumeRole: &config.AWSAssumeRole{RoleARN: "arn:aws:iam::1:role/r"}}}, "policies.backendAuth.aws.assumeRole"},
		{"credential without a location", named(openAI()), &config.BackendAuth{Credentials: []config.BackendAuthCredential{{Key: config.Secret{Inline: "k"}}}}, "policies.backendAuth.credentials[0].location"},
		{"credential with a line break", named(openAI()), &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "k"}}, Credentials: []config.BackendAuthCredential{
			{Location: config.AuthLocation{Header: &config.HeaderLocation{Name: "x"}}, Key: config.Secret{Inline: "a\r\nX-Injected: 1"}}}}, "policies.backendAuth.credentials[0].key"},
		{"key in a query parameter", named(gemini()), &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "k"},
			Location: &config.AuthLocation{QueryParameter: &config.NamedLocation{Name: "key"}}}}, "policies.backendAuth.key.location.queryParameter"},
		{"inline key with a line break", named(openAI()), key("sk-a\r\nX-Injected: 1"), "policies.backendAuth.key"},
		{"inline key of spaces", named(openAI()), key("   "), "policies.backendAuth.key"},
		{"long form key with control characters", named(openAI()), &config.BackendAuth{Key: &config.BackendAuthKey{Value: config.Secret{Inline: "a\x00b"}}}, "policies.backendAuth.key.value"},
		{"aws auth without a region", named(openAI()), &config.BackendAuth{AWS: &config.AWSAuth{}}, "policies.backendAuth.aws.region"},
		{"gcp credential not JSON", named(vertex("us-central1")), &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{Inline: "{not json"}}}, "policies.backendAuth.gcp.credential"},
		{"gcp credential of a 3-legged client", named(vertex("us-central1")), &config.BackendAuth{GCP: &config.GCPAuth{Credential: &config.Secret{Inline: `{"installed":{"client_id":"x"}}`}}}, "policies.backendAuth.gcp.credential"},
		{"custom without hostOverride", named(custom(config.ProviderFormat{Type: "completions"})), nil, "hostOverride"},
		{"hostOverride without port", &config.NamedAIProvider{Name: "p", Provider: openAI(), HostOverride: "localhost"}, nil, "hostOverride"},
		{"azure resource name that is no host label", named(config.AIProvider{Azure: &config.AzureProvider{ResourceName: "a.b/c", ResourceType: "openAI"}}), nil, "provider.azure.resourceName"},
		{"azure api version with a query in it", named(azure("openAI", ptr("2024-01-01&x=1"))), nil, "provider.azure.apiVersion"},
		{"vertex region that is no host label", withHost(vertex("us-central1.evil.com")), nil, "provider.vertex.region"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := New(tt.provider, tt.auth)
			var fe *decode.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("New = %v, %v; want a *decode.FieldError", p, err)
			}
			if fe.Path != tt.path {
				t.Errorf("path %q (%v), want %q", fe.Path, err, tt.path)
			}
			for _, secret := range []string{"sk-a", "X-Injected", "not json"} {
				if tt.auth != nil && strings.Contains(fe.Msg, secret) {
					t.Errorf("message %q quotes the secret", fe.Msg)
				}
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	tests := []struct {
		desc                string
		provider            *config.NamedAIProvider
		kind, system, model string
		addr                string
		tls                 backend.UpstreamTLS
	}{
		{"openAI", named(config.AIProvider{OpenAI: &config.OpenAIProvider{Model: ptr("gpt-4o")}}), "openAI", "openai", "gpt-4o",
			"api.openai.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "api.openai.com"}},
		{"azure openAI", named(azure("openAI", nil)), "azure", "azure.ai.openai", "",
			"res.openai.azure.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "res.openai.azure.com"}},
		{"azure foundry", named(azure("foundry", nil)), "azure", "azure.ai.openai", "",
			"res.services.ai.azure.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "res.services.ai.azure.com"}},
		{"azure aiServices", named(azure("aiServices", nil)), "azure", "azure.ai.openai", "",
			"res.services.ai.azure.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "res.services.ai.azure.com"}},
		{"anthropic", named(anthropic()), "anthropic", "anthropic", "",
			"api.anthropic.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "api.anthropic.com"}},
		{"gemini", named(gemini()), "gemini", "gcp.gemini", "",
			"generativelanguage.googleapis.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "generativelanguage.googleapis.com"}},
		{"vertex region", named(vertex("us-central1")), "vertex", "gcp.vertex_ai", "",
			"us-central1-aiplatform.googleapis.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "us-central1-aiplatform.googleapis.com"}},
		{"vertex global", named(vertex("global")), "vertex", "gcp.vertex_ai", "",
			"aiplatform.googleapis.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "aiplatform.googleapis.com"}},
		{"vertex multi-region", named(vertex("eu")), "vertex", "gcp.vertex_ai", "",
			"aiplatform.eu.rep.googleapis.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "aiplatform.eu.rep.googleapis.com"}},
		{"bedrock", named(bedrock("eu-west-3")), "bedrock", "aws.bedrock", "",
			"bedrock-runtime.eu-west-3.amazonaws.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "bedrock-runtime.eu-west-3.amazonaws.com"}},
		{"bedrock default region", named(bedrock("")), "bedrock", "aws.bedrock", "",
			"bedrock-runtime.us-east-1.amazonaws.com:443", backend.UpstreamTLS{Enabled: true, ServerName: "bedrock-runtime.us-east-1.amazonaws.com"}},
		{"custom", &config.NamedAIProvider{Name: "p", HostOverride: "llm.internal:8080",
			Provider: config.AIProvider{Custom: &config.CustomProvider{Formats: []config.ProviderFormat{{Type: "completions"}}}}},
			"custom", "custom", "", "llm.internal:8080", backend.UpstreamTLS{}},
		{"custom named", &config.NamedAIProvider{Name: "p", HostOverride: "llm.internal:8080",
			Provider: config.AIProvider{Custom: &config.CustomProvider{ProviderOverride: ptr("deepseek"), Model: ptr("m"), Formats: []config.ProviderFormat{{Type: "completions"}}}}},
			"custom", "deepseek", "m", "llm.internal:8080", backend.UpstreamTLS{}},
		{"hostOverride is plain", &config.NamedAIProvider{Name: "p", Provider: openAI(), HostOverride: "127.0.0.1:9999"},
			"openAI", "openai", "", "127.0.0.1:9999", backend.UpstreamTLS{}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, tt.provider, nil)
			addr, tls := p.Upstream()
			if p.Name() != "p" || p.Kind() != tt.kind || p.System() != tt.system || p.Model() != tt.model || addr != tt.addr || tls != tt.tls {
				t.Errorf("got name %q kind %q system %q model %q upstream %q %+v\nwant kind %q system %q model %q upstream %q %+v",
					p.Name(), p.Kind(), p.System(), p.Model(), addr, tls, tt.kind, tt.system, tt.model, tt.addr, tt.tls)
			}
		})
	}
}

func TestRouteTypes(t *testing.T) {
	served := map[config.LLMRouteType]RouteType{
		"completions": Completions, "messages": Messages, "responses": Responses, "models": Models,
		"embeddings": Embeddings, "anthropicTokenCount": AnthropicTokenCount, "passthrough": Passthrough,
	}
	for _, name := range config.LLMRouteTypes {
		rt, ok := ParseRouteType(config.LLMRouteType(name))
		want, serve := served[config.LLMRouteType(name)]
		if ok != serve || rt != want {
			t.Errorf("ParseRouteType(%q) = %v, %v; want %v, %v", name, rt, ok, want, serve)
		}
		if ok && rt.String() != name {
			t.Errorf("%v.String() = %q, want %q", rt, rt.String(), name)
		}
	}
	if _, ok := ParseRouteType("bogus"); ok {
		t.Error("ParseRouteType took an unknown type")
	}
	if RouteType(0).String() != "unknown" || RouteType(99).String() != "unknown" {
		t.Error("String of an unknown route type")
	}
}

func TestFormat(t *testing.T) {
	const none = convert.FormatUnknown
	type want struct {
		f  convert.Format
		ok bool
	}
	served, refused := func(f convert.Format) want { return want{f, true} }, want{none, false}
	host := func(k config.AIProvider) *config.NamedAIProvider {
		np := named(k)
		np.HostOverride = "127.0.0.1:1"
		return np
	}
	tests := []struct {
		desc     string
		provider *config.NamedAIProvider
		model    string
		// by route type: Completions, Messages, Responses, Models,
		// Embeddings, AnthropicTokenCount, Passthrough
		want [7]want
	}{
		{"openAI", named(openAI()), "gpt-4o",
			[7]want{served(convert.Chat), served(convert.Chat), served(convert.Responses), served(none), served(none), refused, served(none)}},
		{"azure openAI", named(azure("openAI", nil)), "claude-sonnet-4-5",
			[7]want{served(convert.Chat), served(convert.Chat), served(convert.Responses), served(none), served(none), refused, served(none)}},
		{"azure foundry claude", named(azure("foundry", nil)), "claude-sonnet-4-5",
			[7]want{served(convert.Chat), served(convert.Messages), served(convert.Responses), served(none), served(none), served(none), served(none)}},
		{"azure foundry gpt", named(azure("foundry", nil)), "gpt-4o",
			[7]want{served(convert.Chat), served(convert.Chat), served(convert.Responses), served(none), served(none), refused, served(none)}},
		{"anthropic", named(anthropic()), "claude-sonnet-4-5",
			[7]want{served(convert.Messages), served(convert.Messages), served(convert.Messages), served(none), refused, served(none), served(none)}},
		{"gemini", named(gemini()), "gemini-2.5-flash",
			[7]want{served(convert.Gemini), served(convert.Gemini), served(convert.Gemini), served(none), served(none), refused, served(none)}},
		{"vertex claude", named(vertex("global")), "claude-sonnet-4-5",
			[7]want{served(convert.Messages), served(convert.Messages), served(convert.Messages), refused, refused, served(none), served(none)}},
		{"vertex claude by publisher", named(vertex("global")), "publishers/anthropic/models/claude-3-haiku@20240307",
			[7]want{served(convert.Messages), served(convert.Messages), served(convert.Messages), refused, refused, served(none), served(none)}},
		{"vertex gemini", named(vertex("global")), "gemini-2.5-flash",
			[7]want{served(convert.Gemini), served(convert.Gemini), served(convert.Gemini), refused, refused, served(none), served(none)}},
		{"vertex gemini resource name", named(vertex("global")), "models/gemini-2.5-pro",
			[7]want{served(convert.Gemini), served(convert.Gemini), served(convert.Gemini), refused, refused, served(none), served(none)}},
		{"vertex other publisher", named(vertex("global")), "meta/llama-3.3-70b-instruct-maas",
			[7]want{served(convert.Chat), served(convert.Chat), served(convert.Chat), refused, refused, served(none), served(none)}},
		{"vertex gemini embedding model", named(vertex("global")), "gemini-embedding-001",
			[7]want{served(convert.Chat), served(convert.Chat), served(convert.Chat), refused, refused, served(none), served(none)}},
		{"bedrock", named(bedrock("us-east-1")), "anthropic.claude-3-5-sonnet-20240620-v1:0",
			[7]want{served(convert.Bedrock), served(convert.Bedrock), served(convert.Bedrock), refused, refused, refused, served(none)}},
		{"custom completions", host(custom(config.ProviderFormat{Type: "completions"})), "m",
			[7]want{served(convert.Chat), served(convert.Chat), served(convert.Chat), served(none), refused, refused, served(none)}},
		{"custom messages", host(custom(config.ProviderFormat{Type: "messages"}, config.ProviderFormat{Type: "anthropicTokenCount"})), "m",
			[7]want{served(convert.Messages), served(convert.Messages), served(convert.Messages), served(none), refused, served(none), served(none)}},
		{"custom all", host(custom(config.ProviderFormat{Type: "messages"}, config.ProviderFormat{Type: "completions"},
			config.ProviderFormat{Type: "responses"}, config.ProviderFormat{Type: "embeddings"})), "m",
			[7]want{served(convert.Chat), served(convert.Messages), served(convert.Responses), served(none), served(none), refused, served(none)}},
		{"custom responses alone", host(custom(config.ProviderFormat{Type: "responses"})), "m",
			[7]want{refused, refused, served(convert.Responses), served(none), refused, refused, served(none)}},
		{"custom of unserved formats", host(custom(config.ProviderFormat{Type: "rerank"}, config.ProviderFormat{Type: "generateContent"})), "m",
			[7]want{refused, refused, refused, served(none), refused, refused, served(none)}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := mustNew(t, tt.provider, &config.BackendAuth{Passthrough: &config.BackendAuthPassthrough{}})
			for i, w := range tt.want {
				rt := RouteType(i + 1)
				f, ok := p.Format(rt, tt.model)
				if f != w.f || ok != w.ok {
					t.Errorf("Format(%v, %q) = %v, %v; want %v, %v", rt, tt.model, f, ok, w.f, w.ok)
				}
			}
		})
	}
}

// TestFormatFixedModel: the provider's model wins over the request's.
func TestFormatFixedModel(t *testing.T) {
	p := mustNew(t, named(config.AIProvider{Vertex: &config.VertexProvider{Region: "global", ProjectID: "p", Model: ptr("claude-sonnet-4-5")}}), nil)
	if f, _ := p.Format(Completions, "gemini-2.5-flash"); f != convert.Messages {
		t.Errorf("Format = %v, want messages (the fixed Claude model)", f)
	}
	got := string(p.AppendPath(nil, Completions, "gemini-2.5-flash", false, []byte("/v1/chat/completions")))
	if want := "/v1/projects/p/locations/global/publishers/anthropic/models/claude-sonnet-4-5:rawPredict"; got != want {
		t.Errorf("AppendPath = %q, want %q", got, want)
	}
}
