package server

import (
	"encoding/json"
	"reflect"
	"sort"
	"strconv"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"
	"google.golang.org/protobuf/types/known/structpb"

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
		a.Extra = append(a.Extra, logline.AccessField{Key: f.key, Value: logText(v)})
	}
	return true
}

// logText is a value as a log field shows it: strings as they are,
// numbers and bools as text, anything else as JSON.
func logText(v ref.Val) string {
	switch x := v.Value().(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return ""
	}
	b, _ := json.Marshal(native.(*structpb.Value).AsInterface())
	return string(b)
}
