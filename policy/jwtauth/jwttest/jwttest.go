// Package jwttest owns test helpers for JWT authentication: token issuers
// with keys generated per test, their JSON Web Key Sets (as bytes, files or
// a served URL), and signed or deliberately broken tokens. It is imported
// only by tests.
package jwttest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// DefaultIssuer is the iss of issuers made by NewIssuer.
const DefaultIssuer = "https://issuer.test"

// DefaultAudience is the aud Claims puts in tokens.
const DefaultAudience = "gateway.test"

var kidSeq atomic.Int64

// Issuer signs tokens with one freshly generated key.
type Issuer struct {
	// Iss is the issuer name Claims puts in tokens; NewIssuer sets
	// DefaultIssuer.
	Iss string
	// Kid is the key ID put in token headers and in the JWK.
	Kid string
	// Alg is the signing algorithm: RS256, RS384, RS512, PS256, PS384,
	// PS512, ES256, ES384, ES512 or EdDSA.
	Alg string
	// OmitJWKAlg leaves "alg" out of the JWK, so the key fits any algorithm
	// of its type.
	OmitJWKAlg bool

	tb  testing.TB
	key crypto.Signer
}

// NewIssuer generates a key for alg (RSA 2048 bits, the alg's curve, or
// Ed25519) with a unique kid.
func NewIssuer(tb testing.TB, alg string) *Issuer {
	tb.Helper()
	var key crypto.Signer
	var err error
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ES384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ES512":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "EdDSA":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		tb.Fatalf("jwttest: unsupported algorithm %q", alg)
	}
	if err != nil {
		tb.Fatalf("jwttest: generating a %s key: %v", alg, err)
	}
	return &Issuer{Iss: DefaultIssuer, Kid: "kid-" + alg + "-" + strconv.FormatInt(kidSeq.Add(1), 10), Alg: alg, tb: tb, key: key}
}

// PublicKey returns the issuer's public key.
func (i *Issuer) PublicKey() crypto.PublicKey { return i.key.Public() }

// PublicKeyPEM returns the public key as a PEM "PUBLIC KEY" block, for
// tokens that abuse it as an HMAC secret.
func (i *Issuer) PublicKeyPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(i.key.Public())
	if err != nil {
		i.tb.Fatalf("jwttest: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// JWKMarshal returns the issuer's public key as a JWK.
func (i *Issuer) JWKMarshal() jwkset.JWKMarshal {
	meta := jwkset.JWKMetadataOptions{KID: i.Kid, USE: jwkset.UseSig}
	if !i.OmitJWKAlg {
		meta.ALG = jwkset.ALG(i.Alg)
	}
	k, err := jwkset.NewJWKFromKey(i.key.Public(), jwkset.JWKOptions{Metadata: meta})
	if err != nil {
		i.tb.Fatalf("jwttest: JWK: %v", err)
	}
	return k.Marshal()
}

// JWKS returns a JSON Web Key Set holding the issuer's public key.
func (i *Issuer) JWKS() []byte { return JWKS(i.tb, i) }

// JWKS returns a JSON Web Key Set holding the public keys of the issuers.
func JWKS(tb testing.TB, issuers ...*Issuer) []byte {
	tb.Helper()
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{}}
	for _, i := range issuers {
		set.Keys = append(set.Keys, i.JWKMarshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		tb.Fatalf("jwttest: %v", err)
	}
	return b
}

// WriteJWKSFile writes the issuer's key set to a file in a test directory
// and returns its path.
func (i *Issuer) WriteJWKSFile(tb testing.TB) string { return WriteFile(tb, i.JWKS()) }

// WriteFile writes data to a new file in a test directory and returns its
// path.
func WriteFile(tb testing.TB, data []byte) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "jwks.json")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		tb.Fatalf("jwttest: %v", err)
	}
	return p
}

// Claims returns claims for a valid token: iss, sub, aud (DefaultAudience
// unless audiences are given; one is a string, more a list), iat, and exp
// an hour ahead.
func (i *Issuer) Claims(sub string, audiences ...string) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{"iss": i.Iss, "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	switch len(audiences) {
	case 0:
		c["aud"] = DefaultAudience
	case 1:
		c["aud"] = audiences[0]
	default:
		c["aud"] = audiences
	}
	return c
}

// Sign returns a token with the claims, signed by the issuer's key with its
// algorithm and kid.
func (i *Issuer) Sign(claims jwt.MapClaims) string {
	return i.SignWithHeader(map[string]any{"kid": i.Kid}, claims)
}

// SignWithHeader signs like Sign with the given header fields. "alg" may
// name another algorithm of the key's type (RS256 for a PS256 issuer);
// without "kid" the token has none.
func (i *Issuer) SignWithHeader(header map[string]any, claims jwt.MapClaims) string {
	alg := i.Alg
	if a, ok := header["alg"].(string); ok {
		alg = a
	}
	m := jwt.GetSigningMethod(alg)
	if m == nil {
		i.tb.Fatalf("jwttest: unknown algorithm %q", alg)
	}
	t := jwt.NewWithClaims(m, claims)
	for k, v := range header {
		t.Header[k] = v
	}
	s, err := t.SignedString(i.key)
	if err != nil {
		i.tb.Fatalf("jwttest: signing: %v", err)
	}
	return s
}

// RawHeader returns the JSON header Sign would write: the issuer's alg and
// kid, for SignRaw.
func (i *Issuer) RawHeader() string {
	return `{"alg":"` + i.Alg + `","kid":"` + i.Kid + `"}`
}

// SignRaw returns a token whose header and claims segments are the given
// JSON texts verbatim, so they may hold what a map cannot (a member named
// twice, numbers beyond float64's integers, bytes that are not UTF-8),
// validly signed by the issuer's key with its algorithm. The header should
// name that algorithm and the issuer's kid (RawHeader).
func (i *Issuer) SignRaw(header, claims string) string {
	i.tb.Helper()
	m := jwt.GetSigningMethod(i.Alg)
	if m == nil {
		i.tb.Fatalf("jwttest: unknown algorithm %q", i.Alg)
	}
	enc := base64.RawURLEncoding
	s := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(claims))
	sig, err := m.Sign(s, i.key)
	if err != nil {
		i.tb.Fatalf("jwttest: signing: %v", err)
	}
	return s + "." + enc.EncodeToString(sig)
}

// SignHMAC returns an HS256 token whose secret is the given bytes (for
// instance the issuer's public key, the classic algorithm confusion
// attack), with the issuer's kid.
func (i *Issuer) SignHMAC(secret []byte, claims jwt.MapClaims) string {
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	t.Header["kid"] = i.Kid
	s, err := t.SignedString(secret)
	if err != nil {
		i.tb.Fatalf("jwttest: signing: %v", err)
	}
	return s
}

// Unsigned returns an `alg: none` token with the kid and claims.
func Unsigned(kid string, claims jwt.MapClaims) string {
	h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "JWT", "kid": kid})
	c, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(h) + "." + enc.EncodeToString(c) + "."
}

// KeyServer serves a key set over HTTP on 127.0.0.1 and counts requests.
type KeyServer struct {
	// URL is the key set's URL.
	URL string

	mu     sync.Mutex
	body   []byte
	status int
	hits   atomic.Int64
}

// ServeJWKS starts a key server answering jwks; it stops when the test ends.
func ServeJWKS(tb testing.TB, jwks []byte) *KeyServer {
	tb.Helper()
	ks := &KeyServer{body: jwks, status: http.StatusOK}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		ks.hits.Add(1)
		ks.mu.Lock()
		body, status := ks.body, ks.status
		ks.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(body) //nolint:errcheck
	}))
	tb.Cleanup(srv.Close)
	ks.URL = srv.URL + "/.well-known/jwks.json"
	return ks
}

// ServeHandler serves h over HTTP on 127.0.0.1 until the test ends and
// returns its base URL.
func ServeHandler(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// Set replaces the key set served from now on.
func (ks *KeyServer) Set(jwks []byte) {
	ks.mu.Lock()
	ks.body = jwks
	ks.mu.Unlock()
}

// SetStatus makes the server answer with status (and the current body).
func (ks *KeyServer) SetStatus(status int) {
	ks.mu.Lock()
	ks.status = status
	ks.mu.Unlock()
}

// Hits returns how many requests the server answered.
func (ks *KeyServer) Hits() int64 { return ks.hits.Load() }

// Clock is a settable clock for Options.Now.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at the current time.
func NewClock() *Clock { return &Clock{now: time.Now()} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
