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
// the data plane does not serve yet: some LLM route types, provider
// moderation, the copilot provider and provider presets without an
// address, a few llm section settings (LLMConfig.notServedYet), backend
// auth other than passthrough on backends that are not ai backends, and
// some backend auth forms. The server refuses a file holding any when it
// applies it, so that no setting is silently ignored, and `--validate-only`
// (server.Validate) refuses it alike. An entry goes when its feature is
// built.
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
	})
	if f.LLM != nil {
		f.LLM.notServedYet(add)
	}
	return out
}

// notServedYet adds the settings of the llm section not served yet: the
// copilot provider, backend auth
// forms, passthrough "detect" (the detect route type), requestHeaders on a
// header a provider attempt sets itself (Host, which the provider's wins
// over as in agentgateway, and the headers of a SigV4 signature, which is
// made after requestHeaders apply).
func (l *LLMConfig) notServedYet(add func(path, msg string)) {
	provider := func(path string, p *LLMModelProvider, params *LLMParams) {
		if p.Builtin == "copilot" {
			add(path+".provider", "the copilot provider is not implemented yet")
		}
	}
	providers := map[string]int{}
	for i := range l.Providers {
		p := &l.Providers[i]
		if _, dup := providers[p.Name]; !dup {
			providers[p.Name] = i
		}
		path := indexPath("llm.providers", i)
		provider(path, &p.Provider, p.Params)
		if p.Defaults != nil {
			backendAuthNotServed(path+".defaults", p.Defaults.Auth, true, add)
		}
	}
	// requestHeaders returns the requestHeaders a model's requests get (its
	// own, else its provider's default) with their path, and the headers
	// of its SigV4 signature (none when its credentials do not sign).
	requestHeaders := func(i int) (h *HeaderModifier, path string, credentials []string) {
		m := &l.Models[i]
		kind, params, auth := m.Provider, m.Params, m.Auth
		h, path = m.RequestHeaders, indexPath("llm.models", i)+".requestHeaders"
		if j, ok := providers[m.Provider.Reference]; ok && m.Provider.Reference != "" {
			p := &l.Providers[j]
			kind, params = p.Provider, p.Params
			if d := p.Defaults; d != nil {
				if auth == nil {
					auth = d.Auth
				}
				if h == nil && d.RequestHeaders != nil {
					h, path = d.RequestHeaders, indexPath("llm.providers", j)+".defaults.requestHeaders"
				}
			}
		}
		// Only signed credentials (SigV4: aws auth, or Bedrock's default
		// chain) come after requestHeaders; others come before them, as in
		// agentgateway, so requestHeaders may replace them.
		signs := auth != nil && auth.AWS != nil ||
			auth == nil && kind.Builtin == "bedrock" && (params == nil || params.APIKey == nil)
		if !signs {
			return h, path, nil
		}
		return h, path, append(credentials, "authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256")
	}
	reported := map[string]bool{}
	once := func(path, msg string) {
		if !reported[path] {
			reported[path] = true
			add(path, msg)
		}
	}
	lower := func(s string) string { // header names are ASCII tokens
		b := []byte(s)
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	// attemptHeaders adds the first header of a model's requestHeaders
	// that each attempt sets itself.
	attemptHeaders := func(i int) {
		h, hpath, credentials := requestHeaders(i)
		if h == nil {
			return
		}
		var fields, names []string
		for _, name := range slices.Sorted(maps.Keys(h.Add)) {
			fields, names = append(fields, decode.JoinKey("add", name)), append(names, name)
		}
		for _, name := range slices.Sorted(maps.Keys(h.Set)) {
			fields, names = append(fields, decode.JoinKey("set", name)), append(names, name)
		}
		for j, name := range h.Remove {
			fields, names = append(fields, indexPath("remove", j)), append(names, name)
		}
		for k, name := range names {
			switch name = lower(name); {
			case name == "host":
				once(hpath+"."+fields[k], "requestHeaders on Host are not implemented yet (each provider attempt sets the provider's Host)")
				return
			case slices.ContainsFunc(credentials, func(c string) bool { return lower(c) == name }):
				once(hpath+"."+fields[k], "requestHeaders on a header of the model's SigV4 signature are not implemented yet (the signature would replace them)")
				return
			}
		}
	}

	for i := range l.Models {
		m := &l.Models[i]
		path := indexPath("llm.models", i)
		provider(path, &m.Provider, m.Params)
		backendAuthNotServed(path, m.Auth, true, add)
		if m.Passthrough == "detect" {
			add(path+".passthrough", `passthrough "detect" is not implemented yet (reading usage from answers of any format); "opaque" is`)
		}
		attemptHeaders(i)
	}
}

// backendAuthNotServed adds the backendAuth forms the data plane does not
// apply yet, path being the policies holding it. allAI says the backends it
// applies to are all ai backends, which apply key, aws, gcp and azure.
// Every kind applies passthrough, key and credentials, and host and
// dynamic backends aws (server/backendauth.go refuses it on MCP backends).
func backendAuthNotServed(path string, b *BackendAuth, allAI bool, add func(path, msg string)) {
	if b == nil {
		return
	}
	switch k := b.Kind(); k {
	case "", "passthrough", "key", "aws":
	case "copilot": // the string form: no field below backendAuth
		add(path+".backendAuth", "backend auth \"copilot\" is not implemented yet")
	case "gcp", "azure":
		if !allAI {
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

}
