package ratelimit

import (
	"cel.dev/cel-go/cel"

	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// applying returns the buckets that apply to c: the first entry whose
// condition holds, or the one without a condition. Conditions see the
// request as authorization rules do (celrules.LiveInput: each part read
// from the request as a condition asks), so the list form costs nothing
// here.
func (l *Limiter) applying(c *policy.Ctx) []bucket {
	var in *celrules.Input
	for i := range l.entries {
		e := &l.entries[i]
		if e.condition == nil {
			return e.buckets
		}
		if c == nil || c.Fast == nil {
			continue // no request to evaluate against: false
		}
		if in == nil {
			in = new(celrules.Input)
			*in = celrules.LiveInput(c)
		}
		if holds(e.condition, in) {
			return e.buckets
		}
	}
	return nil
}

// holds evaluates a condition; one that fails to evaluate (a missing claim,
// a type error) is false, as a rule is. `jwt` is absent without a validated
// token, and `llmRequest` always: a request is admitted before its LLM body
// is read, so a condition reading it is false.
func holds(p cel.Program, in *celrules.Input) bool {
	v, err := celrules.EvalLLM(p, in, nil)
	if err != nil {
		return false
	}
	b, ok := v.Value().(bool)
	return ok && b
}
