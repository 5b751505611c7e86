package config

import (
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/relaygate/gateway/config/decode"
)

// AIPolicy is `policies.ai` of a route or a backend (agentgateway's llm
// Policy): what the gateway does to LLM requests and responses. Request
// body fields are named by their top-level key ("temperature",
// "max_tokens").
type AIPolicy struct {
	PromptGuard *PromptGuard `json:"promptGuard,omitempty"`
	// Defaults are body fields set when the request has none of its own.
	Defaults map[string]any `json:"defaults,omitempty" cfg:"maxItems=64"`
	// Overrides are body fields set whatever the request says.
	Overrides map[string]any `json:"overrides,omitempty" cfg:"maxItems=64"`
	// Transformations are body fields computed by CEL (`llmRequest` is the
	// client's body), before conversion to the provider's format.
	Transformations map[string]CELExpression `json:"transformations,omitempty" cfg:"maxItems=64"`
	// FinalTransformations are the same, after conversion.
	FinalTransformations map[string]CELExpression `json:"finalTransformations,omitempty" cfg:"maxItems=64"`
	Prompts              *PromptEnrichment        `json:"prompts,omitempty"`
	// ModelAliases maps the model a client asks for to the provider's
	// model; a key may hold "*" wildcards.
	ModelAliases  map[string]string `json:"modelAliases,omitempty" cfg:"maxItems=64"`
	PromptCaching *PromptCaching    `json:"promptCaching,omitempty"`
	// Routes maps a request path suffix ("/v1/chat/completions", or "*"
	// for any path) to the kind of request it carries; without it every
	// request is a chat completion.
	Routes map[string]LLMRouteType `json:"routes,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*AIPolicy) FieldRules() {}

// Validate checks body field names, aliases and route suffixes.
func (p *AIPolicy) Validate(v *decode.Validation) {
	checkBodyFields(v, "defaults", slices.Collect(maps.Keys(p.Defaults)))
	checkBodyFields(v, "overrides", slices.Collect(maps.Keys(p.Overrides)))
	checkBodyFields(v, "transformations", slices.Collect(maps.Keys(p.Transformations)))
	checkBodyFields(v, "finalTransformations", slices.Collect(maps.Keys(p.FinalTransformations)))
	for _, k := range slices.Sorted(maps.Keys(p.ModelAliases)) {
		if k == "" {
			v.Errorf(decode.JoinKey("modelAliases", k), "the model name must not be empty")
		} else if p.ModelAliases[k] == "" {
			v.Errorf(decode.JoinKey("modelAliases", k), "must not be empty")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Routes)) {
		if k == "" {
			v.Errorf(decode.JoinKey("routes", k), "the path suffix must not be empty (use \"*\" for any path)")
		}
	}
}

// maxBodyField bounds a body field name (the spec's ShortString).
const maxBodyField = 256

// checkBodyFields checks the names of request body fields (the keys of
// defaults, overrides and transformations).
func checkBodyFields(v *decode.Validation, field string, names []string) {
	slices.Sort(names)
	for _, k := range names {
		if c := utf8.RuneCountInString(k); c == 0 || c > maxBodyField {
			v.Errorf(decode.JoinKey(field, k), "a body field name must be 1 to %d characters", maxBodyField)
		}
	}
}

// PromptEnrichment adds messages before (prepend) or after (append) the
// client's messages of every chat request.
type PromptEnrichment struct {
	Append  []ChatMessage `json:"append,omitempty"`
	Prepend []ChatMessage `json:"prepend,omitempty"`
}

// ChatMessage is a message added to a prompt (agentgateway's
// SimpleChatCompletionMessage).
type ChatMessage struct {
	// Role is "system", "user", "assistant", or another role the
	// provider knows.
	Role    string `json:"role" cfg:"required,minLen=1"`
	Content string `json:"content" cfg:"required"`
}

// PromptCaching places cache points in requests to providers that take them
// (Bedrock, Anthropic).
type PromptCaching struct {
	// CacheSystem marks the end of the system prompt (default true).
	CacheSystem *bool `json:"cacheSystem,omitempty"`
	// CacheMessages marks the conversation's messages (default true).
	CacheMessages *bool `json:"cacheMessages,omitempty"`
	// CacheTools marks the end of the tool definitions (default false).
	CacheTools *bool `json:"cacheTools,omitempty"`
	// MinTokens is the estimated prompt size below which nothing is
	// marked (default 1024).
	MinTokens *int `json:"minTokens,omitempty" cfg:"min=0"`
	// CacheMessageOffset moves the messages' cache point back by this many
	// messages (default 0).
	CacheMessageOffset *int `json:"cacheMessageOffset,omitempty" cfg:"min=0"`
}

// LLMRouteType is the kind of LLM request a path carries (agentgateway's
// RouteType).
type LLMRouteType string

// LLMRouteTypes are the route types of the schema.
var LLMRouteTypes = []string{
	"completions", "messages", "models", "passthrough", "detect", "responses", "embeddings",
	"realtime", "anthropicTokenCount", "generateContent", "geminiCountTokens", "rerank",
}

// DecodeNode checks the value against LLMRouteTypes.
func (r *LLMRouteType) DecodeNode(n *decode.Node) {
	s, ok := n.String()
	if !ok {
		n.Errorf("expected string, got %s", n.Describe())
		return
	}
	if !contains(LLMRouteTypes, s) {
		n.Errorf("must be one of: %s", joinOr(LLMRouteTypes))
		return
	}
	*r = LLMRouteType(s)
}
