package celrules

import (
	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
)

// ReadsBody reports whether a checked expression may read variable's body
// (variable is "request" or "response"): `request.body`,
// `request["body"]`, `has(request.body)`, `request.?body`, an index that
// is not a constant, or the whole map handed on (`toJson(request)`), which
// shows the body too. Names a `with` (or `cel.bind`) binds to the variable
// count as the variable. A policy with such an expression reads the body
// whole before it evaluates it (agentgateway's rule: only an expression
// naming the body buffers it); every other expression leaves the body
// streaming.
//
// The analysis errs on the side of reading: an expression it cannot see
// through (the variable put in a list, passed to a function) counts.
func ReadsBody(a *cel.Ast, variable string) bool {
	if a == nil {
		return false
	}
	root := a.NativeRep().Expr()
	aliases := map[string]bool{variable: true}
	// A comprehension whose accumulator starts as an alias (what with()
	// and cel.bind expand to), or is set to one, binds another; repeat
	// until none is new.
	for grown := true; grown; {
		grown = false
		celast.PreOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
			if e.Kind() != celast.ComprehensionKind {
				return
			}
			c := e.AsComprehension()
			binds := isAlias(c.AccuInit(), aliases) || isAlias(c.LoopStep(), aliases)
			if binds && !aliases[c.AccuVar()] {
				aliases[c.AccuVar()] = true
				grown = true
			}
		}))
	}
	reads := false
	// Every place an alias appears must be a lookup of a key other than
	// "body" (request.headers), or a comprehension's starting accumulator
	// (an alias then).
	celast.PreOrderVisit(root, celast.NewExprVisitor(func(e celast.Expr) {
		if reads {
			return
		}
		switch e.Kind() {
		case celast.SelectKind:
			s := e.AsSelect()
			if isAlias(s.Operand(), aliases) && s.FieldName() == "body" {
				reads = true
			}
		case celast.CallKind:
			c := e.AsCall()
			args := c.Args()
			if c.IsMemberFunction() && isAlias(c.Target(), aliases) {
				// request.size(), request.exists(...) expanded aside: a
				// member call on the map sees all of it.
				reads = true
				return
			}
			for i, arg := range args {
				if !isAlias(arg, aliases) {
					continue
				}
				lookup := i == 0 && len(args) == 2 && isLookup(c.FunctionName())
				if !lookup {
					reads = true
					return
				}
				if key, ok := constantString(args[1]); !ok || key == "body" {
					reads = true
					return
				}
			}
		case celast.ListKind:
			for _, el := range e.AsList().Elements() {
				if isAlias(el, aliases) {
					reads = true
				}
			}
		case celast.MapKind:
			for _, entry := range e.AsMap().Entries() {
				me := entry.AsMapEntry()
				if isAlias(me.Key(), aliases) || isAlias(me.Value(), aliases) {
					reads = true
				}
			}
		case celast.StructKind:
			for _, f := range e.AsStruct().Fields() {
				if isAlias(f.AsStructField().Value(), aliases) {
					reads = true
				}
			}
		case celast.ComprehensionKind:
			c := e.AsComprehension()
			// The range iterated (its keys, for a map), and a result that
			// is the map. (An accumulator starting as the map, or a step
			// giving it, binds an alias, looked at where it is used.)
			if isAlias(c.IterRange(), aliases) || isAlias(c.Result(), aliases) {
				reads = true
			}
		}
	}))
	if reads {
		return true
	}
	// The whole expression being the map (`request`) hands all of it on.
	return isAlias(root, aliases)
}

// isLookup says whether a function of two arguments looks its first up by
// its second: request["x"], request[?"x"], request.?x.
func isLookup(fn string) bool {
	return fn == operators.Index || fn == operators.OptIndex || fn == operators.OptSelect
}

// constantString is e's value when e is a string literal.
func constantString(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}

func isAlias(e celast.Expr, aliases map[string]bool) bool {
	return e != nil && e.Kind() == celast.IdentKind && aliases[e.AsIdent()]
}
