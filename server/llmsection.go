package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
	"github.com/bytedance/sonic"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/balance"
	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/server/router"
)

// This file serves the top-level llm section (agentgateway's LocalLLMConfig):
// an OpenAI-style API on a port of its own whose request bodies name a
// model; the model, or a virtual model, picks the provider that serves it.

// llmModels is the llm section's target.
type llmModels struct {
	routes   []llmRoute
	fallback provider.RouteType
	models   []*llmModelEntry // most specific name first
	virtual  map[string]*llmVirtual
	list     []byte // the answer to GET /v1/models
}

// llmModelEntry is a model of llm.models: the names it serves and the ai
// backend (one provider) that serves them.
type llmModelEntry struct {
	pattern string
	public  bool
	target  *llmTarget
}

// llmVirtual is a virtual model: one of several models per request.
type llmVirtual struct {
	weighted    []*llmTarget
	cumulative  []int
	total       int
	failover    *llmTarget // the targets' providers in priority groups
	conditional []llmCondition
}

// llmCondition is a conditional target: taken when prog (nil for the
// fallback) holds for the request.
type llmCondition struct {
	prog   cel.Program
	target *llmTarget
}

func (m *llmModels) honors(string) bool { return true }

func (m *llmModels) exchange(b *bind, rs *requestState, r *route, rb *routeBackend) int {
	return b.serveLLMModels(rs, r, rb, m)
}

// llmSectionRoutes are agentgateway's route types of the llm section.
var llmSectionRoutes = map[string]config.LLMRouteType{
	"/v1/chat/completions":      "completions",
	"/v1/messages":              "messages",
	"/v1/messages/count_tokens": "anthropicTokenCount",
	"/v1/responses":             "responses",
	"/v1/embeddings":            "embeddings",
	"/v1/models":                "models",
	"*":                         "passthrough",
}

// serveLLMModels answers a request to the llm section.
func (b *bind) serveLLMModels(rs *requestState, r *route, rb *routeBackend, m *llmModels) int {
	fctx := rs.pc.Fast
	rt := llmRouteType(m.routes, m.fallback, rs.pc.Path)
	if rt == provider.Models && fctx.Request.Header.IsGet() {
		// The section's own list of the models clients may ask for.
		fctx.Response.Header.SetContentType("application/json")
		fctx.Response.SetBody(m.list)
		return fasthttp.StatusOK
	}
	x, status, ok := b.llmBegin(rs, rt)
	if !ok {
		return status
	}
	name := aipolicy.Model(x.client)
	if name == "" {
		return b.llmClientError(x, fasthttp.StatusBadRequest, "the request names no model")
	}
	t := m.pick(name, &rs.pc, x.client)
	if t == nil {
		return b.llmClientError(x, fasthttp.StatusNotFound, "model not found: "+truncate(name, 128))
	}
	return b.llmAttempts(rs, r, rb, t, x)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// pick finds the target for a model name: a virtual model of that name,
// else the first public model whose name matches.
func (m *llmModels) pick(name string, pc *policy.Ctx, body []byte) *llmTarget {
	if v := m.virtual[name]; v != nil {
		return v.pick(pc, body)
	}
	for _, e := range m.models {
		if e.public && config.MatchModelName(e.pattern, name) {
			return e.target
		}
	}
	return nil
}

func (v *llmVirtual) pick(pc *policy.Ctx, body []byte) *llmTarget {
	switch {
	case v.failover != nil:
		return v.failover
	case v.total > 0:
		n := rand.IntN(v.total)
		for i, c := range v.cumulative {
			if n < c {
				return v.weighted[i]
			}
		}
	case len(v.conditional) > 0:
		var req map[string]any
		if err := sonic.Unmarshal(body, &req); err != nil {
			return nil
		}
		in := celrules.InputFromCtx(pc)
		for _, c := range v.conditional {
			if c.prog == nil {
				return c.target
			}
			out, err := celrules.EvalLLM(c.prog, &in, req)
			if err == nil {
				if ok, _ := out.Value().(bool); ok {
					return c.target
				}
			}
		}
	}
	return nil
}

// llmBind compiles the llm section into a bind of its own: one route
// matching every path, with llm.policies, whose backend is the models.
func (c *compiler) llmBind(l *config.LLMConfig) (*bindConfig, error) {
	port := l.PortOrDefault()
	listener := &config.Listener{Name: "llm"}
	rp := &config.RoutePolicies{}
	if p := l.Policies; p != nil {
		rp.JWTAuth, rp.Authorization, rp.CORS = p.JWTAuth, p.Authorization, p.CORS
		if len(p.LocalRateLimit) > 0 {
			rp.LocalRateLimit = &config.LocalRateLimit{Buckets: p.LocalRateLimit}
		}
	}
	cr, err := c.route("llm", port, listener, 0, &config.Route{Name: "llm", Policies: rp}, nil)
	if err != nil {
		return nil, err
	}
	m, err := c.llmModels(l)
	if err != nil {
		return nil, err
	}
	rb := &routeBackend{name: "llm", target: m}
	rb.metrics = c.gw.metrics.Route(cr.name, rb.name)
	rb.connectErrors = c.gw.metrics.Backend(rb.name)
	cr.backends, cr.weights, cr.total = []*routeBackend{rb}, []int{1}, 1
	table, err := router.New([]router.Route{{Value: cr}})
	if err != nil {
		return nil, err
	}
	return &bindConfig{port: port, rawPaths: rawPaths(c.file), listeners: []*listenerConfig{{name: "llm", table: table}}}, nil
}

// llmModels compiles llm.models and llm.virtualModels.
func (c *compiler) llmModels(l *config.LLMConfig) (*llmModels, error) {
	out := &llmModels{virtual: map[string]*llmVirtual{}}
	var err error
	if out.routes, out.fallback, err = compileLLMRoutes("llm", llmSectionRoutes); err != nil {
		return nil, err
	}
	providers := map[string]*config.LLMProvider{}
	for i := range l.Providers {
		providers[l.Providers[i].Name] = &l.Providers[i]
	}
	byName := map[string]*llmTarget{}
	type listed struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := []listed{}
	for i := range l.Models {
		path := fmt.Sprintf("llm.models[%d]", i)
		mc := &l.Models[i]
		t, err := c.llmModel(path, l, mc, providers)
		if err != nil {
			return nil, err
		}
		public := mc.Visibility != "internal"
		out.models = append(out.models, &llmModelEntry{pattern: mc.Name, public: public, target: t})
		byName[mc.Name] = t
		if public && !strings.Contains(mc.Name, "*") {
			list = append(list, listed{mc.Name, "model", 0, "relaygate"})
		}
	}
	// The most specific name first: exact names, then longer patterns.
	sort.SliceStable(out.models, func(i, j int) bool {
		a, b := out.models[i].pattern, out.models[j].pattern
		wa, wb := strings.Contains(a, "*"), strings.Contains(b, "*")
		if wa != wb {
			return !wa
		}
		return len(a) > len(b)
	})
	for i := range l.VirtualModels {
		vm := &l.VirtualModels[i]
		path := fmt.Sprintf("llm.virtualModels[%d].routing", i)
		v, err := c.llmVirtual(path, vm, byName, out.models)
		if err != nil {
			return nil, err
		}
		out.virtual[vm.Name] = v
		list = append(list, listed{vm.Name, "model", 0, "relaygate"})
	}
	out.list, err = json.Marshal(map[string]any{"object": "list", "data": list})
	return out, err
}

// resolveModel finds the model a virtual model's target names: an exact
// name, else a pattern that matches it.
func resolveModel(name string, byName map[string]*llmTarget, models []*llmModelEntry) *llmTarget {
	if t := byName[name]; t != nil {
		return t
	}
	for _, e := range models {
		if config.MatchModelName(e.pattern, name) {
			return e.target
		}
	}
	return nil
}

func (c *compiler) llmVirtual(path string, vm *config.LLMVirtualModel, byName map[string]*llmTarget, models []*llmModelEntry) (*llmVirtual, error) {
	v := &llmVirtual{}
	target := func(p, name string) (*llmTarget, error) {
		t := resolveModel(name, byName, models)
		if t == nil {
			return nil, &decode.FieldError{Path: p, Msg: fmt.Sprintf("no model %q in llm.models", name)}
		}
		return t, nil
	}
	switch r := &vm.Routing; {
	case r.Weighted != nil:
		for i, wt := range r.Weighted.Targets {
			t, err := target(fmt.Sprintf("%s.weighted.targets[%d].model", path, i), wt.Model)
			if err != nil {
				return nil, err
			}
			if w := wt.WeightOrDefault(); w > 0 {
				v.total += w
				v.weighted = append(v.weighted, t)
				v.cumulative = append(v.cumulative, v.total)
			}
		}
		if v.total == 0 {
			return nil, &decode.FieldError{Path: path + ".weighted.targets", Msg: "every weight is 0: no target would ever be chosen"}
		}
	case r.Failover != nil:
		// The models' providers, in groups by priority (lower first),
		// balanced by health like an ai backend's groups.
		byPriority := map[int][]*llmProvider{}
		names := map[int][]string{}
		var priorities []int
		for i, ft := range r.Failover.Targets {
			t, err := target(fmt.Sprintf("%s.failover.targets[%d].model", path, i), ft.Model)
			if err != nil {
				return nil, err
			}
			p := *ft.Priority
			if _, ok := byPriority[p]; !ok {
				priorities = append(priorities, p)
			}
			it := t.set.Attempts(0)
			prov, member, _ := it.Next()
			byPriority[p] = append(byPriority[p], prov)
			names[p] = append(names[p], member.Name())
		}
		sort.Ints(priorities)
		var groups [][]*llmProvider
		var groupNames [][]string
		for _, p := range priorities {
			groups = append(groups, byPriority[p])
			groupNames = append(groupNames, names[p])
		}
		t := &llmTarget{name: "llm/" + vm.Name, metrics: c.gw.metrics.LLM(), catalog: c.catalog}
		key := "llm-virtual\x00" + vm.Name + "\x00" + fmt.Sprint(groupNames)
		if prev, ok := c.gw.kept[key].(*balance.Set[*llmProvider]); ok && sameGroups(prev, groups) {
			t.set = prev
		} else {
			t.set = balance.New(groups, groupNames, balance.Options{})
		}
		c.kept[key] = t.set
		c.llm = append(c.llm, t)
		v.failover = t
	case r.Conditional != nil:
		for i, ct := range r.Conditional.Targets {
			t, err := target(fmt.Sprintf("%s.conditional.targets[%d].model", path, i), ct.Model)
			if err != nil {
				return nil, err
			}
			cond := llmCondition{target: t}
			if ct.When != nil {
				prog, err := config.CompileLLMCondition(string(*ct.When))
				if err != nil {
					return nil, &decode.FieldError{Path: fmt.Sprintf("%s.conditional.targets[%d].when", path, i), Msg: err.Error()}
				}
				cond.prog = prog
			}
			v.conditional = append(v.conditional, cond)
		}
	}
	return v, nil
}

// sameGroups reports whether a kept set holds exactly these providers (a
// reload that changed a model compiles new providers: the set is new too).
func sameGroups(s *balance.Set[*llmProvider], groups [][]*llmProvider) bool {
	it := s.Attempts(0)
	seen := map[*llmProvider]bool{}
	for {
		p, _, ok := it.Next()
		if !ok {
			break
		}
		seen[p] = true
	}
	n := 0
	for _, g := range groups {
		for _, p := range g {
			if !seen[p] {
				return false
			}
			n++
		}
	}
	return n == len(seen)
}

// llmModel compiles a model of llm.models into an ai backend of one
// provider: its provider kind and params become a NamedAIProvider, its
// policy settings (merged over its llm.providers entry's defaults) and the
// section's guardrails an ai policy.
func (c *compiler) llmModel(path string, l *config.LLMConfig, mc *config.LLMModel, providers map[string]*config.LLMProvider) (*llmTarget, error) {
	kind, params, pols := mc.Provider, mc.Params, mc.LLMModelPolicies
	if ref := mc.Provider.Reference; ref != "" {
		pe := providers[ref]
		if pe == nil {
			return nil, &decode.FieldError{Path: path + ".provider.reference", Msg: fmt.Sprintf("no provider %q in llm.providers", ref)}
		}
		kind = pe.Provider
		merged := config.LLMParams{}
		if pe.Params != nil {
			merged = *pe.Params
		}
		if params != nil && params.Model != nil {
			merged.Model = params.Model
		}
		params = &merged
		if pe.Defaults != nil {
			pols = mergeModelPolicies(*pe.Defaults, pols)
		}
	}
	if params == nil {
		params = &config.LLMParams{}
	}
	name := mc.Name
	if mc.ID != nil {
		name = *mc.ID
	}
	np := &config.NamedAIProvider{Name: name, Tokenize: params.Tokenize, PathOverride: params.PathOverride, PathPrefix: params.PathPrefix}
	if params.HostOverride != nil {
		np.HostOverride = *params.HostOverride
	}
	var baseTLS *backend.UpstreamTLS
	var baseAddr string
	if params.BaseURL != nil {
		u, err := url.Parse(*params.BaseURL)
		if err != nil {
			return nil, &decode.FieldError{Path: path + ".params.baseUrl", Msg: err.Error()}
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		baseAddr = u.Hostname() + ":" + port
		if u.Scheme == "https" {
			baseTLS = &backend.UpstreamTLS{Enabled: true, ServerName: u.Hostname()}
		} else {
			np.HostOverride = baseAddr
		}
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			np.PathPrefix = &p
		}
	}
	model := params.Model
	switch kind.Builtin {
	case "openAI":
		np.Provider.OpenAI = &config.OpenAIProvider{Model: model}
	case "anthropic":
		np.Provider.Anthropic = &config.AnthropicProvider{Model: model}
	case "gemini":
		np.Provider.Gemini = &config.GeminiProvider{Model: model}
	case "vertex":
		np.Provider.Vertex = &config.VertexProvider{Model: model, Region: deref(params.VertexRegion), ProjectID: deref(params.VertexProject)}
	case "bedrock":
		np.Provider.Bedrock = &config.BedrockProvider{Model: model, Region: deref(params.AWSRegion)}
	case "azure":
		np.Provider.Azure = &config.AzureProvider{Model: model, ResourceName: deref(params.AzureResourceName), ResourceType: params.AzureResourceType, APIVersion: params.AzureAPIVersion, ProjectName: params.AzureProjectName}
	default:
		if kind.Custom != nil {
			cp := *kind.Custom
			if model != nil {
				cp.Model = model
			}
			np.Provider.Custom = &cp
			break
		}
		return nil, &notServedError{decode.FieldError{Path: path + ".provider", Msg: "this provider is not served in the llm section yet"}}
	}
	auth := pols.Auth
	if params.APIKey != nil {
		auth = &config.BackendAuth{Key: &config.BackendAuthKey{Value: *params.APIKey}}
	}
	ai := &config.AIPolicy{Defaults: pols.Defaults, Overrides: pols.Overrides, Transformations: pols.Transformation, FinalTransformations: mc.FinalTransformation, PromptCaching: pols.PromptCaching}
	if mc.Guardrails != nil {
		ai.PromptGuard = mc.Guardrails
	} else if l.Policies != nil && l.Policies.Guardrails != nil {
		ai.PromptGuard = l.Policies.Guardrails
	}
	np.Policies = &config.BackendPolicies{AI: ai, BackendAuth: auth}
	t := &llmTarget{name: "llm/" + name, metrics: c.gw.metrics.LLM(), catalog: c.catalog}
	settings := c.defaults
	p, err := c.llmProvider(path, np, nil, nil, settings, nil)
	if err != nil {
		return nil, err
	}
	if baseTLS != nil {
		// baseUrl names an HTTPS host of its own: the provider's requests go
		// there, verified against the system roots.
		settings.TLS = *baseTLS
		p.up = c.gw.pools.Get(baseAddr, settings)
		c.used[p.up] = true
		p.host = []byte(strings.TrimSuffix(baseAddr, ":443"))
	}
	t.set = balance.New([][]*llmProvider{{p}}, [][]string{{name}}, balance.Options{})
	c.llm = append(c.llm, t)
	return t, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// mergeModelPolicies lays a model's settings over its provider's defaults:
// the model's win, body field maps are merged.
func mergeModelPolicies(base, over config.LLMModelPolicies) config.LLMModelPolicies {
	m := base
	m.Defaults = mergeFields(base.Defaults, over.Defaults)
	m.Overrides = mergeFields(base.Overrides, over.Overrides)
	if len(over.Transformation) > 0 {
		t := map[string]config.CELExpression{}
		for k, v := range base.Transformation {
			t[k] = v
		}
		for k, v := range over.Transformation {
			t[k] = v
		}
		m.Transformation = t
	}
	if over.Auth != nil {
		m.Auth = over.Auth
	}
	if over.RequestHeaders != nil {
		m.RequestHeaders = over.RequestHeaders
	}
	if over.ResponseHeaders != nil {
		m.ResponseHeaders = over.ResponseHeaders
	}
	if over.PromptCaching != nil {
		m.PromptCaching = over.PromptCaching
	}
	return m
}

func mergeFields(base, over map[string]any) map[string]any {
	if len(over) == 0 {
		return base
	}
	if len(base) == 0 {
		return over
	}
	m := map[string]any{}
	for k, v := range base {
		m[k] = v
	}
	for k, v := range over {
		m[k] = v
	}
	return m
}
