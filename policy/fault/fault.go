// Package fault owns fault injection: `delay` (latency before the request
// is forwarded) and the conditional form of `directResponse` (answer some
// requests with an injected status), both decided per request by CEL
// expressions that may call random().
package fault

import (
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// Delay is the compiled delay policy; immutable and safe for concurrent
// use.
type Delay struct {
	fixed time.Duration
	prog  cel.Program // nil: fixed
}

// NewDelay compiles a delay policy.
func NewDelay(cfg *config.Delay) (*Delay, error) {
	d := &Delay{fixed: cfg.Duration.Fixed}
	if cfg.Duration.Expr != "" {
		p, err := config.CompileValueExpression(cfg.Duration.Expr, false)
		if err != nil {
			return nil, &policy.FieldError{Field: "duration", Msg: err.Error()}
		}
		d.prog = p
	}
	return d, nil
}

// For returns the delay for the request: the fixed one, or the
// expression's (a duration, or a number of milliseconds), 0 when it fails
// or is not positive, at most config.MaxDelay.
func (d *Delay) For(c *policy.Ctx) time.Duration {
	if d.prog == nil {
		return d.fixed
	}
	in := celrules.LiveInput(c)
	v, err := celrules.EvalLLM(d.prog, &in, nil)
	if err != nil {
		return 0
	}
	var out time.Duration
	switch x := v.(type) {
	case types.Duration:
		out = x.Duration
	case types.Int:
		out = time.Duration(x) * time.Millisecond
	case types.Uint:
		out = time.Duration(x) * time.Millisecond
	case types.Double:
		out = time.Duration(float64(x) * float64(time.Millisecond))
	}
	return min(max(out, 0), config.MaxDelay)
}

// OnRequest waits, then lets the request go on.
func (d *Delay) OnRequest(c *policy.Ctx) policy.Result {
	if wait := d.For(c); wait > 0 {
		time.Sleep(wait)
	}
	return policy.Continue
}

// ConditionalResponse is the conditional form of directResponse.
type ConditionalResponse struct {
	entries []entry
}

type entry struct {
	cond   cel.Program // nil: always
	status int
	body   []byte
}

// NewDirectResponse compiles a directResponse: the plain form as
// policy.NewDirectResponse does, the conditional one here.
func NewDirectResponse(cfg *config.DirectResponse) (policy.Request, error) {
	if cfg.Conditional == nil {
		return policy.NewDirectResponse(cfg)
	}
	out := &ConditionalResponse{}
	for i, e := range cfg.Conditional {
		en := entry{body: append([]byte(nil), e.Body...)}
		if e.Status != nil {
			en.status = *e.Status
		}
		if e.Condition != "" {
			p, err := config.CompileValueExpression(string(e.Condition), true)
			if err != nil {
				return nil, &policy.FieldError{Field: "conditional[" + itoa(i) + "].condition", Msg: err.Error()}
			}
			en.cond = p
		}
		out.entries = append(out.entries, en)
	}
	return out, nil
}

// OnRequest answers with the first entry whose condition holds; with none,
// the request goes on. A condition that fails to evaluate does not hold.
func (r *ConditionalResponse) OnRequest(c *policy.Ctx) policy.Result {
	var in *celrules.Input
	for _, e := range r.entries {
		if e.cond != nil {
			if in == nil {
				v := celrules.LiveInput(c)
				in = &v
			}
			v, err := celrules.EvalLLM(e.cond, in, nil)
			if err != nil || v != types.True {
				continue
			}
		}
		resp := &c.Fast.Response
		resp.Reset()
		resp.SetStatusCode(e.status)
		if len(e.body) > 0 {
			resp.SetBody(e.body)
		}
		return policy.Done
	}
	return policy.Continue
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

var (
	_ policy.Request = (*Delay)(nil)
	_ policy.Request = (*ConditionalResponse)(nil)
)
