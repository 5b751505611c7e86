package credential

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"
)

// memoSlots is how many credentials a Memo remembers.
const memoSlots = 4096

// maxMemoOnStack is the longest credential a Memo hashes without
// allocating (the longest token jwtAuth takes).
const maxMemoOnStack = 16 << 10

// Memo remembers what checking a credential found (the user a password
// verified, the claims a token's signature vouched for): a direct-mapped
// table keyed by a salted SHA-256 of the credential as sent, so a
// credential seen before is recognised at the cost of a hash, not of its
// check (bcrypt and RSA take tens of microseconds or more by design), and
// without keeping the credential. Entries are replaced, never changed, and
// read without locks; a caller keeps in V whatever says an entry still
// holds.
type Memo[V any] struct {
	salt  [16]byte
	slots [memoSlots]atomic.Pointer[memoEntry[V]]
}

// MemoKey is a credential's key in a Memo.
type MemoKey [sha256.Size]byte

type memoEntry[V any] struct {
	key   MemoKey
	value V
}

// NewMemo returns an empty memo with a salt of its own; it fails only
// without randomness.
func NewMemo[V any]() (*Memo[V], error) {
	m := &Memo[V]{}
	if _, err := rand.Read(m.salt[:]); err != nil {
		return nil, err
	}
	return m, nil
}

// Key is cred's key. Credentials up to 16 KiB are hashed on the stack,
// in a buffer sized to the common case so that clearing it costs little.
func (m *Memo[V]) Key(cred []byte) MemoKey {
	switch {
	case len(cred) <= 256-len(m.salt):
		var buf [256]byte
		return m.sum(buf[:], cred)
	case len(cred) <= 2048-len(m.salt):
		var buf [2048]byte
		return m.sum(buf[:], cred)
	case len(cred) <= maxMemoOnStack:
		var buf [len(Memo[V]{}.salt) + maxMemoOnStack]byte
		return m.sum(buf[:], cred)
	}
	h := sha256.New()
	h.Write(m.salt[:])
	h.Write(cred)
	var k MemoKey
	h.Sum(k[:0])
	return k
}

func (m *Memo[V]) sum(buf, cred []byte) MemoKey {
	n := copy(buf, m.salt[:])
	n += copy(buf[n:], cred)
	return sha256.Sum256(buf[:n])
}

func (m *Memo[V]) slot(k *MemoKey) *atomic.Pointer[memoEntry[V]] {
	return &m.slots[binary.LittleEndian.Uint64(k[:8])%memoSlots]
}

// Get returns what was kept under k, if anything still is.
func (m *Memo[V]) Get(k MemoKey) (V, bool) {
	if e := m.slot(&k).Load(); e != nil && e.key == k {
		return e.value, true
	}
	var zero V
	return zero, false
}

// Put keeps v under k, in place of whatever shared its slot.
func (m *Memo[V]) Put(k MemoKey, v V) {
	m.slot(&k).Store(&memoEntry[V]{key: k, value: v})
}
