package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"cel.dev/cel-go/cel"
	celcost "cel.dev/cel-go/common/cost"

	"github.com/relaygate/gateway/config/decode"
)

// CELRuleSet is `mcpAuthorization` and `authorization`: CEL rules.
type CELRuleSet struct {
	Rules []CELRule `json:"rules" cfg:"required"`
}

// CELRuleKind says how a rule counts.
type CELRuleKind uint8

// Rule kinds.
const (
	RuleAllow   CELRuleKind = iota // the request is allowed when an allow rule is true
	RuleDeny                       // ... and denied when a deny rule is true
	RuleRequire                    // ... and every require rule must be true
)

// CELRule is one rule: a bare string (allow) or exactly one of {allow},
// {deny}, {require}.
type CELRule struct {
	Kind CELRuleKind
	Expr string
}

// maxCELBytes bounds one expression (the spec's 16384 characters).
const maxCELBytes = 16384

// DecodeNode decodes the rule and compiles it, so that a bad expression is
// a config error naming the rule.
func (r *CELRule) DecodeNode(n *decode.Node) {
	if s, ok := n.String(); ok {
		r.Kind, r.Expr = RuleAllow, s
		r.check(n)
		return
	}
	if n.Kind() != decode.Map {
		n.Errorf("expected a CEL expression or a map with one of: allow, deny, require")
		return
	}
	// A misspelt key is reported as unknown, not as a rule without a
	// kind ({allow: x, alow: y} has one kind, and a typo).
	kinds := []string{"allow", "deny", "require"}
	var found []string
	typo := false
	for _, k := range n.Keys() {
		if slices.Contains(kinds, k) {
			found = append(found, k)
			continue
		}
		typo = true
		if near := decode.Suggest(k, kinds); near != "" {
			n.Get(k).Errorf("unknown field %q (did you mean %q?)", k, near)
		} else {
			n.Get(k).Errorf("unknown field %q (use allow, deny or require)", k)
		}
	}
	if len(found) != 1 {
		if len(found) > 1 || !typo {
			n.Errorf("exactly one of allow, deny, require is required")
		}
		return
	}
	v := n.Get(found[0])
	switch found[0] {
	case "allow":
		r.Kind = RuleAllow
	case "deny":
		r.Kind = RuleDeny
	case "require":
		r.Kind = RuleRequire
	}
	if v.Decode(&r.Expr) {
		r.check(v)
	}
}

func (r *CELRule) check(n *decode.Node) {
	if r.Expr == "" || len(r.Expr) > maxCELBytes {
		n.Errorf("must be 1 to %d characters", maxCELBytes)
		return
	}
	if _, err := CompileCEL(r.Expr); err != nil {
		n.Errorf("%v", err)
	}
}

// MarshalJSON writes the rule back in file form, for /config_dump, its
// literals redacted (redactCEL).
func (r CELRule) MarshalJSON() ([]byte, error) {
	key := map[CELRuleKind]string{RuleAllow: "allow", RuleDeny: "deny", RuleRequire: "require"}[r.Kind]
	return json.Marshal(map[string]string{key: redactCEL(r.Expr)})
}

var (
	celEnvOnce sync.Once
	celEnv     *cel.Env
	celEnvErr  error
)

// CELEnv is the environment rules compile in: `jwt` (the token's claims),
// `basicAuth` (username), `apiKey` (the key's metadata), `extauthz` (what
// the external authorization service answered), `response` (code,
// headers; once there is one; body once a policy read it), `request`
// (method, path, host, scheme, uri, headers, query; body, bytes, once a
// policy read it: see celrules.ReadsBody), `source` (address, port, the
// client certificate's identity), `destination` (networkAuthorization's
// address, port and hostname of where a connection or tunnel goes), `mcp`
// (tool, prompt or resource: name and target), `metadata` (what
// transformations' metadata set), `extproc` (the dynamic metadata of
// the external processor's answers) and `backend` (the picked backend:
// name, type, protocol), each a map,
// plus agentgateway's function library (celLibraries).
func CELEnv() (*cel.Env, error) {
	celEnvOnce.Do(func() {
		m := cel.MapType(cel.StringType, cel.DynType)
		opts := []cel.EnvOption{
			cel.Variable("jwt", m),
			cel.Variable("basicAuth", m),
			cel.Variable("apiKey", m),
			cel.Variable("extauthz", m),
			cel.Variable("response", m),
			cel.Variable("request", m),
			cel.Variable("source", m),
			cel.Variable("destination", m),
			cel.Variable("mcp", m),
			cel.Variable("metadata", m),
			cel.Variable("extproc", m),
			cel.Variable("backend", m),
		}
		celEnv, celEnvErr = cel.NewEnv(append(opts, celLibraries()...)...)
		if celEnvErr != nil {
			celEnvErr = fmt.Errorf("building the CEL environment: %w", celEnvErr)
		}
	})
	return celEnv, celEnvErr
}

// MaxCELCost bounds the worst-case cost of an expression, as cel-go
// estimates it at load (about one unit per operation) with every string,
// list and map the request or a token brings counted at up to 65,536
// elements. A rule over headers, claims or one list costs up to a few
// hundred thousand; a loop nested in a loop over request data (billions)
// is refused at load rather than left to run per request.
const MaxCELCost = 10_000_000_000

// celCostEstimator bounds the size of every value an expression reads or
// makes (see MaxCELCost); calls keep cel-go's own estimates.
type celCostEstimator struct{}

func (celCostEstimator) EstimateSize(celcost.AstNode) *celcost.SizeEstimate {
	return &celcost.SizeEstimate{Min: 0, Max: 1 << 16}
}

func (celCostEstimator) EstimateCallCost(string, string, *celcost.AstNode, []celcost.AstNode) *celcost.CallEstimate {
	return nil
}

// checkCELCost refuses an expression whose worst case exceeds MaxCELCost.
func checkCELCost(env *cel.Env, ast *cel.Ast) error {
	c, err := env.EstimateCost(ast, celCostEstimator{})
	if err != nil {
		return nil // no estimate (an unusual call): nothing to refuse on
	}
	if c.Max > MaxCELCost {
		return fmt.Errorf("invalid CEL expression: its worst case is too costly to run per request (a loop within a loop over request or token data?); use sets.intersects or sets.contains to compare two lists")
	}
	return nil
}

// CompileCEL checks and compiles one boolean expression.
func CompileCEL(expr string) (cel.Program, error) {
	p, _, err := CompileCELAst(expr)
	return p, err
}

// CompileCELAst is CompileCEL that also returns the checked syntax tree, for
// callers that analyse rules.
func CompileCELAst(expr string) (cel.Program, *cel.Ast, error) {
	env, err := CELEnv()
	if err != nil {
		return nil, nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, nil, fmt.Errorf("invalid CEL expression: %s", celUnsupportedHint(iss.Err().Error()))
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, nil, fmt.Errorf("invalid CEL expression: the result is %s, not bool", t)
	}
	if err := checkCELCost(env, ast); err != nil {
		return nil, nil, err
	}
	p, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, nil, fmt.Errorf("invalid CEL expression: %v", err)
	}
	return p, ast, nil
}
