package config

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/relaygate/gateway/config/decode"
)

// AIBackend is the `ai` backend (agentgateway's LocalAIBackend): one named
// provider, written inline, or `groups` of providers in priority order, the
// providers of a group being balanced together.
//
//	ai: {name: openai, provider: {openAI: {model: gpt-4o-mini}}}
//	ai: {groups: [{providers: [{name: a, provider: {...}}, ...]}, ...]}
type AIBackend struct {
	// Provider is the single-provider form.
	Provider *NamedAIProvider
	// Groups is the groups form (1 to 32 groups of 1 to 32 providers).
	Groups []AIProviderGroup
}

// maxAIGroups bounds the groups of an ai backend (the spec's 1..32; a
// group's providers are bounded likewise by their cfg tag).
const maxAIGroups = 32

// DecodeNode decodes either form: a map whose only key is `groups` is the
// groups form, as agentgateway reads it; any other map is a provider.
func (b *AIBackend) DecodeNode(n *decode.Node) {
	if !n.Expect(decode.Map) {
		return
	}
	if n.Get("groups") == nil {
		b.Provider = &NamedAIProvider{}
		n.Decode(b.Provider)
		return
	}
	// A provider's field is out of place beside groups; any other key is
	// a typo, reported as such.
	n.UnknownFields(aiBackendKeys...)
	for _, k := range n.Keys() {
		if k != "groups" && slices.Contains(aiBackendKeys, k) {
			n.Get(k).Errorf("not allowed together with groups (set it on each provider)")
		}
	}
	groups := n.Get("groups")
	if groups.Decode(&b.Groups) || groups.Kind() == decode.List {
		switch {
		case len(b.Groups) == 0:
			groups.Errorf("must have at least 1 item")
		case len(b.Groups) > maxAIGroups:
			groups.Errorf("must have at most %d items", maxAIGroups)
		}
	}
	// Provider names are unique across all groups (policies target a
	// provider by name).
	type at struct{ g, p int }
	seen := map[string]at{}
	for gi, g := range b.Groups {
		for pi, p := range g.Providers {
			if p.Name == "" {
				continue
			}
			if prev, dup := seen[p.Name]; dup {
				n.ErrorfAt(fmt.Sprintf("groups[%d].providers[%d].name", gi, pi), "provider %q is already defined by groups[%d].providers[%d]", p.Name, prev.g, prev.p)
				continue
			}
			seen[p.Name] = at{gi, pi}
		}
	}
}

// aiBackendKeys are the keys of an ai backend: groups and a provider's.
var aiBackendKeys = append([]string{"groups"}, decode.FieldNames(NamedAIProvider{})...)

// MarshalJSON writes the form the file used.
func (b AIBackend) MarshalJSON() ([]byte, error) {
	if b.Provider != nil {
		return json.Marshal(b.Provider)
	}
	return json.Marshal(map[string]any{"groups": b.Groups})
}

// AIProviderGroup is one priority level of an ai backend.
type AIProviderGroup struct {
	Providers []NamedAIProvider `json:"providers" cfg:"required,minItems=1,maxItems=32"`
}

// NamedAIProvider is an LLM provider of an ai backend (agentgateway's
// LocalNamedAIProvider): the provider and its settings, where to reach it
// when not at its usual host, and backend policies for it alone.
type NamedAIProvider struct {
	// Name identifies the provider (in metrics, and for policies).
	Name     string     `json:"name" cfg:"required,minLen=1"`
	Provider AIProvider `json:"provider" cfg:"required"`
	// HostOverride is "host:port" to send requests to instead of the
	// provider's host.
	HostOverride string `json:"hostOverride,omitempty"`
	// PathOverride replaces the request path the provider's API uses.
	PathOverride *string `json:"pathOverride,omitempty" cfg:"maxLen=1024"`
	// PathPrefix replaces the provider's base path prefix ("/v1").
	PathPrefix *string `json:"pathPrefix,omitempty" cfg:"maxLen=1024"`
	// Tokenize counts the request's tokens before sending it, for rate
	// limits that know the cost up front.
	Tokenize bool             `json:"tokenize,omitempty"`
	Policies *BackendPolicies `json:"policies,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*NamedAIProvider) FieldRules() {}

// Validate checks the host and the paths.
func (p *NamedAIProvider) Validate(v *decode.Validation) {
	if v.Node().Get("hostOverride") != nil {
		if err := checkHostPort(p.HostOverride); err != nil {
			v.Errorf("hostOverride", "%v", err)
		}
	}
	checkURLPath(v, "pathOverride", p.PathOverride)
	checkURLPath(v, "pathPrefix", p.PathPrefix)
}

// checkURLPath requires an absolute URL path.
func checkURLPath(v *decode.Validation, field string, p *string) {
	if p != nil && (len(*p) == 0 || (*p)[0] != '/') {
		v.Errorf(field, "must start with \"/\"")
	}
}

// AIProvider is exactly one provider kind with its settings (agentgateway's
// AIProvider).
type AIProvider struct {
	OpenAI    *OpenAIProvider    `json:"openAI,omitempty"`
	Gemini    *GeminiProvider    `json:"gemini,omitempty"`
	Vertex    *VertexProvider    `json:"vertex,omitempty"`
	Anthropic *AnthropicProvider `json:"anthropic,omitempty"`
	Bedrock   *BedrockProvider   `json:"bedrock,omitempty"`
	Azure     *AzureProvider     `json:"azure,omitempty"`
	Copilot   *CopilotProvider   `json:"copilot,omitempty"`
	Custom    *CustomProvider    `json:"custom,omitempty"`
}

// AIProviderKinds are the provider kinds of the schema, as the file names
// them.
var AIProviderKinds = []string{"openAI", "gemini", "vertex", "anthropic", "bedrock", "azure", "copilot", "custom"}

// DecodeNode decodes the map strictly and requires exactly one kind.
func (p *AIProvider) DecodeNode(n *decode.Node) {
	type plain AIProvider
	decodeExactlyOne(n, (*plain)(p), AIProviderKinds...)
}

// Kind names the kind set, as in the file.
func (p *AIProvider) Kind() string {
	switch {
	case p.OpenAI != nil:
		return "openAI"
	case p.Gemini != nil:
		return "gemini"
	case p.Vertex != nil:
		return "vertex"
	case p.Anthropic != nil:
		return "anthropic"
	case p.Bedrock != nil:
		return "bedrock"
	case p.Azure != nil:
		return "azure"
	case p.Copilot != nil:
		return "copilot"
	case p.Custom != nil:
		return "custom"
	}
	return ""
}

// OpenAIProvider is OpenAI's API (api.openai.com).
type OpenAIProvider struct {
	// Model, when set, replaces the model the client asked for.
	Model *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
	// Moderation runs OpenAI's moderation on the prompt and the answer.
	Moderation *OpenAIModeration `json:"moderation,omitempty"`
}

// OpenAIModeration is inline moderation of an OpenAI provider.
type OpenAIModeration struct {
	// Model is the moderation model (default omni-moderation-latest).
	Model  *string                 `json:"model,omitempty" cfg:"minLen=1"`
	Policy *OpenAIModerationPolicy `json:"policy,omitempty"`
}

// OpenAIModerationPolicy sets what moderation does with the prompt (input)
// and the answer (output).
type OpenAIModerationPolicy struct {
	Input  *OpenAIModerationMode `json:"input,omitempty"`
	Output *OpenAIModerationMode `json:"output,omitempty"`
}

// OpenAIModerationMode is "score" (record the scores) or "block".
type OpenAIModerationMode struct {
	Mode string `json:"mode" cfg:"required,enum=score|block"`
}

// GeminiProvider is Google's Gemini API (generativelanguage.googleapis.com).
type GeminiProvider struct {
	Model *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
}

// AnthropicProvider is Anthropic's API (api.anthropic.com).
type AnthropicProvider struct {
	Model *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
}

// CopilotProvider is GitHub Copilot's API.
type CopilotProvider struct {
	Model *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
}

// VertexProvider is Google Cloud's Vertex AI. The spec requires the
// region, which agentgateway would leave out for the global endpoint:
// write `region: global` for it.
type VertexProvider struct {
	Model *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
	// Region is a location ("us-central1"), "global", or the multi-region
	// "us" or "eu".
	Region    string `json:"region" cfg:"required,minLen=1,maxLen=64"`
	ProjectID string `json:"projectId" cfg:"required,minLen=1,maxLen=64"`
}

// BedrockProvider is AWS Bedrock. agentgateway requires the region; the
// spec gives it a default (DefaultBedrockRegion), so it may be left out.
type BedrockProvider struct {
	Model  *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
	Region string  `json:"region,omitempty" cfg:"minLen=1,maxLen=63,pattern=^[a-z0-9-]+$"`
	// GuardrailIdentifier and GuardrailVersion name a Bedrock guardrail
	// applied by Bedrock itself; both or neither.
	GuardrailIdentifier *string `json:"guardrailIdentifier,omitempty" cfg:"minLen=1,maxLen=256"`
	GuardrailVersion    *string `json:"guardrailVersion,omitempty" cfg:"minLen=1,maxLen=256"`
}

// DefaultBedrockRegion is the region of a Bedrock provider or model that
// names none (the spec's default).
const DefaultBedrockRegion = "us-east-1"

// RegionOrDefault returns the region, DefaultBedrockRegion when unset.
func (b *BedrockProvider) RegionOrDefault() string {
	if b.Region == "" {
		return DefaultBedrockRegion
	}
	return b.Region
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*BedrockProvider) FieldRules() {}

// Validate requires the guardrail's identifier and version together.
func (b *BedrockProvider) Validate(v *decode.Validation) {
	switch {
	case b.GuardrailIdentifier != nil && b.GuardrailVersion == nil:
		v.Errorf("guardrailVersion", "required with guardrailIdentifier")
	case b.GuardrailIdentifier == nil && b.GuardrailVersion != nil:
		v.Errorf("guardrailIdentifier", "required with guardrailVersion")
	}
}

// AzureProvider is Azure OpenAI or Azure AI Foundry. The host is built
// from ResourceName and ResourceType: {resourceName}.openai.azure.com, or
// {resourceName}.services.ai.azure.com for foundry (aiServices is its
// other name).
type AzureProvider struct {
	Model        *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
	ResourceName string  `json:"resourceName" cfg:"required,minLen=1,maxLen=256"`
	ResourceType string  `json:"resourceType" cfg:"required,enum=openAI|foundry|aiServices"`
	// APIVersion is "v1" (the default), "preview" or a dated version,
	// which addresses the deployment named by the model.
	APIVersion *string `json:"apiVersion,omitempty" cfg:"minLen=1,maxLen=64"`
	// ProjectName is the Foundry project (default: the resource name).
	ProjectName *string `json:"projectName,omitempty" cfg:"minLen=1,maxLen=256"`
}

// DefaultAzureAPIVersion is the API version of an Azure provider that
// names none.
const DefaultAzureAPIVersion = "v1"

// APIVersionOrDefault returns the API version, DefaultAzureAPIVersion when
// unset.
func (a *AzureProvider) APIVersionOrDefault() string {
	if a.APIVersion == nil {
		return DefaultAzureAPIVersion
	}
	return *a.APIVersion
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*AzureProvider) FieldRules() {}

// Validate keeps projectName to Foundry resources.
func (a *AzureProvider) Validate(v *decode.Validation) {
	if a.ProjectName != nil && a.ResourceType == "openAI" {
		v.Errorf("projectName", "only allowed with resourceType foundry (or aiServices)")
	}
}

// CustomProvider is any other provider, described by the API formats it
// accepts; its address comes from the backend (hostOverride, or a model's
// params.baseUrl).
type CustomProvider struct {
	Model *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
	// ProviderOverride is the provider's name for cost lookup and
	// telemetry (default "custom").
	ProviderOverride *string          `json:"providerOverride,omitempty" cfg:"minLen=1"`
	Formats          []ProviderFormat `json:"formats" cfg:"required,minItems=1"`
}

// ProviderFormat is an API format a custom provider accepts, with its path
// when not the usual one.
type ProviderFormat struct {
	Type string  `json:"type" cfg:"required,enum=completions|messages|responses|embeddings|anthropicTokenCount|generateContent|geminiCountTokens|realtime|rerank"`
	Path *string `json:"path,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*ProviderFormat) FieldRules() {}

// Validate checks the path.
func (f *ProviderFormat) Validate(v *decode.Validation) { checkURLPath(v, "path", f.Path) }

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*CustomProvider) FieldRules() {}

// Validate refuses a format given twice.
func (c *CustomProvider) Validate(v *decode.Validation) {
	seen := map[string]int{}
	for i, f := range c.Formats {
		if prev, dup := seen[f.Type]; dup && f.Type != "" {
			v.Errorf(indexPath("formats", i)+".type", "format %q is already listed by formats[%d]", f.Type, prev)
			continue
		}
		seen[f.Type] = i
	}
}
