package jwtauth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// TestParseKeySet checks what inline and file key sets refuse.
func TestParseKeySet(t *testing.T) {
	rs := jwttest.NewIssuer(t, "RS256")
	ed := jwttest.NewIssuer(t, "EdDSA")
	key := func(i *jwttest.Issuer, edit func(m map[string]any)) string {
		b, _ := json.Marshal(i.JWKMarshal())
		var m map[string]any
		json.Unmarshal(b, &m) //nolint:errcheck
		if edit != nil {
			edit(m)
		}
		b, _ = json.Marshal(m)
		return string(b)
	}
	set := func(keys ...string) []byte { return []byte(`{"keys":[` + strings.Join(keys, ",") + `]}`) }
	tests := []struct {
		name    string
		data    []byte
		wantErr string // "" for success
		keys    int
	}{
		{"two keys", set(key(rs, nil), key(ed, nil)), "", 2},
		{"enc key skipped", set(key(rs, nil), key(ed, func(m map[string]any) { m["use"] = "enc" })), "", 1},
		{"only enc keys", set(key(rs, func(m map[string]any) { m["use"] = "enc" })), "no usable signing key", 0},
		{"not JSON", []byte("{"), "not a JSON Web Key Set", 0},
		{"no keys list", []byte(`{"kty":"RSA"}`), `no "keys" list`, 0},
		{"empty", []byte(`{"keys":[]}`), "no usable signing key", 0},
		{"oct refused", set(`{"kty":"oct","kid":"h","k":"c2VjcmV0"}`), "symmetric (oct) keys are not accepted", 0},
		{"no kid", set(key(rs, func(m map[string]any) { delete(m, "kid") })), `keys[0]: key has no "kid"`, 0},
		{"duplicate kid", set(key(rs, nil), key(rs, nil)), "duplicate kid", 0},
		{"alg of another family", set(key(rs, func(m map[string]any) { m["alg"] = "ES256" })), `algorithm "ES256" cannot be used with a RSA key`, 0},
		{"HMAC alg on RSA key", set(key(rs, func(m map[string]any) { m["alg"] = "HS256" })), `algorithm "HS256"`, 0},
		{"X25519", set(`{"kty":"OKP","crv":"X25519","kid":"x","x":"` + strings.Repeat("A", 43) + `"}`), "unsupported OKP curve", 0},
		{"unknown kty", set(`{"kty":"XYZ","kid":"x"}`), "unsupported key type", 0},
		{"bad RSA", set(`{"kty":"RSA","kid":"x"}`), "keys[0]", 0},
		{"too many", set(strings.Repeat(key(rs, nil)+",", maxKeys) + key(rs, nil)), "too many keys", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseKeySet(tc.data, true)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(s.all) != tc.keys {
				t.Fatalf("%d keys, want %d", len(s.all), tc.keys)
			}
		})
	}
	// Lenient parsing (fetched sets) skips bad keys and keeps good ones.
	s, err := parseKeySet(set(`{"kty":"oct","kid":"h","k":"c2VjcmV0"}`, key(rs, func(m map[string]any) { delete(m, "kid") }), key(ed, nil)), false)
	if err != nil || len(s.all) != 1 || s.all[0].Marshal().KID != ed.Kid {
		t.Fatalf("lenient: %v, %v", s, err)
	}
}

// TestParseKeySetDropsPrivateKeys keeps only public material.
func TestParseKeySetDropsPrivateKeys(t *testing.T) {
	k, err := rsaPrivateJWK(t)
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseKeySet([]byte(`{"keys":[`+k+`]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.all[0].Key().(*rsa.PublicKey); !ok {
		t.Fatalf("key is %T, want *rsa.PublicKey", s.all[0].Key())
	}
	if s.all[0].Marshal().D != "" {
		t.Fatal("private exponent kept")
	}
}

func rsaPrivateJWK(t *testing.T) (string, error) {
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	j, err := jwkset.NewJWKFromKey(priv, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "p"}, Marshal: jwkset.JWKMarshalOptions{Private: true}})
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(j.Marshal())
	return string(b), err
}

// TestKeySetErrorsNameFields checks the errors of inline and file key sets.
func TestKeySetErrorsNameFields(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxKeySetSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		cfg    config.JWTAuth
		want   string
		wantOK bool
	}{
		{"file ok", config.JWTAuth{Single: true, Providers: []config.JWTProvider{{Issuer: "i", JWKS: &config.JWKSource{Kind: config.JWKSFile, File: iss.WriteJWKSFile(t)}}}}, "", true},
		{"file missing", config.JWTAuth{Single: true, Providers: []config.JWTProvider{{Issuer: "i", JWKS: &config.JWKSource{Kind: config.JWKSFile, File: filepath.Join(dir, "nope")}}}}, "jwks.file: cannot load key set", false},
		{"file too big", config.JWTAuth{Single: true, Providers: []config.JWTProvider{{Issuer: "i", JWKS: &config.JWKSource{Kind: config.JWKSFile, File: big}}}}, "jwks.file: cannot load key set " + `"` + big + `": larger than`, false},
		{"inline bad in providers", config.JWTAuth{Providers: []config.JWTProvider{
			{Issuer: "a", JWKS: &config.JWKSource{Kind: config.JWKSInline, Inline: string(iss.JWKS())}},
			{Issuer: "b", JWKS: &config.JWKSource{Kind: config.JWKSInline, Inline: `{"keys":[{"kty":"oct","kid":"k","k":"AA"}]}`}},
		}}, "providers[1].jwks: invalid key set: keys[0]: symmetric", false},
		{"empty url", config.JWTAuth{Providers: []config.JWTProvider{{Issuer: "a", JWKS: &config.JWKSource{Kind: config.JWKSURL}}}}, "providers[0].jwks.url: must not be empty", false},
		{"no providers", config.JWTAuth{}, "providers: at least one provider is required", false},
		{"bad mode", config.JWTAuth{Mode: "lax"}, "mode: must be one of", false},
		{"bad location", config.JWTAuth{Location: &config.AuthLocation{}}, "location: exactly one of", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(&tc.cfg, Options{})
			if tc.wantOK {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want prefix %q", err, tc.want)
			}
			if _, ok := err.(*policy.FieldError); !ok {
				t.Fatalf("err is %T, want *policy.FieldError", err)
			}
		})
	}
}

// remoteValidator builds a validator on a URL key set with a fake clock.
func remoteValidator(t *testing.T, url string, clock *jwttest.Clock, ttl time.Duration) (*Validator, *remoteSource) {
	t.Helper()
	o := Options{Now: clock.Now, RefetchInterval: 10 * time.Second, FetchTimeout: 5 * time.Second}.withDefaults()
	src := &config.JWKSource{Kind: config.JWKSURL, URL: url}
	if ttl > 0 {
		src.CacheDuration = &config.Duration{Duration: ttl}
	}
	v, err := newValidator([]config.JWTProvider{{Issuer: jwttest.DefaultIssuer, JWKS: src}}, true, &o)
	if err != nil {
		t.Fatal(err)
	}
	return v, v.providers[0].keys.remote
}

// waitFetches waits until the source has no fetch running.
func waitIdle(t *testing.T, r *remoteSource) {
	t.Helper()
	r.mu.Lock()
	ch := r.inflight
	r.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("fetch did not end")
		}
	}
}

// TestRemoteKeySet covers the first fetch, refetch on an unknown kid, the
// refetch rate limit and cache expiry.
func TestRemoteKeySet(t *testing.T) {
	old := jwttest.NewIssuer(t, "RS256")
	rotated := jwttest.NewIssuer(t, "ES256")
	ks := jwttest.ServeJWKS(t, old.JWKS())
	clock := jwttest.NewClock()
	v, r := remoteValidator(t, ks.URL, clock, time.Minute)

	// The first fetch started when the policy was built.
	if _, f := v.Validate([]byte(old.Sign(old.Claims("a")))); f != OK {
		t.Fatalf("first token: %v", f)
	}
	if h := ks.Hits(); h != 1 {
		t.Fatalf("%d fetches after the first token, want 1", h)
	}
	// Known kids are served from the cache.
	for range 5 {
		if _, f := v.Validate([]byte(old.Sign(old.Claims("a")))); f != OK {
			t.Fatal(f)
		}
	}
	if h := ks.Hits(); h != 1 {
		t.Fatalf("%d fetches for cached keys, want 1", h)
	}

	// The IdP rotates: a token with the new kid makes one fetch at once,
	// as the last fetch is older than the refetch interval.
	ks.Set(rotated.JWKS())
	clock.Advance(11 * time.Second)
	if _, f := v.Validate([]byte(rotated.Sign(rotated.Claims("b")))); f != OK {
		t.Fatalf("rotated key: %v", f)
	}
	if h := ks.Hits(); h != 2 {
		t.Fatalf("%d fetches after rotation, want 2", h)
	}

	// A flood of made-up kids fetches nothing within the refetch interval.
	bogus := jwttest.NewIssuer(t, "RS256")
	for range 50 {
		if _, f := v.Validate([]byte(bogus.Sign(bogus.Claims("x")))); f != FailUnknownKey {
			t.Fatalf("bogus kid: %v", f)
		}
	}
	if h := ks.Hits(); h != 2 {
		t.Fatalf("%d fetches after a flood of unknown kids, want 2", h)
	}
	clock.Advance(11 * time.Second)
	for range 50 {
		v.Validate([]byte(bogus.Sign(bogus.Claims("x"))))
	}
	if h := ks.Hits(); h != 3 {
		t.Fatalf("%d fetches after the interval, want 3 (one more)", h)
	}

	// The old key is gone from the set: tokens signed with it now fail.
	if _, f := v.Validate([]byte(old.Sign(old.Claims("a")))); f != FailUnknownKey {
		t.Fatalf("old key after rotation: %v", f)
	}

	// Cache expiry: the cached key still serves the request that notices
	// the expiry, and a refresh runs in the background.
	ks.Set(jwttest.JWKS(t, old)) // rotated key withdrawn
	clock.Advance(time.Minute)
	if _, f := v.Validate([]byte(rotated.Sign(rotated.Claims("b")))); f != OK {
		t.Fatalf("cached key at expiry: %v", f)
	}
	waitIdle(t, r)
	if h := ks.Hits(); h != 4 {
		t.Fatalf("%d fetches after expiry, want 4", h)
	}
	if _, f := v.Validate([]byte(rotated.Sign(rotated.Claims("b")))); f != FailUnknownKey {
		t.Fatalf("withdrawn key after the refresh: %v", f)
	}
	if _, f := v.Validate([]byte(old.Sign(old.Claims("a")))); f != OK {
		t.Fatalf("restored key after the refresh: %v", f)
	}
}

// TestRemoteKeySetFailsClosed: a key set that cannot be fetched refuses
// tokens, and keys fetched later are used; a failed refresh keeps the keys.
func TestRemoteKeySetFailsClosed(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	ks := jwttest.ServeJWKS(t, iss.JWKS())
	ks.SetStatus(http.StatusServiceUnavailable)
	clock := jwttest.NewClock()
	v, r := remoteValidator(t, ks.URL, clock, time.Minute)
	waitIdle(t, r)
	tok := []byte(iss.Sign(iss.Claims("a")))
	if _, f := v.Validate(tok); f != FailNoKeys {
		t.Fatalf("before any key: %v, want %v", f, FailNoKeys)
	}
	if h := ks.Hits(); h != 1 {
		t.Fatalf("%d fetches, want 1 (retries wait for the interval)", h)
	}
	ks.SetStatus(http.StatusOK)
	clock.Advance(11 * time.Second)
	if _, f := v.Validate(tok); f != OK {
		t.Fatalf("after the IdP recovered: %v", f)
	}
	// The IdP fails again: after expiry the cached keys keep working.
	ks.SetStatus(http.StatusInternalServerError)
	clock.Advance(2 * time.Minute)
	if _, f := v.Validate(tok); f != OK {
		t.Fatalf("cached keys while the IdP fails: %v", f)
	}
	waitIdle(t, r)
	if _, f := v.Validate(tok); f != OK {
		t.Fatalf("after a failed refresh: %v", f)
	}
}

// TestRemoteKeySetDoesNotBlockLoad: building the policy returns while the
// key server hangs; requests then fail closed within the fetch timeout.
func TestRemoteKeySetDoesNotBlockLoad(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	hang := jwttest.ServeHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	iss := jwttest.NewIssuer(t, "ES256")
	start := time.Now()
	o := Options{FetchTimeout: 200 * time.Millisecond}
	p, err := New(&config.JWTAuth{Single: true, Providers: []config.JWTProvider{{Issuer: iss.Iss, JWKS: &config.JWKSource{Kind: config.JWKSURL, URL: hang}}}}, o)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 150*time.Millisecond {
		t.Fatalf("New took %v", d)
	}
	if _, f := p.Validator().Validate([]byte(iss.Sign(iss.Claims("a")))); f != FailNoKeys {
		t.Fatalf("while the key set hangs: %v", f)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("refusal took %v", d)
	}
	unblock()
}

// TestRemoteKeySetSizeBound refuses an oversized key set document.
func TestRemoteKeySetSizeBound(t *testing.T) {
	ks := jwttest.ServeJWKS(t, []byte(`{"keys":[`+strings.Repeat(" ", MaxKeySetSize)+`]}`))
	iss := jwttest.NewIssuer(t, "ES256")
	v, r := remoteValidator(t, ks.URL, jwttest.NewClock(), 0)
	waitIdle(t, r)
	if _, f := v.Validate([]byte(iss.Sign(iss.Claims("a")))); f != FailNoKeys {
		t.Fatalf("oversized key set: %v", f)
	}
}

// TestKeySetStorage covers the read-only jwkset.Storage methods.
func TestKeySetStorage(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	s, err := parseKeySet(iss.JWKS(), true)
	if err != nil {
		t.Fatal(err)
	}
	ks := staticKeySet(s)
	ctx := t.Context()
	if _, err := ks.KeyRead(ctx, iss.Kid); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.KeyRead(ctx, "nope"); err == nil {
		t.Fatal("unknown kid found")
	}
	if err := ks.KeyWrite(ctx, s.all[0]); err == nil {
		t.Fatal("KeyWrite accepted")
	}
	if _, err := ks.KeyDelete(ctx, iss.Kid); err == nil {
		t.Fatal("KeyDelete accepted")
	}
	if err := ks.KeyReplaceAll(ctx, nil); err == nil {
		t.Fatal("KeyReplaceAll accepted")
	}
	j, err := ks.JSONPublic(ctx)
	if err != nil || !strings.Contains(string(j), iss.Kid) {
		t.Fatalf("JSONPublic = %s, %v", j, err)
	}
	if j, err := ks.JSONPrivate(ctx); err != nil || strings.Contains(string(j), `"d"`) {
		t.Fatalf("JSONPrivate = %s, %v", j, err)
	}
	if _, err := ks.JSON(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := ks.Marshal(ctx); err != nil || len(m.Keys) != 1 {
		t.Fatalf("Marshal = %v, %v", m, err)
	}
	if _, err := ks.MarshalWithOptions(ctx, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.JSONWithOptions(ctx, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{}); err != nil {
		t.Fatal(err)
	}
}
