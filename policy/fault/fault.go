// Package fault owns fault injection: `delay` (latency before the request
// is forwarded) and the conditional form of `directResponse` (answer some
// requests with an injected status), both decided per request by CEL
// expressions that may call random().
package fault

import (
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"

	"github.com/valyala/fasthttp"

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

// WaitsForDeadline marks the delay a policy.Waiter.
func (d *Delay) WaitsForDeadline() {}

// OnRequest waits, then lets the request go on; a wait past the route's
// request timeout (Ctx.Deadline) ends at it, and the request is answered
// 504 as the timeout answers it.
func (d *Delay) OnRequest(c *policy.Ctx) policy.Result {
	wait := d.For(c)
	if wait <= 0 {
		return policy.Continue
	}
	if !c.Deadline.IsZero() {
		if left := time.Until(c.Deadline); left < wait {
			time.Sleep(max(left, 0))
			resp := &c.Fast.Response
			resp.SetStatusCode(fasthttp.StatusGatewayTimeout)
			resp.Header.SetContentType("text/plain; charset=utf-8")
			resp.SetBodyString("request timeout\n")
			return policy.Done
		}
	}
	time.Sleep(wait)
	return policy.Continue
}

// NewDirectResponse compiles a directResponse: the plain form as
// policy.NewDirectResponse does; the conditional one as a
// celrules.Conditional whose entries are plain direct responses, so both
// forms answer alike (no Content-Type added) and an entry's status is
// checked as the plain form's.
func NewDirectResponse(cfg *config.DirectResponse) (policy.Request, error) {
	if cfg.Conditional == nil {
		return policy.NewDirectResponse(cfg)
	}
	conds := make([]config.ValueCondition, len(cfg.Conditional))
	entries := make([]any, len(cfg.Conditional))
	for i, e := range cfg.Conditional {
		p, err := policy.NewDirectResponse(&config.DirectResponse{Status: e.Status, Body: e.Body})
		if err != nil {
			return nil, policy.PrefixField("conditional["+itoa(i)+"]", err)
		}
		conds[i], entries[i] = e.Condition, p
	}
	return celrules.NewConditional(conds, entries)
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

var (
	_ policy.Request = (*Delay)(nil)
	_ policy.Waiter  = (*Delay)(nil)
)
