package server

import (
	"sort"

	"cel.dev/cel-go/cel"

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
	return p, nil
}

// apply decides whether the request is logged and adds the fields to a.
// Expressions see the request and its response; a failing filter logs the
// request, a failing field is left out.
func (p *accessLogPolicy) apply(c *policy.Ctx, a *logline.Access) bool {
	c.Responding = true
	in := celrules.LiveInput(c)
	if p.filter != nil {
		if v, err := celrules.EvalLLM(p.filter, &in, nil); err == nil {
			if b, ok := v.Value().(bool); ok && !b {
				return false
			}
		}
	}
	for _, f := range p.add {
		v, err := celrules.EvalLLM(f.prog, &in, nil)
		if err != nil {
			continue
		}
		a.Extra = append(a.Extra, logline.AccessField{Key: f.key, Value: celrules.Text(v)})
	}
	return true
}
