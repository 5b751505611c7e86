package jwtauth

import (
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

func TestTokenCache(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	clock := jwttest.NewClock()
	o := Options{Now: clock.Now}.withDefaults()
	v, err := newValidator([]config.JWTProvider{inlineProvider(iss.Iss, iss.JWKS(), jwttest.DefaultAudience)}, true, &o)
	if err != nil {
		t.Fatal(err)
	}
	claims := iss.Claims("alice")
	claims["exp"] = clock.Now().Add(30 * time.Second).Unix()
	tok := []byte(iss.Sign(claims))
	cached := func() bool {
		_, _, hit := v.cache.lookup(tok, clock.Now())
		return hit
	}
	if cached() {
		t.Fatal("a token nobody checked is cached")
	}
	first, f := v.Validate(tok)
	if f != OK || !cached() {
		t.Fatalf("checked %v, cached %v", f, cached())
	}
	again, f := v.Validate(tok)
	if f != OK || again["sub"] != "alice" || len(again) != len(first) {
		t.Fatalf("cached answer %v %v", again, f)
	}
	// A token differing by one byte is not the cached one.
	other := append([]byte(nil), tok...)
	other[len(other)-2] ^= 1
	if _, f := v.Validate(other); f == OK {
		t.Fatal("a changed signature passed")
	}
	// The entry ends with the token: past exp it is checked again, and
	// refused (beyond the leeway).
	clock.Advance(31 * time.Second)
	if cached() {
		t.Fatal("still cached past exp")
	}
	clock.Advance(2 * time.Minute)
	if _, f := v.Validate(tok); f != FailExpired {
		t.Fatalf("expired token: %v", f)
	}
	// A failed token is never cached.
	if cached() {
		t.Fatal("an expired token got cached")
	}
}

// A new key set (rotation, refetch) invalidates what the old one verified.
func TestTokenCacheFollowsKeySet(t *testing.T) {
	old := jwttest.NewIssuer(t, "RS256")
	rotated := jwttest.NewIssuer(t, "RS256")
	ks := jwttest.ServeJWKS(t, old.JWKS())
	clock := jwttest.NewClock()
	v, r := remoteValidator(t, ks.URL, clock, time.Minute)
	tok := []byte(old.Sign(old.Claims("a")))
	if _, f := v.Validate(tok); f != OK {
		t.Fatal(f)
	}
	ks.Set(rotated.JWKS())
	clock.Advance(11 * time.Second)
	if _, f := v.Validate([]byte(rotated.Sign(rotated.Claims("b")))); f != OK { // refetches
		t.Fatal(f)
	}
	waitIdle(t, r)
	if _, f := v.Validate(tok); f != FailUnknownKey {
		t.Fatalf("a token of the withdrawn key: %v", f)
	}
}

// BenchmarkJWTValidateCached: a token the validator checked before.
func BenchmarkJWTValidateCached(b *testing.B) {
	iss := jwttest.NewIssuer(b, "RS256")
	o := Options{}.withDefaults()
	v, err := newValidator([]config.JWTProvider{inlineProvider(iss.Iss, iss.JWKS(), jwttest.DefaultAudience)}, true, &o)
	if err != nil {
		b.Fatal(err)
	}
	tok := []byte(iss.Sign(iss.Claims("alice")))
	if _, f := v.Validate(tok); f != OK {
		b.Fatal(f)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, f := v.Validate(tok); f != OK {
			b.Fatal(f)
		}
	}
}

// A remembered token lasts no longer than the key set's cacheDuration: the
// first request after it reaches the key lookup, which refetches the set,
// and a key withdrawn from it stops verifying.
func TestTokenCacheEndsWithKeySetTTL(t *testing.T) {
	iss := jwttest.NewIssuer(t, "RS256")
	other := jwttest.NewIssuer(t, "RS256")
	ks := jwttest.ServeJWKS(t, iss.JWKS())
	clock := jwttest.NewClock()
	v, r := remoteValidator(t, ks.URL, clock, 2*time.Second)
	waitIdle(t, r) // the first fetch
	tok := []byte(iss.Sign(iss.Claims("a")))
	if _, f := v.Validate(tok); f != OK {
		t.Fatal(f)
	}
	if _, _, hit := v.cache.lookup(tok, clock.Now()); !hit {
		t.Fatal("not cached")
	}
	ks.Set(other.JWKS()) // iss's key withdrawn
	clock.Advance(3 * time.Second)
	if _, _, hit := v.cache.lookup(tok, clock.Now()); hit {
		t.Fatal("still cached past the key set's cacheDuration")
	}
	// Requests that find the set stale are still served by it, and start
	// the refetch once the refetch interval (10s here) allows.
	if _, f := v.Validate(tok); f != OK {
		t.Fatalf("stale key set: %v", f)
	}
	clock.Advance(8 * time.Second)
	if _, f := v.Validate(tok); f != OK {
		t.Fatalf("stale key set: %v", f)
	}
	waitIdle(t, r)
	if h := ks.Hits(); h != 2 {
		t.Fatalf("%d fetches, want 2 (the refresh)", h)
	}
	if _, f := v.Validate(tok); f != FailUnknownKey {
		t.Fatalf("token of the withdrawn key after the refresh: %v", f)
	}
}
