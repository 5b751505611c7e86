package tokens

import "sync"

// Byte-pair merging of one piece, as tiktoken does it: start from single
// bytes and, while two neighbouring parts join into a token, join the pair
// whose token has the lowest rank, the leftmost of equal ones. The result
// is the number of parts left.
//
// Short pieces, most of those that are no token, are merged in arrays on the
// stack, finding the pair to join by scanning all pairs (tiktoken's way,
// O(n²), cheapest for a few bytes). Longer ones keep their pairs in a binary
// heap, O(n log n): a 60-byte run of CJK text needs some 40 joins. Their
// arrays are on the stack up to maxStackPiece bytes and come from a pool
// beyond (runs of white space or punctuation, base64...).

// Piece lengths that choose how a piece is merged.
const (
	maxScanPiece  = 16
	maxStackPiece = 64 // 2.5 KB of arrays
)

// mergeCount returns the number of tokens that piece, which is no token
// and at least three bytes long, merges into.
func (v *vocabulary) mergeCount(piece []byte) int {
	switch {
	case len(piece) <= maxScanPiece:
		return v.mergeScan(piece)
	case len(piece) <= maxStackPiece:
		return v.mergeHeapOnStack(piece)
	}
	s := mergeScratchPool.Get().(*mergeScratch)
	s.grow(len(piece))
	n := v.mergeHeap(piece, s.heap, s.keys, s.next, s.prev)
	if cap(s.next) <= maxPooledScratch {
		mergeScratchPool.Put(s)
	}
	return n
}

// mergeHeapOnStack is mergeHeap in arrays on the stack, in a frame of its
// own so that the other merges' frames stay small.
func (v *vocabulary) mergeHeapOnStack(piece []byte) int {
	var heap [2 * maxStackPiece]uint64
	var keys [maxStackPiece]uint64
	var next, prev [maxStackPiece]int32
	return v.mergeHeap(piece, heap[:], keys[:], next[:], prev[:])
}

// Every join after the first pairs is of three bytes or more, so merging
// looks tokens up in v.longer directly.

// mergeScan merges piece (3 <= len(piece) <= maxScanPiece). Part k spans
// piece[bounds[k]:bounds[k+1]], and ranks[k] is the rank of parts k and k+1
// joined; a join shifts the parts after it down by one.
func (v *vocabulary) mergeScan(piece []byte) int {
	var bounds [maxScanPiece + 1]uint8
	var ranks [maxScanPiece]uint32
	parts := len(piece)
	for k := range parts - 1 {
		bounds[k] = uint8(k)
		ranks[k] = v.pairRank[int(piece[k])<<8|int(piece[k+1])]
	}
	bounds[parts-1], bounds[parts] = uint8(parts-1), uint8(parts)
	for {
		best, at := uint32(noRank), -1
		for k, r := range ranks[:parts-1] {
			if r < best {
				best, at = r, k
			}
		}
		if at < 0 {
			return parts
		}
		// Join parts at and at+1: drop the bound between them and the
		// rank of the pair that started at at+1.
		for k := at + 1; k < parts; k++ {
			bounds[k] = bounds[k+1]
		}
		for k := at + 1; k < parts-1; k++ {
			ranks[k] = ranks[k+1]
		}
		parts--
		ranks[at] = noRank
		if at+1 < parts {
			ranks[at] = v.longer.rank(piece[bounds[at]:bounds[at+2]])
		}
		if at > 0 {
			ranks[at-1] = v.longer.rank(piece[bounds[at-1]:bounds[at+1]])
		}
	}
}

// mergeHeap merges piece (3 <= len(piece) <= math.MaxInt32). Parts are
// named by the offset they start at, linked by next and prev; keys[k] is the
// key of part k joined with the next one (see pairKey), noKey if they do not
// join or no part starts at k. heap holds keys, some stale: a popped key
// that is no longer its part's is skipped. heap needs room for two keys a
// byte, as it starts with at most one a pair and a join pops one and pushes
// at most two; the other arrays need one entry a byte.
func (v *vocabulary) mergeHeap(piece []byte, heap []uint64, keys []uint64, next, prev []int32) int {
	n := len(piece)
	h := keyHeap{keys: heap}
	for k := range n - 1 {
		keys[k] = pairKey(v.pairRank[int(piece[k])<<8|int(piece[k+1])], k)
		next[k], prev[k] = int32(k+1), int32(k-1)
		if keys[k] != noKey {
			h.keys[h.size] = keys[k]
			h.size++
		}
	}
	keys[n-1], next[n-1], prev[n-1] = noKey, int32(n), int32(n-2)
	h.init()

	parts := n
	for h.size > 0 {
		key := h.pop()
		at := int32(key) // the offset, in the key's low half
		if keys[at] != key {
			continue
		}
		joined := next[at]
		end := next[joined]
		next[at] = end
		keys[joined] = noKey
		parts--
		keys[at] = noKey
		if int(end) < n {
			prev[end] = at
			keys[at] = pairKey(v.longer.rank(piece[at:next[end]]), int(at))
			h.push(keys[at])
		}
		if at > 0 {
			before := prev[at]
			keys[before] = pairKey(v.longer.rank(piece[before:end]), int(before))
			h.push(keys[before])
		}
	}
	return parts
}

// noKey is the key of a part that joins nothing.
const noKey = ^uint64(0)

// pairKey orders the pairs to join: by rank, then by offset.
func pairKey(rank uint32, at int) uint64 {
	if rank == noRank {
		return noKey
	}
	return uint64(rank)<<32 | uint64(at)
}

// keyHeap is a binary min-heap of keys in a fixed array: len(keys) bounds
// its size (no append, so that stack arrays stay on the stack).
type keyHeap struct {
	keys []uint64
	size int
}

func (h *keyHeap) init() {
	for i := h.size/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// push adds key, unless it is noKey.
func (h *keyHeap) push(key uint64) {
	if key == noKey {
		return
	}
	s := h.keys
	i := h.size
	s[i] = key
	h.size++
	for i > 0 {
		parent := (i - 1) / 2
		if s[parent] <= s[i] {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *keyHeap) pop() uint64 {
	top := h.keys[0]
	h.size--
	h.keys[0] = h.keys[h.size]
	h.down(0)
	return top
}

func (h *keyHeap) down(i int) {
	s := h.keys[:h.size]
	for {
		child := 2*i + 1
		if child >= len(s) {
			return
		}
		if right := child + 1; right < len(s) && s[right] < s[child] {
			child = right
		}
		if s[i] <= s[child] {
			return
		}
		s[i], s[child] = s[child], s[i]
		i = child
	}
}

// mergeScratch holds mergeHeap's arrays for pieces too long for the stack.
type mergeScratch struct {
	heap, keys []uint64
	next, prev []int32
}

var mergeScratchPool = sync.Pool{New: func() any { return new(mergeScratch) }}

// maxPooledScratch bounds the piece length whose arrays (32 bytes a byte)
// a pooled scratch keeps, so that one huge prompt does not pin its memory.
const maxPooledScratch = 1 << 16

func (s *mergeScratch) grow(n int) {
	if cap(s.next) < n {
		s.heap = make([]uint64, 2*n)
		s.keys = make([]uint64, n)
		s.next, s.prev = make([]int32, n), make([]int32, n)
	}
	s.heap, s.keys, s.next, s.prev = s.heap[:2*n], s.keys[:n], s.next[:n], s.prev[:n]
}
