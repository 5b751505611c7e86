package config

import (
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/relaygate/gateway/config/decode"
)

// RoutePolicies is `routes[].policies` (agentgateway's FilterOrPolicy).
type RoutePolicies struct {
	RequestHeaderModifier  *HeaderModifier  `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *HeaderModifier  `json:"responseHeaderModifier,omitempty"`
	RequestRedirect        *RequestRedirect `json:"requestRedirect,omitempty"`
	URLRewrite             *URLRewrite      `json:"urlRewrite,omitempty"`
	RequestMirror          *RequestMirror   `json:"requestMirror,omitempty"`
	DirectResponse         *DirectResponse  `json:"directResponse,omitempty"`
	CORS                   *CORS            `json:"cors,omitempty"`
	CSRF                   *CSRF            `json:"csrf,omitempty"`
	Timeout                *Timeout         `json:"timeout,omitempty"`
	Retry                  *Retry           `json:"retry,omitempty"`

	MCPAuthorization  *CELRuleSet        `json:"mcpAuthorization,omitempty"`
	MCPGuardrails     Unsupported        `json:"mcpGuardrails,omitzero"`
	Authorization     *CELRuleSet        `json:"authorization,omitempty"`
	MCPAuthentication *MCPAuthentication `json:"mcpAuthentication,omitempty"`
	A2A               Unsupported        `json:"a2a,omitzero"`
	AI                *AIPolicy          `json:"ai,omitempty"`
	BackendTLS        *BackendTLS        `json:"backendTLS,omitempty"`
	BackendTunnel     Unsupported        `json:"backendTunnel,omitzero"`
	BackendAuth       *BackendAuth       `json:"backendAuth,omitempty"`
	LocalRateLimit    *LocalRateLimit    `json:"localRateLimit,omitempty"`
	RemoteRateLimit   *RemoteRateLimit   `json:"remoteRateLimit,omitempty"`
	JWTAuth           *JWTAuth           `json:"jwtAuth,omitempty"`
	OIDC              Unsupported        `json:"oidc,omitzero"`
	BasicAuth         *BasicAuth         `json:"basicAuth,omitempty"`
	APIKey            *APIKeyAuth        `json:"apiKey,omitempty"`
	ExtAuthz          *ExtAuthz          `json:"extAuthz,omitempty"`
	ExtProc           *ExtProc           `json:"extProc,omitempty"`
	Transformations   *Transformations   `json:"transformations,omitempty"`
	Buffer            Unsupported        `json:"buffer,omitzero"`
	Delay             *Delay             `json:"delay,omitempty"`
}

// BackendPolicies is `backends[].policies` (agentgateway's LocalBackendPolicies).
type BackendPolicies struct {
	RequestHeaderModifier  *HeaderModifier  `json:"requestHeaderModifier,omitempty"`
	ResponseHeaderModifier *HeaderModifier  `json:"responseHeaderModifier,omitempty"`
	RequestRedirect        *RequestRedirect `json:"requestRedirect,omitempty"`
	HTTP                   *BackendHTTP     `json:"http,omitempty"`
	TCP                    *BackendTCP      `json:"tcp,omitempty"`

	Transformations  Unsupported  `json:"transformations,omitzero"`
	BackendTLS       *BackendTLS  `json:"backendTLS,omitempty"`
	BackendAuth      *BackendAuth `json:"backendAuth,omitempty"`
	BackendTunnel    Unsupported  `json:"backendTunnel,omitzero"`
	Health           Unsupported  `json:"health,omitzero"`
	ExtAuthz         Unsupported  `json:"extAuthz,omitzero"`
	Authorization    Unsupported  `json:"authorization,omitzero"`
	MCPAuthorization Unsupported  `json:"mcpAuthorization,omitzero"`
	MCPGuardrails    Unsupported  `json:"mcpGuardrails,omitzero"`
	A2A              Unsupported  `json:"a2a,omitzero"`
	InferenceRouting Unsupported  `json:"inferenceRouting,omitzero"`
	SessionAffinity  Unsupported  `json:"sessionAffinity,omitzero"`
	AI               *AIPolicy    `json:"ai,omitempty"`
}

// HeaderModifier adds, sets and removes headers.
type HeaderModifier struct {
	Add    HeaderValues `json:"add,omitempty"`
	Set    HeaderValues `json:"set,omitempty"`
	Remove []string     `json:"remove,omitempty"`
}

// Validate checks header names.
// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*HeaderModifier) FieldRules() {}

func (h *HeaderModifier) Validate(v *decode.Validation) {
	for _, name := range slices.Sorted(maps.Keys(h.Add)) {
		switch {
		case !validHeaderName(name):
			v.Errorf(decode.JoinKey("add", name), "invalid header name")
		case framingHeader(name):
			v.Errorf(decode.JoinKey("add", name), errFraming)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(h.Set)) {
		switch {
		case !validHeaderName(name):
			v.Errorf(decode.JoinKey("set", name), "invalid header name")
		case framingHeader(name):
			v.Errorf(decode.JoinKey("set", name), errFraming)
		}
	}
	for i, name := range h.Remove {
		switch {
		case !validHeaderName(name):
			v.Errorf(indexPath("remove", i), "invalid header name %q", name)
		case framingHeader(name):
			v.Errorf(indexPath("remove", i), errFraming)
		}
	}
}

// RequestRedirect answers with a redirect built from the request URL.
type RequestRedirect struct {
	Scheme    string       `json:"scheme,omitempty" cfg:"pattern=^[A-Za-z][A-Za-z0-9+.-]*$"`
	Authority *HostRewrite `json:"authority,omitempty"`
	Path      *PathRewrite `json:"path,omitempty"`
	Status    *int         `json:"status,omitempty"`
}

// Validate checks the redirect status: any 3xx, as agentgateway takes any
// status there (and a redirect outside 3xx would not be one).
// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*RequestRedirect) FieldRules() {}

func (r *RequestRedirect) Validate(v *decode.Validation) {
	if r.Status != nil && (*r.Status < 300 || *r.Status > 399) {
		v.Errorf("status", "must be a redirect status (300..399)")
	}
}

// URLRewrite rewrites the path or authority before forwarding.
type URLRewrite struct {
	Authority *HostRewrite `json:"authority,omitempty"`
	Path      *PathRewrite `json:"path,omitempty"`
}

// RequestMirror sends a copy of a share of requests to another backend; its
// response is discarded.
type RequestMirror struct {
	Backend    MirrorBackend `json:"backend" cfg:"required"`
	Percentage *float64      `json:"percentage" cfg:"required,min=0,max=1"`
}

// MirrorBackend is the `backend` of a mirror: a `host` or a named `backend`.
type MirrorBackend struct {
	Host    string      `json:"host,omitempty"`
	Backend string      `json:"backend,omitempty"`
	Service Unsupported `json:"service,omitzero"`
}

// Validate enforces exactly one of host and backend, and reads a backend
// reference as route backends do (backendRefName).
func (m *MirrorBackend) Validate(v *decode.Validation) {
	m.Backend = backendRefName(m.Backend)
	switch {
	case m.Host == "" && m.Backend == "" && !m.Service.Set:
		v.Errorf("", "exactly one of host, backend is required")
	case m.Host != "" && m.Backend != "":
		v.Errorf("", "only one of host, backend may be set")
	case m.Host != "":
		if err := checkHostPort(m.Host); err != nil {
			v.Errorf("host", "%v", err)
		}
	}
}

// DirectResponse answers without contacting a backend.
type DirectResponse struct {
	Body           Bytes       `json:"body,omitempty"`
	Status         *int        `json:"status" cfg:"min=200,max=599"`
	BodyExpression Unsupported `json:"bodyExpression,omitzero"`
	Headers        Unsupported `json:"headers,omitzero"`
	// Conditional is the other form: the first entry whose condition holds
	// (or that has none, the last) answers; when none does, the request
	// goes on.
	Conditional []ConditionalDirectResponse `json:"conditional,omitempty" cfg:"maxItems=64"`
}

// Validate requires a status, except in the conditional form (refused as
// not supported yet on its own), and bounds the bodies.
func (d *DirectResponse) Validate(v *decode.Validation) {
	checkDirectBody(v, "body", d.Body)
	switch {
	case d.Conditional != nil && (d.Status != nil || len(d.Body) > 0):
		v.Errorf("conditional", "not allowed together with status and body (set them on each entry)")
	case d.Conditional == nil && d.Status == nil:
		v.Errorf("status", "required")
	}
	if d.Status != nil && len(d.Body) > 0 && noContentStatus(*d.Status) {
		v.Errorf("body", "a %d answer carries no content (RFC 9110 15.3.5, 15.3.6, 15.4.5): remove the body", *d.Status)
	}
	for i, c := range d.Conditional {
		checkDirectBody(v, indexPath("conditional", i)+".body", c.Body)
		if c.Condition == "" && i != len(d.Conditional)-1 {
			v.Errorf(indexPath("conditional", i)+".condition", "required: only the last entry may go without a condition")
		}
		if c.Status != nil && len(c.Body) > 0 && noContentStatus(*c.Status) {
			v.Errorf(indexPath("conditional", i)+".body", "a %d answer carries no content (RFC 9110 15.3.5, 15.3.6, 15.4.5): remove the body", *c.Status)
		}
	}
}

// maxDirectBody is the schema's bound on a direct response body, in
// characters.
const maxDirectBody = 4096

// checkDirectBody holds a direct response body, when given, to the
// schema's 1..maxDirectBody characters (bytes that are not UTF-8 count one
// each). An empty body is refused rather than taken as none: omitting the
// key says that.
func checkDirectBody(v *decode.Validation, path string, body Bytes) {
	switch n := utf8.RuneCount(body); {
	case body == nil: // omitted: no body
	case n == 0:
		v.Errorf(path, "must not be empty (omit it for an answer without a body)")
	case n > maxDirectBody:
		v.Errorf(path, "must be at most %d characters, not %d", maxDirectBody, n)
	}
}

// noContentStatus reports whether an answer of status has no content:
// 204, 205 and 304.
func noContentStatus(status int) bool { return status == 204 || status == 205 || status == 304 }

// ConditionalDirectResponse is one entry of a conditional direct response.
type ConditionalDirectResponse struct {
	// Condition is a ValueCELEnv expression (random() allowed); unset,
	// the entry always answers.
	Condition ValueCondition `json:"condition,omitempty"`
	Status    *int           `json:"status" cfg:"required,min=200,max=599"`
	Body      Bytes          `json:"body,omitempty"`
	// BodyExpression and Headers are the plain form's, not built there
	// either.
	BodyExpression Unsupported `json:"bodyExpression,omitzero"`
	Headers        Unsupported `json:"headers,omitzero"`
}

// CORS answers preflight requests and decorates responses with CORS headers.
type CORS struct {
	AllowCredentials bool      `json:"allowCredentials,omitempty"`
	AllowHeaders     []string  `json:"allowHeaders,omitempty"`
	AllowMethods     []string  `json:"allowMethods,omitempty"`
	AllowOrigins     []string  `json:"allowOrigins,omitempty"`
	ExposeHeaders    []string  `json:"exposeHeaders,omitempty"`
	MaxAge           *Duration `json:"maxAge,omitempty"`
}

// CSRF rejects cross-origin state-changing browser requests.
type CSRF struct {
	AdditionalOrigins []string `json:"additionalOrigins,omitempty" cfg:"maxItems=16"`
}

// Timeout bounds the whole request and each backend attempt.
type Timeout struct {
	RequestTimeout        *Duration `json:"requestTimeout,omitempty"`
	BackendRequestTimeout *Duration `json:"backendRequestTimeout,omitempty"`
}

// Retry retries failed upstream attempts.
type Retry struct {
	Attempts *int      `json:"attempts,omitempty" cfg:"min=1,max=255"`
	Backoff  *Duration `json:"backoff,omitempty"`
	Codes    []int     `json:"codes,omitempty"`
	// Precondition, false for a request, makes one attempt only (and
	// spares buffering its body for a replay).
	Precondition *ValueCondition `json:"precondition,omitempty"`
	// Condition retries a response it holds for, beside those of Codes.
	Condition *ValueCondition `json:"condition,omitempty"`
}

// Validate checks status codes.
// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*Retry) FieldRules() {}

func (r *Retry) Validate(v *decode.Validation) {
	if len(r.Codes) == 0 && r.Condition == nil {
		v.Errorf("codes", "required (or a condition)")
	}
	for i, c := range r.Codes {
		if c < 100 || c > 999 {
			v.Errorf(indexPath("codes", i), "must be an HTTP status code (100..999)")
		}
	}
}

// BackendHTTP is the `http` backend policy.
type BackendHTTP struct {
	// Version is the HTTP version spoken to the backend, as agentgateway's
	// files write it ("HTTP/1.1", "HTTP/2.0") or as the resources' enum
	// does ("HTTP1", "HTTP2").
	Version        string    `json:"version,omitempty"`
	RequestTimeout *Duration `json:"requestTimeout,omitempty"`
}

// HTTP2 reports whether the backend is to be spoken to in HTTP/2; set
// reports whether the version was given at all (unset, the request
// decides: server/h2upstream.go).
func (h *BackendHTTP) HTTP2() (h2, set bool) {
	switch h.Version {
	case "HTTP2", "HTTP/2.0":
		return true, true
	case "":
		return false, false
	}
	return false, true
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*BackendHTTP) FieldRules() {}

// Validate accepts HTTP/1.1 and HTTP/2, the versions the upstream path
// speaks.
func (h *BackendHTTP) Validate(v *decode.Validation) {
	switch h.Version {
	case "", "HTTP1", "HTTP/1.1", "HTTP2", "HTTP/2.0":
	case "HTTP/1.0", "HTTP/0.9", "HTTP/3.0":
		v.Errorf("version", "%s is not supported yet", h.Version)
	default:
		v.Errorf("version", "must be one of: HTTP/1.1, HTTP/2.0, HTTP/1.0, HTTP/0.9, HTTP/3.0, HTTP1, HTTP2")
	}
}

// BackendTCP is the `tcp` backend policy.
type BackendTCP struct {
	Keepalives     *Keepalive `json:"keepalives" cfg:"required"`
	ConnectTimeout *Duration  `json:"connectTimeout" cfg:"required"`
}
