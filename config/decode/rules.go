package decode

import (
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// rules are the checks of a field's `cfg:"..."` tag.
type rules struct {
	tag      string
	required bool
	min, max *bound
	minLen   int // -1 when unset, as for the others below
	maxLen   int
	minItems int
	maxItems int
	enum     []string
	later    []string // values the schema knows whose feature is not built
	pattern  *regexp.Regexp
}

// bound is a min or max limit, parsed for the field's number kind.
type bound struct {
	text string
	i    int64
	u    uint64
	f    float64
}

// valueKind is the kind rules apply to: pointers are looked through.
func valueKind(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// parse reads r.tag for a field of type t and returns a description of
// the first problem, or "". The pattern rule must come last: it takes the
// rest of the tag, commas included.
func (r *rules) parse(t reflect.Type) string {
	r.minLen, r.maxLen, r.minItems, r.maxItems = -1, -1, -1, -1
	if r.tag == "" {
		return ""
	}
	vt := valueKind(t)
	rest := r.tag
	for rest != "" {
		var part string
		if strings.HasPrefix(strings.TrimSpace(rest), "pattern=") {
			part, rest = strings.TrimSpace(rest), ""
		} else {
			part, rest, _ = strings.Cut(rest, ",")
			part = strings.TrimSpace(part)
		}
		if part == "" {
			continue
		}
		name, arg, hasArg := strings.Cut(part, "=")
		if name == "required" {
			if hasArg {
				return "required takes no value"
			}
			r.required = true
			continue
		}
		if !hasArg {
			return "unknown rule " + strconv.Quote(part)
		}
		var err string
		switch name {
		case "min":
			r.min, err = parseBound(vt, arg)
		case "max":
			r.max, err = parseBound(vt, arg)
		case "minLen":
			r.minLen, err = parseCount(vt, arg, "minLen", reflect.String)
		case "maxLen":
			r.maxLen, err = parseCount(vt, arg, "maxLen", reflect.String)
		case "minItems":
			r.minItems, err = parseCount(vt, arg, "minItems", reflect.Slice, reflect.Array, reflect.Map)
		case "maxItems":
			r.maxItems, err = parseCount(vt, arg, "maxItems", reflect.Slice, reflect.Array, reflect.Map)
		case "enum":
			if vt.Kind() != reflect.String {
				return "enum needs a string field, not " + vt.String()
			}
			r.enum = strings.Split(arg, "|")
			for _, e := range r.enum {
				if e == "" {
					return "enum has an empty value"
				}
			}
		case "later":
			if vt.Kind() != reflect.String {
				return "later needs a string field, not " + vt.String()
			}
			r.later = strings.Split(arg, "|")
		case "pattern":
			if vt.Kind() != reflect.String {
				return "pattern needs a string field, not " + vt.String()
			}
			re, cerr := regexp.Compile(arg)
			if cerr != nil {
				return "pattern: " + cerr.Error()
			}
			r.pattern = re
		default:
			return "unknown rule " + strconv.Quote(name)
		}
		if err != "" {
			return err
		}
	}
	return ""
}

func parseBound(t reflect.Type, arg string) (*bound, string) {
	b := &bound{text: arg}
	var err error
	switch {
	case t == durationType:
		var d time.Duration
		d, err = time.ParseDuration(arg)
		b.i = int64(d)
	case isInt(t.Kind()):
		b.i, err = strconv.ParseInt(arg, 10, 64)
	case isUint(t.Kind()):
		b.u, err = strconv.ParseUint(arg, 10, 64)
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		b.f, err = strconv.ParseFloat(arg, 64)
	default:
		return nil, "min/max need a number field, not " + t.String()
	}
	if err != nil {
		return nil, "bad bound " + strconv.Quote(arg) + " for " + t.String()
	}
	return b, ""
}

func parseCount(t reflect.Type, arg, rule string, kinds ...reflect.Kind) (int, string) {
	ok := false
	for _, k := range kinds {
		ok = ok || t.Kind() == k
	}
	if !ok {
		return -1, rule + " does not apply to " + t.String()
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 0 {
		return -1, "bad count " + strconv.Quote(arg) + " for " + rule
	}
	return n, ""
}

func isInt(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Int64
}

func isUint(k reflect.Kind) bool {
	return k >= reflect.Uint && k <= reflect.Uintptr
}

// check applies the rules to a field decoded without error from n; required
// is checked by the caller for absent keys.
func (r *rules) check(n *Node, v reflect.Value) {
	if r.required && n.kind == Null {
		n.Errorf("required")
		return
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if r.min != nil || r.max != nil {
		switch {
		case (v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64) && math.IsNaN(v.Float()):
			n.Errorf("must be a number, not NaN")
		case r.min != nil && below(v, r.min):
			n.Errorf("must be >= %s", r.min.text)
		case r.max != nil && above(v, r.max):
			n.Errorf("must be <= %s", r.max.text)
		}
	}
	if r.minLen >= 0 || r.maxLen >= 0 {
		l := utf8.RuneCountInString(v.String())
		if r.minLen >= 0 && l < r.minLen {
			n.Errorf("must be at least %s", plural(r.minLen, "character"))
		}
		if r.maxLen >= 0 && l > r.maxLen {
			n.Errorf("must be at most %s", plural(r.maxLen, "character"))
		}
	}
	if r.minItems >= 0 && v.Len() < r.minItems {
		n.Errorf("must have at least %s", plural(r.minItems, "item"))
	}
	if r.maxItems >= 0 && v.Len() > r.maxItems {
		n.Errorf("must have at most %s", plural(r.maxItems, "item"))
	}
	if r.enum != nil {
		s := v.String()
		found := false
		for _, e := range r.enum {
			found = found || e == s
		}
		for _, e := range r.later {
			if !found && e == s {
				n.Errorf("%q is not supported yet", s)
				found = true
			}
		}
		if !found {
			msg := "must be one of: " + strings.Join(r.enum, ", ")
			if near := closest(s, r.enum); near != "" {
				msg += " (did you mean " + strconv.Quote(near) + "?)"
			}
			n.Errorf("%s", msg)
		}
	}
	if r.pattern != nil && !r.pattern.MatchString(v.String()) {
		n.Errorf("does not match pattern %s", r.pattern.String())
	}
}

// below reports whether number v (not NaN) is less than b.
func below(v reflect.Value, b *bound) bool {
	switch {
	case isInt(v.Kind()):
		return v.Int() < b.i
	case isUint(v.Kind()):
		return v.Uint() < b.u
	default:
		return v.Float() < b.f
	}
}

// above reports whether number v is greater than b.
func above(v reflect.Value, b *bound) bool {
	switch {
	case isInt(v.Kind()):
		return v.Int() > b.i
	case isUint(v.Kind()):
		return v.Uint() > b.u
	default:
		return v.Float() > b.f
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
