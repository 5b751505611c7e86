package decode

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
}

// Errorf records an error at field, a path relative to the value such as
// "tls", "backend.port", "routes[2].name" or "" for the value itself (see
// the package documentation for the path syntax). The error is placed at
// the deepest part of the path present in the document.
func (v *Validation) Errorf(field string, format string, args ...any) {
	v.n.ErrorfAt(field, format, args...)
}

// Path returns the path of the value being validated.
func (v *Validation) Path() string { return v.n.Path() }

// Node returns the parsed form of the value being validated.
func (v *Validation) Node() *Node { return v.n }
