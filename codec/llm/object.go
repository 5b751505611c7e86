package llm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
	"strings"
)

// MaxDepth bounds the nesting that Members and SetMember walk through.
const MaxDepth = 512

// ErrSyntax is returned by Members and SetMember for text that is not a JSON
// object (or nests deeper than MaxDepth), and by Decoder.Decode for text
// that is not one JSON value.
var ErrSyntax = errors.New("llm: invalid JSON object")

// Members iterates the members of a JSON object without decoding them:
//
//	var m llm.Members
//	m.Reset(body)
//	for m.Next() { use(m.Name(), m.Value()) }
//	if m.Err() != nil { ... }
//
// Name and Value alias the object. The zero Members is at an end.
type Members struct {
	data []byte
	// The current member is data[start:end], its name's token
	// data[start:nameEnd], its value data[valueStart:end]; the next one is
	// looked for from end. Offsets, not slices: the walk stores four ints a
	// member instead of two slice headers.
	start, nameEnd, valueStart, end int
	err                             error
	done, opened                    bool
}

// Reset starts iterating obj.
func (m *Members) Reset(obj []byte) { *m = Members{data: obj} }

// Next moves to the next member; it returns false at the end of the object
// or on an error (see Err).
func (m *Members) Next() bool {
	if m.done || m.err != nil || m.data == nil {
		return false
	}
	d := m.data
	i := skipSpace(d, m.end)
	if !m.opened {
		if i >= len(d) || d[i] != '{' {
			return m.fail()
		}
		m.opened = true
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == '}' {
			return m.finish(i + 1)
		}
	} else {
		if i >= len(d) {
			return m.fail()
		}
		if d[i] == '}' {
			return m.finish(i + 1)
		}
		if d[i] != ',' {
			return m.fail()
		}
		i = skipSpace(d, i+1)
	}
	start := i
	j, ok := skipString(d, i)
	if !ok {
		return m.fail()
	}
	nameEnd := j
	i = skipSpace(d, j)
	if i >= len(d) || d[i] != ':' {
		return m.fail()
	}
	i = skipSpace(d, i+1)
	if j, ok = skipValue(d, i, 0); !ok {
		return m.fail()
	}
	m.start, m.nameEnd, m.valueStart, m.end = start, nameEnd, i, j
	return true
}

func (m *Members) finish(end int) bool {
	if skipSpace(m.data, end) != len(m.data) {
		return m.fail()
	}
	m.done = true
	return false
}

func (m *Members) fail() bool {
	m.err = ErrSyntax
	return false
}

// Name is the current member's name as a JSON string token.
func (m *Members) Name() Raw { return m.data[m.start:m.nameEnd] }

// Value is the current member's value.
func (m *Members) Value() Raw { return m.data[m.valueStart:m.end] }

// ValueEnd is where the current member's value ends in the object: the
// value is obj[ValueEnd()-len(Value()):ValueEnd()].
func (m *Members) ValueEnd() int { return m.end }

// NameIs reports whether the current member is called name (escapes in the
// member's name are decoded before the comparison).
func (m *Members) NameIs(name string) bool { return tokenIs(m.Name(), name) }

// tokenIs reports whether the string token tok (quotes included) names
// name, escapes decoded.
func tokenIs(tok Raw, name string) bool {
	if len(tok) < 2 {
		return false
	}
	if len(tok)-2 <= len(name) {
		// An escape is longer than the character it stands for (two bytes
		// or six for one to three), so a raw name with one decodes shorter
		// than name: only a raw name without escapes, equal byte for byte,
		// matches. (Equal bytes with a backslash are an escape: `m\u006f`
		// is "mo", not name.)
		return string(tok[1:len(tok)-1]) == name && strings.IndexByte(name, '\\') < 0
	}
	var buf [64]byte
	text := KeyText(buf[:0], tok)
	return text != nil && string(text) == name
}

// KeyText returns the text of a member name's string token: a view of
// the token when it holds no escape, else its text appended to buf (nil
// when the escapes do not decode). To compare a name with several, switch
// on string(KeyText(buf, name)): one look at it instead of a NameIs each.
func KeyText(buf []byte, tok Raw) []byte {
	if len(tok) < 2 {
		return nil
	}
	in := tok[1 : len(tok)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return in
	}
	text, err := AppendUnquoted(buf, tok)
	if err != nil {
		return nil
	}
	return text
}

// Err is the error that ended the iteration, if any.
func (m *Members) Err() error { return m.err }

// Lookup returns the value of obj's first member called name.
func Lookup(obj []byte, name string) (Raw, error) {
	var m Members
	m.Reset(obj)
	for m.Next() {
		if m.NameIs(name) {
			return m.Value(), nil
		}
	}
	return nil, m.Err()
}

// LastMember returns the value of the last member called name in obj, a
// JSON object passed on as it is (a provider's answer), and whether obj is
// structurally one object: each member a string name, a colon and a value,
// containers closed, nothing after the object but spaces. Names and values
// are found as ValidStringEnd and ValidValueEnd find them, so what is
// inside strings and scalars is not checked: for text whose bytes the
// reader does not change, at a fraction of Members' cost. The value is nil
// when no member is called name.
func LastMember(obj []byte, name string) (v Raw, ok bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil, skipSpace(obj, i+1) == len(obj)
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return nil, false
		}
		nameEnd := ValidStringEnd(obj, i)
		j := skipSpace(obj, nameEnd)
		if j >= len(obj) || obj[j] != ':' {
			return nil, false
		}
		j = skipSpace(obj, j+1)
		if j >= len(obj) {
			return nil, false
		}
		if c := obj[j]; c != '"' && c != '{' && c != '[' && c != '-' && c != 't' && c != 'f' && c != 'n' && (c < '0' || c > '9') {
			return nil, false // no value
		}
		end := ValidValueEnd(obj, j)
		if end < 0 {
			return nil, false
		}
		if tokenIs(obj[i:nameEnd], name) {
			v = obj[j:end]
		}
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return nil, false
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			if skipSpace(obj, i+1) != len(obj) {
				return nil, false
			}
			return v, true
		default:
			return nil, false
		}
	}
}

// SetMember appends to dst the object obj with its member name set to value
// (JSON text, copied as given): the first member of that name is replaced in
// place, later ones are dropped, and a missing one is added at the end. A nil
// value removes the member. Every other member is copied byte for byte.
func SetMember(dst, obj []byte, name string, value []byte) ([]byte, error) {
	var m Members
	m.Reset(obj)
	start := len(dst)
	dst = append(dst, '{')
	n, set := 0, false
	for m.Next() {
		member := obj[m.start:m.end]
		if m.NameIs(name) {
			if set || value == nil {
				continue
			}
			set = true
			member = nil
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		if member == nil {
			dst = AppendString(dst, name)
			dst = append(dst, ':')
			dst = append(dst, value...)
			continue
		}
		dst = append(dst, member...)
	}
	if m.Err() != nil {
		return dst[:start], m.Err()
	}
	if !set && value != nil {
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, name)
		dst = append(dst, ':')
		dst = append(dst, value...)
	}
	return append(dst, '}'), nil
}

func skipSpace(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r' || d[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the end of the string token at d[i]. The closing
// quote and any backslash before it are found with bytes.IndexByte
// (vectorised); the plain runs between are checked for control bytes eight
// at a time; escapes are checked one by one.
func skipString(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '"' {
		return i, false
	}
	i++
	// Most strings (names, short values) end within two words: find the
	// first quote, backslash or control byte a word at a time, without
	// IndexByte's set-up cost.
	for w := 0; w < 2 && i+8 <= len(d); w++ {
		m := specialMask(binary.LittleEndian.Uint64(d[i:]))
		if m == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(m) >> 3
		if d[i] == '"' {
			return i + 1, true
		}
		break // an escape or a control byte: the general path below
	}
	for {
		q := bytes.IndexByte(d[i:], '"')
		if q < 0 {
			return len(d), false
		}
		q += i // the next quote: the end, unless an escape takes it
		for i <= q {
			end := q
			if b := bytes.IndexByte(d[i:q], '\\'); b >= 0 {
				end = i + b
			}
			if hasControl(d[i:end]) {
				return i, false
			}
			if end == q {
				return q + 1, true
			}
			// The escape at end.
			i = end + 1
			if i >= len(d) {
				return i, false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if _, ok := Hex4(d[i+1:]); !ok {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		}
	}
}

// specialMask flags the bytes of x that end a plain run in a string: '"',
// '\\' and control bytes, each by its high bit. Only the lowest flag is
// exact (a borrow may flag bytes above a true one), which is the one
// skipString reads.
func specialMask(x uint64) uint64 {
	quote := x ^ '"'*lows
	backslash := x ^ '\\'*lows
	return ((x-0x20*lows)&^x | (quote-lows)&^quote | (backslash-lows)&^backslash) & highs
}

// hasControl reports a byte below 0x20 in s, words at a time: the
// high bit of (x - 0x20..20) &^ x flags them, and a false flag (a borrow)
// only ever follows a true one.
func hasControl(s []byte) bool {
	for len(s) >= 16 { // two words a turn: half the loop's overhead
		a, b := binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
		if ((a-lows*0x20)&^a|(b-lows*0x20)&^b)&highs != 0 {
			return true
		}
		s = s[16:]
	}
	for len(s) >= 8 {
		w := binary.LittleEndian.Uint64(s)
		if (w-lows*0x20)&^w&highs != 0 {
			return true
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// skipValue returns the end of the JSON value at d[i].
func skipValue(d []byte, i, depth int) (int, bool) {
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '"':
		return skipString(d, i)
	case c == '{' || c == '[':
		if depth >= MaxDepth {
			return i, false
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == closer {
			return i + 1, true
		}
		for {
			var ok bool
			if closer == '}' {
				if i, ok = skipString(d, i); !ok {
					return i, false
				}
				if i = skipSpace(d, i); i >= len(d) || d[i] != ':' {
					return i, false
				}
				i = skipSpace(d, i+1)
			}
			if i, ok = skipValue(d, i, depth+1); !ok {
				return i, false
			}
			if i = skipSpace(d, i); i >= len(d) {
				return i, false
			}
			switch d[i] {
			case ',':
				i = skipSpace(d, i+1)
			case closer:
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == 't':
		return skipLiteral(d, i, "true")
	case c == 'f':
		return skipLiteral(d, i, "false")
	case c == 'n':
		return skipLiteral(d, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i
		for j < len(d) {
			switch d[j] {
			case '-', '+', '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
				j++
				continue
			}
			break
		}
		return j, true
	}
	return i, false
}

// ValidValueEnd returns the end of the value at d[i] in text known to be
// valid JSON, or -1 when i is past the end or a container does not close:
// strings through ValidStringEnd, containers by counting brackets outside
// strings, scalars up to the next delimiter. It checks nothing, and on text
// that is not valid it reads nothing out of bounds.
func ValidValueEnd(d []byte, i int) int {
	if i >= len(d) {
		return -1
	}
	switch d[i] {
	case '"':
		return ValidStringEnd(d, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				j = ValidStringEnd(d, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i + 1; j < len(d); j++ { // a number or a literal
		switch d[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			return j
		}
	}
	return len(d)
}

// ValidStringEnd returns the end of the string token at d[i] (a quote) in
// text known to be valid JSON, or len(d) when it does not end. Most strings
// are short: their end is found a word at a time (the first quote or
// backslash; an escape is skipped whole); a long one's, after the first
// words, with bytes.IndexByte (vectorised), as the first quote that an even
// run of backslashes precedes.
func ValidStringEnd(d []byte, i int) int {
	j := i + 1
	for w := 0; w < 4 && j+8 <= len(d); w++ {
		x := binary.LittleEndian.Uint64(d[j:])
		quote := x ^ '"'*lows
		backslash := x ^ '\\'*lows
		m := ((quote-lows)&^quote | (backslash-lows)&^backslash) & highs
		if m == 0 {
			j += 8
			continue
		}
		j += bits.TrailingZeros64(m) >> 3
		if d[j] == '"' {
			return j + 1
		}
		j += 2 // the backslash and the byte it escapes
	}
	for j < len(d) {
		k := bytes.IndexByte(d[j:], '"')
		if k < 0 {
			break
		}
		j += k
		backslashes := 0
		for p := j - 1; p > i && d[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j + 1
		}
		j++
	}
	return len(d)
}

func skipLiteral(d []byte, i int, lit string) (int, bool) {
	if len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// StringEnd returns the end of the string token at d[i], and whether it is
// one (escapes checked, as Valid checks them).
func StringEnd(d []byte, i int) (int, bool) { return skipString(d, i) }

// ValueEnd returns the end of the JSON value at d[i], and whether it is one
// as Valid reads values; depth is how many containers enclose it (MaxDepth
// bounds the total).
func ValueEnd(d []byte, i, depth int) (int, bool) { return skipValue(d, i, depth) }

// Valid reports whether b is one JSON value, spaces around it allowed (a
// structural check: strings' escapes are checked, their UTF-8 is not).
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	j, ok := skipValue(b, i, 0)
	return ok && skipSpace(b, j) == len(b)
}

// ValidObject reports whether b is one JSON object (see Valid).
func ValidObject(b []byte) bool {
	i := skipSpace(b, 0)
	return i < len(b) && b[i] == '{' && Valid(b[i:])
}

const (
	lows  = 0x0101010101010101
	highs = 0x8080808080808080
)

// HasDuplicateMembers reports whether b is a JSON value in which an object
// has two members of the same name (escapes decoded). Parsers read such a
// body differently (the pooled decoder keeps the last member, others the
// first or refuse it), so a gateway that rewrites what its decoder read (a
// response guard's mask) must not pass on a body whose other reading it
// did not see. Text that is not JSON gives false: decoding refuses it.
func HasDuplicateMembers(b []byte) bool {
	var c DuplicateCheck
	return c.Has(b)
}

// DuplicateCheck is HasDuplicateMembers with its scratch kept from one
// check to the next: once warm, a check allocates nothing.
type DuplicateCheck struct{ s dupScanner }

// Has reports whether b has a duplicate member (HasDuplicateMembers).
func (c *DuplicateCheck) Has(b []byte) bool {
	s := &c.s
	s.d, s.names, s.buf, s.dup = b, s.names[:0], s.buf[:0], false
	s.value(skipSpace(b, 0), 0)
	s.d = nil
	clear(s.names[:cap(s.names)]) // no view of b outlives the check
	return s.dup
}

// dupScanner walks a JSON value looking for a duplicate member.
type dupScanner struct {
	d []byte
	// names holds the member names of the objects being walked, each
	// object's after its parent's: views of d, or of buf for a name with
	// escapes (buf's earlier arrays stay valid when it grows).
	names [][]byte
	buf   []byte
	dup   bool // a duplicate ended the walk
}

// value walks the value at d[i] and returns its end; ok is false for a
// duplicate member (dup) or text that is not JSON.
func (s *dupScanner) value(i, depth int) (int, bool) {
	d := s.d
	if i >= len(d) || depth >= MaxDepth {
		return i, false
	}
	switch d[i] {
	case '{':
		mark := len(s.names)
		end, ok := s.object(i, depth, mark)
		s.names = s.names[:mark]
		return end, ok
	case '[':
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == ']' {
			return i + 1, true
		}
		for {
			var ok, more bool
			if i, ok = s.value(i, depth+1); !ok {
				return i, false
			}
			if i, more, ok = afterElement(d, i, ']'); !more {
				return i, ok
			}
		}
	}
	return skipValue(d, i, depth)
}

// object walks the object at d[i], whose names go in names from mark.
func (s *dupScanner) object(i, depth, mark int) (int, bool) {
	d := s.d
	i = skipSpace(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, true
	}
	for {
		j, ok := skipString(d, i)
		if !ok {
			return j, false
		}
		tok := d[i:j]
		start := len(s.buf)
		name := KeyText(s.buf, tok)
		if name == nil {
			return j, false
		}
		if bytes.IndexByte(tok, '\\') >= 0 {
			// Decoded into buf.
			s.buf, name = name, name[start:]
		}
		for _, seen := range s.names[mark:] {
			if bytes.Equal(seen, name) {
				s.dup = true
				return j, false
			}
		}
		s.names = append(s.names, name)
		if i = skipSpace(d, j); i >= len(d) || d[i] != ':' {
			return i, false
		}
		if i, ok = s.value(skipSpace(d, i+1), depth+1); !ok {
			return i, false
		}
		var more bool
		if i, more, ok = afterElement(d, i, '}'); !more {
			return i, ok
		}
	}
}

// afterElement reads what follows an element of a container that closer
// ends, from d[i]: a comma (more, i at the next element) or closer (i past
// it, ok); anything else is not JSON.
func afterElement(d []byte, i int, closer byte) (next int, more, ok bool) {
	if i = skipSpace(d, i); i >= len(d) {
		return i, false, false
	}
	switch d[i] {
	case ',':
		return skipSpace(d, i+1), true, true
	case closer:
		return i + 1, false, true
	}
	return i, false, false
}
