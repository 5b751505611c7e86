package server

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/aipolicy"
	"github.com/relaygate/gateway/backend/llm/balance"
	"github.com/relaygate/gateway/backend/llm/cost"
	"github.com/relaygate/gateway/backend/llm/promptcache"
	"github.com/relaygate/gateway/backend/llm/provider"
	"github.com/relaygate/gateway/codec/llm/tokens"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy/credential"
	"github.com/relaygate/gateway/policy/ratelimit"
	"github.com/relaygate/gateway/pool"
)

// llmRoute maps a request path suffix to the kind of LLM request it
// carries (policies.ai.routes).
type llmRoute struct {
	suffix string
	rt     provider.RouteType
}

// compileLLMRoutes orders the routes as agentgateway reads them: longest
// suffix first, "*" as the fallback; without routes every path is a chat
// completion.
func compileLLMRoutes(path string, routes map[string]config.LLMRouteType) ([]llmRoute, provider.RouteType, error) {
	fallback := provider.Completions
	var out []llmRoute
	keys := make([]string, 0, len(routes))
	for k := range routes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(routes) > 0 {
		fallback = 0 // a path no route names is refused
	}
	for _, k := range keys {
		rt, ok := provider.ParseRouteType(routes[k])
		if routes[k] == "realtime" {
			rt, ok = rtRealtime, true
		}
		if !ok {
			// A route type not served yet: config.File.NotServedYet names
			// it, so Apply refuses the file.
			continue
		}
		if k == "*" {
			fallback = rt
			continue
		}
		out = append(out, llmRoute{suffix: k, rt: rt})
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].suffix) > len(out[j].suffix) })
	return out, fallback, nil
}

// aiBackend compiles an ai backend. base are the backend policies that
// apply to every provider (the named backend's merged with the route
// backend's); routeAI and routeAuth are the route's ai policy and backend
// auth, which the backend's and each provider's override field by field.
func (c *compiler) aiBackend(path, routeName string, cfg *config.AIBackend, base *config.BackendPolicies, routeAI *config.AIPolicy, routeAIPath string, routeAuth *config.BackendAuth, settings backend.PoolSettings) (*llmTarget, error) {
	t := &llmTarget{name: routeName, metrics: c.gw.metrics.LLM()}
	if !c.catalogOK {
		// config.modelCatalog: loaded once per snapshot, by the first ai
		// backend (a file without one loads nothing).
		c.catalogOK = true
		if cfg := c.file.Config; cfg != nil && len(cfg.ModelCatalog) > 0 {
			cat, err := cost.Load(cfg.ModelCatalog, "")
			if err != nil {
				return nil, &decode.FieldError{Path: "config.modelCatalog", Msg: err.Error()}
			}
			c.catalog = cat
		}
	}
	t.catalog = c.catalog
	c.llm = append(c.llm, t)
	var backendAI *config.AIPolicy
	auth := routeAuth
	if base != nil {
		backendAI = base.AI
		if base.BackendAuth != nil {
			auth = base.BackendAuth
		}
	}
	if routeAI != nil {
		c.warnIgnoredGuardFields(routeAIPath+".promptGuard", routeAI.PromptGuard)
	}
	if backendAI != nil {
		c.warnIgnoredGuardFields(path+".policies.ai.promptGuard", backendAI.PromptGuard)
	}
	shared := config.MergeAIPolicy(routeAI, backendAI)
	var routes map[string]config.LLMRouteType
	if shared != nil {
		routes = shared.Routes
	}
	var err error
	if t.routes, t.fallback, err = compileLLMRoutes(path+".policies.ai", routes); err != nil {
		return nil, err
	}

	type named struct {
		path string
		cfg  *config.NamedAIProvider
	}
	var groups [][]named
	if cfg.Provider != nil {
		groups = [][]named{{{path + ".ai", cfg.Provider}}}
	} else {
		for gi := range cfg.Groups {
			var g []named
			for pi := range cfg.Groups[gi].Providers {
				g = append(g, named{fmt.Sprintf("%s.ai.groups[%d].providers[%d]", path, gi, pi), &cfg.Groups[gi].Providers[pi]})
			}
			groups = append(groups, g)
		}
	}
	// mergeAIPolicy gives the shared policy itself to providers without one
	// of their own: they share its compiled form.
	policies := map[*config.AIPolicy]*aipolicy.Policy{}
	members := make([][]*llmProvider, len(groups))
	names := make([][]string, len(groups))
	for gi, g := range groups {
		for _, n := range g {
			if pp := n.cfg.Policies; pp != nil && pp.AI != nil {
				c.warnIgnoredGuardFields(n.path+".policies.ai.promptGuard", pp.AI.PromptGuard)
			}
			p, err := c.llmProvider(n.path, n.cfg, shared, auth, settings, policies)
			if err != nil {
				return nil, err
			}
			members[gi] = append(members[gi], p)
			names[gi] = append(names[gi], n.cfg.Name)
		}
	}
	// Health survives a reload that keeps the backend as it was. The
	// providers' TLS holds what Cfg does not: the digest of the files of
	// their own backendTLS.
	providerTLS := make([][]backend.UpstreamTLS, len(members))
	for gi, g := range members {
		for _, p := range g {
			providerTLS[gi] = append(providerTLS[gi], p.upTLS)
		}
	}
	// The key holds everything the providers were compiled from, secrets
	// included (config.Fingerprint: their pools are keyed by the same
	// settings), so a kept set's members are equal to the new ones.
	spec := config.Fingerprint(struct {
		Route       string
		Cfg         *config.AIBackend
		Shared      *config.AIPolicy
		Auth        *config.BackendAuth
		Settings    backend.PoolSettings
		ProviderTLS [][]backend.UpstreamTLS
	}{routeName, cfg, shared, auth, settings, providerTLS})
	t.set, _ = pool.LoadOrNew(c.lease, "llm\x00"+spec, func() (*balance.Set[*llmProvider], error) {
		return balance.New(members, names, balance.Options{}), nil
	})
	return t, nil
}

// warnIgnoredGuardFields says, at every load, which fields of pg (at
// field) do nothing: a regex response guard's action: reject and
// rejection (aipolicy.IgnoredFields). agentgateway honors them, so a file
// written for it is not refused, but its user learns that answers are
// masked here, not refused.
func (c *compiler) warnIgnoredGuardFields(field string, pg *config.PromptGuard) {
	for _, f := range aipolicy.IgnoredFields(pg) {
		c.gw.log.Warn("a regex response guard masks what it matches and never rejects the answer: this field does nothing (agentgateway rejects the answer instead)",
			zap.String("field", field+"."+f))
	}
}

// llmProvider compiles one provider of an ai backend. Providers given the
// same merged policy (policies, by config; nil: none shared) share its
// compiled form, so that llmAttempts runs it once per client request.
func (c *compiler) llmProvider(path string, np *config.NamedAIProvider, shared *config.AIPolicy, auth *config.BackendAuth, settings backend.PoolSettings, policies map[*config.AIPolicy]*aipolicy.Policy) (*llmProvider, error) {
	var own *config.AIPolicy
	if pp := np.Policies; pp != nil {
		own = pp.AI
		if pp.BackendAuth != nil {
			auth = pp.BackendAuth
		}
		if pp.TCP != nil {
			settings.Dialing = backendTCPDialing(pp.TCP, settings.Dialing)
		}
		if pp.BackendTLS != nil {
			// The provider's own replaces the backend's whole.
			t, err := compileBackendTLS(pp.BackendTLS)
			if err == nil {
				err = checkHTTPALPN(pp.BackendTLS.ALPN, false, versionAuto)
			}
			if err != nil {
				return nil, kindError(path+".policies.backendTLS", err)
			}
			settings.TLS = t
		}
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"requestHeaderModifier", pp.RequestHeaderModifier != nil},
			{"responseHeaderModifier", pp.ResponseHeaderModifier != nil},
			{"requestRedirect", pp.RequestRedirect != nil},
			{"http", pp.HTTP != nil},
		} {
			if f.set {
				return nil, &decode.FieldError{Path: path + ".policies." + f.name, Msg: "not applied per provider yet: set it on the backend"}
			}
		}
	}
	p, err := provider.New(np, auth)
	if err != nil {
		return nil, prefixFieldError(path, err)
	}
	out := &llmProvider{p: p, tokenize: np.Tokenize}
	if np.Tokenize {
		// The vocabularies load once, in the background, so the first
		// request that counts does not pay for it.
		go tokens.Preload()
	}
	if auth != nil && auth.Passthrough != nil {
		loc, err := credential.NewLocation(auth.Passthrough.Location)
		if err != nil {
			return nil, decode.Under(path+".policies.backendAuth.passthrough.location", err)
		}
		out.passthrough, out.passthroughAt = true, loc
	}
	if merged := config.MergeAIPolicy(shared, own); merged != nil {
		pol := policies[merged]
		if pol == nil {
			var err error
			if pol, err = aipolicy.NewWithOptions(merged, c.guardrailOptions()); err != nil {
				return nil, prefixFieldError(path+".policies.ai", err)
			}
			if policies != nil {
				policies[merged] = pol
			}
		}
		out.policy = pol
		out.mask = pol.ResponseGuard()
		if merged.PromptCaching != nil {
			out.cache = promptcache.New(merged.PromptCaching)
		}
	}
	addr, tls := p.Upstream()
	if settings.TLS.Enabled {
		// backendTLS (settings.TLS: the provider's, else its backend's or
		// route's) replaces the provider's TLS, to its address (a
		// hostOverride's too); the provider's host stays the default
		// server name.
		if settings.TLS.ServerName == "" {
			settings.TLS.ServerName = tls.ServerName
		}
	} else {
		settings.TLS = tls
	}
	out.up, out.upTLS = c.upstream(addr, settings), settings.TLS
	out.host = []byte(addr)
	if settings.TLS.Enabled {
		out.host = []byte(strings.TrimSuffix(addr, ":443"))
	}
	return out, nil
}

// prefixFieldError puts a compile error of a package (whose paths are
// relative) under path.
func prefixFieldError(path string, err error) error {
	return decode.Under(path, err)
}

// rateLimiter compiles a route's localRateLimit; routeID is the route's
// identity (routeIdentity), so that every route has buckets of its own,
// whatever its name. Its buckets are kept across reloads that leave the
// route and its limits as they were.
func (c *compiler) rateLimiter(routeID string, cfg *config.LocalRateLimit) (*ratelimit.Limiter, error) {
	spec := config.Fingerprint(struct {
		Route string
		Cfg   *config.LocalRateLimit
	}{routeID, cfg})
	return pool.LoadOrNew(c.lease, "ratelimit\x00"+spec, func() (*ratelimit.Limiter, error) {
		return ratelimit.New(cfg, nil)
	})
}

// LLMProviders reports the health of every LLM provider of the running
// config, by ai backend (route), as JSON: the admin page's
// /llm/providers.
func (g *Gateway) LLMProviders() ([]byte, error) {
	type backendHealth struct {
		Route     string           `json:"route"`
		Providers []balance.Health `json:"providers"`
	}
	out := []backendHealth{}
	if s := g.snap.Load(); s != nil {
		for _, t := range s.llm {
			out = append(out, backendHealth{Route: t.name, Providers: t.set.Health()})
		}
	}
	return json.MarshalIndent(out, "", "  ")
}
