package llm

import (
	"encoding/binary"
	"errors"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/bytedance/sonic/decoder"
)

// Raw is a JSON value kept as its encoded text. A Raw set by a Decoder
// aliases the decoded body. Empty means the member was absent; "null" is
// kept as it came (see Present).
type Raw []byte

// UnmarshalJSON keeps data without copying it.
func (r *Raw) UnmarshalJSON(data []byte) error {
	*r = data
	return nil
}

// MarshalJSON returns r, or null when r is empty.
func (r Raw) MarshalJSON() ([]byte, error) {
	if len(r) == 0 {
		return []byte("null"), nil
	}
	return r, nil
}

// Present reports a member that was given a value other than null.
func (r Raw) Present() bool {
	return len(r) > 0 && !(len(r) == 4 && string(r) == "null")
}

// IsString reports a JSON string.
func (r Raw) IsString() bool { return len(r) >= 2 && r[0] == '"' }

// IsArray reports a JSON array.
func (r Raw) IsArray() bool { return len(r) > 0 && r[0] == '[' }

// IsObject reports a JSON object.
func (r Raw) IsObject() bool { return len(r) > 0 && r[0] == '{' }

// Inner is the escaped content of a JSON string token: r without its quotes
// (nil when r is not a string). The inner texts of two tokens concatenate to
// the inner text of their concatenation.
func (r Raw) Inner() []byte {
	if !r.IsString() {
		return nil
	}
	return r[1 : len(r)-1]
}

// Blank reports a string token holding only spaces, tabs and line breaks
// (escaped or not), or an empty one.
func (r Raw) Blank() bool {
	in := r.Inner()
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case ' ', '\t', '\n', '\r':
		case '\\':
			if i+1 < len(in) && (in[i+1] == 'n' || in[i+1] == 't' || in[i+1] == 'r') {
				i++
				continue
			}
			return false
		default:
			return false
		}
	}
	return true
}

// decoderOptions: names match case-sensitively (the formats are
// case-sensitive and the match is faster), strings alias the input, and
// strings are validated (raw control characters refused, invalid UTF-8
// replaced on a copy). Sonic's validation misses some invalid escapes in
// values it skips or keeps raw, so Decode runs Valid first.
const decoderOptions = decoder.OptionCaseSensitive | decoder.OptionValidateString

// ErrEmpty is returned for an empty body.
var ErrEmpty = errors.New("llm: empty body")

// Decoder decodes JSON into the types of this package with a fixed option
// set (see the package comment). The zero Decoder is ready; reusing one
// avoids an allocation per Decode. It is not safe for concurrent use.
type Decoder struct {
	d *decoder.Decoder
}

// Decode decodes data, one JSON value with nothing after it, into v (a
// pointer). Strings and Raw values in v alias data. data is checked with
// Valid first: sonic checks what it decodes but not the escapes of every
// value it skips or keeps raw (it lets "\0" through), and a Raw must be
// JSON that can be copied into another body as it is.
func (d *Decoder) Decode(data []byte, v any) error {
	if len(data) == 0 {
		return ErrEmpty
	}
	if !Valid(data) {
		return ErrSyntax
	}
	return d.DecodeTrusted(data, v)
}

// DecodeTrusted is Decode without the validation, for data already
// validated: a Raw out of a Decode.
func (d *Decoder) DecodeTrusted(data []byte, v any) error {
	if len(data) == 0 {
		return ErrEmpty
	}
	if d.d == nil {
		d.d = decoder.NewDecoder("")
		d.d.SetOptions(decoderOptions)
	}
	d.d.Reset(unsafe.String(&data[0], len(data)))
	if err := d.d.Decode(v); err != nil {
		return err
	}
	return d.d.CheckTrailings()
}

var decoders = sync.Pool{New: func() any { return new(Decoder) }}

// Unmarshal decodes data into v with a pooled Decoder.
func Unmarshal(data []byte, v any) error {
	d := decoders.Get().(*Decoder)
	err := d.Decode(data, v)
	decoders.Put(d)
	return err
}

// Pretouch compiles the decoders of the wire types ahead of their first use,
// so the first request does not pay for sonic's JIT (milliseconds per type).
func Pretouch() {
	for _, v := range []any{
		&ChatRequest{}, &ChatResponse{}, &ChatChunk{}, &ChatContentPart{}, &ErrorBody{},
		&AnthropicRequest{}, &AnthropicResponse{}, &AnthropicStreamEvent{}, &AnthropicBlock{}, &AnthropicErrorBody{},
		&ResponsesRequest{}, &ResponsesResponse{}, &ResponsesStreamEvent{}, &ResponsesItem{}, &ResponsesContent{},
		&GeminiRequest{}, &GeminiResponse{}, &GeminiErrorBody{},
		&BedrockRequest{}, &BedrockResponse{}, &BedrockStreamEvent{}, &BedrockErrorBody{},
	} {
		var d Decoder
		_ = d.Decode([]byte("{}"), v)
	}
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string token. Invalid UTF-8 becomes
// U+FFFD; control characters, quote and backslash are escaped, and so are
// U+2028 and U+2029 (which some JavaScript readers take for line ends).
func AppendString[T ~string | ~[]byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// AppendQuoted is AppendString for a byte slice (often a JSON value that
// becomes the text of a string, as a tool call's arguments do).
func AppendQuoted(dst, b []byte) []byte { return AppendString(dst, b) }

func appendEscaped[T ~string | ~[]byte](dst []byte, s T) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Runs of bytes that need no look go a word at a time (a prompt
		// is mostly such a run).
		i = skipPlain(s, i)
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// skipPlain returns the index of the first word at or after i holding a
// byte appendEscaped must look at, or the start of the bytes after the
// last whole word. A function of its own, so that its loop keeps its few
// values in registers.
//
//go:noinline
func skipPlain[T ~string | ~[]byte](s T, i int) int {
	for i+16 <= len(s) && plainWord(load64(s, i)) && plainWord(load64(s, i+8)) {
		i += 16
	}
	for i+8 <= len(s) && plainWord(load64(s, i)) {
		i += 8
	}
	return i
}

// plainWord reports whether none of the eight bytes of x needs a look
// from appendEscaped: no byte skipString stops at (specialMask) and no
// non-ASCII byte.
func plainWord(x uint64) bool { return (specialMask(x)|x)&highs == 0 }

// load64 reads s[i:i+8] as a little-endian word. For a byte slice the
// conversion is free; a string's eight bytes are copied on the stack.
func load64[T ~string | ~[]byte](s T, i int) uint64 {
	return binary.LittleEndian.Uint64([]byte(s[i : i+8]))
}

func decodeRune[T ~string | ~[]byte](s T) (rune, int) {
	// At most 4 bytes: a non-escaping conversion of that size does not allocate.
	return utf8.DecodeRuneInString(string(s[:min(len(s), utf8.UTFMax)]))
}

// ErrNotString is returned by AppendUnquoted for a token that is not a JSON
// string.
var ErrNotString = errors.New("llm: not a JSON string")

// AppendUnquoted appends the text of the JSON string token tok (quotes
// removed, escapes decoded; an unpaired surrogate becomes U+FFFD).
func AppendUnquoted(dst []byte, tok []byte) ([]byte, error) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return dst, ErrNotString
	}
	in := tok[1 : len(tok)-1]
	for i := 0; i < len(in); {
		c := in[i]
		if c != '\\' {
			j := i + 1
			for j < len(in) && in[j] != '\\' {
				j++
			}
			dst = append(dst, in[i:j]...)
			i = j
			continue
		}
		r, next, ok := UnescapeAt(in, i)
		if !ok {
			return dst, ErrNotString
		}
		dst = utf8.AppendRune(dst, r)
		i = next
	}
	return dst, nil
}

// UnescapeAt decodes the escape sequence that starts at in[i] (a
// backslash) in the contents of a JSON string: the character, and the
// index after the sequence. A \u escape of an unpaired surrogate is U+FFFD,
// as a decoder makes of it, and takes its own six bytes. ok is false for an
// escape JSON does not have, or one cut short (r is then U+FFFD and next
// i+2, or the end of in).
func UnescapeAt(in []byte, i int) (r rune, next int, ok bool) {
	if i+1 >= len(in) {
		return utf8.RuneError, len(in), false
	}
	switch e := in[i+1]; e {
	case '"', '\\', '/':
		return rune(e), i + 2, true
	case 'b':
		return '\b', i + 2, true
	case 'f':
		return '\f', i + 2, true
	case 'n':
		return '\n', i + 2, true
	case 'r':
		return '\r', i + 2, true
	case 't':
		return '\t', i + 2, true
	case 'u':
		r, ok := Hex4(in[i+2:])
		if !ok {
			return utf8.RuneError, i + 2, false
		}
		i += 6
		if utf16.IsSurrogate(r) {
			if i+6 <= len(in) && in[i] == '\\' && in[i+1] == 'u' {
				if r2, ok := Hex4(in[i+2:]); ok {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						return d, i + 6, true
					}
				}
			}
			return utf8.RuneError, i, true
		}
		return r, i, true
	}
	return utf8.RuneError, i + 2, false
}

// Hex4 reads the four hex digits b opens with (a \u escape's), and
// whether they are four hex digits.
func Hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// Text returns the text of the string token tok: tok's inner bytes when it
// has no escape (no copy), else its decoded text appended to scratch.
func Text(scratch []byte, tok Raw) ([]byte, error) {
	in := tok.Inner()
	if in == nil {
		return nil, ErrNotString
	}
	for _, c := range in {
		if c == '\\' {
			return AppendUnquoted(scratch, tok)
		}
	}
	return in, nil
}
