package config

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/relaygate/gateway/config/decode"
)

// ExtProc is `policies.extProc`: an external processing service (Envoy's
// ext_proc v3, over gRPC) sees the request's and the response's headers and
// bodies, as the processing options say, and may change them or answer the
// request itself. The service is `host` ("host:port") or a named `backend`.
type ExtProc struct {
	Host     string      `json:"host,omitempty"`
	Backend  string      `json:"backend,omitempty"`
	Service  Unsupported `json:"service,omitzero"`
	Policies Unsupported `json:"policies,omitzero"`
	// FailureMode is failClosed (the default: 500 when the service fails)
	// or failOpen (the request goes on unprocessed, when nothing of it was
	// handed to the service yet).
	FailureMode string `json:"failureMode,omitempty" cfg:"enum=failClosed|failOpen"`
	// MetadataContext is sent as metadata_context.filter_metadata: a
	// namespace, then keys whose values CEL computes from the request.
	MetadataContext ExtProcMetadataContext `json:"metadataContext,omitempty" cfg:"maxItems=64"`
	// RequestAttributes and ResponseAttributes are sent as the attributes
	// of the first message of each direction, under the namespace
	// "envoy.filters.http.ext_proc".
	RequestAttributes  map[string]ValueExpression `json:"requestAttributes,omitempty" cfg:"maxItems=64"`
	ResponseAttributes map[string]ValueExpression `json:"responseAttributes,omitempty" cfg:"maxItems=64"`
	ProcessingOptions  *ExtProcOptions            `json:"processingOptions,omitempty"`
	Conditional        []ConditionalExtProc       `json:"conditional,omitempty" cfg:"maxItems=64"`
}

// DecodeNode decodes the kind or its conditional form.
func (e *ExtProc) DecodeNode(n *decode.Node) {
	type plain ExtProc
	var cond struct {
		Conditional []ConditionalExtProc `json:"conditional" cfg:"required,maxItems=64"`
	}
	decodeEitherForm(n, (*plain)(e), &cond)
	if cond.Conditional != nil {
		e.Conditional = cond.Conditional
	}
}

// Validate enforces exactly one service.
func (e *ExtProc) Validate(v *decode.Validation) {
	if e.Conditional != nil {
		checkConditional(v, e.Conditional, func(c *ConditionalExtProc) (ValueCondition, bool) { return c.Condition, c.Conditional != nil })
		return
	}
	checkService(v, e.Host, &e.Backend, e.Service.Set)
	for _, ns := range slices.Sorted(maps.Keys(e.MetadataContext)) {
		if len(e.MetadataContext[ns]) > 64 {
			v.Errorf("metadataContext."+ns, "at most 64 keys")
		}
	}
}

// ExtProcGRPCMetadata is the metadataContext namespace whose keys and
// (string) values are sent as the stream's gRPC metadata, headers of the
// call to the service (agentgateway's reserved namespace).
const ExtProcGRPCMetadata = "agentgateway.dev.grpc_initial_metadata"

// ExtProcMetadataContext is extProc's metadataContext: namespaces of keys
// whose values CEL computes. The keys of ExtProcGRPCMetadata are header
// names, whose expressions /config_dump redacts as other header values
// (HeaderExpressions): a service may authenticate its callers by them.
type ExtProcMetadataContext map[string]map[string]ValueExpression

// MarshalJSON writes the namespaces with the gRPC metadata of sensitive
// headers (SensitiveHeader) redacted.
func (m ExtProcMetadataContext) MarshalJSON() ([]byte, error) {
	out := map[string]map[string]ValueExpression(m)
	if md, ok := m[ExtProcGRPCMetadata]; ok {
		out = maps.Clone(out)
		out[ExtProcGRPCMetadata] = redactHeaderMap(md, redactedExpression)
	}
	return json.Marshal(out)
}

// FailOpen reports whether a request goes on unprocessed when the service
// fails.
func (e *ExtProc) FailOpen() bool { return e.FailureMode == "failOpen" }

// Options returns the processing options with their defaults filled in.
func (e *ExtProc) Options() ExtProcOptions {
	o := ExtProcOptions{}
	if e.ProcessingOptions != nil {
		o = *e.ProcessingOptions
	}
	for _, m := range []*string{&o.RequestBodyMode, &o.ResponseBodyMode} {
		if *m == "" {
			*m = ExtProcFullDuplex
		}
	}
	for _, m := range []*string{&o.RequestHeaderMode, &o.ResponseHeaderMode, &o.RequestTrailerMode, &o.ResponseTrailerMode} {
		if *m == "" {
			*m = "send"
		}
	}
	return o
}

// The body send modes.
const (
	ExtProcBodyNone        = "none"
	ExtProcBuffered        = "buffered"
	ExtProcBufferedPartial = "bufferedPartial"
	ExtProcFullDuplex      = "fullDuplexStreamed"
)

// ExtProcOptions is extProc's processingOptions: which parts of the
// exchange go to the service and how.
type ExtProcOptions struct {
	// RequestBodyMode and ResponseBodyMode: none, buffered (the whole
	// body, up to frontendPolicies.http.maxBufferSize, in one message),
	// bufferedPartial (at most that much; the rest passes unprocessed) or
	// fullDuplexStreamed (the default: chunks as they come, the service
	// answering with the chunks to send on).
	RequestBodyMode  string `json:"requestBodyMode,omitempty" cfg:"enum=none|buffered|bufferedPartial|fullDuplexStreamed"`
	ResponseBodyMode string `json:"responseBodyMode,omitempty" cfg:"enum=none|buffered|bufferedPartial|fullDuplexStreamed"`
	// RequestHeaderMode and ResponseHeaderMode: send (the default) or
	// skip.
	RequestHeaderMode  string `json:"requestHeaderMode,omitempty" cfg:"enum=send|skip"`
	ResponseHeaderMode string `json:"responseHeaderMode,omitempty" cfg:"enum=send|skip"`
	// RequestTrailerMode and ResponseTrailerMode: send (the default) or
	// skip. Trailers (HTTP/1.1 chunked, HTTP/2, gRPC's) are not sent to
	// the service yet: they pass on unprocessed either way, and an
	// explicit send is warned about when the policy compiles.
	RequestTrailerMode  string `json:"requestTrailerMode,omitempty" cfg:"enum=send|skip"`
	ResponseTrailerMode string `json:"responseTrailerMode,omitempty" cfg:"enum=send|skip"`
	// AllowModeOverride lets the service change the body and response
	// header modes in its answer to a headers message.
	AllowModeOverride bool `json:"allowModeOverride,omitempty"`
}
