package jwtauth

import (
	"github.com/relaygate/gateway/policy/policytest"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// BenchmarkJWTValidate measures the validation of one token per algorithm
// family (parse, key lookup, signature, claims).
func BenchmarkJWTValidate(b *testing.B) {
	for _, alg := range []string{"RS256", "ES256", "EdDSA"} {
		b.Run(alg, func(b *testing.B) {
			iss := jwttest.NewIssuer(b, alg)
			o := Options{}.withDefaults()
			v, err := newValidator([]config.JWTProvider{inlineProvider(iss.Iss, iss.JWKS(), jwttest.DefaultAudience)}, true, &o)
			if err != nil {
				b.Fatal(err)
			}
			tok := []byte(iss.Sign(iss.Claims("alice")))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, f := v.Validate(tok); f != OK {
					b.Fatal(f)
				}
			}
		})
	}
}

// BenchmarkJWTAuthPolicy measures the policy on a request with a valid
// token, including removing the header.
func BenchmarkJWTAuthPolicy(b *testing.B) {
	iss := jwttest.NewIssuer(b, "ES256")
	p, err := New(singleJWT(iss, "", nil), Options{})
	if err != nil {
		b.Fatal(err)
	}
	header := "Bearer " + iss.Sign(iss.Claims("alice"))
	fctx := policytest.NewRequest("GET", "/")
	c := &policy.Ctx{}
	b.ReportAllocs()
	for b.Loop() {
		fctx.Request.Header.Set("Authorization", header)
		c.Reset()
		c.Fast, c.Path = fctx, []byte("/")
		if p.OnRequest(c) != policy.Continue {
			b.Fatal("refused")
		}
	}
}

// BenchmarkStrictForm measures the form checks (crit, member names twice,
// numeric date range) a valid token goes through before its signature.
func BenchmarkStrictForm(b *testing.B) {
	iss := jwttest.NewIssuer(b, "ES256")
	claims := iss.Claims("alice")
	claims["realm_access"] = map[string]any{"roles": []string{"user", "reader"}}
	tok, _, err := jwt.NewParser().ParseUnverified(iss.Sign(claims), jwt.MapClaims{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if f := strictForm(tok); f != OK {
			b.Fatal(f)
		}
	}
}
