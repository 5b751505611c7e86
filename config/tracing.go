package config

import (
	"net/url"
	"strconv"

	"github.com/relaygate/gateway/config/decode"
)

// Tracing is `config.tracing`: spans of every request exported over OTLP,
// with W3C trace context taken from and passed to the backends.
type Tracing struct {
	// OTLPEndpoint is the collector's URL (http://collector:4317).
	OTLPEndpoint string `json:"otlpEndpoint" cfg:"required"`
	// Headers go with every export (an authentication header, say).
	Headers map[string]SecretString `json:"headers,omitempty" cfg:"maxItems=32"`
	// OTLPProtocol is grpc (the default) or http.
	OTLPProtocol string `json:"otlpProtocol,omitempty" cfg:"enum=grpc|http"`
	// Path is the HTTP protocol's path (default /v1/traces).
	Path   string      `json:"path,omitempty"`
	Fields Unsupported `json:"fields,omitzero"`
	// RandomSampling decides whether a request without a trace starts one:
	// true or false, a probability, or a CEL expression giving either
	// (default false).
	RandomSampling *Sampling `json:"randomSampling,omitempty"`
	// ClientSampling decides whether a request that carries a trace is
	// traced (default true).
	ClientSampling *Sampling `json:"clientSampling,omitempty"`
}

// Validate checks the endpoint.
func (t *Tracing) Validate(v *decode.Validation) {
	u, err := url.Parse(t.OTLPEndpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.Errorf("otlpEndpoint", "must be an http:// or https:// URL")
	}
	for name := range t.Headers {
		if !validHeaderName(name) {
			v.Errorf("headers."+name, "invalid header name %q", name)
		}
	}
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

// MarshalJSON writes the file form.
func (s Sampling) MarshalJSON() ([]byte, error) {
	if s.Const != nil {
		return []byte(strconv.FormatFloat(*s.Const, 'g', -1, 64)), nil
	}
	return jsonString(s.Expr), nil
}
