package tokens

import (
	"unicode"
	"unicode/utf8"
)

// Character classes of the split patterns, one bit each. They are the
// predicates the library's compiled patterns test (regexp2cg's generated
// matchers: unicode.In over Go's tables, unicode.IsSpace for \s), so that
// both sides agree on every code point at the Unicode version Go ships.
const (
	classLetter uint8 = 1 << iota // \p{L}
	classNumber                   // \p{N}
	classSpace                    // \s, which the matchers test with unicode.IsSpace
	classUpper                    // o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
	classLower                    // o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]
	classPrefix                   // [^\r\n\p{L}\p{N}], the optional character before a word
	classPunct                    // [^\s\p{L}\p{N}]
)

// del is U+007F. The library's generated matchers test ASCII characters
// against precomputed bitmaps that leave DEL out of [^\r\n\p{L}\p{N}] and
// [^\s\p{L}\p{N}], although it is in both; as DEL is in no other class, no
// alternative matches it and the scanner steps over it: it adds no token.
// Counting equal to the library means copying that.
const del = 0x7f

// classTable maps every code point to its class bits: ASCII directly, the
// rest through a two-level table of 256-code-point blocks in which equal
// blocks are stored once (134 distinct blocks, 43 KB in all).
type classTable struct {
	ascii      [256]uint8 // indexed by a byte, to need no bounds check; 0 from 0x80
	blockIndex [(unicode.MaxRune + 1) >> 8]uint16
	blocks     []uint8
}

// of returns r's classes. U+FFFD stands for an invalid byte, as in the
// library's matchers, which see the text as the runes Go decodes it to.
func (t *classTable) of(r rune) uint8 {
	if r < utf8.RuneSelf {
		return t.ascii[r]
	}
	return t.blocks[int(t.blockIndex[r>>8])<<8|int(r&0xff)]
}

// newClassTable computes the classes of every code point from Go's Unicode
// tables, in a few milliseconds.
func newClassTable() *classTable {
	all := make([]uint8, unicode.MaxRune+1)
	mark := func(bit uint8, tables ...*unicode.RangeTable) {
		for _, t := range tables {
			for _, r := range t.R16 {
				for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
					all[c] |= bit
				}
			}
			for _, r := range t.R32 {
				for c := rune(r.Lo); c <= rune(r.Hi); c += rune(r.Stride) {
					all[c] |= bit
				}
			}
		}
	}
	mark(classLetter, unicode.L)
	mark(classNumber, unicode.N)
	mark(classUpper, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
	mark(classLower, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
	mark(classSpace, unicode.White_Space) // unicode.IsSpace's table above Latin-1
	for c := range rune(0x100) {
		all[c] &^= classSpace
		if unicode.IsSpace(c) {
			all[c] |= classSpace
		}
	}
	for c, cls := range all {
		if cls&(classLetter|classNumber) == 0 {
			all[c] |= classPrefix
			if cls&classSpace == 0 {
				all[c] |= classPunct
			}
		}
	}
	all['\r'] &^= classPrefix
	all['\n'] &^= classPrefix
	all[del] &^= classPrefix | classPunct

	t := &classTable{}
	copy(t.ascii[:utf8.RuneSelf], all)
	seen := make(map[[256]uint8]uint16)
	for b := range t.blockIndex {
		block := [256]uint8(all[b<<8 : (b+1)<<8])
		i, ok := seen[block]
		if !ok {
			i = uint16(len(seen))
			seen[block] = i
			t.blocks = append(t.blocks, block[:]...)
		}
		t.blockIndex[b] = i
	}
	return t
}
