package config

import "github.com/relaygate/gateway/config/decode"

// File is the standalone configuration file (agentgateway's local config format,
// schema/config.json). Fields the gateway does not implement yet are declared with
// type Unsupported so that a file using them is refused with "not supported yet"
// instead of being silently ignored.
type File struct {
	// pos locates the values of the document the file was parsed from.
	pos decode.Positions

	Config           *Settings         `json:"config,omitempty"`
	Binds            []Bind            `json:"binds,omitempty"`
	FrontendPolicies *FrontendPolicies `json:"frontendPolicies,omitempty"`
	Backends         []NamedBackend    `json:"backends,omitempty"`
	Policies         []TargetedPolicy  `json:"policies,omitempty" cfg:"maxItems=1024"`
	Workloads        Unsupported       `json:"workloads,omitzero"`
	Services         Unsupported       `json:"services,omitzero"`
	RouteGroups      Unsupported       `json:"routeGroups,omitzero"`
	// Gateways, Routes and TCPRoutes are agentgateway's newer shapes:
	// Parse makes binds of them (gateways.go).
	Gateways  Gateways           `json:"gateways,omitempty"`
	Routes    []AttachedRoute    `json:"routes,omitempty"`
	TCPRoutes []AttachedTCPRoute `json:"tcpRoutes,omitempty"`
	LLM       *LLMConfig         `json:"llm,omitempty"`
	MCP       *SimpleMCP         `json:"mcp,omitempty"`
	UI        Unsupported        `json:"ui,omitzero"`
}

// Settings is the top-level `config:` section: process-wide settings applied at start.
type Settings struct {
	AdminAddr                        *string          `json:"adminAddr,omitempty"`
	StatsAddr                        *string          `json:"statsAddr,omitempty"`
	ReadinessAddr                    *string          `json:"readinessAddr,omitempty"`
	Logging                          *Logging         `json:"logging,omitempty"`
	Backend                          *BackendDefaults `json:"backend,omitempty"`
	ConnectionTerminationDeadline    *Duration        `json:"connectionTerminationDeadline,omitempty"`
	ConnectionMinTerminationDeadline *Duration        `json:"connectionMinTerminationDeadline,omitempty"`
	EnableIPv6                       *bool            `json:"enableIpv6,omitempty"`
	WorkerThreads                    *WorkerThreads   `json:"workerThreads,omitempty"`
	Histograms                       string           `json:"histograms,omitempty" cfg:"enum=classic,later=native|both"`

	DNS                     Unsupported      `json:"dns,omitzero"`
	LocalXDSPath            Unsupported      `json:"localXdsPath,omitzero"`
	ModelCatalog            CatalogSources   `json:"modelCatalog,omitempty"`
	Database                Unsupported      `json:"database,omitzero"`
	Storage                 Unsupported      `json:"storage,omitzero"`
	CAAddress               Unsupported      `json:"caAddress,omitzero"`
	CAAuthToken             Unsupported      `json:"caAuthToken,omitzero"`
	XDSAddress              Unsupported      `json:"xdsAddress,omitzero"`
	XDSAuthToken            Unsupported      `json:"xdsAuthToken,omitzero"`
	SPIFFE                  Unsupported      `json:"spiffe,omitzero"`
	Namespace               Unsupported      `json:"namespace,omitzero"`
	Gateway                 Unsupported      `json:"gateway,omitzero"`
	TrustDomain             Unsupported      `json:"trustDomain,omitzero"`
	AdditionalTrustDomains  Unsupported      `json:"additionalTrustDomains,omitzero"`
	SkipValidateTrustDomain Unsupported      `json:"skipValidateTrustDomain,omitzero"`
	ServiceAccount          Unsupported      `json:"serviceAccount,omitzero"`
	ClusterID               Unsupported      `json:"clusterId,omitzero"`
	Network                 Unsupported      `json:"network,omitzero"`
	StandardAttributes      Unsupported      `json:"standardAttributes,omitzero"`
	Session                 *SessionSettings `json:"session,omitempty"`
	MCP                     *MCPSettings     `json:"mcp,omitempty"`
	SensitiveHeaders        Unsupported      `json:"sensitiveHeaders,omitzero"`
	CustomFunctions         Unsupported      `json:"customFunctions,omitzero"`
	Tracing                 *Tracing         `json:"tracing,omitempty"`
	Metrics                 Unsupported      `json:"metrics,omitzero"`
	HBONE                   Unsupported      `json:"hbone,omitzero"`
}

// Validate checks the side servers' addresses, which are otherwise only
// parsed when the servers start. The decoder skips Validate when another
// setting of the section failed, so the cross-checks run checkAddrs again
// (Parse reports an error found by both once, with its position).
func (s *Settings) Validate(v *decode.Validation) {
	s.checkAddrs(func(field string, err error) { v.Errorf(field, "%v", err) })
}

// checkAddrs reports each invalid admin, stats or readiness address with its
// field name.
func (s *Settings) checkAddrs(report func(field string, err error)) {
	for _, a := range []struct {
		field string
		addr  *string
	}{{"adminAddr", s.AdminAddr}, {"statsAddr", s.StatsAddr}, {"readinessAddr", s.ReadinessAddr}} {
		if a.addr == nil {
			continue
		}
		if err := CheckListenAddr(*a.addr); err != nil {
			report(a.field, err)
		}
	}
}

// Logging is `config.logging`.
type Logging struct {
	Level    *LogLevel   `json:"level,omitempty"`
	Format   string      `json:"format,omitempty" cfg:"enum=text|json"`
	Filter   Unsupported `json:"filter,omitzero"`
	Fields   Unsupported `json:"fields,omitzero"`
	Database Unsupported `json:"database,omitzero"`
}

// BackendDefaults is `config.backend`: defaults for every upstream connection.
type BackendDefaults struct {
	Keepalives      *Keepalive `json:"keepalives,omitempty"`
	ConnectTimeout  *Duration  `json:"connectTimeout,omitempty"`
	PoolIdleTimeout *Duration  `json:"poolIdleTimeout,omitempty"`
	PoolMaxSize     *int       `json:"poolMaxSize,omitempty" cfg:"min=0"`
}

// Keepalive configures TCP keepalive probes.
type Keepalive struct {
	Enabled  *bool     `json:"enabled,omitempty"`
	Time     *Duration `json:"time,omitempty"`
	Interval *Duration `json:"interval,omitempty"`
	Retries  *int      `json:"retries,omitempty" cfg:"min=1,max=64"`
}

// Bind is one port the gateway listens on.
type Bind struct {
	// Port is required, except on an internal bind (mode: internal), where
	// none (or 0, as agentgateway takes it; Validate makes it none) makes
	// it the bind of every port no other bind has.
	Port      *int       `json:"port,omitempty" cfg:"min=0,max=65535"`
	Listeners []Listener `json:"listeners" cfg:"required"`
	// TunnelProtocol connect makes the bind an HTTP CONNECT proxy: each
	// tunnel is served by the bind of its destination port (connect.go);
	// proxy makes its connections begin with a PROXY protocol header (as
	// frontendPolicies.proxy with its defaults, for this bind).
	TunnelProtocol string `json:"tunnelProtocol,omitempty" cfg:"enum=direct|connect|proxy,later=hboneWaypoint|hboneGateway"`
	// Mode internal: the bind opens no socket and is reached only through
	// CONNECT tunnels; without a port it serves tunnels to any port that
	// no other bind has.
	Mode string `json:"mode,omitempty" cfg:"enum=standard|internal"`

	// origin is the path of what Parse made the bind of ("gateways.web",
	// "mcp"); "" for a bind of the file's binds. The dump leaves such
	// binds out (File.MarshalJSON).
	origin string
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*Bind) FieldRules() {}

// Validate requires a port from 1, except on an internal bind (refused for
// its mode alone), where port 0 is the same as none: the bind of every port.
func (b *Bind) Validate(v *decode.Validation) {
	switch {
	case b.Port == nil && b.Mode != "internal":
		v.Errorf("port", "required")
	case b.Port != nil && *b.Port == 0 && b.Mode == "internal":
		b.Port = nil
	case b.Port != nil && *b.Port == 0:
		v.Errorf("port", "must be >= 1") // as the tag would say: 0 is for internal binds only
	}
}

// Listener is one named listener on a bind.
type Listener struct {
	Name      string          `json:"name,omitempty"`
	Namespace string          `json:"namespace,omitempty"`
	Hostname  string          `json:"hostname,omitempty"`
	Protocol  string          `json:"protocol,omitempty" cfg:"enum=HTTP|HTTPS|TLS|TCP|HBONE"`
	Routes    []Route         `json:"routes,omitempty"`
	Policies  *ListenerPolicy `json:"policies,omitempty"`
	TLS       *ListenerTLS    `json:"tls,omitempty"`
	TCPRoutes []TCPRoute      `json:"tcpRoutes,omitempty"`

	// at and policiesAt are the paths of the gateway (listener) Parse made
	// the listener of and of its policies (SourcePath, PoliciesPath); ""
	// for a listener of the binds.
	at, policiesAt string
	// gateway is the gateways entry Parse made the listener of, and
	// inGateway the listener's name there (Gateway); "" for a listener
	// of the binds.
	gateway, inGateway string
}

// ListenerPolicy is `listeners[].policies` (gateway-level policies in
// agentgateway). They are the base of each of the listener's routes'
// policies (a PolicySet): a route's own setting of a kind replaces the
// listener's, and authorization rules of both apply.
type ListenerPolicy struct {
	CORS            *CORS            `json:"cors,omitempty"`
	OIDC            Unsupported      `json:"oidc,omitzero"`
	JWTAuth         *JWTAuth         `json:"jwtAuth,omitempty"`
	Authorization   *CELRuleSet      `json:"authorization,omitempty"`
	ExtAuthz        *ExtAuthz        `json:"extAuthz,omitempty"`
	ExtProc         *ExtProc         `json:"extProc,omitempty"`
	Transformations *Transformations `json:"transformations,omitempty"`
	BasicAuth       *BasicAuth       `json:"basicAuth,omitempty"`
	APIKey          *APIKeyAuth      `json:"apiKey,omitempty"`
}

// Route is one HTTP route of a listener.
type Route struct {
	Name      string         `json:"name,omitempty"`
	Namespace string         `json:"namespace,omitempty"`
	RuleName  string         `json:"ruleName,omitempty"`
	Hostnames []string       `json:"hostnames,omitempty"`
	Matches   []RouteMatch   `json:"matches,omitempty"`
	Policies  *RoutePolicies `json:"policies,omitempty"`
	Backends  []RouteBackend `json:"backends,omitempty"`

	// at is the path of the route Parse attached to the listener (a
	// top-level route, the llm or mcp section: SourcePath); "" for a route
	// written under its listener.
	at string
}

// RouteMatch selects requests; all fields of one match must hold.
type RouteMatch struct {
	Path    *PathMatch   `json:"path,omitempty"`
	Method  string       `json:"method,omitempty"`
	Headers []ValueMatch `json:"headers,omitempty"`
	Query   []ValueMatch `json:"query,omitempty"`
}

// ValueMatch matches a header or query parameter by name and value.
type ValueMatch struct {
	Name  string      `json:"name" cfg:"required,minLen=1"`
	Value StringMatch `json:"value" cfg:"required"`
}

// FrontendPolicies is the top-level `frontendPolicies:` section.
type FrontendPolicies struct {
	HTTP                 *FrontendHTTP    `json:"http,omitempty"`
	TLS                  *FrontendTLS     `json:"tls,omitempty"`
	TCP                  *FrontendTCP     `json:"tcp,omitempty"`
	NetworkAuthorization *CELRuleSet      `json:"networkAuthorization,omitempty"`
	NetworkExtAuthz      *NetworkExtAuthz `json:"networkExtAuthz,omitempty"`
	Proxy                *ProxyProtocol   `json:"proxy,omitempty"`
	ProxyProtocol        *ProxyProtocol   `json:"proxyProtocol,omitempty"`
	Connect              Unsupported      `json:"connect,omitzero"`
	AccessLog            *AccessLogPolicy `json:"accessLog,omitempty"`
	Logging              Unsupported      `json:"logging,omitzero"`
	Tracing              *FrontendTracing `json:"tracing,omitempty"`
}

// FrontendHTTP tunes how incoming HTTP is handled.
type FrontendHTTP struct {
	MaxBufferSize         *int        `json:"maxBufferSize,omitempty" cfg:"min=1"`
	HTTP1MaxHeaders       *int        `json:"http1MaxHeaders,omitempty" cfg:"min=1,max=4096"`
	HTTP1IdleTimeout      *Duration   `json:"http1IdleTimeout,omitempty"`
	HTTP1HeaderCase       Unsupported `json:"http1HeaderCase,omitzero"`
	MaxConnectionDuration *Duration   `json:"maxConnectionDuration,omitempty"`
	// HTTP2WindowSize is the initial flow-control window of each HTTP/2
	// stream a client opens (the request body the gateway takes before the
	// client must wait); HTTP2ConnectionWindowSize the connection's.
	HTTP2WindowSize           *int `json:"http2WindowSize,omitempty" cfg:"min=1,max=2147483647"`
	HTTP2ConnectionWindowSize *int `json:"http2ConnectionWindowSize,omitempty" cfg:"min=1,max=2147483647"`
	// HTTP2FrameSize is the largest frame a client may send. The maximum
	// is the spec's as declared (1677215, where HTTP/2's own is 16777215):
	// a file valid here stays valid there.
	HTTP2FrameSize *int `json:"http2FrameSize,omitempty" cfg:"min=16384,max=1677215"`
	// HTTP2MaxHeaderSize bounds a request's header list (names, values and
	// 32 bytes per field, as HTTP/2 counts it; SETTINGS_MAX_HEADER_LIST_SIZE).
	HTTP2MaxHeaderSize *int `json:"http2MaxHeaderSize,omitempty" cfg:"min=1"`
	// HTTP2KeepaliveInterval pings a client connection that sent nothing for
	// that long; HTTP2KeepaliveTimeout closes it when the ping goes
	// unanswered that long (default 15s).
	HTTP2KeepaliveInterval *Duration `json:"http2KeepaliveInterval,omitempty"`
	HTTP2KeepaliveTimeout  *Duration `json:"http2KeepaliveTimeout,omitempty"`
	// PathNormalization is our extension (agentgateway has no such field):
	// "normalize" (the default) matches, rewrites and forwards the request
	// path in normal form (dot segments removed, slashes merged, unreserved
	// characters decoded, escapes upper-cased) and refuses an encoded "/" or
	// "\", a literal "\" and a malformed escape with 400; "raw" keeps the
	// path as received, for upstreams that need its exact bytes.
	PathNormalization string `json:"pathNormalization,omitempty" cfg:"enum=normalize|raw"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*FrontendHTTP) FieldRules() {}

// Validate refuses an HTTP/2 connection window below the one every
// connection starts with (RFC 9113 6.9.2: 65,535 bytes), which a server can
// only enlarge: a smaller value would be a setting that does nothing.
func (h *FrontendHTTP) Validate(v *decode.Validation) {
	if h.HTTP2ConnectionWindowSize != nil && *h.HTTP2ConnectionWindowSize < 65535 {
		v.Errorf("http2ConnectionWindowSize", "must be at least 65535: an HTTP/2 connection's window starts at 65,535 bytes and cannot be made smaller")
	}
	if h.HTTP2KeepaliveTimeout != nil && h.HTTP2KeepaliveInterval == nil {
		v.Errorf("http2KeepaliveTimeout", "needs http2KeepaliveInterval: without it no ping is sent")
	}
}
