package jwtauth

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/relaygate/gateway/policy/jwtauth/jwttest"
)

// TestValidateRefusesAmbiguousTokens refuses validly signed tokens that a
// lenient reader would accept with a meaning of its own choosing: critical
// header extensions (RFC 7515 4.1.11, RFC 7797's b64), member names given
// twice (encoding/json keeps the last, another reader the first), and
// numeric dates beyond what converts to a time without overflow (an nbf of
// 2^63 wrapped to the distant past and skipped the not-before check).
func TestValidateRefusesAmbiguousTokens(t *testing.T) {
	iss := jwttest.NewIssuer(t, "ES256")
	v := mustValidator(t, inlineProvider(iss.Iss, iss.JWKS(), jwttest.DefaultAudience))
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	// claims is a valid claim set with extra members appended.
	claims := func(extra string) string {
		return `{"iss":"` + iss.Iss + `","sub":"alice","aud":"` + jwttest.DefaultAudience + `","exp":` + exp + extra + `}`
	}
	// header is the issuer's header with extra members appended.
	header := func(extra string) string {
		return `{"alg":"ES256","kid":"` + iss.Kid + `"` + extra + `}`
	}
	signHeader := func(h map[string]any) string {
		h["kid"] = iss.Kid
		return iss.SignWithHeader(h, iss.Claims("alice"))
	}
	tests := []struct {
		desc  string
		token string
		want  Failure
	}{
		{"control: raw header and claims", iss.SignRaw(header(""), claims("")), OK},
		{"control: same name in two objects", iss.SignRaw(header(""), claims(`,"a":{"x":1,"y":{"x":2}},"b":[{"x":3},{"x":4}]`)), OK},
		{"control: colons and quotes inside strings", iss.SignRaw(header(`,"typ":"a:b"`), claims(`,"u:r":"x\":\"y","w":"\\\\:"`)), OK},
		{"control: unknown header without crit", signHeader(map[string]any{"b64": false}), OK},

		{"crit b64 false (RFC 7797)", signHeader(map[string]any{"b64": false, "crit": []string{"b64"}}), FailCritical},
		{"crit unknown extension", signHeader(map[string]any{"exp": 1, "crit": []string{"exp"}}), FailCritical},
		{"crit empty", signHeader(map[string]any{"crit": []string{}}), FailMalformed},
		{"crit a string", signHeader(map[string]any{"b64": false, "crit": "b64"}), FailMalformed},
		{"crit null", signHeader(map[string]any{"crit": nil}), FailMalformed},
		{"crit a number in the list", signHeader(map[string]any{"crit": []any{1}}), FailMalformed},
		{"crit names a standard header", signHeader(map[string]any{"crit": []string{"alg"}}), FailMalformed},
		{"crit names an absent header", signHeader(map[string]any{"crit": []string{"b64"}}), FailMalformed},
		{"crit names one header twice", signHeader(map[string]any{"b64": false, "crit": []string{"b64", "b64"}}), FailMalformed},

		{"header kid twice", iss.SignRaw(header(`,"kid":"`+iss.Kid+`"`), claims("")), FailDuplicate},
		{"header alg twice", iss.SignRaw(`{"alg":"none","alg":"ES256","kid":"`+iss.Kid+`"}`, claims("")), FailDuplicate},
		{"header typ twice", iss.SignRaw(header(`,"typ":"JWT","typ":"at+jwt"`), claims("")), FailDuplicate},
		{"claims sub twice", iss.SignRaw(header(""), claims(`,"sub":"admin"`)), FailDuplicate},
		{"claims aud twice", iss.SignRaw(header(""), claims(`,"aud":"elsewhere"`)), FailDuplicate},
		{"claims exp twice", iss.SignRaw(header(""), claims(`,"exp":1`)), FailDuplicate},
		{"claims name twice through an escape", iss.SignRaw(header(""), claims(`,"\u0073ub":"admin"`)), FailDuplicate},
		{"claims names that are not UTF-8", iss.SignRaw(header(""), claims(",\"r\xff\":1,\"r\xfe\":2")), FailDuplicate},
		{"claims lone surrogates", iss.SignRaw(header(""), claims(`,"r\ud800":1,"r\udbff":2`)), FailDuplicate},
		{"nested object name twice", iss.SignRaw(header(""), claims(`,"realm":{"roles":["user"],"roles":["admin"]}`)), FailDuplicate},
		{"object in an array name twice", iss.SignRaw(header(""), claims(`,"orgs":[{"id":1},{"id":2,"id":3}]`)), FailDuplicate},

		{"nbf 2^63", iss.SignRaw(header(""), claims(`,"nbf":9223372036854775808`)), FailDateRange},
		{"nbf 2^64", iss.SignRaw(header(""), claims(`,"nbf":18446744073709551616`)), FailDateRange},
		{"nbf 1e300", iss.SignRaw(header(""), claims(`,"nbf":1e300`)), FailDateRange},
		{"nbf -1e300", iss.SignRaw(header(""), claims(`,"nbf":-1e300`)), FailDateRange},
		{"exp 2^63", iss.SignRaw(header(""), `{"iss":"`+iss.Iss+`","aud":"`+jwttest.DefaultAudience+`","exp":9223372036854775808}`), FailDateRange},
		{"iat 2^63", iss.SignRaw(header(""), claims(`,"iat":9223372036854775808`)), FailDateRange},
		{"iat -2^63", iss.SignRaw(header(""), claims(`,"iat":-9223372036854775808`)), FailDateRange},
		{"nbf 2^53 is not yet valid", iss.SignRaw(header(""), claims(`,"nbf":9007199254740992`)), FailNotYetValid},
		{"nbf now is valid", iss.SignRaw(header(""), claims(`,"nbf":`+strconv.FormatInt(time.Now().Unix(), 10))), OK},
		{"exp 2^53 is valid", iss.SignRaw(header(""), `{"iss":"`+iss.Iss+`","aud":"`+jwttest.DefaultAudience+`","exp":9007199254740992}`), OK},
		{"fractional exp is valid", iss.SignRaw(header(""), `{"iss":"`+iss.Iss+`","aud":"`+jwttest.DefaultAudience+`","exp":`+exp+`.5}`), OK},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
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

// FuzzColons checks the member count the duplicate check relies on against
// encoding/json's own tokenizer: for any JSON text, colons outside strings
// are the object keys the tokenizer reads.
func FuzzColons(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"a:b":"c:d","e":{"f":[1,{"g":null}]}}`, `{"q\"":"x\\","r":"\\\":"}`,
		`[{"a":1},{"a":2}]`, `"a:b"`, `{"\u0061":1,"a":2}`, "{\"r\xff\":1}", `{}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // a number beyond float64 is valid JSON too
		keys, ok := tokenizerKeys(dec)
		if !ok {
			t.Fatalf("tokenizer refused valid JSON %q", b)
		}
		if got := colons(b); got != keys {
			t.Fatalf("colons(%q) = %d, tokenizer read %d keys", b, got, keys)
		}
	})
}

// tokenizerKeys counts the object keys of the next value in dec.
func tokenizerKeys(dec *json.Decoder) (n int, ok bool) {
	tok, err := dec.Token()
	if err != nil {
		return 0, false
	}
	switch tok {
	case json.Delim('{'):
		for dec.More() {
			if _, err := dec.Token(); err != nil { // the key
				return 0, false
			}
			k, ok := tokenizerKeys(dec)
			if !ok {
				return 0, false
			}
			n += 1 + k
		}
	case json.Delim('['):
		for dec.More() {
			k, ok := tokenizerKeys(dec)
			if !ok {
				return 0, false
			}
			n += k
		}
	default:
		return 0, true
	}
	_, err = dec.Token() // the closing delimiter
	return n, err == nil
}
