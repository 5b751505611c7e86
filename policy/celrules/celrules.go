// Package celrules owns CEL rule sets compiled once at load: HTTP
// `authorization` (403 unless allowed) and the per-item checks of
// `mcpAuthorization`. A rule that fails to evaluate (a missing claim, a type
// error) counts as false.
package celrules

import (
	"net"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// RuleSet is a compiled rule set; a nil *RuleSet allows everything.
//
// Allow and deny rules that can only be true for one MCP item — the rule is
// `mcp.<kind>.name == "lit"`, or a conjunction with such a term — are
// indexed under that item, so checking an item evaluates only its own rules
// and the ones that name no item. (Require rules are never indexed: they
// must hold for every item.)
type RuleSet struct {
	allow, deny       map[string][]cel.Program // by itemKey
	allowAny, denyAny []cel.Program            // rules naming no single item
	require           []cel.Program
	hasAllow          bool
}

// Compile compiles the rules; errors name rules[i].
func Compile(rs *config.CELRuleSet) (*RuleSet, error) {
	if rs == nil {
		return nil, nil
	}
	out := &RuleSet{allow: map[string][]cel.Program{}, deny: map[string][]cel.Program{}}
	for i, r := range rs.Rules {
		p, ast, err := config.CompileCELAst(r.Expr)
		if err != nil {
			return nil, &policy.FieldError{Field: "rules[" + itoa(i) + "]", Msg: err.Error()}
		}
		key := indexKey(ast.NativeRep().Expr())
		switch r.Kind {
		case config.RuleDeny:
			if key != "" {
				out.deny[key] = append(out.deny[key], p)
			} else {
				out.denyAny = append(out.denyAny, p)
			}
		case config.RuleRequire:
			out.require = append(out.require, p)
		default:
			out.hasAllow = true
			if key != "" {
				out.allow[key] = append(out.allow[key], p)
			} else {
				out.allowAny = append(out.allowAny, p)
			}
		}
	}
	return out, nil
}

var kindNames = [...]string{"tool", "prompt", "resource"}

func itemKey(kind, name string) string { return kind + "\x00" + name }

// indexKey returns the item key a rule is confined to, or "".
func indexKey(e celast.Expr) string {
	if e.Kind() != celast.CallKind {
		return ""
	}
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalAnd:
		for _, a := range args {
			if k := indexKey(a); k != "" {
				return k
			}
		}
	case operators.Equals:
		if len(args) != 2 {
			return ""
		}
		for i := range 2 {
			kind, ok := itemNameSelect(args[i])
			lit := args[1-i]
			if !ok || lit.Kind() != celast.LiteralKind {
				continue
			}
			if s, isStr := lit.AsLiteral().Value().(string); isStr {
				return itemKey(kind, s)
			}
		}
	}
	return ""
}

// itemNameSelect matches `mcp.<kind>.name`.
func itemNameSelect(e celast.Expr) (string, bool) {
	if e.Kind() != celast.SelectKind || e.AsSelect().FieldName() != "name" || e.AsSelect().IsTestOnly() {
		return "", false
	}
	kindSel := e.AsSelect().Operand()
	if kindSel.Kind() != celast.SelectKind || kindSel.AsSelect().IsTestOnly() {
		return "", false
	}
	root := kindSel.AsSelect().Operand()
	if root.Kind() != celast.IdentKind || root.AsIdent() != "mcp" {
		return "", false
	}
	kind := kindSel.AsSelect().FieldName()
	for _, k := range kindNames {
		if k == kind {
			return kind, true
		}
	}
	return "", false
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
	key := ""
	if in.MCP != nil {
		key = itemKey(kindNames[in.MCP.Kind], in.MCP.Name)
	}
	var act map[string]any
	test := func(p cel.Program) bool {
		if act == nil {
			act = in.activation()
		}
		return eval(p, act)
	}
	for _, p := range rs.deny[key] {
		if test(p) {
			return false
		}
	}
	for _, p := range rs.denyAny {
		if test(p) {
			return false
		}
	}
	for _, p := range rs.require {
		if !test(p) {
			return false
		}
	}
	if !rs.hasAllow {
		return true
	}
	for _, p := range rs.allow[key] {
		if test(p) {
			return true
		}
	}
	for _, p := range rs.allowAny {
		if test(p) {
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
