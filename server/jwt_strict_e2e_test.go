package server

import (
	"strconv"
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// TestJWTAuthRefusesAmbiguousTokensE2E sends validly signed tokens that a
// lenient validator would accept with a meaning of its own choosing through
// the gateway: each is refused with 401 and its reason, and never reaches
// the upstream (item 13 of issue 17).
func TestJWTAuthRefusesAmbiguousTokensE2E(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	up, seen := jwtRecordingUpstream(t)
	tg := startGateway(t, `
binds:
- port: 3000
  listeners:
  - routes:
    - policies:
        jwtAuth: {issuer: '${ISS}', audiences: [gateway.test], jwks: '${JWKS}'}
      backends: [{host: '${UP}'}]
`, map[string]string{"UP": up, "ISS": iss.Iss, "JWKS": string(iss.JWKS())})
	base := tg.url(3000)
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	claims := func(extra string) string {
		return `{"iss":"` + iss.Iss + `","sub":"alice","aud":"gateway.test","exp":` + exp + extra + `}`
	}
	header := func(extra string) string {
		return `{"alg":"ES256","kid":"` + iss.Kid + `"` + extra + `}`
	}
	const www = `Bearer realm="gateway", error="invalid_token", error_description="`
	tests := []struct {
		desc   string
		token  string
		status int
		why    string // error_description of a refusal
	}{
		{"control: valid", iss.SignRaw(header(""), claims("")), 200, ""},
		{"control: same name in two objects", iss.SignRaw(header(""), claims(`,"a":{"x":1},"b":{"x":2}`)), 200, ""},
		{"crit b64 false", iss.SignRaw(header(`,"b64":false,"crit":["b64"]`), claims("")), 401, "unsupported critical header parameter"},
		{"crit unknown extension", iss.SignRaw(header(`,"ext":1,"crit":["ext"]`), claims("")), 401, "unsupported critical header parameter"},
		{"crit empty", iss.SignRaw(header(`,"crit":[]`), claims("")), 401, "malformed token"},
		{"crit not a list", iss.SignRaw(header(`,"b64":false,"crit":"b64"`), claims("")), 401, "malformed token"},
		{"crit a standard header", iss.SignRaw(header(`,"crit":["kid"]`), claims("")), 401, "malformed token"},
		{"header alg twice", iss.SignRaw(`{"alg":"none","alg":"ES256","kid":"`+iss.Kid+`"}`, claims("")), 401, "duplicate member name"},
		{"claims sub twice", iss.SignRaw(header(""), claims(`,"sub":"admin"`)), 401, "duplicate member name"},
		{"claims sub twice through an escape", iss.SignRaw(header(""), claims(`,"\u0073ub":"admin"`)), 401, "duplicate member name"},
		{"nested member twice", iss.SignRaw(header(""), claims(`,"realm":{"roles":["user"],"roles":["admin"]}`)), 401, "duplicate member name"},
		{"nbf 2^63", iss.SignRaw(header(""), claims(`,"nbf":9223372036854775808`)), 401, "numeric date out of range"},
		{"nbf 1e300", iss.SignRaw(header(""), claims(`,"nbf":1e300`)), 401, "numeric date out of range"},
		{"iat 2^63", iss.SignRaw(header(""), claims(`,"iat":9223372036854775808`)), 401, "numeric date out of range"},
		{"nbf 2^53 is not yet valid", iss.SignRaw(header(""), claims(`,"nbf":9007199254740992`)), 401, "token not yet valid"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			resp, body := get(t, base+"/", "Authorization", "Bearer "+tc.token)
			s := seen()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, tc.status, body)
			}
			if tc.status == 200 {
				if body != "ok" || s.Target != "/" || s.Authorization != "" {
					t.Fatalf("body %q, upstream saw %+v", body, s)
				}
				return
			}
			if got, want := resp.Header.Get("WWW-Authenticate"), www+tc.why+`"`; got != want {
				t.Fatalf("WWW-Authenticate %q, want %q", got, want)
			}
			if s.Target != "" {
				t.Fatalf("refused request reached the upstream: %+v", s)
			}
		})
	}
}
