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
		checkConditional(v, r.Conditional, func(c *ConditionalRemoteRateLimit) (ValueCondition, bool) { return c.Condition, c.Conditional != nil })
		return
	}
	checkService(v, r.Host, &r.Backend, r.Service.Set)
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
	// Cost is how many hits a request counts for: for type requests, by
	// CEL over the request (default 1); for type tokens, evaluated once the
	// answer is complete with `llm` too (default llm.totalTokens, so
	// `llm.inputTokens + 4 * llm.outputTokens` weighs output). A cost that
	// fails to evaluate, or is negative, leaves the descriptor out.
	Cost *RateLimitCost `json:"cost,omitempty"`
	// LimitOverride tells the service the limit to apply: a map with
	// `unit` (second, minute, hour, day, month or year) and
	// `requestsPerUnit` (`{"unit": "minute", "requestsPerUnit":
	// apiKey.quota}`). A descriptor whose override fails to evaluate, or is
	// not such a map, is left out.
	LimitOverride *ValueExpression `json:"limitOverride,omitempty"`
}

// Validate compiles the cost in its type's environment.
func (d *RateLimitDescriptor) Validate(v *decode.Validation) {
	if d.Cost == nil {
		return
	}
	var err error
	if d.Type == "tokens" {
		_, err = CompileTelemetryExpression(string(*d.Cost), false)
	} else {
		_, err = CompileValueExpression(string(*d.Cost), false)
	}
	if err != nil {
		v.Errorf("cost", "%v", err)
	}
}

// RateLimitCost is a descriptor's cost expression, compiled by the
// descriptor (Validate), whose type says which variables it may read.
type RateLimitCost string

// DecodeNode takes the expression's text.
func (e *RateLimitCost) DecodeNode(n *decode.Node) {
	if expr, ok := celText(n); ok {
		*e = RateLimitCost(expr)
	}
}

// RateLimitEntry is a descriptor entry: a key and its value by CEL.
type RateLimitEntry struct {
	Key   string          `json:"key" cfg:"required,minLen=1"`
	Value ValueExpression `json:"value" cfg:"required"`
}
