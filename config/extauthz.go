package config

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"cel.dev/cel-go/cel"

	"github.com/relaygate/gateway/config/decode"
)

// ExtAuthz is `policies.extAuthz`: ask an external service whether a
// request may pass (Envoy's ext_authz, over gRPC or HTTP). The service is
// `host` ("host:port") or a named `backend` (a host backend).
type ExtAuthz struct {
	Host     string      `json:"host,omitempty"`
	Backend  string      `json:"backend,omitempty"`
	Service  Unsupported `json:"service,omitzero"`
	Policies Unsupported `json:"policies,omitzero"`
	// Protocol is gRPC (the default, Envoy's Authorization service) or
	// HTTP.
	Protocol *ExtAuthzProtocol `json:"protocol,omitempty"`
	// FailureMode says what happens when the service cannot decide
	// (unreachable, timed out, a malformed answer): deny (the default,
	// 403), allow, or deny with a status of its own.
	FailureMode ExtAuthzFailureMode `json:"failureMode,omitzero"`
	// IncludeRequestHeaders names the headers (or pseudo-headers :method,
	// :path, :authority, :scheme) sent to the service; unset, gRPC sends
	// every header and HTTP sends Authorization.
	IncludeRequestHeaders []string `json:"includeRequestHeaders,omitempty" cfg:"maxItems=64"`
	// IncludeRequestBody sends the request's body to the service.
	IncludeRequestBody *ExtAuthzBody `json:"includeRequestBody,omitempty"`
	// Cache remembers decisions by a key computed from the request; its
	// safety rests on the key naming everything the service decides on.
	Cache       *ExtAuthzCache        `json:"cache,omitempty"`
	Conditional []ConditionalExtAuthz `json:"conditional,omitempty" cfg:"maxItems=64"`
}

// DecodeNode decodes the kind or its conditional form.
func (e *ExtAuthz) DecodeNode(n *decode.Node) {
	type plain ExtAuthz
	var cond struct {
		Conditional []ConditionalExtAuthz `json:"conditional" cfg:"required,maxItems=64"`
	}
	decodeEitherForm(n, (*plain)(e), &cond)
	if cond.Conditional != nil {
		e.Conditional = cond.Conditional
	}
}

// Validate enforces exactly one service and checks the header names.
func (e *ExtAuthz) Validate(v *decode.Validation) {
	if e.Conditional != nil {
		checkConditional(v, e.Conditional, func(c *ConditionalExtAuthz) (ValueCondition, bool) { return c.Condition, c.Conditional != nil })
		return
	}
	checkService(v, e.Host, &e.Backend, e.Service.Set)
	for i, h := range e.IncludeRequestHeaders {
		if !validPseudoOrHeader(h) {
			v.Errorf(indexPath("includeRequestHeaders", i), "invalid header name %q", h)
		}
	}
}

// validPseudoOrHeader accepts a header name or :method, :path, :authority,
// :scheme.
func validPseudoOrHeader(h string) bool {
	switch h {
	case ":method", ":path", ":authority", ":scheme":
		return true
	}
	return validHeaderName(h)
}

// ExtAuthzBody is how the request's body goes to the service.
type ExtAuthzBody struct {
	// MaxRequestBytes bounds the body sent (default 8192).
	MaxRequestBytes *int `json:"maxRequestBytes,omitempty" cfg:"min=0,max=67108864"`
	// AllowPartialMessage sends the first MaxRequestBytes of a larger body
	// (marked x-envoy-auth-partial-body: true); without it such a request
	// is refused with 413.
	AllowPartialMessage bool `json:"allowPartialMessage,omitempty"`
	// PackAsBytes sends the body as raw_body (gRPC) rather than as text.
	PackAsBytes bool `json:"packAsBytes,omitempty"`
}

// ExtAuthzCache is extAuthz's cache of decisions.
type ExtAuthzCache struct {
	// Key are expressions whose values together make the cache key; a
	// request for which one fails is not cached, nor is any without keys.
	Key []ValueExpression `json:"key" cfg:"required,maxItems=16"`
	// TTL is how long a decision holds, evaluated once it is applied (so
	// it may read extauthz): a duration, or a Unix time (a timestamp or a
	// number of seconds).
	TTL ValueExpression `json:"ttl" cfg:"required"`
	// MaxEntries bounds the cache (default 10000; 0 turns it off).
	MaxEntries *int `json:"maxEntries,omitempty" cfg:"min=0,max=10000000"`
}

// ExtAuthzProtocol is exactly one of grpc and http.
type ExtAuthzProtocol struct {
	GRPC *ExtAuthzGRPC `json:"grpc,omitempty"`
	HTTP *ExtAuthzHTTP `json:"http,omitempty"`
}

// DecodeNode decodes the union.
func (p *ExtAuthzProtocol) DecodeNode(n *decode.Node) {
	type plain ExtAuthzProtocol
	decodeExactlyOne(n, (*plain)(p), "grpc", "http")
}

// ExtAuthzGRPC is the gRPC protocol's settings.
type ExtAuthzGRPC struct {
	// Context is sent as the check's context_extensions.
	Context map[string]string `json:"context,omitempty" cfg:"maxItems=64"`
	// Metadata is sent as metadata_context.filter_metadata, each value
	// computed by CEL from the request.
	Metadata map[string]ValueExpression `json:"metadata,omitempty" cfg:"maxItems=64"`
}

// Validate refuses a metadata expression whose result is known, by its
// type, not to be a map: each entry of the check's
// metadata_context.filter_metadata is an object (a protobuf Struct), and
// such a value would be left out of every check. A result whose type is
// known only when it is computed (request.path is dyn) is said at run
// time instead.
func (g *ExtAuthzGRPC) Validate(v *decode.Validation) {
	for _, key := range slices.Sorted(maps.Keys(g.Metadata)) {
		if t, ok := valueExpressionType(g.Metadata[key]); ok && !metadataResult(t) {
			v.Errorf(decode.JoinKey("metadata", key), "the result is %s, not a map with string keys: each entry of the check's metadata_context.filter_metadata is an object", t)
		}
	}
}

// metadataResult reports whether an expression of result type t may give
// a filter metadata entry: a map with string keys, or a type known only
// when computed.
func metadataResult(t *cel.Type) bool {
	switch t.Kind() {
	case cel.DynKind, cel.AnyKind:
		return true
	case cel.MapKind:
		k := t.Parameters()[0].Kind()
		return k == cel.StringKind || k == cel.DynKind || k == cel.AnyKind
	}
	return false
}

// valueExpressionType is the result type of a ValueCELEnv expression; ok
// is false when it does not compile (which its decoding said).
func valueExpressionType(e ValueExpression) (t *cel.Type, ok bool) {
	env, err := ValueCELEnv()
	if err != nil {
		return nil, false
	}
	ast, iss := env.Compile(string(e))
	if iss.Err() != nil {
		return nil, false
	}
	return ast.OutputType(), true
}

// ExtAuthzHTTP is the HTTP protocol's settings: the request goes to the
// service with the client's method; a 200 answer allows it (another 2xx is
// a service that could not decide, for FailureMode).
type ExtAuthzHTTP struct {
	// Path is the check request's path and query, by CEL; unset, the
	// client's.
	Path *ValueExpression `json:"path,omitempty"`
	// Redirect is where a client refused with 401 or 403 is sent (302),
	// by CEL.
	Redirect *ValueExpression `json:"redirect,omitempty"`
	// Body is the check request's body, by CEL (a string or bytes as they
	// are, anything else as JSON); unset, none.
	Body *ValueExpression `json:"body,omitempty"`
	// IncludeResponseHeaders are copied from an allowing answer into the
	// request forwarded to the backend.
	IncludeResponseHeaders []string `json:"includeResponseHeaders,omitempty" cfg:"maxItems=64"`
	// AddRequestHeaders are set on the check request, by CEL; :method,
	// :path and :authority set the check request's method, path and Host
	// (agentgateway's tailscale example names the local API's host so).
	AddRequestHeaders HeaderValueExpressions `json:"addRequestHeaders,omitempty" cfg:"maxItems=64"`
	// Metadata becomes the extauthz variable of later expressions when the
	// service allows, each value by CEL with `response` the service's
	// answer (code, headers, body).
	Metadata map[string]ValueExpression `json:"metadata,omitempty" cfg:"maxItems=64"`
}

// Validate checks the header names.
func (h *ExtAuthzHTTP) Validate(v *decode.Validation) {
	for i, name := range h.IncludeResponseHeaders {
		switch {
		case !validHeaderName(name):
			v.Errorf(indexPath("includeResponseHeaders", i), "invalid header name %q", name)
		case framingHeader(name):
			v.Errorf(indexPath("includeResponseHeaders", i), "%s describes the service's answer, not the request: it cannot be copied into the request", name)
		}
	}
	for name := range h.AddRequestHeaders {
		if !validHeaderName(name) && name != ":method" && name != ":path" && name != ":authority" {
			v.Errorf("addRequestHeaders."+name, "invalid header name %q", name)
		}
	}
}

// ExtAuthzFailureMode is "deny" (the default), "allow" or
// {denyWithStatus: code}.
type ExtAuthzFailureMode struct {
	Allow bool
	// DenyStatus is the refusal's status; 0 means 403.
	DenyStatus int
}

// DecodeNode decodes the string-or-object union.
func (f *ExtAuthzFailureMode) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		switch strings.TrimSpace(s) {
		case "deny":
		case "allow":
			f.Allow = true
		default:
			n.Errorf("must be deny, allow or {denyWithStatus: code}")
		}
		return
	}
	var o struct {
		DenyWithStatus int `json:"denyWithStatus" cfg:"required,min=200,max=599"`
	}
	if n.Decode(&o) {
		f.DenyStatus = o.DenyWithStatus
	}
}

// IsZero reports the default (deny with 403).
func (f ExtAuthzFailureMode) IsZero() bool { return !f.Allow && f.DenyStatus == 0 }

// MarshalJSON writes the file form.
func (f ExtAuthzFailureMode) MarshalJSON() ([]byte, error) {
	switch {
	case f.Allow:
		return []byte(`"allow"`), nil
	case f.DenyStatus != 0:
		return []byte(`{"denyWithStatus":` + strconv.Itoa(f.DenyStatus) + `}`), nil
	}
	return []byte(`"deny"`), nil
}
