package guard

import (
	"sync"
	"unicode/utf8"
)

// StreamWindow bounds what a stream keeps back for the user patterns: a
// match of a user pattern up to this many bytes long is masked whole however
// the stream is cut into deltas. A pattern with a bound on its matches (no
// *, + or open {n,} of something non-empty) needs only that bound.
const StreamWindow = 256

// streamMaxPending is how many bytes a stream holds before it gives up
// waiting for a clean place to cut (a run of digits or address characters
// this long, or one unbroken chain of matches) and cuts anyway.
const streamMaxPending = 4096

// StreamMasker masks a stream of text deltas (a response's content, delta
// by delta) so that the concatenation of what it writes is what Mask would
// make of the concatenated input, even when a match is split across deltas.
// It holds back only what the next delta could still change:
//
//   - The builtins' matches are runs of numeric bytes (digits and "-. ()+")
//     or of address bytes (letters, digits and "_.+-@"). A cut between two
//     bytes that are not both of one such group (for the groups the guard's
//     builtins use) cannot split a match, nor change where the next one
//     starts: the stream keeps back the run its buffer ends in, which in
//     prose is the last word.
//   - User patterns have no such structure: the stream keeps back the
//     longest match any of them can make plus one rune of lookahead (for \b
//     and $), at most StreamWindow + 4 bytes.
//   - It never cuts inside a match it has found, nor inside a UTF-8
//     sequence, so every write is whole runes.
//
// Within those rules the output equals Mask of the whole (searches after a
// cut read the rune before it, so \b, ^ and (?m)^ behave as in the whole
// text). The exceptions: a user pattern's match longer than StreamWindow may
// be masked in pieces or missed, and a run of builtin bytes (or one chain of
// overlapping matches) longer than 4 KiB is cut StreamWindow bytes from its
// end, so a match that long (only an address can be) may be masked in part.
//
// A StreamMasker is used by one stream at a time; Reset or Release it for
// the next one.
type StreamMasker struct {
	noCopy noCopy //nolint:unused

	g *Guard
	// buf holds the end of what was written (ctx bytes, one rune, read as
	// context by the next search) and then what is held back.
	buf   []byte
	ctx   int
	spans []span
	// forced counts the cuts made without a clean place (tests).
	forced int
}

var streamMaskerPool sync.Pool

// AcquireStreamMasker returns a StreamMasker for g from a pool; give it back
// with ReleaseStreamMasker when the stream ends.
func AcquireStreamMasker(g *Guard) *StreamMasker {
	m, _ := streamMaskerPool.Get().(*StreamMasker)
	if m == nil {
		m = &StreamMasker{}
	}
	m.g = g
	return m
}

// ReleaseStreamMasker resets m and puts it back in the pool; m must not be
// used afterwards.
func ReleaseStreamMasker(m *StreamMasker) {
	m.Reset()
	m.g = nil
	streamMaskerPool.Put(m)
}

// NewStreamMasker returns a StreamMasker for g outside the pool.
func (g *Guard) NewStreamMasker() *StreamMasker { return &StreamMasker{g: g} }

// Reset drops whatever is held back, ready for a new stream.
func (m *StreamMasker) Reset() {
	m.buf = m.buf[:0]
	m.ctx = 0
	m.spans = m.spans[:0]
	m.forced = 0
}

// Write takes the next delta and appends to dst what can be released now,
// masked (possibly nothing). chunk is copied; dst and chunk may not overlap.
func (m *StreamMasker) Write(dst, chunk []byte) []byte {
	m.buf = append(m.buf, chunk...)
	if len(m.buf) == m.ctx {
		return dst
	}
	m.spans = merge(m.g.matches(m.buf, m.ctx, m.spans[:0], false))
	c := m.cut()
	if c <= m.ctx {
		return dst
	}
	dst = m.g.appendMasked(dst, m.buf, m.ctx, c, m.spans)
	// Keep the last rune written as context for the next search.
	_, w := utf8.DecodeLastRune(m.buf[:c])
	n := copy(m.buf, m.buf[c-w:])
	m.buf = m.buf[:n]
	m.ctx = w
	return dst
}

// Flush appends everything held back, masked, to dst: the stream has ended.
// The masker is then ready for a new stream.
func (m *StreamMasker) Flush(dst []byte) []byte {
	if len(m.buf) > m.ctx {
		m.spans = merge(m.g.matches(m.buf, m.ctx, m.spans[:0], false))
		dst = m.g.appendMasked(dst, m.buf, m.ctx, len(m.buf), m.spans)
	}
	m.buf = m.buf[:0]
	m.ctx = 0
	return dst
}

// cut returns where what was written can be split: everything before it is
// released. It is m.ctx when nothing can be yet.
func (m *StreamMasker) cut() int {
	hi := len(m.buf) - m.g.hold
	if c := m.lastCut(hi, true); c > m.ctx {
		return c
	}
	if len(m.buf)-m.ctx <= streamMaxPending {
		return m.ctx
	}
	// No clean place in 4 KiB: cut StreamWindow bytes from the end, outside
	// the matches found if possible, else through one (masked up to the cut).
	m.forced++
	hi = min(hi, len(m.buf)-StreamWindow)
	if c := m.lastCut(hi, false); c > m.ctx {
		return c
	}
	for c := hi; c > m.ctx; c-- {
		if utf8.RuneStart(m.buf[c]) {
			return c
		}
	}
	return m.ctx
}

// lastCut returns the largest c in (m.ctx, hi] that is a rune boundary, not
// inside a span, and, with groups, between bytes no builtin's run joins; or
// m.ctx.
func (m *StreamMasker) lastCut(hi int, groups bool) int {
	k := len(m.spans) - 1
	for c := hi; c > m.ctx; c-- {
		for k >= 0 && m.spans[k].start >= c {
			k--
		}
		if k >= 0 && m.spans[k].end > c {
			// Inside a span (spans are disjoint: only this one can hold c).
			c = m.spans[k].start + 1
			continue
		}
		if m.boundary(c, groups) {
			return c
		}
	}
	return m.ctx
}

// boundary reports whether buf can be cut before buf[c].
func (m *StreamMasker) boundary(c int, groups bool) bool {
	buf := m.buf
	prev := buf[c-1]
	if c == len(buf) {
		// What comes next is unknown: the last rune must be whole, and the
		// last byte must end every run a builtin reads.
		i := c - 1
		for i > 0 && i > c-utf8.UTFMax && !utf8.RuneStart(buf[i]) {
			i--
		}
		if !utf8.FullRune(buf[i:]) {
			return false
		}
		return !groups || !m.joins(prev, prev)
	}
	if !utf8.RuneStart(buf[c]) {
		return false
	}
	return !groups || !m.joins(prev, buf[c])
}

// joins reports whether a and b, side by side, can be in one match of the
// guard's builtins.
func (m *StreamMasker) joins(a, b byte) bool {
	g := m.g
	return len(g.numeric) > 0 && inGroup(a, numeric) && inGroup(b, numeric) ||
		len(g.address) > 0 && inGroup(a, address) && inGroup(b, address)
}

// noCopy makes go vet's copylocks check flag copies of the struct holding
// it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}
