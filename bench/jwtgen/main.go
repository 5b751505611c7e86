// Command jwtgen makes what the policy route of bench/gateway.yaml needs,
// fresh for each bench/run.sh run: an ES256 key pair, the public key as a
// JSON Web Key Set (given to the gateway inline), a token the route accepts
// (sub "bench") and a token it must refuse at its authorization rule
// (sub "not-bench", same key). The private key never leaves this process.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// kid names the key in the set and in the tokens' headers.
const kid = "bench-es256"

func main() {
	jwksOut := flag.String("jwks", "", "write the public key set (JWKS, one line of JSON) to this file (required)")
	tokenOut := flag.String("token", "", "write the accepted token (sub \"bench\") to this file (required)")
	deniedOut := flag.String("denied-token", "", "write a token the authorization rule refuses (sub \"not-bench\") to this file")
	iss := flag.String("iss", "https://bench.relaygate.test", "the tokens' iss")
	aud := flag.String("aud", "bench", "the tokens' aud")
	ttl := flag.Duration("ttl", 24*time.Hour, "how long the tokens stay valid")
	flag.Parse()
	if *jwksOut == "" || *tokenOut == "" {
		fmt.Fprintln(os.Stderr, "jwtgen: -jwks and -token are required")
		os.Exit(2)
	}
	if err := run(*jwksOut, *tokenOut, *deniedOut, *iss, *aud, *ttl); err != nil {
		fmt.Fprintf(os.Stderr, "jwtgen: %v\n", err)
		os.Exit(1)
	}
}

func run(jwksOut, tokenOut, deniedOut, iss, aud string, ttl time.Duration) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{
		Metadata: jwkset.JWKMetadataOptions{KID: kid, USE: jwkset.UseSig, ALG: jwkset.AlgES256},
	})
	if err != nil {
		return fmt.Errorf("JWK: %w", err)
	}
	set, err := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	if err != nil {
		return err
	}
	if err := os.WriteFile(jwksOut, append(set, '\n'), 0o644); err != nil {
		return err
	}
	now := time.Now()
	sign := func(sub, path string) error {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
			"iss": iss, "sub": sub, "aud": aud, "iat": now.Unix(), "exp": now.Add(ttl).Unix(),
		})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(key)
		if err != nil {
			return fmt.Errorf("signing: %w", err)
		}
		return os.WriteFile(path, []byte(s+"\n"), 0o600)
	}
	if err := sign("bench", tokenOut); err != nil {
		return err
	}
	if deniedOut != "" {
		return sign("not-bench", deniedOut)
	}
	return nil
}
