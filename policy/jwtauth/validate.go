package jwtauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/credential"
)

// Leeway is the clock skew allowed on exp and nbf: 60 seconds, the default
// of the jsonwebtoken crate agentgateway uses.
const Leeway = 60 * time.Second

// MaxTokenSize bounds the token length; longer tokens are malformed.
const MaxTokenSize = 16 << 10

// Algorithms are the accepted signature algorithms. HMAC (HS*) and "none"
// are refused: a shared secret has no place in a public key set, and HS256
// "signed" with a public key's bytes must never verify.
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Failure says why a request was not authenticated; OK when it was.
type Failure uint8

// Failures, each with a fixed description (Failure.String) that responses
// carry; token contents never appear in them.
const (
	OK Failure = iota
	FailMissing
	FailMalformed
	FailAlgorithm
	FailNoKeyID
	FailUnknownKey
	FailKeyMismatch
	FailNoKeys
	FailSignature
	FailExpired
	FailNotYetValid
	FailIssuer
	FailAudience
	FailMissingExp
	FailMissingNbf
	FailMissingAud
	FailMissingIss
	FailMissingSub
	// FailAlreadyAuthenticated: mcpAuthentication found claims another
	// policy validated (and whose token it removed).
	FailAlreadyAuthenticated
	// FailCritical: the header's crit lists an extension (RFC 7515
	// 4.1.11); the validator understands none.
	FailCritical
	// FailDuplicate: the header or the claims name a member twice in one
	// object (encoding/json would keep the last silently).
	FailDuplicate
	// FailDateRange: exp, nbf or iat is a number beyond ±2^53 seconds.
	FailDateRange
	numFailures
)

var failureText = [numFailures]string{
	OK:                       "ok",
	FailMissing:              "no token",
	FailMalformed:            "malformed token",
	FailAlgorithm:            "unsupported signing algorithm",
	FailNoKeyID:              "token header has no kid",
	FailUnknownKey:           "unknown signing key",
	FailKeyMismatch:          "signing key does not match the token algorithm",
	FailNoKeys:               "signing keys unavailable",
	FailSignature:            "invalid signature",
	FailExpired:              "token expired",
	FailNotYetValid:          "token not yet valid",
	FailIssuer:               "untrusted issuer",
	FailAudience:             "invalid audience",
	FailMissingExp:           "missing required claim exp",
	FailMissingNbf:           "missing required claim nbf",
	FailMissingAud:           "missing required claim aud",
	FailMissingIss:           "missing required claim iss",
	FailMissingSub:           "missing required claim sub",
	FailAlreadyAuthenticated: "token already validated by another policy",
	FailCritical:             "unsupported critical header parameter",
	FailDuplicate:            "duplicate member name",
	FailDateRange:            "numeric date out of range",
}

// String describes the failure.
func (f Failure) String() string {
	if f < numFailures {
		return failureText[f]
	}
	return "unknown failure"
}

var missingClaim = map[string]Failure{
	"exp": FailMissingExp, "nbf": FailMissingNbf, "aud": FailMissingAud, "iss": FailMissingIss, "sub": FailMissingSub,
}

// provider is one trusted issuer.
type provider struct {
	issuer    string
	audiences []string
	required  []string // claims that must be present
	keys      *keySet
	kf        keyfunc.Keyfunc
	validator *jwt.Validator
}

// Validator checks tokens against trusted issuers. It is immutable and safe
// for concurrent use.
type Validator struct {
	providers []*provider
	parser    *jwt.Parser
	keyfunc   jwt.Keyfunc
	cache     *tokenCache // nil: every token is checked
	now       func() time.Time
}

// Internal keyfunc refusals.
var (
	errUnknownIssuer = errors.New("untrusted issuer")
	errNoKeyID       = errors.New("no kid")
	errCurve         = errors.New("curve does not match algorithm")
)

// newValidator builds the validator; single says the file used the
// single-issuer form, so errors name "jwks" rather than "providers[0].jwks".
func newValidator(provs []config.JWTProvider, single bool, o *Options) (*Validator, error) {
	v := &Validator{
		// JSON numbers are decoded as json.Number and made exact once the
		// token is valid (exactNumbers).
		parser: jwt.NewParser(jwt.WithValidMethods(Algorithms), jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding(), jwt.WithJSONNumber()),
		cache:  newTokenCache(),
		now:    o.Now,
	}
	v.keyfunc = v.lookupKey
	for i := range provs {
		cfg := &provs[i]
		field := indexed("providers", i)
		if single {
			field = ""
		}
		p, err := newProvider(cfg, field, o)
		if err != nil {
			return nil, err
		}
		v.providers = append(v.providers, p)
	}
	if len(v.providers) == 0 {
		return nil, fieldErrorf("providers", "at least one provider is required")
	}
	return v, nil
}

// newProvider builds one provider; field names it in errors ("" for the
// single-issuer form, "providers[i]").
func newProvider(cfg *config.JWTProvider, field string, o *Options) (*provider, error) {
	p := &provider{issuer: cfg.Issuer, audiences: cfg.Audiences}
	jwksField := policy.JoinField(field, "jwks")
	if cfg.JWKS == nil {
		return nil, fieldErrorf(jwksField, "required")
	}
	switch cfg.JWKS.Kind {
	case config.JWKSInline:
		s, err := parseKeySet([]byte(cfg.JWKS.Inline), true)
		if err != nil {
			return nil, fieldErrorf(jwksField, "invalid key set: %v", err)
		}
		p.keys = staticKeySet(s)
	case config.JWKSFile:
		s, err := loadKeyFile(cfg.JWKS.File)
		if err != nil {
			return nil, fieldErrorf(jwksField+".file", "cannot load key set %q: %v", cfg.JWKS.File, err)
		}
		p.keys = staticKeySet(s)
	case config.JWKSURL:
		if cfg.JWKS.URL == "" {
			return nil, fieldErrorf(jwksField+".url", "must not be empty")
		}
		ttl := DefaultCacheDuration
		if cfg.JWKS.CacheDuration != nil {
			ttl = cfg.JWKS.CacheDuration.Duration
		}
		p.keys = remoteKeySet(cfg.JWKS.URL, ttl, o)
	default:
		return nil, fieldErrorf(jwksField, "required")
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: p.keys})
	if err != nil {
		return nil, fieldErrorf(jwksField, "%v", err)
	}
	p.kf = kf
	for _, c := range cfg.JWTValidationOptions.Required() {
		if _, ok := missingClaim[c]; !ok {
			return nil, fieldErrorf(policy.JoinField(field, "jwtValidationOptions.requiredClaims"), "claim %q cannot be required", c)
		}
		p.required = append(p.required, c)
	}
	// A configured issuer requires iss (it selects the provider anyway);
	// configured audiences require aud.
	if !slices.Contains(p.required, "iss") {
		p.required = append(p.required, "iss")
	}
	opts := []jwt.ParserOption{jwt.WithLeeway(Leeway), jwt.WithTimeFunc(o.Now), jwt.WithIssuer(cfg.Issuer)}
	if len(cfg.Audiences) > 0 {
		opts = append(opts, jwt.WithAudience(cfg.Audiences...))
		if !slices.Contains(p.required, "aud") {
			p.required = append(p.required, "aud")
		}
	}
	p.validator = jwt.NewValidator(opts...)
	return p, nil
}

// provider returns the provider trusting iss, or nil.
func (v *Validator) provider(claims jwt.MapClaims) *provider {
	iss, ok := claims["iss"].(string)
	if !ok {
		return nil
	}
	for _, p := range v.providers {
		if p.issuer == iss {
			return p
		}
	}
	return nil
}

// lookupKey is the jwt.Keyfunc: it checks the token's form (strictForm),
// picks the provider by its (not yet verified) iss and returns that
// provider's key for the kid.
func (v *Validator) lookupKey(t *jwt.Token) (any, error) {
	if f := strictForm(t); f != OK {
		return nil, refusal(f)
	}
	claims, _ := t.Claims.(jwt.MapClaims)
	p := v.provider(claims)
	if p == nil {
		return nil, errUnknownIssuer
	}
	if kid, ok := t.Header["kid"].(string); !ok || kid == "" {
		return nil, errNoKeyID
	}
	key, err := p.kf.Keyfunc(t)
	if err != nil {
		return nil, err
	}
	if ek, ok := key.(*ecdsa.PublicKey); ok && ek.Curve != curveFor(t.Method.Alg()) {
		return nil, errCurve
	}
	return key, nil
}

func curveFor(alg string) elliptic.Curve {
	switch alg {
	case "ES256":
		return elliptic.P256()
	case "ES384":
		return elliptic.P384()
	case "ES512":
		return elliptic.P521()
	}
	return nil
}

// Validate checks the token: size, form, algorithm, issuer, key, signature,
// required claims, then the time and audience claims. On OK the claims are
// returned.
func (v *Validator) Validate(token []byte) (map[string]any, Failure) {
	if len(token) == 0 {
		return nil, FailMissing
	}
	if len(token) > MaxTokenSize {
		return nil, FailMalformed
	}
	var key credential.MemoKey
	var before [4]*keySnapshot // the providers' key sets before the check
	cache := v.cache != nil && len(v.providers) <= len(before)
	if cache {
		var claims map[string]any
		var hit bool
		if claims, key, hit = v.cache.lookup(token, v.now()); hit {
			return claims, OK
		}
		for i, p := range v.providers {
			before[i] = p.keys.snap.Load()
		}
	}
	claims := jwt.MapClaims{}
	t, err := v.parser.ParseWithClaims(string(token), claims, v.keyfunc)
	if err != nil {
		return nil, classifyParse(t, err)
	}
	p := v.provider(claims)
	if p == nil { // cannot happen: lookupKey found one
		return nil, FailIssuer
	}
	for _, c := range p.required {
		if claims[c] == nil {
			return nil, missingClaim[c]
		}
	}
	if err := p.validator.Validate(claims); err != nil {
		return nil, classifyClaims(err)
	}
	exp, _ := claims.GetExpirationTime() // read while a json.Number
	if !exactNumbers(claims) {
		return nil, FailMalformed
	}
	if cache {
		for i, q := range v.providers {
			// Remembered only when the key set that checked it is still
			// the provider's (no fetch replaced it meanwhile).
			if q == p && before[i] != nil && q.keys.snap.Load() == before[i] {
				v.cache.store(key, claims, exp, p, before[i], v.now())
			}
		}
	}
	return claims, OK
}

// exactNumbers replaces the json.Number values of valid claims, at any
// depth, with an int64 when the number is an integer within its range, a
// uint64 when an integer above it, else a float64: as API key metadata
// holds numbers (config/decode), and as agentgateway's claims do. Read as
// float64, an integer above 2^53 would round, and a rule naming one user's
// numeric id would admit its neighbours. False when a number is beyond
// float64's range (encoding/json refuses such a number as a float64; the
// token is malformed).
func exactNumbers(claims map[string]any) bool {
	for k, e := range claims {
		n, ok := exactValue(e)
		if !ok {
			return false
		}
		claims[k] = n
	}
	return true
}

func exactValue(v any) (any, bool) {
	switch v := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i, true
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return u, true
		}
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	case map[string]any:
		return v, exactNumbers(v)
	case []any:
		for i, e := range v {
			n, ok := exactValue(e)
			if !ok {
				return nil, false
			}
			v[i] = n
		}
	}
	return v, true
}

// classifyParse maps a parse or signature error to a Failure.
func classifyParse(t *jwt.Token, err error) Failure {
	var r refusal
	switch {
	case errors.As(err, &r):
		return Failure(r)
	case errors.Is(err, errUnknownIssuer):
		return FailIssuer
	case errors.Is(err, errNoKeyID):
		return FailNoKeyID
	case errors.Is(err, errNoKeys):
		return FailNoKeys
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return FailUnknownKey
	case errors.Is(err, errCurve), errors.Is(err, keyfunc.ErrKeyfunc):
		return FailKeyMismatch
	case errors.Is(err, jwt.ErrTokenMalformed):
		return FailMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		if t != nil && t.Method != nil && !slices.Contains(Algorithms, t.Method.Alg()) {
			return FailAlgorithm
		}
		return FailSignature
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		// alg missing or unknown to the library.
		return FailAlgorithm
	}
	return FailMalformed
}

// classifyClaims maps a claims validation error to a Failure.
func classifyClaims(err error) Failure {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return FailExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return FailNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return FailAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return FailIssuer
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return FailMissingAud
	}
	return FailMalformed
}
