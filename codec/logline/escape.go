package logline

import "unicode/utf8"

// plainByte marks the bytes a JSON string holds as they are: ASCII but
// the control characters, '"' and '\\'. (zap escapes nothing else: not
// '<', '>', '&', DEL, U+2028 or U+2029.) Bytes from 0x80 up need a look:
// they are copied when part of a well-formed UTF-8 sequence.
var plainByte = func() (plain [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		plain[c] = c != '"' && c != '\\'
	}
	return plain
}()

const hexDigits = "0123456789abcdef"

// appendEscaped appends s escaped for a JSON string as zap escapes it:
// '"' and '\\' with a backslash; '\n', '\r' and '\t' as such; other control
// characters as \u00XX in lowercase hex; each byte that does not start a
// well-formed UTF-8 sequence as \ufffd, on its own (the bytes after it are
// looked at again). Everything else is copied.
func appendEscaped[S string | []byte](bs []byte, s S) []byte {
	if plainString(s) {
		return append(bs, s...)
	}
	copied, i := 0, 0
	for i < len(s) {
		// Skip plain bytes: eight at a time, then one at a time up to the
		// byte of the next eight that needs a look, or the end.
		for i+8 <= len(s) && plainWord(load64(s, i)) {
			i += 8
		}
		for end := min(i+8, len(s)); i < end && plainByte[s[i]]; {
			i++
		}
		if i == len(s) || plainByte[s[i]] {
			continue
		}
		c := s[i]
		if c >= utf8.RuneSelf {
			if n := wellFormedLen(s[i:]); n > 0 {
				i += n
				continue
			}
		}
		bs = append(bs, s[copied:i]...)
		bs = appendEscapedByte(bs, c)
		i++
		copied = i
	}
	return append(bs, s[copied:]...)
}

// appendEscapedByte appends the escape of c, a byte appendEscaped does not
// copy.
func appendEscapedByte(bs []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(bs, '\\', c)
	case '\n':
		return append(bs, '\\', 'n')
	case '\r':
		return append(bs, '\\', 'r')
	case '\t':
		return append(bs, '\\', 't')
	}
	if c >= utf8.RuneSelf {
		return append(bs, `\ufffd`...)
	}
	return append(bs, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// wellFormedLen returns the length of the well-formed UTF-8 sequence s
// starts with (its first byte is not ASCII), or 0 when it starts with none:
// a stray continuation byte, a lead byte that is never valid (C0, C1,
// F5–FF), an overlong form, a surrogate, a code point above U+10FFFF or a
// sequence cut short. These are the sequences utf8.DecodeRune accepts
// (Unicode's table 3-7).
func wellFormedLen[S string | []byte](s S) int {
	lead := s[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF) // the range of the second byte
	switch {
	case lead < 0xC2 || lead > 0xF4:
		return 0
	case lead < 0xE0:
		n = 2
	case lead < 0xF0:
		n = 3
		if lead == 0xE0 {
			lo = 0xA0 // below: overlong
		} else if lead == 0xED {
			hi = 0x9F // above: surrogates
		}
	default:
		n = 4
		if lead == 0xF0 {
			lo = 0x90 // below: overlong
		} else if lead == 0xF4 {
			hi = 0x8F // above: beyond U+10FFFF
		}
	}
	if len(s) < n || s[1] < lo || s[1] > hi {
		return 0
	}
	for j := 2; j < n; j++ {
		if s[j] < 0x80 || s[j] > 0xBF {
			return 0
		}
	}
	return n
}

// Bytes repeated through a word, for plainWord.
const (
	eachByte = 0x0101010101010101
	highBits = 0x8080808080808080
)

// plainWord reports whether none of the eight bytes of x needs a look:
// no control character, '"', '\\' or non-ASCII byte. A byte below n is
// found by (x - n·eachByte) &^ x: its high bit is set by the borrow; the
// test is exact for "any byte" (a borrow can only mark bytes above one
// that matched), and a byte equal to c is a zero byte of x ^ c·eachByte.
func plainWord(x uint64) bool {
	quote := x ^ '"'*eachByte
	backslash := x ^ '\\'*eachByte
	control := (x - 0x20*eachByte) &^ x
	return (control|(quote-eachByte)&^quote|(backslash-eachByte)&^backslash|x)&highBits == 0
}

// plainString reports whether every byte of s is plain (plainByte): a
// word at a time, the bytes after the last whole word in the word that ends
// the string (its first bytes were found plain already); a string shorter
// than a word byte by byte.
func plainString[S string | []byte](s S) bool {
	n := len(s)
	if n < 8 {
		for i := range n {
			if !plainByte[s[i]] {
				return false
			}
		}
		return true
	}
	for i := 0; i+8 <= n; i += 8 {
		if !plainWord(load64(s, i)) {
			return false
		}
	}
	return n%8 == 0 || plainWord(load64(s, n-8))
}

// load64 reads s[i:i+8] as a little-endian word (one load: the compiler
// combines the bytes).
func load64[S string | []byte](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
