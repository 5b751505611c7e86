package provider

import (
	"strings"

	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
)

// azureSettings are an Azure provider's: an Azure OpenAI resource
// (openai.azure.com) or a Foundry one (services.ai.azure.com).
type azureSettings struct {
	host    string
	foundry bool
	// version is the API version: "v1", "preview" or a dated one, which
	// addresses deployments (/openai/deployments/{model}/...).
	version string
	// project is the Foundry project (default: the resource name).
	project string
}

func (a *azureSettings) compile(c *config.AzureProvider) error {
	name := strings.ToLower(c.ResourceName)
	if !ValidHostLabel(name) {
		return fieldError("provider.azure.resourceName", "must be a DNS label (letters, digits and hyphens): it becomes the host name")
	}
	a.foundry = c.ResourceType != "openAI"
	a.host = name + ".openai.azure.com"
	if a.foundry {
		a.host = name + ".services.ai.azure.com"
	}
	a.version = c.APIVersionOrDefault()
	if !validAPIVersion(a.version) {
		return fieldError("provider.azure.apiVersion", "must be letters, digits, '-', '.' or '_': it goes into the query")
	}
	a.project = c.ResourceName
	if c.ProjectName != nil {
		a.project = *c.ProjectName
	}
	return nil
}

func validAPIVersion(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isUnreserved(c) && c != '~') {
			return false
		}
	}
	return s != ""
}

// vertexSettings are a Vertex AI provider's.
type vertexSettings struct {
	project string
	region  string
}

func (v *vertexSettings) compile(c *config.VertexProvider) error {
	if !ValidHostLabel(c.Region) {
		return fieldError("provider.vertex.region", "must be a location such as us-central1, global, us or eu (lower-case letters, digits and hyphens)")
	}
	v.project, v.region = c.ProjectID, c.Region
	return nil
}

// host is the endpoint of the region, as agentgateway picks it: the
// global endpoint, a multi-region's ("us", "eu") or a region's.
func (v *vertexSettings) host() string {
	switch v.region {
	case "global":
		return "aiplatform.googleapis.com"
	case "us", "eu":
		return "aiplatform." + v.region + ".rep.googleapis.com"
	}
	return v.region + "-aiplatform.googleapis.com"
}

// bedrockSettings are a Bedrock provider's.
type bedrockSettings struct {
	region string
	// guardrail is the guardrailConfig member's value (nil: none).
	guardrail []byte
}

func (b *bedrockSettings) compile(c *config.BedrockProvider) {
	b.region = c.RegionOrDefault()
	if c.GuardrailIdentifier != nil && c.GuardrailVersion != nil {
		b.guardrail = guardrailConfig(*c.GuardrailIdentifier, *c.GuardrailVersion)
	}
}

// guardrailConfig is Converse's guardrailConfig for a guardrail, with its
// trace enabled, as agentgateway sends it (conversion/bedrock.rs). Stream
// requests get the same: streamProcessingMode is left to Bedrock's default
// (sync), which agentgateway does not set either.
func guardrailConfig(id, version string) []byte {
	b := append([]byte(nil), `{"guardrailIdentifier":`...)
	b = llm.AppendString(b, id)
	b = append(b, `,"guardrailVersion":`...)
	b = llm.AppendString(b, version)
	return append(b, `,"trace":"enabled"}`...)
}

// customFormat is an API format a custom provider lists, among those the
// gateway serves.
type customFormat uint8

const (
	formatCompletions customFormat = iota
	formatMessages
	formatResponses
	formatEmbeddings
	formatAnthropicTokenCount
	customFormats
)

// customFormatOf is the customFormat of a configured format type (false
// for the types no served route reaches: generateContent,
// geminiCountTokens, realtime, rerank).
func customFormatOf(typ string) (customFormat, bool) {
	switch typ {
	case "completions":
		return formatCompletions, true
	case "messages":
		return formatMessages, true
	case "responses":
		return formatResponses, true
	case "embeddings":
		return formatEmbeddings, true
	case "anthropicTokenCount":
		return formatAnthropicTokenCount, true
	}
	return 0, false
}

// customSettings are a custom provider's formats, each with its path when
// the configuration gives one.
type customSettings struct {
	listed [customFormats]bool
	path   [customFormats]string
}

func (c *customSettings) compile(p *config.CustomProvider) {
	for _, f := range p.Formats {
		cf, ok := customFormatOf(f.Type)
		if !ok {
			continue
		}
		c.listed[cf] = true
		if f.Path != nil {
			c.path[cf] = *f.Path
		}
	}
}

func (c *customSettings) lists(f customFormat) bool { return c.listed[f] }

// chatFormat is the format a chat route goes out in: the client's own when
// listed, else completions, else messages.
func (c *customSettings) chatFormat(rt RouteType) convert.Format {
	switch {
	case rt == Completions && c.listed[formatCompletions]:
		return convert.Chat
	case rt == Messages && c.listed[formatMessages]:
		return convert.Messages
	case rt == Responses && c.listed[formatResponses]:
		return convert.Responses
	case c.listed[formatCompletions]:
		return convert.Chat
	case c.listed[formatMessages]:
		return convert.Messages
	}
	return convert.FormatUnknown
}

// publisher is who serves a model on Vertex AI.
type publisher uint8

const (
	publisherOther     publisher = iota // the OpenAI-compatible endpoint
	publisherGoogle                     // generateContent
	publisherAnthropic                  // rawPredict (the Messages API)
)

// vertexPublisherOf tells Claude models, Gemini models and the rest apart
// as agentgateway does.
func vertexPublisherOf(model string) publisher {
	if vertexClaudeModel(model) != "" {
		return publisherAnthropic
	}
	if vertexGeminiModel(model) != "" {
		return publisherGoogle
	}
	return publisherOther
}

// vertexClaudeModel is the Claude model id of model ("" when it names
// none): "publishers/anthropic/models/" or "anthropic/" stripped, or a name
// starting with "claude".
func vertexClaudeModel(model string) string {
	if _, after, ok := strings.Cut(model, "publishers/anthropic/models/"); ok {
		return after
	}
	if after, ok := strings.CutPrefix(model, "anthropic/"); ok {
		return after
	}
	if strings.HasPrefix(model, "claude") {
		return model
	}
	return ""
}

// vertexClaudeVersion splits a trailing -YYYYMMDD off a Claude model id:
// Vertex names the version after an "@" (claude-3-5-sonnet@20241022).
func vertexClaudeVersion(id string) (base, date string) {
	const dateLen = 8
	if len(id) <= dateLen || id[len(id)-dateLen-1] != '-' {
		return id, ""
	}
	date = id[len(id)-dateLen:]
	for i := 0; i < len(date); i++ {
		if date[i] < '0' || date[i] > '9' {
			return id, ""
		}
	}
	return id[:len(id)-dateLen-1], date
}

// embeddingPrefixes are Google embedding models, which generateContent
// does not serve.
var embeddingPrefixes = []string{"text-embedding-", "gemini-embedding-", "text-multilingual-embedding-", "textembedding-", "multimodalembedding"}

// vertexGeminiModel is the Gemini model id of model ("" when it names
// none): "publishers/google/models/", "models/" or "google/" stripped, one
// plain path segment, a gemini- (or gemini@) name that is not an embedding
// model.
func vertexGeminiModel(model string) string {
	id := model
	if _, after, ok := strings.Cut(model, "publishers/google/models/"); ok {
		id = after
	} else if after, ok := strings.CutPrefix(model, "models/"); ok {
		id = after
	} else if after, ok := strings.CutPrefix(model, "google/"); ok {
		id = after
	}
	if !plainSegment(id) {
		return ""
	}
	for _, p := range embeddingPrefixes {
		if strings.HasPrefix(id, p) {
			return ""
		}
	}
	if strings.HasPrefix(id, "gemini-") || strings.HasPrefix(id, "gemini@") {
		return id
	}
	return ""
}

// plainSegment reports a path segment that needs no escaping to stay one
// segment: no separators, escapes, dot segments or control characters.
func plainSegment(s string) bool {
	if s == "" || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '/' || c == '\\' || c == '%' || c == '?' || c == '#':
			return false
		case c < 0x20 || c == 0x7f:
			return false
		}
	}
	return true
}

// isClaude reports a Claude model name (Azure Foundry's test, as
// agentgateway's: any case).
func isClaude(model string) bool {
	return len(model) >= 6 && strings.EqualFold(model[:6], "claude")
}
