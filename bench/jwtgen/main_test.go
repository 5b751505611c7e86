package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy/jwtauth"
)

// TestTokensPassTheGatewaysValidator: the key set and both tokens jwtgen
// writes are what the policy route of bench/gateway.yaml accepts: the
// gateway's own validator, with the route's issuer and audience and the key
// set inline, finds both tokens valid, with the subs the authorization rule
// tells apart, and an expiry ttl ahead.
func TestTokensPassTheGatewaysValidator(t *testing.T) {
	dir := t.TempDir()
	jwks, tok, denied := filepath.Join(dir, "jwks.json"), filepath.Join(dir, "token"), filepath.Join(dir, "denied-token")
	const iss, aud = "https://bench.relaygate.test", "bench"
	if err := run(jwks, tok, denied, iss, aud, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	set := read(t, jwks)
	if strings.Contains(set, "\n") || strings.Contains(set, "'") || strings.Contains(set, `"d"`) {
		t.Fatalf("key set %q must be one line without single quotes (it goes into a quoted YAML scalar) and hold no private key", set)
	}
	p, err := jwtauth.New(&config.JWTAuth{Mode: config.AuthModeStrict, Providers: []config.JWTProvider{{
		Issuer: iss, Audiences: []string{aud}, JWKS: &config.JWKSource{Kind: config.JWKSInline, Inline: set},
	}}}, jwtauth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for path, sub := range map[string]string{tok: "bench", denied: "not-bench"} {
		claims, f := p.Validator().Validate([]byte(read(t, path)))
		if f != jwtauth.OK {
			t.Fatalf("%s: %v", filepath.Base(path), f)
		}
		if claims["sub"] != sub {
			t.Errorf("%s: sub %v, want %q", filepath.Base(path), claims["sub"], sub)
		}
		exp, ok := claims["exp"].(int64) // numeric claims are exact (jwtauth)
		if until := time.Until(time.Unix(exp, 0)); !ok || until < time.Hour || until > 2*time.Hour {
			t.Errorf("%s: exp %v is not about 2h ahead", filepath.Base(path), claims["exp"])
		}
	}
	fi, err := os.Stat(tok)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", fi.Mode().Perm())
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
