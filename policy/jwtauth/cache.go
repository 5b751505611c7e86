package jwtauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tokenCacheSlots is how many verified tokens a validator remembers.
const tokenCacheSlots = 4096

// maxCacheFor bounds how long a verified token is remembered, whatever its
// expiry.
const maxCacheFor = 5 * time.Minute

// tokenCache remembers tokens this validator verified: a direct-mapped
// table keyed by a salted SHA-256 of the token as sent, so a client sending
// the same token again (every request of a session) costs a hash, not a
// signature check (an RS256 check takes tens of microseconds). An entry
// holds until the token's exp (at most maxCacheFor), and only while its
// provider's key set is the one that verified it: a rotated or refetched key
// set checks the token again. Entries are replaced, never changed, and read
// without locks; the claims they hold are shared and never modified.
type tokenCache struct {
	salt  [16]byte
	slots [tokenCacheSlots]atomic.Pointer[tokenEntry]
}

type tokenEntry struct {
	key      [sha256.Size]byte
	claims   map[string]any
	until    int64 // UnixNano
	provider *provider
	keys     *keySnapshot // the provider's key set when verified
}

func newTokenCache() *tokenCache {
	c := &tokenCache{}
	if _, err := rand.Read(c.salt[:]); err != nil {
		return nil // no randomness: no cache, every token is checked
	}
	return c
}

func (c *tokenCache) key(token []byte) [sha256.Size]byte {
	if len(token) <= 2032 {
		// The usual token: a buffer that is cheap to clear.
		var buf [2048]byte
		n := copy(buf[:], c.salt[:])
		n += copy(buf[n:], token)
		return sha256.Sum256(buf[:n])
	}
	var buf [len(tokenCache{}.salt) + MaxTokenSize]byte
	n := copy(buf[:], c.salt[:])
	n += copy(buf[n:], token)
	return sha256.Sum256(buf[:n])
}

func (c *tokenCache) slot(k *[sha256.Size]byte) *atomic.Pointer[tokenEntry] {
	return &c.slots[binary.LittleEndian.Uint64(k[:8])%tokenCacheSlots]
}

// lookup returns the claims of a token verified before and still good.
func (c *tokenCache) lookup(token []byte, now time.Time) (map[string]any, [sha256.Size]byte, bool) {
	k := c.key(token)
	e := c.slot(&k).Load()
	if e == nil || e.key != k || now.UnixNano() >= e.until || e.provider.keys.snap.Load() != e.keys {
		return nil, k, false
	}
	return e.claims, k, true
}

// store remembers a token p verified with keys.
func (c *tokenCache) store(k [sha256.Size]byte, claims map[string]any, p *provider, keys *keySnapshot, now time.Time) {
	until := now.Add(maxCacheFor)
	if exp, err := jwt.MapClaims(claims).GetExpirationTime(); err == nil && exp != nil && exp.Before(until) {
		until = exp.Time
	}
	if !until.After(now) || keys == nil {
		return
	}
	c.slot(&k).Store(&tokenEntry{key: k, claims: claims, until: until.UnixNano(), provider: p, keys: keys})
}
