package server

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/balance"
	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/pool"
	"github.com/relaygate/gateway/server/router"
)

// This file serves the top-level llm section (agentgateway's LocalLLMConfig):
// an OpenAI-style API on a port of its own whose request bodies name a
// model; the model, or a virtual model, picks the provider that serves it.

// llmModels is the llm section's target.
type llmModels struct {
	routes   []llmRoute
	fallback provider.RouteType
	models   []*llmModelEntry // most specific name first, what virtual models resolve against at load
	// exact indexes the models of plain names (the first of models), by
	// name; patterns are the others, most specific first.
	exact    map[string][]*llmModelEntry
	patterns []*llmModelEntry
	virtual  map[string]*llmVirtual
	list     []byte          // the answer to GET /v1/models, when it is the same for every request
	listed   []llmListedName // what the list is made of, when model authorization filters it
	// byProvider finds the model whose provider answered a failover virtual
	// model, for its responseHeaders.
	byProvider map[*llmProvider]*llmModelEntry
}

// llmModelEntry is a model of llm.models: the names it serves, the
// requests it takes (header matches, authorization) and the ai backend (one
// provider) that serves them.
type llmModelEntry struct {
	pattern string
	public  bool
	matches *router.Table     // the header matches; nil: every request
	authz   *celrules.RuleSet // nil: every request
	// fallback is the route type of paths the section names no route type
	// for: passthrough's (agentgateway's llm_route_types replaces only the
	// "*" entry; named routes are translated as usual).
	fallback provider.RouteType
	target   *llmTarget
	// backend is the section's backend.
	backend *routeBackend
	// requestHeaders go to the model's provider (llmProvider), which
	// applies them on each attempt.
	requestHeaders  *policy.HeaderModifier
	responseHeaders *policy.HeaderModifier
}

// llmVirtual is a virtual model: one of several models per request.
type llmVirtual struct {
	name string
	// weighted: model names, drawn by weight; resolved per request like a
	// client's model name (header matches and authorization apply).
	weighted   []string
	cumulative []int
	total      int
	// failover: the targets' providers in priority groups, with the
	// requestHeaders they share.
	failover        *llmTarget
	failoverBackend *routeBackend
	conditional     []llmCondition
}

// llmCondition is a conditional target: the model taken when prog (nil for
// the fallback) holds for the request.
type llmCondition struct {
	prog  cel.Program
	model string
}

func (m *llmModels) honors(string) bool { return true }

// routeType resolves the kind of request a path carries: the section's
// routes, else its fallback (serveLLMModels).
func (m *llmModels) routeType(path []byte) provider.RouteType {
	return llmRouteType(m.routes, m.fallback, path)
}

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

// serveLLMModels answers a request to the llm section: the model its body
// names picks the backend, whose attempt loop serves it.
func (b *bind) serveLLMModels(rs *requestState, r *route, rb *routeBackend, m *llmModels) int {
	fctx := rs.pc.Fast
	rt := llmRouteType(m.routes, 0, rs.pc.Path)
	named := rt != 0
	if !named {
		rt = m.fallback
	}
	if rt == provider.Models && fctx.Request.Header.IsGet() {
		return m.answerList(&rs.pc)
	}
	x, status, ok := b.llmBegin(rs, rt)
	if !ok {
		return status
	}
	name := aipolicy.Model(x.client)
	if name == "" {
		if !llm.Valid(x.client) {
			return x.routerError(fasthttp.StatusBadRequest, "LLM request body must be valid JSON", "invalid_request_body")
		}
		return x.routerError(fasthttp.StatusBadRequest, "LLM request body is missing string field 'model'", "missing_model")
	}
	sel := m.pick(name, &rs.pc, x.client)
	if sel.failure != pickedOK {
		return sel.answerFailure(x)
	}
	backend := rb
	if sel.backend != nil {
		backend = sel.backend
	}
	if !named && sel.model != nil {
		x.rt = sel.model.fallback
	}
	if sel.chose != "" && sel.chose != name {
		// As agentgateway does, the request goes on naming the model the
		// virtual model chose (its transformations and aliases read it).
		x.retargetClient(sel.chose)
	}
	status = b.llmAttempts(rs, r, backend, sel.target, x)
	if h := m.responseHeaders(&sel, x); h != nil {
		// Every answer once a model is chosen, the gateway's own errors
		// too, as agentgateway applies a backend's response header modifier.
		h.ApplyResponse(&fctx.Response.Header)
	}
	return status
}

// llmBind compiles the llm section into a bind of its own: one route
// matching every path, with llm.policies, whose backend is the models.
func (c *compiler) llmBind(l *config.LLMConfig) (*bindConfig, error) {
	port := l.PortOrDefault()
	listener := &config.Listener{Name: "llm"}
	// llm.policies are route policies of the section's one route
	// (guardrails aside: the models read them). TestLLMPoliciesServed holds
	// every field to config.LLMPolicies.RoutePolicies.
	rp := l.Policies.RoutePolicies()
	set := &config.PolicySet{}
	set.Attach(config.LevelRoute, "llm.policies", rp)
	// Its backend is the models (llmSection), as on a gateway listener.
	r := &config.Route{Name: config.LLMRouteName, Policies: rp, Backends: []config.RouteBackend{{Kind: config.BackendLLMModels, Weight: 1}}}
	cr, err := c.route("llm", routeIdentity(port, listener, config.LLMRouteName, "", 0), port, listener, 0, r, set)
	if err != nil {
		return nil, err
	}
	table, err := router.New([]router.Route{{Value: cr}})
	if err != nil {
		return nil, err
	}
	return &bindConfig{port: port, rawPaths: rawPaths(c.file), listeners: []*listenerConfig{{name: "llm", table: table}}}, nil
}

// llmSection is the llm section's backend, its models compiled once for
// the snapshot and shared by every route serving the section: the one of
// its own bind, or those Parse added to the gateway listeners it attaches
// to (config.BackendLLMModels). routeName names the routes in metrics.
func (c *compiler) llmSection(routeName string) (*routeBackend, error) {
	if c.section == nil {
		rb := &routeBackend{name: "llm", tlsLog: logline.Throttle{Every: tlsLogEvery}}
		rb.metrics = c.gw.metrics.Route(routeName, rb.name)
		rb.connectErrors = c.gw.metrics.Backend(rb.name)
		m, err := c.llmModels(c.file.LLM, rb)
		if err == nil {
			rb.target = m
			rb.cel = backendVariable(rb.name, m)
		}
		c.section = &llmSectionResult{rb, err}
	}
	if c.section.err != nil {
		return nil, c.section.err
	}
	return c.section.rb, nil
}

// llmSectionResult is the llm section's backend compiled, or why not.
type llmSectionResult struct {
	rb  *routeBackend
	err error
}

// llmModels compiles llm.models and llm.virtualModels; section is the
// section's backend, which models with requestHeaders copy.
func (c *compiler) llmModels(l *config.LLMConfig, section *routeBackend) (*llmModels, error) {
	out := &llmModels{virtual: map[string]*llmVirtual{}, byProvider: map[*llmProvider]*llmModelEntry{}}
	var err error
	if out.routes, out.fallback, err = compileLLMRoutes("llm", llmSectionRoutes); err != nil {
		return nil, err
	}
	providers := map[string]*config.LLMProvider{}
	for i := range l.Providers {
		providers[l.Providers[i].Name] = &l.Providers[i]
	}
	if l.Policies != nil {
		c.warnIgnoredGuardFields("llm.policies.guardrails", l.Policies.Guardrails)
	}
	inConfigOrder := make([]*llmModelEntry, 0, len(l.Models))
	for i := range l.Models {
		path := fmt.Sprintf("llm.models[%d]", i)
		mc := &l.Models[i]
		c.warnIgnoredGuardFields(path+".guardrails", mc.Guardrails)
		t, pols, err := c.llmModel(path, l, mc, providers)
		if err != nil {
			return nil, err
		}
		e, err := c.llmModelEntry(path, l, mc, pols, out.fallback, section)
		if err != nil {
			return nil, err
		}
		e.target = t
		// t's provider is new (a model's ai backend is compiled afresh).
		onlyProvider(t).requestHeaders = e.requestHeaders
		inConfigOrder = append(inConfigOrder, e)
		out.byProvider[onlyProvider(t)] = e
	}
	// The most specific name first: exact names, then longer patterns; two
	// entries of one name (told apart by header matches) in config order.
	out.models = slices.Clone(inConfigOrder)
	sort.SliceStable(out.models, func(i, j int) bool {
		a, b := out.models[i].pattern, out.models[j].pattern
		wa, wb := strings.Contains(a, "*"), strings.Contains(b, "*")
		if wa != wb {
			return !wa
		}
		return len(a) > len(b)
	})
	out.exact = map[string][]*llmModelEntry{}
	for _, e := range out.models {
		if strings.Contains(e.pattern, "*") {
			out.patterns = append(out.patterns, e)
		} else {
			out.exact[e.pattern] = append(out.exact[e.pattern], e)
		}
	}
	for i := range l.VirtualModels {
		vm := &l.VirtualModels[i]
		path := fmt.Sprintf("llm.virtualModels[%d].routing", i)
		v, err := c.llmVirtual(path, vm, out.models)
		if err != nil {
			return nil, err
		}
		out.virtual[vm.Name] = v
	}
	if err := out.compileList(inConfigOrder, l.VirtualModels); err != nil {
		return nil, err
	}
	return out, nil
}

// llmModelEntry compiles what a model adds to its ai backend: its header
// matches, authorization, passthrough and header modifiers (pols, merged
// over its provider's defaults).
func (c *compiler) llmModelEntry(path string, l *config.LLMConfig, mc *config.LLMModel, pols config.LLMModelPolicies, fallback provider.RouteType, section *routeBackend) (*llmModelEntry, error) {
	e := &llmModelEntry{pattern: mc.Name, public: mc.Visibility != "internal", fallback: fallback, backend: section}
	var err error
	if e.matches, err = compileModelMatches(path, mc.Matches); err != nil {
		return nil, err
	}
	warnDenyRules(c.gw.log, path+".authorization", mc.Authorization)
	if e.authz, err = celrules.Compile(mc.Authorization); err != nil {
		return nil, fieldError(path, "authorization", err)
	}
	switch mc.Passthrough {
	case "opaque":
		e.fallback = provider.Passthrough
	case "detect":
		// config.File.NotServedYet lists it too.
		return nil, &decode.FieldError{Path: path + ".passthrough", Msg: `passthrough "detect" is not implemented yet`}
	}
	if pols.RequestHeaders != nil {
		h, err := policy.NewHeaderModifier(pols.RequestHeaders)
		if err != nil {
			return nil, fieldError(modelSettingPath(l, mc, path, mc.RequestHeaders != nil), "requestHeaders", err)
		}
		// Applied by the model's provider after its credentials, as
		// agentgateway does (llmProvider.requestHeaders).
		e.requestHeaders = h
	}
	if pols.ResponseHeaders != nil {
		h, err := policy.NewHeaderModifier(pols.ResponseHeaders)
		if err != nil {
			return nil, fieldError(modelSettingPath(l, mc, path, mc.ResponseHeaders != nil), "responseHeaders", err)
		}
		e.responseHeaders = h
	}
	return e, nil
}

// modelSettingPath is where a model's setting comes from: the model (own),
// else its provider's defaults.
func modelSettingPath(l *config.LLMConfig, mc *config.LLMModel, path string, own bool) string {
	if !own {
		for i := range l.Providers {
			if l.Providers[i].Name == mc.Provider.Reference {
				return fmt.Sprintf("llm.providers[%d].defaults", i)
			}
		}
	}
	return path
}

// resolveModel finds the model a virtual model's target names at load, as
// agentgateway resolves failover targets: the first, most specific first,
// whose name matches (header matches and visibility aside).
func resolveModel(name string, models []*llmModelEntry) *llmModelEntry {
	for _, e := range models {
		if config.MatchModelName(e.pattern, name) {
			return e
		}
	}
	return nil
}

func (c *compiler) llmVirtual(path string, vm *config.LLMVirtualModel, models []*llmModelEntry) (*llmVirtual, error) {
	v := &llmVirtual{name: vm.Name}
	target := func(p, name string) (*llmModelEntry, error) {
		e := resolveModel(name, models)
		if e == nil {
			return nil, &decode.FieldError{Path: p, Msg: fmt.Sprintf("no model %q in llm.models", name)}
		}
		return e, nil
	}
	switch r := &vm.Routing; {
	case r.Weighted != nil:
		for i, wt := range r.Weighted.Targets {
			if _, err := target(fmt.Sprintf("%s.weighted.targets[%d].model", path, i), wt.Model); err != nil {
				return nil, err
			}
			if w := wt.WeightOrDefault(); w > 0 {
				v.total += w
				v.weighted = append(v.weighted, wt.Model)
				v.cumulative = append(v.cumulative, v.total)
			}
		}
		if v.total == 0 {
			return nil, &decode.FieldError{Path: path + ".weighted.targets", Msg: "every weight is 0: no target would ever be chosen"}
		}
	case r.Failover != nil:
		return v, c.llmFailover(path, vm, v, target)
	case r.Conditional != nil:
		for i, ct := range r.Conditional.Targets {
			if _, err := target(fmt.Sprintf("%s.conditional.targets[%d].model", path, i), ct.Model); err != nil {
				return nil, err
			}
			cond := llmCondition{model: ct.Model}
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

// llmFailover compiles a failover virtual model: the models' providers, in
// groups by priority (lower first), balanced by health like an ai
// backend's groups. Its requests get the requestHeaders its models share;
// each answer gets the responseHeaders of the model whose provider gave it.
func (c *compiler) llmFailover(path string, vm *config.LLMVirtualModel, v *llmVirtual, target func(p, name string) (*llmModelEntry, error)) error {
	byPriority := map[int][]*llmProvider{}
	names := map[int][]string{}
	var priorities []int
	var targetModel map[*llmProvider]string
	var targetAuthz map[*llmProvider]*celrules.RuleSet
	for i, ft := range vm.Routing.Failover.Targets {
		tpath := fmt.Sprintf("%s.failover.targets[%d].model", path, i)
		e, err := target(tpath, ft.Model)
		if err != nil {
			return err
		}
		// The model's authorization is checked per attempt (a provider
		// whose model refuses is skipped; agentgateway does not check it
		// on failover at all); its requestHeaders go with its provider.
		if i == 0 {
			v.failoverBackend = e.backend
		}
		p := *ft.Priority
		if _, ok := byPriority[p]; !ok {
			priorities = append(priorities, p)
		}
		it := e.target.set.Attempts(0)
		prov, member, _ := it.Next()
		if targetModel == nil {
			targetModel = map[*llmProvider]string{}
		}
		targetModel[prov] = ft.Model
		if e.authz != nil {
			if targetAuthz == nil {
				targetAuthz = map[*llmProvider]*celrules.RuleSet{}
			}
			targetAuthz[prov] = e.authz
		}
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
	t := &llmTarget{name: "llm/" + vm.Name, metrics: c.gw.metrics.LLM(), catalog: c.catalog, targetModel: targetModel, targetAuthz: targetAuthz}
	// The members are the models' providers, themselves the previous
	// snapshot's when their models are unchanged: the key names them by
	// identity, so the set (and its health) is kept exactly when every
	// member is.
	key := "llm-virtual\x00" + vm.Name + "\x00" + fmt.Sprint(groupNames)
	for _, g := range groups {
		for _, p := range g {
			key += fmt.Sprintf("\x00%p", p)
		}
	}
	t.set, _ = pool.LoadOrNew(c.lease, key, func() (*balance.Set[*llmProvider], error) {
		return balance.New(groups, groupNames, balance.Options{}), nil
	})
	c.llm = append(c.llm, t)
	v.failover = t
	return nil
}

// onlyProvider is the provider of a model's ai backend (it has one).
func onlyProvider(t *llmTarget) *llmProvider {
	it := t.set.Attempts(0)
	p, _, _ := it.Next()
	return p
}

// llmModel compiles a model of llm.models into an ai backend of one
// provider: its provider kind and params become a NamedAIProvider, its
// policy settings (merged over its llm.providers entry's defaults, and
// returned) and the section's guardrails an ai policy.
func (c *compiler) llmModel(path string, l *config.LLMConfig, mc *config.LLMModel, providers map[string]*config.LLMProvider) (*llmTarget, config.LLMModelPolicies, error) {
	kind, params, pols := mc.Provider, mc.Params, mc.LLMModelPolicies
	if ref := mc.Provider.Reference; ref != "" {
		pe := providers[ref]
		if pe == nil {
			return nil, pols, &decode.FieldError{Path: path + ".provider.reference", Msg: fmt.Sprintf("no provider %q in llm.providers", ref)}
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
	if kind.Preset != "" {
		// A preset is a custom provider at a known address (agentgateway's
		// apply_provider_defaults): its base URL unless the model gives an
		// address or a whole path of its own.
		custom, baseURL, ok := config.PresetProvider(kind.Preset)
		if !ok {
			return nil, pols, &decode.FieldError{Path: path + ".provider", Msg: fmt.Sprintf("unknown provider preset %q", kind.Preset)}
		}
		kind = config.LLMModelProvider{Custom: custom}
		if params.BaseURL == nil && params.HostOverride == nil && params.PathOverride == nil {
			withBase := *params
			withBase.BaseURL = &baseURL
			params = &withBase
		}
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
			return nil, pols, &decode.FieldError{Path: path + ".params.baseUrl", Msg: err.Error()}
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		baseAddr = u.Hostname() + ":" + port
		serverName := u.Hostname()
		if params.HostOverride != nil {
			// An explicit hostOverride wins over baseUrl's host (as in
			// agentgateway's apply_base_url); baseUrl's scheme still
			// says whether to speak TLS.
			baseAddr = *params.HostOverride
			serverName, _, _ = net.SplitHostPort(baseAddr)
		}
		if u.Scheme == "https" {
			baseTLS = &backend.UpstreamTLS{Enabled: true, ServerName: serverName}
			if kind.Custom != nil {
				// A custom provider has no host of its own to stand in
				// for until its upstream is replaced below.
				np.HostOverride = baseAddr
			}
		} else {
			np.HostOverride = baseAddr
		}
		// Likewise an explicit pathPrefix; a pathOverride replaces the
		// whole path.
		if p := strings.TrimSuffix(u.Path, "/"); p != "" && params.PathPrefix == nil && params.PathOverride == nil {
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
		return nil, pols, &decode.FieldError{Path: path + ".provider", Msg: "this provider is not served in the llm section yet"}
	}
	auth := pols.Auth
	if params.APIKey != nil {
		auth = &config.BackendAuth{Key: &config.BackendAuthKey{Value: *params.APIKey}}
	}
	ai := &config.AIPolicy{Defaults: pols.Defaults, Overrides: pols.Overrides, Transformations: pols.Transformation, FinalTransformations: mc.FinalTransformation, PromptCaching: pols.PromptCaching}
	var shared *config.PromptGuard
	if l.Policies != nil {
		shared = l.Policies.Guardrails
	}
	ai.PromptGuard = mergePromptGuards(shared, mc.Guardrails)
	np.Policies = &config.BackendPolicies{AI: ai, BackendAuth: auth}
	t := &llmTarget{name: "llm/" + name, metrics: c.gw.metrics.LLM(), catalog: c.catalog}
	settings := c.defaults
	p, err := c.llmProvider(path, np, nil, nil, settings, nil)
	if err != nil {
		return nil, pols, err
	}
	if baseTLS != nil {
		// baseUrl names an HTTPS host of its own: the provider's requests go
		// there, verified against the system roots.
		settings.TLS = *baseTLS
		p.up = c.upstream(baseAddr, settings)
		p.host = []byte(strings.TrimSuffix(baseAddr, ":443"))
	}
	t.set = balance.New([][]*llmProvider{{p}}, [][]string{{name}}, balance.Options{})
	c.llm = append(c.llm, t)
	return t, pols, nil
}

// mergePromptGuards adds a model's guardrails to the section's, as
// agentgateway's merge_prompt_guards does: the section's request and
// response guards run first, then the model's, so a model naming its own
// guards never drops the section's; the model's streaming: Enabled wins.
// Neither argument is changed (the section's guards are shared by every
// model).
func mergePromptGuards(shared, model *config.PromptGuard) *config.PromptGuard {
	if shared == nil {
		return model
	}
	if model == nil {
		return shared
	}
	m := &config.PromptGuard{Streaming: shared.Streaming}
	if model.Streaming == "Enabled" {
		m.Streaming = model.Streaming
	}
	m.Request = append(append(m.Request, shared.Request...), model.Request...)
	m.Response = append(append(m.Response, shared.Response...), model.Response...)
	return m
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
