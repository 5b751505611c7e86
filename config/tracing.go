package config

import (
	"strconv"

	"github.com/relaygate/gateway/config/decode"
)

// Tracing is `config.tracing`: spans of every request exported over OTLP,
// with W3C trace context taken from and passed to the backends.
type Tracing struct {
	// OTLPEndpoint is the collector's URL (http://collector:4317;
	// collector:4317 is https://collector:4317), required unless the environment gives it (OTLP_ENDPOINT and the
	// like, env.go), which wins; Parse leaves the URL in effect here.
	OTLPEndpoint string `json:"otlpEndpoint"`
	// Headers go with every export (an authentication header, say).
	Headers map[string]SecretString `json:"headers,omitempty" cfg:"maxItems=32"`
	// OTLPProtocol is grpc (the default) or http.
	OTLPProtocol string `json:"otlpProtocol,omitempty" cfg:"enum=grpc|http"`
	// Path is the HTTP protocol's path (default /v1/traces).
	Path string `json:"path,omitempty"`
	// Fields adds span attributes computed by CEL and removes built-in
	// ones (agentgateway turns them into frontendPolicies.tracing's
	// attributes and remove).
	Fields *TracingFields `json:"fields,omitempty"`
	// RandomSampling decides whether a request without a trace starts one:
	// true or false, a probability, or a CEL expression giving either
	// (default false).
	RandomSampling *Sampling `json:"randomSampling,omitempty"`
	// ClientSampling decides whether a request that carries a trace is
	// traced (default true).
	ClientSampling *Sampling `json:"clientSampling,omitempty"`
}

// Validate checks the header names. (The endpoint, which the environment
// may give, is checked with it: Tracing.applyEnv.)
func (t *Tracing) Validate(v *decode.Validation) {
	for name := range t.Headers {
		if !validHeaderName(name) {
			v.Errorf("headers."+name, "invalid header name %q", name)
		}
	}
}

// TracingFields is config.tracing.fields.
type TracingFields struct {
	// Add sets an attribute per entry on every span of a request, its
	// value by CEL (TelemetryCELEnv) once the request is answered; one that
	// fails or gives null is left out. "span.name", given a string, names
	// the span instead.
	Add map[string]TelemetryExpression `json:"add,omitempty" cfg:"maxItems=64"`
	// Remove leaves out the built-in attributes of these names.
	Remove []string `json:"remove,omitempty" cfg:"maxItems=64"`
}

// Validate checks the attribute names.
func (f *TracingFields) Validate(v *decode.Validation) {
	attributeNames(v, "add", mapKeys(f.Add))
	attributeNames(v, "remove", f.Remove)
}

// FrontendTracing is `frontendPolicies.tracing` (agentgateway's
// TracingConfig): spans of every request exported over OTLP to the
// collector at host (or the named host backend), with attributes and
// resources computed by CEL. config.tracing is the older form of the same
// setting; only one of them may be given.
type FrontendTracing struct {
	Host     string             `json:"host,omitempty"`
	Backend  string             `json:"backend,omitempty"`
	Service  Unsupported        `json:"service,omitzero"`
	Policies *CollectorPolicies `json:"policies,omitempty"`
	// Attributes are set on every request span, by CEL once the request is
	// answered (as config.tracing.fields.add).
	Attributes map[string]TelemetryExpression `json:"attributes,omitempty" cfg:"maxItems=64"`
	// Resources are the exporter's resource attributes, by CEL evaluated
	// once, without a request: `service.name` names the service.
	Resources map[string]TelemetryExpression `json:"resources,omitempty" cfg:"maxItems=64"`
	// Remove leaves out the built-in attributes of these names.
	Remove         []string  `json:"remove,omitempty" cfg:"maxItems=64"`
	RandomSampling *Sampling `json:"randomSampling,omitempty"`
	ClientSampling *Sampling `json:"clientSampling,omitempty"`
	// Filter exports a sampled request's spans only when it holds (a
	// failing one drops them).
	Filter *TelemetryCondition `json:"filter,omitempty"`
	// Path is the HTTP protocol's path (default /v1/traces).
	Path string `json:"path,omitempty"`
	// Protocol is grpc (the default) or http.
	Protocol string `json:"protocol,omitempty" cfg:"enum=grpc|http"`
}

// Validate checks the collector and the attribute names.
func (t *FrontendTracing) Validate(v *decode.Validation) {
	validateCollector(v, t.Host, &t.Backend, t.Service.Set, t.Path)
	attributeNames(v, "attributes", mapKeys(t.Attributes))
	attributeNames(v, "resources", mapKeys(t.Resources))
	attributeNames(v, "remove", t.Remove)
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Sampling is a bool, a probability (0..1) or a CEL expression giving
// either (agentgateway's StringBoolFloat).
type Sampling struct {
	Const *float64 // 0 or 1 for false and true
	Expr  string
}

// DecodeNode decodes the union.
func (s *Sampling) DecodeNode(n *decode.Node) {
	if b, ok := n.Bool(); ok {
		p := 0.0
		if b {
			p = 1
		}
		s.Const = &p
		return
	}
	if f, ok := n.Float(); ok {
		if f < 0 || f > 1 {
			n.Errorf("a probability must be between 0 and 1")
			return
		}
		s.Const = &f
		return
	}
	if i, ok := n.Int(); ok {
		if i != 0 && i != 1 {
			n.Errorf("a probability must be between 0 and 1")
			return
		}
		f := float64(i)
		s.Const = &f
		return
	}
	expr, ok := n.String()
	if !ok || expr == "" {
		n.Errorf("expected true, false, a probability or a CEL expression")
		return
	}
	if f, err := strconv.ParseFloat(expr, 64); err == nil && f >= 0 && f <= 1 {
		s.Const = &f
		return
	}
	if _, err := CompileValueExpression(expr, false); err != nil {
		n.Errorf("%v", err)
		return
	}
	s.Expr = expr
}

// MarshalJSON writes the file form, an expression's literals redacted
// (redactCEL).
func (s Sampling) MarshalJSON() ([]byte, error) {
	if s.Const != nil {
		return []byte(strconv.FormatFloat(*s.Const, 'g', -1, 64)), nil
	}
	return jsonString(redactCEL(s.Expr)), nil
}
