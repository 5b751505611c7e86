package decode

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
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
// and the position part is left out when the line is unknown. A value
// longer than maxShownValue bytes in the path or the message, quoted or
// not, is cut there: `invalid hostname "aaaa..." (30000000 bytes)`, so that
// a huge value in a config makes no huge log line or admin page.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Path == "" {
		b.WriteString("(root)")
	} else {
		writeClipped(&b, e.Path)
	}
	b.WriteString(": ")
	writeClipped(&b, e.Msg)
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

// maxShownValue bounds the bytes of one value (a quoted string, a number,
// a key) that an error shows.
const maxShownValue = 128

// writeClipped writes s to b with each value longer than maxShownValue
// bytes cut: a Go-quoted string to its first bytes, `"aaa..." (N bytes)`;
// any other run of bytes without a space or a path or number delimiter
// (. [ ] , : ( )) the same way, `999... (N bytes)`.
func writeClipped(b *strings.Builder, s string) {
	if len(s) <= maxShownValue {
		b.WriteString(s)
		return
	}
	last := 0 // s[last:i] is still to write
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			q, err := strconv.QuotedPrefix(s[i:])
			if err != nil {
				i++
				continue
			}
			if len(q) > maxShownValue+2 {
				b.WriteString(s[last:i])
				writeClippedQuote(b, q)
				last = i + len(q)
			}
			i += len(q)
		case isValueDelim(c):
			i++
		default:
			j := i
			for j < len(s) && s[j] != '"' && !isValueDelim(s[j]) {
				j++
			}
			if j-i > maxShownValue {
				b.WriteString(s[last:i])
				b.WriteString(s[i : i+runeCut(s[i:j], maxShownValue)])
				b.WriteString("... (")
				b.WriteString(strconv.Itoa(j - i))
				b.WriteString(" bytes)")
				last = j
			}
			i = j
		}
	}
	b.WriteString(s[last:])
}

// writeClippedQuote writes the Go-quoted string q cut after the quoted
// form of its first maxShownValue bytes, with the length of the value.
func writeClippedQuote(b *strings.Builder, q string) {
	body := q[1 : len(q)-1]
	cut, n := -1, 0
	for len(body) > 0 {
		r, multibyte, tail, err := strconv.UnquoteChar(body, '"')
		if err != nil { // not for a string QuotedPrefix took
			break
		}
		size := 1 // a byte, or a \x escape
		if multibyte {
			size = utf8.RuneLen(r)
		}
		if cut < 0 && n+size > maxShownValue {
			cut = len(q) - 1 - len(body)
		}
		n += size
		body = tail
	}
	if cut < 0 {
		b.WriteString(q)
		return
	}
	b.WriteString(q[:cut])
	b.WriteString(`..." (`)
	b.WriteString(strconv.Itoa(n))
	b.WriteString(" bytes)")
}

// isValueDelim reports whether c ends a value in an error's text: white
// space, or a delimiter of paths and numbers.
func isValueDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '.', '[', ']', ',', ':', '(', ')':
		return true
	}
	return false
}

// runeCut returns the length of the longest prefix of s of at most max
// bytes that does not split a UTF-8 sequence.
func runeCut(s string, max int) int {
	for max > 0 && max < len(s) && !utf8.RuneStart(s[max]) {
		max--
	}
	return max
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
