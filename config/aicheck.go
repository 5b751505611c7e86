package config

import "fmt"

// This file holds the LLM gateway's rules that span the file: references
// from prompt guards to top-level backends, the llm section's own
// references (LLMConfig.checkLLM), and the llm section's port.

// checkAI checks the rules of the LLM settings that span the file; names
// holds the top-level backends' names.
func (f *File) checkAI(c checker, names map[string]int) {
	f.eachPromptGuard(func(path string, g *PromptGuard) {
		for i, r := range g.Request {
			if r.Webhook != nil {
				checkWebhookTarget(c, fmt.Sprintf("%s.request[%d].webhook.target", path, i), &r.Webhook.Target, names)
			}
		}
		for i, r := range g.Response {
			if r.Webhook != nil {
				checkWebhookTarget(c, fmt.Sprintf("%s.response[%d].webhook.target", path, i), &r.Webhook.Target, names)
			}
		}
	})
	if f.LLM != nil {
		f.LLM.checkLLM(c)
	}
}

func checkWebhookTarget(c checker, path string, t *MirrorBackend, names map[string]int) {
	if t.Backend == "" {
		return
	}
	if _, ok := names[t.Backend]; !ok {
		c.Errorf(path+".backend", "no backend named %q in the top-level backends", t.Backend)
	}
}

// eachPromptGuard calls fn with every prompt guard of the file and its
// path: those of ai policies (of routes, route backends, top-level backends
// and the providers of ai backends) and those of the llm section.
func (f *File) eachPromptGuard(fn func(path string, g *PromptGuard)) {
	f.eachAIPolicy(func(path string, p *AIPolicy) {
		if p.PromptGuard != nil {
			fn(path+".promptGuard", p.PromptGuard)
		}
	})
	if f.LLM == nil {
		return
	}
	if p := f.LLM.Policies; p != nil && p.Guardrails != nil {
		fn("llm.policies.guardrails", p.Guardrails)
	}
	for i := range f.LLM.Models {
		if g := f.LLM.Models[i].Guardrails; g != nil {
			fn(indexPath("llm.models", i)+".guardrails", g)
		}
	}
}

// eachAIPolicy calls fn with every `policies.ai` of the file and its path.
func (f *File) eachAIPolicy(fn func(path string, p *AIPolicy)) {
	backend := func(path string, bp *BackendPolicies, ai *AIBackend) {
		if bp != nil && bp.AI != nil {
			fn(path+".policies.ai", bp.AI)
		}
		if ai == nil {
			return
		}
		for _, pp := range ai.providerPaths() {
			if p := pp.provider.Policies; p != nil && p.AI != nil {
				fn(path+".ai"+pp.path+".policies.ai", p.AI)
			}
		}
	}
	for i := range f.Backends {
		b := &f.Backends[i]
		backend(indexPath("backends", i), b.Policies, b.AI)
	}
	f.eachRoute(func(path string, r *Route) {
		if r.Policies != nil && r.Policies.AI != nil {
			fn(path+".policies.ai", r.Policies.AI)
		}
		for i := range r.Backends {
			rb := &r.Backends[i]
			backend(path+"."+indexPath("backends", i), rb.Policies, rb.AI)
		}
	})
}

// eachRoute calls fn with every route of the binds and its path, once for
// a route attached to several listeners.
func (f *File) eachRoute(fn func(path string, r *Route)) {
	seen := map[string]bool{}
	for bi := range f.Binds {
		b := &f.Binds[bi]
		for li := range b.Listeners {
			l := &b.Listeners[li]
			lpath := b.listenerPath(bi, li)
			for ri := range l.Routes {
				path := l.Routes[ri].SourcePath(lpath + "." + indexPath("routes", ri))
				if !seen[path] {
					seen[path] = true
					fn(path, &l.Routes[ri])
				}
			}
		}
	}
}

// aiProviderPath is a provider of an ai backend and its path below `ai`.
type aiProviderPath struct {
	path     string // "" for the single-provider form
	provider *NamedAIProvider
}

func (b *AIBackend) providerPaths() []aiProviderPath {
	if b.Provider != nil {
		return []aiProviderPath{{"", b.Provider}}
	}
	var out []aiProviderPath
	for gi := range b.Groups {
		for pi := range b.Groups[gi].Providers {
			out = append(out, aiProviderPath{fmt.Sprintf(".groups[%d].providers[%d]", gi, pi), &b.Groups[gi].Providers[pi]})
		}
	}
	return out
}

// checkLLMPort refuses an llm section with a port of its own on the port
// of a bind, of a gateway or of the top-level mcp section.
func (f *File) checkLLMPort() Errors {
	if f.LLM == nil || f.LLM.attached {
		return nil
	}
	port := f.LLM.PortOrDefault()
	what := fmt.Sprintf("port %d", port)
	if f.LLM.Port == nil {
		what += " (the default)"
	}
	var errs Errors
	c := checker{errs: &errs}
	for i, b := range f.Binds {
		if b.Port != nil && *b.Port == port && b.origin != "mcp" {
			c.Errorf("llm.port", "%s is already used by %s", what, b.path(i))
		}
	}
	if f.MCP != nil && !f.MCP.attached {
		mcpPort := defaultMCPPort
		if f.MCP.Port != nil {
			mcpPort = *f.MCP.Port
		}
		if mcpPort == port {
			c.Errorf("llm.port", "%s is already used by the top-level mcp section", what)
		}
	}
	return errs
}
