package decode

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

const (
	// maxDepth bounds the nesting of maps and lists (the root counts as 1).
	maxDepth = 64
	// maxAliasNodes bounds how many values alias expansion may create, so
	// that nested aliases ("billion laughs") cannot blow up.
	maxAliasNodes = 100_000
)

var (
	// plainNumber is the YAML 1.2 core schema number syntax; the parser
	// leaves some of it (e.g. -1e3, 1E+2) as plain strings.
	plainNumber = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	// leadingZero matches decimal-looking integers with a leading zero,
	// which YAML 1.1 reads as octal and YAML 1.2 as decimal.
	leadingZero = regexp.MustCompile(`^[-+]?0[0-9_]+$`)
)

// tokenPos returns the position of an AST node's token, or ok=false.
func tokenPos(an ast.Node) (line, col int, ok bool) {
	if an == nil {
		return 0, 0, false
	}
	tk := an.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, 0, false
	}
	return tk.Position.Line, tk.Position.Column, true
}

func (s *state) newNode(kind Kind, path string, line, col int) *Node {
	return &Node{st: s, kind: kind, path: path, line: line, col: col}
}

// badNode is a placeholder for a value whose error is already reported;
// decoding skips it and errors recorded on it are dropped.
func (s *state) badNode(path string, line, col int) *Node {
	return &Node{st: s, kind: Null, bad: true, path: path, line: line, col: col}
}

// fail reports an error and returns a bad node in its place.
func (s *state) fail(path string, line, col int, format string, args ...any) *Node {
	s.add(path, line, col, fmt.Sprintf(format, args...))
	return s.badNode(path, line, col)
}

// document converts the parsed file into the root node; nil when the
// document is empty.
func (s *state) document(f *ast.File) *Node {
	var bodies []ast.Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if _, ok := d.Body.(*ast.DirectiveNode); ok {
			continue
		}
		bodies = append(bodies, d.Body)
	}
	switch len(bodies) {
	case 0:
		return nil
	case 1:
	default:
		line, col, _ := tokenPos(bodies[1])
		s.add("", line, col, "multiple YAML documents are not supported")
		return nil
	}
	root := s.build(bodies[0], "", 0, 1, 1)
	s.anchors = nil // the AST is no longer needed; do not keep it alive
	return root
}

// build converts an AST value into a node at path; depth is the number of
// maps and lists enclosing it; line and col position a missing value.
func (s *state) build(an ast.Node, path string, depth, line, col int) *Node {
	if l, c, ok := tokenPos(an); ok {
		line, col = l, c
	}
	if s.expanding > 0 {
		if s.budget <= 0 {
			if !s.overBudg {
				s.overBudg = true
				return s.fail(path, line, col, "alias expansion too large (more than %d values)", maxAliasNodes)
			}
			return s.badNode(path, line, col)
		}
		s.budget--
	}
	if an == nil {
		return s.newNode(Null, path, line, col)
	}
	switch x := an.(type) {
	case *ast.NullNode:
		n := s.newNode(Null, path, line, col)
		n.text = x.GetToken().Value
		return n
	case *ast.BoolNode:
		n := s.newNode(Bool, path, line, col)
		n.b, n.text = x.Value, x.GetToken().Value
		return n
	case *ast.IntegerNode:
		return s.integer(x, path, line, col)
	case *ast.FloatNode:
		n := s.newNode(Float, path, line, col)
		n.f, n.text = x.Value, x.GetToken().Value
		return n
	case *ast.InfinityNode:
		n := s.newNode(Float, path, line, col)
		n.f, n.text = x.Value, x.GetToken().Value
		return n
	case *ast.NanNode:
		n := s.newNode(Float, path, line, col)
		n.f, n.text = math.NaN(), x.GetToken().Value
		return n
	case *ast.StringNode:
		if x.Token != nil && x.Token.Type == token.StringType && plainNumber.MatchString(x.Value) {
			return s.number(x.Value, path, line, col)
		}
		n := s.newNode(String, path, line, col)
		n.text = x.Value
		return n
	case *ast.LiteralNode:
		n := s.newNode(String, path, line, col)
		if x.Value != nil {
			n.text = x.Value.Value
		}
		return n
	case *ast.MergeKeyNode:
		n := s.newNode(String, path, line, col)
		n.text = "<<"
		return n
	case *ast.MappingNode:
		if !x.IsFlowStyle && len(x.Values) > 0 && x.Values[0] != nil {
			if l, c, ok := tokenPos(x.Values[0].Key); ok {
				line, col = l, c
			}
		}
		return s.mapping(x.Values, path, depth, line, col)
	case *ast.MappingValueNode:
		if l, c, ok := tokenPos(x.Key); ok {
			line, col = l, c
		}
		return s.mapping([]*ast.MappingValueNode{x}, path, depth, line, col)
	case *ast.SequenceNode:
		return s.sequence(x, path, depth, line, col)
	case *ast.AnchorNode:
		n := s.build(x.Value, path, depth, line, col)
		s.defineAnchor(x)
		return n
	case *ast.AliasNode:
		target, ok := s.lookupAnchor(x)
		if !ok {
			return s.fail(path, line, col, "unknown anchor %q", aliasName(x))
		}
		s.expanding++
		n := s.build(target, path, depth, line, col)
		s.expanding--
		return n
	case *ast.TagNode:
		return s.tagged(x, path, depth, line, col)
	}
	return s.fail(path, line, col, "unsupported YAML construct (%s)", an.Type())
}

// defineAnchor records an anchor for later aliases. Anchors met while
// expanding an alias are already known; recording them again could bring
// back an older definition that a later one has replaced.
func (s *state) defineAnchor(x *ast.AnchorNode) {
	if s.expanding > 0 || x.Name == nil || x.Name.GetToken() == nil {
		return
	}
	s.anchors[x.Name.GetToken().Value] = x.Value
}

func aliasName(x *ast.AliasNode) string {
	if x.Value == nil || x.Value.GetToken() == nil {
		return ""
	}
	return x.Value.GetToken().Value
}

// lookupAnchor returns the value an alias refers to. An anchor is defined
// only once its value is complete, so an alias cannot refer to a value
// that encloses it.
func (s *state) lookupAnchor(x *ast.AliasNode) (ast.Node, bool) {
	target, ok := s.anchors[aliasName(x)]
	return target, ok
}

func (s *state) integer(x *ast.IntegerNode, path string, line, col int) *Node {
	text := x.GetToken().Value
	if leadingZero.MatchString(text) {
		return s.leadingZero(text, path, line, col)
	}
	n := s.newNode(Int, path, line, col)
	n.text = text
	switch v := x.Value.(type) {
	case int64:
		n.i = v
	case uint64:
		if v > math.MaxInt64 {
			n.u, n.big = v, true
		} else {
			n.i = int64(v)
		}
	default:
		return s.fail(path, line, col, "invalid integer %s", text)
	}
	return n
}

func (s *state) leadingZero(text, path string, line, col int) *Node {
	sign, digits := "", text
	if text[0] == '-' || text[0] == '+' {
		sign, digits = text[:1], text[1:]
	}
	digits = strings.TrimLeft(digits, "0_")
	if digits == "" {
		digits = "0"
	}
	return s.fail(path, line, col, "integer %s has a leading zero; write %s%s (decimal) or %s0o%s (octal)", text, sign, digits, sign, digits)
}

// number converts a plain scalar in YAML 1.2 number syntax.
func (s *state) number(text, path string, line, col int) *Node {
	if !strings.ContainsAny(text, ".eE") {
		if leadingZero.MatchString(text) {
			return s.leadingZero(text, path, line, col)
		}
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			n := s.newNode(Int, path, line, col)
			n.i, n.text = i, text
			return n
		}
		if u, err := strconv.ParseUint(strings.TrimPrefix(text, "+"), 10, 64); err == nil {
			n := s.newNode(Int, path, line, col)
			n.u, n.big, n.text = u, true, text
			return n
		}
	}
	// Too large integers become (inexact) numbers; range checks reject
	// them where an integer is wanted.
	f, _ := strconv.ParseFloat(text, 64)
	n := s.newNode(Float, path, line, col)
	n.f, n.text = f, text
	return n
}

func (s *state) sequence(x *ast.SequenceNode, path string, depth, line, col int) *Node {
	if depth >= maxDepth {
		return s.fail(path, line, col, "nesting too deep (more than %d levels)", maxDepth)
	}
	n := s.newNode(List, path, line, col)
	n.items = make([]*Node, len(x.Values))
	for i, v := range x.Values {
		n.items[i] = s.build(v, joinIndex(path, i), depth+1, line, col)
	}
	return n
}

// mapping builds a map node: it rejects duplicate keys and resolves merge
// keys. Keys written in the map win over merged keys; among merged maps
// the first one listed wins.
func (s *state) mapping(values []*ast.MappingValueNode, path string, depth, line, col int) *Node {
	if depth >= maxDepth {
		return s.fail(path, line, col, "nesting too deep (more than %d levels)", maxDepth)
	}
	type part struct {
		e      entry
		merged []entry
		merge  bool
	}
	explicit := make(map[string]int, len(values)) // key -> line
	parts := make([]part, 0, len(values))
	mergeLine := 0
	for _, mv := range values {
		if mv == nil || mv.Key == nil {
			continue
		}
		kl, kc, _ := tokenPos(mv.Key)
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			if mergeLine != 0 {
				s.add(joinKey(path, "<<"), kl, kc, fmt.Sprintf("duplicate key %q, first defined on line %d", "<<", mergeLine))
				continue
			}
			mergeLine = kl
			parts = append(parts, part{merge: true, merged: s.mergeSources(mv.Value, path, depth, kl, kc)})
			continue
		}
		key, kl, kc, ok := s.keyText(mv.Key, path, kl, kc)
		if !ok {
			continue
		}
		cp := joinKey(path, key)
		if first, dup := explicit[key]; dup {
			s.add(cp, kl, kc, fmt.Sprintf("duplicate key %q, first defined on line %d", key, first))
			continue
		}
		explicit[key] = kl
		parts = append(parts, part{e: entry{key: key, line: kl, col: kc, val: s.build(mv.Value, cp, depth+1, kl, kc)}})
	}

	n := s.newNode(Map, path, line, col)
	n.entries = make([]entry, 0, len(parts))
	var merged map[string]bool
	for _, p := range parts {
		if !p.merge {
			n.entries = append(n.entries, p.e)
			continue
		}
		if merged == nil {
			merged = make(map[string]bool)
		}
		for _, e := range p.merged {
			if _, ok := explicit[e.key]; ok || merged[e.key] {
				continue
			}
			merged[e.key] = true
			n.entries = append(n.entries, e)
		}
	}
	if len(n.entries) > indexThreshold {
		n.index = make(map[string]int, len(n.entries))
		for i, e := range n.entries {
			n.index[e.key] = i
		}
	}
	return n
}

// mergeSources returns the entries a merge key brings in: from a map, or
// from each map of a list, built at the merging map's path so that their
// paths are those of the merging map.
func (s *state) mergeSources(an ast.Node, path string, depth, line, col int) []entry {
	if l, c, ok := tokenPos(an); ok {
		line, col = l, c
	}
	var seq *ast.SequenceNode
	switch x := an.(type) {
	case *ast.SequenceNode:
		seq = x
	case *ast.AnchorNode:
		if ts, ok := x.Value.(*ast.SequenceNode); ok {
			defer s.defineAnchor(x)
			seq = ts
		}
	case *ast.AliasNode:
		if target, ok := s.lookupAnchor(x); ok {
			if ts, ok := target.(*ast.SequenceNode); ok {
				s.expanding++
				defer func() { s.expanding-- }()
				seq = ts
			}
		}
	}
	if seq == nil {
		return s.mergeMap(an, path, depth, line, col)
	}
	if depth+1 >= maxDepth {
		s.add(path, line, col, fmt.Sprintf("nesting too deep (more than %d levels)", maxDepth))
		return nil
	}
	var out []entry
	for _, item := range seq.Values {
		out = append(out, s.mergeMap(item, path, depth, line, col)...)
	}
	return out
}

func (s *state) mergeMap(an ast.Node, path string, depth, line, col int) []entry {
	m := s.build(an, path, depth, line, col)
	if m.bad {
		return nil
	}
	if m.kind != Map {
		s.errorf(m, "merge key (<<) value must be a map or a list of maps, got %s", m.Describe())
		return nil
	}
	return m.entries
}

// keyText returns the text of a map key and its position. Keys must be
// scalars; non-string scalars (1, true) are taken as written.
func (s *state) keyText(k ast.MapKeyNode, path string, line, col int) (string, int, int, bool) {
	var an ast.Node = k
	for unwrapping := true; unwrapping; {
		switch x := an.(type) {
		case *ast.MappingKeyNode:
			an = x.Value
		case *ast.AnchorNode:
			s.defineAnchor(x)
			an = x.Value
		case *ast.TagNode:
			if tag := tagName(x); tag != "!!str" {
				s.add(path, line, col, fmt.Sprintf("unsupported tag %q on map key", tag))
				return "", 0, 0, false
			}
			an = x.Value
		default:
			unwrapping = false
		}
	}
	if l, c, ok := tokenPos(an); ok {
		line, col = l, c
	}
	switch x := an.(type) {
	case *ast.StringNode:
		return x.Value, line, col, true
	case *ast.LiteralNode:
		if x.Value != nil {
			return x.Value.Value, line, col, true
		}
		return "", line, col, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.NullNode, *ast.InfinityNode, *ast.NanNode:
		return x.GetToken().Value, line, col, true
	case *ast.AliasNode:
		s.add(path, line, col, "an alias as map key is not supported")
	case nil:
		s.add(path, line, col, "empty map key")
	default:
		s.add(path, line, col, "map key must be a scalar")
	}
	return "", 0, 0, false
}

// tagKinds are the standard tags that assert a kind (besides !!str).
var tagKinds = map[string]Kind{"!!int": Int, "!!float": Float, "!!bool": Bool, "!!null": Null, "!!map": Map, "!!seq": List}

func tagName(x *ast.TagNode) string {
	if x.Start == nil {
		return ""
	}
	return x.Start.Value
}

// tagged applies a standard YAML tag; other tags are rejected.
func (s *state) tagged(x *ast.TagNode, path string, depth, line, col int) *Node {
	tag := tagName(x)
	k, known := tagKinds[tag]
	if tag != "!!str" && !known {
		return s.fail(path, line, col, "unsupported tag %q", tag)
	}
	n := s.build(x.Value, path, depth, line, col)
	if n.bad {
		return n
	}
	switch {
	case tag == "!!str":
		if n.kind == Map || n.kind == List {
			return s.fail(path, line, col, "!!str cannot tag a %s", n.kind)
		}
		n.kind = String
	case k == Float && n.kind == Int:
		n.kind, n.f = Float, float64(n.i)
		if n.big {
			n.f = float64(n.u)
		}
	case n.kind != k:
		return s.fail(path, line, col, "value tagged %s cannot be %s", tag, n.Describe())
	}
	return n
}
