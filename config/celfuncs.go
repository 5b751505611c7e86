package config

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"unicode/utf8"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/decls"
	"cel.dev/cel-go/common/functions"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
	"cel.dev/cel-go/interpreter"

	"github.com/relaygate/gateway/codec/hexdigit"
)

// celLibraries is agentgateway's CEL function library (crates/celx,
// `insert_all`) as cel-go options. cel-go's own extensions cover what they
// can, with agentgateway's names and meaning:
//
//   - ext.Strings: charAt, indexOf, lastIndexOf, join, lowerAscii,
//     upperAscii, replace, split, substring, trim (and format, quote,
//     reverse);
//   - ext.Math: math.least, greatest, ceil, floor, round, trunc, isInf,
//     isNaN, isFinite, abs, sign, sqrt, bitAnd, bitOr, bitXor, bitNot,
//     bitShiftLeft, bitShiftRight;
//   - ext.Network, cel-go's port of the Kubernetes IP and CIDR library: ip,
//     cidr, isIP, isCIDR, ip.isCanonical, string(ip|cidr), <cidr>.containsIP
//     and .containsCIDR (an ip/cidr or a string), .ip(), .masked(),
//     .isMask(), .prefixLength(), <ip>.family(), .isLoopback(),
//     .isUnspecified(), .isGlobalUnicast(), .isLinkLocalUnicast(),
//     .isLinkLocalMulticast();
//   - ext.Encoders: base64.encode(bytes), base64.decode(string). Version 1:
//     version 2 adds json.parse, which returns an optional that rules (no
//     optional types) could not unwrap, and names agentgateway lacks;
//   - ext.Lists: distinct, flatten, range, reverse, slice, sort, sortBy,
//     first, last; ext.Sets: sets.contains, sets.equivalent,
//     sets.intersects;
//   - ext.Regex (with cel.OptionalTypes): regex.replace, regex.extract
//     (an optional: .orValue("")), regex.extractAll;
//   - ext.Bindings: cel.bind(name, value, expr);
//   - ext.TwoVarComprehensions: the map insertion mapValues and filterKeys
//     expand to (and two-variable all, exists, transformMap, ...).
//
// agentgatewayLib adds the rest (see its CompileOptions).
func celLibraries() []cel.EnvOption {
	return []cel.EnvOption{
		ext.Strings(),
		ext.Math(),
		ext.Network(),
		ext.Encoders(ext.EncodersVersion(1)),
		ext.Lists(),
		ext.Sets(),
		cel.OptionalTypes(), // regex.extract answers an optional: .orValue("")
		ext.Regex(),
		ext.Bindings(),
		ext.TwoVarComprehensions(),
		cel.Lib(agentgatewayLib{impls: callImpls{}}),
	}
}

// celDataCalls are this package's functions (cel-go has no cost model for
// them) whose work is in proportion to the size of their arguments and
// result: the cost estimate (celCostEstimator) and a counted evaluation
// (celRuntimeCost) charge them so. The others (default, coalesce, fail,
// random, flatten) take constant time. Keyed by function name: a call on
// a value of type dyn (request.headers["x"]) is dispatched by name at run
// time.
var celDataCalls = map[string]bool{
	"json": true, "jsonField": true, "toJson": true, "to_json": true, "merge": true,
	"regexReplace": true, "stripPrefix": true, "stripSuffix": true,
	"base64Encode": true, "base64Decode": true, "base64.encode": true, "base64.decode": true,
	"url.encode": true, "url.decode": true, "form.decode": true, "form.encode": true,
	"sha1.encode": true, "sha256.encode": true, "md5.encode": true,
	"unvalidatedJwtPayload": true,
}

// celUnsupported are agentgateway functions left out of rules, and why. A
// rule calling one is a config error (an undeclared reference) that says so.
var celUnsupported = []struct{ name, why string }{
	{"random", "a rule must not allow or deny at random"},
	{"uuid", "a fresh random id cannot decide a rule"},
	{"variables", "use the variables by name: jwt, request, source, mcp"},
	{"unvalidatedJwtPayload", "it reads claims nobody verified; jwt holds the claims of a validated token"},
	{"flatten", "it only shapes transformation output"},
	{"flattenRecursive", "it only shapes transformation output"},
	{"flatten_recursive", "it only shapes transformation output"},
}

// celUnsupportedHint adds why to an undeclared-reference error about a left
// out function.
func celUnsupportedHint(msg string) string {
	for _, u := range celUnsupported {
		if strings.Contains(msg, "undeclared reference to '"+u.name+"'") {
			msg += "\n" + u.name + "() is agentgateway's, and not available in rules: " + u.why
		}
	}
	return msg
}

// agentgatewayLib is the part of agentgateway's library cel-go lacks:
// default, coalesce, fail, json, jsonField, toJson (and to_json), with,
// mapValues, filterKeys, merge, regexReplace, stripPrefix, stripSuffix,
// base64Encode, base64Decode, string/bytes overloads of base64.encode and
// base64.decode, url.encode, url.decode, form.encode, form.decode,
// sha1.encode, sha256.encode, md5.encode.
type agentgatewayLib struct {
	// impls are the implementations of the calls boundPatterns wraps, as
	// the environment declared them (boundCalls).
	impls callImpls
}

// callImpls are implementations by overload ID and function name.
type callImpls map[string]functions.FunctionOp

func (agentgatewayLib) LibraryName() string { return "relaygate.agentgateway" }

// Internal names.
const (
	mapInsertFunc = "cel.@mapInsert" // ext.TwoVarComprehensions' map insertion
	hiddenKeyVar  = "#key"           // iteration variables a rule cannot name
	hiddenValVar  = "#value"
	unusedIterVar = "#unused"
)

// CompileOptions implements cel.Library.
func (l agentgatewayLib) CompileOptions() []cel.EnvOption {
	dyn, str, byt := cel.DynType, cel.StringType, cel.BytesType
	mapDyn := cel.MapType(dyn, dyn)
	return []cel.EnvOption{
		cel.Macros(
			// <value>.with(name, <expr>): expr with name bound to value.
			cel.ReceiverMacro("with", 2, withMacro),
			// <map>.mapValues(v, <expr>): the map with each value v replaced by expr.
			cel.ReceiverMacro("mapValues", 2, mapValuesMacro),
			// <map>.filterKeys(k, <bool expr>): the entries whose key k makes expr true.
			cel.ReceiverMacro("filterKeys", 2, filterKeysMacro),
			// coalesce(a, b, ...): the first argument that is neither null nor an error.
			cel.GlobalVarArgMacro("coalesce", coalesceMacro),
		),
		// default(<expr>, d): expr, or d when expr is null or names a
		// missing key or variable. Non-strict: it sees expr's error.
		cel.Function("default",
			cel.Overload("default_dyn_dyn", []*cel.Type{dyn, dyn}, dyn,
				cel.OverloadIsNonStrict(), cel.BinaryBinding(celDefault))),
		// coalesce of two (the macro nests longer lists).
		cel.Function("coalesce",
			cel.Overload("coalesce_dyn_dyn", []*cel.Type{dyn, dyn}, dyn,
				cel.OverloadIsNonStrict(), cel.BinaryBinding(celCoalesce))),
		cel.Function("fail",
			cel.Overload("fail_string", []*cel.Type{str}, dyn,
				cel.UnaryBinding(func(msg ref.Val) ref.Val {
					return types.NewErr("fail() called: %s", msg.(types.String))
				}))),
		cel.Function("json",
			cel.Overload("json_string", []*cel.Type{str}, dyn, cel.UnaryBinding(celJSON)),
			cel.Overload("json_bytes", []*cel.Type{byt}, dyn, cel.UnaryBinding(celJSON))),
		cel.Function("jsonField",
			cel.Overload("json_field_string_string", []*cel.Type{str, str}, dyn, cel.BinaryBinding(celJSONField)),
			cel.Overload("json_field_bytes_string", []*cel.Type{byt, str}, dyn, cel.BinaryBinding(celJSONField))),
		cel.Function("toJson",
			cel.Overload("to_json_dyn", []*cel.Type{dyn}, str, cel.UnaryBinding(celToJSON))),
		cel.Function("to_json", // agentgateway's older name
			cel.Overload("to_json_legacy_dyn", []*cel.Type{dyn}, str, cel.UnaryBinding(celToJSON))),
		cel.Function("merge",
			cel.MemberOverload("map_merge_map", []*cel.Type{mapDyn, mapDyn}, mapDyn, cel.BinaryBinding(celMerge))),
		cel.Function("regexReplace",
			cel.MemberOverload("string_regex_replace_string_string", []*cel.Type{str, str, str}, str,
				cel.FunctionBinding(celRegexReplace))),
		cel.Function("stripPrefix",
			cel.MemberOverload("string_strip_prefix_string", []*cel.Type{str, str}, str,
				cel.BinaryBinding(func(s, p ref.Val) ref.Val {
					return types.String(strings.TrimPrefix(string(s.(types.String)), string(p.(types.String))))
				}))),
		cel.Function("stripSuffix",
			cel.MemberOverload("string_strip_suffix_string", []*cel.Type{str, str}, str,
				cel.BinaryBinding(func(s, p ref.Val) ref.Val {
					return types.String(strings.TrimSuffix(string(s.(types.String)), string(p.(types.String))))
				}))),
		// base64Encode/base64Decode, and the string and bytes overloads
		// agentgateway adds to ext.Encoders' base64.encode(bytes) and
		// base64.decode(string).
		cel.Function("base64Encode",
			cel.Overload("base64_encode_legacy_string", []*cel.Type{str}, str, cel.UnaryBinding(celBase64Encode)),
			cel.Overload("base64_encode_legacy_bytes", []*cel.Type{byt}, str, cel.UnaryBinding(celBase64Encode))),
		cel.Function("base64Decode",
			cel.Overload("base64_decode_legacy_string", []*cel.Type{str}, byt, cel.UnaryBinding(celBase64Decode)),
			cel.Overload("base64_decode_legacy_bytes", []*cel.Type{byt}, byt, cel.UnaryBinding(celBase64Decode))),
		cel.Function("base64.encode",
			cel.Overload("base64_encode_string", []*cel.Type{str}, str, cel.UnaryBinding(celBase64Encode))),
		cel.Function("base64.decode",
			cel.Overload("base64_decode_bytes", []*cel.Type{byt}, byt, cel.UnaryBinding(celBase64Decode))),
		cel.Function("url.encode",
			cel.Overload("url_encode_string", []*cel.Type{str}, str, cel.UnaryBinding(celURLEncode)),
			cel.Overload("url_encode_bytes", []*cel.Type{byt}, str, cel.UnaryBinding(celURLEncode))),
		cel.Function("url.decode",
			cel.Overload("url_decode_string", []*cel.Type{str}, str, cel.UnaryBinding(celURLDecode))),
		cel.Function("form.decode",
			cel.Overload("form_decode_string", []*cel.Type{str}, cel.MapType(str, dyn), cel.UnaryBinding(celFormDecode)),
			cel.Overload("form_decode_bytes", []*cel.Type{byt}, cel.MapType(str, dyn), cel.UnaryBinding(celFormDecode))),
		cel.Function("form.encode",
			cel.Overload("form_encode_map", []*cel.Type{mapDyn}, str, cel.UnaryBinding(celFormEncode))),
		hashFunction("sha1.encode", "sha1", sha1.New),
		hashFunction("sha256.encode", "sha256", sha256.New),
		hashFunction("md5.encode", "md5", md5.New),
		cel.ASTValidators(regexLiteralValidator{}),
		l.boundCalls,
	}
}

// MaxCELString bounds the string one call of replace, join, regexReplace
// or regex.replace may build: the larger of 32 MiB and the longest string
// it was given. Those are the calls whose result may be the product of two
// sizes (a value repeated for each match in another, or between each of a
// list's elements), so that one request could otherwise take the
// gateway's memory: a call that would build more fails, before building
// it (cel-go's runtime cost limit charges a call once it returned).
const MaxCELString = 32 << 20

// builtSize is the length of the string a call would build and the
// longest string it was given; ok is false when it cannot tell (the call
// will fail on its arguments).
type builtSize func(args []ref.Val) (n, longest int, ok bool)

// patternFunctions compile the pattern given as their second argument (the
// receiver is the first); boundPatterns measures one that is not a
// literal.
var patternFunctions = map[string]bool{
	overloads.Matches: true, "regex.extract": true, "regex.extractAll": true, "regex.replace": true, "regexReplace": true,
}

// boundCalls replaces the implementations of the calls MaxCELString bounds
// by ones that measure the result first, and keeps those of
// patternFunctions for boundPatterns. It runs after the libraries that
// declare them (celLibraries' order).
func (l agentgatewayLib) boundCalls(e *cel.Env) (*cel.Env, error) {
	fns := e.Functions()
	for _, g := range []struct {
		function, overload string
		size               builtSize
	}{
		{"replace", "string_replace_string_string", replaceSize},
		{"replace", "string_replace_string_string_int", replaceSize},
		{"join", "list_join", joinSize},
		{"join", "list_join_string", joinSize},
		{"regex.replace", "regex_replace_string_string_string", regexReplaceAllSize},
		{"regex.replace", "regex_replace_string_string_string_int", regexReplaceAllSize},
	} {
		fn := fns[g.function]
		bindings, err := fn.Bindings()
		if err != nil {
			return nil, err
		}
		var impl *functions.Overload
		for _, b := range bindings {
			if b.Operator == g.overload {
				impl = b
			}
		}
		var decl *decls.OverloadDecl
		for _, d := range fn.OverloadDecls() {
			if d.ID() == g.overload {
				decl = d
			}
		}
		if impl == nil || decl == nil {
			return nil, fmt.Errorf("bounding %s: no overload %s", g.function, g.overload)
		}
		overload := cel.Overload
		if decl.IsMemberFunction() {
			overload = cel.MemberOverload
		}
		e, err = cel.Function(g.function, overload(g.overload, decl.ArgTypes(), decl.ResultType(), boundBinding(g.function, impl, g.size)))(e)
		if err != nil {
			return nil, err
		}
	}
	// regex.replace's as bounded just above.
	fns = e.Functions()
	for name := range patternFunctions {
		bindings, err := fns[name].Bindings()
		if err != nil {
			return nil, err
		}
		for _, b := range bindings {
			l.impls[b.Operator] = functionOp(b)
		}
	}
	return e, nil
}

// functionOp is an implementation of any arity as a FunctionOp.
func functionOp(o *functions.Overload) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		switch {
		case len(args) == 1 && o.Unary != nil:
			return o.Unary(args[0])
		case len(args) == 2 && o.Binary != nil:
			return o.Binary(args[0], args[1])
		case o.Function != nil:
			return o.Function(args...)
		}
		return types.NoSuchOverloadErr()
	}
}

// boundPatterns makes a call of patternFunctions whose pattern is not a
// literal measure it before compiling it: a pattern whose program (about
// one instruction per character, a repeat counting its copies) times the
// text's length exceeds MaxCELRuntimeCost fails, unparsed further, since
// compiling and matching it takes time (and memory) in proportion to both.
// A client's pattern could take seconds and hundreds of megabytes. A
// literal pattern is the configuration's, and left as it is.
func (l agentgatewayLib) boundPatterns(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || !patternFunctions[call.Function()] {
		return i, nil
	}
	args := call.Args()
	if len(args) < 2 {
		return i, nil
	}
	if _, isConst := args[1].(interpreter.InterpretableConst); isConst {
		return i, nil
	}
	impl := l.impls[call.OverloadID()]
	if impl == nil {
		impl = l.impls[call.Function()]
	}
	if impl == nil {
		return i, nil
	}
	name := call.Function()
	return interpreter.NewCall(call.ID(), name, call.OverloadID(), args, func(vals ...ref.Val) ref.Val {
		if len(vals) >= 2 {
			text, ok1 := vals[0].(types.String)
			pattern, ok2 := vals[1].(types.String)
			if ok1 && ok2 {
				if err := checkPattern(name, string(text), string(pattern)); err != nil {
					return err
				}
			}
		}
		return impl(vals...)
	}), nil
}

// checkPattern fails a pattern too large to compile and match against
// text within MaxCELRuntimeCost (see boundPatterns).
func checkPattern(name, text, pattern string) ref.Val {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil // the call reports it
	}
	size := patternSize(re)
	if work := uint64(len(text)+1) * uint64(size); work > MaxCELRuntimeCost {
		return types.NewErr("%s: a pattern of about %d instructions on %d bytes is more than an evaluation may do; the pattern is not a literal", name, size, len(text))
	}
	return nil
}

// patternSize is about the number of instructions re compiles to: one per
// node and literal character, a repeat's body counted once per copy.
func patternSize(re *syntax.Regexp) int {
	const most = 1 << 30
	n := 1 + len(re.Rune)
	for _, sub := range re.Sub {
		n = min(n+patternSize(sub), most)
	}
	if re.Op == syntax.OpRepeat {
		copies := re.Max
		if copies < 0 {
			copies = re.Min + 1
		}
		n = min(n*max(copies, 1), most)
	}
	return n
}

// boundBinding is impl, failing instead when size says its result would
// be longer than MaxCELString allows; of impl's arity, so that the call is
// planned as it was.
func boundBinding(name string, impl *functions.Overload, size builtSize) cel.OverloadOpt {
	tooLong := func(args ...ref.Val) ref.Val {
		n, longest, ok := size(args)
		if !ok || n <= max(MaxCELString, longest) {
			return nil
		}
		return types.NewErr("%s: the result would be %d bytes, more than the %d a call may build", name, n, max(MaxCELString, longest))
	}
	switch {
	case impl.Unary != nil:
		return cel.UnaryBinding(func(a ref.Val) ref.Val {
			if err := tooLong(a); err != nil {
				return err
			}
			return impl.Unary(a)
		})
	case impl.Binary != nil:
		return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			if err := tooLong(a, b); err != nil {
				return err
			}
			return impl.Binary(a, b)
		})
	}
	return cel.FunctionBinding(func(args ...ref.Val) ref.Val {
		if err := tooLong(args...); err != nil {
			return err
		}
		return impl.Function(args...)
	})
}

// replaceSize measures s.replace(old, new[, n]).
func replaceSize(args []ref.Val) (n, longest int, ok bool) {
	if len(args) < 3 {
		return 0, 0, false
	}
	s, ok1 := args[0].(types.String)
	old, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, false
	}
	longest = max(len(s), len(repl))
	if len(repl) <= len(old) {
		return len(s), longest, true
	}
	count := -1
	if len(args) == 4 {
		limit, isInt := args[3].(types.Int)
		if !isInt {
			return 0, 0, false
		}
		if limit >= 0 && limit < types.Int(len(s)+2) {
			count = int(limit)
		}
	}
	matches := utf8.RuneCountInString(string(s)) + 1
	if old != "" {
		matches = strings.Count(string(s), string(old))
	}
	if count >= 0 {
		matches = min(matches, count)
	}
	return len(s) + matches*(len(repl)-len(old)), longest, true
}

// joinSize measures list.join([sep]).
func joinSize(args []ref.Val) (n, longest int, ok bool) {
	list, isList := args[0].(traits.Lister)
	if !isList {
		return 0, 0, false
	}
	var sep types.String
	if len(args) == 2 {
		if sep, ok = args[1].(types.String); !ok {
			return 0, 0, false
		}
	}
	count, isInt := list.Size().(types.Int)
	if !isInt {
		return 0, 0, false
	}
	if count > 0 {
		n = (int(count) - 1) * len(sep)
	}
	longest = len(sep)
	for it := list.Iterator(); it.HasNext() == types.True; {
		elem, isStr := it.Next().(types.String)
		if !isStr {
			return 0, 0, false
		}
		n += len(elem)
		longest = max(longest, len(elem))
	}
	return n, longest, true
}

// regexReplaceAllSize measures regex.replace(s, pattern, repl[, n]) (every
// match, or the first n, replaced by repl with \1 to \9 expanded): first
// bounded without matching (each of at most len(s)+1 matches gets repl,
// and a group reference adds at most len(s) over all of them, matches not
// overlapping), and matched only when that bound is too large.
func regexReplaceAllSize(args []ref.Val) (n, longest int, ok bool) {
	if len(args) < 3 {
		return 0, 0, false
	}
	s, ok1 := args[0].(types.String)
	pattern, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, false
	}
	limit := -1
	if len(args) == 4 {
		l, isInt := args[3].(types.Int)
		if !isInt {
			return 0, 0, false
		}
		if l >= 0 && l < types.Int(len(s)+2) {
			limit = int(l)
		}
	}
	longest = max(len(s), len(repl))
	matches := len(s) + 1
	if limit >= 0 {
		matches = min(matches, limit)
	}
	// A byte of repl is written as at most 3 (an invalid one as U+FFFD).
	refs := strings.Count(string(repl), "\\")
	if bound := len(s) + matches*len(repl)*3 + refs*len(s); bound <= max(MaxCELString, longest) {
		return bound, longest, true
	}
	re, err := regexp.Compile(string(pattern))
	if err != nil {
		return 0, 0, false
	}
	n = len(s)
	for _, m := range re.FindAllStringSubmatchIndex(string(s), limit) {
		n -= m[1] - m[0]
		add, valid := expandedSize(string(repl), string(s), m)
		if !valid {
			return 0, 0, false // the call reports the bad replacement
		}
		n += add
	}
	return n, longest, true
}

// expandedSize is the length of repl as regex.replace expands it for the
// match m of s: \\ is a backslash, \N group N, any other character
// written as UTF-8 (an invalid byte as U+FFFD).
func expandedSize(repl, s string, m []int) (int, bool) {
	n := 0
	for i := 0; i < len(repl); {
		r, w := utf8.DecodeRuneInString(repl[i:])
		i += w
		if r != '\\' {
			n += utf8.RuneLen(r)
			continue
		}
		if i >= len(repl) {
			return 0, false
		}
		c := repl[i]
		i++
		switch {
		case c == '\\':
			n++
		case '0' <= c && c <= '9':
			g := int(c - '0')
			if 2*g+1 >= len(m) {
				return 0, false
			}
			if m[2*g] >= 0 {
				n += m[2*g+1] - m[2*g]
			}
		default:
			return 0, false
		}
	}
	return n, true
}

// ProgramOptions implements cel.Library: regexReplace compiles a literal
// pattern once, and cidr("...") and ip("...") of a literal are parsed once,
// when the program is built, not per request; isGlobalUnicast answers as
// agentgateway's does.
func (l agentgatewayLib) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.OptimizeRegex(&interpreter.RegexOptimization{
			Function:   "regexReplace",
			RegexIndex: 1,
			Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
				re, err := regexp.Compile(pattern)
				if err != nil {
					return nil, err
				}
				return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
					if len(args) != 3 {
						return types.NoSuchOverloadErr()
					}
					s, ok1 := args[0].(types.String)
					repl, ok2 := args[2].(types.String)
					if !ok1 || !ok2 {
						return types.NoSuchOverloadErr()
					}
					return replaceFirst(re, string(s), string(repl))
				}), nil
			},
		}),
		cel.CustomDecoratorV2(foldNetworkLiterals),
		cel.CustomDecoratorV2(globalUnicastAsAgentgateway),
		cel.CustomDecoratorV2(l.boundPatterns),
	}
}

// globalUnicastAsAgentgateway makes <ip>.isGlobalUnicast() false for IPv6
// unique local addresses (fc00::/7), as agentgateway's is; Go's, and so
// ext.Network's, counts them as global.
func globalUnicastAsAgentgateway(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || call.OverloadID() != "ip_is_global_unicast" {
		return i, nil
	}
	return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
		if len(args) != 1 {
			return types.NoSuchOverloadErr()
		}
		ip, ok := args[0].(ext.IP)
		if !ok {
			return types.NoSuchOverloadErr()
		}
		a := ip.Addr
		return types.Bool(a.IsGlobalUnicast() && !(a.Is6() && a.As16()[0]&0xfe == 0xfc))
	}), nil
}

// foldNetworkLiterals evaluates cidr and ip calls on constants once. (The
// network library's validator already rejects a bad literal at compile
// time; a call that still fails is left to fail at run time.)
func foldNetworkLiterals(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || (call.Function() != "cidr" && call.Function() != "ip") {
		return i, nil
	}
	args := call.Args()
	if len(args) != 1 {
		return i, nil
	}
	if _, isConst := args[0].(interpreter.InterpretableConst); !isConst {
		return i, nil
	}
	v := call.Eval(interpreter.EmptyActivation())
	if types.IsUnknownOrError(v) {
		return i, nil
	}
	return interpreter.NewConstValue(call.ID(), v), nil
}

// regexLiteralValidator reports a bad literal regexReplace pattern as a
// compile error at the pattern.
type regexLiteralValidator struct{}

func (regexLiteralValidator) Name() string { return "relaygate.validator.regexReplace" }

func (regexLiteralValidator) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	for _, call := range ast.MatchDescendants(ast.NavigateAST(a), ast.FunctionMatcher("regexReplace")) {
		args := call.AsCall().Args()
		if len(args) != 2 || args[0].Kind() != ast.LiteralKind {
			continue
		}
		pattern, ok := args[0].AsLiteral().Value().(string)
		if !ok {
			continue
		}
		if _, err := regexp.Compile(pattern); err != nil {
			iss.ReportErrorAtID(args[0].ID(), "invalid regexReplace pattern: %v", err)
		}
	}
}

func withMacro(mef cel.MacroExprFactory, target ast.Expr, args []ast.Expr) (ast.Expr, *cel.Error) {
	name, err := macroVar(mef, "with", args[0])
	if err != nil {
		return nil, err
	}
	// A comprehension over nothing whose accumulator, the bound name,
	// starts as the receiver: what cel.bind expands to.
	return mef.NewComprehension(mef.NewList(), unusedIterVar, name, target,
		mef.NewLiteral(types.False), mef.NewIdent(name), args[1]), nil
}

func mapValuesMacro(mef cel.MacroExprFactory, target ast.Expr, args []ast.Expr) (ast.Expr, *cel.Error) {
	v, err := macroVar(mef, "mapValues", args[0])
	if err != nil {
		return nil, err
	}
	step := mef.NewCall(mapInsertFunc, mef.NewAccuIdent(), mef.NewIdent(hiddenKeyVar), args[1])
	return mef.NewComprehensionTwoVar(target, hiddenKeyVar, v, mef.AccuIdentName(),
		mef.NewMap(), mef.NewLiteral(types.True), step, mef.NewAccuIdent()), nil
}

func filterKeysMacro(mef cel.MacroExprFactory, target ast.Expr, args []ast.Expr) (ast.Expr, *cel.Error) {
	k, err := macroVar(mef, "filterKeys", args[0])
	if err != nil {
		return nil, err
	}
	insert := mef.NewCall(mapInsertFunc, mef.NewAccuIdent(), mef.NewIdent(k), mef.NewIdent(hiddenValVar))
	step := mef.NewCall(operators.Conditional, args[1], insert, mef.NewAccuIdent())
	return mef.NewComprehensionTwoVar(target, k, hiddenValVar, mef.AccuIdentName(),
		mef.NewMap(), mef.NewLiteral(types.True), step, mef.NewAccuIdent()), nil
}

// macroVar is the variable a macro binds: a simple name.
func macroVar(mef cel.MacroExprFactory, macro string, e ast.Expr) (string, *cel.Error) {
	if e.Kind() != ast.IdentKind {
		return "", mef.NewError(e.ID(), macro+"() variable names must be simple identifiers")
	}
	name := e.AsIdent()
	if name == mef.AccuIdentName() || name == "__result__" {
		return "", mef.NewError(e.ID(), macro+"() variable overwrites the accumulator variable")
	}
	return name, nil
}

// coalesceMacro nests coalesce(a, b, c) as coalesce(a, coalesce(b, c)).
// With no argument it does not expand, and the call has no overload.
func coalesceMacro(mef cel.MacroExprFactory, _ ast.Expr, args []ast.Expr) (ast.Expr, *cel.Error) {
	if len(args) == 0 {
		return nil, nil
	}
	e := args[len(args)-1]
	for i := len(args) - 2; i >= 0; i-- {
		e = mef.NewCall("coalesce", args[i], e)
	}
	return e, nil
}

// isMissing is agentgateway's test for default(): null, a missing map key,
// or a variable the request does not have (jwt without a token, mcp outside
// MCP).
func isMissing(v ref.Val) bool {
	if v.Type() == types.NullType {
		return true
	}
	e, ok := v.(*types.Err)
	if !ok {
		return false
	}
	msg := e.Error()
	return strings.HasPrefix(msg, "no such key") || strings.HasPrefix(msg, "no such attribute")
}

func celDefault(v, d ref.Val) ref.Val {
	if isMissing(v) {
		return d
	}
	return v
}

// celCoalesce is coalesce of two: a if it is a value; else b if it is a
// value or null; else null if a was; else b's error (the last error).
func celCoalesce(a, b ref.Val) ref.Val {
	if !types.IsUnknownOrError(a) && a.Type() != types.NullType {
		return a
	}
	if !types.IsUnknownOrError(b) {
		return b
	}
	if a.Type() == types.NullType {
		return a
	}
	return b
}

func celJSON(v ref.Val) ref.Val {
	var s string
	switch v := v.(type) {
	case types.String:
		s = string(v)
	case types.Bytes:
		s = string(v)
	default:
		return types.NoSuchOverloadErr()
	}
	out, err := ext.JSONParse(types.DefaultTypeAdapter, s)
	if err != nil {
		return types.WrapErr(err)
	}
	return out
}

// celJSONField is one top-level field of a JSON object.
func celJSONField(v, key ref.Val) ref.Val {
	var b []byte
	switch v := v.(type) {
	case types.String:
		b = []byte(v)
	case types.Bytes:
		b = v
	default:
		return types.NoSuchOverloadErr()
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return types.NewErr("jsonField: %v", err)
	}
	k := string(key.(types.String))
	raw, ok := fields[k]
	if !ok {
		return types.NewErr("no such key: %s", k)
	}
	out, err := ext.JSONParse(types.DefaultTypeAdapter, string(raw))
	if err != nil {
		return types.WrapErr(err)
	}
	return out
}

func celToJSON(v ref.Val) ref.Val {
	s, err := ext.JSONEncode(v)
	if err != nil {
		return types.WrapErr(err)
	}
	return types.String(s)
}

// celMerge is a's entries and b's, b's winning.
func celMerge(a, b ref.Val) ref.Val {
	am, ok1 := a.(traits.Mapper)
	bm, ok2 := b.(traits.Mapper)
	if !ok1 || !ok2 {
		return types.NoSuchOverloadErr()
	}
	out := make(map[ref.Val]ref.Val, int(am.Size().(types.Int)+bm.Size().(types.Int)))
	for _, m := range []traits.Mapper{am, bm} {
		for it := m.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			out[k] = m.Get(k)
		}
	}
	return types.NewRefValMap(types.DefaultTypeAdapter, out)
}

// celRegexReplace replaces the first match of a pattern that is not a
// literal (a literal one is compiled once, see ProgramOptions).
func celRegexReplace(args ...ref.Val) ref.Val {
	if len(args) != 3 {
		return types.NoSuchOverloadErr()
	}
	s, ok1 := args[0].(types.String)
	pattern, ok2 := args[1].(types.String)
	repl, ok3 := args[2].(types.String)
	if !ok1 || !ok2 || !ok3 {
		return types.NoSuchOverloadErr()
	}
	re, err := regexp.Compile(string(pattern))
	if err != nil {
		return types.NewErr("'%s' not a valid regex: %v", pattern, err)
	}
	return replaceFirst(re, string(s), string(repl))
}

// replaceFirst replaces the leftmost match, as Rust's Regex::replace does;
// repl may name groups as $1 or ${name}. Each reference adds at most the
// match's length: one that could make the result longer than MaxCELString
// allows is an error (see MaxCELString).
func replaceFirst(re *regexp.Regexp, s, repl string) ref.Val {
	m := re.FindStringSubmatchIndex(s)
	if m == nil {
		return types.String(s)
	}
	bound := len(s) + len(repl) + strings.Count(repl, "$")*(m[1]-m[0])
	if limit := max(MaxCELString, len(s), len(repl)); bound > limit {
		return types.NewErr("regexReplace: the result could be %d bytes, more than the %d a call may build", bound, limit)
	}
	out := make([]byte, 0, len(s)+len(repl))
	out = append(out, s[:m[0]]...)
	out = re.ExpandString(out, repl, s, m)
	out = append(out, s[m[1]:]...)
	return types.String(out)
}

// bytesOf is a string or bytes argument's bytes.
func bytesOf(v ref.Val) ([]byte, bool) {
	switch v := v.(type) {
	case types.String:
		return []byte(v), true
	case types.Bytes:
		return v, true
	}
	return nil, false
}

func celBase64Encode(v ref.Val) ref.Val {
	b, ok := bytesOf(v)
	if !ok {
		return types.NoSuchOverloadErr()
	}
	return types.String(ext.Base64Encode(b))
}

// celBase64Decode decodes standard base64, padded or not.
func celBase64Decode(v ref.Val) ref.Val {
	b, ok := bytesOf(v)
	if !ok {
		return types.NoSuchOverloadErr()
	}
	out, err := ext.Base64Decode(string(b))
	if err != nil {
		return types.WrapErr(err)
	}
	return types.Bytes(out)
}

func hashFunction(name, id string, h func() hash.Hash) cel.EnvOption {
	f := cel.UnaryBinding(func(v ref.Val) ref.Val {
		b, ok := bytesOf(v)
		if !ok {
			return types.NoSuchOverloadErr()
		}
		d := h()
		d.Write(b)
		return types.String(hex.EncodeToString(d.Sum(nil)))
	})
	return cel.Function(name,
		cel.Overload(id+"_encode_string", []*cel.Type{cel.StringType}, cel.StringType, f),
		cel.Overload(id+"_encode_bytes", []*cel.Type{cel.BytesType}, cel.StringType, f))
}

// celURLEncode percent-encodes every byte but the unreserved ones
// (A-Z a-z 0-9 - . _ ~), a space as %20.
func celURLEncode(v ref.Val) ref.Val {
	b, ok := bytesOf(v)
	if !ok {
		return types.NoSuchOverloadErr()
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for _, c := range b {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('%')
		sb.WriteByte(upperHex[c>>4])
		sb.WriteByte(upperHex[c&15])
	}
	return types.String(sb.String())
}

// celURLDecode decodes %XX sequences (others stay as they are, and + stays
// +); the result must be UTF-8.
func celURLDecode(v ref.Val) ref.Val {
	out := percentDecode(string(v.(types.String)))
	if !utf8.Valid(out) {
		return types.NewErr("url.decode: the decoded value is not UTF-8")
	}
	return types.String(out)
}

// percentDecode decodes %XX sequences; others stay as they are.
func percentDecode(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && hexdigit.Is(s[i+1]) && hexdigit.Is(s[i+2]) {
			out = append(out, hexdigit.Value(s[i+1])<<4|hexdigit.Value(s[i+2]))
			i += 2
			continue
		}
		out = append(out, s[i])
	}
	return out
}

// celFormDecode parses application/x-www-form-urlencoded text into a map;
// a repeated name maps to the list of its values.
func celFormDecode(v ref.Val) ref.Val {
	b, ok := bytesOf(v)
	if !ok {
		return types.NoSuchOverloadErr()
	}
	out := map[string]any{}
	for _, pair := range strings.Split(string(b), "&") {
		if pair == "" {
			continue
		}
		name, value, _ := strings.Cut(pair, "=")
		k := formUnescape(name)
		val := formUnescape(value)
		switch prev := out[k].(type) {
		case nil:
			out[k] = val
		case string:
			out[k] = []any{prev, val}
		case []any:
			out[k] = append(prev, val)
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

// formUnescape is one name or value: + is a space, then %XX decoded, and
// bytes that are not UTF-8 become U+FFFD.
func formUnescape(s string) string {
	return strings.ToValidUTF8(string(percentDecode(strings.ReplaceAll(s, "+", " "))), "\uFFFD")
}

// celFormEncode writes a map of strings (or lists of strings; null values
// are left out) as application/x-www-form-urlencoded text, names sorted.
func celFormEncode(v ref.Val) ref.Val {
	m, ok := v.(traits.Mapper)
	if !ok {
		return types.NoSuchOverloadErr()
	}
	type field struct{ name, value string }
	var fields []field
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		name := fmt.Sprint(k.Value())
		var values []ref.Val
		switch val := m.Get(k).(type) {
		case types.Null:
		case traits.Lister:
			for li := val.Iterator(); li.HasNext() == types.True; {
				values = append(values, li.Next())
			}
		default:
			values = []ref.Val{val}
		}
		for _, val := range values {
			s, isStr := val.(types.String)
			if !isStr {
				return types.NewErr("invalid form value for key %s: %s is not a string", name, val.Type().TypeName())
			}
			fields = append(fields, field{name, string(s)})
		}
	}
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].name < fields[j].name })
	var sb strings.Builder
	for i, f := range fields {
		if i > 0 {
			sb.WriteByte('&')
		}
		formEscape(&sb, f.name)
		sb.WriteByte('=')
		formEscape(&sb, f.value)
	}
	return types.String(sb.String())
}

// formEscape keeps A-Z a-z 0-9 * - . _, writes a space as +, and
// percent-encodes the rest.
func formEscape(sb *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '*' || c == '-' || c == '.' || c == '_':
			sb.WriteByte(c)
		case c == ' ':
			sb.WriteByte('+')
		default:
			sb.WriteByte('%')
			sb.WriteByte(upperHex[c>>4])
			sb.WriteByte(upperHex[c&15])
		}
	}
}

const upperHex = "0123456789ABCDEF"
