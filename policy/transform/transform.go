// Package transform owns the transformations policy: request headers set,
// added, removed or replaced by CEL before the request is forwarded, and
// response headers (and status) after the answer comes back.
package transform

import (
	"sort"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types/ref"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/celrules"
)

// Transformations is the compiled policy; immutable and safe for
// concurrent use.
type Transformations struct {
	request, response *edits
}

// edits is one direction's compiled Transform.
type edits struct {
	replace  cel.Program
	set, add []headerExpr // sorted by name
	remove   []string
}

type headerExpr struct {
	name string
	prog cel.Program
}

// New compiles the policy. Errors are *policy.FieldError naming the field
// below transformations.
func New(cfg *config.Transformations) (*Transformations, error) {
	out := &Transformations{}
	var err error
	if out.request, err = compile("request", cfg.Request); err != nil {
		return nil, err
	}
	if out.response, err = compile("response", cfg.Response); err != nil {
		return nil, err
	}
	return out, nil
}

func compile(field string, t *config.Transform) (*edits, error) {
	if t == nil {
		return nil, nil
	}
	e := &edits{remove: t.Remove}
	var err error
	if t.Replace != nil {
		if e.replace, err = config.CompileLLMExpression(string(*t.Replace)); err != nil {
			return nil, &policy.FieldError{Field: field + ".replace", Msg: err.Error()}
		}
	}
	for _, m := range []struct {
		name string
		src  map[string]config.CELExpression
		dst  *[]headerExpr
	}{{"set", t.Set, &e.set}, {"add", t.Add, &e.add}} {
		for name, expr := range m.src {
			p, err := config.CompileLLMExpression(string(expr))
			if err != nil {
				return nil, &policy.FieldError{Field: field + "." + m.name + "." + name, Msg: err.Error()}
			}
			*m.dst = append(*m.dst, headerExpr{name: strings.ToLower(name), prog: p})
		}
		sort.Slice(*m.dst, func(i, j int) bool { return (*m.dst)[i].name < (*m.dst)[j].name })
	}
	return e, nil
}

// headers is what an edit changes: a request's or a response's headers,
// and their pseudo-headers.
type headers interface {
	Set(key, value string)
	Add(key, value string)
	Del(key string)
	reset()
	pseudo(name, value string) bool
}

// OnRequest edits the request's headers.
func (t *Transformations) OnRequest(c *policy.Ctx) policy.Result {
	if t.request != nil {
		in := celrules.LiveInput(c)
		t.request.apply(&in, requestHeaders{c})
	}
	return policy.Continue
}

// OnResponse edits the response's headers and status.
func (t *Transformations) OnResponse(c *policy.Ctx) {
	if t.response != nil {
		in := celrules.LiveInput(c)
		t.response.apply(&in, responseHeaders{c})
	}
}

func (e *edits) apply(in *celrules.Input, h headers) {
	// Every expression sees the message as it came: all are evaluated
	// before any edit.
	var replaced map[string][]string
	if e.replace != nil {
		if v, err := celrules.EvalLLM(e.replace, in, nil); err == nil {
			replaced, _ = toHeaderMap(v)
		}
	}
	sets := make([][]string, len(e.set))
	for i, s := range e.set {
		sets[i], _ = eval(s.prog, in)
	}
	adds := make([][]string, len(e.add))
	for i, a := range e.add {
		adds[i], _ = eval(a.prog, in)
	}
	if replaced != nil {
		h.reset()
		names := make([]string, 0, len(replaced))
		for name := range replaced {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if strings.HasPrefix(name, ":") || !policy.ValidHeaderName(name) {
				continue
			}
			for _, value := range replaced[name] {
				if policy.ValidHeaderValue(value) {
					h.Add(name, value)
				}
			}
		}
	}
	for i, s := range e.set {
		values := sets[i]
		if len(values) == 0 {
			continue
		}
		if strings.HasPrefix(s.name, ":") {
			h.pseudo(s.name, values[0])
			continue
		}
		h.Set(s.name, values[0])
		for _, v := range values[1:] {
			h.Add(s.name, v)
		}
	}
	for i, a := range e.add {
		for _, v := range adds[i] {
			h.Add(a.name, v)
		}
	}
	for _, name := range e.remove {
		h.Del(name)
	}
}

// eval evaluates a header value: a string, a number or a bool as text, a
// list as one value per item, anything else as JSON. A value a header
// cannot hold (a control character) fails.
func eval(p cel.Program, in *celrules.Input) ([]string, bool) {
	v, err := celrules.EvalLLM(p, in, nil)
	if err != nil {
		return nil, false
	}
	var out []string
	switch v.Value().(type) {
	case string, []byte, bool, int64, uint64, float64:
		out = append(out, celrules.Text(v))
	default:
		native := celrules.JSONValue(v)
		if list, ok := native.([]any); ok {
			for _, item := range list {
				out = append(out, celrules.NativeText(item, nil))
			}
		} else {
			out = append(out, celrules.NativeText(native, nil))
		}
	}
	for _, s := range out {
		if !policy.ValidHeaderValue(s) {
			return nil, false
		}
	}
	return out, true
}

// toHeaderMap reads replace's result: names to a value or a list.
func toHeaderMap(v ref.Val) (map[string][]string, bool) {
	m, ok := celrules.JSONValue(v).(map[string]any)
	if !ok {
		return nil, false
	}
	out := map[string][]string{}
	for k, val := range m {
		switch x := val.(type) {
		case []any:
			for _, item := range x {
				out[k] = append(out[k], celrules.NativeText(item, nil))
			}
		default:
			out[k] = append(out[k], celrules.NativeText(x, nil))
		}
	}
	return out, true
}

var (
	_ policy.Request  = (*Transformations)(nil)
	_ policy.Response = (*Transformations)(nil)
)
