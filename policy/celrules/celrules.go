// Package celrules owns CEL rule sets compiled once at load: HTTP
// `authorization` (403 unless allowed) and the per-item checks of
// `mcpAuthorization`. A rule that fails to evaluate (a missing claim, a type
// error) counts as false.
package celrules

import (
	"bytes"
	"strconv"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/interpreter"
	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

// RuleSet is a compiled rule set; a nil *RuleSet allows everything. It is
// immutable and safe for concurrent use.
//
// Allow and deny rules that can only be true for one MCP item — the rule is
// `mcp.<kind>.name == "lit"`, or a conjunction with such a term — are
// indexed under that item, so checking an item evaluates only its own rules
// and the ones that name no item. (Require rules are never indexed: they
// must hold for every item.)
type RuleSet struct {
	allow, deny       map[itemKey][]rule
	allowAny, denyAny []rule // rules naming no single item
	require           []rule
	hasAllow          bool
	// readsBody: a rule reads request.body (ReadsBody).
	readsBody bool
}

// rule is a compiled expression and its place in the file.
type rule struct {
	prog cel.Program
	idx  int
}

// itemKey names one MCP item; a struct key, so looking an item up builds no
// string.
type itemKey struct {
	kind MCPKind
	name string
}

// Compile compiles the rules; errors name rules[i].
func Compile(rs *config.CELRuleSet) (*RuleSet, error) {
	if rs == nil {
		return nil, nil
	}
	out := &RuleSet{allow: map[itemKey][]rule{}, deny: map[itemKey][]rule{}}
	for i, r := range rs.Rules {
		p, ast, err := config.CompileCELAst(r.Expr)
		if err != nil {
			return nil, &policy.FieldError{Field: "rules[" + strconv.Itoa(i) + "]", Msg: err.Error()}
		}
		cr := rule{prog: p, idx: i}
		if ReadsBody(ast, "request") {
			out.readsBody = true
		}
		key, indexed := indexKey(ast.NativeRep().Expr())
		switch r.Kind {
		case config.RuleDeny:
			if indexed {
				out.deny[key] = append(out.deny[key], cr)
			} else {
				out.denyAny = append(out.denyAny, cr)
			}
		case config.RuleRequire:
			out.require = append(out.require, cr)
		default:
			out.hasAllow = true
			if indexed {
				out.allow[key] = append(out.allow[key], cr)
			} else {
				out.allowAny = append(out.allowAny, cr)
			}
		}
	}
	return out, nil
}

var kindNames = [...]string{MCPTool: "tool", MCPPrompt: "prompt", MCPResource: "resource"}

// indexKey returns the item a rule is confined to, if any.
func indexKey(e celast.Expr) (itemKey, bool) {
	if e.Kind() != celast.CallKind {
		return itemKey{}, false
	}
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalAnd:
		for _, a := range args {
			if k, ok := indexKey(a); ok {
				return k, true
			}
		}
	case operators.Equals:
		if len(args) != 2 {
			return itemKey{}, false
		}
		for i := range 2 {
			kind, ok := itemNameSelect(args[i])
			lit := args[1-i]
			if !ok || lit.Kind() != celast.LiteralKind {
				continue
			}
			if s, isStr := lit.AsLiteral().Value().(string); isStr {
				return itemKey{kind, s}, true
			}
		}
	}
	return itemKey{}, false
}

// itemNameSelect matches `mcp.<kind>.name`.
func itemNameSelect(e celast.Expr) (MCPKind, bool) {
	if e.Kind() != celast.SelectKind || e.AsSelect().FieldName() != "name" || e.AsSelect().IsTestOnly() {
		return 0, false
	}
	kindSel := e.AsSelect().Operand()
	if kindSel.Kind() != celast.SelectKind || kindSel.AsSelect().IsTestOnly() {
		return 0, false
	}
	root := kindSel.AsSelect().Operand()
	if root.Kind() != celast.IdentKind || root.AsIdent() != "mcp" {
		return 0, false
	}
	kind := kindSel.AsSelect().FieldName()
	for k, n := range kindNames {
		if n == kind {
			return MCPKind(k), true
		}
	}
	return 0, false
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
	Claims map[string]any
	// BasicAuthUser and APIKey are policy.Ctx's.
	BasicAuthUser string
	APIKey        map[string]any
	ExtAuthz      map[string]any
	Metadata      map[string]any // transformations' metadata
	ExtProc       map[string]any // the external processor's dynamic metadata
	Backend       map[string]any // the picked backend
	Request       map[string]any
	Source        map[string]any
	// Destination is where a connection goes (networkAuthorization):
	// address, port, hostname.
	Destination map[string]any
	MCP         *MCPItem
	// Response, when set, is what `response` shows (an external service's
	// answer, for the expressions that read it); else the live response.
	Response map[string]any
	// live, when set, is the request `request` and `source` are read from
	// as rules ask (LiveInput); Request and Source are not used then.
	live *policy.Ctx
}

// InputFromCtx copies the request's facts for rules. Header names are
// lower-cased; a repeated header shows its first value, as in agentgateway.
func InputFromCtx(c *policy.Ctx) Input {
	f := c.Fast
	head := c.RequestHead()
	in := Input{
		Claims:        c.Claims,
		BasicAuthUser: c.BasicAuthUser,
		APIKey:        c.APIKey,
		ExtAuthz:      c.ExtAuthz,
		Metadata:      c.Metadata,
		ExtProc:       c.ExtProcMetadata,
		Backend:       c.Backend,
		Request: map[string]any{
			"method":  string(f.Method()),
			"path":    string(c.Path),
			"host":    string(c.Host),
			"scheme":  string(c.Scheme),
			"uri":     string(head.RequestURI()),
			"headers": requestHeaderMap(head),
			"query":   queryMap(c),
		},
		Source: map[string]any{},
	}
	if b, ok := requestBody(c); ok {
		in.Request["body"] = bytes.Clone(b.(types.Bytes))
	}
	addSource(in.Source, f.RemoteAddr(), f.Conn())
	return in
}

// requestHeaderMap is the request's headers as rules see them: lower-case
// names, the first value of a repeated one.
func requestHeaderMap(head *fasthttp.RequestHeader) map[string]any {
	headers := make(map[string]any, head.Len())
	var name []byte
	for k, v := range head.All() {
		name = appendLower(name[:0], k)
		if _, seen := headers[string(name)]; !seen {
			headers[string(name)] = string(v)
		}
	}
	return headers
}

func appendLower(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// activation resolves the rules' variables straight from an Input: no map
// of variables per evaluation, and the `mcp` value is built at most once
// per check.
type activation struct {
	in  *Input
	mcp map[string]any
	// live is the live request's state for this evaluation (liveState),
	// made on the first read of it.
	live *liveState
}

// liveState is the live request's state for this evaluation.
func (a *activation) liveState() *liveState {
	if a.live == nil {
		a.live = &liveState{c: a.in.live}
	}
	return a.live
}

var _ interpreter.Activation = (*activation)(nil)

// ResolveName implements interpreter.Activation. `jwt` is absent without a
// token, `basicAuth` and `apiKey` without their credential, `mcp` without
// an item: rules reading them fail and count as false.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "basicAuth":
		if a.in.BasicAuthUser == "" {
			return nil, false
		}
		return map[string]any{"username": a.in.BasicAuthUser}, true
	case "apiKey":
		if a.in.APIKey == nil {
			return nil, false
		}
		return a.in.APIKey, true
	case "extauthz":
		if a.in.ExtAuthz == nil {
			return nil, false
		}
		return a.in.ExtAuthz, true
	case "metadata":
		if a.in.Metadata == nil {
			return nil, false
		}
		return a.in.Metadata, true
	case "extproc":
		if a.in.ExtProc == nil {
			return nil, false
		}
		return a.in.ExtProc, true
	case "backend":
		if a.in.Backend == nil {
			return nil, false
		}
		return a.in.Backend, true
	case "jwt":
		if a.in.Claims == nil {
			return nil, false
		}
		return a.in.Claims, true
	case "request":
		if a.in.live != nil {
			return (*liveMap[requestPart])(a.liveState()), true
		}
		if a.in.Request == nil {
			return emptyMap, true
		}
		return a.in.Request, true
	case "response":
		if a.in.Response != nil {
			return a.in.Response, true
		}
		// Only a live request has a response to show, once the response
		// policies run.
		if a.in.live == nil || !a.in.live.Responding {
			return nil, false
		}
		return (*liveMap[responsePart])(a.liveState()), true
	case "source":
		if a.in.live != nil {
			return (*liveMap[sourcePart])(a.liveState()), true
		}
		if a.in.Source == nil {
			return emptyMap, true
		}
		return a.in.Source, true
	case "destination":
		if a.in.Destination == nil {
			return nil, false
		}
		return a.in.Destination, true
	case "mcp":
		m := a.in.MCP
		if m == nil || int(m.Kind) >= len(kindNames) {
			return nil, false
		}
		if a.mcp == nil {
			a.mcp = map[string]any{kindNames[m.Kind]: map[string]any{"name": m.Name, "target": m.Target}}
		}
		return a.mcp, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *activation) Parent() interpreter.Activation { return nil }

var emptyMap = map[string]any{}

func eval(p cel.Program, act interpreter.Activation) bool {
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
	var allow, deny []rule
	if m := in.MCP; m != nil {
		key := itemKey{m.Kind, m.Name}
		allow, deny = rs.allow[key], rs.deny[key]
	}
	if len(deny)+len(rs.denyAny)+len(rs.require)+len(allow)+len(rs.allowAny) == 0 {
		// Nothing applies to this item (the common case of a list filtered
		// by indexed rules): no activation to build.
		return !rs.hasAllow
	}
	act := &activation{in: in}
	for _, r := range deny {
		if eval(r.prog, act) {
			return false
		}
	}
	for _, r := range rs.denyAny {
		if eval(r.prog, act) {
			return false
		}
	}
	for _, r := range rs.require {
		if !eval(r.prog, act) {
			return false
		}
	}
	if !rs.hasAllow {
		return true
	}
	for _, r := range allow {
		if eval(r.prog, act) {
			return true
		}
	}
	for _, r := range rs.allowAny {
		if eval(r.prog, act) {
			return true
		}
	}
	return false
}

// ReadsBody reports whether a rule reads request.body.
func (rs *RuleSet) ReadsBody() bool { return rs != nil && rs.readsBody }

// HTTP is the `authorization` route policy: 403 unless the rules allow.
type HTTP struct {
	Rules *RuleSet
	// MaxBuffer bounds the body read whole for rules that read
	// request.body (frontendPolicies.http.maxBufferSize); 0 is 2 MiB.
	MaxBuffer int
}

// ReadsRequestBody reports whether a rule reads request.body
// (policy.BodyReader).
func (h HTTP) ReadsRequestBody() bool { return h.Rules.ReadsBody() }

// OnRequest implements policy.Request. When a rule reads request.body the
// body is read whole first: one larger than MaxBuffer is answered 413.
func (h HTTP) OnRequest(c *policy.Ctx) policy.Result {
	if h.Rules.ReadsBody() {
		max := h.MaxBuffer
		if max <= 0 {
			max = 2 << 20
		}
		if _, err := policy.ReadRequestBody(c, max); err != nil {
			policy.RespondRequestBodyError(c, err)
			return policy.Done
		}
	}
	in := LiveInput(c)
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
