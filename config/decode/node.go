package decode

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Kind is the type of a parsed value.
type Kind uint8

// The kinds of parsed values.
const (
	Null Kind = iota
	Bool
	Int
	Float
	String
	Map
	List
)

// String names the kind as used in error messages.
func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Int:
		return "integer"
	case Float:
		return "number"
	case String:
		return "string"
	case Map:
		return "map"
	case List:
		return "list"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Node is one parsed value, with anchors, aliases and merge keys already
// resolved, located by its path and source position. Custom decoders
// (Unmarshaler) read it and record errors through it.
//
// All methods are safe on a nil *Node: Kind reports Null, accessors report
// nothing, Decode and Errorf do nothing. Use ErrorfAt on the parent to
// report a problem about a key that is absent.
type Node struct {
	st        *state
	kind      Kind
	bad       bool // already reported as broken; errors on it are dropped
	path      string
	line, col int
	text      string // string value, or the source text of other scalars
	b         bool
	i         int64
	u         uint64 // integers above MaxInt64, when big
	big       bool
	f         float64
	entries   []entry
	index     map[string]int // key -> entries index, for larger maps
	items     []*Node
}

// entry is one key of a map, with the key's own position.
type entry struct {
	key       string
	line, col int
	val       *Node
}

// indexThreshold is the map size from which Get uses a hash index.
const indexThreshold = 8

// Path returns the node's path, "" for the document root.
func (n *Node) Path() string {
	if n == nil {
		return ""
	}
	return n.path
}

// Kind returns the type of the value. A value that failed to parse
// (already reported) reads as Null.
func (n *Node) Kind() Kind {
	if n == nil || n.bad {
		return Null
	}
	return n.kind
}

// Line returns the 1-based source line, 0 when unknown.
func (n *Node) Line() int {
	if n == nil {
		return 0
	}
	return n.line
}

// Col returns the 1-based source column, 0 when unknown.
func (n *Node) Col() int {
	if n == nil {
		return 0
	}
	return n.col
}

// String returns the value of a string node.
func (n *Node) String() (string, bool) {
	if n.Kind() != String {
		return "", false
	}
	return n.text, true
}

// Bool returns the value of a boolean node.
func (n *Node) Bool() (bool, bool) {
	if n.Kind() != Bool {
		return false, false
	}
	return n.b, true
}

// Int returns the value of an integer node that fits in int64.
func (n *Node) Int() (int64, bool) {
	if n.Kind() != Int || n.big {
		return 0, false
	}
	return n.i, true
}

// Float returns the value of a number node; integers convert.
func (n *Node) Float() (float64, bool) {
	switch n.Kind() {
	case Float:
		return n.f, true
	case Int:
		if n.big {
			return float64(n.u), true
		}
		return float64(n.i), true
	}
	return 0, false
}

// Len returns the number of keys of a map or items of a list.
func (n *Node) Len() int {
	switch n.Kind() {
	case Map:
		return len(n.entries)
	case List:
		return len(n.items)
	}
	return 0
}

// Keys returns the keys of a map node in document order (keys brought in by
// a merge key come at the position of the "<<").
func (n *Node) Keys() []string {
	if n.Kind() != Map {
		return nil
	}
	keys := make([]string, len(n.entries))
	for i, e := range n.entries {
		keys[i] = e.key
	}
	return keys
}

// Get returns the value of key in a map node, or nil.
func (n *Node) Get(key string) *Node {
	if n.Kind() != Map {
		return nil
	}
	if n.index != nil {
		if i, ok := n.index[key]; ok {
			return n.entries[i].val
		}
		return nil
	}
	for _, e := range n.entries {
		if e.key == key {
			return e.val
		}
	}
	return nil
}

// Items returns the items of a list node.
func (n *Node) Items() []*Node {
	if n.Kind() != List {
		return nil
	}
	return n.items
}

// Value returns the node as a generic Go value: map[string]any, []any,
// string, int64 (uint64 above MaxInt64), float64, bool or nil.
func (n *Node) Value() any {
	switch n.Kind() {
	case Bool:
		return n.b
	case Int:
		if n.big {
			return n.u
		}
		return n.i
	case Float:
		return n.f
	case String:
		return n.text
	case Map:
		m := make(map[string]any, len(n.entries))
		for _, e := range n.entries {
			m[e.key] = e.val.Value()
		}
		return m
	case List:
		l := make([]any, len(n.items))
		for i, it := range n.items {
			l[i] = it.Value()
		}
		return l
	}
	return nil
}

// Describe summarizes the value for messages: `string "abc"`,
// "integer 5", "number 1.5", "boolean true", "null", "map", "list".
func (n *Node) Describe() string {
	switch n.Kind() {
	case Bool, Int, Float:
		return n.kind.String() + " " + n.text
	case String:
		s := n.text
		if utf8.RuneCountInString(s) > 40 {
			r := []rune(s)
			s = string(r[:37]) + "..."
		}
		return "string " + strconv.Quote(s)
	}
	return n.Kind().String()
}

// Decode decodes the node into out, which must be a non-nil pointer, with
// the same strict rules as YAML; errors are recorded at the right paths.
// It reports whether no error was recorded.
func (n *Node) Decode(out any) bool {
	if n == nil || n.st == nil {
		return true
	}
	if n.bad {
		return false
	}
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		n.Errorf("decode: out must be a non-nil pointer, got %T", out)
		return false
	}
	before := n.st.count()
	n.st.decode(n, rv.Elem())
	return n.st.count() == before
}

// Errorf records an error at this node.
func (n *Node) Errorf(format string, args ...any) {
	if n == nil || n.st == nil || n.bad {
		return
	}
	n.st.add(n.path, n.line, n.col, fmt.Sprintf(format, args...))
}

// ErrorfAt records an error at a path relative to this node, e.g.
// "backend.port" or "[2].name"; the position is that of the deepest part
// of the path present in the document.
func (n *Node) ErrorfAt(rel string, format string, args ...any) {
	if n == nil || n.st == nil || n.bad {
		return
	}
	at := locate(n, rel)
	n.st.add(joinRel(n.path, rel), at.line, at.col, fmt.Sprintf(format, args...))
}

// Expect reports whether the node is of one of the kinds (an integer counts
// as a Float); if not it records `expected string or map, got integer 5`.
// Null is accepted only when listed.
func (n *Node) Expect(kinds ...Kind) bool {
	k := n.Kind()
	for _, want := range kinds {
		if k == want || k == Int && want == Float {
			return true
		}
	}
	if n == nil || n.bad {
		return false
	}
	names := make([]string, len(kinds))
	for i, want := range kinds {
		names[i] = want.String()
	}
	n.Errorf("expected %s, got %s", strings.Join(names, " or "), n.Describe())
	return false
}

// UnknownFields records, for each key of a map node that is not one of
// known, the error the decoder records for a key naming no field of a
// struct (`unknown field "alow" (did you mean "allow"?)`, at the key), and
// reports whether there was any. A DecodeNode that reads a map by hand
// calls it first, so that a misspelt key is reported as what it is rather
// than as a missing or misplaced field.
func (n *Node) UnknownFields(known ...string) bool {
	if n == nil || n.st == nil || n.Kind() != Map {
		return false
	}
	found := false
	for _, e := range n.entries {
		if slices.Contains(known, e.key) {
			continue
		}
		found = true
		if !e.val.bad && !n.bad {
			n.st.add(e.val.path, e.line, e.col, UnknownField(e.key, known))
		}
	}
	return found
}

// FieldNames returns the keys a struct decodes (v is the struct or a
// pointer to it), in field order, as the decoder names them.
func FieldNames(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return slices.Clone(structInfoFor(t).names)
}

// OneOf checks that exactly one of keys is present (and not null) in a map
// node and returns it. Otherwise it records
// "exactly one of a, b, c is required" (naming the keys found when there is
// more than one) and returns "". Other keys are not checked.
func (n *Node) OneOf(keys ...string) string {
	if !n.Expect(Map) {
		return ""
	}
	var found []string
	for _, k := range keys {
		if v := n.Get(k); v != nil && (v.kind != Null || v.bad) {
			found = append(found, k)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	msg := "exactly one of " + strings.Join(keys, ", ") + " is required"
	if len(found) > 1 {
		msg += ", got " + strings.Join(found, ", ")
	}
	n.Errorf("%s", msg)
	return ""
}
