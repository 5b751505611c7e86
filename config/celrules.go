package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	celcost "cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"

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
// estimates it at load (about one unit per operation, and one per byte a
// call builds) with every string, list and map the request or a token
// brings counted at up to 65,536 elements. A rule over headers, claims or
// one list costs up to a few hundred thousand; a loop nested in a loop
// over request data (billions) is refused at load rather than left to run
// per request.
const MaxCELCost = 10_000_000_000

// MaxCELRuntimeCost is what one evaluation of an expression whose worst
// case exceeds it may cost, counted as it runs (cel-go's runtime cost
// limit, in the estimate's units): such an expression (a loop over request
// data whose body is itself proportional to request data) fails once it
// has spent that much (some tens of milliseconds, some megabytes built)
// instead of running on with what a client sent. An expression whose
// worst case is within it runs uncounted: counting doubles a rule's cost.
// It also bounds a pattern that is not a literal (boundPatterns).
const MaxCELRuntimeCost = 10_000_000

// celValueSize is the size the estimate gives every value the request or
// a token brings (see MaxCELCost).
const celValueSize = 1 << 16

// celCostEstimator bounds the size of every value an expression reads or
// makes (see MaxCELCost), and costs the calls of celDataCalls as reading
// their arguments and building a value once (cel-go counts a call it does
// not know as one operation, so that a loop calling toJson(request) was
// estimated as a loop calling nothing).
type celCostEstimator struct{}

func (celCostEstimator) EstimateSize(celcost.AstNode) *celcost.SizeEstimate {
	return &celcost.SizeEstimate{Min: 0, Max: celValueSize}
}

func (e celCostEstimator) EstimateCallCost(function, _ string, target *celcost.AstNode, args []celcost.AstNode) *celcost.CallEstimate {
	if !celDataCalls[function] {
		return nil
	}
	c := celcost.FixedCostEstimate(celcost.CallCost)
	if target != nil {
		c = c.Add(celcost.FixedCostEstimate(celcost.EstimateSize(e, *target).Max))
	}
	for _, a := range args {
		c = c.Add(celcost.FixedCostEstimate(celcost.EstimateSize(e, a).Max))
	}
	return &celcost.CallEstimate{CostEstimate: c.Add(celcost.FixedCostEstimate(celValueSize))}
}

// celCostCheck is one expression's check: cel-go's estimate with the
// calls that build strings estimated by size, and the first such call
// found unbounded.
type celCostCheck struct {
	refusal error
}

// refuse records why the expression is refused, the first reason found.
func (cc *celCostCheck) refuse(format string, args ...any) {
	if cc.refusal == nil {
		cc.refusal = fmt.Errorf("invalid CEL expression: "+format, args...)
	}
}

// options are the size-aware estimates of the calls whose result may be
// the product of two sizes (a value repeated for each match in another,
// or between each of a list's elements). They replace cel-go's own for
// those overloads.
func (cc *celCostCheck) options() []celcost.Option {
	replace := func(est celcost.Estimator, target *celcost.AstNode, args []celcost.AstNode) *celcost.CallEstimate {
		return cc.estimateReplace(est, target, args)
	}
	join := func(est celcost.Estimator, target *celcost.AstNode, args []celcost.AstNode) *celcost.CallEstimate {
		return cc.estimateJoin(est, target, args)
	}
	// regexReplace (first match, $1 groups) and regex.replace (every
	// match, \1 groups): the receiver is the target or the first
	// argument.
	regexReplace := func(est celcost.Estimator, target *celcost.AstNode, args []celcost.AstNode) *celcost.CallEstimate {
		if target == nil || len(args) != 2 {
			return nil
		}
		return cc.estimateRegexReplace("regexReplace", est, *target, args[0], args[1], '$', true)
	}
	regexReplaceAll := func(est celcost.Estimator, _ *celcost.AstNode, args []celcost.AstNode) *celcost.CallEstimate {
		if len(args) < 3 {
			return nil
		}
		return cc.estimateRegexReplace("regex.replace", est, args[0], args[1], args[2], '\\', false)
	}
	return []celcost.Option{
		celcost.OverloadCostEstimate("string_replace_string_string", replace),
		celcost.OverloadCostEstimate("string_replace_string_string_int", replace),
		celcost.OverloadCostEstimate("list_join_string", join),
		celcost.OverloadCostEstimate("string_regex_replace_string_string", regexReplace),
		celcost.OverloadCostEstimate("regex_replace_string_string_string", regexReplaceAll),
		celcost.OverloadCostEstimate("regex_replace_string_string_string_int", regexReplaceAll),
	}
}

// sizeOf is a node's estimated size.
func sizeOf(est celcost.Estimator, n celcost.AstNode) celcost.SizeEstimate {
	return celcost.EstimateSize(est, n)
}

// scanCost is the cost of scanning n bytes, m times (cel-go's factor).
func scanCost(n, m uint64) celcost.Estimate {
	return celcost.FixedCostEstimate(celcost.SafeMultiplyByFactor(celcost.SafeMultiply(n+1, max(m, 1)), celcost.StringTraversalCostFactor))
}

// estimateReplace: s.replace(old, new[, n]) replaces each of at most
// len(s)/len(old) matches (len(s)+1 for an empty old) by new.
func (cc *celCostCheck) estimateReplace(est celcost.Estimator, target *celcost.AstNode, args []celcost.AstNode) *celcost.CallEstimate {
	if target == nil || len(args) < 2 {
		return nil
	}
	s, old, repl := sizeOf(est, *target), sizeOf(est, args[0]), sizeOf(est, args[1])
	count := s.Max + 1
	if old.Min > 0 {
		count = s.Max/old.Min + 1
	}
	if len(args) == 3 {
		if n, ok := celcost.UintValue(args[2]); ok {
			count = min(count, n)
		}
	}
	growth := celcost.SafeMultiply(count, repl.Max)
	cc.checkBuild("replace", growth, "the replacement repeated for each match")
	result := celcost.SizeEstimate{Min: 0, Max: celcost.SafeAdd(s.Max, growth)}
	cost := celcost.FixedCostEstimate(celcost.CallCost).Add(scanCost(s.Max, old.Max)).Add(result.AsCost())
	return &celcost.CallEstimate{CostEstimate: cost, ResultSize: &result}
}

// estimateJoin: list.join(sep) puts sep between each two elements.
func (cc *celCostCheck) estimateJoin(est celcost.Estimator, target *celcost.AstNode, args []celcost.AstNode) *celcost.CallEstimate {
	if target == nil || len(args) != 1 {
		return nil
	}
	list, sep := sizeOf(est, *target), sizeOf(est, args[0])
	elem := uint64(celValueSize)
	if list.Elem != nil {
		elem = list.Elem.Max
	}
	growth := celcost.SafeMultiply(list.Max, sep.Max)
	cc.checkBuild("join", growth, "the separator repeated between each of the list's elements")
	result := celcost.SizeEstimate{Min: 0, Max: celcost.SafeAdd(celcost.SafeMultiply(list.Max, elem), growth)}
	cost := celcost.FixedCostEstimate(celcost.CallCost).Add(celcost.FixedCostEstimate(list.Max)).Add(result.AsCost())
	return &celcost.CallEstimate{CostEstimate: cost, ResultSize: &result}
}

// estimateRegexReplace: the replacement of each match (the first, with
// first) is repl with each group reference (introduced by ref) expanded
// to a part of that match. Matches do not overlap, so a reference adds at
// most len(s) over all of them.
func (cc *celCostCheck) estimateRegexReplace(name string, est celcost.Estimator, sNode, pattern, replNode celcost.AstNode, ref byte, first bool) *celcost.CallEstimate {
	search := estimateRegexSearch(est, sNode, pattern)
	s, repl := sizeOf(est, sNode), sizeOf(est, replNode)
	refs := repl.Max / 2 // a reference is at least two characters
	if lit, ok := literalString(replNode); ok {
		refs = uint64(strings.Count(lit, string(ref)))
	}
	matches := s.Max + 1
	if first {
		matches = 1
	}
	growth := celcost.SafeAdd(celcost.SafeMultiply(matches, repl.Max), celcost.SafeMultiply(refs, s.Max))
	what := "the replacement repeated for each match, its group references expanded"
	if first {
		what = "the replacement's group references each expanded to the match"
	}
	cc.checkBuild(name, growth, what)
	result := celcost.SizeEstimate{Min: 0, Max: celcost.SafeAdd(s.Max, growth)}
	return &celcost.CallEstimate{CostEstimate: search.CostEstimate.Add(result.AsCost()), ResultSize: &result}
}

// estimateRegexSearch: a search of s for a pattern (cel-go's estimate of
// matches). One that is not a literal is measured at run time
// (boundPatterns), and such an expression is counted as it runs.
func estimateRegexSearch(est celcost.Estimator, sNode, pattern celcost.AstNode) *celcost.CallEstimate {
	s, p := sizeOf(est, sNode), sizeOf(est, pattern)
	cost := celcost.FixedCostEstimate(celcost.CallCost).Add(celcost.FixedCostEstimate(
		celcost.SafeMultiply(celcost.SafeMultiplyByFactor(s.Max+1, celcost.StringTraversalCostFactor),
			celcost.SafeMultiplyByFactor(p.Max+1, celcost.RegexStringLengthCostFactor))))
	return &celcost.CallEstimate{CostEstimate: cost}
}

// checkBuild refuses a call that may add more than MaxCELString bytes to
// the strings it was given, at the estimate's sizes: the product of two
// values from the request (4 GiB at 64 KiB each).
func (cc *celCostCheck) checkBuild(name string, growth uint64, what string) {
	if growth > MaxCELString {
		cc.refuse("%s() could build a string of up to %s (%s) out of values of the request, a token or the like, and one request could take the gateway's memory; bound what is repeated (a literal, or a substring)", name, byteSize(growth), what)
	}
}

// literalString is a node's value when it is a string literal.
func literalString(n celcost.AstNode) (string, bool) {
	e := n.Expr()
	if e == nil || e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// byteSize writes n bytes for a message: 4.0 GiB, 96 MiB, 512 KiB.
func byteSize(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// checkCELCost refuses an expression whose worst case exceeds MaxCELCost,
// or that builds strings or compiles patterns without bound, and returns
// that worst case (unknown when cel-go cannot estimate it).
func checkCELCost(env *cel.Env, ast *cel.Ast) (celcost.Estimate, error) {
	var cc celCostCheck
	c, err := env.EstimateCost(ast, celCostEstimator{}, cc.options()...)
	if cc.refusal != nil {
		return c, cc.refusal
	}
	if err != nil {
		// No estimate (an unusual call): nothing to refuse on, and the
		// evaluation counted.
		return celcost.UnknownCostEstimate(), nil
	}
	if c.Max > MaxCELCost {
		return c, fmt.Errorf("invalid CEL expression: its worst case is too costly to run per request (a loop within a loop over request or token data?); use sets.intersects or sets.contains to compare two lists")
	}
	return c, nil
}

// celProgram makes the program of an expression checked by checkCELCost
// whose worst case is est: counted as it runs, and stopped at
// MaxCELRuntimeCost, when that worst case exceeds it.
func celProgram(env *cel.Env, ast *cel.Ast, est celcost.Estimate, opts ...cel.ProgramOption) (cel.Program, error) {
	if est.Max > MaxCELRuntimeCost {
		opts = append(opts, cel.CostLimit(MaxCELRuntimeCost), cel.CostTracking(celRuntimeCost{}),
			cel.CostTrackerOptions(celcost.WithSizingStrategy(celTrackSizing{celcost.DefaultSizingStrategy()})))
	}
	p, err := env.Program(ast, opts...)
	if err != nil {
		return nil, fmt.Errorf("invalid CEL expression: %v", err)
	}
	return p, nil
}

// celRuntimeCost charges, in a counted evaluation, each byte a call
// builds: conversions between strings and bytes and their concatenation
// (cel-go counts a tenth), and the calls of celDataCalls (cel-go counts
// one), as reading their arguments and building their result once.
type celRuntimeCost struct{}

func (celRuntimeCost) CallCost(function, _ string, args []ref.Val, result ref.Val) *uint64 {
	n := celcost.CallCost
	switch {
	case function == overloads.TypeConvertString || function == overloads.TypeConvertBytes || function == operators.Add:
		switch result.(type) {
		case types.String, types.Bytes:
			n += valueSize(result)
			return &n
		}
		return nil
	case !celDataCalls[function]:
		return nil
	}
	for _, a := range args {
		n = celcost.SafeAdd(n, valueSize(a))
	}
	n = celcost.SafeAdd(n, valueSize(result))
	return &n
}

// celTrackSizing sizes a string by its bytes in a counted evaluation:
// cel-go's default counts its code points, a scan of the string for each
// call it charges, so that counting a loop comparing each part of a header
// with another header scanned the other once per part (quadratic in the
// request's size where the evaluation itself is not).
type celTrackSizing struct{ celcost.SizingStrategy }

func (s celTrackSizing) TrackSize(ctx celcost.TrackContext, v ref.Val) (uint64, bool) {
	if str, ok := v.(types.String); ok {
		return uint64(len(str)), true
	}
	return s.SizingStrategy.TrackSize(ctx, v)
}

// valueSize is a string's or bytes' length, a list's or map's number of
// elements.
func valueSize(v ref.Val) uint64 {
	switch v := v.(type) {
	case types.String:
		return uint64(len(v))
	case types.Bytes:
		return uint64(len(v))
	case traits.Sizer:
		if n, ok := v.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
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
	est, err := checkCELCost(env, ast)
	if err != nil {
		return nil, nil, err
	}
	p, err := celProgram(env, ast, est, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return nil, nil, err
	}
	return p, ast, nil
}
