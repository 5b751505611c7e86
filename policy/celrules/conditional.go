package celrules

import (
	"strconv"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// Conditional is a policy kind's conditional form compiled: for each
// request, the first entry whose condition holds runs (an entry without a
// condition always does); when none holds, the kind does nothing for the
// request. A condition that fails to evaluate does not hold.
//
// On the way back, the response side of the entry that ran for the
// request runs (policy.Ctx.MarkRan), if it has one.
type Conditional struct {
	entries   []conditionalEntry
	readsBody bool
}

type conditionalEntry struct {
	cond cel.Program // nil: always
	p    any
	req  policy.Request
	resp policy.Response
}

// NewConditional compiles the conditions; policies[i] is entry i's
// compiled policy (a policy.Request, a policy.Response or both). Errors
// name the entry's condition field.
func NewConditional(conditions []config.ValueCondition, policies []any) (*Conditional, error) {
	c := &Conditional{}
	for i, p := range policies {
		e := conditionalEntry{}
		if conditions[i] != "" {
			prog, err := config.CompileValueExpression(string(conditions[i]), true)
			if err != nil {
				return nil, &policy.FieldError{Field: "conditional[" + strconv.Itoa(i) + "].condition", Msg: err.Error()}
			}
			e.cond = prog
		}
		e.p = p
		e.req, _ = p.(policy.Request)
		e.resp, _ = p.(policy.Response)
		if br, ok := p.(policy.BodyReader); ok && br.ReadsRequestBody() {
			c.readsBody = true
		}
		c.entries = append(c.entries, e)
	}
	return c, nil
}

// OnRequest runs the first entry whose condition holds.
func (c *Conditional) OnRequest(ctx *policy.Ctx) policy.Result {
	var in *Input
	for _, e := range c.entries {
		if e.cond != nil {
			if in == nil {
				v := LiveInput(ctx)
				in = &v
			}
			v, err := EvalLLM(e.cond, in, nil)
			if err != nil || v != types.True {
				continue
			}
		}
		if e.resp != nil {
			ctx.MarkRan(e.p)
		}
		if e.req == nil {
			return policy.Continue
		}
		return e.req.OnRequest(ctx)
	}
	return policy.Continue
}

// OnResponse runs the response side of the entry that ran for the request.
func (c *Conditional) OnResponse(ctx *policy.Ctx) {
	for _, e := range c.entries {
		if e.resp != nil && ctx.Ran(e.p) {
			e.resp.OnResponse(ctx)
			return
		}
	}
}

// ReadsRequestBody reports whether an entry may read the request's body
// (policy.BodyReader).
func (c *Conditional) ReadsRequestBody() bool { return c.readsBody }

var (
	_ policy.Request    = (*Conditional)(nil)
	_ policy.Response   = (*Conditional)(nil)
	_ policy.BodyReader = (*Conditional)(nil)
)
