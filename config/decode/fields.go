package decode

import (
	"reflect"
	"sort"
	"strings"
	"sync"
)

// field is one decodable struct field, reached through index (several
// steps for fields of embedded structs).
type field struct {
	name   string // key in the document (json tag name or Go name)
	goName string
	index  []int
	typ    reflect.Type
	rules  rules
	depth  int // embedding depth, for name conflicts
	tagged bool
	pos    int // position in structInfo.fields
}

// structInfo is what decoding needs to know about a struct type.
type structInfo struct {
	fields  []*field
	byName  map[string]*field
	names   []string // for suggestions, in field order
	tagErrs []string // malformed cfg tags, reported when the type is decoded
	hinter  FieldHinter
}

var structInfos sync.Map // reflect.Type -> *structInfo

// structInfoFor returns the (cached) description of struct type t.
func structInfoFor(t reflect.Type) *structInfo {
	if v, ok := structInfos.Load(t); ok {
		return v.(*structInfo)
	}
	info := buildStructInfo(t)
	v, _ := structInfos.LoadOrStore(t, info)
	return v.(*structInfo)
}

// buildStructInfo collects fields like encoding/json: exported fields named
// by their json tag (or Go name), "-" skipped, untagged embedded structs
// inlined; on a name clash the shallowest field wins, then the tagged one,
// and a clash that is still ambiguous hides all of the clashing fields.
func buildStructInfo(t reflect.Type) *structInfo {
	type queued struct {
		typ   reflect.Type
		index []int
	}
	var all []*field
	current := []queued{{typ: t}}
	visited := map[reflect.Type]bool{}
	for depth := 0; len(current) > 0; depth++ {
		var next []queued
		for _, q := range current {
			if visited[q.typ] {
				continue
			}
			visited[q.typ] = true
			for i := 0; i < q.typ.NumField(); i++ {
				sf := q.typ.Field(i)
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				index := append(append([]int(nil), q.index...), i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if name == "" && ft.Kind() == reflect.Struct {
						// Fields of an unexported embedded pointer cannot
						// be reached (it cannot be allocated).
						if !sf.IsExported() && sf.Type.Kind() == reflect.Pointer {
							continue
						}
						next = append(next, queued{typ: ft, index: index})
						continue
					}
					if !sf.IsExported() {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				f := &field{name: name, goName: sf.Name, index: index, typ: sf.Type, depth: depth, tagged: name != ""}
				if f.name == "" {
					f.name = sf.Name
				}
				f.rules.tag = sf.Tag.Get("cfg")
				all = append(all, f)
			}
		}
		current = next
	}

	// Resolve name clashes.
	byName := map[string][]*field{}
	for _, f := range all {
		byName[f.name] = append(byName[f.name], f)
	}
	info := &structInfo{byName: map[string]*field{}}
	info.hinter, _ = reflect.New(t).Interface().(FieldHinter)
	for name, fs := range byName {
		if w := dominant(fs); w != nil {
			info.byName[name] = w
			info.fields = append(info.fields, w)
		}
	}
	sort.Slice(info.fields, func(i, j int) bool {
		a, b := info.fields[i].index, info.fields[j].index
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] < b[k]
			}
		}
		return len(a) < len(b)
	})
	for i, f := range info.fields {
		f.pos = i
		info.names = append(info.names, f.name)
		if err := f.rules.parse(f.typ); err != "" {
			info.tagErrs = append(info.tagErrs, "invalid cfg tag on field "+t.String()+"."+f.goName+": "+err)
		}
	}
	return info
}

// dominant picks the field that wins a name clash, or nil.
func dominant(fs []*field) *field {
	min := fs[0].depth
	for _, f := range fs {
		if f.depth < min {
			min = f.depth
		}
	}
	var shallow []*field
	for _, f := range fs {
		if f.depth == min {
			shallow = append(shallow, f)
		}
	}
	if len(shallow) == 1 {
		return shallow[0]
	}
	var tagged []*field
	for _, f := range shallow {
		if f.tagged {
			tagged = append(tagged, f)
		}
	}
	if len(tagged) == 1 {
		return tagged[0]
	}
	return nil
}

// fieldValue returns the field of struct value v, allocating embedded
// struct pointers on the way.
func fieldValue(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}
