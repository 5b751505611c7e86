package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/relaygate/gateway/backend"
	"github.com/relaygate/gateway/backend/llm/cost"
	"github.com/relaygate/gateway/backend/llm/provider"
	mcpgw "github.com/relaygate/gateway/backend/mcp"
	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/policy/extauthz"
	"github.com/relaygate/gateway/policy/ratelimit"
	"github.com/relaygate/gateway/pool"
	"github.com/relaygate/gateway/server/router"
	"github.com/relaygate/gateway/server/telemetry"
	"go.uber.org/zap"
)

// Snapshot is one compiled, immutable configuration. A request loads the
// current snapshot once and uses it to the end; a reload builds a new one
// beside it and swaps a pointer.
type Snapshot struct {
	file     *config.File
	binds    map[int]*bindConfig
	frontend frontendSettings
	// lease holds the runtime state the snapshot uses (connection pools, MCP
	// backends, provider health, rate limit buckets, key sets) in the
	// gateway's pool.Usage: state whose key is unchanged is the previous
	// snapshot's, and what no snapshot holds any more is closed when the
	// last one holding it is released.
	lease *pool.Lease
	llm   []*llmTarget // the ai backends, for LLMProviders
	mcp   []*mcpgw.Backend
}

// bindConfig is the compiled config of one port.
type bindConfig struct {
	port      int
	tracing   *tracing // config.tracing; nil: no spans
	frontend  frontendSettings
	listeners []*listenerConfig // most specific hostname first
	// rawPaths keeps request paths as received
	// (frontendPolicies.http.pathNormalization: raw); by default they are
	// normalized before routing (policy/pathnorm.go).
	rawPaths bool
	// gatewayReadsBody is set when a listener's gateway-phase policies
	// read the request body: a client waiting for 100 Continue gets it
	// before anything runs (expect).
	gatewayReadsBody bool
	// tlsListeners are the HTTPS and TLS listeners, chosen by SNI, most
	// specific hostname first; listeners are the plain HTTP ones, chosen
	// by Host. tcp is the port's TCP listener (alone on its port).
	tlsListeners []*listenerConfig
	tcp          *listenerConfig
	// handshakeTimeout bounds a TLS connection's ClientHello and handshake.
	handshakeTimeout time.Duration
	// keepalive is frontendPolicies.tcp's: TCP keepalive on client
	// connections (nil: the listener's defaults).
	keepalive *net.KeepAliveConfig
	// connect makes the bind a CONNECT proxy (tunnelProtocol: connect);
	// internal binds open no socket (mode: internal).
	connect, internal bool
	// netAuthz is frontendPolicies.networkAuthorization (nil: none);
	// netExtAuthz is networkExtAuthz, checked after it (nil: none).
	netAuthz    *celrules.RuleSet
	netExtAuthz *extauthz.ExtAuthz
	// proxy is the PROXY protocol header its connections begin with
	// (frontendPolicies.proxy, tunnelProtocol: proxy); nil: none.
	proxy *proxyPolicy
}

type listenerConfig struct {
	name     string
	hostname string
	// protocol is HTTP, HTTPS, TLS or TCP.
	protocol string
	// tls terminates the listener's connections (HTTPS, and TLS with a tls
	// block); nil for plain ones and TLS passthrough. tlsDigest sums up
	// what its handshakes decide by (serverTLS): a connection handshaken
	// under another is retired (retire.go).
	tls       *tls.Config
	tlsDigest string
	// tickets keeps tls on the session ticket keys of its digest and day
	// (tlstickets.go), so that a reload keeping its settings keeps
	// clients' sessions.
	tickets *sessionTickets
	// tcpRoutes are a TCP or TLS listener's routes, most specific first.
	tcpRoutes []*tcpRoute
	table     *router.Table
	// gateway is the chain of the listener's gateway-phase policies, run
	// before route selection; nil when it has none.
	gateway *policy.Chain
}

// route is one compiled route.
type route struct {
	name     string
	chain    policy.Chain
	backends []*routeBackend
	weights  []int // cumulative weights, for selection
	total    int
	// needsPrefix is set when a rewrite or redirect replaces the matched prefix.
	needsPrefix    bool
	prefixes       [][]byte      // the route's path prefixes without trailing "/", longest first
	timeout        time.Duration // whole request, retries included
	backendTimeout time.Duration // per attempt
	retry          *retryPolicy
	mirror         *mirror
	noBackend      *telemetry.RouteMetrics
	// auth is the route's backendAuth, for backends without their own
	// (routeBackend.auth).
	auth *backendAuth
	// mcpAuthz is mcpAuthorization: which MCP items the request may see.
	mcpAuthz *celrules.RuleSet
	// limiter is localRateLimit (nil: none), applied before the request
	// policy chain.Request[limitAt] (policy.Order's place: runChain).
	limiter *ratelimit.Limiter
	limitAt int
	// llmErrors is the first backend when every backend of the route is
	// an ai backend (nil else): the gateway's refusals made before one is
	// picked (localRateLimit) are written in the client's format for its
	// route type of the path.
	llmErrors llmRouteTyper
}

// llmRouteTyper is an ai backend: it tells the route type of a path.
type llmRouteTyper interface {
	routeType(path []byte) provider.RouteType
}

// routeBackend is one weighted backend of a route with its backend policies.
type routeBackend struct {
	name            string
	target          target // where requests go: HTTP upstream, MCP backend
	requestHeaders  *policy.HeaderModifier
	responseHeaders *policy.HeaderModifier
	redirect        *policy.Redirect
	// redirectPrefixAt is the field of the redirect's path prefix when the
	// redirect replaces the matched path prefix ("" when it does not).
	redirectPrefixAt string
	requestTimeout   time.Duration
	// version is the HTTP version spoken to the backend (versionAuto: as
	// the request has it, upstreamH2).
	version       int
	metrics       *telemetry.RouteMetrics
	connectErrors *telemetry.BackendMetrics
	// auth is the backend's backendAuth, else the route's (host, dynamic
	// and MCP backends; an ai backend's providers hold theirs).
	auth *backendAuth
	// cel is what CEL shows as `backend` once this backend is picked.
	cel map[string]any
	// tlsLog throttles the lines about failed TLS handshakes
	// (connectFailed).
	tlsLog logline.Throttle
}

type retryPolicy struct {
	attempts     int // the tries in all: the config's attempts + 1
	backoff      time.Duration
	codes        [1000]bool  // by status: fasthttp reads exactly three digits
	precondition cel.Program // nil: every request may be retried
	condition    cel.Program // nil: codes alone
}

// retries reports whether the request may take more than one attempt
// (its precondition holds; one that fails to evaluate does not).
func (rp *retryPolicy) retries(c *policy.Ctx) bool {
	if rp == nil || rp.attempts <= 1 {
		return false
	}
	if rp.precondition == nil {
		return true
	}
	in := celrules.LiveInput(c)
	v, err := celrules.EvalLLM(rp.precondition, &in, nil)
	return err == nil && v == types.True
}

// retryStatus reports whether an answer is one to retry: its status is in
// codes, or the condition holds for it.
func (rp *retryPolicy) retryStatus(c *policy.Ctx, status int) bool {
	if rp == nil {
		return false
	}
	if status >= 0 && status < len(rp.codes) && rp.codes[status] {
		return true
	}
	if rp.condition == nil {
		return false
	}
	c.Responding = true
	defer func() { c.Responding = false }()
	in := celrules.LiveInput(c)
	v, err := celrules.EvalLLM(rp.condition, &in, nil)
	return err == nil && v == types.True
}

// compiler carries what compiling one snapshot needs.
type compiler struct {
	gw       *Gateway
	file     *config.File
	defaults backend.PoolSettings
	named    map[string]*config.NamedBackend
	// frontend is frontendPolicies compiled, once (its access log
	// expressions included).
	frontend frontendSettings
	// namedPath is each named backend's field path ("backends[2]").
	namedPath map[string]string
	// targetedUsed marks the top-level policies that matched a target.
	targetedUsed []bool
	// targetedErrs are the conflicts between top-level policies found
	// while attaching them (attachTargetedPhase).
	targetedErrs config.Errors
	// lease takes the snapshot's runtime state from the gateway's
	// pool.Usage (see Snapshot.lease); compiling creates no state of its
	// own, so a reload that changes nothing builds nothing.
	lease *pool.Lease
	// llm are the ai backends compiled; catalog is config.modelCatalog,
	// loaded by the first of them.
	llm       []*llmTarget
	mcp       []*mcpgw.Backend // the MCP backends compiled (their streams end on shutdown)
	catalog   *cost.Catalog
	catalogOK bool
	// section is the llm section's backend, once compiled (llmSection).
	section *llmSectionResult
}

// compile turns a validated file into a snapshot. It fails only on problems
// that field validation cannot see (every such error names its field path).
func compile(gw *Gateway, f *config.File) (*Snapshot, error) {
	c := &compiler{gw: gw, file: f, named: map[string]*config.NamedBackend{}, lease: gw.usage.Lease(), targetedUsed: make([]bool, len(f.Policies))}
	c.defaults = poolDefaults(f)
	c.namedPath = map[string]string{}
	for i := range f.Backends {
		c.named[f.Backends[i].Name] = &f.Backends[i]
		c.namedPath[f.Backends[i].Name] = fmt.Sprintf("backends[%d]", i)
	}
	c.frontend = frontendFrom(f)
	otlpErr := c.compileAccessLogOTLP(f, c.frontend.accessLog)
	s := &Snapshot{file: f, binds: map[int]*bindConfig{}, frontend: c.frontend, lease: c.lease}
	var errs config.Errors
	if otlpErr != nil {
		errs = append(errs, otlpErr)
	}
	var netAuthz *celrules.RuleSet
	if fp := f.FrontendPolicies; fp != nil && fp.NetworkAuthorization != nil {
		warnDenyRules(gw.log, "frontendPolicies.networkAuthorization", fp.NetworkAuthorization)
		rs, err := celrules.Compile(fp.NetworkAuthorization)
		if err != nil {
			errs = append(errs, kindError("frontendPolicies.networkAuthorization", err))
		}
		netAuthz = rs
	}
	netExtAuthz, err := c.networkExtAuthz()
	if err != nil {
		errs = append(errs, err)
	}
	for bi := range f.Binds {
		b := &f.Binds[bi]
		port := 0 // the internal bind of every port
		if b.Port != nil {
			port = *b.Port
		} else if b.Mode != "internal" {
			// Parse refuses this; a File built in code may still hold it.
			errs = append(errs, &decode.FieldError{Path: fmt.Sprintf("binds[%d].port", bi), Msg: "required"})
			continue
		}
		bc := &bindConfig{port: port, rawPaths: rawPaths(f), handshakeTimeout: handshakeTimeout(f), keepalive: clientKeepalive(f),
			connect: b.TunnelProtocol == "connect", internal: b.Mode == "internal", netAuthz: netAuthz, netExtAuthz: netExtAuthz,
			proxy: bindProxyPolicy(f, b)}
		for li := range b.Listeners {
			l := &b.Listeners[li]
			// A listener Parse made of a gateway is named by the
			// gateway's path, as its routes are by theirs.
			path := l.SourcePath(fmt.Sprintf("binds[%d].listeners[%d]", bi, li))
			lc, err := c.anyListener(path, b, l)
			if err != nil {
				errs = appendErrors(errs, err)
				continue
			}
			switch lc.protocol {
			case "HTTP":
				bc.listeners = append(bc.listeners, lc)
			case "HTTPS", "TLS":
				bc.tlsListeners = append(bc.tlsListeners, lc)
			case "TCP":
				bc.tcp = lc
			}
			bc.gatewayReadsBody = bc.gatewayReadsBody || lc.gateway != nil && lc.gateway.ReadsBody
		}
		sortListeners(bc.listeners)
		sortListeners(bc.tlsListeners)
		s.binds[bc.port] = bc
	}
	if f.LLM != nil && !f.LLM.Attached() {
		// An attached section is served by routes of gateway listeners.
		bc, err := c.llmBind(f.LLM)
		if err != nil {
			errs = appendErrors(errs, err)
		} else {
			s.binds[bc.port] = bc
		}
	}
	if t, err := c.compileTracing(f); err != nil {
		errs = append(errs, err)
	} else if t != nil {
		for _, bc := range s.binds {
			bc.tracing = t
		}
	}
	for i := range f.Policies {
		if !c.targetedUsed[i] {
			errs = append(errs, &decode.FieldError{Path: fmt.Sprintf("policies[%d].target", i), Msg: "matches no listener, route or backend"})
		}
	}
	errs = append(errs, c.targetedErrs...)
	errs = appendNotServed(uniqueErrors(errs), notServedYet(f))
	if len(errs) > 0 {
		c.lease.Release()
		for _, e := range errs {
			f.Position(e)
		}
		return nil, errs
	}
	s.llm = c.llm
	s.mcp = c.mcp
	return s, nil
}

func (c *compiler) listener(path string, b *config.Bind, l *config.Listener) (*listenerConfig, error) {
	lc := &listenerConfig{name: l.Name, hostname: strings.ToLower(strings.TrimSuffix(l.Hostname, "."))}
	var errs config.Errors
	// The listener's policies are the base of each route's set.
	base := &config.PolicySet{}
	listenerTarget := func(t *config.PolicyTarget) (config.Level, bool) {
		if t.Gateway == nil {
			return 0, false
		}
		return t.Gateway.Match(b, l)
	}
	c.attachTargeted(base, listenerTarget)
	base.Attach(config.LevelListener, l.PoliciesPath(path), l.Policies)
	// The gateway phase: policies that run before a route is selected.
	gw := &config.PolicySet{}
	c.attachTargetedPhase(gw, config.PhaseGateway, listenerTarget)
	if len(gw.Kinds()) > 0 {
		rc := &routeCompile{route: &route{name: l.Name}, id: listenerIdentity(bindPort(b), l) + "\x00gateway", set: gw, chain: policy.NewChainBuilder()}
		if kerrs := c.compileRouteKinds(rc); len(kerrs) > 0 {
			errs = append(errs, kerrs...)
		} else {
			ch := rc.chain.Build()
			lc.gateway = &ch
		}
	}
	if len(l.Routes) == 0 {
		// No route carries the listener's policies: check them alone.
		rc := &routeCompile{route: &route{name: l.Name}, id: listenerIdentity(bindPort(b), l), set: base, chain: policy.NewChainBuilder()}
		errs = append(errs, c.compileRouteKinds(rc)...)
	}
	routes := make([]router.Route, 0, len(l.Routes))
	// named counts the listener's routes by name and rule, for the
	// identity of those that share them (routeIdentity).
	named := map[[2]string]int{}
	for ri := range l.Routes {
		r := &l.Routes[ri]
		key := [2]string{routeName(bindPort(b), l, ri, r), r.RuleName}
		id := routeIdentity(bindPort(b), l, key[0], key[1], named[key])
		named[key]++
		rpath := r.SourcePath(fmt.Sprintf("%s.routes[%d]", path, ri))
		set := base.Clone()
		routeTarget := func(rule bool) func(t *config.PolicyTarget) (config.Level, bool) {
			return func(t *config.PolicyTarget) (config.Level, bool) {
				rt := t.Route
				if rt == nil || rt.Name != r.Name || !config.SameNamespace(rt.Namespace, r.Namespace) || (rt.RuleName != nil) != rule {
					return 0, false
				}
				if rule {
					return config.LevelRule, *rt.RuleName == r.RuleName
				}
				return config.LevelRoute, true
			}
		}
		c.attachTargeted(set, routeTarget(false))
		set.Attach(config.LevelRoute, rpath+".policies", r.Policies)
		c.attachTargeted(set, routeTarget(true))
		cr, err := c.route(rpath, id, bindPort(b), l, ri, r, set)
		if err != nil {
			errs = appendErrors(errs, err)
			continue
		}
		rr := router.Route{Hostnames: r.Hostnames, Value: cr}
		for _, m := range r.Matches {
			rr.Matches = append(rr.Matches, routerMatch(m))
		}
		routes = append(routes, rr)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	t, err := router.New(routes)
	if err != nil {
		var re *router.RouteError
		if errors.As(err, &re) {
			rpath := l.Routes[re.Route].SourcePath(fmt.Sprintf("%s.routes[%d]", path, re.Route))
			return nil, &decode.FieldError{Path: fmt.Sprintf("%s.%s[%d]", rpath, re.Field, re.Index), Msg: re.Err.Error()}
		}
		return nil, fmt.Errorf("%s.routes: %w", path, err)
	}
	lc.table = t
	return lc, nil
}

func routerMatch(m config.RouteMatch) router.Match {
	out := router.Match{Method: m.Method}
	if m.Path != nil {
		switch m.Path.Kind {
		case config.PathExact:
			out.PathKind = router.PathExact
		case config.PathRegex:
			out.PathKind = router.PathRegex
			out.PathRegex = m.Path.Regex
		}
		out.Path = m.Path.Value
	} else {
		out.Path = "/"
	}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, router.HeaderMatch{Name: h.Name, Value: routerValue(h.Value)})
	}
	for _, q := range m.Query {
		out.Query = append(out.Query, router.QueryMatch{Name: q.Name, Value: routerValue(q.Value)})
	}
	return out
}

func routerValue(v config.StringMatch) router.ValueMatch {
	if v.Regex != nil {
		return router.ValueMatch{Regex: v.Regex}
	}
	if v.Exact != nil {
		return router.ValueMatch{Exact: *v.Exact}
	}
	return router.ValueMatch{}
}

// routeName is the name used in logs and metrics: the route's name, or its
// position when it has none.
func routeName(port int, l *config.Listener, index int, r *config.Route) string {
	if r.Name != "" {
		if r.Namespace != "" {
			return r.Namespace + "/" + r.Name
		}
		return r.Name
	}
	ln := l.Name
	if ln == "" {
		ln = "bind/" + strconv.Itoa(port)
	}
	return ln + "/route" + strconv.Itoa(index)
}

// routeIdentity tells a route apart from every other of the snapshot (its
// runtime state, localRateLimit's buckets, is kept under it): its listener
// (listenerIdentity), its name (routeName) and rule, and how many routes of
// the listener before it have both (names need not be unique). A route
// attached to the listeners of several gateways is a route of each, as if
// written under each. Unlike the route's position it holds while routes of
// other names come and go, so a reload keeping a named route keeps its
// state.
func routeIdentity(port int, l *config.Listener, name, rule string, nth int) string {
	return listenerIdentity(port, l) + "\x00" + name + "\x00" + rule + "\x00" + strconv.Itoa(nth)
}

// listenerIdentity tells a listener apart from every other of the snapshot:
// its bind's port, its protocol and hostname (no two listeners of a bind
// share both), and its name.
func listenerIdentity(port int, l *config.Listener) string {
	return strconv.Itoa(port) + "\x00" + l.ListenerProtocol() + "\x00" + l.Hostname + "\x00" + l.Namespace + "/" + l.Name
}

// route compiles one route; set is its policies merged across the levels
// above its backends (listener < route), id its routeIdentity.
func (c *compiler) route(path, id string, port int, l *config.Listener, index int, r *config.Route, set *config.PolicySet) (*route, error) {
	cr := &route{name: routeName(port, l, index, r)}
	// Every policy's error is collected, so that a file's errors are all
	// reported at once.
	rc := &routeCompile{route: cr, id: id, set: set, chain: policy.NewChainBuilder()}
	errs := c.compileRouteKinds(rc)
	cr.chain = rc.chain.Build()
	cr.limitAt = cr.chain.Before(policy.KindLocalRateLimit)
	routeAI := config.PolicyOf[config.AIPolicy](set, "ai")
	routeAuth := config.PolicyOf[config.BackendAuth](set, "backendAuth")
	charged := false // a backend's exchanges are charged LLM tokens
	allAI := len(r.Backends) > 0
	var firstAI llmRouteTyper
	for bi := range r.Backends {
		rb, err := c.routeBackend(fmt.Sprintf("%s.backends[%d]", path, bi), cr.name, routeScope(port, l, cr.name), &r.Backends[bi], set, routeAI, routeAuth, cr.auth)
		if err != nil {
			errs = appendErrors(errs, err)
			continue
		}
		_, ai := rb.target.(*llmTarget)
		if !ai && routeAI != nil {
			errs = append(errs, &decode.FieldError{Path: set.Path("ai"), Msg: "applies to ai backends only, and backends[" + strconv.Itoa(bi) + "] is not one"})
		}
		_, section := rb.target.(*llmModels)
		charged = charged || ai || section
		if t, ok := rb.target.(llmRouteTyper); !ok {
			allAI = false
		} else if firstAI == nil {
			firstAI = t
		}
		if r.Backends[bi].Weight == 0 {
			continue // weight 0 takes no traffic
		}
		if rb.redirectPrefixAt != "" {
			cr.needsPrefix = true
			rc.prefixAt = append(rc.prefixAt, rb.redirectPrefixAt)
		}
		cr.total += r.Backends[bi].Weight
		cr.backends = append(cr.backends, rb)
		cr.weights = append(cr.weights, cr.total)
	}
	if allAI {
		cr.llmErrors = firstAI
	}
	if !charged {
		errs = append(errs, unchargedTokenBuckets(set)...)
	}
	if cr.needsPrefix {
		for _, m := range r.Matches {
			switch {
			case m.Path == nil:
				cr.prefixes = append(cr.prefixes, slash)
			case m.Path.Kind == config.PathPrefix:
				p := strings.TrimSuffix(m.Path.Value, "/")
				if p == "" {
					p = "/"
				}
				cr.prefixes = append(cr.prefixes, []byte(p))
			}
		}
		if len(r.Matches) == 0 {
			cr.prefixes = append(cr.prefixes, slash)
		}
		sort.Slice(cr.prefixes, func(i, j int) bool { return len(cr.prefixes[i]) > len(cr.prefixes[j]) })
		errs = append(errs, c.checkPrefixMatches(path, r, cr, rc.prefixAt)...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	cr.noBackend = c.gw.metrics.Route(cr.name, "")
	return cr, nil
}

// checkPrefixMatches refuses a urlRewrite or requestRedirect that replaces
// the matched path prefix (`path: {prefix}`) on a route none of whose
// matches is a path prefix match: an exact or regex match has no prefix to
// replace, so every request would be answered 500, as agentgateway answers
// it. The Gateway API allows ReplacePrefixMatch with a PathPrefix match
// only. at are the fields of those written for the route (its own
// policies, a policy targeting it, its backends'); one attached to its
// gateway or listener covers the routes that match by prefix and stays.
// A route with prefix matches among others keeps agentgateway's
// per-match outcome: a request its prefix matches select is rewritten,
// one another match selects is answered 500; said at every load.
func (c *compiler) checkPrefixMatches(path string, r *config.Route, cr *route, at []string) config.Errors {
	var other []string
	for i, m := range r.Matches {
		if m.Path != nil && m.Path.Kind != config.PathPrefix {
			other = append(other, "matches["+strconv.Itoa(i)+"]")
		}
	}
	if len(cr.prefixes) > 0 {
		if len(other) > 0 {
			for _, field := range at {
				c.gw.log.Warn("the route's "+strings.Join(other, ", ")+" match by exact path or regex, which have no path prefix to replace: the requests they select are answered 500",
					zap.String("field", field), zap.String("route", path))
			}
		}
		return nil
	}
	var errs config.Errors
	for _, field := range at {
		msg := "replaces the path prefix the request matched, and none of the route's matches is a pathPrefix match (exact and regex matches have no prefix to replace): match by pathPrefix, or give the full path"
		if !strings.HasPrefix(field, path+".") {
			msg += " (route " + path + ")"
		}
		errs = append(errs, &decode.FieldError{Path: field, Msg: msg})
	}
	return errs
}

// unchargedTokenBuckets refuses the `tokens` buckets of the localRateLimit
// of set, and the `tokens` descriptors of its remoteRateLimit, on a route
// without an ai backend: only an ai backend's exchanges are charged tokens
// (llmComplete), so such a bucket would stay full and never refuse
// anything, and such a descriptor would never be sent. As with a policy
// the route would not apply, the file is refused rather than the setting
// ignored, when the limit was written for the route (its policies, or a
// policy targeting it). One attached to a gateway or listener covers the
// ai routes among its routes and is what the others inherit without being
// written for them: it is kept (a gateway with LLM routes and a health
// route).
func unchargedTokenBuckets(set *config.PolicySet) config.Errors {
	var errs config.Errors
	writtenForRoute := func(kind string) bool {
		o := set.Origins(kind)
		return len(o) > 0 && o[len(o)-1].Level >= config.LevelRoute
	}
	refuse := func(at, what string) {
		errs = append(errs, &decode.FieldError{Path: at + ".type",
			Msg: "counts LLM tokens, which only an ai backend's exchanges are charged, and this route has none: the " + what})
	}
	if cfg := config.PolicyOf[config.LocalRateLimit](set, "localRateLimit"); cfg != nil && writtenForRoute("localRateLimit") {
		const what = "bucket would never refuse anything (remove it, or count requests)"
		at := set.Path("localRateLimit")
		for i := range cfg.Buckets {
			if cfg.Buckets[i].Type == "tokens" {
				refuse(at+"["+strconv.Itoa(i)+"]", what)
			}
		}
		for i := range cfg.Conditional {
			if cfg.Conditional[i].Type == "tokens" {
				refuse(at+".conditional["+strconv.Itoa(i)+"]", what)
			}
		}
	}
	if cfg := config.PolicyOf[config.RemoteRateLimit](set, "remoteRateLimit"); cfg != nil && writtenForRoute("remoteRateLimit") {
		const what = "descriptor would never be sent (remove it, or count requests)"
		descriptors := func(at string, ds []config.RateLimitDescriptor) {
			for i := range ds {
				if ds[i].Type == "tokens" {
					refuse(at+".descriptors["+strconv.Itoa(i)+"]", what)
				}
			}
		}
		at := set.Path("remoteRateLimit")
		descriptors(at, cfg.Descriptors)
		for i := range cfg.Conditional {
			descriptors(at+".conditional["+strconv.Itoa(i)+"]", cfg.Conditional[i].Descriptors)
		}
	}
	return errs
}

// uniqueErrors drops repeated errors: a listener's policy is compiled
// with each of its routes, and an error in it is found by each.
func uniqueErrors(errs config.Errors) config.Errors {
	seen := map[string]bool{}
	out := errs[:0]
	for _, e := range errs {
		if k := e.Error(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// appendErrors appends err to errs, or the errors it holds when it is a
// config.Errors.
func appendErrors(errs config.Errors, err error) config.Errors {
	if many, ok := err.(config.Errors); ok {
		return append(errs, many...)
	}
	return append(errs, err)
}

// fieldError names the exact field of a policy constructor's error: path is
// where the policy sits, field the policy below it, and the error's own
// field path is below that (decode.Under).
func fieldError(path, field string, err error) error {
	if field == "" {
		return err
	}
	return decode.Under(path+"."+field, err)
}

// backendKinds are the policy kinds a backend applies, by field name under
// its policies; each backend kind says which of them it honors.
var backendKinds = map[string]bool{
	"requestHeaderModifier":  true,
	"responseHeaderModifier": true,
	"requestRedirect":        true,
	"http":                   true,
	"tcp":                    true,
	"backendAuth":            true,
	"backendTLS":             true,
	"ai":                     true,
}

// backendKindsLater are the kinds agentgateway applies to a backend that
// the gateway does not apply there yet (transformations, extAuthz,
// authorization, ...): backends[].policies refuses them as not supported
// yet (their BackendPolicies fields are config.Unsupported), and so does a
// top-level policy that targets a backend, rather than call them misplaced.
var backendKindsLater = func() map[string]bool {
	m := map[string]bool{}
	t := reflect.TypeFor[config.BackendPolicies]()
	for i := range t.NumField() {
		if f := t.Field(i); f.Type == reflect.TypeFor[config.Unsupported]() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			m[name] = true
		}
	}
	return m
}()

// routeBackend compiles one backend of a route; routeSet is the route's
// merged policies, of which the backend inherits the kinds it applies
// (routeKinds without a build) below its own.
// routeAuth is the route's backendAuth, compiled as routeAuthed (for the
// backends without their own).
func (c *compiler) routeBackend(path, routeName, scope string, rb *config.RouteBackend, routeSet *config.PolicySet, routeAI *config.AIPolicy, routeAuth *config.BackendAuth, routeAuthed *backendAuth) (*routeBackend, error) {
	if rb.Kind == config.BackendLLMModels {
		// The llm section attached to a gateway listener.
		return c.llmSection(routeName)
	}
	out := &routeBackend{tlsLog: logline.Throttle{Every: tlsLogEvery}}
	// The backend's policies: the route's backendTLS, then a named
	// backend's, with the route backend's merged over them field by field
	// (the route backend's win).
	set := &config.PolicySet{}
	set.Inherit(routeSet, "backendTLS")
	settings := c.defaults
	switch rb.Kind {
	case config.BackendHost:
		out.name = rb.Host
	case config.BackendRef:
		nb := c.named[rb.Backend]
		if nb == nil {
			// Parse refuses this; a File built in code may still hold it.
			return nil, &decode.FieldError{Path: path + ".backend", Msg: fmt.Sprintf("no backend named %q in the top-level backends", rb.Backend)}
		}
		out.name = nb.Name
		c.attachTargeted(set, func(t *config.PolicyTarget) (config.Level, bool) {
			bt := t.Backend
			// Top-level backends have no namespace: "" or "default".
			return config.LevelBackend, bt != nil && bt.Backend != nil && bt.Backend.Name == nb.Name && config.SameNamespace(bt.Backend.Namespace, "")
		})
		set.Attach(config.LevelBackend, c.namedPath[nb.Name]+".policies", nb.Policies)
		rb = &config.RouteBackend{Kind: nb.Kind, Host: nb.Host, MCP: nb.MCP, AI: nb.AI, Policies: rb.Policies}
	case config.BackendDynamic:
		out.name = "dynamic"
	case config.BackendMCP:
		out.name = "mcp"
	case config.BackendAI:
		out.name = "ai"
		if rb.AI != nil && rb.AI.Provider != nil {
			out.name = rb.AI.Provider.Name
		}
	}
	set.Attach(config.LevelBackend, path+".policies", rb.Policies)
	var policies *config.BackendPolicies
	if len(set.Kinds()) > 0 {
		policies = &config.BackendPolicies{}
		set.Fill(policies)
	}
	var errs config.Errors
	for _, k := range set.Kinds() {
		switch {
		case backendKindsLater[k]:
			errs = append(errs, &decode.FieldError{Path: set.Path(k), Msg: "not supported yet on a backend: target the routes that use it instead"})
		case !backendKinds[k]:
			errs = append(errs, &decode.FieldError{Path: set.Path(k), Msg: "not applied at this level: remove it"})
		}
	}
	if policies != nil {
		if policies.TCP != nil {
			settings.Dialing = backendTCPDialing(policies.TCP, settings.Dialing)
		}
		if policies.HTTP != nil && policies.HTTP.RequestTimeout != nil {
			out.requestTimeout = policies.HTTP.RequestTimeout.Duration
		}
		if policies.HTTP != nil {
			if h2, set := policies.HTTP.HTTP2(); set {
				out.version = versionHTTP1
				if h2 {
					out.version = versionHTTP2
				}
			}
		}
		if policies.RequestHeaderModifier != nil {
			v, err := policy.NewHeaderModifier(policies.RequestHeaderModifier)
			if err != nil {
				errs = append(errs, kindError(set.Path("requestHeaderModifier"), err))
			}
			out.requestHeaders = v
		}
		if policies.ResponseHeaderModifier != nil {
			v, err := policy.NewHeaderModifier(policies.ResponseHeaderModifier)
			if err != nil {
				errs = append(errs, kindError(set.Path("responseHeaderModifier"), err))
			}
			out.responseHeaders = v
		}
		if policies.RequestRedirect != nil {
			v, err := policy.NewRedirect(policies.RequestRedirect)
			if err != nil {
				errs = append(errs, kindError(set.Path("requestRedirect"), err))
			}
			out.redirect = v
			if p := policies.RequestRedirect.Path; p != nil && p.Prefix != nil {
				out.redirectPrefixAt = set.Path("requestRedirect") + ".path.prefix"
			}
		}
		if policies.BackendTLS != nil {
			t, err := compileBackendTLS(policies.BackendTLS)
			if err != nil {
				errs = append(errs, kindError(set.Path("backendTLS"), err))
			}
			settings.TLS = t
		}
		if rb.Kind != config.BackendAI {
			a, err := compileBackendAuth(set.Path("backendAuth"), policies.BackendAuth)
			if err != nil {
				errs = append(errs, err)
			}
			out.auth = a
		}
	}
	// The backend's backendAuth, else its route's (ai backends' providers
	// hold theirs); authCfg is its config, authAt the policy that set it,
	// and a route's names the backend it does not fit.
	authCfg, authAt, which := routeAuth, routeSet.Path("backendAuth"), " ("+path[strings.LastIndexByte(path, '.')+1:]+")"
	if out.auth != nil {
		authCfg, authAt, which = policies.BackendAuth, set.Path("backendAuth"), ""
	} else if rb.Kind != config.BackendAI {
		out.auth = routeAuthed
	}
	if msg := out.auth.misfit(rb.Kind); msg != "" {
		errs = append(errs, &decode.FieldError{Path: authAt, Msg: msg + which})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	switch rb.Kind {
	case config.BackendHost:
		up := c.upstream(rb.Host, settings)
		out.target = &httpUpstream{static: up}
	case config.BackendDynamic:
		settings.Refuse = (*selfRefuser)(c.gw)
		d, _ := pool.LoadOrNew(c.lease, fmt.Sprintf("dynamic\x00%+v", settings), func() (*backend.Dynamic, error) {
			return backend.NewDynamic(settings), nil
		})
		out.target = &httpUpstream{dynamic: d}
	case config.BackendMCP:
		m, err := c.mcpBackend(path, routeName, scope, rb.MCP, settings.TLS, set.Path("backendTLS"), authCfg)
		if err != nil {
			return nil, err
		}
		c.mcp = append(c.mcp, m)
		out.target = &mcpRelay{mcp: m}
	case config.BackendAI:
		t, err := c.aiBackend(path, routeName, rb.AI, policies, routeAI, routeSet.Path("ai"), routeAuth, settings)
		if err != nil {
			return nil, err
		}
		out.target = t
	}
	if out.target != nil {
		if err := refuseUnhonored(out.target, set); err != nil {
			return nil, err
		}
		_, http := out.target.(*httpUpstream)
		if !http && out.version == versionHTTP2 {
			// MCP and LLM backends speak to their targets in HTTP/1.1.
			return nil, &decode.FieldError{Path: set.Path("http") + ".version", Msg: "HTTP2 applies to host and dynamic backends: this kind speaks HTTP/1.1"}
		}
		if policies != nil && policies.BackendTLS != nil {
			if err := checkHTTPALPN(policies.BackendTLS.ALPN, http, out.version); err != nil {
				return nil, kindError(set.Path("backendTLS"), err)
			}
		}
	}
	out.metrics = c.gw.metrics.Route(routeName, out.name)
	out.connectErrors = c.gw.metrics.Backend(out.name)
	out.cel = backendVariable(out.name, out.target)
	return out, nil
}

// backendVariable is CEL's `backend` for a route backend: its name, type
// (static, dynamic, mcp, ai) and protocol (http, mcp, llm), as
// agentgateway names them. It is shared by every request and never
// modified.
func backendVariable(name string, t target) map[string]any {
	typ, proto := "unknown", "http"
	switch t := t.(type) {
	case *httpUpstream:
		typ = "static"
		if t.dynamic != nil {
			typ = "dynamic"
		}
	case *mcpRelay:
		typ, proto = "mcp", "mcp"
	case *llmTarget, *llmModels:
		typ, proto = "ai", "llm"
	}
	return map[string]any{"name": name, "type": typ, "protocol": proto}
}

// attachTargeted attaches to set the top-level route-phase policies whose
// target match says applies, at the level it says, in file order.
func (c *compiler) attachTargeted(set *config.PolicySet, match func(*config.PolicyTarget) (config.Level, bool)) {
	c.attachTargetedPhase(set, "", match)
}

// attachTargetedPhase is attachTargeted for the policies of one phase
// ("" or "route": the route phase).
func (c *compiler) attachTargetedPhase(set *config.PolicySet, phase string, match func(*config.PolicyTarget) (config.Level, bool)) {
	if phase == "route" {
		phase = ""
	}
	type matched struct {
		i     int
		level config.Level
	}
	var ms []matched
	for i := range c.file.Policies {
		p := c.file.Policies[i].Phase
		if p == "route" {
			p = ""
		}
		if p != phase {
			continue
		}
		if level, ok := match(&c.file.Policies[i].Target); ok {
			ms = append(ms, matched{i, level})
		}
	}
	// Lowest level first, so a listener's entry wins over the gateway's
	// wherever the file put them.
	sort.SliceStable(ms, func(a, b int) bool { return ms[a].level < ms[b].level })
	// Two entries of one kind at one level here would have no order
	// between them (agentgateway keeps a target's policies in a hash
	// set), so one would be dropped silently: refused, but for the kinds
	// whose settings combine (authorization: every rule applies).
	type placed struct {
		level config.Level
		kind  string
	}
	first := map[placed]int{}
	for _, m := range ms {
		for _, k := range c.file.Policies[m.i].Kinds() {
			if _, ok := combinedKinds[k]; ok {
				continue
			}
			key := placed{m.level, k}
			if prev, dup := first[key]; dup {
				c.targetedErrs = append(c.targetedErrs, &decode.FieldError{
					Path: fmt.Sprintf("policies[%d].policy.%s", m.i, k),
					Msg:  fmt.Sprintf("also set for this %s by policies[%d]: two entries of one kind on one target have no order, so one would be ignored (keep one)", m.level, prev),
				})
				continue
			}
			first[key] = m.i
		}
	}
	for _, m := range ms {
		set.Attach(m.level, fmt.Sprintf("policies[%d].policy", m.i), &c.file.Policies[m.i].Policy)
		c.targetedUsed[m.i] = true
	}
}

// combinedKinds are the kinds of which several top-level entries may
// attach at one level: their settings combine rather than replace each
// other (the spec: "all authorization rules across policies are merged").
var combinedKinds = map[string]struct{}{"authorization": {}}

// upstream returns the connection pool to addr with settings s, the
// previous snapshot's when it had the same.
func (c *compiler) upstream(addr string, s backend.PoolSettings) *backend.Upstream {
	up, _ := pool.LoadOrNew(c.lease, fmt.Sprintf("upstream\x00%s\x00%+v", addr, s), func() (*backend.Upstream, error) {
		return backend.NewUpstream(addr, s), nil
	})
	return up
}

// bindPort is a bind's port, 0 for the internal bind of every port.
func bindPort(b *config.Bind) int {
	if b.Port == nil {
		return 0
	}
	return *b.Port
}

// sortListeners orders listeners so the most specific hostname is tried first.
func sortListeners(ls []*listenerConfig) {
	sort.SliceStable(ls, func(i, j int) bool { return hostnameRank(ls[i].hostname) > hostnameRank(ls[j].hostname) })
}

func hostnameRank(h string) int {
	switch {
	case h == "" || h == "*":
		return 0
	case strings.HasPrefix(h, "*."):
		return len(h)
	default:
		return 1 << 20
	}
}

// listenerFor returns the listener serving host, or nil.
func (bc *bindConfig) listenerFor(host []byte) *listenerConfig {
	for _, l := range bc.listeners {
		if l.hostname == "" || router.MatchHostname(l.hostname, host) {
			return l
		}
	}
	return nil
}

// ipv4Only reports whether the config turns IPv6 off (config.enableIpv6:
// false): upstreams are dialed over IPv4 alone, and binds listen on IPv4's
// every-interface address (Gateway.listenAddr).
func ipv4Only(f *config.File) bool {
	return f.Config != nil && f.Config.EnableIPv6 != nil && !*f.Config.EnableIPv6
}

// poolMaxConns is the upstream pools' connection limit
// (backend.PoolSettings.MaxConns), 0 for backend.DefaultMaxConns; no file
// sets it, tests lower it.
var poolMaxConns = newAtomicInt64(0)

func poolDefaults(f *config.File) backend.PoolSettings {
	s := backend.PoolSettings{Dialing: backend.Dialing{ConnectTimeout: backend.DefaultConnectTimeout, Keepalive: backend.DefaultKeepalive}}
	s.MaxConns = int(poolMaxConns.Load())
	s.IPv4Only = ipv4Only(f)
	if f.Config != nil {
		if d := f.Config.Backend; d != nil {
			var ct *time.Duration
			if d.ConnectTimeout != nil {
				ct = &d.ConnectTimeout.Duration
			}
			s.Dialing = dialingFrom(d.Keepalives, ct, s.Dialing)
			if d.PoolIdleTimeout != nil {
				s.IdleTimeout = d.PoolIdleTimeout.Duration
			}
			if d.PoolMaxSize != nil {
				// agentgateway's meaning: the idle connections kept, not
				// a limit on the connections open.
				s.MaxIdle = *d.PoolMaxSize
				if s.MaxIdle == 0 {
					s.MaxIdle = backend.NoIdleConns
				}
			}
		}
	}
	return s
}

// backendTCPDialing applies a backend's tcp policy to the dialing settings
// of config.backend. The policy's keepalives are a whole keepalive
// configuration: what they leave out takes the keepalive defaults (the
// spec's, and agentgateway's), not config.backend's.
func backendTCPDialing(tcp *config.BackendTCP, d backend.Dialing) backend.Dialing {
	var ct *time.Duration
	if tcp.ConnectTimeout != nil {
		ct = &tcp.ConnectTimeout.Duration
	}
	d.Keepalive = backend.DefaultKeepalive
	return dialingFrom(tcp.Keepalives, ct, d)
}

func dialingFrom(k *config.Keepalive, connectTimeout *time.Duration, d backend.Dialing) backend.Dialing {
	if connectTimeout != nil && *connectTimeout > 0 {
		d.ConnectTimeout = *connectTimeout
	}
	if k != nil {
		if k.Enabled != nil {
			d.Keepalive.Enabled = *k.Enabled
		}
		if k.Time != nil {
			d.Keepalive.Time = k.Time.Duration
		}
		if k.Interval != nil {
			d.Keepalive.Interval = k.Interval.Duration
		}
		if k.Retries != nil {
			d.Keepalive.Retries = *k.Retries
		}
	}
	return d
}

// Defaults of frontendPolicies.http.
const (
	DefaultMaxBufferSize    = 2 << 20
	DefaultHTTP1MaxHeaders  = 100
	DefaultHTTP1IdleTimeout = 10 * time.Minute
)

func frontendFrom(f *config.File) frontendSettings {
	fs := frontendSettings{maxHeaders: DefaultHTTP1MaxHeaders, idleTimeout: DefaultHTTP1IdleTimeout, maxBufferSize: DefaultMaxBufferSize}
	if f.FrontendPolicies != nil && f.FrontendPolicies.HTTP != nil {
		h := f.FrontendPolicies.HTTP
		if h.HTTP1MaxHeaders != nil {
			fs.maxHeaders = *h.HTTP1MaxHeaders
		}
		if h.HTTP1IdleTimeout != nil {
			fs.idleTimeout = h.HTTP1IdleTimeout.Duration
		}
		if h.MaxBufferSize != nil {
			fs.maxBufferSize = *h.MaxBufferSize
		}
		if h.MaxConnectionDuration != nil {
			fs.maxConnLife = h.MaxConnectionDuration.Duration
		}
		fs.h2 = h2SettingsFrom(h)
	}
	if f.FrontendPolicies != nil && f.FrontendPolicies.AccessLog != nil {
		// Decoding compiled every expression already: an error here is
		// not one the file can hold.
		fs.accessLog, _ = newAccessLogPolicy(f.FrontendPolicies.AccessLog)
	}
	return fs
}

// rawPaths reports whether frontendPolicies.http.pathNormalization is raw.
func rawPaths(f *config.File) bool {
	fp := f.FrontendPolicies
	return fp != nil && fp.HTTP != nil && fp.HTTP.PathNormalization == "raw"
}

// ValidatePartial compiles what decoded of a file that has errors (known)
// and returns the errors only compiling finds, leaving out those that could
// be cascades of the known ones: any in a route or listener that already
// has an error, and all of them when a known error lies outside the binds,
// gateways and routes (a named backend, a frontend policy) that routes may
// depend on. A panic
// on a half-decoded value only ends the check.
func ValidatePartial(f *config.File, known error) (extra config.Errors) {
	var paths []string
	if many, ok := known.(config.Errors); ok {
		for _, e := range many {
			var fe *decode.FieldError
			if !errors.As(e, &fe) || !listenerOrRoutePath(fe.Path) {
				return nil
			}
			paths = append(paths, objectPath(fe.Path))
		}
	}
	defer func() {
		if recover() != nil {
			extra = nil
		}
	}()
	err := Validate(f)
	many, ok := err.(config.Errors)
	if !ok {
		return nil
	}
	for _, e := range many {
		var fe *decode.FieldError
		if !errors.As(e, &fe) {
			continue
		}
		obj := objectPath(fe.Path)
		clean := true
		for _, p := range paths {
			if strings.HasPrefix(obj, p) || strings.HasPrefix(p, obj) {
				clean = false
				break
			}
		}
		if clean {
			extra = append(extra, e)
		}
	}
	return extra
}

// listenerOrRoutePath reports whether path lies in a bind, a gateway or a
// top-level route: what objectPath can cut to a route or listener.
func listenerOrRoutePath(path string) bool {
	for _, p := range []string{"binds[", "gateways.", "gateways[", "routes[", "tcpRoutes["} {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// objectPath cuts a path to the route it lies in ("binds[0].listeners[1]
// .routes[2]", "routes[3]"), or to its listener, gateway or bind when it
// lies in no route.
func objectPath(path string) string {
	for _, list := range []string{".routes[", ".listeners["} {
		if i := strings.Index(path, list); i >= 0 {
			if j := strings.IndexByte(path[i:], ']'); j >= 0 {
				return path[:i+j+1]
			}
		}
	}
	if rest, ok := strings.CutPrefix(path, "gateways."); ok {
		// A gateway of one listener: the gateway.
		if i := strings.IndexAny(rest, ".["); i >= 0 {
			return path[:len("gateways.")+i]
		}
		return path
	}
	if j := strings.IndexByte(path, ']'); j >= 0 {
		return path[:j+1]
	}
	return path
}

// Validate compiles f as Apply would, without opening ports or starting
// anything that lasts, and reports the errors only compiling finds (CEL
// rules, key sets, regular expressions the router refuses) and the settings
// not served yet: every error Apply would refuse f with, so that
// `gateway --validate-only`, which runs it after parsing, accepts exactly
// the files the gateway runs.
func Validate(f *config.File) error {
	g := New(Options{})
	s, err := compile(g, f)
	if s != nil {
		// Never started: nothing was fetched or connected; what was built
		// is closed.
		s.lease.Release()
	}
	return err
}

// notServedYet refuses the settings the file format accepts that the data
// plane does not serve yet (config.File.NotServedYet), so that neither
// Apply nor Validate accepts a file holding one.
func notServedYet(f *config.File) config.Errors {
	var errs config.Errors
	for _, ns := range f.NotServedYet() {
		errs = append(errs, &decode.FieldError{Path: ns.Path, Msg: ns.Msg})
	}
	return errs
}

// appendNotServed adds the settings not served yet that no error names
// already (a package may refuse a setting itself while compiling it).
func appendNotServed(errs, ns config.Errors) config.Errors {
	seen := map[string]bool{}
	for _, e := range errs {
		var fe *decode.FieldError
		if errors.As(e, &fe) {
			seen[fe.Path] = true
		}
	}
	for _, e := range ns {
		if !seen[e.(*decode.FieldError).Path] {
			errs = append(errs, e)
		}
	}
	return errs
}
