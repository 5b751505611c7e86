package decode

import (
	"encoding"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"time"
)

// Unmarshaler is implemented (with a pointer receiver) by types that decode
// themselves from a node: unions, string-or-object forms, custom scalars.
// It is not called for null values, which leave the value unchanged. Record
// problems with n.Errorf / n.ErrorfAt; decode parts with Node.Decode.
//
// To decode the map form of a type with the standard strict rules from its
// own DecodeNode, convert to a method-less type first:
//
//	type plain T
//	n.Decode((*plain)(t))
type Unmarshaler interface {
	DecodeNode(n *Node)
}

// FieldHinter is a struct type that explains some of the keys it has no
// field for, such as a field of another type written at the wrong place,
// which "unknown field" would make read as a typo.
type FieldHinter interface {
	// UnknownFieldHint returns the error for key, which names no field of
	// the type, or "" for the standard one (UnknownField). It is called on
	// the zero value of the type.
	UnknownFieldHint(key string) string
}

// UnknownField is the error for a key that names none of fields:
// `unknown field "hostnmes" (did you mean "hostnames"?)`, the suggestion
// being the nearest of fields, if one is near. A custom decoder that
// checks the keys of a map itself reports its unknown keys with it.
func UnknownField(key string, fields []string) string {
	msg := "unknown field " + strconv.Quote(key)
	if near := closest(key, fields); near != "" {
		msg += " (did you mean " + strconv.Quote(near) + "?)"
	}
	return msg
}

// maxCalls bounds the nesting of decode calls; it is only reached when a
// DecodeNode method decodes its own node into its own type.
const maxCalls = 1000

var (
	unmarshalerType     = reflect.TypeFor[Unmarshaler]()
	validatorType       = reflect.TypeFor[Validator]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	rawType             = reflect.TypeFor[Raw]()
	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	durationType        = reflect.TypeFor[time.Duration]()
)

// decode decodes n into v (settable), then calls Validate on the value
// when it implements Validator and decoded without error.
func (s *state) decode(n *Node, v reflect.Value) {
	if n.bad {
		s.badSeen = append(s.badSeen, n.path)
		return
	}
	if s.calls >= maxCalls {
		s.errorf(n, "decoding nested too deeply (a DecodeNode method may be decoding its own type)")
		return
	}
	s.calls++
	defer func() { s.calls-- }()

	before, kept, keptBad := s.count(), len(s.errs), len(s.badSeen)
	s.value(n, v)
	if n.kind == Null || !v.CanAddr() {
		return
	}
	p := v.Addr()
	if !p.CanInterface() || !p.Type().Implements(validatorType) {
		return
	}
	if s.count() == before {
		p.Interface().(Validator).Validate(&Validation{n: n})
		return
	}
	// Some fields failed. Rules that each concern one field still run, so
	// one run lists every problem; their errors about the fields that
	// failed are dropped. Rules across fields do not run: they would
	// report cascades of the same mistake.
	if _, ok := p.Interface().(FieldRules); ok {
		failed := make([]string, 0, len(s.errs)-kept+len(s.badSeen)-keptBad)
		for _, e := range s.errs[kept:] {
			failed = append(failed, e.Path)
		}
		failed = append(failed, s.badSeen[keptBad:]...)
		p.Interface().(Validator).Validate(&Validation{n: n, failed: failed})
	}
}

// value decodes n into v by v's type.
func (s *state) value(n *Node, v reflect.Value) {
	t := v.Type()
	switch t {
	case rawType:
		v.Set(reflect.ValueOf(Raw{Value: n.Value(), Node: n}))
		return
	case rawMessageType:
		if n.kind == Null {
			v.SetZero()
			return
		}
		b, err := json.Marshal(n.Value())
		if err != nil {
			s.errorf(n, "cannot represent as JSON: %v", err)
			return
		}
		v.SetBytes(b)
		return
	}
	if n.kind == Null {
		// null means absent: nil for nillable types, unchanged otherwise.
		switch v.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			v.SetZero()
		}
		return
	}
	if v.Kind() == reflect.Pointer {
		fresh := v.IsNil()
		if fresh {
			v.Set(reflect.New(t.Elem()))
		}
		before := s.count()
		s.decode(n, v.Elem())
		// A scalar that failed to decode is absent, not zero: the checks
		// across fields would see a value the file does not hold (two
		// ports "8080" read as port 0 twice).
		if fresh && s.count() != before && scalarKind(t.Elem().Kind()) {
			v.SetZero()
		}
		return
	}
	if v.CanAddr() {
		if p := v.Addr(); p.CanInterface() {
			if p.Type().Implements(unmarshalerType) {
				p.Interface().(Unmarshaler).DecodeNode(n)
				return
			}
			if t != durationType && p.Type().Implements(textUnmarshalerType) {
				s.text(n, p.Interface().(encoding.TextUnmarshaler))
				return
			}
		}
	}
	switch t.Kind() {
	case reflect.Bool:
		if b, ok := n.Bool(); ok {
			v.SetBool(b)
		} else {
			s.expected(n, "boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if t == durationType {
			s.duration(n, v)
			return
		}
		s.signed(n, v)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.unsigned(n, v)
	case reflect.Float32, reflect.Float64:
		s.float(n, v)
	case reflect.String:
		if str, ok := n.String(); ok {
			v.SetString(str)
		} else {
			s.expected(n, "string")
		}
	case reflect.Struct:
		s.structure(n, v)
	case reflect.Map:
		s.mapValue(n, v)
	case reflect.Slice:
		s.list(n, v)
	case reflect.Array:
		s.array(n, v)
	case reflect.Interface:
		if t.NumMethod() != 0 {
			s.errorf(n, "cannot decode into Go type %s", t)
			return
		}
		v.Set(reflect.ValueOf(n.Value()))
	default:
		s.errorf(n, "cannot decode into Go type %s", t)
	}
}

// scalarKind reports whether values of kind k are single numbers,
// booleans or strings.
func scalarKind(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

func (s *state) expected(n *Node, what string) {
	s.errorf(n, "expected %s, got %s", what, n.Describe())
}

func (s *state) text(n *Node, u encoding.TextUnmarshaler) {
	str, ok := n.String()
	if !ok {
		s.expected(n, "string")
		return
	}
	if err := u.UnmarshalText([]byte(str)); err != nil {
		s.errorf(n, "invalid value %q: %v", str, err)
	}
}

func (s *state) duration(n *Node, v reflect.Value) {
	str, ok := n.String()
	if ok {
		if d, err := time.ParseDuration(str); err == nil {
			v.SetInt(int64(d))
			return
		}
	}
	s.expected(n, `duration such as "10s" or "1m30s"`)
}

// integer is an integral value as sign and magnitude; huge marks
// magnitudes beyond uint64.
type integer struct {
	neg  bool
	mag  uint64
	huge bool
}

// asInteger returns n as an integer: an integer node, or a number node with
// no fraction (1.0, 1e3).
func asInteger(n *Node) (integer, bool) {
	switch n.kind {
	case Int:
		switch {
		case n.big:
			return integer{mag: n.u}, true
		case n.i < 0:
			return integer{neg: true, mag: uint64(-(n.i + 1)) + 1}, true
		}
		return integer{mag: uint64(n.i)}, true
	case Float:
		f := n.f
		if math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
			return integer{}, false
		}
		a := math.Abs(f)
		if a >= 1<<64 {
			return integer{neg: f < 0, huge: true}, true
		}
		return integer{neg: f < 0, mag: uint64(a)}, true
	}
	return integer{}, false
}

func (s *state) signed(n *Node, v reflect.Value) {
	iv, ok := asInteger(n)
	if !ok {
		s.expected(n, "integer")
		return
	}
	bits := v.Type().Bits()
	hi := uint64(1)<<(bits-1) - 1
	if iv.huge || !iv.neg && iv.mag > hi || iv.neg && iv.mag > hi+1 {
		s.errorf(n, "%s is out of range [%d, %d]", n.Describe(), -int64(hi)-1, hi)
		return
	}
	i := int64(iv.mag) // for the most negative value this wraps, and negating keeps it
	if iv.neg {
		i = -i
	}
	v.SetInt(i)
}

func (s *state) unsigned(n *Node, v reflect.Value) {
	iv, ok := asInteger(n)
	if !ok {
		s.expected(n, "integer")
		return
	}
	hi := uint64(math.MaxUint64) >> (64 - v.Type().Bits())
	if iv.huge || iv.neg && iv.mag > 0 || iv.mag > hi {
		s.errorf(n, "%s is out of range [0, %s]", n.Describe(), strconv.FormatUint(hi, 10))
		return
	}
	v.SetUint(iv.mag)
}

func (s *state) float(n *Node, v reflect.Value) {
	f, ok := n.Float()
	if !ok {
		s.expected(n, "number")
		return
	}
	if v.Kind() == reflect.Float32 && !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
		s.errorf(n, "%s is out of range for a 32-bit float", n.Describe())
		return
	}
	v.SetFloat(f)
}

// structure decodes a map into a struct: unknown keys are errors, cfg rules
// are checked for each key decoded without error, then required fields.
func (s *state) structure(n *Node, v reflect.Value) {
	if n.kind != Map {
		s.expected(n, "map")
		return
	}
	info := structInfoFor(v.Type())
	if len(info.tagErrs) > 0 {
		if s.reportedTags == nil {
			s.reportedTags = make(map[*structInfo]bool)
		}
		if !s.reportedTags[info] {
			s.reportedTags[info] = true
			for _, e := range info.tagErrs {
				s.errorf(n, "%s", e)
			}
		}
	}
	seen := make([]bool, len(info.fields))
	for _, e := range n.entries {
		f := info.byName[e.key]
		if f == nil {
			if e.val.bad {
				continue
			}
			msg := ""
			if info.hinter != nil {
				msg = info.hinter.UnknownFieldHint(e.key)
			}
			if msg == "" {
				msg = UnknownField(e.key, info.names)
			}
			s.add(e.val.path, e.line, e.col, msg)
			continue
		}
		seen[f.pos] = true
		fv := fieldValue(v, f.index)
		before := s.count()
		s.decode(e.val, fv)
		if s.count() == before && !e.val.bad {
			f.rules.check(e.val, fv)
		}
	}
	for i, f := range info.fields {
		if f.rules.required && !seen[i] {
			s.add(joinKey(n.path, f.name), n.line, n.col, "required")
		}
	}
}

func (s *state) mapValue(n *Node, v reflect.Value) {
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		s.errorf(n, "cannot decode into Go type %s (map keys must be strings)", t)
		return
	}
	if n.kind != Map {
		s.expected(n, "map")
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMapWithSize(t, len(n.entries)))
	}
	for _, e := range n.entries {
		if s.nullItem(e.val, t.Elem()) {
			continue
		}
		ev := reflect.New(t.Elem()).Elem()
		s.decode(e.val, ev)
		v.SetMapIndex(reflect.ValueOf(e.key).Convert(t.Key()), ev)
	}
}

// nullItem reports, and records, a null list item or map value whose type
// cannot be nil (a struct, a string, a number, ...): an item cannot be
// absent, and its zero value would pass by its type's decoder and rules.
func (s *state) nullItem(n *Node, t reflect.Type) bool {
	if n.kind != Null || n.bad {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice:
		return false
	}
	if t == rawType {
		return false
	}
	s.errorf(n, "must not be null")
	return true
}

func (s *state) list(n *Node, v reflect.Value) {
	if n.kind != List {
		s.expected(n, "list")
		return
	}
	sl := reflect.MakeSlice(v.Type(), len(n.items), len(n.items))
	for i, it := range n.items {
		if !s.nullItem(it, v.Type().Elem()) {
			s.decode(it, sl.Index(i))
		}
	}
	v.Set(sl)
}

func (s *state) array(n *Node, v reflect.Value) {
	if n.kind != List {
		s.expected(n, "list")
		return
	}
	if len(n.items) != v.Len() {
		s.errorf(n, "expected a list of %s, got %d", plural(v.Len(), "item"), len(n.items))
		return
	}
	for i, it := range n.items {
		if !s.nullItem(it, v.Type().Elem()) {
			s.decode(it, v.Index(i))
		}
	}
}
