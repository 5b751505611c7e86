package convert

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/relaygate/gateway/backend/llm/guard"
	"github.com/relaygate/gateway/codec/llm"
)

// Masking a tool call's arguments: a JSON text (Anthropic's input object,
// or the text of OpenAI's arguments string), whole or in pieces as a stream
// sends them, cut anywhere (inside a string, an escape, a UTF-8 sequence).
//
// Only the text of the JSON's strings is masked (keys and values alike):
// each string is decoded (escapes and all), passed through a
// guard.StreamMasker as one text, and its masked text escaped again, so a
// match split across pieces is masked whole and the result stays JSON,
// whatever a label or a match holds. Every byte outside strings goes on as
// it came; a number is not a string and is not masked. A string whose
// escapes are decoded and escaped again may differ in its escapes from the
// provider's (a \u0041 becomes A, a lone surrogate U+FFFD), never in what
// it decodes to, masks aside.

// jsonMask is the state of one JSON text's masking between pieces.
type jsonMask struct {
	in  bool // inside a string
	esc [6]byte
	// nesc counts esc's bytes: an escape sequence begun and not yet whole.
	nesc int
	// hi is a \u escape's high surrogate waiting for its low half (0: none).
	hi rune
}

// jsonScratch is what jsonMask's calls write through: the masker of the
// string under way and scratch for its output.
type jsonScratch struct {
	m   *guard.StreamMasker
	out *[]byte
}

// write appends piece, a piece of a JSON text, to dst with what the masker
// releases of its strings' text.
func (j *jsonMask) write(dst []byte, sc jsonScratch, piece []byte) []byte {
	for len(piece) > 0 {
		if !j.in {
			i := bytes.IndexByte(piece, '"')
			if i < 0 {
				return append(dst, piece...)
			}
			dst = append(dst, piece[:i+1]...)
			piece = piece[i+1:]
			j.in = true
			continue
		}
		if j.nesc > 0 {
			next := piece[0]
			if j.nesc > 1 {
				next = j.esc[1]
			}
			need := 2
			if next == 'u' {
				need = 6
			}
			n := copy(j.esc[j.nesc:need], piece)
			j.nesc += n
			piece = piece[n:]
			if j.nesc < need {
				return dst
			}
			dst = j.escape(dst, sc)
			continue
		}
		i := indexQuoteOrBackslash(piece)
		if i < 0 {
			i = len(piece)
		}
		if i > 0 {
			dst = j.text(dst, sc, piece[:i])
		}
		if i == len(piece) {
			return dst
		}
		if piece[i] == '\\' {
			j.esc[0], j.nesc = '\\', 1
			piece = piece[i+1:]
			continue
		}
		dst = j.endString(dst, sc)
		dst = append(dst, '"')
		j.in = false
		piece = piece[i+1:]
	}
	return dst
}

// escape decodes the whole escape sequence in j.esc and feeds its character.
func (j *jsonMask) escape(dst []byte, sc jsonScratch) []byte {
	seq := j.esc[:j.nesc]
	j.nesc = 0
	r, _, ok := llm.UnescapeAt(seq, 0)
	if seq[1] == 'u' && len(seq) == 6 {
		if h, hexOK := llm.Hex4(seq[2:]); hexOK {
			r, ok = h, true
		}
	}
	if !ok {
		// Not JSON's: its bytes go on as text (escaped again).
		return j.text(dst, sc, seq)
	}
	if j.hi != 0 {
		hi := j.hi
		j.hi = 0
		if utf16.IsSurrogate(r) {
			if d := utf16.DecodeRune(hi, r); d != utf8.RuneError {
				return j.rune(dst, sc, d)
			}
		}
		dst = j.rune(dst, sc, utf8.RuneError)
	}
	if r >= 0xd800 && r < 0xdc00 {
		j.hi = r
		return dst
	}
	if utf16.IsSurrogate(r) {
		r = utf8.RuneError
	}
	return j.rune(dst, sc, r)
}

func (j *jsonMask) rune(dst []byte, sc jsonScratch, r rune) []byte {
	var b [utf8.UTFMax]byte
	return j.feed(dst, sc, utf8.AppendRune(b[:0], r))
}

// text feeds plain text of the string under way.
func (j *jsonMask) text(dst []byte, sc jsonScratch, plain []byte) []byte {
	if j.hi != 0 {
		j.hi = 0
		dst = j.rune(dst, sc, utf8.RuneError)
	}
	return j.feed(dst, sc, plain)
}

func (j *jsonMask) feed(dst []byte, sc jsonScratch, plain []byte) []byte {
	*sc.out = sc.m.Write((*sc.out)[:0], plain)
	return appendEscapedText(dst, *sc.out)
}

// endString flushes the string under way (its closing quote is next).
func (j *jsonMask) endString(dst []byte, sc jsonScratch) []byte {
	if j.hi != 0 {
		j.hi = 0
		dst = j.rune(dst, sc, utf8.RuneError)
	}
	*sc.out = sc.m.Flush((*sc.out)[:0])
	return appendEscapedText(dst, *sc.out)
}

// finish ends the JSON text: a string left open (the provider's text was
// cut) has what was held back written, and an escape begun its bytes.
func (j *jsonMask) finish(dst []byte, sc jsonScratch) []byte {
	if j.in {
		dst = j.endString(dst, sc)
		dst = append(dst, j.esc[:j.nesc]...)
	}
	*j = jsonMask{}
	return dst
}

func indexQuoteOrBackslash(b []byte) int {
	for i, c := range b {
		if c == '"' || c == '\\' {
			return i
		}
	}
	return -1
}

// maskJSON appends the JSON text doc, its strings masked, to dst; it
// reports false (dst unchanged) when nothing was masked.
func (m *answerMask) maskJSON(dst, doc []byte) ([]byte, bool) {
	if m.g == nil {
		return dst, false
	}
	sm := guard.AcquireStreamMasker(m.g)
	defer guard.ReleaseStreamMasker(sm)
	var j jsonMask
	sc := jsonScratch{m: sm, out: &m.masked}
	start := len(dst)
	dst = j.write(dst, sc, doc)
	dst = j.finish(dst, sc)
	if bytes.Equal(dst[start:], doc) {
		return dst[:start], false
	}
	return dst, true
}

// argsToken returns the tool call arguments token tok (a string token
// whose text is JSON) with its strings masked, appended to dst; false when
// nothing was masked.
func (m *answerMask) argsToken(dst []byte, tok llm.Raw) ([]byte, bool) {
	if m.g == nil || !tok.IsString() || len(tok) == 2 {
		return dst, false
	}
	var err error
	if m.plain, err = llm.AppendUnquoted(m.plain[:0], tok); err != nil {
		return dst, false
	}
	masked, ok := m.maskJSON(m.concat[:0], m.plain)
	if !ok {
		return dst, false
	}
	m.concat = masked
	return llm.AppendString(dst, masked), true
}
