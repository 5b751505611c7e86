package llm

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// skipStringRef is the eight-bytes-at-a-time skipString that the
// vectorised one replaced: FuzzSkipString holds them to the same answers.
func skipStringRef(d []byte, i int) (int, bool) {
	if i >= len(d) || d[i] != '"' {
		return i, false
	}
	for i++; i < len(d); i++ {
		// Eight plain bytes at a time: none below 0x20, no quote, no
		// backslash (bytes of multi-byte UTF-8 are all >= 0x80).
		// The lowest flagged byte is exact (a false flag can only follow a
		// true one, through a borrow), so jump straight to it.
		for i+8 <= len(d) {
			w := binary.LittleEndian.Uint64(d[i:])
			q, b := w^(lows*'"'), w^(lows*'\\')
			if m := ((w-lows*0x20)&^w | (q-lows)&^q | (b-lows)&^b) & highs; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(d) {
			break
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i >= len(d) {
				return i, false
			}
			switch d[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if _, ok := Hex4(d[i+1:]); !ok {
					return i, false
				}
				i += 4
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		}
	}
	return i, false
}

// FuzzSkipString: the string skipper that searches with IndexByte answers
// what the byte-at-a-time one did, from every quote of the input.
func FuzzSkipString(f *testing.F) {
	for _, s := range []string{
		`"plain"`, `"a\"b" tail`, `"\\"`, `"\u00e9\n\t"`, `"\u12"`, `"\x"`, "\"a\x01b\"", `"unterminated`,
		`"` + "0123456789abcdef0123456789abcdef" + `\"` + "0123456789abcdef" + `"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		for i := range d {
			if d[i] != '"' {
				continue
			}
			gotEnd, gotOK := skipString(d, i)
			wantEnd, wantOK := skipStringRef(d, i)
			if gotOK != wantOK || gotOK && gotEnd != wantEnd {
				t.Fatalf("skipString(%q, %d) = %d, %v; reference %d, %v", d, i, gotEnd, gotOK, wantEnd, wantOK)
			}
		}
	})
}
