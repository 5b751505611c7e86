package tokens

import (
	"encoding/binary"
	"math"

	"github.com/tiktoken-go/tokenizer"
)

// noRank marks bytes that are no token.
const noRank = math.MaxUint32

// vocabulary maps a token's bytes to its rank, which in tiktoken's
// encodings is also its id: the lower the rank, the earlier BPE merges it.
// Every single byte is a token, and counting needs no rank for one. Two-byte
// tokens, which every merge starts from, are looked up in a table indexed by
// the two bytes (256 KB); longer ones in a hash table.
type vocabulary struct {
	pairRank [1 << 16]uint32
	longer   tokenTable
	tokens   int // how many were loaded
}

// Sizes of the vocabularies, without special tokens: their ids run from 0
// to size-1 (TestVocabularies checks it against the library).
const (
	o200kSize  = 199998
	cl100kSize = 100256
)

// loadVocabulary reads a vocabulary out of the library's compiled-in
// encoding. The library keeps its rank map unexported, but its Decode, in
// the default error mode, returns any token's bytes as they are: decoding
// each id in turn rebuilds the map without copying the library's data into
// this repository.
func loadVocabulary(c tokenizer.Codec, size int) *vocabulary {
	v := &vocabulary{}
	for i := range v.pairRank {
		v.pairRank[i] = noRank
	}
	longer := make([]string, size) // by rank
	id := []uint{0}
	for rank := range size {
		id[0] = uint(rank)
		token, err := c.Decode(id)
		if err != nil {
			continue // no token has this id
		}
		v.tokens++
		switch {
		case len(token) == 2:
			v.pairRank[int(token[0])<<8|int(token[1])] = uint32(rank)
		case len(token) > 2:
			longer[rank] = token
		}
	}
	v.longer = newTokenTable(longer)
	return v
}

// tokenTable is an open-addressing hash table from tokens of three bytes
// or more to their ranks, built once. A lookup, of which a count makes one
// a piece and two a merge step, takes about a third of the time a
// map[string]uint32's does. A slot holds the token's bytes packed into a
// word when it has 8 or fewer, as most have, so that a lookup of a short
// token reads one slot and nothing else; a longer one is keyed by its hash
// and then compared with its bytes, kept in one array.
//
// The table is never written after it is built, so inputs cannot lengthen
// its probe sequences: a lookup costs at most the longest cluster.
type tokenTable struct {
	slots []tokenSlot
	mask  uint64
	bytes []byte
}

// tokenSlot is a token: key is packShort of its bytes if it has 8 or fewer,
// else hashToken of them; info holds its offset in tokenTable.bytes (for a
// longer one), its length and its rank, from the low bits, and is 0 in an
// empty slot.
type tokenSlot struct {
	key, info uint64
}

const (
	slotOffsetBits = 22 // long tokens' bytes: 0.7 MB in o200k_base
	slotLenBits    = 8  // the longest token is 128 bytes
	slotRankBits   = 18 // 200,000 tokens
	slotRankShift  = slotOffsetBits + slotLenBits
)

func (s tokenSlot) offset() int { return int(s.info & (1<<slotOffsetBits - 1)) }
func (s tokenSlot) len() int    { return int(s.info >> slotOffsetBits & (1<<slotLenBits - 1)) }
func (s tokenSlot) rank() uint32 {
	return uint32(s.info >> slotRankShift)
}

// newTokenTable builds the table of tokens[rank], skipping empty strings.
func newTokenTable(tokens []string) tokenTable {
	count, size := 0, 0
	for _, token := range tokens {
		if token != "" {
			count++
		}
		if len(token) > 8 {
			size += len(token)
		}
	}
	n := 1
	for n < count*2 { // a load factor of at most one half
		n <<= 1
	}
	if size >= 1<<slotOffsetBits || len(tokens) > 1<<slotRankBits {
		panic("tokens: vocabulary exceeds the token table's limits") // the compiled-in ones fit
	}
	t := tokenTable{slots: make([]tokenSlot, n), mask: uint64(n - 1), bytes: make([]byte, 0, size)}
	for rank, token := range tokens {
		if token != "" {
			t.add(token, uint32(rank))
		}
	}
	return t
}

func (t *tokenTable) add(token string, rank uint32) {
	if len(token) >= 1<<slotLenBits {
		panic("tokens: vocabulary exceeds the token table's limits") // the compiled-in ones fit
	}
	off := len(t.bytes)
	if len(token) > 8 {
		t.bytes = append(t.bytes, token...)
	}
	key, h := tokenKey([]byte(token))
	i := h & t.mask
	for t.slots[i].info != 0 {
		i = (i + 1) & t.mask
	}
	t.slots[i] = tokenSlot{key: key, info: uint64(rank)<<slotRankShift | uint64(len(token))<<slotOffsetBits | uint64(off)}
}

// tokenKey returns b's slot key and hash.
func tokenKey(b []byte) (key, hash uint64) {
	if len(b) <= 8 {
		key = packShort(b)
		return key, mixShort(key, len(b))
	}
	hash = hashToken(b)
	return hash, hash
}

// rank returns b's rank (len(b) >= 3), or noRank.
func (t *tokenTable) rank(b []byte) uint32 {
	key, h := tokenKey(b)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s.info == 0 {
			return noRank
		}
		if s.key == key && s.len() == len(b) &&
			(len(b) <= 8 || string(t.bytes[s.offset():s.offset()+len(b)]) == string(b)) {
			return s.rank()
		}
	}
}

const hashM1, hashM2 = 0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9

// hashToken hashes the bytes of a token longer than 8 bytes with
// multiply-xorshift steps over 8-byte words.
func hashToken(b []byte) uint64 {
	h := uint64(len(b)) * hashM1
	for len(b) > 8 {
		h = (h ^ binary.LittleEndian.Uint64(b)) * hashM2
		h ^= h >> 31
		b = b[8:]
	}
	return mixShort(h^packShort(b), len(b))
}

// packShort packs 1 to 8 bytes into a word that, with their number,
// determines them: two overlapping 4-byte loads, or the three bytes.
func packShort(b []byte) uint64 {
	n := len(b)
	if n >= 4 {
		return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32
	}
	return uint64(b[0]) | uint64(b[n/2])<<8 | uint64(b[n-1])<<16
}

func mixShort(key uint64, n int) uint64 {
	h := (key ^ uint64(n)*hashM1) * hashM2
	h ^= h >> 32
	h *= hashM1
	h ^= h >> 29
	return h
}
