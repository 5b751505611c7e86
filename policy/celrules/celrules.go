// Package celrules owns CEL rule sets compiled once at load: HTTP
// `authorization` (403 unless allowed) and the per-item checks of
// `mcpAuthorization`. A rule that fails to evaluate (a missing claim, a type
// error) counts as false.
package celrules

import (
	"net"

	"cel.dev/cel-go/cel"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// RuleSet is a compiled rule set; a nil *RuleSet allows everything.
type RuleSet struct {
	allow, deny, require []cel.Program
}

// Compile compiles the rules; errors name rules[i].
func Compile(rs *config.CELRuleSet) (*RuleSet, error) {
	if rs == nil {
		return nil, nil
	}
	out := &RuleSet{}
	for i, r := range rs.Rules {
		p, err := config.CompileCEL(r.Expr)
		if err != nil {
			return nil, &policy.FieldError{Field: "rules[" + itoa(i) + "]", Msg: err.Error()}
		}
		switch r.Kind {
		case config.RuleDeny:
			out.deny = append(out.deny, p)
		case config.RuleRequire:
			out.require = append(out.require, p)
		default:
			out.allow = append(out.allow, p)
		}
	}
	return out, nil
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// MCPKind is the kind of MCP item a check is about.
type MCPKind uint8

// MCP item kinds.
const (
	MCPTool MCPKind = iota
	MCPPrompt
	MCPResource
)

// MCPItem is the MCP item being listed or used.
type MCPItem struct {
	Kind         MCPKind
	Name, Target string
}

// Input is what rules see. Its values are copies: it may be used after the
// request's buffers were reused.
type Input struct {
	Claims  map[string]any
	Request map[string]any
	Source  map[string]any
	MCP     *MCPItem
}

// InputFromCtx copies the request's facts for rules.
func InputFromCtx(c *policy.Ctx) Input {
	f := c.Fast
	headers := map[string]any{}
	for k, v := range f.Request.Header.All() {
		headers[string(lower(k))] = string(v)
	}
	in := Input{
		Claims: c.Claims,
		Request: map[string]any{
			"method":  string(f.Method()),
			"path":    string(c.Path),
			"host":    string(c.Host),
			"scheme":  string(c.Scheme),
			"uri":     string(f.Request.Header.RequestURI()),
			"headers": headers,
		},
		Source: map[string]any{},
	}
	if a, ok := f.RemoteAddr().(*net.TCPAddr); ok {
		in.Source["address"] = a.IP.String()
		in.Source["port"] = int64(a.Port)
	}
	return in
}

func lower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func (in *Input) activation() map[string]any {
	act := map[string]any{"request": in.Request, "source": in.Source}
	if in.Claims != nil {
		act["jwt"] = in.Claims
	}
	if m := in.MCP; m != nil {
		key := [...]string{"tool", "prompt", "resource"}[m.Kind]
		act["mcp"] = map[string]any{key: map[string]any{"name": m.Name, "target": m.Target}}
	}
	return act
}

func eval(p cel.Program, act map[string]any) bool {
	v, _, err := p.Eval(act)
	if err != nil {
		return false
	}
	b, ok := v.Value().(bool)
	return ok && b
}

// Allowed applies the rules: no deny rule true, every require rule true,
// and, when there are allow rules, one of them true.
func (rs *RuleSet) Allowed(in *Input) bool {
	if rs == nil {
		return true
	}
	act := in.activation()
	for _, p := range rs.deny {
		if eval(p, act) {
			return false
		}
	}
	for _, p := range rs.require {
		if !eval(p, act) {
			return false
		}
	}
	if len(rs.allow) == 0 {
		return true
	}
	for _, p := range rs.allow {
		if eval(p, act) {
			return true
		}
	}
	return false
}

// HTTP is the `authorization` route policy: 403 unless the rules allow.
type HTTP struct{ Rules *RuleSet }

// OnRequest implements policy.Request.
func (h HTTP) OnRequest(c *policy.Ctx) policy.Result {
	in := InputFromCtx(c)
	if h.Rules.Allowed(&in) {
		return policy.Continue
	}
	r := &c.Fast.Response
	r.Reset()
	r.SetStatusCode(fasthttp.StatusForbidden)
	r.Header.SetContentType("text/plain; charset=utf-8")
	r.SetBodyString("forbidden\n")
	return policy.Done
}
