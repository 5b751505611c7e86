package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/relaygate/gateway/config/decode"
)

// LLMConfig is the top-level `llm:` section (agentgateway's LocalLLMConfig):
// an OpenAI-style API (/v1/chat/completions, /v1/models, ...) served on a
// port of its own, whose models are mapped to providers. A request's
// `model` selects the first model whose name matches, the most specific
// name first; a virtual model picks one of the models per request.
type LLMConfig struct {
	// Gateways are the gateways (or gateway listeners) whose listeners
	// serve the section's routes instead of a port of its own; by default
	// the gateway named "default" when there is one with an HTTP listener
	// and no port is set.
	Gateways GatewayRefs `json:"gateways,omitzero"`
	// Port is the port to serve on (default 4000).
	Port          *int              `json:"port,omitempty" cfg:"min=1,max=65535"`
	TLS           Unsupported       `json:"tls,omitzero"`
	Providers     []LLMProvider     `json:"providers,omitempty"`
	Models        []LLMModel        `json:"models" cfg:"required"`
	VirtualModels []LLMVirtualModel `json:"virtualModels,omitempty"`
	Policies      *LLMPolicies      `json:"policies,omitempty"`

	// attached: Parse gave the section's route to gateway listeners
	// (Attached).
	attached bool
}

// Attached reports whether the section is served on gateway listeners
// (llm.gateways, or the gateway named "default") rather than on a port of
// its own: Parse added a route to each, whose backend is BackendLLMModels.
func (l *LLMConfig) Attached() bool { return l.attached }

// LLMRouteName is the name of the route serving the llm section.
const LLMRouteName = "llm"

// RoutePolicies are llm.policies as the policies of the section's route
// (guardrails aside: the models read them); nil for none.
func (p *LLMPolicies) RoutePolicies() *RoutePolicies {
	if p == nil {
		return nil
	}
	rp := &RoutePolicies{
		JWTAuth: p.JWTAuth, Authorization: p.Authorization, CORS: p.CORS,
		BasicAuth: p.BasicAuth, APIKey: p.APIKey, ExtAuthz: p.ExtAuthz, Transformations: p.Transformations,
		RemoteRateLimit: p.RemoteRateLimit, ExtProc: p.ExtProc,
	}
	if len(p.LocalRateLimit) > 0 {
		rp.LocalRateLimit = &LocalRateLimit{Buckets: p.LocalRateLimit}
	}
	return rp
}

// DefaultLLMPort is agentgateway's port for the top-level llm section.
const DefaultLLMPort = 4000

// PortOrDefault returns the port, DefaultLLMPort when unset.
func (l *LLMConfig) PortOrDefault() int {
	if l.Port == nil {
		return DefaultLLMPort
	}
	return *l.Port
}

// LLMModel is one entry of `llm.models`: the model name clients ask for
// (which may start or end with a "*" wildcard), the provider serving it, and
// what to do to its requests.
type LLMModel struct {
	// ID is a stable identity for the entry (the name is a pattern).
	ID   *string `json:"id,omitempty" cfg:"minLen=1"`
	Name string  `json:"name" cfg:"required,minLen=1"`
	// Visibility is "public" (the default: listed, and requested
	// directly) or "internal" (reached only through a virtual model).
	Visibility string           `json:"visibility,omitempty" cfg:"enum=public|internal"`
	Params     *LLMParams       `json:"params,omitempty"`
	Provider   LLMModelProvider `json:"provider" cfg:"required"`
	// Passthrough sends requests unchanged in the provider's own format:
	// "detect" still reads them for rate limits and telemetry, "opaque"
	// does not.
	Passthrough   string      `json:"passthrough,omitempty" cfg:"enum=detect|opaque"`
	Authorization *CELRuleSet `json:"authorization,omitempty"`
	// LLMModelPolicies are the settings a provider of llm.providers may
	// give its models defaults for.
	LLMModelPolicies
	FinalTransformation map[string]CELExpression `json:"finalTransformation,omitempty" cfg:"maxItems=64"`
	Guardrails          *PromptGuard             `json:"guardrails,omitempty"`
	// Matches, when set, also require one of these header matches.
	Matches []LLMRouteMatch `json:"matches,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*LLMModel) FieldRules() {}

// Validate checks the name pattern, body field names, and the params the
// provider needs.
func (m *LLMModel) Validate(v *decode.Validation) {
	if err := checkModelPattern(m.Name); err != nil {
		v.Errorf("name", "%v", err)
	}
	m.LLMModelPolicies.Validate(v)
	checkBodyFields(v, "finalTransformation", slices.Collect(maps.Keys(m.FinalTransformation)))
	if m.Provider.Reference != "" {
		if m.Params != nil {
			for _, f := range m.Params.setFields() {
				if f != "model" {
					v.Errorf("params."+f, "not allowed on a model that references a provider (set it in llm.providers; only params.model may be set here)")
				}
			}
		}
		return
	}
	m.Provider.checkParams(v, m.Params)
}

// LLMRouteMatch is a further condition on requests for a model.
type LLMRouteMatch struct {
	Headers []ValueMatch `json:"headers,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*LLMRouteMatch) FieldRules() {}

// Validate checks header names.
func (m *LLMRouteMatch) Validate(v *decode.Validation) { checkMatchNames(v, "headers", m.Headers) }

// MarshalJSON writes the match with credential header values redacted.
func (m LLMRouteMatch) MarshalJSON() ([]byte, error) {
	type plain LLMRouteMatch // without this method
	return json.Marshal(plain{Headers: redactValueMatches(m.Headers)})
}

// checkModelPattern accepts a model name with at most one "*", at its
// start or end (or "*" alone), as agentgateway does.
func checkModelPattern(p string) error {
	switch n := strings.Count(p, "*"); {
	case n > 1:
		return fmt.Errorf("a model name may hold one \"*\" wildcard, not %d", n)
	case n == 1 && !strings.HasPrefix(p, "*") && !strings.HasSuffix(p, "*"):
		return fmt.Errorf("the \"*\" wildcard must start or end the model name")
	}
	return nil
}

// MatchModelName reports whether a model name a client asked for matches a
// model's name: equal, or the rest of a name starting or ending with "*".
func MatchModelName(pattern, model string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, "*"):
		return strings.HasPrefix(model, strings.TrimSuffix(pattern, "*"))
	case strings.HasPrefix(pattern, "*"):
		return strings.HasSuffix(model, strings.TrimPrefix(pattern, "*"))
	}
	return pattern == model
}

// LLMParams customizes the requests of a model or provider (agentgateway's
// LocalLLMParams): the model sent, credentials, and the settings of the
// provider kinds that need them.
type LLMParams struct {
	// Model is the model sent to the provider (default: the one asked for).
	Model *string `json:"model,omitempty" cfg:"minLen=1,maxLen=256"`
	// APIKey is sent to the provider (default: from the environment).
	APIKey *Secret `json:"apiKey,omitempty"`
	// AWSRegion is a Bedrock model's region (default us-east-1).
	AWSRegion *string `json:"awsRegion,omitempty" cfg:"minLen=1,maxLen=63,pattern=^[a-z0-9-]+$"`
	// VertexRegion and VertexProject are a Vertex model's (both required).
	VertexRegion  *string `json:"vertexRegion,omitempty" cfg:"minLen=1,maxLen=64"`
	VertexProject *string `json:"vertexProject,omitempty" cfg:"minLen=1,maxLen=64"`
	// AzureResourceName and AzureResourceType are an Azure model's
	// (both required); AzureAPIVersion defaults to v1; AzureProjectName is
	// a Foundry project.
	AzureResourceName *string `json:"azureResourceName,omitempty" cfg:"minLen=1,maxLen=256"`
	AzureResourceType string  `json:"azureResourceType,omitempty" cfg:"enum=openAI|foundry|aiServices"`
	AzureAPIVersion   *string `json:"azureApiVersion,omitempty" cfg:"minLen=1,maxLen=64"`
	AzureProjectName  *string `json:"azureProjectName,omitempty" cfg:"minLen=1,maxLen=256"`
	// BaseURL is where the provider is ("https://host[:port][/prefix]"):
	// it sets the host, the path prefix (unless pathOverride is given) and
	// TLS (https).
	BaseURL *string `json:"baseUrl,omitempty"`
	// HostOverride, PathOverride and PathPrefix are the older form of
	// BaseURL ("host:port", a full path, a path prefix); given with it,
	// hostOverride and pathPrefix win over its host and path.
	HostOverride *string `json:"hostOverride,omitempty"`
	PathOverride *string `json:"pathOverride,omitempty" cfg:"maxLen=1024"`
	PathPrefix   *string `json:"pathPrefix,omitempty" cfg:"maxLen=1024"`
	Tokenize     bool    `json:"tokenize,omitempty"`
}

// setFields names the params set, in the file's spelling.
func (p *LLMParams) setFields() []string {
	var out []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"model", p.Model != nil}, {"apiKey", p.APIKey != nil}, {"awsRegion", p.AWSRegion != nil},
		{"vertexRegion", p.VertexRegion != nil}, {"vertexProject", p.VertexProject != nil},
		{"azureResourceName", p.AzureResourceName != nil}, {"azureResourceType", p.AzureResourceType != ""},
		{"azureApiVersion", p.AzureAPIVersion != nil}, {"azureProjectName", p.AzureProjectName != nil},
		{"baseUrl", p.BaseURL != nil}, {"hostOverride", p.HostOverride != nil},
		{"pathOverride", p.PathOverride != nil}, {"pathPrefix", p.PathPrefix != nil}, {"tokenize", p.Tokenize},
	} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*LLMParams) FieldRules() {}

// Validate checks the base URL, the host and the paths. A hostOverride or
// pathPrefix given with baseUrl wins over what baseUrl says, as in
// agentgateway (apply_base_url).
func (p *LLMParams) Validate(v *decode.Validation) {
	if p.BaseURL != nil {
		if err := checkBaseURL(*p.BaseURL); err != nil {
			v.Errorf("baseUrl", "%v", err)
		}
	}
	if p.HostOverride != nil {
		if err := checkHostPort(*p.HostOverride); err != nil {
			v.Errorf("hostOverride", "%v", err)
		}
	}
	checkURLPath(v, "pathOverride", p.PathOverride)
	checkURLPath(v, "pathPrefix", p.PathPrefix)
}

// checkBaseURL accepts an http(s) URL with a host (or another scheme with a
// port), without user info, query or fragment, as agentgateway does.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("must be a URL such as https://api.example.com/v1")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return fmt.Errorf("must not hold user info, a query or a fragment")
	}
	if u.Hostname() == "" {
		return fmt.Errorf("must include a host")
	}
	if u.Scheme != "http" && u.Scheme != "https" && u.Port() == "" {
		return fmt.Errorf("must use http or https, or include a port")
	}
	return nil
}

// LLMModelProvider is a model's `provider` (agentgateway's
// LocalModelAIProvider): a built-in provider kind ("openAI", "anthropic",
// ...), a preset of a provider with an OpenAI-style API ("groq", "ollama",
// ...), `{reference: name}` of an entry of llm.providers, or
// `{custom: {...}}`.
type LLMModelProvider struct {
	Builtin   string
	Preset    string
	Reference string
	Custom    *CustomProvider
}

// LLMBuiltinProviders are the built-in kinds a model names ("openai" is
// read as "openAI").
var LLMBuiltinProviders = []string{"openAI", "gemini", "vertex", "anthropic", "bedrock", "azure", "copilot"}

// LLMProviderPresets are agentgateway's presets: providers with an
// OpenAI-style API at a known address (their settings: PresetProvider).
var LLMProviderPresets = []string{"cohere", "ollama", "baseten", "cerebras", "deepinfra", "deepseek", "groq", "huggingface", "mistral", "openrouter", "togetherai", "xai", "fireworks"}

// DecodeNode decodes the union.
func (p *LLMModelProvider) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		switch {
		case s == "openai":
			p.Builtin = "openAI"
		case contains(LLMBuiltinProviders, s):
			p.Builtin = s
		case contains(LLMProviderPresets, s):
			p.Preset = s
		default:
			n.Errorf("must be one of: %s; a preset: %s; or {reference: name}, {custom: {...}}", joinOr(LLMBuiltinProviders), joinOr(LLMProviderPresets))
		}
		return
	}
	key, v := oneKey(n, "reference", "custom")
	switch key {
	case "reference":
		if v.Decode(&p.Reference) && p.Reference == "" {
			v.Errorf("must not be empty")
		}
	case "custom":
		p.Custom = &CustomProvider{}
		v.Decode(p.Custom)
	}
}

// Kind is the provider kind: a built-in kind, "custom" for a preset or a
// custom provider, "" for a reference.
func (p *LLMModelProvider) Kind() string {
	switch {
	case p.Builtin != "":
		return p.Builtin
	case p.Preset != "", p.Custom != nil:
		return "custom"
	}
	return ""
}

// MarshalJSON writes the union back in file form.
func (p LLMModelProvider) MarshalJSON() ([]byte, error) {
	switch {
	case p.Builtin != "":
		return jsonString(p.Builtin), nil
	case p.Preset != "":
		return jsonString(p.Preset), nil
	case p.Reference != "":
		return jsonObject("reference", p.Reference), nil
	case p.Custom != nil:
		return json.Marshal(map[string]any{"custom": p.Custom})
	}
	return []byte("null"), nil
}

// providerParams lists, by provider kind, the params that only it takes
// and those it requires.
var providerParams = []struct {
	kind     string
	only     []string
	required []string
}{
	{"bedrock", []string{"awsRegion"}, nil},
	// The spec requires the region; agentgateway would use the global
	// endpoint without one (write vertexRegion: global for it).
	{"vertex", []string{"vertexRegion", "vertexProject"}, []string{"vertexRegion", "vertexProject"}},
	{"azure", []string{"azureResourceName", "azureResourceType", "azureApiVersion", "azureProjectName"}, []string{"azureResourceName", "azureResourceType"}},
}

// checkParams reports the params this provider requires and lacks, and
// those it does not take (they would be ignored).
func (p *LLMModelProvider) checkParams(v *decode.Validation, params *LLMParams) {
	kind := p.Kind()
	if kind == "" {
		return
	}
	set := map[string]bool{}
	if params != nil {
		for _, f := range params.setFields() {
			set[f] = true
		}
	}
	for _, pp := range providerParams {
		if pp.kind == kind {
			for _, r := range pp.required {
				if !set[r] {
					v.Errorf("params."+r, "required with provider %s", kind)
				}
			}
			continue
		}
		for _, o := range pp.only {
			if set[o] {
				v.Errorf("params."+o, "only applies to provider %s", pp.kind)
			}
		}
	}
	if p.Custom != nil && !set["baseUrl"] && !set["hostOverride"] {
		v.Errorf("params.baseUrl", "required with a custom provider (where to send its requests)")
	}
}

// LLMProvider is an entry of `llm.providers`: a provider with its params
// and policy defaults, which models use by `provider: {reference: name}`.
type LLMProvider struct {
	Name     string           `json:"name" cfg:"required,minLen=1"`
	Params   *LLMParams       `json:"params,omitempty"`
	Provider LLMModelProvider `json:"provider" cfg:"required"`
	// Defaults are the settings of the models that use the provider
	// (agentgateway's LocalLLMProviderDefaults); a model's own settings
	// win, and body field maps are merged.
	Defaults *LLMModelPolicies `json:"defaults,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*LLMProvider) FieldRules() {}

// Validate refuses a reference to another provider and checks the params.
func (p *LLMProvider) Validate(v *decode.Validation) {
	if p.Provider.Reference != "" {
		v.Errorf("provider.reference", "a provider cannot reference another provider")
		return
	}
	p.Provider.checkParams(v, p.Params)
}

// LLMModelPolicies are the policy settings of a model that a provider of
// llm.providers may give defaults for.
type LLMModelPolicies struct {
	Defaults        map[string]any           `json:"defaults,omitempty" cfg:"maxItems=64"`
	Overrides       map[string]any           `json:"overrides,omitempty" cfg:"maxItems=64"`
	Transformation  map[string]CELExpression `json:"transformation,omitempty" cfg:"maxItems=64"`
	RequestHeaders  *HeaderModifier          `json:"requestHeaders,omitempty"`
	ResponseHeaders *HeaderModifier          `json:"responseHeaders,omitempty"`
	BackendTLS      Unsupported              `json:"backendTLS,omitzero"`
	TLS             Unsupported              `json:"tls,omitzero"`
	Auth            *BackendAuth             `json:"auth,omitempty"`
	Health          Unsupported              `json:"health,omitzero"`
	BackendTunnel   Unsupported              `json:"backendTunnel,omitzero"`
	PromptCaching   *PromptCaching           `json:"promptCaching,omitempty"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*LLMModelPolicies) FieldRules() {}

// Validate checks body field names.
func (d *LLMModelPolicies) Validate(v *decode.Validation) {
	checkBodyFields(v, "defaults", slices.Collect(maps.Keys(d.Defaults)))
	checkBodyFields(v, "overrides", slices.Collect(maps.Keys(d.Overrides)))
	checkBodyFields(v, "transformation", slices.Collect(maps.Keys(d.Transformation)))
}

// LLMPolicies is `llm.policies` (agentgateway's LocalLLMPolicy): policies
// of every request to the llm section, before a model is chosen.
type LLMPolicies struct {
	OIDC            Unsupported      `json:"oidc,omitzero"`
	JWTAuth         *JWTAuth         `json:"jwtAuth,omitempty"`
	Authorization   *CELRuleSet      `json:"authorization,omitempty"`
	ExtAuthz        *ExtAuthz        `json:"extAuthz,omitempty"`
	ExtProc         *ExtProc         `json:"extProc,omitempty"`
	CORS            *CORS            `json:"cors,omitempty"`
	Transformations *Transformations `json:"transformations,omitempty"`
	BasicAuth       *BasicAuth       `json:"basicAuth,omitempty"`
	APIKey          *APIKeyAuth      `json:"apiKey,omitempty"`
	Guardrails      *PromptGuard     `json:"guardrails,omitempty"`
	// LocalRateLimit are buckets every request takes from.
	LocalRateLimit  []RateLimitBucket `json:"localRateLimit,omitempty" cfg:"maxItems=16"`
	RemoteRateLimit *RemoteRateLimit  `json:"remoteRateLimit,omitempty"`
}

// LLMVirtualModel is a model name clients ask for that is served by one of
// the models of llm.models, chosen per request by Routing.
type LLMVirtualModel struct {
	Name    string            `json:"name" cfg:"required,minLen=1"`
	Routing LLMVirtualRouting `json:"routing" cfg:"required"`
}

// LLMVirtualRouting is exactly one way of choosing: by weight, by priority
// (failover to the next priority when a level is unhealthy), or by the
// first condition that holds.
type LLMVirtualRouting struct {
	Weighted    *LLMWeightedRouting    `json:"weighted,omitempty"`
	Failover    *LLMFailoverRouting    `json:"failover,omitempty"`
	Conditional *LLMConditionalRouting `json:"conditional,omitempty"`
}

// DecodeNode decodes the map strictly and requires exactly one way.
func (r *LLMVirtualRouting) DecodeNode(n *decode.Node) {
	type plain LLMVirtualRouting
	decodeExactlyOne(n, (*plain)(r), "weighted", "failover", "conditional")
}

// Targets returns the model names the routing may choose, with their paths
// relative to the routing.
func (r *LLMVirtualRouting) Targets() (models, paths []string) {
	switch {
	case r.Weighted != nil:
		for i, t := range r.Weighted.Targets {
			models, paths = append(models, t.Model), append(paths, indexPath("weighted.targets", i)+".model")
		}
	case r.Failover != nil:
		for i, t := range r.Failover.Targets {
			models, paths = append(models, t.Model), append(paths, indexPath("failover.targets", i)+".model")
		}
	case r.Conditional != nil:
		for i, t := range r.Conditional.Targets {
			models, paths = append(models, t.Model), append(paths, indexPath("conditional.targets", i)+".model")
		}
	}
	return models, paths
}

// LLMWeightedRouting shares requests among its targets by weight.
type LLMWeightedRouting struct {
	Targets []LLMWeightedTarget `json:"targets" cfg:"required,minItems=1"`
}

// LLMWeightedTarget is a model and its weight (default 1).
type LLMWeightedTarget struct {
	Model  string `json:"model" cfg:"required,minLen=1"`
	Weight *int   `json:"weight,omitempty" cfg:"min=0,max=1000000"` // MaxWeight
}

// WeightOrDefault returns the weight, 1 when unset.
func (t *LLMWeightedTarget) WeightOrDefault() int {
	if t.Weight == nil {
		return 1
	}
	return *t.Weight
}

// LLMFailoverRouting prefers the targets of the lowest priority.
type LLMFailoverRouting struct {
	Targets []LLMFailoverTarget `json:"targets" cfg:"required,minItems=1"`
}

// LLMFailoverTarget is a model and its priority (lower first).
type LLMFailoverTarget struct {
	Model    string `json:"model" cfg:"required,minLen=1"`
	Priority *int   `json:"priority" cfg:"required,min=0"`
}

// LLMConditionalRouting takes the first target whose condition holds.
type LLMConditionalRouting struct {
	Targets []LLMConditionalTarget `json:"targets" cfg:"required,minItems=1"`
}

// Validate keeps the target without a condition (the fallback) last.
func (c *LLMConditionalRouting) Validate(v *decode.Validation) {
	for i, t := range c.Targets {
		if t.When == nil && i != len(c.Targets)-1 {
			v.Errorf(indexPath("targets", i), "a target without `when` is the fallback and must be last")
		}
	}
}

// LLMConditionalTarget is a model and the CEL condition (with
// `llmRequest`, the client's request body) that selects it.
type LLMConditionalTarget struct {
	When  *CELCondition `json:"when,omitempty"`
	Model string        `json:"model" cfg:"required,minLen=1"`
}

// checkLLM checks the rules of the llm section that span its entries:
// provider names and model ids are unique, references resolve, virtual
// model names are unique and hide no public model, and each virtual
// model's targets match a model.
func (l *LLMConfig) checkLLM(c checker) {
	providers := map[string]int{}
	for i, p := range l.Providers {
		if p.Name == "" {
			continue
		}
		if prev, dup := providers[p.Name]; dup {
			c.Errorf(indexPath("llm.providers", i)+".name", "provider %q is already defined by llm.providers[%d]", p.Name, prev)
			continue
		}
		providers[p.Name] = i
	}
	ids := map[string]int{}
	for i, m := range l.Models {
		path := indexPath("llm.models", i)
		if ref := m.Provider.Reference; ref != "" {
			if _, ok := providers[ref]; !ok {
				c.Errorf(path+".provider.reference", "no provider named %q in llm.providers", ref)
			}
		}
		if m.ID != nil && *m.ID != "" {
			if prev, dup := ids[*m.ID]; dup {
				c.Errorf(path+".id", "id %q is already used by llm.models[%d]", *m.ID, prev)
				continue
			}
			ids[*m.ID] = i
		}
	}
	// A request names a virtual model before any model (agentgateway's
	// order too): one named like a public model would take its every
	// request, and the model list would show the name twice.
	public := map[string]int{}
	for i, m := range l.Models {
		if _, seen := public[m.Name]; !seen && m.Visibility != "internal" && !strings.Contains(m.Name, "*") {
			public[m.Name] = i
		}
	}
	virtual := map[string]int{}
	for i, vm := range l.VirtualModels {
		path := indexPath("llm.virtualModels", i) + ".name"
		if prev, dup := virtual[vm.Name]; dup {
			c.Errorf(path, "virtual model %q is already defined by llm.virtualModels[%d]", vm.Name, prev)
		} else if vm.Name != "" {
			virtual[vm.Name] = i
		}
		if m, hides := public[vm.Name]; hides {
			c.Errorf(path, "%q is the name of llm.models[%d], a public model it would hide (a request for it would always go to the virtual model): rename one, or make the model internal to reach it through the virtual model", vm.Name, m)
		}
	}
	for i, vm := range l.VirtualModels {
		models, paths := vm.Routing.Targets()
		for j, target := range models {
			if target != "" && !l.matchesModel(target) {
				c.Errorf(indexPath("llm.virtualModels", i)+".routing."+paths[j], "%q matches no model of llm.models", target)
			}
		}
	}
}

// matchesModel reports whether a model name matches an entry of llm.models.
func (l *LLMConfig) matchesModel(name string) bool {
	for _, m := range l.Models {
		if checkModelPattern(m.Name) == nil && MatchModelName(m.Name, name) {
			return true
		}
	}
	return false
}
