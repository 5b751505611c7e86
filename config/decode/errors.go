package decode

import (
	"errors"
	"sort"
	"strconv"
	"strings"
)

// maxErrors bounds how many errors one decode records, so that a huge
// document full of mistakes cannot produce an unbounded report.
const maxErrors = 1000

// FieldError is one problem found while decoding, located by the path of
// the value it concerns and, when known, its line and column in the source.
type FieldError struct {
	// Path names the value, e.g. "binds[0].listeners[1].port"; "" is the
	// document root. See the package documentation for the path syntax.
	Path string
	// Msg says what is wrong, e.g. `expected integer, got string "abc"`.
	Msg string
	// Line and Col are 1-based; 0 means the position is unknown.
	Line, Col int
}

// Error renders "path: msg (line L:C)"; the root path renders as "(root)"
// and the position part is left out when the line is unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path == "" {
		b.WriteString("(root)")
	} else {
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Line > 0 {
		b.WriteString(" (line ")
		b.WriteString(strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Col))
		}
		b.WriteByte(')')
	}
	return b.String()
}

// RelativeError is an error about a field below some value, its path
// relative to that value, in the path syntax (policy.FieldError: a
// constructor knows the fields of its policy, not where the policy sits).
type RelativeError interface {
	error
	RelativeField() (path, msg string)
}

// Under returns err as an error about the value at path, a field path of
// the file: a *FieldError's Path and a RelativeError's path are relative
// to that value and are joined below path ("x" and "[1].y" make "x[1].y",
// "x" and "y" make "x.y"); any other error is the message of one about
// path itself. The result has no position: the file gives it the one of
// the field it names (config.File.Position). Every place that puts a
// sub-error under a path goes through Under, so that none writes the
// sub-error's path into the message ("x: [1].y: msg") or joins an index
// with a dot ("x.[1]").
func Under(path string, err error) *FieldError {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Path: joinRel(path, fe.Path), Msg: fe.Msg}
	}
	var re RelativeError
	if errors.As(err, &re) {
		rel, msg := re.RelativeField()
		return &FieldError{Path: joinRel(path, rel), Msg: msg}
	}
	return &FieldError{Path: path, Msg: err.Error()}
}

// JoinPath appends a relative path to a path: JoinPath("a", "b") is "a.b",
// JoinPath("a", "[1].b") is "a[1].b"; an empty side is left out.
func JoinPath(base, rel string) string { return joinRel(base, rel) }

// Errors is every problem found in one decode, sorted by line, then column,
// then path. A nil Errors means success.
//
// Beware the typed-nil trap: assigning a nil Errors to an error variable
// yields a non-nil error. Use Err to get a plain error.
type Errors []*FieldError

// Error joins the individual errors with newlines.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Err returns es as an error, or a true nil when es is empty.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// sortErrors orders errors by position, then path, keeping the order in
// which errors were found for ties.
func sortErrors(es Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return a.Path < b.Path
	})
}
