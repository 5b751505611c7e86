package tokens

// pieceMemo remembers, for one count, how many tokens the pieces that had to
// be merged came to, so that a piece that recurs in a prompt (an identifier
// in code, a name in a chat history) is merged once. An entry points at the
// piece's earlier occurrence in the text, and a hit is checked byte for
// byte: the memo saves work, it never changes a count. It lives on the
// stack of one count, so it needs no locking and holds no text after it.
type pieceMemo [memoSlots]memoEntry

// memoSlots is the number of pieces remembered: a direct-mapped table, in
// which a piece replaces the one whose slot it shares.
const (
	memoBits  = 6
	memoSlots = 1 << memoBits
)

// memoEntry is text[start:end], which merges into tokens tokens; end == 0
// marks an empty slot. Texts are shorter than 2 GiB (see maxText).
type memoEntry struct {
	start, end, tokens int32
}

// count returns the number of tokens that text[start:end], which is no
// token and at least three bytes long, merges into.
func (m *pieceMemo) count(v *vocabulary, text []byte, start, end int) int {
	piece := text[start:end]
	e := &m[memoSlot(piece)]
	if e.end != 0 && int(e.end-e.start) == len(piece) && string(text[e.start:e.end]) == string(piece) {
		return int(e.tokens)
	}
	n := v.mergeCount(piece)
	*e = memoEntry{start: int32(start), end: int32(end), tokens: int32(n)}
	return n
}

// memoSlot hashes the length and first eight bytes of piece.
func memoSlot(piece []byte) int {
	h := packShort(piece[:min(len(piece), 8)]) ^ uint64(len(piece))<<56
	return int(h * hashM1 >> (64 - memoBits))
}
