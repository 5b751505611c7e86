package server

import (
	"fmt"
	"sort"

	"cel.dev/cel-go/cel"
	"go.opentelemetry.io/otel/trace"

	"github.com/relaygate/gateway/codec/logline"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// accessLogPolicy is frontendPolicies.accessLog compiled: the filter and
// the added fields, evaluated once a request is answered.
type accessLogPolicy struct {
	filter cel.Program
	add    []accessLogField // sorted by key
	omit   logline.AccessFields
	otlp   *otlpAccessLog // accessLog.otlp; nil: none
}

type accessLogField struct {
	key  string
	prog cel.Program
}

func newAccessLogPolicy(cfg *config.AccessLogPolicy) (*accessLogPolicy, error) {
	p := &accessLogPolicy{}
	if cfg.Filter != nil {
		prog, err := config.CompileValueExpression(string(*cfg.Filter), true)
		if err != nil {
			return nil, err
		}
		p.filter = prog
	}
	for key, expr := range cfg.Add {
		prog, err := config.CompileValueExpression(string(expr), false)
		if err != nil {
			return nil, err
		}
		p.add = append(p.add, accessLogField{key: key, prog: prog})
	}
	sort.Slice(p.add, func(i, j int) bool { return p.add[i].key < p.add[j].key })
	for _, name := range cfg.Remove {
		f, ok := logline.AccessFieldNamed(name)
		if !ok {
			return nil, fmt.Errorf("remove: %q is not a field of the access line", name)
		}
		p.omit |= f
	}
	return p, nil
}

// apply decides whether the request is logged and adds the fields to a,
// and exports its record over OTLP when accessLog.otlp says so (sc is the
// request's span, if it had one). Expressions see the request and its
// response; a failing filter logs the request, a failing field is left
// out.
func (p *accessLogPolicy) apply(c *policy.Ctx, a *logline.Access, sc trace.SpanContext) bool {
	c.Responding = true
	a.Omit = p.omit
	in := celrules.LiveInput(c)
	logged := true
	if p.filter != nil {
		if v, err := celrules.EvalLLM(p.filter, &in, nil); err == nil {
			if b, ok := v.Value().(bool); ok && !b {
				logged = false
			}
		}
	}
	// The added fields go in the line, and in the OTLP record unless it
	// has fields of its own.
	if logged || p.otlp != nil && !p.otlp.own {
		for _, f := range p.add {
			v, err := celrules.EvalLLM(f.prog, &in, nil)
			if err != nil {
				continue
			}
			a.Extra = append(a.Extra, logline.AccessField{Key: f.key, Value: celrules.Text(v)})
		}
	}
	if p.otlp != nil {
		p.otlp.export(&in, a, logged, sc)
	}
	return logged
}
