package config

import "github.com/relaygate/gateway/config/decode"

// RemoteRateLimit is `policies.remoteRateLimit`: limits kept by a rate limit
// service speaking Envoy's envoy.service.ratelimit.v3 protocol (Lyft's and
// Envoy's ratelimit, ...), so that they hold across gateway replicas.
type RemoteRateLimit struct {
	Host     string      `json:"host,omitempty"`
	Backend  string      `json:"backend,omitempty"`
	Service  Unsupported `json:"service,omitzero"`
	Policies Unsupported `json:"policies,omitzero"`
	// Domain is sent with every request to the service.
	Domain      string                `json:"domain" cfg:"required,minLen=1"`
	Descriptors []RateLimitDescriptor `json:"descriptors" cfg:"required,minItems=1,maxItems=16"`
	// FailureMode is failClosed (the default: 500 when the service cannot
	// answer) or failOpen; PascalCase is accepted too.
	FailureMode string                       `json:"failureMode,omitempty" cfg:"enum=failClosed|FailClosed|failOpen|FailOpen"`
	Conditional []ConditionalRemoteRateLimit `json:"conditional,omitempty" cfg:"maxItems=64"`
}

// DecodeNode decodes the kind or its conditional form.
func (r *RemoteRateLimit) DecodeNode(n *decode.Node) {
	type plain RemoteRateLimit
	var cond struct {
		Conditional []ConditionalRemoteRateLimit `json:"conditional" cfg:"required,maxItems=64"`
	}
	decodeEitherForm(n, (*plain)(r), &cond)
	if cond.Conditional != nil {
		r.Conditional = cond.Conditional
	}
}

// Validate enforces exactly one service.
func (r *RemoteRateLimit) Validate(v *decode.Validation) {
	if r.Conditional != nil {
		conds := make([]ValueCondition, len(r.Conditional))
		nested := make([]bool, len(r.Conditional))
		for i, c := range r.Conditional {
			conds[i], nested[i] = c.Condition, c.Conditional != nil
		}
		checkConditional(v, conds, nested)
		return
	}
	r.Backend = backendRefName(r.Backend)
	switch {
	case r.Host == "" && r.Backend == "" && !r.Service.Set:
		v.Errorf("", "exactly one of host, backend, service is required")
	case r.Host != "" && r.Backend != "":
		v.Errorf("", "only one of host, backend may be set")
	case r.Host != "":
		if err := checkHostPort(r.Host); err != nil {
			v.Errorf("host", "%v", err)
		}
	}
}

// FailOpen reports whether requests pass when the service cannot answer.
func (r *RemoteRateLimit) FailOpen() bool {
	return r.FailureMode == "failOpen" || r.FailureMode == "FailOpen"
}

// RateLimitDescriptor is one descriptor: entries whose values CEL computes
// from the request.
type RateLimitDescriptor struct {
	Entries []RateLimitEntry `json:"entries" cfg:"required,minItems=1,maxItems=16"`
	// Type is requests (the default: each request counts when it comes)
	// or tokens (an LLM request's input and output tokens count once its
	// answer is complete, and a request is refused while the limit is
	// already spent).
	Type string `json:"type,omitempty" cfg:"enum=requests|tokens"`
	// Cost is how many hits a request counts for (type requests; default
	// 1).
	Cost *ValueExpression `json:"cost,omitempty"`
	// LimitOverride tells the service the limit to apply: a map with
	// `unit` (second, minute, hour, day, month or year) and
	// `requestsPerUnit` (`{"unit": "minute", "requestsPerUnit":
	// apiKey.quota}`). A descriptor whose override fails to evaluate, or is
	// not such a map, is left out.
	LimitOverride *ValueExpression `json:"limitOverride,omitempty"`
}

// Validate refuses a cost on token descriptors: their cost is the tokens.
func (d *RateLimitDescriptor) Validate(v *decode.Validation) {
	if d.Type == "tokens" && d.Cost != nil {
		v.Errorf("cost", "not supported yet with type tokens (the cost is the request's tokens)")
	}
}

// RateLimitEntry is a descriptor entry: a key and its value by CEL.
type RateLimitEntry struct {
	Key   string          `json:"key" cfg:"required,minLen=1"`
	Value ValueExpression `json:"value" cfg:"required"`
}
