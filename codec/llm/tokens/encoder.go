package tokens

import (
	"math"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// encoder counts tokens in one encoding: a pre-tokenizer cuts the text into
// pieces, and each piece is one token if it is in the vocabulary, else as
// many as byte-pair merging leaves.
type encoder struct {
	vocab   *vocabulary
	classes *classTable
	o200k   bool // which pre-tokenizer: o200k_base's, else cl100k_base's
}

func newEncoder(e tokenizer.Encoding, size int) *encoder {
	c, err := tokenizer.Get(e)
	if err != nil {
		panic("tokens: " + string(e) + ": " + err.Error()) // compiled in: cannot happen
	}
	return &encoder{
		vocab:   loadVocabulary(c, size),
		classes: runeClasses(),
		o200k:   e == tokenizer.O200kBase,
	}
}

// maxText is the longest text counted: offsets into it fit in an int32.
// Longer ones are estimated: the server buffers request bodies up to a
// configured limit, 2 MiB by default, so none should come this far.
const maxText = math.MaxInt32

// count returns the number of tokens text encodes to.
func (e *encoder) count(text []byte) int {
	if len(text) > maxText {
		return EstimateWords(text)
	}
	var memo pieceMemo
	return e.countWith(&memo, text)
}

// countWith is count's loop, in a frame of its own without the memo: with
// the memo's 768 bytes in the same frame, cl100k_base counts took 1.5 times
// as long on the project's machine, the profile putting the time on
// reloading spilled variables after each call.
func (e *encoder) countWith(memo *pieceMemo, text []byte) int {
	s := splitter{text: text, classes: e.classes}
	n := 0
	for i := 0; i < len(text); {
		var end int
		var piece bool
		if e.o200k {
			end, piece = s.nextO200k(i)
		} else {
			end, piece = s.nextCl100k(i)
		}
		if s.invalid {
			// The pieces before i were counted right, as no earlier
			// match looked at an invalid byte, and a match depends on
			// the text from its start only: count the rest as the
			// library reads it.
			return n + e.countReplaced(text[i:])
		}
		if piece {
			n += e.countPiece(memo, text, i, end)
		}
		i = end
	}
	return n
}

// countPiece returns the number of tokens text[start:end] encodes to.
func (e *encoder) countPiece(memo *pieceMemo, text []byte, start, end int) int {
	piece := text[start:end]
	switch {
	case len(piece) > 2:
		if e.vocab.longer.rank(piece) != noRank {
			return 1
		}
		return memo.count(e.vocab, text, start, end)
	case len(piece) == 1 || e.vocab.pairRank[int(piece[0])<<8|int(piece[1])] != noRank:
		return 1
	}
	return 2
}

// countReplaced counts text with each invalid UTF-8 byte replaced by
// U+FFFD, which is how the library's matcher, working on Go runes, sees and
// returns it. The copy, pooled, takes up to three times text's length.
func (e *encoder) countReplaced(text []byte) int {
	buf := replacedPool.Get().(*[]byte)
	b := (*buf)[:0]
	for i := 0; i < len(text); {
		r, w := utf8.DecodeRune(text[i:])
		if r == utf8.RuneError && w == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, text[i:i+w]...)
		}
		i += w
	}
	n := e.count(b)
	if cap(b) <= maxPooledScratch {
		*buf = b
		replacedPool.Put(buf)
	}
	return n
}

var replacedPool = sync.Pool{New: func() any { return new([]byte) }}
