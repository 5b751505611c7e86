package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exampleEnv defines the variables the LLM example files expand.
func exampleEnv(k string) (string, bool) {
	switch k {
	case "OPENAI_API_KEY", "ANTHROPIC_API_KEY":
		return "sk-test-" + strings.ToLower(k), true
	}
	return "", false
}

// TestAgentgatewayLLMExamples: files of the same structure as agentgateway's
// examples llm-basic, llm-cost-routing, llm-prompt-enrichment, the four
// llm-prompt-guard files and traffic-http parse and validate unchanged.
func TestAgentgatewayLLMExamples(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "llm", "*.yaml"))
	if err != nil || len(files) != 8 {
		t.Fatalf("want the 8 example files, found %d (%v)", len(files), err)
	}
	parsed := map[string]*File{}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(data, exampleEnv)
			if err != nil {
				t.Fatalf("%v", err)
			}
			parsed[filepath.Base(name)] = f
		})
	}
	if t.Failed() {
		return
	}
	route := func(file string) *Route { return &parsed[file].Binds[0].Listeners[0].Routes[0] }

	basic := parsed["llm-basic.yaml"].LLM
	if basic.PortOrDefault() != 4000 || len(basic.Models) != 2 {
		t.Fatalf("llm-basic: %+v", basic)
	}
	if m := basic.Models[0]; m.Provider.Builtin != "openAI" || *m.Params.Model != "gpt-5.5" || m.Params.APIKey.Inline != "sk-test-openai_api_key" {
		t.Errorf("llm-basic models[0]: %+v %+v", m, m.Params)
	}
	if m := basic.Models[1]; m.Name != "anthropic/*" || m.Transformation["model"] != `llmRequest.model.stripPrefix("anthropic/")` {
		t.Errorf("llm-basic models[1]: %+v", m)
	}

	cost := parsed["llm-cost-routing.yaml"].LLM
	c := cost.VirtualModels[0].Routing.Conditional
	if c == nil || len(c.Targets) != 3 || c.Targets[0].When == nil || c.Targets[2].When != nil || cost.Models[0].Visibility != "internal" {
		t.Errorf("llm-cost-routing: %+v", cost)
	}

	enrich := route("llm-prompt-enrichment.yaml")
	if b := enrich.Backends[0]; b.Kind != BackendAI || b.AI.Provider.Name != "openai" || b.AI.Provider.Provider.OpenAI == nil {
		t.Errorf("llm-prompt-enrichment backend: %+v", b)
	}
	if ai := enrich.Policies.AI; ai.Routes["/v1/responses"] != "responses" || ai.Prompts.Append[0].Content != "Respond with emojis only" {
		t.Errorf("llm-prompt-enrichment ai: %+v", ai)
	}

	guard := route("llm-prompt-guard.yaml").Policies.AI.PromptGuard
	if r := guard.Request[0]; r.Regex.Action != "reject" || r.Regex.Rules[1].Pattern.String() != "Social Security" || *r.Rejection.Status != 400 {
		t.Errorf("llm-prompt-guard request[0]: %+v", r)
	}
	if r := guard.Request[1]; r.Regex.Rules[0].Builtin != "email" || !strings.Contains(string(*r.Rejection.Body), "pii_detected") {
		t.Errorf("llm-prompt-guard request[1]: %+v", r)
	}
	azure := route("llm-prompt-guard-azure-content-safety.yaml").Policies.AI.PromptGuard
	if a := azure.Request[0].AzureContentSafety; a.Endpoint != "your-resource-name.cognitiveservices.azure.com" || *a.AnalyzeText.SeverityThreshold != 2 || a.DetectJailbreak == nil {
		t.Errorf("azure content safety: %+v", a)
	}
	bedrock := route("llm-prompt-guard-bedrock.yaml").Policies.AI.PromptGuard
	if b := bedrock.Response[0].BedrockGuardrails; b.Region != "us-west-2" || b.Policies.BackendAuth.AWS == nil || b.Policies.BackendAuth.AWS.Explicit() {
		t.Errorf("bedrock guardrails: %+v", b)
	}
	armor := route("llm-prompt-guard-model-armor.yaml").Policies.AI.PromptGuard
	if g := armor.Request[0].GoogleModelArmor; g.TemplateID != "model-armor-template-id" || *g.Location != "us-central1" {
		t.Errorf("model armor: %+v", g)
	}
	rl := parsed["traffic-http.yaml"].Binds[0].Listeners[0].Routes[1].Policies.LocalRateLimit
	if len(rl.Buckets) != 1 || rl.Buckets[0].MaxTokens != 10 || rl.Buckets[0].TokensPerFill != 1 || rl.Buckets[0].FillInterval.Seconds() != 1 {
		t.Errorf("traffic-http localRateLimit: %+v", rl)
	}
}

// Flow-style wrappers for the rule cases.
const (
	llmRoute = "binds[0].listeners[0].routes[0]."
	llmAI    = llmRoute + "backends[0].ai."
	llmPol   = llmRoute + "policies."
	llmGuard = llmPol + "ai.promptGuard."
)

func aiBackendYAML(ai string) string {
	return "binds: [{port: 1, listeners: [{routes: [{backends: [{ai: " + ai + "}]}]}]}]\n"
}

func routePolicyYAML(policies string) string {
	return "binds: [{port: 1, listeners: [{routes: [{policies: " + policies + "}]}]}]\n"
}

func openAIWith(fields string) string {
	return "{name: a, provider: {openAI: {}}" + fields + "}"
}

func llmYAML(llm string) string { return "llm: " + llm + "\n" }

// TestLLMRules lists the rules of the LLM gateway's settings, each error
// naming its field path.
func TestLLMRules(t *testing.T) {
	long := strings.Repeat("k", 2049)
	var many strings.Builder
	for i := range 33 {
		if i > 0 {
			many.WriteString(", ")
		}
		many.WriteString("{providers: [{name: p" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ", provider: {openAI: {}}}]}")
	}
	seventeen := strings.TrimSuffix(strings.Repeat("{maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}, ", 17), ", ")
	tests := []struct {
		desc    string
		yaml    string
		wantErr string // substring; empty means valid
	}{
		// ai backends
		{"single provider", aiBackendYAML(openAIWith(", hostOverride: 'api.internal:443', pathPrefix: /v2, tokenize: true")), ""},
		{"named ai backend", "backends: [{name: b, ai: {name: a, provider: {anthropic: {model: claude}}}}]\nbinds: [{port: 1, listeners: [{routes: [{backends: [{backend: b}]}]}]}]\n", ""},
		{"provider kind required", aiBackendYAML("{name: a, provider: {}}"), llmAI + "provider: exactly one of openAI, gemini, vertex, anthropic, bedrock, azure, copilot, custom is required"},
		{"two provider kinds", aiBackendYAML("{name: a, provider: {openAI: {}, gemini: {}}}"), llmAI + "provider: exactly one of openAI, gemini, vertex, anthropic, bedrock, azure, copilot, custom is required, got openAI, gemini"},
		{"provider kind misspelt", aiBackendYAML("{name: a, provider: {openai: {}}}"), llmAI + `provider.openai: unknown field "openai" (did you mean "openAI"?)`},
		{"name required", aiBackendYAML("{provider: {openAI: {}}}"), llmAI + "name: required"},
		{"unknown provider field", aiBackendYAML("{name: a, provider: {openAI: {modle: x}}}"), llmAI + `provider.openAI.modle: unknown field "modle" (did you mean "model"?)`},
		{"empty model", aiBackendYAML("{name: a, provider: {anthropic: {model: ''}}}"), llmAI + "provider.anthropic.model: must be at least 1 character"},
		{"azure", aiBackendYAML("{name: a, provider: {azure: {resourceName: r, resourceType: openAI, apiVersion: 2024-10-21, model: dep}}}"), ""},
		{"azure resourceName required", aiBackendYAML("{name: a, provider: {azure: {resourceType: openAI}}}"), llmAI + "provider.azure.resourceName: required"},
		{"azure resourceType required", aiBackendYAML("{name: a, provider: {azure: {resourceName: r}}}"), llmAI + "provider.azure.resourceType: required"},
		{"azure resourceType", aiBackendYAML("{name: a, provider: {azure: {resourceName: r, resourceType: openai}}}"), llmAI + `provider.azure.resourceType: must be one of: openAI, foundry, aiServices (did you mean "openAI"?)`},
		{"azure apiVersion empty", aiBackendYAML("{name: a, provider: {azure: {resourceName: r, resourceType: openAI, apiVersion: ''}}}"), llmAI + "provider.azure.apiVersion: must be at least 1 character"},
		{"azure projectName is Foundry's", aiBackendYAML("{name: a, provider: {azure: {resourceName: r, resourceType: openAI, projectName: p}}}"), llmAI + "provider.azure.projectName: only allowed with resourceType foundry (or aiServices)"},
		{"vertex projectId required", aiBackendYAML("{name: a, provider: {vertex: {region: us-central1}}}"), llmAI + "provider.vertex.projectId: required"},
		{"vertex region required", aiBackendYAML("{name: a, provider: {vertex: {projectId: p}}}"), llmAI + "provider.vertex.region: required"},
		{"vertex projectId length", aiBackendYAML("{name: a, provider: {vertex: {projectId: " + strings.Repeat("p", 65) + ", region: global}}}"), llmAI + "provider.vertex.projectId: must be at most 64 characters"},
		{"bedrock region defaults", aiBackendYAML("{name: a, provider: {bedrock: {}}}"), ""},
		{"bedrock region pattern", aiBackendYAML("{name: a, provider: {bedrock: {region: US_EAST_1}}}"), llmAI + "provider.bedrock.region: does not match pattern ^[a-z0-9-]+$"},
		{"bedrock region length", aiBackendYAML("{name: a, provider: {bedrock: {region: " + strings.Repeat("a", 64) + "}}}"), llmAI + "provider.bedrock.region: must be at most 63 characters"},
		{"bedrock region empty", aiBackendYAML("{name: a, provider: {bedrock: {region: ''}}}"), llmAI + "provider.bedrock.region: must be at least 1 character"},
		{"bedrock guardrail needs a version", aiBackendYAML("{name: a, provider: {bedrock: {guardrailIdentifier: g}}}"), llmAI + "provider.bedrock.guardrailVersion: required with guardrailIdentifier"},
		{"bedrock guardrail needs an identifier", aiBackendYAML("{name: a, provider: {bedrock: {guardrailVersion: '1'}}}"), llmAI + "provider.bedrock.guardrailIdentifier: required with guardrailVersion"},
		{"custom formats required", aiBackendYAML("{name: a, provider: {custom: {}}, hostOverride: 'h:1'}"), llmAI + "provider.custom.formats: required"},
		{"custom formats not empty", aiBackendYAML("{name: a, provider: {custom: {formats: []}}, hostOverride: 'h:1'}"), llmAI + "provider.custom.formats: must have at least 1 item"},
		{"custom format type", aiBackendYAML("{name: a, provider: {custom: {formats: [{type: chat}]}}}"), llmAI + "provider.custom.formats[0].type: must be one of: completions, messages"},
		{"custom format twice", aiBackendYAML("{name: a, provider: {custom: {formats: [{type: completions}, {type: completions}]}}}"), llmAI + `provider.custom.formats[1].type: format "completions" is already listed by formats[0]`},
		{"openAI moderation mode", aiBackendYAML("{name: a, provider: {openAI: {moderation: {policy: {input: {mode: deny}}}}}}"), llmAI + "provider.openAI.moderation.policy.input.mode: must be one of: score, block"},
		{"hostOverride needs a port", aiBackendYAML(openAIWith(", hostOverride: api.openai.com")), llmAI + "hostOverride: must be host:port"},
		{"pathPrefix absolute", aiBackendYAML(openAIWith(", pathPrefix: v1")), llmAI + `pathPrefix: must start with "/"`},
		{"pathOverride absolute", aiBackendYAML(openAIWith(", pathOverride: ''")), llmAI + `pathOverride: must start with "/"`},
		{"provider policies", aiBackendYAML(openAIWith(", policies: {backendAuth: {key: k}, ai: {modelAliases: {a: b}}}")), ""},
		{"provider policies checked", aiBackendYAML(openAIWith(", policies: {http: {version: HTTP/9}}")), llmAI + "policies.http.version: must be one of"},
		{"groups", aiBackendYAML("{groups: [{providers: [{name: a, provider: {openAI: {}}}, {name: b, provider: {gemini: {}}}]}, {providers: [{name: c, provider: {anthropic: {}}}]}]}"), ""},
		{"groups not empty", aiBackendYAML("{groups: []}"), llmAI + "groups: must have at least 1 item"},
		{"group providers not empty", aiBackendYAML("{groups: [{providers: []}]}"), llmAI + "groups[0].providers: must have at least 1 item"},
		{"at most 32 groups", aiBackendYAML("{groups: [" + many.String() + "]}"), llmAI + "groups: must have at most 32 items"},
		{"provider names unique across groups", aiBackendYAML("{groups: [{providers: [{name: a, provider: {openAI: {}}}]}, {providers: [{name: b, provider: {openAI: {}}}, {name: a, provider: {gemini: {}}}]}]}"), llmAI + `groups[1].providers[1].name: provider "a" is already defined by groups[0].providers[0]`},
		{"groups alone", aiBackendYAML("{groups: [{providers: [{name: a, provider: {openAI: {}}}]}], name: x}"), llmAI + "name: not allowed together with groups (set it on each provider)"},
		{"group provider needs a name", aiBackendYAML("{groups: [{providers: [{provider: {openAI: {}}}]}]}"), llmAI + "groups[0].providers[0].name: required"},

		// ai policies
		{"transformations compile", routePolicyYAML(`{ai: {transformations: {model: 'llmRequest.model.stripPrefix("x/")', n: '1 + 1', user: 'jwt.sub'}}}`), ""},
		{"transformation syntax", routePolicyYAML(`{ai: {transformations: {model: 'llmRequest.model.'}}}`), llmPol + "ai.transformations.model: invalid CEL expression: ERROR: <input>:1:18: Syntax error"},
		{"final transformation undeclared", routePolicyYAML(`{ai: {finalTransformations: {x: 'foo.bar'}}}`), llmPol + "ai.finalTransformations.x: invalid CEL expression: ERROR: <input>:1:1: undeclared reference to 'foo'"},
		{"transformation left-out function", routePolicyYAML(`{ai: {transformations: {id: 'uuid()'}}}`), "uuid() is agentgateway's, and not available in this gateway's CEL yet"},
		{"rules cannot name llmRequest", routePolicyYAML(`{authorization: {rules: ['llmRequest.model == "x"']}}`), llmPol + "authorization.rules[0]: invalid CEL expression: ERROR: <input>:1:1: undeclared reference to 'llmRequest'"},
		{"transformation not a string", routePolicyYAML(`{ai: {transformations: {n: 5}}}`), llmPol + "ai.transformations.n: expected a CEL expression (a string), got integer 5"},
		{"transformation empty", routePolicyYAML(`{ai: {transformations: {n: ''}}}`), llmPol + "ai.transformations.n: must be 1 to 16384 characters"},
		{"routes", routePolicyYAML(`{ai: {routes: {'/v1/chat/completions': completions, '*': passthrough, '/v1/x': rerank}}}`), ""},
		{"route type", routePolicyYAML(`{ai: {routes: {'/v1/chat': chat}}}`), llmPol + `ai.routes["/v1/chat"]: must be one of: completions, messages, models, passthrough, detect, responses, embeddings, realtime, anthropicTokenCount, generateContent, geminiCountTokens, rerank`},
		{"route suffix empty", routePolicyYAML(`{ai: {routes: {'': completions}}}`), llmPol + `ai.routes[""]: the path suffix must not be empty`},
		{"defaults", routePolicyYAML(`{ai: {defaults: {temperature: 0.5, stop: [x], meta: {a: 1}}, overrides: {stream: false}}}`), ""},
		{"body field name", routePolicyYAML(`{ai: {overrides: {'': 1}}}`), llmPol + `ai.overrides[""]: a body field name must be 1 to 256 characters`},
		{"model alias target", routePolicyYAML(`{ai: {modelAliases: {fast: ''}}}`), llmPol + "ai.modelAliases.fast: must not be empty"},
		{"prompt message content", routePolicyYAML(`{ai: {prompts: {append: [{role: system}]}}}`), llmPol + "ai.prompts.append[0].content: required"},
		{"prompt message role", routePolicyYAML(`{ai: {prompts: {prepend: [{role: '', content: x}]}}}`), llmPol + "ai.prompts.prepend[0].role: must be at least 1 character"},
		{"prompt caching", routePolicyYAML(`{ai: {promptCaching: {minTokens: -1}}}`), llmPol + "ai.promptCaching.minTokens: must be >= 0"},
		{"unknown ai field", routePolicyYAML(`{ai: {prompt: {}}}`), llmPol + `ai.prompt: unknown field "prompt" (did you mean "prompts"?)`},
		{"backend ai policy", "binds: [{port: 1, listeners: [{routes: [{backends: [{host: 'a:1', policies: {ai: {overrides: {'': 1}}}}]}]}]}]\n", llmRoute + `backends[0].policies.ai.overrides[""]: a body field name`},

		// prompt guards
		{"guard needs a side", routePolicyYAML(`{ai: {promptGuard: {}}}`), llmPol + "ai.promptGuard: at least one of request, response is required"},
		{"guard list not empty", routePolicyYAML(`{ai: {promptGuard: {request: []}}}`), llmGuard + "request: must have at least 1 item"},
		{"at most 8 guards", routePolicyYAML(`{ai: {promptGuard: {response: [` + strings.TrimSuffix(strings.Repeat("{regex: {rules: [{builtin: ssn}]}}, ", 9), ", ") + `]}}}`), llmGuard + "response: must have at most 8 items"},
		{"guard kind required", routePolicyYAML(`{ai: {promptGuard: {request: [{rejection: {status: 400}}]}}}`), llmGuard + "request[0]: exactly one of regex, webhook, openAIModeration, bedrockGuardrails, googleModelArmor, azureContentSafety is required"},
		{"one guard kind", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: []}, googleModelArmor: {templateId: t, projectId: p}}]}}}`), llmGuard + "request[0]: exactly one of regex, webhook, openAIModeration, bedrockGuardrails, googleModelArmor, azureContentSafety is required, got regex, googleModelArmor"},
		{"regex pattern compiles", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: [{builtin: ssn}, {pattern: '[a-'}]}}]}}}`), llmGuard + "request[0].regex.rules[1].pattern: invalid regular expression: error parsing regexp: missing closing ]"},
		{"regex pattern not empty", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: [{pattern: ''}]}}]}}}`), llmGuard + "request[0].regex.rules[0].pattern: must be 1 to 1024 characters"},
		{"regex builtin", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: [{builtin: passport}]}}]}}}`), llmGuard + "request[0].regex.rules[0].builtin: must be one of: ssn, creditCard, phoneNumber, email, caSin"},
		{"regex rule kind", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: [{builtin: ssn, pattern: x}]}}]}}}`), llmGuard + "request[0].regex.rules[0].pattern: only one of builtin, pattern may be set"},
		{"regex action", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {action: block, rules: []}}]}}}`), llmGuard + "request[0].regex.action: must be one of: mask, reject"},
		{"regex rules required", routePolicyYAML(`{ai: {promptGuard: {response: [{regex: {action: mask}}]}}}`), llmGuard + "response[0].regex.rules: required"},
		{"rejection status", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: []}, rejection: {status: 99}}]}}}`), llmGuard + "request[0].rejection.status: must be >= 200"},
		{"rejection headers", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: []}, rejection: {headers: {set: {'bad name': x}}}}]}}}`), llmGuard + `request[0].rejection.headers.set["bad name"]: invalid header name`},
		{"scope of a regex guard", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: []}, scope: [toolInput]}]}}}`), ""},
		{"scope of a webhook guard", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}}, scope: [messages]}]}}}`), llmGuard + "request[0].scope: only regex and bedrockGuardrails guards take a scope other than the default (systemPrompt, messages)"},
		{"default scope of a webhook guard", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}}, scope: [messages, systemPrompt]}]}}}`), ""},
		{"scope value", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: []}, scope: [tools]}]}}}`), llmGuard + "request[0].scope[0]: must be one of: systemPrompt, messages, toolOutput, toolInput"},
		{"scope not empty", routePolicyYAML(`{ai: {promptGuard: {request: [{regex: {rules: []}, scope: []}]}}}`), llmGuard + "request[0].scope: must have at least 1 item"},
		{"moderation on answers", routePolicyYAML(`{ai: {promptGuard: {response: [{openAIModeration: {}}]}}}`), llmGuard + "response[0].openAIModeration: only applies to request guards"},
		{"jailbreak on answers", routePolicyYAML(`{ai: {promptGuard: {response: [{azureContentSafety: {endpoint: e.example.com, detectJailbreak: {}}}]}}}`), llmGuard + "response[0].azureContentSafety.detectJailbreak: only applies to request guards"},
		{"azure endpoint", routePolicyYAML(`{ai: {promptGuard: {request: [{azureContentSafety: {endpoint: 'https://cs.example.com/path'}}]}}}`), llmGuard + "request[0].azureContentSafety.endpoint: must be a host name such as my-resource.cognitiveservices.azure.com"},
		{"azure severity", routePolicyYAML(`{ai: {promptGuard: {request: [{azureContentSafety: {endpoint: e, analyzeText: {severityThreshold: 8}}}]}}}`), llmGuard + "request[0].azureContentSafety.analyzeText.severityThreshold: must be <= 7"},
		{"bedrock guardrail region", routePolicyYAML(`{ai: {promptGuard: {request: [{bedrockGuardrails: {guardrailIdentifier: g, guardrailVersion: '1'}}]}}}`), llmGuard + "request[0].bedrockGuardrails.region: required"},
		{"model armor template", routePolicyYAML(`{ai: {promptGuard: {request: [{googleModelArmor: {projectId: p}}]}}}`), llmGuard + "request[0].googleModelArmor.templateId: required"},
		{"guard service policies", routePolicyYAML(`{ai: {promptGuard: {request: [{googleModelArmor: {templateId: t, projectId: p, policies: {backendTLS: {}}}}]}}}`), llmGuard + "request[0].googleModelArmor.policies.backendTLS: not supported yet"},
		{"webhook target required", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {}}]}}}`), llmGuard + "request[0].webhook.target: required"},
		{"webhook target backend", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {target: {backend: nope}}}]}}}`), llmGuard + `request[0].webhook.target.backend: no backend named "nope" in the top-level backends`},
		{"webhook target host", routePolicyYAML(`{ai: {promptGuard: {response: [{webhook: {target: {host: nohost}}}]}}}`), llmGuard + "response[0].webhook.target.host: must be host:port"},
		{"webhook header name", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}, headers: {'bad name': '"x"', ':path': '"/x"'}}}]}}}`), llmGuard + `request[0].webhook.headers["bad name"]: invalid header name: must be an HTTP token or one of :path, :method, :authority`},
		{"webhook header expression", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}, headers: {x-a: 'request.'}}}]}}}`), llmGuard + "request[0].webhook.headers.x-a: invalid CEL expression"},
		{"webhook forwarded header", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}, forwardHeaderMatches: [{name: ':status', value: {exact: x}}]}}]}}}`), llmGuard + `request[0].webhook.forwardHeaderMatches[0].name: invalid header name ":status"`},
		{"webhook failure mode", routePolicyYAML(`{ai: {promptGuard: {request: [{webhook: {target: {host: 'h:1'}, failureMode: ignore}}]}}}`), llmGuard + "request[0].webhook.failureMode: must be one of: failClosed, failOpen"},
		{"streaming", routePolicyYAML(`{ai: {promptGuard: {streaming: enabled, request: [{regex: {rules: []}}]}}}`), llmGuard + `streaming: must be one of: Disabled, Enabled (did you mean "Enabled"?)`},

		// backendAuth
		{"key forms", routePolicyYAML(`{backendAuth: {key: k}}`), ""},
		{"inline key length", routePolicyYAML(`{backendAuth: {key: ` + long + `}}`), llmPol + "backendAuth.key: an inline key must be at most 2048 characters, got 2049"},
		{"key shape", routePolicyYAML(`{backendAuth: {key: {}}}`), llmPol + "backendAuth.key: expected a secret as a string, {file: path} or {value, location}"},
		{"key file", routePolicyYAML(`{backendAuth: {key: {file: ''}}}`), llmPol + "backendAuth.key.file: must be at least 1 character"},
		{"key empty", routePolicyYAML(`{backendAuth: {key: ''}}`), llmPol + "backendAuth.key: must not be empty (an environment variable that expanded to nothing?)"},
		{"key value and location", routePolicyYAML(`{backendAuth: {key: {value: {file: /k}, location: {queryParameter: {name: key}}}}}`), ""},
		{"key location expression", routePolicyYAML(`{backendAuth: {key: {value: k, location: {expression: 'x'}}}}`), llmPol + "backendAuth.key.location.expression: not supported yet"},
		{"key value required", routePolicyYAML(`{backendAuth: {key: {value: null, location: {header: {name: x}}}}}`), llmPol + "backendAuth.key.value: required"},
		{"two kinds", routePolicyYAML(`{backendAuth: {key: k, aws: {}}}`), llmPol + `backendAuth.aws: only one of passthrough, key, gcp, aws, azure, jwtSign, oauthTokenExchange, crossAppAccess may be set (already have "key")`},
		{"no kind", routePolicyYAML(`{backendAuth: {}}`), llmPol + "backendAuth: exactly one of passthrough, key, gcp, aws, azure, jwtSign, oauthTokenExchange, crossAppAccess is required (or credentials)"},
		{"copilot", routePolicyYAML(`{backendAuth: copilot}`), ""},
		{"bad string", routePolicyYAML(`{backendAuth: github}`), llmPol + `backendAuth: expected "copilot" or a map with one of`},
		{"credentials alone", routePolicyYAML(`{backendAuth: {credentials: [{location: {header: {name: x-key}}, key: {file: /k}}]}}`), ""},
		{"credentials not empty", routePolicyYAML(`{backendAuth: {credentials: []}}`), llmPol + "backendAuth.credentials: must have at least 1 item"},
		{"aws default chain", routePolicyYAML(`{backendAuth: {aws: {}}}`), ""},
		{"aws explicit", routePolicyYAML(`{backendAuth: {aws: {accessKeyId: AKIA, secretAccessKey: s, sessionToken: t, region: us-east-1}}}`), ""},
		{"aws explicit needs the secret", routePolicyYAML(`{backendAuth: {aws: {accessKeyId: AKIA}}}`), llmPol + "backendAuth.aws.secretAccessKey: required with explicit credentials"},
		{"aws explicit needs the key id", routePolicyYAML(`{backendAuth: {aws: {secretAccessKey: s}}}`), llmPol + "backendAuth.aws.accessKeyId: required with explicit credentials"},
		{"aws assumeRole with keys", routePolicyYAML(`{backendAuth: {aws: {accessKeyId: a, secretAccessKey: s, assumeRole: {roleArn: r}}}}`), llmPol + "backendAuth.aws.assumeRole: only allowed with the default credential chain"},
		{"aws roleArn", routePolicyYAML(`{backendAuth: {aws: {assumeRole: {}}}}`), llmPol + "backendAuth.aws.assumeRole.roleArn: required"},
		{"aws session name", routePolicyYAML(`{backendAuth: {aws: {assumeRole: {roleArn: r, sessionName: 'a b'}}}}`), llmPol + "backendAuth.aws.assumeRole.sessionName: must be 2 to 64 letters, digits or any of +=,.@_-"},
		{"aws session name expression", routePolicyYAML(`{backendAuth: {aws: {assumeRole: {roleArn: r, sessionName: {expression: 'jwt.'}}}}}`), llmPol + "backendAuth.aws.assumeRole.sessionName.expression: invalid CEL expression"},
		{"aws tag value or expression", routePolicyYAML(`{backendAuth: {aws: {assumeRole: {roleArn: r, tags: [{key: k, value: v, expression: 'jwt.sub'}]}}}}`), llmPol + "backendAuth.aws.assumeRole.tags[0].expression: only one of value, expression may be set"},
		{"aws tag needs one", routePolicyYAML(`{backendAuth: {aws: {assumeRole: {roleArn: r, tags: [{key: k}]}}}}`), llmPol + "backendAuth.aws.assumeRole.tags[0]: exactly one of value, expression is required"},
		{"gcp", routePolicyYAML(`{backendAuth: {gcp: {type: idToken, audience: a, credential: {file: /c.json}}}}`), ""},
		{"gcp audience", routePolicyYAML(`{backendAuth: {gcp: {audience: a}}}`), llmPol + "backendAuth.gcp.audience: only allowed with type: idToken"},
		{"gcp type", routePolicyYAML(`{backendAuth: {gcp: {type: jwt}}}`), llmPol + "backendAuth.gcp.type: must be one of: idToken, accessToken"},
		{"azure kind", routePolicyYAML(`{backendAuth: {azure: {}}}`), llmPol + "backendAuth.azure: exactly one of explicitConfig, developerImplicit, implicit is required"},
		{"azure client secret", routePolicyYAML(`{backendAuth: {azure: {explicitConfig: {clientSecret: {tenant_id: t, client_id: c}}}}}`), llmPol + "backendAuth.azure.explicitConfig.clientSecret.client_secret: required"},
		{"azure identity", routePolicyYAML(`{backendAuth: {azure: {explicitConfig: {managedIdentity: {userAssignedIdentity: {clientId: c, objectId: o}}}}}}`), llmPol + "backendAuth.azure.explicitConfig.managedIdentity.userAssignedIdentity: exactly one of clientId, objectId, resourceId is required, got clientId, objectId"},
		{"azure workload identity", routePolicyYAML(`{backendAuth: {azure: {explicitConfig: {workloadIdentity: {}}}}}`), ""},
		{"azure implicit takes nothing", routePolicyYAML(`{backendAuth: {azure: {implicit: {x: 1}}}}`), llmPol + `backendAuth.azure.implicit.x: unknown field "x"`},

		// localRateLimit
		{"rate limits not empty", routePolicyYAML(`{localRateLimit: []}`), llmPol + "localRateLimit: must have at least 1 item"},
		{"at most 16 rate limits", routePolicyYAML(`{localRateLimit: [` + seventeen + `]}`), llmPol + "localRateLimit: must have at most 16 items"},
		{"fill interval required", routePolicyYAML(`{localRateLimit: [{maxTokens: 1, tokensPerFill: 1}]}`), llmPol + "localRateLimit[0].fillInterval: required"},
		{"fill interval positive", routePolicyYAML(`{localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 0s}]}`), llmPol + "localRateLimit[0].fillInterval: must be > 0"},
		{"tokens per fill", routePolicyYAML(`{localRateLimit: [{maxTokens: 1, fillInterval: 1s}]}`), llmPol + "localRateLimit[0].tokensPerFill: must be >= 1"},
		{"max tokens hold a fill", routePolicyYAML(`{localRateLimit: [{maxTokens: 4, tokensPerFill: 5, fillInterval: 1s}]}`), llmPol + "localRateLimit[0].maxTokens: must be >= tokensPerFill (5): the bucket must hold a whole fill"},
		{"max tokens not negative", routePolicyYAML(`{localRateLimit: [{maxTokens: -1, tokensPerFill: 1, fillInterval: 1s}]}`), llmPol + "localRateLimit[0].maxTokens: integer -1 is out of range"},
		{"rate limit type", routePolicyYAML(`{localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1s, type: request}]}`), llmPol + `localRateLimit[0].type: must be one of: requests, tokens (did you mean "requests"?)`},
		{"conditional fallback last", routePolicyYAML(`{localRateLimit: {conditional: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}, {condition: 'true', maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}]}}`), llmPol + "localRateLimit.conditional[0]: an entry without a condition is the fallback and must be last"},
		{"conditional condition bool", routePolicyYAML(`{localRateLimit: {conditional: [{condition: '1', maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}]}}`), llmPol + "localRateLimit.conditional[0].condition: invalid CEL expression: the result is int, not bool"},
		{"conditional entries checked", routePolicyYAML(`{localRateLimit: {conditional: [{condition: 'true', maxTokens: 1, fillInterval: 1s}]}}`), llmPol + "localRateLimit.conditional[0].tokensPerFill: must be >= 1"},
		{"rate limit shape", routePolicyYAML(`{localRateLimit: 10}`), llmPol + "localRateLimit: expected a list of rate limits or {conditional: [...]}, got integer 10"},

		// the llm section
		{"models required", llmYAML("{}"), "llm.models: required"},
		{"model name wildcards", llmYAML("{models: [{name: 'a*b*', provider: openai}]}"), `llm.models[0].name: a model name may hold one "*" wildcard, not 2`},
		{"model name wildcard placement", llmYAML("{models: [{name: 'a*b', provider: openai}]}"), `llm.models[0].name: the "*" wildcard must start or end the model name`},
		{"model provider", llmYAML("{models: [{name: m, provider: llama}]}"), "llm.models[0].provider: must be one of: openAI, gemini, vertex, anthropic, bedrock, azure, copilot; a preset: cohere, ollama"},
		{"model provider forms", llmYAML("{models: [{name: a, provider: groq}, {name: b, provider: {custom: {formats: [{type: messages}]}}, params: {baseUrl: 'http://127.0.0.1:8000/v1'}}]}"), ""},
		{"vertex params", llmYAML("{models: [{name: m, provider: vertex}]}"), "llm.models[0].params.vertexProject: required with provider vertex"},
		{"vertex region param", llmYAML("{models: [{name: m, provider: vertex, params: {vertexProject: p}}]}"), "llm.models[0].params.vertexRegion: required with provider vertex"},
		{"azure params", llmYAML("{models: [{name: m, provider: azure, params: {azureResourceName: r}}]}"), "llm.models[0].params.azureResourceType: required with provider azure"},
		{"param of another provider", llmYAML("{models: [{name: m, provider: openAI, params: {awsRegion: us-east-1}}]}"), "llm.models[0].params.awsRegion: only applies to provider bedrock"},
		{"aws region param", llmYAML("{models: [{name: m, provider: bedrock, params: {awsRegion: 'US'}}]}"), "llm.models[0].params.awsRegion: does not match pattern ^[a-z0-9-]+$"},
		{"custom needs an address", llmYAML("{models: [{name: m, provider: {custom: {formats: [{type: completions}]}}}]}"), "llm.models[0].params.baseUrl: required with a custom provider"},
		{"base URL scheme", llmYAML("{models: [{name: m, provider: openAI, params: {baseUrl: 'ftp://h/v1'}}]}"), "llm.models[0].params.baseUrl: must use http or https, or include a port"},
		{"base URL query", llmYAML("{models: [{name: m, provider: openAI, params: {baseUrl: 'https://h/v1?x=1'}}]}"), "llm.models[0].params.baseUrl: must not hold user info, a query or a fragment"},
		{"base URL form", llmYAML("{models: [{name: m, provider: openAI, params: {baseUrl: 'api.openai.com'}}]}"), "llm.models[0].params.baseUrl: must be a URL such as https://api.example.com/v1"},
		{"base URL and host", llmYAML("{models: [{name: m, provider: openAI, params: {baseUrl: 'https://h', hostOverride: 'h:443'}}]}"), ""}, // hostOverride wins (as in agentgateway)
		{"unknown provider reference", llmYAML("{models: [{name: m, provider: {reference: nope}}]}"), `llm.models[0].provider.reference: no provider named "nope" in llm.providers`},
		{"reference takes only the model", llmYAML("{providers: [{name: p, provider: openAI}], models: [{name: m, provider: {reference: p}, params: {model: x, apiKey: k}}]}"), "llm.models[0].params.apiKey: not allowed on a model that references a provider (set it in llm.providers; only params.model may be set here)"},
		{"provider reference chain", llmYAML("{providers: [{name: p, provider: {reference: q}}], models: []}"), "llm.providers[0].provider.reference: a provider cannot reference another provider"},
		{"provider names", llmYAML("{providers: [{name: p, provider: openAI}, {name: p, provider: anthropic}], models: []}"), `llm.providers[1].name: provider "p" is already defined by llm.providers[0]`},
		{"provider params", llmYAML("{providers: [{name: p, provider: azure}], models: []}"), "llm.providers[0].params.azureResourceName: required with provider azure"},
		{"model ids", llmYAML("{models: [{id: x, name: a, provider: openAI}, {id: x, name: b, provider: openAI}]}"), `llm.models[1].id: id "x" is already used by llm.models[0]`},
		{"model visibility", llmYAML("{models: [{name: a, provider: openAI, visibility: private}]}"), "llm.models[0].visibility: must be one of: public, internal"},
		{"model passthrough", llmYAML("{models: [{name: a, provider: openAI, passthrough: raw}]}"), "llm.models[0].passthrough: must be one of: detect, opaque"},
		{"model tls later", llmYAML("{models: [{name: a, provider: openAI, tls: {}}]}"), "llm.models[0].tls: not supported yet"},
		{"model matches", llmYAML("{models: [{name: a, provider: openAI, matches: [{headers: [{name: 'a b', value: {exact: x}}]}]}]}"), `llm.models[0].matches[0].headers[0].name: invalid header name "a b"`},
		{"model transformation", llmYAML("{models: [{name: a, provider: openAI, transformation: {model: 'llmRequest.model +'}}]}"), "llm.models[0].transformation.model: invalid CEL expression"},
		{"routing required", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v}]}"), "llm.virtualModels[0].routing: required"},
		{"one routing", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {}}]}"), "llm.virtualModels[0].routing: exactly one of weighted, failover, conditional is required"},
		{"routing targets", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {weighted: {targets: []}}}]}"), "llm.virtualModels[0].routing.weighted.targets: must have at least 1 item"},
		{"routing targets match a model", llmYAML("{models: [{name: 'gpt-*', provider: openAI}], virtualModels: [{name: v, routing: {weighted: {targets: [{model: gpt-4o}, {model: claude}]}}}]}"), `llm.virtualModels[0].routing.weighted.targets[1].model: "claude" matches no model of llm.models`},
		{"virtual model hides a public one", llmYAML("{models: [{name: a, provider: openAI}, {name: b, provider: openAI}], virtualModels: [{name: a, routing: {weighted: {targets: [{model: b}]}}}]}"), `llm.virtualModels[0].name: "a" is the name of llm.models[0], a public model it would hide`},
		{"virtual model named like an internal one", llmYAML("{models: [{name: a, provider: openAI, visibility: internal}], virtualModels: [{name: a, routing: {weighted: {targets: [{model: a}]}}}]}"), ""},
		{"virtual model within a wildcard", llmYAML("{models: [{name: 'gpt-*', provider: openAI}], virtualModels: [{name: gpt-smart, routing: {weighted: {targets: [{model: gpt-4o}]}}}]}"), ""},
		{"virtual model names", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {weighted: {targets: [{model: a}]}}}, {name: v, routing: {weighted: {targets: [{model: a}]}}}]}"), `llm.virtualModels[1].name: virtual model "v" is already defined by llm.virtualModels[0]`},
		{"failover priority", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {failover: {targets: [{model: a}]}}}]}"), "llm.virtualModels[0].routing.failover.targets[0].priority: required"},
		{"weight", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {weighted: {targets: [{model: a, weight: -1}]}}}]}"), "llm.virtualModels[0].routing.weighted.targets[0].weight: must be >= 0"},
		{"weight bound", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {weighted: {targets: [{model: a, weight: 4611686018427387904}, {model: a, weight: 4611686018427387904}]}}}]}"), "llm.virtualModels[0].routing.weighted.targets[0].weight: must be <= 1000000"},
		{"conditional fallback last", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {conditional: {targets: [{model: a}, {when: 'true', model: a}]}}}]}"), "llm.virtualModels[0].routing.conditional.targets[0]: a target without `when` is the fallback and must be last"},
		{"when is a condition", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {conditional: {targets: [{when: 'llmRequest.model', model: a}]}}}]}"), ""},
		{"when is boolean", llmYAML("{models: [{name: a, provider: openAI}], virtualModels: [{name: v, routing: {conditional: {targets: [{when: '\"x\"', model: a}]}}}]}"), "llm.virtualModels[0].routing.conditional.targets[0].when: invalid CEL expression: the result is string, not bool"},
		{"llm gateways need a gateway", llmYAML("{gateways: [default], models: []}"), `llm.gateways[0]: no gateway named "default" (there are no gateways)`},
		{"llm gateways or port", "gateways: {web: {port: 80}}\n" + llmYAML("{gateways: web, port: 4000, models: []}"), "llm.gateways: not allowed together with llm.port"},
		{"llm port beside a gateway", "gateways: {web: {port: 4000}}\n" + llmYAML("{models: []}"), "llm.port: port 4000 (the default) is already used by gateways.web"},
		{"llm on the default gateway", "gateways: {default: {port: 4000}}\n" + llmYAML("{models: []}"), ""},
		{"llm port", "binds: [{port: 4000, listeners: []}]\n" + llmYAML("{models: []}"), "llm.port: port 4000 (the default) is already used by binds[0]"},
		{"llm and mcp port", "mcp: {port: 4100, targets: [{name: a, stdio: {cmd: x}}]}\n" + llmYAML("{port: 4100, models: []}"), "llm.port: port 4100 is already used by the top-level mcp section"},
		{"llm and mcp on their ports", "mcp: {targets: [{name: a, stdio: {cmd: x}}]}\n" + llmYAML("{models: []}"), ""},
		{"llm policies", llmYAML("{models: [], policies: {jwtAuth: {issuer: i, jwks: {file: f}}, authorization: {rules: ['true']}, cors: {allowOrigins: ['*']}, guardrails: {request: [{regex: {rules: [{builtin: ssn}]}}]}, localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}]}}"), ""},
		{"llm policies later", llmYAML("{models: [], policies: {oidc: {}}}"), "llm.policies.oidc: not supported yet"},
		{"llm rate limits", llmYAML("{models: [], policies: {localRateLimit: [" + seventeen + "]}}"), "llm.policies.localRateLimit: must have at most 16 items"},
		{"llm guardrail webhook backend", llmYAML("{models: [{name: a, provider: openAI, guardrails: {request: [{webhook: {target: {backend: nope}}}]}}]}"), `llm.models[0].guardrails.request[0].webhook.target.backend: no backend named "nope" in the top-level backends`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			checkParse(t, tc.yaml, tc.wantErr)
		})
	}
}

// TestLLMDefaults: the values left out take the spec's defaults, and a
// written endpoint loses its scheme.
func TestLLMDefaults(t *testing.T) {
	f, err := Parse([]byte(aiBackendYAML("{groups: [{providers: [{name: b, provider: {bedrock: {}}}, {name: z, provider: {azure: {resourceName: r, resourceType: foundry}}}]}]}")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	ps := f.Binds[0].Listeners[0].Routes[0].Backends[0].AI.Groups[0].Providers
	if got := ps[0].Provider.Bedrock.RegionOrDefault(); got != "us-east-1" {
		t.Errorf("bedrock region %q, want us-east-1", got)
	}
	if got := ps[1].Provider.Azure.APIVersionOrDefault(); got != "v1" {
		t.Errorf("azure apiVersion %q, want v1", got)
	}
	f, err = Parse([]byte(routePolicyYAML(`{ai: {promptGuard: {request: [{azureContentSafety: {endpoint: 'https://cs.example.com/'}}]}}}`)), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Binds[0].Listeners[0].Routes[0].Policies.AI.PromptGuard.Request[0].AzureContentSafety.Endpoint; got != "cs.example.com" {
		t.Errorf("endpoint %q, want the host alone", got)
	}
	f, err = Parse([]byte(llmYAML("{models: [{name: a, provider: openai}], virtualModels: [{name: v, routing: {weighted: {targets: [{model: a}]}}}]}")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if f.LLM.PortOrDefault() != 4000 || f.LLM.Models[0].Provider.Builtin != "openAI" || f.LLM.VirtualModels[0].Routing.Weighted.Targets[0].WeightOrDefault() != 1 {
		t.Errorf("llm defaults: %+v", f.LLM)
	}
}

// TestMatchModelName: exact names, and "*" at either end.
func TestMatchModelName(t *testing.T) {
	for _, tc := range []struct {
		pattern, model string
		want           bool
	}{
		{"gpt-4o", "gpt-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"gpt-*", "gpt-4o", true},
		{"gpt-*", "gpt-", true},
		{"gpt-*", "claude", false},
		{"*-mini", "gpt-4o-mini", true},
		{"*-mini", "gpt-4o", false},
		{"*", "", true},
	} {
		if got := MatchModelName(tc.pattern, tc.model); got != tc.want {
			t.Errorf("MatchModelName(%q, %q) = %v, want %v", tc.pattern, tc.model, got, tc.want)
		}
	}
}

// TestLLMErrorsGolden: one file with many mistakes in the LLM settings
// reports all of them at once, each with its field path.
func TestLLMErrorsGolden(t *testing.T) {
	checkErrorsGolden(t, "llm_invalid.yaml", "llm_invalid.golden")
}

// TestNotServedYet lists every setting the data plane does not serve, by
// path, and nothing else.
func TestNotServedYet(t *testing.T) {
	yaml := `backends:
- name: llm
  ai: {name: a, provider: {openAI: {moderation: {}}}}
  policies: {backendAuth: {aws: {assumeRole: {roleArn: r}}}, ai: {promptCaching: {}}}
- name: plain
  host: 127.0.0.1:1
  policies: {backendAuth: {gcp: {}}}
binds:
- port: 1
  listeners:
  - routes:
    - policies:
        localRateLimit: [{maxTokens: 1, tokensPerFill: 1, fillInterval: 1s}]
        ai:
          modelAliases: {a: b}
          routes: {/v1/rerank: rerank}
          promptGuard: {streaming: Enabled, request: [{openAIModeration: {}}, {regex: {rules: [{builtin: ssn}]}}], response: [{regex: {rules: [{builtin: ssn}]}}, {webhook: {target: {host: 'h:1'}}}]}
        backendAuth: {key: k, credentials: [{location: {header: {name: x}}, key: k}]}
      backends:
      - ai: {name: b, provider: {gemini: {}}}
        policies: {backendAuth: copilot}
      - host: 127.0.0.1:2
        policies: {backendAuth: {passthrough: {}}}
    - backends: [{backend: plain}]
    - policies: {backendAuth: {gcp: {type: idToken}}}
      backends: [{backend: llm}]
llm: {models: [{name: m, provider: copilot}]}
`
	f, err := Parse([]byte(yaml), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ns := range f.NotServedYet() {
		got = append(got, ns.Path+": "+ns.Msg)
	}
	const r = "binds[0].listeners[0].routes[0]."
	want := []string{
		"backends[0].ai.provider.openAI.moderation: provider moderation is not implemented yet (use a request guard)",
		"backends[0].policies.backendAuth.aws.assumeRole: assuming an AWS role is not implemented yet",
		`backends[1].policies.backendAuth.gcp: backend auth "gcp" is implemented for ai backends only yet`,
		r + `backends[0].policies.backendAuth: backend auth "copilot" is not implemented yet`,
		"binds[0].listeners[0].routes[2].policies.backendAuth.gcp.type: Google ID tokens are not implemented yet (access tokens are)",
		r + `policies.ai.routes["/v1/rerank"]: route type "rerank" is not implemented yet`,
		"llm.models[0].provider: the copilot provider is not implemented yet",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	plain, err := Parse([]byte("binds: [{port: 1, listeners: [{routes: [{policies: {backendAuth: {passthrough: {}}}, backends: [{host: 'a:1'}]}]}]}]\n"), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if ns := plain.NotServedYet(); len(ns) != 0 {
		t.Errorf("a file without LLM settings: %v", ns)
	}
}
