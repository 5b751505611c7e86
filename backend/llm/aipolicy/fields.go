package aipolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"cel.dev/cel-go/cel"

	"github.com/relaygate/gateway/codec/llm"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/config/decode"
	"github.com/relaygate/gateway/policy/celrules"
)

// field is a top-level body member a policy sets: its default, override
// and transformation, each optional.
type field struct {
	name string
	def  []byte // JSON text, nil when none
	ovr  []byte
	tr   int // index in fieldSet.transforms, -1 when none
}

// edits reports whether the field replaces the client's value (an override
// or a transformation), rather than only filling it in.
func (f *field) edits() bool { return f.ovr != nil || f.tr >= 0 }

// transform is a compiled transformation.
type transform struct {
	name string
	prog cel.Program
}

// fieldSet is the fields of Request (defaults, overrides, transformations)
// or of Final (finalTransformations), sorted by name.
type fieldSet struct {
	fields     []field
	index      map[string]int
	transforms []transform
}

func (fs *fieldSet) empty() bool { return fs == nil || len(fs.fields) == 0 }

// compileFields builds a field set; section names the transformations'
// field for errors ("transformations", "finalTransformations").
func compileFields(defaults, overrides map[string]any, trs map[string]config.CELExpression, section string) (fieldSet, error) {
	var fs fieldSet
	names := slices.Sorted(maps.Keys(defaults))
	names = append(names, slices.Sorted(maps.Keys(overrides))...)
	names = append(names, slices.Sorted(maps.Keys(trs))...)
	slices.Sort(names)
	names = slices.Compact(names)
	fs.index = make(map[string]int, len(names))
	for _, name := range names {
		f := field{name: name, tr: -1}
		var err error
		if v, ok := defaults[name]; ok {
			if f.def, err = encodeValue(v); err != nil {
				return fs, &decode.FieldError{Path: decode.JoinKey("defaults", name), Msg: err.Error()}
			}
		}
		if v, ok := overrides[name]; ok {
			if f.ovr, err = encodeValue(v); err != nil {
				return fs, &decode.FieldError{Path: decode.JoinKey("overrides", name), Msg: err.Error()}
			}
		}
		if expr, ok := trs[name]; ok {
			prog, err := config.CompileLLMExpression(string(expr))
			if err != nil {
				return fs, &decode.FieldError{Path: decode.JoinKey(section, name), Msg: err.Error()}
			}
			f.tr = len(fs.transforms)
			fs.transforms = append(fs.transforms, transform{name: name, prog: prog})
		}
		fs.index[name] = len(fs.fields)
		fs.fields = append(fs.fields, f)
	}
	return fs, nil
}

// encodeValue is a configured value's JSON text. A null default or override
// sets the field to null, as agentgateway's does.
func encodeValue(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if !llm.Valid(b) {
		return nil, errNotJSON
	}
	return b, nil
}

var errNotJSON = errors.New("the value has no JSON form")

// result is a transformation's outcome: its JSON text in the work arena, or
// failed.
type result struct {
	off, n int
	ok     bool
}

// evalTransforms evaluates the transformations with llmRequest = the body
// (indexed to all levels) decoded once; results land in w.results and
// w.celOut.
func (fs *fieldSet) evalTransforms(w *work, tp *tape, top tok, in *celrules.Input) {
	w.results = w.results[:0]
	w.celOut = w.celOut[:0]
	if len(fs.transforms) == 0 {
		return
	}
	req := decodeObject(tp, top)
	for _, t := range fs.transforms {
		r := result{off: len(w.celOut)}
		if v, err := celrules.EvalLLM(t.prog, in, req); err == nil {
			w.celOut, r.ok = appendCELJSON(w.celOut, v, 0)
		}
		if !r.ok {
			w.celOut = w.celOut[:r.off]
		}
		r.n = len(w.celOut) - r.off
		w.results = append(w.results, r)
	}
}

// value is what the field becomes: set to val, or absent when set is false;
// present says whether the body has it. agentgateway
// (apply_request_body_mutations) evaluates every transformation on the
// client's body, then inserts the overrides, then the transformations'
// results (removing a field whose expression failed), then the defaults
// where nothing is left: a transformation beats an override, and a failed
// one leaves room for the default.
func (fs *fieldSet) value(w *work, f *field, present bool, body []byte, cur tok) (val []byte, set bool) {
	if f.tr >= 0 {
		if r := w.results[f.tr]; r.ok {
			return w.celOut[r.off : r.off+r.n], true
		}
		return f.def, f.def != nil
	}
	if f.ovr != nil {
		return f.ovr, true
	}
	if present {
		return body[cur.start:cur.end], true
	}
	return f.def, f.def != nil
}

// action is what becomes of a body member.
type action uint8

const (
	keepMember    action = iota // copied as it is
	replaceMember               // given a new value
	dropMember                  // left out
)

// begin readies w for a pass over a body's members (memberAction in
// member order, then added).
func (fs *fieldSet) begin(w *work) {
	w.seen = slices.Grow(w.seen[:0], len(fs.fields))[:len(fs.fields)]
	clear(w.seen)
}

// memberAction decides a member's fate: the first member of an edited
// field's name takes the new value in place (or goes, when the field ends
// absent), later ones go; every other member stays as it is.
func (fs *fieldSet) memberAction(w *work, body []byte, name, v tok) (action, []byte) {
	i, found := fs.lookup(body, name)
	if !found {
		return keepMember, nil
	}
	f := &fs.fields[i]
	if !f.edits() {
		w.seen[i] = true // a default the body overrides
		return keepMember, nil
	}
	if w.seen[i] {
		return dropMember, nil // a repeated member
	}
	w.seen[i] = true
	val, set := fs.value(w, f, true, body, v)
	switch {
	case !set:
		return dropMember, nil
	case bytes.Equal(val, body[v.start:v.end]):
		return keepMember, nil
	}
	return replaceMember, val
}

// added is the value of field i when the body lacked it (after the member
// pass); fields are added at the end of the object, in name order.
func (fs *fieldSet) added(w *work, i int) ([]byte, bool) {
	if w.seen[i] {
		return nil, false
	}
	return fs.value(w, &fs.fields[i], false, nil, tok{})
}

// changes reports whether the fields change the object top of tp.
func (fs *fieldSet) changes(w *work, tp *tape, top tok) bool {
	if fs.empty() {
		return false
	}
	fs.begin(w)
	it := tp.walk(top)
	for name, v, ok := it.member(); ok; name, v, ok = it.member() {
		if act, _ := fs.memberAction(w, tp.d, name, v); act != keepMember {
			return true
		}
	}
	for i := range fs.fields {
		if _, set := fs.added(w, i); set {
			return true
		}
	}
	return false
}

// names reports whether a field is called one of names.
func (fs *fieldSet) names(names ...string) bool {
	for _, n := range names {
		if _, ok := fs.index[n]; ok {
			return true
		}
	}
	return false
}

// appendMember appends the member name: val (name is a JSON string token),
// after a comma unless it is the first (n == 0).
func appendMember(dst []byte, n int, name, val []byte) []byte {
	if n > 0 {
		dst = append(dst, ',')
	}
	dst = append(dst, name...)
	dst = append(dst, ':')
	return append(dst, val...)
}

// lookup finds the field a member name token names.
func (fs *fieldSet) lookup(body []byte, name tok) (int, bool) {
	if name.end-name.start < 2 {
		return 0, false
	}
	inner := body[name.start+1 : name.end-1]
	if !hasBackslash(inner) {
		i, ok := fs.index[string(inner)]
		return i, ok
	}
	var buf [256]byte
	text, err := llm.AppendUnquoted(buf[:0], body[name.start:name.end])
	if err != nil {
		return 0, false
	}
	i, ok := fs.index[string(text)]
	return i, ok
}
