package jwtauth

import (
	"encoding/base64"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/celrules"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// inlineProvider is a provider trusting iss with the inline key set.
func inlineProvider(iss string, jwks []byte, audiences ...string) config.JWTProvider {
	return config.JWTProvider{Issuer: iss, Audiences: audiences, JWKS: &config.JWKSource{Kind: config.JWKSInline, Inline: string(jwks)}}
}

func mustValidator(t *testing.T, provs ...config.JWTProvider) *Validator {
	t.Helper()
	o := Options{}.withDefaults()
	v, err := newValidator(provs, false, &o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidateAlgorithms accepts a token of every accepted algorithm.
func TestValidateAlgorithms(t *testing.T) {
	for _, alg := range Algorithms {
		t.Run(alg, func(t *testing.T) {
			iss := jwttest.NewIssuer(t, alg)
			v := mustValidator(t, inlineProvider(iss.Iss, iss.JWKS(), jwttest.DefaultAudience))
			claims, f := v.Validate([]byte(iss.Sign(iss.Claims("alice"))))
			if f != OK {
				t.Fatalf("refused: %v", f)
			}
			if claims["sub"] != "alice" || claims["iss"] != iss.Iss {
				t.Fatalf("claims = %v", claims)
			}
		})
	}
}

// TestValidateRefusals lists every reason a token is refused.
func TestValidateRefusals(t *testing.T) {
	rsa := jwttest.NewIssuer(t, "RS256")
	es := jwttest.NewIssuer(t, "ES256")
	es384 := jwttest.NewIssuer(t, "ES384")
	other := jwttest.NewIssuer(t, "RS256") // same iss, key not in the set
	other.Kid = rsa.Kid
	stranger := jwttest.NewIssuer(t, "RS256") // kid not in the set
	anyAlg := jwttest.NewIssuer(t, "RS256")
	anyAlg.OmitJWKAlg = true

	jwks := jwttest.JWKS(t, rsa, es, anyAlg)
	v := mustValidator(t, inlineProvider(jwttest.DefaultIssuer, jwks, jwttest.DefaultAudience, "other-aud"))

	with := func(c jwt.MapClaims, k string, val any) jwt.MapClaims {
		out := jwt.MapClaims{}
		for a, b := range c {
			out[a] = b
		}
		if val == nil {
			delete(out, k)
		} else {
			out[k] = val
		}
		return out
	}
	good := rsa.Claims("alice")
	now := time.Now()
	enc := base64.RawURLEncoding
	tests := []struct {
		name  string
		token string
		want  Failure
	}{
		{"valid", rsa.Sign(good), OK},
		{"valid ES256", es.Sign(good), OK},
		{"valid PS256 with a key without alg", anyAlg.SignWithHeader(map[string]any{"kid": anyAlg.Kid, "alg": "PS256"}, good), OK},
		{"valid second audience", rsa.Sign(with(good, "aud", []string{"x", "other-aud"})), OK},
		{"expired within leeway", rsa.Sign(with(good, "exp", now.Add(-Leeway/2).Unix())), OK},
		{"empty", "", FailMissing},
		{"not a JWT", "hello", FailMalformed},
		{"two segments", "a.b", FailMalformed},
		{"bad base64", "!!!.???.***", FailMalformed},
		{"header not JSON", enc.EncodeToString([]byte("{")) + "." + enc.EncodeToString([]byte("{}")) + ".sig", FailMalformed},
		{"too large", strings.Repeat("a", MaxTokenSize+1), FailMalformed},
		{"alg none", jwttest.Unsigned(rsa.Kid, good), FailAlgorithm},
		{"HS256 with the public key as secret", rsa.SignHMAC(rsa.PublicKeyPEM(), good), FailAlgorithm},
		{"HS256 with the JWKS as secret", rsa.SignHMAC(jwks, good), FailAlgorithm},
		{"unknown alg", enc.EncodeToString([]byte(`{"alg":"XX256","kid":"k"}`)) + "." + enc.EncodeToString([]byte(`{"iss":"`+jwttest.DefaultIssuer+`"}`)) + ".c2ln", FailAlgorithm},
		{"no kid", rsa.SignWithHeader(map[string]any{}, good), FailNoKeyID},
		{"unknown kid", stranger.Sign(good), FailUnknownKey},
		{"key alg differs from token alg", rsa.SignWithHeader(map[string]any{"kid": rsa.Kid, "alg": "PS256"}, good), FailKeyMismatch},
		{"EC key with another curve's alg", es384.SignWithHeader(map[string]any{"kid": es.Kid}, good), FailKeyMismatch},
		{"RSA token with an EC key", rsa.SignWithHeader(map[string]any{"kid": es.Kid}, good), FailKeyMismatch},
		{"bad signature", other.Sign(good), FailSignature},
		{"tampered claims", tamper(rsa.Sign(good)), FailSignature},
		{"expired", rsa.Sign(with(good, "exp", now.Add(-2*Leeway).Unix())), FailExpired},
		{"not yet valid", rsa.Sign(with(good, "nbf", now.Add(2*Leeway).Unix())), FailNotYetValid},
		{"nbf within leeway", rsa.Sign(with(good, "nbf", now.Add(Leeway/2).Unix())), OK},
		{"wrong issuer", rsa.Sign(with(good, "iss", "https://evil.test")), FailIssuer},
		{"issuer not a string", rsa.Sign(with(good, "iss", 42)), FailIssuer},
		{"no issuer", rsa.Sign(with(good, "iss", nil)), FailIssuer},
		{"wrong audience", rsa.Sign(with(good, "aud", "elsewhere")), FailAudience},
		{"wrong audience list", rsa.Sign(with(good, "aud", []string{"a", "b"})), FailAudience},
		{"no audience", rsa.Sign(with(good, "aud", nil)), FailMissingAud},
		{"no exp", rsa.Sign(with(good, "exp", nil)), FailMissingExp},
		{"exp not a number", rsa.Sign(with(good, "exp", "tomorrow")), FailMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claims, f := v.Validate([]byte(tc.token))
			if f != tc.want {
				t.Fatalf("Validate = %v (%d), want %v", f, f, tc.want)
			}
			if (claims != nil) != (f == OK) {
				t.Fatalf("claims %v with %v", claims, f)
			}
		})
	}
}

// tamper changes the claims of a token, keeping its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	enc := base64.RawURLEncoding
	c, _ := enc.DecodeString(parts[1])
	c = []byte(strings.Replace(string(c), `"alice"`, `"admin"`, 1))
	parts[1] = enc.EncodeToString(c)
	return strings.Join(parts, ".")
}

// TestValidateRequiredClaims checks requiredClaims, its default and the
// empty list.
func TestValidateRequiredClaims(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	base := jwt.MapClaims{"iss": iss.Iss}
	tests := []struct {
		name     string
		required []string // nil: default
		claims   jwt.MapClaims
		want     Failure
	}{
		{"default requires exp", nil, base, FailMissingExp},
		{"empty list requires nothing", []string{}, base, OK},
		{"sub", []string{"sub"}, base, FailMissingSub},
		{"nbf", []string{"nbf"}, base, FailMissingNbf},
		{"aud", []string{"aud"}, base, FailMissingAud},
		{"all present", []string{"exp", "nbf", "aud", "iss", "sub"}, jwt.MapClaims{
			"iss": iss.Iss, "sub": "s", "aud": "any", "exp": time.Now().Add(time.Hour).Unix(), "nbf": time.Now().Unix(),
		}, OK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := inlineProvider(iss.Iss, iss.JWKS())
			p.JWTValidationOptions = &config.JWTValidationOptions{RequiredClaims: tc.required}
			v := mustValidator(t, p)
			if _, f := v.Validate([]byte(iss.Sign(tc.claims))); f != tc.want {
				t.Fatalf("Validate = %v, want %v", f, tc.want)
			}
		})
	}
}

// TestValidateProviders picks the provider by iss and checks its own keys
// and audiences.
func TestValidateProviders(t *testing.T) {
	a := jwttest.NewIssuer(t, "RS256")
	a.Iss = "https://a.test"
	b := jwttest.NewIssuer(t, "EdDSA")
	b.Iss = "https://b.test"
	v := mustValidator(t,
		inlineProvider(a.Iss, a.JWKS(), "aud-a"),
		inlineProvider(b.Iss, b.JWKS()), // any audience
	)
	tests := []struct {
		name  string
		token string
		want  Failure
	}{
		{"a", a.Sign(a.Claims("x", "aud-a")), OK},
		{"b any audience", b.Sign(b.Claims("x", "whatever")), OK},
		{"a wrong audience", a.Sign(a.Claims("x", "aud-b")), FailAudience},
		// b's key with a's issuer: a's key set has no such kid.
		{"b key claims a", b.Sign(jwt.MapClaims{"iss": a.Iss, "aud": "aud-a", "exp": time.Now().Add(time.Hour).Unix()}), FailUnknownKey},
		{"unknown issuer", a.Sign(jwt.MapClaims{"iss": "https://c.test", "exp": time.Now().Add(time.Hour).Unix()}), FailIssuer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, f := v.Validate([]byte(tc.token)); f != tc.want {
				t.Fatalf("Validate = %v, want %v", f, tc.want)
			}
		})
	}
}

// TestValidateClock uses the injected clock for exp and nbf.
func TestValidateClock(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	clock := jwttest.NewClock()
	o := Options{Now: clock.Now}.withDefaults()
	v, err := newValidator([]config.JWTProvider{inlineProvider(iss.Iss, iss.JWKS())}, true, &o)
	if err != nil {
		t.Fatal(err)
	}
	tok := []byte(iss.Sign(jwt.MapClaims{"iss": iss.Iss, "exp": clock.Now().Add(time.Minute).Unix()}))
	if _, f := v.Validate(tok); f != OK {
		t.Fatalf("fresh token refused: %v", f)
	}
	clock.Advance(time.Minute + Leeway + time.Second)
	if _, f := v.Validate(tok); f != FailExpired {
		t.Fatalf("after expiry + leeway: %v, want %v", f, FailExpired)
	}
}

// TestFailureStrings keeps every failure described.
func TestFailureStrings(t *testing.T) {
	seen := map[string]Failure{}
	for f := Failure(0); f < numFailures; f++ {
		s := f.String()
		if s == "" || strings.ContainsAny(s, `"\`) {
			t.Errorf("failure %d: bad text %q", f, s)
		}
		if g, dup := seen[s]; dup {
			t.Errorf("failures %d and %d share %q", g, f, s)
		}
		seen[s] = f
	}
	if Failure(200).String() != "unknown failure" {
		t.Error("out of range failure")
	}
}

// FuzzValidate feeds arbitrary tokens to the validator: it never panics and
// accepts nothing but the one genuine token.
func FuzzValidate(f *testing.F) {
	iss := jwttest.NewIssuer(f, "ES256")
	good := iss.Sign(iss.Claims("alice"))
	o := Options{}.withDefaults()
	v, err := newValidator([]config.JWTProvider{inlineProvider(iss.Iss, iss.JWKS())}, true, &o)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(tamper(good))
	f.Add(jwttest.Unsigned(iss.Kid, iss.Claims("alice")))
	f.Add(iss.SignHMAC(iss.PublicKeyPEM(), iss.Claims("alice")))
	f.Add("e30.e30.")
	f.Fuzz(func(t *testing.T, tok string) {
		claims, fail := v.Validate([]byte(tok))
		if fail == OK && tok != good {
			// ECDSA signatures are malleable only with the key; anything
			// else accepted is a forgery.
			t.Fatalf("accepted %q: %v", tok, claims)
		}
	})
}

// TestValidateExactNumbers: numeric claims are exact (int64, uint64 above
// it, float64 for the rest), at any depth, and rules compare them as
// before: a rule naming one numeric id admits no other, and int and double
// claims compare with int and double literals.
func TestValidateExactNumbers(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	v := mustValidator(t, inlineProvider(iss.Iss, iss.JWKS(), jwttest.DefaultAudience))
	exp := time.Now().Add(time.Hour).Unix()
	sign := func(extra string) []byte {
		return []byte(iss.SignRaw(iss.RawHeader(), `{"iss":"`+iss.Iss+`","aud":"`+jwttest.DefaultAudience+`","exp":`+strconv.FormatInt(exp, 10)+extra+`}`))
	}
	claims, f := v.Validate(sign(`,"uid":1234567890123456789,"big":18446744073709551615,"neg":-9223372036854775808,` +
		`"score":0.75,"e":1e3,"huge":18446744073709551616,"org":{"id":9007199254740993,"ids":[1,2.5]}`))
	if f != OK {
		t.Fatal(f)
	}
	org, _ := claims["org"].(map[string]any)
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"exp", claims["exp"], exp},
		{"uid", claims["uid"], int64(1234567890123456789)},
		{"big", claims["big"], uint64(18446744073709551615)},
		{"neg", claims["neg"], int64(-9223372036854775808)},
		{"score", claims["score"], 0.75},
		{"e", claims["e"], float64(1000)},
		{"huge", claims["huge"], float64(18446744073709551616)},
		{"org.id", org["id"], int64(9007199254740993)},
		{"org.ids", org["ids"], []any{int64(1), 2.5}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	// exp 0 is 1970, not "no exp" (golang-jwt's reading of a float64 zero).
	zero := iss.SignRaw(iss.RawHeader(), `{"iss":"`+iss.Iss+`","aud":"`+jwttest.DefaultAudience+`","exp":0}`)
	if _, f := v.Validate([]byte(zero)); f != FailExpired {
		t.Errorf("exp 0: %v, want %v", f, FailExpired)
	}
	// A number beyond float64 is malformed, as it was when read as float64.
	if _, f := v.Validate(sign(`,"x":1e999`)); f != FailMalformed {
		t.Errorf("1e999: %v, want %v", f, FailMalformed)
	}

	rules := []struct {
		rule  string
		claim string
		want  bool
	}{
		{"jwt.uid == 1234567890123456789", `"uid":1234567890123456789`, true},
		{"jwt.uid == 1234567890123456789", `"uid":1234567890123456800`, false},
		{"jwt.uid == 1234567890123456789", `"uid":1234567890123456700`, false},
		{"jwt.uid in [1234567890123456789]", `"uid":1234567890123456788`, false},
		{"jwt.org.id == 9007199254740993", `"org":{"id":9007199254740992}`, false},
		{"jwt.big == 18446744073709551615u", `"big":18446744073709551615`, true},
		{"jwt.big > 9223372036854775807", `"big":18446744073709551615`, true},
		{"jwt.exp > 0", `"x":0`, true},
		{"jwt.exp > 1000.5", `"x":0`, true},
		{"jwt.age >= 18", `"age":18`, true},
		{"jwt.age >= 18", `"age":17`, false},
		{"jwt.age >= 18.0", `"age":18`, true},
		{"jwt.age == 18.0", `"age":18`, true},
		{"jwt.age >= 18", `"age":18.0`, true},
		{"jwt.score > 0.5", `"score":0.75`, true},
		{"jwt.score > 0", `"score":0.75`, true},
		{"jwt.score < 1", `"score":0.75`, true},
		{"jwt.tenant in [1, 2]", `"tenant":2`, true},
		{"jwt.tenant in [1, 2]", `"tenant":2.0`, true},
		{"jwt.tenant in [1, 2]", `"tenant":3`, false},
	}
	for _, r := range rules {
		rs, err := celrules.Compile(&config.CELRuleSet{Rules: []config.CELRule{{Expr: r.rule}}})
		if err != nil {
			t.Fatalf("%s: %v", r.rule, err)
		}
		claims, f := v.Validate(sign("," + r.claim))
		if f != OK {
			t.Fatalf("%s: %v", r.claim, f)
		}
		if got := rs.Allowed(&celrules.Input{Claims: claims}); got != r.want {
			t.Errorf("%s with %s: allowed %v, want %v", r.rule, r.claim, got, r.want)
		}
	}
}
