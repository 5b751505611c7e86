package config

import (
	"encoding/json"
	"reflect"
	"slices"

	"github.com/relaygate/gateway/config/decode"
)

// LocalRateLimit is `localRateLimit` (agentgateway's LocalRateLimitPolicy):
// token buckets kept by each gateway process. The file gives a list of
// buckets, all of which apply, or `{conditional: [...]}`, where the first
// entry whose condition holds applies (an entry without a condition, the
// fallback, comes last).
//
//	localRateLimit: [{maxTokens: 10, tokensPerFill: 1, fillInterval: 1s}]
//	localRateLimit: {conditional: [{condition: 'jwt.tier == "free"', maxTokens: 10, ...}, {maxTokens: 100, ...}]}
type LocalRateLimit struct {
	Buckets     []RateLimitBucket
	Conditional []ConditionalRateLimit
}

// bucketFields are the fields of a rate limit (RateLimitBucket).
var bucketFields = fieldNames(reflect.TypeFor[RateLimitBucket]())

// maxRateLimits bounds the list form (the spec's 1..16 local rate
// limits); the conditional form takes agentgateway's 64 entries.
const maxRateLimits = 16

// DecodeNode decodes either form.
func (r *LocalRateLimit) DecodeNode(n *decode.Node) {
	switch n.Kind() {
	case decode.List:
		if n.Decode(&r.Buckets) {
			switch {
			case len(r.Buckets) == 0:
				n.Errorf("must have at least 1 item")
			case len(r.Buckets) > maxRateLimits:
				n.Errorf("must have at most %d items", maxRateLimits)
			}
		}
	case decode.Map:
		if n.Get("conditional") == nil && slices.ContainsFunc(n.Keys(), func(k string) bool { return bucketFields[k] }) {
			// One bucket written as a map, not a list of one: not the
			// conditional form missing its key.
			n.Errorf("expected a list of rate limits (- maxTokens: ...), or {conditional: [...]}")
			return
		}
		var f struct {
			Conditional []ConditionalRateLimit `json:"conditional" cfg:"required,minItems=1,maxItems=64"`
		}
		if !n.Decode(&f) {
			return
		}
		r.Conditional = f.Conditional
		for i, c := range r.Conditional {
			if c.Condition == nil && i != len(r.Conditional)-1 {
				n.ErrorfAt(indexPath("conditional", i), "an entry without a condition is the fallback and must be last")
			}
		}
	default:
		n.Errorf("expected a list of rate limits or {conditional: [...]}, got %s", n.Describe())
	}
}

// MarshalJSON writes the form the file used.
func (r LocalRateLimit) MarshalJSON() ([]byte, error) {
	if r.Conditional != nil {
		return json.Marshal(map[string]any{"conditional": r.Conditional})
	}
	return json.Marshal(r.Buckets)
}

// RateLimitBucket is one token bucket (agentgateway's RateLimitSpec): it
// holds at most MaxTokens, starts full, and gains TokensPerFill every
// FillInterval. A request takes one token (type "requests", the default),
// or an LLM exchange takes its input and output tokens once they are known
// (type "tokens"). A request finding the bucket empty gets 429.
type RateLimitBucket struct {
	MaxTokens     uint64   `json:"maxTokens"`
	TokensPerFill uint64   `json:"tokensPerFill"`
	FillInterval  Duration `json:"fillInterval" cfg:"required"`
	Type          string   `json:"type,omitempty" cfg:"enum=requests|tokens"`
}

// FieldRules marks Validate's rules as each about one field (decode.FieldRules).
func (*RateLimitBucket) FieldRules() {}

// Validate checks that the bucket refills and can hold a fill. The spec
// counts at least one request or token per unit; agentgateway's bucket
// cannot hold less than a fill.
func (b *RateLimitBucket) Validate(v *decode.Validation) {
	if v.Node().Get("fillInterval") != nil && b.FillInterval.Duration <= 0 {
		v.Errorf("fillInterval", "must be > 0")
	}
	if b.TokensPerFill < 1 {
		v.Errorf("tokensPerFill", "must be >= 1 (a bucket that is never refilled would refuse every request once empty)")
	}
	if b.MaxTokens < b.TokensPerFill {
		v.Errorf("maxTokens", "must be >= tokensPerFill (%d): the bucket must hold a whole fill", b.TokensPerFill)
	}
}

// ConditionalRateLimit is an entry of the conditional form: a bucket that
// applies when Condition (CEL) holds, or always when it is nil.
type ConditionalRateLimit struct {
	Condition *CELCondition `json:"condition,omitempty"`
	RateLimitBucket
}
