package tokens

import "unicode/utf8"

// The pre-tokenizers below cut text into the pieces that BPE then merges
// within, exactly where the library's split patterns cut it. The patterns
// are (tiktoken's, as the library compiles them):
//
//	o200k_base:  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	            |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	            |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//	cl100k_base: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//	            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// matched leftmost-first with backtracking, by matchers regexp2cg generated
// for regexp2, scanning on from the end of each match. Each
// alternative becomes a function that returns where its match ends, trying
// the choices a backtracking matcher would try, in its order, without going
// back over the text. Two behaviours of the generated matcher differ from the
// patterns as written, and are kept because the counts must be the
// library's:
//   - \s*[\r\n]+ backtracks to the first line break of the white-space run,
//     not the last ("\n \n" is two pieces, not one);
//   - DEL (U+007F) matches nothing and is skipped (see del).
//
// And (?i:'s) also takes "'ſ" (U+017F, long s), which folds to s.
//
// Invalid UTF-8 is matched as the library matches it, one U+FFFD per
// invalid byte; the splitter flags it so that the counter can re-encode the
// text that way before merging pieces, since U+FFFD's bytes then merge.

// splitter walks text. Positions are byte offsets at rune boundaries.
type splitter struct {
	text    []byte
	classes *classTable
	invalid bool // an invalid UTF-8 byte was seen
}

// at returns the classes and width of the rune at i < len(s.text).
func (s *splitter) at(i int) (uint8, int) {
	if c := s.text[i]; c < utf8.RuneSelf {
		return s.classes.ascii[c], 1
	}
	return s.atMultiByte(i)
}

// atMultiByte is at for a rune that is not ASCII. Two- and three-byte
// sequences (Latin, Greek, Cyrillic, CJK...) are decoded here, the rest by
// utf8.DecodeRune, which also decides what is invalid.
func (s *splitter) atMultiByte(i int) (uint8, int) {
	t := s.text
	switch c := t[i]; {
	case c >= 0xc2 && c < 0xe0 && i+1 < len(t) && t[i+1]&0xc0 == 0x80:
		return s.classes.of(rune(c&0x1f)<<6 | rune(t[i+1]&0x3f)), 2
	case c >= 0xe0 && c < 0xf0 && i+2 < len(t) && t[i+1]&0xc0 == 0x80 && t[i+2]&0xc0 == 0x80:
		r := rune(c&0x0f)<<12 | rune(t[i+1]&0x3f)<<6 | rune(t[i+2]&0x3f)
		if r >= 0x800 && (r < 0xd800 || r > 0xdfff) { // not overlong, not a surrogate
			return s.classes.of(r), 3
		}
	}
	r, w := utf8.DecodeRune(t[i:])
	if w == 1 {
		s.invalid = true // r is utf8.RuneError, as the library sees it
	}
	return s.classes.of(r), w
}

// is reports whether the rune at i exists and has one of the classes.
func (s *splitter) is(i int, classes uint8) bool {
	if i >= len(s.text) {
		return false
	}
	c, _ := s.at(i)
	return c&classes != 0
}

// run returns the end of the run of runes from i that have one of classes.
// ASCII is tested in the loop, without a call: most text is ASCII.
func (s *splitter) run(i int, classes uint8) int {
	t, ascii := s.text, &s.classes.ascii
	for i < len(t) {
		if c := t[i]; c < utf8.RuneSelf {
			if ascii[c]&classes == 0 {
				return i
			}
			i++
			continue
		}
		c, w := s.atMultiByte(i)
		if c&classes == 0 {
			return i
		}
		i += w
	}
	return i
}

// nextO200k returns the end of the piece that starts at i < len(s.text), or
// false and the end of the rune at i if no alternative matches there.
func (s *splitter) nextO200k(i int) (int, bool) {
	if e, ok := s.asciiWordAt(i); ok {
		return e, true
	}
	c0, w0 := s.at(i)
	// The word alternatives need an Upper or Lower rune at i, or after the
	// optional prefix rune.
	const wordStart = classUpper | classLower
	if c0&wordStart != 0 || c0&classPrefix != 0 && s.is(i+w0, wordStart) {
		if e, ok := s.o200kWord(i, c0, w0); ok {
			return e, true
		}
	}
	if e, ok := s.anyOther(i, c0, w0, true); ok {
		return e, true
	}
	return i + w0, false
}

// o200kWord matches o200k's two word alternatives at i, each first with the
// optional prefix rune taken, then without it.
func (s *splitter) o200kWord(i int, c0 uint8, w0 int) (int, bool) {
	prefixed := i
	if c0&classPrefix != 0 {
		prefixed = i + w0
	}
	if prefixed > i {
		if e, ok := s.lowerEnding(prefixed); ok {
			return e, true
		}
	}
	if e, ok := s.lowerEnding(i); ok {
		return e, true
	}
	if prefixed > i {
		if e, ok := s.upperLed(prefixed); ok {
			return e, true
		}
	}
	return s.upperLed(i)
}

// asciiWordAt is nextO200k's shortcut for the common case, a word of ASCII
// letters after an optional ASCII prefix, followed by ASCII or the end: what
// the first word alternative matches then is [prefix]?[A-Z]*[a-z]+, in one
// pass. It declines anything else, which the general path then matches.
func (s *splitter) asciiWordAt(i int) (int, bool) {
	t := s.text
	if c := t[i]; c >= utf8.RuneSelf {
		return 0, false
	} else if s.classes.ascii[c]&classPrefix != 0 {
		i++
	}
	upperEnd := i
	for upperEnd < len(t) && t[upperEnd]-'A' < 26 {
		upperEnd++
	}
	e := upperEnd
	for e < len(t) && t[e]-'a' < 26 {
		e++
	}
	if e == upperEnd || e < len(t) && t[e] >= utf8.RuneSelf {
		return 0, false
	}
	return s.contraction(e), true
}

// lowerEnding matches [Upper]*[Lower]+contraction? at i. Upper and Lower
// overlap (Lm, Lo, M): the greedy [Upper]* gives back runes until a Lower one
// can start [Lower]+, so that one starts at the last Lower rune of the Upper
// run, or just after the run.
func (s *splitter) lowerEnding(i int) (int, bool) {
	lastLower := -1
	var after uint8 // the classes of the rune after the run, none at the end
	for i < len(s.text) {
		c, w := s.at(i)
		if c&classUpper == 0 {
			after = c
			break
		}
		if c&classLower != 0 {
			lastLower = i
		}
		i += w
	}
	start := i
	if after&classLower == 0 {
		if lastLower < 0 {
			return 0, false
		}
		start = lastLower
	}
	return s.contraction(s.run(start, classLower)), true
}

// upperLed matches [Upper]+[Lower]*contraction? at i.
func (s *splitter) upperLed(i int) (int, bool) {
	e := s.run(i, classUpper)
	if e == i {
		return 0, false
	}
	return s.contraction(s.run(e, classLower)), true
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or i.
// Case-insensitive means ASCII case here and, as .NET folds it, ſ for s.
func (s *splitter) contraction(i int) int {
	if i+1 >= len(s.text) || s.text[i] != '\'' {
		return i
	}
	return s.contractionAfterQuote(i)
}

func (s *splitter) contractionAfterQuote(i int) int {
	t := s.text
	switch t[i+1] {
	case 's', 'S', 't', 'T', 'm', 'M', 'd', 'D':
		return i + 2
	case 'r', 'R', 'v', 'V':
		if i+2 < len(t) && t[i+2]|0x20 == 'e' {
			return i + 3
		}
	case 'l', 'L':
		if i+2 < len(t) && t[i+2]|0x20 == 'l' {
			return i + 3
		}
	case 0xc5: // ſ is C5 BF
		if i+2 < len(t) && t[i+2] == 0xbf {
			return i + 3
		}
	}
	return i
}

// nextCl100k is nextO200k for cl100k_base.
func (s *splitter) nextCl100k(i int) (int, bool) {
	if e := s.contraction(i); e > i {
		return e, true
	}
	c0, w0 := s.at(i)
	if c0&classPrefix != 0 {
		if e := s.run(i+w0, classLetter); e > i+w0 {
			return e, true
		}
	}
	if c0&classLetter != 0 {
		return s.run(i, classLetter), true
	}
	if e, ok := s.anyOther(i, c0, w0, false); ok {
		return e, true
	}
	return i + w0, false
}

// anyOther matches the alternatives both patterns end with, c0 and w0
// being the classes and width of the rune at i:
// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+, where o200k_base
// (slashes) also lets '/' follow the punctuation: [\r\n/]*.
func (s *splitter) anyOther(i int, c0 uint8, w0 int, slashes bool) (int, bool) {
	if c0&classNumber != 0 {
		e := i + w0
		for range 2 {
			if e == len(s.text) {
				break
			}
			c, w := s.at(e)
			if c&classNumber == 0 {
				break
			}
			e += w
		}
		return e, true
	}
	if e, ok := s.punctuation(i, c0, slashes); ok {
		return e, true
	}
	if c0&classSpace != 0 {
		return s.whiteSpace(i), true
	}
	return 0, false
}

// punctuation matches ` ?[^\s\p{L}\p{N}]+[\r\n]*`, or [\r\n/]* at the end
// with slashes, at i.
func (s *splitter) punctuation(i int, c0 uint8, slashes bool) (int, bool) {
	start := i
	if s.text[i] == ' ' {
		start++
	} else if c0&classPunct == 0 {
		return 0, false
	}
	e := s.run(start, classPunct)
	if e == start {
		return 0, false
	}
	t := s.text
	for e < len(t) && (t[e] == '\r' || t[e] == '\n' || slashes && t[e] == '/') {
		e++
	}
	return e, true
}

// whiteSpace matches \s*[\r\n]+|\s+(?!\S)|\s+ at i, where a white-space run
// starts: up to the end of the first line-break run if the white space has
// a line break, else all of it at the end of the text, else all but its last
// rune (which then leads the next piece, " word"), else its only rune.
func (s *splitter) whiteSpace(i int) int {
	t := s.text
	firstBreak, lastRune := -1, i
	e := i
	for e < len(t) {
		c, w := s.at(e)
		if c&classSpace == 0 {
			break
		}
		if firstBreak < 0 && (t[e] == '\r' || t[e] == '\n') {
			firstBreak = e
		}
		lastRune = e
		e += w
	}
	switch {
	case firstBreak >= 0:
		e = firstBreak
		for e < len(t) && (t[e] == '\r' || t[e] == '\n') {
			e++
		}
		return e
	case e == len(t) || lastRune == i:
		return e
	default:
		return lastRune
	}
}
