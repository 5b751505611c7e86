package aipolicy

import (
	"bytes"
	"math"

	"github.com/relaygate/gateway/codec/llm"
)

// This file indexes JSON text that llm.ValidObject accepts (buildValid
// checks it while indexing):
// one scan finds every value's span (strings skipped eight bytes at a
// time) and where each container ends, so that walkers go back over members and
// skip whole subtrees without reading them again. Positions are offsets
// into the whole body, so that what the walkers find can be edited in
// place. On text that is not valid the index means nothing, but building
// and walking it never reads out of bounds (PromptTokens and Model read
// bodies nobody validated).

// tok is a JSON value's span, d[start:end], and its node in the tape.
type tok struct{ start, end, node int }

func (t tok) is(d []byte, c byte) bool { return t.end > t.start && d[t.start] == c }

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// tape is the index of a JSON text: its values in document order, each
// container followed by its members' names and values.
type tape struct {
	d     []byte
	nodes []node
	open  []int // containers not closed yet
}

// node is a value (or a member name): its span, and the index of the node
// after its subtree. 12 bytes: a tape is a few times the size of the text
// at worst (a body of one-digit numbers), where a decoded tree is tens.
type node struct{ start, end, next int32 }

// Depths build indexes down to.
const (
	topLevel  = 1            // the top-level object's members
	allLevels = llm.MaxDepth // everything valid JSON nests (so walks recurse no deeper)
)

// build indexes d down to depth: a container nested deeper is one node
// whose members are not indexed (so an embeddings request's long arrays
// cost no nodes when only the top level is read). Texts of 2 GiB or more
// are not indexed (no request body comes near).
func (tp *tape) build(d []byte, depth int) {
	if len(d) > math.MaxInt32 {
		d = nil
	}
	tp.d, tp.nodes, tp.open = d, tp.nodes[:0], tp.open[:0]
	for i := 0; i < len(d); {
		switch d[i] {
		case ' ', '\n', '\r', '\t', ',', ':':
			i++
		case '"':
			end := llm.ValidStringEnd(d, i)
			tp.leaf(i, end)
			i = end
		case '{', '[':
			if len(tp.open) >= depth {
				end := llm.ValidValueEnd(d, i)
				if end < 0 { // unclosed: not on validated text
					end = len(d)
				}
				tp.leaf(i, end)
				i = end
				continue
			}
			tp.open = append(tp.open, len(tp.nodes))
			tp.nodes = append(tp.nodes, node{start: int32(i)})
			i++
		case '}', ']':
			i++
			if n := len(tp.open); n > 0 {
				tp.close(tp.open[n-1], i)
				tp.open = tp.open[:n-1]
			}
		default:
			end := scalarEnd(d, i)
			tp.leaf(i, end)
			i = end
		}
	}
	for len(tp.open) > 0 { // unclosed: not on validated text
		n := len(tp.open) - 1
		tp.close(tp.open[n], len(d))
		tp.open = tp.open[:n]
	}
}

// buildValid is build for a text that must be one JSON object as
// llm.ValidObject reads one: it validates while it indexes, so that a body
// is read once rather than validated and then indexed. It reports whether
// the text is valid; the index is then exactly build's. Containers below
// depth are checked by llm.ValueEnd and indexed as one node, as build
// indexes them.
func (tp *tape) buildValid(d []byte, depth int) bool {
	tp.d, tp.nodes, tp.open = d, tp.nodes[:0], tp.open[:0]
	if len(d) > math.MaxInt32 {
		tp.d = nil
		return false
	}
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	end, ok := tp.validValue(d, i, 0, depth)
	return ok && skipWS(d, end) == len(d)
}

// validValue indexes the value at d[i], inside level containers, and
// returns its end and whether it is valid.
func (tp *tape) validValue(d []byte, i, level, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	c := d[i]
	if c == '"' {
		end, ok := llm.StringEnd(d, i)
		tp.leaf(i, end)
		return end, ok
	}
	if c != '{' && c != '[' || level >= depth {
		end, ok := llm.ValueEnd(d, i, level)
		tp.leaf(i, end)
		return end, ok
	}
	if level >= llm.MaxDepth {
		return i, false
	}
	k := len(tp.nodes)
	tp.nodes = append(tp.nodes, node{start: int32(i)})
	closer := byte('}')
	if c == '[' {
		closer = ']'
	}
	j := skipWS(d, i+1)
	if j < len(d) && d[j] == closer {
		tp.close(k, j+1)
		return j + 1, true
	}
	for {
		if closer == '}' {
			end, ok := llm.StringEnd(d, j)
			if !ok {
				return end, false
			}
			tp.leaf(j, end)
			if j = skipWS(d, end); j >= len(d) || d[j] != ':' {
				return j, false
			}
			j = skipWS(d, j+1)
		}
		end, ok := tp.validValue(d, j, level+1, depth)
		if !ok {
			return end, false
		}
		if j = skipWS(d, end); j >= len(d) {
			return j, false
		}
		switch d[j] {
		case ',':
			j = skipWS(d, j+1)
		case closer:
			tp.close(k, j+1)
			return j + 1, true
		default:
			return j, false
		}
	}
}

// leaf adds a node without members.
func (tp *tape) leaf(start, end int) {
	tp.nodes = append(tp.nodes, node{start: int32(start), end: int32(end), next: int32(len(tp.nodes) + 1)})
}

func (tp *tape) close(k, end int) {
	tp.nodes[k].end = int32(end)
	tp.nodes[k].next = int32(len(tp.nodes))
}

// scalarEnd returns the end of the number or literal at d[i] (at least one
// byte, so that building always moves on).
func scalarEnd(d []byte, i int) int {
	j := i + 1
	for j < len(d) {
		switch d[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t', ':', '"', '{', '[':
			return j
		}
		j++
	}
	return j
}

// root is the text's top-level value; ok is false for an empty text.
func (tp *tape) root() (tok, bool) {
	if len(tp.nodes) == 0 {
		return tok{}, false
	}
	return tp.tok(0), true
}

func (tp *tape) tok(k int) tok { n := tp.nodes[k]; return tok{int(n.start), int(n.end), k} }

// iter walks the members of an object or the elements of an array.
type iter struct {
	tp      *tape
	i, stop int // the next node, and the node after the container
}

// walk starts walking the object or array v.
func (tp *tape) walk(v tok) iter {
	if v.node >= len(tp.nodes) {
		return iter{tp: tp}
	}
	return iter{tp: tp, i: v.node + 1, stop: int(tp.nodes[v.node].next)}
}

// element returns the next element of an array.
func (it *iter) element() (tok, bool) {
	if it.i >= it.stop {
		return tok{}, false
	}
	v := it.tp.tok(it.i)
	it.i = int(it.tp.nodes[it.i].next)
	return v, true
}

// member returns the next member of an object: its name token and value.
func (it *iter) member() (name, value tok, ok bool) {
	if it.i+1 >= it.stop {
		return tok{}, tok{}, false
	}
	name, value = it.tp.tok(it.i), it.tp.tok(it.i+1)
	it.i = int(it.tp.nodes[it.i+1].next)
	return name, value, name.is(it.tp.d, '"')
}

// nameIs reports whether the string token n is the text name (escapes
// decoded). A token's text is never longer than its inner bytes, and
// shorter only with escapes, so most mismatches are settled by length; it
// is small enough to be inlined.
func nameIs(d []byte, n tok, name string) bool {
	size := n.end - n.start - 2
	if size == len(name) {
		return string(d[n.start+1:n.end-1]) == name
	}
	return size > len(name) && escapedNameIs(d, n, name)
}

func escapedNameIs(d []byte, n tok, name string) bool {
	if bytes.IndexByte(d[n.start+1:n.end-1], '\\') < 0 {
		return false
	}
	var buf [64]byte
	text, err := llm.AppendUnquoted(buf[:0], d[n.start:n.end])
	return err == nil && string(text) == name
}
