package guard

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// indexDigitOrAt returns the index of the first ASCII digit (when digits) or
// '@' (when at) in text[i:], or -1. It tests words of eight bytes: x < n for
// every byte x of a word is (x - n) &^ x & 0x80 per byte (for n <= 0x80), and
// a borrow only runs from a byte that is below n, so the lowest flag is exact.
func indexDigitOrAt(text []byte, i int, digits, at bool) int {
	var digitMask, atMask uint64
	if digits {
		digitMask = highs
	}
	if at {
		atMask = highs
	}
	if !digits && !at {
		return -1
	}
	if !digits {
		// '@' alone (only the email builtin): IndexByte's vector loop reads
		// a prompt several times faster than the words below.
		if k := bytes.IndexByte(text[i:], '@'); k >= 0 {
			return i + k
		}
		return -1
	}
	flags := func(w uint64) uint64 {
		d := w ^ (0x30 * ones) // digits become 0..9
		a := w ^ (0x40 * ones) // '@' becomes 0
		return ((d-10*ones)&^d)&digitMask | ((a-ones)&^a)&atMask
	}
	for ; i+16 <= len(text); i += 16 { // two words a turn: half the loop's overhead
		m0, m1 := flags(binary.LittleEndian.Uint64(text[i:])), flags(binary.LittleEndian.Uint64(text[i+8:]))
		if m0|m1 != 0 {
			if m0 != 0 {
				return i + bits.TrailingZeros64(m0)/8
			}
			return i + 8 + bits.TrailingZeros64(m1)/8
		}
	}
	for ; i+8 <= len(text); i += 8 {
		if m := flags(binary.LittleEndian.Uint64(text[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(text); i++ {
		c := text[i]
		if digits && c-'0' <= 9 || at && c == '@' {
			return i
		}
	}
	return -1
}

// builtinMatches makes one pass over text[from:] looking for digits and '@'
// eight bytes at a time. Around a digit it takes the run of numeric bytes and
// runs the numeric builtins on it when it has enough digits; around an '@' it
// takes the run of address bytes and runs the email builtin on it. Matches
// never cross a run's ends, so this finds what each rule's search (find)
// finds in the whole text; FuzzMask holds it to that.
func (g *Guard) builtinMatches(text []byte, from int, dst []span, first bool) []span {
	wantDigits, wantAt := len(g.numeric) > 0, len(g.address) > 0
	n0 := len(dst)
	addressDone := from // end of the last address run searched
	for i := from; ; {
		j := indexDigitOrAt(text, i, wantDigits, wantAt)
		if j < 0 {
			return dst
		}
		if text[j] == '@' {
			i = j + 1
			if j < addressDone {
				continue // inside a run already searched
			}
			start, end := runAround(text, j, addressDone, address)
			for _, r := range g.address {
				dst = g.rules[r].find(text, start, end, true, dst, r, first)
			}
			addressDone = end
		} else {
			start, end := runAround(text, j, from, numeric)
			i = end // no '@' in a numeric run
			digits := 0
			for _, c := range text[start:end] {
				if c-'0' <= 9 {
					digits++
				}
			}
			if digits < g.numericMinDigits {
				continue
			}
			hi := min(end+1, len(text)) // the byte after, for \b
			for _, r := range g.numeric {
				if digits >= g.rules[r].b.minDigits {
					dst = g.rules[r].findStarts(text[:hi], start, dst, r, first)
				}
			}
		}
		if first && len(dst) > n0 {
			return dst
		}
	}
}

// runAround returns the run of group bytes around text[j], not reaching
// before lo.
func runAround(text []byte, j, lo int, grp group) (start, end int) {
	start, end = j, j+1
	for start > lo && inGroup(text[start-1], grp) {
		start--
	}
	for end < len(text) && inGroup(text[end], grp) {
		end++
	}
	return start, end
}

// findStarts appends the checked matches of the numeric builtin r that
// start at or after from: what find would, without an unanchored search over
// a long run (Go's NFA costs 0.05-0.4 µs a byte on one, per builtin). A match
// starts at '(' or '+' or at a digit after a word boundary, and each of the
// pattern's alternatives is bounded: at each such place the alternatives
// whose gate passes are tried in order, by hand or anchored on a window of
// the rune before (context) and their longest match plus a byte (for \b).
// The first place where one matches has the leftmost-first match.
func (r *rule) findStarts(text []byte, from int, dst []span, idx int, first bool) []span {
	for p := from; p < len(text); p++ {
		c, g := text[p], 0
		if c-'0' <= 9 {
			if p > 0 && isWordByte(text[p-1]) {
				continue
			}
			g = digitsAt(text, p)
		} else if c != '(' && c != '+' {
			continue
		}
		end := -1
		for i := range r.b.alternatives {
			a := &r.b.alternatives[i]
			if a.match != nil {
				if g > 0 {
					end = a.match(text, p)
				}
			} else if a.gate(text, p, g) {
				re, lo := a.at, p
				if p > 0 {
					// An ASCII byte is a whole rune; a byte of a wider rune
					// reads as an invalid one: both are non-word characters.
					re, lo = a.atAfter, p-1
				}
				if loc := re.FindIndex(text[lo:min(p+a.maxLen+1, len(text))]); loc != nil {
					end = lo + loc[1]
				}
			}
			if end >= 0 {
				break
			}
		}
		if end < 0 {
			continue
		}
		if !r.check(text[p:end]) {
			if end = r.refine(text, p, end); end == p {
				continue
			}
		}
		dst = append(dst, span{start: p, end: end, rule: idx})
		if first {
			return dst
		}
		p = end - 1
	}
	return dst
}

// find appends the checked, non-empty matches of r in text[:to] that start at
// or after from. After a match the search goes on at its end, as FindAll
// does. A match that fails the check is cut to its longest prefix that the
// pattern matches in full and that passes (see refine); when none does, the
// search goes on one rune after its start, so a failed candidate hides
// nothing. After an empty match the search goes on one rune later.
//
// With plain, the first search runs the plain regexp on text[from:] as if it
// were the whole text, which the caller knows is right there (text[from] is
// a byte no match can start with and serves only as context).
func (r *rule) find(text []byte, from, to int, plain bool, dst []span, idx int, first bool) []span {
	text = text[:to]
	var start, end int
	if plain {
		start, end = r.searchPlain(text, from)
	} else {
		start, end = r.search(text, from)
	}
	for start >= 0 {
		ok := end > start
		if ok && r.check != nil && !r.check(text[start:end]) {
			end = r.refine(text, start, end)
			ok = end > start
		}
		var pos int
		if ok {
			dst = append(dst, span{start: start, end: end, rule: idx})
			if first {
				return dst
			}
			pos = end
		} else {
			if start >= len(text) {
				return dst
			}
			_, w := utf8.DecodeRune(text[start:])
			pos = start + w
		}
		if pos >= len(text) {
			return dst // nothing non-empty starts at the end
		}
		start, end = r.search(text, pos)
	}
	return dst
}

// search returns the leftmost match of r in text that starts at or after
// pos, with text[:pos] read as what came before it, or -1, -1.
func (r *rule) search(text []byte, pos int) (start, end int) {
	if pos == 0 || r.contextFree {
		return r.searchPlain(text, pos)
	}
	// regexp has no such call; the resume regexp matches the rune before
	// pos, as context for \b, \B and (?m)^, and then the pattern.
	_, w := utf8.DecodeLastRune(text[:pos])
	base := pos - w
	loc := r.resume.FindIndex(text[base:])
	if loc == nil {
		return -1, -1
	}
	_, cw := utf8.DecodeRune(text[base+loc[0]:])
	return base + loc[0] + cw, base + loc[1]
}

// searchPlain runs the plain regexp on text[pos:] (keeping its literal-prefix
// search, which the resume regexp loses), or the builtin's own matcher
// where it has one.
func (r *rule) searchPlain(text []byte, pos int) (start, end int) {
	if r.b != nil && r.b.findPlain != nil {
		return r.b.findPlain(text, pos)
	}
	loc := r.re.FindIndex(text[pos:])
	if loc == nil {
		return -1, -1
	}
	return loc[0] + pos, loc[1] + pos
}

// readsBefore reports whether re looks at the text before a match: \b, \B,
// ^ and \A do; without them a search can start on a slice.
func readsBefore(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpBeginLine, syntax.OpBeginText:
		return true
	}
	for _, sub := range re.Sub {
		if readsBefore(sub) {
			return true
		}
	}
	return false
}

// refine returns the end of the longest prefix of the failed match
// text[start:end] that the pattern matches in full and that passes the
// check, or start. Only the numeric builtins have checks, and their matches
// end with a digit followed by a word boundary. (A number followed by more
// digit groups: "+44 20 7946 0958 12 34" is too long as a whole, but starts
// with a phone number.)
func (r *rule) refine(text []byte, start, end int) int {
	for e := end - 1; e > start; e-- {
		if text[e-1]-'0' > 9 || e < len(text) && isWordByte(text[e]) {
			continue
		}
		if m := text[start:e]; r.check(m) && r.b.whole.Match(m) {
			return e
		}
	}
	return start
}

func isWordByte(c byte) bool {
	return c-'0' <= 9 || (c|0x20)-'a' <= 'z'-'a' || c == '_'
}

// maxMatchLen returns the most bytes a match of re can span, or -1 when
// there is no bound (a star, plus or open repeat of something non-empty).
// A stream keeps that many bytes back for the user patterns (stream.go).
func maxMatchLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			n += maxRuneLen(r, re.Flags&syntax.FoldCase != 0)
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		// Wider runes have larger code points: the class's highest rune is its
		// widest. An invalid byte matches as U+FFFD but spans one byte.
		return runeLen(re.Rune[len(re.Rune)-1])
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxMatchLen(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		if maxMatchLen(re.Sub[0]) == 0 {
			return 0
		}
		return -1
	case syntax.OpRepeat:
		n := maxMatchLen(re.Sub[0])
		if n == 0 {
			return 0
		}
		if re.Max < 0 || n < 0 {
			return -1
		}
		return re.Max * n
	case syntax.OpConcat:
		total := 0
		for _, sub := range re.Sub {
			n := maxMatchLen(sub)
			if n < 0 {
				return -1
			}
			total += n
		}
		return total
	case syntax.OpAlternate:
		most := 0
		for _, sub := range re.Sub {
			n := maxMatchLen(sub)
			if n < 0 {
				return -1
			}
			most = max(most, n)
		}
		return most
	}
	// Empty-width operators and OpNoMatch, OpEmptyMatch.
	return 0
}

// maxRuneLen is the UTF-8 length of r, or with fold of the widest rune that
// folds to it (the Kelvin sign K is three bytes where k is one).
func maxRuneLen(r rune, fold bool) int {
	n := runeLen(r)
	if fold {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			n = max(n, runeLen(f))
		}
	}
	return n
}

func runeLen(r rune) int {
	if n := utf8.RuneLen(r); n > 0 {
		return n
	}
	return utf8.UTFMax
}
