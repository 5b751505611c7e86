package decode

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// maxOpenNesting bounds the nesting the pre-scan lets through to the YAML
// parser, whose cost grows faster than linearly with nesting. It is well
// above maxDepth, which the node tree enforces exactly, because the scan
// cannot tell brackets in strings from real ones.
const maxOpenNesting = 256

// maxTokens bounds the YAML tokens (keys, list entries, brackets, commas,
// quoted strings, anchors, aliases, tags, comments) the pre-scan lets
// through to the parser: each costs it a few microseconds and about a
// kilobyte, so that a document of small tokens under the file size cap
// (a million one-line keys in 16 MB) would take the parser tens of
// seconds and gigabytes. A configuration of 10,000 routes has some 220,000.
// The scan counts the characters that start a token, an over-estimate.
const maxTokens = 500_000

// YAML decodes a single YAML (or JSON) document into out, a non-nil
// pointer, and returns every problem found, or nil. An empty document
// leaves out unchanged. See the package documentation for the rules.
func YAML(data []byte, out any) Errors {
	_, errs := YAMLPositions(data, out)
	return errs
}

// YAMLPositions is YAML that also returns where each value of the document
// sits, for errors found after decoding (see Positions).
func YAMLPositions(data []byte, out any) (Positions, Errors) {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return Positions{}, Errors{{Msg: fmt.Sprintf("decode: out must be a non-nil pointer, got %T", out)}}
	}
	if e := prescan(data); e != nil {
		return Positions{}, Errors{e}
	}
	f, fe := parse(data)
	if fe != nil {
		return Positions{}, Errors{fe}
	}
	s := newState()
	root := s.document(f)
	if root != nil {
		s.decode(root, rv.Elem())
	}
	return Positions{root: root}, s.finish()
}

// Positions locates the values of a decoded document by path.
type Positions struct{ root *Node }

// Locate returns the line and column of the value at path (the package's
// path syntax), or of the deepest part of the path present in the
// document; 0, 0 when nothing is known.
func (p Positions) Locate(path string) (line, col int) {
	if p.root == nil {
		return 0, 0
	}
	n := locate(p.root, path)
	return n.line, n.col
}

// Root returns the document's root value (nil for a document with none),
// for checks on the document's shape before its errors are read.
func (p Positions) Root() *Node { return p.root }

// Null reports whether the value at path (the package's path syntax) is
// in the document and null; for "", whether the document holds no value
// (empty, only comments and markers, or null).
func (p Positions) Null(path string) bool {
	if path == "" {
		return p.root.Kind() == Null
	}
	segs, ok := parseRel(path)
	if !ok {
		return false
	}
	cur := p.root
	for _, s := range segs {
		switch {
		case s.isIndex && cur.Kind() == List && s.index < len(cur.items):
			cur = cur.items[s.index]
		case !s.isIndex:
			cur = cur.Get(s.key)
		default:
			cur = nil
		}
		if cur == nil {
			return false
		}
	}
	return cur.Kind() == Null
}

// parse runs the YAML parser, once the tokens are known not to make it
// recurse too deep (checkBlockMaps). Duplicate keys are let through so that
// they are reported like other errors, with all the others.
func parse(data []byte) (f *ast.File, fe *FieldError) {
	defer func() {
		// The decoder must not panic on any input; a parser bug must not
		// take the process down either.
		if r := recover(); r != nil {
			f, fe = nil, syntaxError(fmt.Errorf("YAML parser failed: %v", r))
		}
	}()
	tks := lexer.Tokenize(string(data))
	if tks.InvalidToken() == nil {
		if fe := checkBlockMaps(tks, nil); fe != nil {
			return nil, fe
		}
	}
	f, err := parser.Parse(tks, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		return nil, syntaxError(err)
	}
	return f, nil
}

// syntaxError converts a parser error, keeping its position when known.
func syntaxError(err error) *FieldError {
	var te interface {
		GetMessage() string
		GetToken() *token.Token
	}
	if errors.As(err, &te) {
		e := &FieldError{Msg: "syntax error: " + te.GetMessage()}
		if tk := te.GetToken(); tk != nil && tk.Position != nil {
			e.Line, e.Col = tk.Position.Line, tk.Position.Column
		}
		return e
	}
	return &FieldError{Msg: "syntax error: " + err.Error()}
}

// prescan rejects input nested so deeply (flow brackets, or compact
// "- - -" entries on one line), or made of so many tokens, that parsing it
// would be slow.
func prescan(data []byte) *FieldError {
	depth, line, col := 0, 1, 0
	compact, atLineStart := 0, true
	tokens := 0
	prev := byte('\n')
	for i, c := range data {
		col++
		if startsToken(prev, c, data[i+1:]) {
			tokens++
			if tokens > maxTokens {
				return &FieldError{Msg: fmt.Sprintf("document too large: more than %d YAML tokens (keys, list entries, brackets, commas, quoted strings, anchors, aliases, tags, comments)", maxTokens), Line: line, Col: col}
			}
		}
		prev = c
		switch c {
		case '\n':
			line, col, compact, atLineStart = line+1, 0, 0, true
			continue
		case '[', '{':
			depth++
			if depth > maxOpenNesting {
				return &FieldError{Msg: fmt.Sprintf("nesting too deep (more than %d open brackets)", maxOpenNesting), Line: line, Col: col}
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		}
		if !atLineStart || c == ' ' || c == '\t' {
			continue
		}
		if (c == '-' || c == '?' || c == ':') && (i+1 == len(data) || data[i+1] == ' ' || data[i+1] == '\t') {
			compact++
			if compact > maxOpenNesting {
				return &FieldError{Msg: fmt.Sprintf("nesting too deep (more than %d entries on one line)", maxOpenNesting), Line: line, Col: col}
			}
			continue
		}
		atLineStart = false
	}
	return nil
}

// startsToken reports whether c, after prev and before rest, may start a
// token of the YAML lexer: a flow indicator always; a value indicator ':'
// followed by a space, the end of the line or a flow indicator, or right
// after a quote ({"a":1}); any other indicator (- ? & * ! | > ' " # % @ `)
// at the start of a word. It over-counts (indicators inside strings and
// comments count) so that no input has many more tokens than counted.
func startsToken(prev, c byte, rest []byte) bool {
	switch c {
	case ',', '[', ']', '{', '}':
		return true
	case ':':
		if prev == '"' || prev == '\'' || len(rest) == 0 {
			return true
		}
		switch rest[0] {
		case ' ', '\t', '\r', '\n', ',', '[', ']', '{', '}':
			return true
		}
		return false
	case '-', '?', '&', '*', '!', '|', '>', '\'', '"', '#', '%', '@', '`':
		switch prev {
		case ' ', '\t', '\r', '\n', ',', '[', ']', '{', '}', ':':
			return true
		}
	}
	return false
}

// CheckType reports programming errors in the Go type of out (a pointer,
// or a reflect.Type): malformed cfg tags and field types the decoder cannot
// fill. Configuration packages can call it from a test.
func CheckType(out any) error {
	t, ok := out.(reflect.Type)
	if !ok {
		t = reflect.TypeOf(out)
	}
	if t == nil {
		return errors.New("decode: CheckType needs a type")
	}
	var errs []error
	checkType(t, map[reflect.Type]bool{}, &errs)
	return errors.Join(errs...)
}

func checkType(t reflect.Type, seen map[reflect.Type]bool, errs *[]error) {
	if seen[t] {
		return
	}
	seen[t] = true
	if t == rawType || t == rawMessageType || t == durationType {
		return
	}
	pt := reflect.PointerTo(t)
	if t.Kind() != reflect.Pointer && (pt.Implements(unmarshalerType) || pt.Implements(textUnmarshalerType)) {
		return
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	case reflect.Pointer, reflect.Slice, reflect.Array:
		checkType(t.Elem(), seen, errs)
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			*errs = append(*errs, fmt.Errorf("decode: %s: map keys must be strings", t))
		}
		checkType(t.Elem(), seen, errs)
	case reflect.Interface:
		if t.NumMethod() != 0 {
			*errs = append(*errs, fmt.Errorf("decode: cannot decode into Go type %s", t))
		}
	case reflect.Struct:
		info := structInfoFor(t)
		for _, e := range info.tagErrs {
			*errs = append(*errs, errors.New("decode: "+e))
		}
		for _, f := range info.fields {
			checkType(f.typ, seen, errs)
		}
	default:
		*errs = append(*errs, fmt.Errorf("decode: cannot decode into Go type %s", t))
	}
}
