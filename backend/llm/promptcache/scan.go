package promptcache

import (
	"unicode"
	"unicode/utf8"

	"github.com/relaygate/gateway/codec/llm"
)

// The walkers below read text that llm.Members has already checked whole
// (Apply iterates the body's members first, which checks every value), so
// they only need to find where values end; they still never index past
// their input, whatever it holds.

// offsetIn is where sub starts in body, sub being a slice of body (as every
// value llm.Members and elements hand out is): slicing keeps the end of the
// backing array, so the capacity lost is the offset.
func offsetIn(body, sub []byte) int { return cap(body) - cap(sub) }

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// elements iterates the elements of a JSON array:
//
//	var e elements
//	e.reset(arr)
//	for e.next() { use(e.value) }
//
// value is a slice of arr; ok is false when arr is not an array.
type elements struct {
	data   []byte
	pos    int
	value  []byte
	n      int // elements seen so far
	opened bool
	done   bool
	bad    bool
}

func (e *elements) reset(arr []byte) { *e = elements{data: arr} }

func (e *elements) next() bool {
	if e.done || e.bad {
		return false
	}
	d := e.data
	i := skipSpace(d, e.pos)
	if !e.opened {
		if i >= len(d) || d[i] != '[' {
			return e.fail()
		}
		e.opened = true
		i = skipSpace(d, i+1)
	} else if i < len(d) && d[i] == ',' {
		i = skipSpace(d, i+1)
	}
	if i >= len(d) {
		return e.fail()
	}
	if d[i] == ']' {
		e.done = true
		return false
	}
	end := llm.ValidValueEnd(d, i)
	if end < 0 {
		return e.fail()
	}
	e.value, e.pos = d[i:end], end
	e.n++
	return true
}

func (e *elements) fail() bool {
	e.bad = true
	return false
}

// ok reports an array read to its end.
func (e *elements) ok() bool { return e.done && !e.bad }

// count is the number of elements of arr (-1 when it is not an array).
func count(arr []byte) int {
	var e elements
	e.reset(arr)
	for e.next() {
	}
	if !e.ok() {
		return -1
	}
	return e.n
}

// member is the value of obj's member called name; present is false when
// obj has none, and once is false when it has more than one (which of them
// a provider reads is its parser's choice, so nothing is added there) or
// is not an object.
func member(obj []byte, name string) (value []byte, present, once bool) {
	var m llm.Members
	m.Reset(obj)
	n := 0
	for m.Next() {
		if m.NameIs(name) {
			value = m.Value()
			n++
		}
	}
	return value, n > 0, n <= 1 && m.Err() == nil
}

// counts are what tally finds in a value.
type counts struct {
	// words of its string values (member names aside; see countWords), up
	// to the words wanted.
	words int
	// marks are the members called mark whose value is not null: the cache
	// points a client set.
	marks int
	// longAt is where the last of them with a TTL other than five minutes
	// starts in the value (-1: none).
	longAt int
}

// tally counts, in a JSON value, the words of its string values up to
// wantWords (past which it stops counting them) and the cache points.
// A point's own value is not counted as words, so the points Apply adds do
// not move the estimate.
func tally(v []byte, mark string, wantWords int) counts {
	c := counts{longAt: -1}
	for i := 0; i < len(v); {
		if v[i] != '"' {
			i++
			continue
		}
		start, end := i, llm.ValidStringEnd(v, i)
		next := skipSpace(v, end)
		if next >= len(v) || v[next] != ':' { // a value
			if c.words < wantWords && end-start >= 2 {
				c.words = min(c.words+countWords(v[start+1:end-1]), wantWords)
			}
			i = end
			continue
		}
		i = next + 1
		if !nameIs(v[start:end], mark) {
			continue
		}
		valStart := skipSpace(v, i)
		valEnd := llm.ValidValueEnd(v, valStart)
		if valEnd < 0 {
			return c
		}
		if value := v[valStart:valEnd]; string(value) != "null" {
			c.marks++
			if longTTL(value) {
				c.longAt = valStart
			}
		}
		i = valEnd
	}
	return c
}

// longTTL reports a cache point that asks for a TTL other than the five
// minutes of the points Apply adds ({"type":"ephemeral","ttl":"1h"}).
func longTTL(point []byte) bool {
	ttl, present, _ := member(point, "ttl")
	return present && string(ttl) != `"5m"` && string(ttl) != "null"
}

// nameIs reports whether the string token tok is name once its escapes
// are decoded.
func nameIs(tok []byte, name string) bool {
	if len(tok) < 2 {
		return false
	}
	inner := tok[1 : len(tok)-1]
	if string(inner) == name {
		return true
	}
	// An escape takes at most six bytes per character of an ASCII name.
	if len(inner) > 6*len(name) || !hasBackslash(inner) {
		return false
	}
	var buf [6 * 16]byte
	text, err := llm.AppendUnquoted(buf[:0], tok)
	return err == nil && string(text) == name
}

func hasBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// countWords counts the words of the text a JSON string token's inner
// bytes stand for, escapes decoded on the fly: what tokens.EstimateWords
// counts in the decoded text (runs of characters that are not Unicode
// white space), without decoding it into a buffer.
func countWords(in []byte) int {
	words, inWord := 0, false
	for i := 0; i < len(in); {
		c := in[i]
		if c < utf8.RuneSelf && c != '\\' { // most of a prompt: one branch a byte
			// Other white space than the space must be escaped in JSON.
			if c == ' ' {
				inWord = false
			} else if !inWord {
				words, inWord = words+1, true
			}
			i++
			continue
		}
		var r rune
		if c == '\\' {
			if i+1 >= len(in) {
				r, i = '\\', i+1
			} else {
				r, i = escapedRune(in, i)
			}
		} else {
			var w int
			r, w = utf8.DecodeRune(in[i:])
			i += w
		}
		if unicode.IsSpace(r) {
			inWord = false
		} else if !inWord {
			words, inWord = words+1, true
		}
	}
	return words
}

// hasWord reports text that is not all white space (countWords > 0),
// reading only up to its first word.
func hasWord(in []byte) bool {
	for i := 0; i < len(in); {
		var space bool
		c := in[i]
		switch {
		case c == '\\' && i+1 < len(in):
			var r rune
			r, i = escapedRune(in, i)
			space = unicode.IsSpace(r)
		case c < utf8.RuneSelf:
			space = c == ' '
			i++
		default:
			r, w := utf8.DecodeRune(in[i:])
			space = unicode.IsSpace(r)
			i += w
		}
		if !space {
			return true
		}
	}
	return false
}

// escapedRune decodes the escape at in[i] and returns the character and
// the index after it; an unpaired surrogate is U+FFFD, as when the string
// is decoded (llm.UnescapeAt), and an escape JSON does not have reads as
// its character.
func escapedRune(in []byte, i int) (rune, int) {
	r, next, ok := llm.UnescapeAt(in, i)
	if !ok && i+1 < len(in) && in[i+1] != 'u' {
		return rune(in[i+1]), i + 2
	}
	return r, next
}
