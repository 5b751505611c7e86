package decode

import (
	"strconv"

	"github.com/goccy/go-yaml/ast"
)

// state is one decode run: the errors found so far and what building the
// node tree needs (anchors, alias expansion budget).
type state struct {
	errs    Errors
	dropped int
	// badSeen are the paths of the values decode met already broken (their
	// errors recorded when the tree was built, such as an unknown tag): a
	// value holding one did not decode, though it added no error.
	badSeen []string

	anchors   map[string]ast.Node
	expanding int // > 0 while building the target of an alias
	budget    int // nodes that alias expansion may still create
	overBudg  bool

	calls        int                  // nesting of decode calls
	reportedTags map[*structInfo]bool // cfg tag errors are reported once per type
}

func newState() *state {
	return &state{anchors: make(map[string]ast.Node), budget: maxAliasNodes}
}

// add records an error unless the error limit is reached.
func (s *state) add(path string, line, col int, msg string) {
	if len(s.errs) >= maxErrors {
		s.dropped++
		return
	}
	s.errs = append(s.errs, &FieldError{Path: path, Msg: msg, Line: line, Col: col})
}

// errorf records an error at n, unless n is already known to be broken.
func (s *state) errorf(n *Node, format string, args ...any) {
	if n.bad {
		return
	}
	n.Errorf(format, args...)
}

// count is the number of failures found so far: errors recorded or not,
// and broken values met (badSeen).
func (s *state) count() int { return len(s.errs) + s.dropped + len(s.badSeen) }

// finish sorts the errors and returns them, nil when there are none.
func (s *state) finish() Errors {
	if len(s.errs) == 0 {
		return nil
	}
	sortErrors(s.errs)
	if s.dropped > 0 {
		s.errs = append(s.errs, &FieldError{Msg: "too many errors; " + strconv.Itoa(s.dropped) + " more not shown"})
	}
	return s.errs
}
