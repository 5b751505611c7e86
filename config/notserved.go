package config

import (
	"maps"
	"slices"

	"github.com/relaygate/gateway/config/decode"
)

// NotServed is a setting of a file that its format accepts and validates
// but that the data plane does not serve yet.
type NotServed struct {
	Path string // the setting's path: "binds[0].listeners[0].routes[0].policies.ai.promptCaching"
	Msg  string // why it is refused: "prompt caching is not implemented yet"
}

// NotServedYet lists the settings of f that decode and validate but that
// the data plane does not serve yet: the llm section, some LLM features
// (prompt caching, remote guards on streamed answers, some route types, provider
// moderation and Bedrock guardrails, the copilot provider), backend auth
// other than passthrough on backends that are not ai backends, and some
// backend auth forms. The server refuses a file holding any when it applies
// it, so that no setting is silently ignored, while `--validate-only`
// accepts it. An entry goes when its feature is built.
func (f *File) NotServedYet() []NotServed {
	var out []NotServed
	add := func(path, msg string) { out = append(out, NotServed{path, msg}) }
	aiBackend := func(path string, ai *AIBackend) {
		for _, pp := range ai.providerPaths() {
			p := pp.provider
			ppath := path + ".ai" + pp.path
			switch {
			case p.Provider.Copilot != nil:
				add(ppath+".provider.copilot", "the copilot provider is not implemented yet")
			case p.Provider.OpenAI != nil && p.Provider.OpenAI.Moderation != nil:
				add(ppath+".provider.openAI.moderation", "provider moderation is not implemented yet (use a request guard)")
			}
			if p.Policies != nil {
				backendAuthNotServed(ppath+".policies", p.Policies.BackendAuth, true, add)
			}
		}
	}
	for i := range f.Backends {
		b := &f.Backends[i]
		path := indexPath("backends", i)
		if b.Kind == BackendAI {
			aiBackend(path, b.AI)
		}
		if b.Policies != nil {
			backendAuthNotServed(path+".policies", b.Policies.BackendAuth, b.Kind == BackendAI, add)
		}
	}
	f.eachRoute(func(path string, r *Route) {
		allAI := len(r.Backends) > 0
		for i := range r.Backends {
			rb := &r.Backends[i]
			bpath := path + "." + indexPath("backends", i)
			isAI := rb.Kind == BackendAI
			if rb.Kind == BackendRef {
				for j := range f.Backends {
					if f.Backends[j].Name == rb.Backend {
						isAI = f.Backends[j].Kind == BackendAI
					}
				}
			}
			allAI = allAI && isAI
			if rb.Kind == BackendAI {
				aiBackend(bpath, rb.AI)
			}
			if rb.Policies != nil {
				backendAuthNotServed(bpath+".policies", rb.Policies.BackendAuth, isAI, add)
			}
		}
		if p := r.Policies; p != nil {
			backendAuthNotServed(path+".policies", p.BackendAuth, allAI, add)
		}
	})
	f.eachAIPolicy(func(path string, p *AIPolicy) {
		for _, k := range slices.Sorted(maps.Keys(p.Routes)) {
			switch p.Routes[k] {
			case "detect", "generateContent", "geminiCountTokens", "rerank":
				add(path+"."+decode.JoinKey("routes", k), "route type \""+string(p.Routes[k])+"\" is not implemented yet")
			}
		}
		if g := p.PromptGuard; g != nil {
			g.notServedYet(path+".promptGuard", add)
		}
	})
	if f.LLM != nil {
		f.LLM.notServedYet(add)
	}
	return out
}

// notServedYet adds the settings of the llm section not served yet.
func (l *LLMConfig) notServedYet(add func(path, msg string)) {
	provider := func(path string, p *LLMModelProvider, params *LLMParams) {
		switch {
		case p.Preset != "":
			if params == nil || (params.BaseURL == nil && params.HostOverride == nil) {
				add(path+".provider", "provider presets are not implemented yet (give params.baseUrl)")
			}
		case p.Builtin == "copilot":
			add(path+".provider", "the copilot provider is not implemented yet")
		}
	}
	policies := func(path string, p *LLMModelPolicies) {
		if p.RequestHeaders != nil {
			add(path+".requestHeaders", "model request headers are not implemented yet")
		}
		if p.ResponseHeaders != nil {
			add(path+".responseHeaders", "model response headers are not implemented yet")
		}
		if p.Auth != nil {
			backendAuthNotServed(path, p.Auth, true, add)
		}
	}
	for i := range l.Providers {
		p := &l.Providers[i]
		path := indexPath("llm.providers", i)
		provider(path, &p.Provider, p.Params)
		if p.Defaults != nil {
			policies(path+".defaults", p.Defaults)
		}
	}
	for i := range l.Models {
		m := &l.Models[i]
		path := indexPath("llm.models", i)
		provider(path, &m.Provider, m.Params)
		policies(path, &m.LLMModelPolicies)
		if len(m.Matches) > 0 {
			add(path+".matches", "model header matches are not implemented yet")
		}
		if m.Authorization != nil {
			add(path+".authorization", "model authorization is not implemented yet (use llm.policies.authorization)")
		}
		if m.Passthrough != "" {
			add(path+".passthrough", "model passthrough is not implemented yet")
		}
		if m.Guardrails != nil {
			m.Guardrails.notServedYet(path+".guardrails", add)
		}
	}
	if p := l.Policies; p != nil && p.Guardrails != nil {
		p.Guardrails.notServedYet("llm.policies.guardrails", add)
	}
}

// notServedYet adds what a prompt guard asks that is not served yet:
// nothing now (remote response guards judge streamed answers with
// streaming: Enabled, in windows: backend/llm/aipolicy's window.go).
func (g *PromptGuard) notServedYet(path string, add func(path, msg string)) {}

// backendAuthNotServed adds the backendAuth forms the data plane does not
// apply yet, path being the policies holding it. ai says the backends it
// applies to are all ai backends, which apply key, aws and gcp; other
// backends apply passthrough only.
func backendAuthNotServed(path string, b *BackendAuth, ai bool, add func(path, msg string)) {
	if b == nil {
		return
	}
	switch k := b.Kind(); k {
	case "", "passthrough":
	case "copilot": // the string form: no field below backendAuth
		add(path+".backendAuth", "backend auth \"copilot\" is not implemented yet")
	case "key", "aws", "gcp", "azure":
		if !ai {
			add(path+".backendAuth."+k, "backend auth \""+k+"\" is implemented for ai backends only yet")
		}
	default:
		add(path+".backendAuth."+k, "backend auth \""+k+"\" is not implemented yet")
	}
	if b.GCP != nil && b.GCP.Type == "idToken" {
		add(path+".backendAuth.gcp.type", "Google ID tokens are not implemented yet (access tokens are)")
	}
	if b.AWS != nil && b.AWS.AssumeRole != nil {
		add(path+".backendAuth.aws.assumeRole", "assuming an AWS role is not implemented yet")
	}
	if len(b.Credentials) > 0 {
		add(path+".backendAuth.credentials", "backend auth credentials are not implemented yet")
	}
}
