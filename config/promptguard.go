package config

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/relaygate/gateway/config/decode"
)

// PromptGuard is `promptGuard` of an ai policy (and `guardrails` of the llm
// section): guards run on the client's prompt (request) and on the model's
// answer (response), in order.
type PromptGuard struct {
	// Streaming is "Enabled" to guard streamed answers and realtime
	// messages too (default "Disabled").
	Streaming string          `json:"streaming,omitempty" cfg:"enum=Disabled|Enabled"`
	Request   []RequestGuard  `json:"request,omitempty" cfg:"minItems=1,maxItems=8"`
	Response  []ResponseGuard `json:"response,omitempty" cfg:"minItems=1,maxItems=8"`
}

// Validate requires a guard (the spec: at least one of request, response).
func (g *PromptGuard) Validate(v *decode.Validation) {
	if len(g.Request) == 0 && len(g.Response) == 0 {
		v.Errorf("", "at least one of request, response is required")
	}
}

// RequestGuard is one guard of the prompt: exactly one kind, and the answer
// a rejected request gets.
type RequestGuard struct {
	Regex              *RegexGuard         `json:"regex,omitempty"`
	Webhook            *WebhookGuard       `json:"webhook,omitempty"`
	OpenAIModeration   *ModerationGuard    `json:"openAIModeration,omitempty"`
	BedrockGuardrails  *BedrockGuardrails  `json:"bedrockGuardrails,omitempty"`
	GoogleModelArmor   *GoogleModelArmor   `json:"googleModelArmor,omitempty"`
	AzureContentSafety *AzureContentSafety `json:"azureContentSafety,omitempty"`
	Rejection          *GuardRejection     `json:"rejection,omitempty"`
	// Scope is what the guard inspects (default: systemPrompt and
	// messages); only regex and bedrockGuardrails guards take another.
	Scope []ContentScope `json:"scope,omitempty" cfg:"minItems=1"`
}

var requestGuardKinds = []string{"regex", "webhook", "openAIModeration", "bedrockGuardrails", "googleModelArmor", "azureContentSafety"}

// DecodeNode decodes the map strictly and requires exactly one kind.
func (g *RequestGuard) DecodeNode(n *decode.Node) {
	type plain RequestGuard
	decodeExactlyOne(n, (*plain)(g), requestGuardKinds...)
}

// FieldRules marks Validate's rules as each about one field
// (decode.FieldRules): they look only at which kind is set.
func (*RequestGuard) FieldRules() {}

// Validate keeps a scope other than the default to the guards that honour
// it, as agentgateway does.
func (g *RequestGuard) Validate(v *decode.Validation) {
	if g.Scope == nil || g.Regex != nil || g.BedrockGuardrails != nil {
		return
	}
	if len(g.Scope) != len(DefaultContentScope) || !slices.Contains(g.Scope, ScopeSystemPrompt) || !slices.Contains(g.Scope, ScopeMessages) {
		v.Errorf("scope", "only regex and bedrockGuardrails guards take a scope other than the default (systemPrompt, messages)")
	}
}

// ResponseGuard is one guard of the answer: exactly one kind, and the
// answer the client gets instead of a rejected one.
type ResponseGuard struct {
	Regex              *RegexGuard         `json:"regex,omitempty"`
	Webhook            *WebhookGuard       `json:"webhook,omitempty"`
	BedrockGuardrails  *BedrockGuardrails  `json:"bedrockGuardrails,omitempty"`
	GoogleModelArmor   *GoogleModelArmor   `json:"googleModelArmor,omitempty"`
	AzureContentSafety *AzureContentSafety `json:"azureContentSafety,omitempty"`
	Rejection          *GuardRejection     `json:"rejection,omitempty"`
}

var responseGuardKinds = []string{"regex", "webhook", "bedrockGuardrails", "googleModelArmor", "azureContentSafety"}

// DecodeNode decodes the map strictly and requires exactly one kind.
func (g *ResponseGuard) DecodeNode(n *decode.Node) {
	if m := n.Get("openAIModeration"); m != nil {
		m.Errorf("only applies to request guards")
		return
	}
	type plain ResponseGuard
	decodeExactlyOne(n, (*plain)(g), responseGuardKinds...)
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*ResponseGuard) FieldRules() {}

// Validate refuses jailbreak detection on answers.
func (g *ResponseGuard) Validate(v *decode.Validation) {
	if g.AzureContentSafety != nil && g.AzureContentSafety.DetectJailbreak != nil {
		v.Errorf("azureContentSafety.detectJailbreak", "only applies to request guards")
	}
}

// ContentScope is a part of the request a guard inspects.
type ContentScope string

// Content scopes.
const (
	ScopeSystemPrompt ContentScope = "systemPrompt"
	ScopeMessages     ContentScope = "messages"
	ScopeToolOutput   ContentScope = "toolOutput"
	ScopeToolInput    ContentScope = "toolInput"
)

// DefaultContentScope is the scope of a guard that names none.
var DefaultContentScope = []ContentScope{ScopeSystemPrompt, ScopeMessages}

var contentScopes = []string{string(ScopeSystemPrompt), string(ScopeMessages), string(ScopeToolOutput), string(ScopeToolInput)}

// DecodeNode checks the value.
func (s *ContentScope) DecodeNode(n *decode.Node) {
	str, ok := n.String()
	if !ok {
		n.Errorf("expected string, got %s", n.Describe())
		return
	}
	if !contains(contentScopes, str) {
		n.Errorf("must be one of: %s", joinOr(contentScopes))
		return
	}
	*s = ContentScope(str)
}

// GuardRejection is the answer to a rejected request or response (default
// 403 with a short text).
type GuardRejection struct {
	Body    *Bytes          `json:"body,omitempty"`
	Status  *int            `json:"status,omitempty" cfg:"min=200,max=599"`
	Headers *HeaderModifier `json:"headers,omitempty"`
}

// Default rejection answers (the spec's messages).
const (
	DefaultRejectionStatus       = 403
	DefaultRequestRejectionBody  = "The request was rejected due to inappropriate content"
	DefaultResponseRejectionBody = "The response was rejected due to inappropriate content"
)

// RegexGuard masks or rejects content matching built-in or custom
// patterns.
type RegexGuard struct {
	// Action is "mask" (the default: matches are replaced) or "reject".
	Action string      `json:"action,omitempty" cfg:"enum=mask|reject"`
	Rules  []RegexRule `json:"rules" cfg:"required"`
}

// RegexRule is a built-in pattern (`builtin: email`) or a regular
// expression (`pattern: ...`, compiled when the file is decoded).
type RegexRule struct {
	Builtin string
	Pattern *regexp.Regexp
}

// RegexBuiltins are the built-in patterns of the schema.
var RegexBuiltins = []string{"ssn", "creditCard", "phoneNumber", "email", "caSin"}

// DecodeNode decodes the builtin-or-pattern union.
func (r *RegexRule) DecodeNode(n *decode.Node) {
	key, v := oneKey(n, "builtin", "pattern")
	switch key {
	case "builtin":
		if v.Decode(&r.Builtin) && !contains(RegexBuiltins, r.Builtin) {
			v.Errorf("must be one of: %s", joinOr(RegexBuiltins))
		}
	case "pattern":
		if str, ok := v.String(); ok && (str == "" || utf8.RuneCountInString(str) > maxGuardPattern) {
			// An empty pattern would match, and mask, everything.
			v.Errorf("must be 1 to %d characters", maxGuardPattern)
			return
		}
		r.Pattern = decodeRegex(v)
	}
}

// maxGuardPattern bounds a guard's pattern (the spec's LongString).
const maxGuardPattern = 1024

// MarshalJSON writes the rule back in file form.
func (r RegexRule) MarshalJSON() ([]byte, error) {
	if r.Pattern != nil {
		return jsonObject("pattern", r.Pattern.String()), nil
	}
	return jsonObject("builtin", r.Builtin), nil
}

// WebhookGuard asks a service whether to pass, mask or reject.
type WebhookGuard struct {
	// Target is the service: {host: "host:port"} or {backend: name}.
	Target MirrorBackend `json:"target" cfg:"required"`
	// Headers are set on the call, computed by CEL from the client's
	// request; ":path", ":method" and ":authority" are allowed.
	Headers HeaderExpressions `json:"headers,omitempty"`
	// ForwardHeaderMatches selects client request headers to forward.
	ForwardHeaderMatches []ValueMatch `json:"forwardHeaderMatches,omitempty"`
	// FailureMode is "failClosed" (the default: an unreachable webhook
	// rejects) or "failOpen".
	FailureMode string `json:"failureMode,omitempty" cfg:"enum=failClosed|failOpen"`
}

// webhookPseudoHeaders are the pseudo-headers a webhook's headers may set.
var webhookPseudoHeaders = map[string]bool{":path": true, ":method": true, ":authority": true}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*WebhookGuard) FieldRules() {}

// Validate checks header names.
func (w *WebhookGuard) Validate(v *decode.Validation) {
	for _, name := range slices.Sorted(maps.Keys(w.Headers)) {
		if !validHeaderName(name) && !webhookPseudoHeaders[strings.ToLower(name)] {
			v.Errorf(decode.JoinKey("headers", name), "invalid header name: must be an HTTP token or one of :path, :method, :authority")
		}
	}
	checkMatchNames(v, "forwardHeaderMatches", w.ForwardHeaderMatches)
}

// checkMatchNames checks the header names of header matches: an HTTP token
// or a request pseudo-header.
func checkMatchNames(v *decode.Validation, field string, matches []ValueMatch) {
	for i, m := range matches {
		if m.Name != "" && !validHeaderName(m.Name) && !requestPseudoHeaders[strings.ToLower(m.Name)] {
			v.Errorf(indexPath(field, i)+".name", "invalid header name %q: must be an HTTP token or a request pseudo-header (:method, :scheme, :authority, :path)", m.Name)
		}
	}
}

// MarshalJSON writes the guard with the values of credential header
// matches (SensitiveHeader) redacted (Headers redacts itself).
func (w WebhookGuard) MarshalJSON() ([]byte, error) {
	type plain WebhookGuard // without this method
	p := plain(w)
	p.ForwardHeaderMatches = redactValueMatches(w.ForwardHeaderMatches)
	return json.Marshal(p)
}

// ModerationGuard is OpenAI's moderation endpoint (`openAIModeration`).
type ModerationGuard struct {
	// Model is the moderation model (default omni-moderation-latest).
	Model    *string                `json:"model,omitempty" cfg:"minLen=1"`
	Policies *SimpleBackendPolicies `json:"policies,omitempty"`
}

// BedrockGuardrails is an AWS Bedrock guardrail; its policies carry the
// AWS credentials (default: the default credential chain).
type BedrockGuardrails struct {
	GuardrailIdentifier string                 `json:"guardrailIdentifier" cfg:"required,minLen=1,maxLen=256"`
	GuardrailVersion    string                 `json:"guardrailVersion" cfg:"required,minLen=1,maxLen=256"`
	Region              string                 `json:"region" cfg:"required,minLen=1,maxLen=63,pattern=^[a-z0-9-]+$"`
	Policies            *SimpleBackendPolicies `json:"policies,omitempty"`
}

// GoogleModelArmor is a Google Cloud Model Armor template; its policies
// carry the GCP credentials (default: the ambient ones).
type GoogleModelArmor struct {
	TemplateID string `json:"templateId" cfg:"required,minLen=1"`
	ProjectID  string `json:"projectId" cfg:"required,minLen=1"`
	// Location is the template's region (default us-central1).
	Location *string                `json:"location,omitempty" cfg:"minLen=1"`
	Policies *SimpleBackendPolicies `json:"policies,omitempty"`
}

// AzureContentSafety is Azure AI Content Safety: harmful content analysis
// and, on requests, jailbreak detection; its policies carry the Azure
// credentials (default: the implicit ones).
type AzureContentSafety struct {
	// Endpoint is the resource's host name
	// ("<resource>.cognitiveservices.azure.com"); a scheme and a trailing
	// "/", if given, are stripped.
	Endpoint        string                 `json:"endpoint" cfg:"required,minLen=1"`
	Policies        *SimpleBackendPolicies `json:"policies,omitempty"`
	AnalyzeText     *AnalyzeText           `json:"analyzeText,omitempty"`
	DetectJailbreak *DetectJailbreak       `json:"detectJailbreak,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*AzureContentSafety) FieldRules() {}

// Validate strips the endpoint's scheme and requires a host name.
func (a *AzureContentSafety) Validate(v *decode.Validation) {
	if v.Node().Get("endpoint") == nil {
		return
	}
	host := stripScheme(a.Endpoint)
	if host == "" || strings.ContainsAny(host, "/?#@ ") {
		v.Errorf("endpoint", "must be a host name such as my-resource.cognitiveservices.azure.com")
		return
	}
	a.Endpoint = host
}

// stripScheme removes an http(s):// scheme and trailing slashes from an
// endpoint written as a URL.
func stripScheme(s string) string {
	if rest, ok := strings.CutPrefix(s, "https://"); ok {
		s = rest
	} else if rest, ok := strings.CutPrefix(s, "http://"); ok {
		s = rest
	}
	return strings.TrimRight(s, "/")
}

// AnalyzeText is Content Safety's harmful content analysis.
type AnalyzeText struct {
	// SeverityThreshold blocks content of this severity or above (default
	// 2; Azure's scale is 0 to 7).
	SeverityThreshold  *int     `json:"severityThreshold,omitempty" cfg:"min=0,max=7"`
	APIVersion         *string  `json:"apiVersion,omitempty" cfg:"minLen=1"`
	BlocklistNames     []string `json:"blocklistNames,omitempty"`
	HaltOnBlocklistHit *bool    `json:"haltOnBlocklistHit,omitempty"`
}

// DetectJailbreak is Content Safety's jailbreak detection.
type DetectJailbreak struct {
	APIVersion *string `json:"apiVersion,omitempty" cfg:"minLen=1"`
}

// SimpleBackendPolicies are the policies of a service a guard calls
// (agentgateway's SimpleLocalBackendPolicies), chiefly its credentials.
type SimpleBackendPolicies struct {
	RequestHeaderModifier *HeaderModifier `json:"requestHeaderModifier,omitempty"`
	Transformations       Unsupported     `json:"transformations,omitzero"`
	BackendTLS            Unsupported     `json:"backendTLS,omitzero"`
	BackendAuth           *BackendAuth    `json:"backendAuth,omitempty"`
	HTTP                  *BackendHTTP    `json:"http,omitempty"`
	TCP                   *BackendTCP     `json:"tcp,omitempty"`
	BackendTunnel         Unsupported     `json:"backendTunnel,omitzero"`
}
