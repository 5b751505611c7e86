package server

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/apikey"
	"github.com/relaygate/gateway/policy/basicauth"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/policy/extauthz"
	"github.com/relaygate/gateway/policy/extproc"
	"github.com/relaygate/gateway/policy/fault"
	"github.com/relaygate/gateway/policy/jwtauth"
	"github.com/relaygate/gateway/policy/remoteratelimit"
	"github.com/relaygate/gateway/policy/transform"
	"go.uber.org/zap"
)

// routeKind is one policy kind as a route compiles it from its merged
// PolicySet (listener < route): its name is its field name under policies,
// build turns its merged config into the route's chain or settings. A kind
// set on a route that no routeKind names is a config error, so a route
// never accepts a policy it does not apply.
type routeKind struct {
	name string
	// build compiles v, the kind's merged config. A nil build marks a kind
	// that the route's backends apply (ai), not the route itself.
	build func(c *compiler, rc *routeCompile, v any) error
}

// routeCompile is what a route's kinds compile into.
type routeCompile struct {
	route *route
	// id is the route's identity among the snapshot's (routeIdentity),
	// the key of the state kept per route.
	id    string
	set   *config.PolicySet
	chain *policy.ChainBuilder
	// prefixAt are the fields (`<kind>.path.prefix`) of the route's
	// urlRewrite and requestRedirect that replace the matched path prefix
	// and were written for the route (checkPrefixMatches).
	prefixAt []string
}

// replacesPrefix notes that kind, with path as its path rewrite, replaces
// the matched path prefix, when it does.
func (rc *routeCompile) replacesPrefix(kind string, path *config.PathRewrite) {
	if path == nil || path.Prefix == nil {
		return
	}
	rc.route.needsPrefix = true
	if o := rc.set.Origins(kind); len(o) > 0 && o[len(o)-1].Level >= config.LevelRoute {
		rc.prefixAt = append(rc.prefixAt, rc.set.Path(kind)+".path.prefix")
	}
}

// routeKinds are the kinds a route compiles, in the order they are
// compiled (the chain's order is policy.Order, whatever this order).
var routeKinds = []routeKind{
	{"cors", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.CORS)
		if cfg.AllowCredentials && slices.Contains(cfg.AllowOrigins, "*") {
			// As agentgateway and Envoy do, the origin is reflected, which
			// browsers take: said at every load, as it is rarely meant.
			c.gw.log.Warn("cors: allowOrigins \"*\" with allowCredentials lets every site make credentialed requests; list the origins instead",
				zap.String("field", rc.set.Path("cors")))
		}
		return chainKind(policy.KindCORS, policy.NewCORS)(c, rc, v)
	}},
	{"jwtAuth", func(c *compiler, rc *routeCompile, v any) error {
		p, err := jwtauth.New(v.(*config.JWTAuth), jwtauth.Options{Logger: c.gw.log, Lease: c.lease})
		if err == nil {
			rc.chain.Add(policy.KindJWTAuth, p)
		}
		return err
	}},
	{"mcpAuthentication", func(c *compiler, rc *routeCompile, v any) error {
		if rc.set.Has("jwtAuth") {
			return errors.New("cannot be combined with jwtAuth on one route (jwtAuth validates and removes the token first)")
		}
		p, err := jwtauth.NewMCP(v.(*config.MCPAuthentication), jwtauth.Options{Logger: c.gw.log, Lease: c.lease})
		if err == nil {
			rc.chain.Add(policy.KindMCPAuthentication, p)
		}
		return err
	}},
	{"basicAuth", chainKind(policy.KindBasicAuth, basicauth.New)},
	{"apiKey", chainKind(policy.KindAPIKey, apikey.New)},
	{"extAuthz", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.ExtAuthz)
		one := func(cfg *config.ExtAuthz) (any, error) {
			addr, err := c.serviceAddr(cfg.Host, cfg.Backend)
			if err != nil {
				return nil, err
			}
			return extauthz.New(cfg, extauthz.Options{Addr: addr, Lease: c.lease, Logger: c.gw.log, MaxBuffer: c.frontend.maxBufferSize})
		}
		conds := make([]config.ValueCondition, len(cfg.Conditional))
		entries := make([]*config.ExtAuthz, len(cfg.Conditional))
		for i := range cfg.Conditional {
			conds[i], entries[i] = cfg.Conditional[i].Condition, &cfg.Conditional[i].ExtAuthz
		}
		return addKind(rc, policy.KindExtAuthz, cfg, conds, entries, one)
	}},
	{"extProc", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.ExtProc)
		one := func(cfg *config.ExtProc) (any, error) {
			addr, err := c.serviceAddr(cfg.Host, cfg.Backend)
			if err != nil {
				return nil, err
			}
			return extproc.New(cfg, extproc.Options{Addr: addr, Lease: c.lease, Logger: c.gw.log, MaxBuffer: c.frontend.maxBufferSize, RawPaths: rawPaths(c.file)})
		}
		conds := make([]config.ValueCondition, len(cfg.Conditional))
		entries := make([]*config.ExtProc, len(cfg.Conditional))
		for i := range cfg.Conditional {
			conds[i], entries[i] = cfg.Conditional[i].Condition, &cfg.Conditional[i].ExtProc
		}
		return addKind(rc, policy.KindExtProc, cfg, conds, entries, one)
	}},
	{"authorization", func(c *compiler, rc *routeCompile, v any) error {
		warnDenyRules(c.gw.log, rc.set.Path("authorization"), v.(*config.CELRuleSet))
		rules, err := celrules.Compile(v.(*config.CELRuleSet))
		if err == nil {
			rc.chain.Add(policy.KindAuthorization, celrules.HTTP{Rules: rules, MaxBuffer: c.frontend.maxBufferSize})
		}
		return err
	}},
	{"csrf", chainKind(policy.KindCSRF, policy.NewCSRF)},
	{"transformations", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.Transformations)
		one := func(cfg *config.Transformations) (any, error) {
			return transform.NewWith(cfg, transform.Options{MaxBuffer: c.frontend.maxBufferSize, Logger: c.gw.log, RawPaths: rawPaths(c.file)})
		}
		conds := make([]config.ValueCondition, len(cfg.Conditional))
		entries := make([]*config.Transformations, len(cfg.Conditional))
		for i := range cfg.Conditional {
			conds[i], entries[i] = cfg.Conditional[i].Condition, &cfg.Conditional[i].Transformations
		}
		return addKind(rc, policy.KindTransformations, cfg, conds, entries, one)
	}},
	{"directResponse", chainKind(policy.KindDirectResponse, fault.NewDirectResponse)},
	{"delay", chainKind(policy.KindDelay, fault.NewDelay)},
	{"requestRedirect", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.RequestRedirect)
		p, err := policy.NewRedirect(cfg)
		if err == nil {
			rc.chain.Add(policy.KindRedirect, p)
			rc.replacesPrefix("requestRedirect", cfg.Path)
		}
		return err
	}},
	{"urlRewrite", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.URLRewrite)
		p, err := policy.NewURLRewrite(cfg)
		if err == nil {
			rc.chain.Add(policy.KindURLRewrite, p)
			rc.replacesPrefix("urlRewrite", cfg.Path)
		}
		return err
	}},
	{"requestHeaderModifier", func(c *compiler, rc *routeCompile, v any) error {
		p, err := policy.NewHeaderModifier(v.(*config.HeaderModifier))
		if err == nil {
			rc.chain.Add(policy.KindRequestHeaders, policy.RequestHeaders{HeaderModifier: p})
		}
		return err
	}},
	{"responseHeaderModifier", func(c *compiler, rc *routeCompile, v any) error {
		p, err := policy.NewHeaderModifier(v.(*config.HeaderModifier))
		if err == nil {
			rc.chain.Add(policy.KindResponseHeaders, policy.ResponseHeaders{HeaderModifier: p})
		}
		return err
	}},
	{"remoteRateLimit", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.RemoteRateLimit)
		one := func(cfg *config.RemoteRateLimit) (any, error) {
			addr, err := c.serviceAddr(cfg.Host, cfg.Backend)
			if err != nil {
				return nil, err
			}
			return remoteratelimit.New(cfg, remoteratelimit.Options{Addr: addr, Lease: c.lease, Logger: c.gw.log})
		}
		conds := make([]config.ValueCondition, len(cfg.Conditional))
		entries := make([]*config.RemoteRateLimit, len(cfg.Conditional))
		for i := range cfg.Conditional {
			conds[i], entries[i] = cfg.Conditional[i].Condition, &cfg.Conditional[i].RemoteRateLimit
		}
		return addKind(rc, policy.KindRemoteRateLimit, cfg, conds, entries, one)
	}},
	{"mcpAuthorization", func(c *compiler, rc *routeCompile, v any) error {
		warnDenyRules(c.gw.log, rc.set.Path("mcpAuthorization"), v.(*config.CELRuleSet))
		rules, err := celrules.Compile(v.(*config.CELRuleSet))
		rc.route.mcpAuthz = rules
		return err
	}},
	{"backendAuth", func(c *compiler, rc *routeCompile, v any) error {
		// For the route's host, dynamic and MCP backends; ai backends read
		// the config (aiBackend).
		a, err := compileBackendAuth(rc.set.Path("backendAuth"), v.(*config.BackendAuth))
		rc.route.auth = a
		if err != nil {
			return pathedError{err}
		}
		return nil
	}},
	{"timeout", func(c *compiler, rc *routeCompile, v any) error {
		t := v.(*config.Timeout)
		if t.RequestTimeout != nil {
			rc.route.timeout = t.RequestTimeout.Duration
		}
		if t.BackendRequestTimeout != nil {
			rc.route.backendTimeout = t.BackendRequestTimeout.Duration
		}
		return nil
	}},
	{"retry", func(c *compiler, rc *routeCompile, v any) error {
		cfg := v.(*config.Retry)
		// attempts counts the retries, as agentgateway's proxy does
		// (attempts + 1 tries; its tests assert it), though its schema
		// calls it the total: its files' `retry: {codes: [503]}` (attempts
		// 1 by default) retries once, which read as a total it never did.
		rp := &retryPolicy{attempts: 2}
		if cfg.Attempts != nil {
			rp.attempts = *cfg.Attempts + 1
		}
		if cfg.Backoff != nil {
			rp.backoff = cfg.Backoff.Duration
		}
		for _, code := range cfg.Codes {
			rp.codes[code] = true
		}
		var err error
		if cfg.Precondition != nil {
			if rp.precondition, err = config.CompileValueExpression(string(*cfg.Precondition), true); err != nil {
				return &policy.FieldError{Field: "precondition", Msg: err.Error()}
			}
		}
		if cfg.Condition != nil {
			if rp.condition, err = config.CompileValueExpression(string(*cfg.Condition), true); err != nil {
				return &policy.FieldError{Field: "condition", Msg: err.Error()}
			}
		}
		rc.route.retry = rp
		return nil
	}},
	{"localRateLimit", func(c *compiler, rc *routeCompile, v any) error {
		l, err := c.rateLimiter(rc.id, v.(*config.LocalRateLimit))
		rc.route.limiter = l
		return err
	}},
	{"requestMirror", func(c *compiler, rc *routeCompile, v any) error {
		m, err := c.mirror(rc.set.Path("requestMirror"), v.(*config.RequestMirror))
		if err != nil {
			return pathedError{err}
		}
		rc.route.mirror = m
		return nil
	}},
	{"ai", nil},
	{"backendTLS", nil},
}

// serviceAddr is the address of a policy's external service: host, or
// the named host backend.
func (c *compiler) serviceAddr(host, backend string) (string, error) {
	if backend == "" {
		return host, nil
	}
	nb := c.named[backend]
	if nb == nil || nb.Kind != config.BackendHost {
		return "", &policy.FieldError{Field: "backend", Msg: fmt.Sprintf("no host backend named %q in the top-level backends", backend)}
	}
	if nb.Policies != nil && nb.Policies.BackendTLS != nil {
		// Its connection would go without the TLS the backend asks for.
		return "", &policy.FieldError{Field: "backend", Msg: fmt.Sprintf("backend %q has backendTLS, which this policy's connection does not apply yet", backend)}
	}
	return nb.Host, nil
}

// addKind compiles a kind that has a conditional form into the chain: cfg
// itself when entries is empty, else each entry (with one) behind its
// condition (celrules.Conditional). Errors about an entry name it.
func addKind[C any](rc *routeCompile, k policy.Kind, cfg *C, conds []config.ValueCondition, entries []*C, one func(*C) (any, error)) error {
	if len(entries) == 0 {
		p, err := one(cfg)
		if err == nil {
			rc.chain.Add(k, p)
		}
		return err
	}
	compiled := make([]any, len(entries))
	for i, e := range entries {
		p, err := one(e)
		if err != nil {
			return policy.PrefixField("conditional["+strconv.Itoa(i)+"]", err)
		}
		compiled[i] = p
	}
	cp, err := celrules.NewConditional(conds, compiled)
	if err == nil {
		rc.chain.Add(k, cp)
	}
	return err
}

// chainKind is the build of a kind that is one chain policy made by its
// constructor.
func chainKind[C any, P any](k policy.Kind, newPolicy func(*C) (P, error)) func(*compiler, *routeCompile, any) error {
	return func(_ *compiler, rc *routeCompile, v any) error {
		p, err := newPolicy(v.(*C))
		if err == nil {
			rc.chain.Add(k, p)
		}
		return err
	}
}

// pathedError is an error whose message already names its field path.
type pathedError struct{ error }

func (e pathedError) Unwrap() error { return e.error }

// compileRouteKinds compiles every kind of set into rc, in routeKinds
// order, and returns the errors, each naming the field of the level that
// set the kind.
func (c *compiler) compileRouteKinds(rc *routeCompile) config.Errors {
	var errs config.Errors
	known := map[string]bool{}
	for _, k := range routeKinds {
		known[k.name] = true
		v := rc.set.Get(k.name)
		if v == nil || k.build == nil {
			continue
		}
		if err := k.build(c, rc, v); err != nil {
			errs = append(errs, kindError(rc.set.Path(k.name), err))
		}
	}
	for _, k := range rc.set.Kinds() {
		if !known[k] {
			errs = append(errs, &decode.FieldError{Path: rc.set.Path(k), Msg: "not applied at this level: remove it"})
		}
	}
	return errs
}

// kindError names the exact field of a kind's error: path is the kind's
// field path, and a *policy.FieldError or a *decode.FieldError names the
// field below it (decode.Under).
func kindError(path string, err error) error {
	var pe pathedError
	if errors.As(err, &pe) {
		return pe.error
	}
	return decode.Under(path, err)
}

// warnDenyRules says, at every load, that each deny rule of set (at field)
// fails open: an expression that fails to evaluate (a missing header or
// claim, a type error) counts as false, as agentgateway has it, so a
// client who can make it fail gets past the rule. A rule the warning's
// advice already guards is not warned about (guardedRule).
func warnDenyRules(log *zap.Logger, field string, set *config.CELRuleSet) {
	if set == nil {
		return
	}
	for i, r := range set.Rules {
		if r.Kind == config.RuleDeny && !guardedRule(r.Expr) {
			log.Warn("a deny rule whose expression fails to evaluate (a missing header or claim, a type error) does not deny; prefer allow or require rules, or guard the expression (has(...))",
				zap.String("field", field+".rules["+strconv.Itoa(i)+"]"))
		}
	}
}

// parseEnv parses rules for guardedRule (parsing needs no declarations).
var parseEnv = sync.OnceValues(func() (*cel.Env, error) { return cel.NewEnv() })

// guardedRule reports whether the expression expr is guarded as
// warnDenyRules advises: a conjunction (&&) of which one operand tests the
// presence of what the rule reads, has(x.y) or "k" in x (x not a list
// literal). Not a proof that nothing else can fail (a type error), but the
// advice followed. (CEL's && is false
// when any operand is, whatever the others' errors.)
func guardedRule(expr string) bool {
	env, err := parseEnv()
	if err != nil {
		return false
	}
	a, iss := env.Parse(expr)
	if iss.Err() != nil {
		return false
	}
	var guarded func(e celast.Expr) bool
	guarded = func(e celast.Expr) bool {
		switch e.Kind() {
		case celast.SelectKind:
			return e.AsSelect().IsTestOnly()
		case celast.CallKind:
			call := e.AsCall()
			switch call.FunctionName() {
			case operators.In:
				// A key's presence in a map; a list literal's
				// membership guards nothing.
				return call.Args()[1].Kind() != celast.ListKind
			case operators.LogicalAnd:
				return slices.ContainsFunc(call.Args(), guarded)
			}
		}
		return false
	}
	return guarded(a.NativeRep().Expr())
}
