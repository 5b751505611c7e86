package config

// NotServed is a setting of a file that its format accepts and validates
// but that the data plane does not serve yet.
type NotServed struct {
	Path string // the setting's path: "binds[0].listeners[0].routes[0].backends[0].ai"
	Msg  string // why it is refused: "ai backends are not implemented yet"
}

// NotServedYet lists the settings of f that decode and validate but that
// the data plane does not serve yet: the LLM gateway's configuration (ai
// backends, ai policies, the llm section), local rate limits, and backend
// auth other than passthrough. The server refuses a file holding any when
// it applies it, so that no setting is silently ignored, while
// `--validate-only` accepts it. An entry goes when its feature is built.
func (f *File) NotServedYet() []NotServed {
	var out []NotServed
	add := func(path, msg string) { out = append(out, NotServed{path, msg}) }
	backendPolicies := func(path string, p *BackendPolicies) {
		if p == nil {
			return
		}
		if p.AI != nil {
			add(path+".policies.ai", "ai policies are not implemented yet")
		}
		backendAuthNotServed(path+".policies", p.BackendAuth, add)
	}
	for i := range f.Backends {
		b := &f.Backends[i]
		path := indexPath("backends", i)
		if b.Kind == BackendAI {
			add(path+".ai", "ai backends are not implemented yet")
		}
		backendPolicies(path, b.Policies)
	}
	f.eachRoute(func(path string, r *Route) {
		if p := r.Policies; p != nil {
			if p.AI != nil {
				add(path+".policies.ai", "ai policies are not implemented yet")
			}
			if p.LocalRateLimit != nil {
				add(path+".policies.localRateLimit", "local rate limits are not implemented yet")
			}
			backendAuthNotServed(path+".policies", p.BackendAuth, add)
		}
		for i := range r.Backends {
			rb := &r.Backends[i]
			bpath := path + "." + indexPath("backends", i)
			if rb.Kind == BackendAI {
				add(bpath+".ai", "ai backends are not implemented yet")
			}
			backendPolicies(bpath, rb.Policies)
		}
	})
	if f.LLM != nil {
		add("llm", "the llm section is not implemented yet")
	}
	return out
}

// backendAuthNotServed adds the backendAuth kinds the data plane does not
// apply yet (only passthrough is built), path being the policies holding it.
func backendAuthNotServed(path string, b *BackendAuth, add func(path, msg string)) {
	if b == nil {
		return
	}
	switch k := b.Kind(); k {
	case "", "passthrough":
	case "copilot": // the string form: no field below backendAuth
		add(path+".backendAuth", "backend auth \"copilot\" is not implemented yet (only passthrough is)")
	default:
		add(path+".backendAuth."+k, "backend auth \""+k+"\" is not implemented yet (only passthrough is)")
	}
	if len(b.Credentials) > 0 {
		add(path+".backendAuth.credentials", "backend auth credentials are not implemented yet")
	}
}
