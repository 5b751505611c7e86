package jwtauth

import (
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/relaygate/gateway/policy/credential"
)

// maxCacheFor bounds how long a verified token is remembered, whatever its
// expiry.
const maxCacheFor = 5 * time.Minute

// tokenCache remembers tokens this validator verified (credential.Memo),
// so a client sending the same token again (every request of a session)
// costs a hash, not a signature check (an RS256 check takes tens of
// microseconds). An entry holds until the token's exp (at most
// maxCacheFor), and only while its provider's key set is the one that
// verified it: a rotated or refetched key set checks the token again. An
// entry of a fetched key set also ends when that set's cacheDuration does:
// the next request then goes through the key lookup, which uses the keys
// and refetches them per the remoteSource rules, so a key withdrawn from
// the JWKS stops verifying once the set is refreshed. The claims entries
// hold are shared and never modified.
type tokenCache struct {
	memo *credential.Memo[tokenEntry]
}

type tokenEntry struct {
	claims   map[string]any
	until    int64 // UnixNano
	provider *provider
	keys     *keySnapshot // the provider's key set when verified
}

func newTokenCache() *tokenCache {
	m, err := credential.NewMemo[tokenEntry]()
	if err != nil {
		return nil // no randomness: no cache, every token is checked
	}
	return &tokenCache{memo: m}
}

// lookup returns the claims of a token verified before and still good,
// and the token's key for store.
func (c *tokenCache) lookup(token []byte, now time.Time) (map[string]any, credential.MemoKey, bool) {
	k := c.memo.Key(token)
	e, ok := c.memo.Get(k)
	if !ok || now.UnixNano() >= e.until || e.provider.keys.snap.Load() != e.keys {
		return nil, k, false
	}
	return e.claims, k, true
}

// store remembers a token p verified with keys; exp is its exp, nil if none.
func (c *tokenCache) store(k credential.MemoKey, claims map[string]any, exp *jwt.NumericDate, p *provider, keys *keySnapshot, now time.Time) {
	until := now.Add(maxCacheFor)
	if exp != nil && exp.Before(until) {
		until = exp.Time
	}
	if r := p.keys.remote; r != nil && keys != nil {
		if stale := keys.fetched.Add(r.ttl); stale.Before(until) {
			until = stale
		}
	}
	if !until.After(now) || keys == nil {
		return
	}
	c.memo.Put(k, tokenEntry{claims: claims, until: until.UnixNano(), provider: p, keys: keys})
}
