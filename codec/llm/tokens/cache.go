package tokens

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// CountCached is CountEncoding for texts that recur: a chat client sends
// the whole conversation again with every turn, and an agent its system
// prompt and tool results with every call, so most of a prompt's messages
// were counted before. Counts of texts of at least minCachedText bytes are
// remembered by content, per encoding, in a fixed table (cacheSlots
// entries, 512 KiB, allocated on first use): a hit costs a hash of the text
// (maphash, some GB/s) instead of a count (about 150 MB/s).
//
// An entry holds 40 bits of the text's 64-bit hash beside the count, and
// the slot is picked by 16 others: two different texts are taken for one
// another with a chance of about 2^-40 per lookup of a text not in the
// table, and the count returned is then the other text's. Counts are
// estimates for rate limits and cache thresholds; that chance is far below
// what matters to either. The table is lock-free: a slot is one atomic
// word, so concurrent counts never see a torn entry, and a newer text
// simply replaces the one in its slot.
func CountCached(e Encoding, text []byte) int {
	if len(text) < minCachedText {
		return CountEncoding(e, text)
	}
	c := countCacheFor(e)
	h := maphash.Bytes(c.seed, text)
	slot := &c.slots[h&(cacheSlots-1)]
	tag := h >> cacheTagShift
	if v := slot.Load(); v != 0 && v>>cacheCountBits == tag {
		return int(v & (1<<cacheCountBits - 1))
	}
	n := CountEncoding(e, text)
	if n < 1<<cacheCountBits {
		slot.Store(tag<<cacheCountBits | uint64(n))
	}
	return n
}

const (
	// minCachedText: shorter texts are counted each time (a count of a
	// few dozen bytes costs about what the lookup does).
	minCachedText = 64
	cacheBits     = 16
	cacheSlots    = 1 << cacheBits
	// An entry is tag<<cacheCountBits | count: the hash's top 40 bits,
	// and a count below 2^24 (a text of some 64 MB; larger are not
	// kept). A text of minCachedText bytes or more has a count above
	// 0, so 0 marks an empty slot.
	cacheCountBits = 24
	cacheTagShift  = cacheCountBits // the hash's top 40 bits
)

type countCache struct {
	seed  maphash.Seed
	slots [cacheSlots]atomic.Uint64
}

var (
	o200kCache  = sync.OnceValue(newCountCache)
	cl100kCache = sync.OnceValue(newCountCache)
)

func newCountCache() *countCache { return &countCache{seed: maphash.MakeSeed()} }

func countCacheFor(e Encoding) *countCache {
	if e == O200kBase {
		return o200kCache()
	}
	return cl100kCache()
}
