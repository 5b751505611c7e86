package provider

import (
	"github.com/relaygate/gateway/backend/llm/convert"
	"github.com/relaygate/gateway/config"
)

// RouteType is what a request path carries (config.LLMRouteType).
type RouteType uint8

// The route types the gateway serves.
const (
	// Completions is OpenAI Chat Completions.
	Completions RouteType = iota + 1
	// Messages is Anthropic Messages.
	Messages
	// Responses is the OpenAI Responses API.
	Responses
	// Models lists models (GET).
	Models
	// Embeddings is OpenAI embeddings.
	Embeddings
	// AnthropicTokenCount is /v1/messages/count_tokens.
	AnthropicTokenCount
	// Passthrough is anything else, forwarded unparsed.
	Passthrough
)

// routeNames are the route types as config.LLMRouteType spells them, by
// RouteType.
var routeNames = [...]string{
	Completions:         "completions",
	Messages:            "messages",
	Responses:           "responses",
	Models:              "models",
	Embeddings:          "embeddings",
	AnthropicTokenCount: "anthropicTokenCount",
	Passthrough:         "passthrough",
}

// ParseRouteType reads a configured route type; ok is false for the types
// not served (realtime, detect, generateContent, geminiCountTokens,
// rerank) and for unknown ones.
func ParseRouteType(t config.LLMRouteType) (RouteType, bool) {
	for rt, name := range routeNames {
		if rt != 0 && string(t) == name {
			return RouteType(rt), true
		}
	}
	return 0, false
}

// String is the route type's name in the configuration.
func (t RouteType) String() string {
	if t > 0 && int(t) < len(routeNames) {
		return routeNames[t]
	}
	return "unknown"
}

// chat reports the route types whose body is a conversation the gateway
// translates.
func (t RouteType) chat() bool { return t == Completions || t == Messages || t == Responses }

// clientFormat is the format a chat route's client speaks.
func (t RouteType) clientFormat() convert.Format {
	switch t {
	case Completions:
		return convert.Chat
	case Messages:
		return convert.Messages
	case Responses:
		return convert.Responses
	}
	return convert.FormatUnknown
}

// Format is the wire format the provider takes for a chat route type
// (Completions, Messages, Responses) and the request's model (the
// provider's fixed model, when it has one, wins over model):
//   - convert.Chat for openAI, azure and custom providers that list
//     "completions", and for vertex models that are neither Claude nor
//     Gemini (Vertex's OpenAI-compatible endpoint, as agentgateway sends
//     them);
//   - convert.Messages for anthropic, vertex and azure Foundry Claude
//     models, and custom providers that list "messages";
//   - convert.Gemini for gemini and vertex Gemini models;
//   - convert.Bedrock for bedrock;
//   - convert.Responses only when rt is Responses and the provider serves
//     that API itself (openAI, azure, custom listing "responses").
//
// A custom provider gets the client's own format when it lists it, else
// the first of completions, messages it lists. For the other route types
// Format returns convert.FormatUnknown (the body goes unchanged). ok is
// false when the provider cannot serve the route type at all (Embeddings
// on anthropic, say).
func (p *Provider) Format(rt RouteType, model string) (f convert.Format, ok bool) {
	model = p.effectiveModel(model)
	if rt.chat() {
		f = p.chatFormat(rt, model)
		return f, f != convert.FormatUnknown
	}
	return convert.FormatUnknown, p.serves(rt, model)
}

// chatFormat is Format for the chat route types.
func (p *Provider) chatFormat(rt RouteType, model string) convert.Format {
	switch p.kind {
	case kindOpenAI:
		if rt == Responses {
			return convert.Responses
		}
		return convert.Chat
	case kindAzure:
		switch {
		case rt == Messages && p.azure.foundry && isClaude(model):
			return convert.Messages
		case rt == Responses:
			return convert.Responses
		}
		return convert.Chat
	case kindAnthropic:
		return convert.Messages
	case kindGemini:
		return convert.Gemini
	case kindVertex:
		switch vertexPublisherOf(model) {
		case publisherAnthropic:
			return convert.Messages
		case publisherGoogle:
			return convert.Gemini
		}
		return convert.Chat
	case kindBedrock:
		return convert.Bedrock
	case kindCustom:
		return p.custom.chatFormat(rt)
	}
	return convert.FormatUnknown
}

// servesRoute reports whether the provider serves a route type for model
// (already the effective one).
func (p *Provider) servesRoute(rt RouteType, model string) bool {
	if rt.chat() {
		return p.chatFormat(rt, model) != convert.FormatUnknown
	}
	return p.serves(rt, model)
}

// serves reports whether the provider serves a route type that is not a
// chat one.
func (p *Provider) serves(rt RouteType, model string) bool {
	switch rt {
	case Passthrough:
		return true
	case Models:
		// Where the provider's API host lists models; Vertex and the Bedrock
		// runtime have no such call there.
		return p.kind != kindVertex && p.kind != kindBedrock
	case Embeddings:
		switch p.kind {
		case kindOpenAI, kindAzure, kindGemini:
			return true
		case kindCustom:
			return p.custom.lists(formatEmbeddings)
		}
		// Vertex (:predict) and Bedrock (/invoke) take other bodies than
		// OpenAI's, which nothing translates yet.
		return false
	case AnthropicTokenCount:
		switch p.kind {
		case kindAnthropic, kindVertex:
			return true
		case kindAzure:
			return p.azure.foundry && isClaude(model)
		case kindCustom:
			return p.custom.lists(formatAnthropicTokenCount)
		}
		return false
	}
	return false
}

// effectiveModel is the provider's fixed model, or else the request's.
func (p *Provider) effectiveModel(model string) string {
	if p.model != "" {
		return p.model
	}
	return model
}
