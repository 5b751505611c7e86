package decode

import "strings"

// Validator is implemented (with a pointer or value receiver) by types with
// rules that span fields. Validate is called after the value is decoded,
// and only when it decoded without error and was not null, so it sees a
// well-formed value. An embedded struct's Validate is promoted to the outer
// struct like any method.
type Validator interface {
	Validate(v *Validation)
}

// Validation reports errors relative to the value being validated.
type Validation struct {
	n *Node
	// failed holds the paths of the value's fields that did not decode,
	// when some did not (FieldRules); errors about them are dropped.
	failed []string
}

// FieldRules is implemented by Validators whose rules each concern a single
// field (a range, a name's syntax, each item of a list) and that cope with
// any field left at its zero value. Their Validate runs even when other
// fields of the value failed to decode, so that one run reports every
// problem; errors about the failed fields are dropped.
type FieldRules interface {
	FieldRules()
}

// Errorf records an error at field, a path relative to the value such as
// "tls", "backend.port", "routes[2].name" or "" for the value itself (see
// the package documentation for the path syntax). The error is placed at
// the deepest part of the path present in the document.
func (v *Validation) Errorf(field string, format string, args ...any) {
	if v.failed != nil {
		at := joinRel(v.n.path, field)
		for _, f := range v.failed {
			if related(at, f) {
				return
			}
		}
	}
	v.n.ErrorfAt(field, format, args...)
}

// related reports whether one path is the other or lies under it.
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	return strings.HasPrefix(b, a) && (len(b) == len(a) || b[len(a)] == '.' || b[len(a)] == '[')
}

// Path returns the path of the value being validated.
func (v *Validation) Path() string { return v.n.Path() }

// Node returns the parsed form of the value being validated.
func (v *Validation) Node() *Node { return v.n }
