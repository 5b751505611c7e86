package jwtauth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// A token's form is checked beyond what golang-jwt does, before its key is
// looked up and its signature verified (strictForm, from lookupKey): each
// check refuses a token that one reader would take one way and another
// reader, or the issuer, another.
//
//   - crit (RFC 7515 4.1.11): the header lists extensions the recipient
//     must understand; this validator understands none, so any crit is
//     refused (FailCritical), a malformed one (not a non-empty list of
//     distinct names of parameters present in the header and not defined
//     by RFC 7515) as FailMalformed. RFC 7797's b64: false, which changes
//     what is signed, comes with crit: ["b64"] and is refused so.
//   - Member names given twice in one object of the header or the claims,
//     at any depth (FailDuplicate): encoding/json keeps the last, other
//     readers the first, so a policy and an upstream could read different
//     claims from one token. Names are compared as decoded, so "sub" and
//     "\u0073ub", or two names whose invalid UTF-8 both decode to U+FFFD,
//     are the same name.
//   - exp, nbf and iat beyond ±2^53 seconds (FailDateRange): golang-jwt
//     converts a numeric date to int64 seconds, which overflows from 2^63
//     on (and time.Unix's own offset before that), so such an nbf read as
//     the distant past. 2^53 is the bound of exact integers in a JSON
//     number (RFC 7493 2.2) and some 285 million years, far within what
//     time.Time compares correctly.
//
// The duplicate check costs a second base64 decoding of the header and
// claims, into a stack buffer, a scan of the bytes for member separators
// and a walk of the decoded maps; the valid-token path allocates nothing
// more for it.

// maxNumericDate bounds exp, nbf and iat in seconds either side of 1970.
const maxNumericDate = 1 << 53

// refusal is a Failure as an error, returned by the key function so that
// Validate reports it.
type refusal Failure

func (r refusal) Error() string { return Failure(r).String() }

// registeredHeaders are the header parameters RFC 7515 defines, which crit
// must not list.
var registeredHeaders = []string{"alg", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit"}

// strictForm checks the parsed token's crit, member names and numeric
// dates; OK when none is refused.
func strictForm(t *jwt.Token) Failure {
	if crit, ok := t.Header["crit"]; ok {
		return critFailure(t.Header, crit)
	}
	claims, _ := t.Claims.(jwt.MapClaims)
	for _, name := range [...]string{"exp", "nbf", "iat"} {
		var f float64
		switch v := claims[name].(type) {
		case float64:
			f = v
		case json.Number:
			var err error
			if f, err = v.Float64(); err != nil {
				return FailDateRange
			}
		default:
			continue
		}
		if !(f >= -maxNumericDate && f <= maxNumericDate) {
			return FailDateRange
		}
	}
	header, rest, _ := strings.Cut(t.Raw, ".")
	payload, _, _ := strings.Cut(rest, ".")
	hn, ok := separators(header)
	if !ok {
		return FailMalformed
	}
	cn, ok := separators(payload)
	if !ok {
		return FailMalformed
	}
	if hn != members(t.Header) || cn != members(map[string]any(claims)) {
		return FailDuplicate
	}
	return OK
}

// critFailure classifies a header with crit: FailMalformed when crit breaks
// RFC 7515 4.1.11's rules, FailCritical otherwise.
func critFailure(header map[string]any, crit any) Failure {
	list, ok := crit.([]any)
	if !ok || len(list) == 0 {
		return FailMalformed
	}
	for i, e := range list {
		name, ok := e.(string)
		if !ok || slices.Contains(registeredHeaders, name) || slices.Contains(list[:i], e) {
			return FailMalformed
		}
		if _, present := header[name]; !present {
			return FailMalformed
		}
	}
	return FailCritical
}

// members counts the members of every object in a decoded JSON value.
// encoding/json makes one map entry per member, a later one of the same
// name replacing the earlier, so an object with a name given twice decodes
// to fewer entries than it has members.
func members(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := len(v)
		for _, e := range v {
			n += members(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += members(e)
		}
		return n
	}
	return 0
}

// Buffers of separators: a segment is decoded whole into decodedInline
// bytes on the stack (most tokens: larger ones get a heap buffer), copied
// there from the token string segmentChunk characters at a time (a multiple
// of 4, so that every piece but the last decodes on its own).
const (
	segmentChunk  = 256
	decodedInline = 1536
)

// separators decodes a token segment (base64url, valid: the parser read
// it) and counts the colons outside strings, which in valid JSON are the
// members of all its objects.
func separators(seg string) (n int, ok bool) {
	var in [segmentChunk]byte
	var inline [decodedInline]byte
	out := inline[:]
	if base64.RawURLEncoding.DecodedLen(len(seg)) > len(out) {
		out = make([]byte, base64.RawURLEncoding.DecodedLen(len(seg)))
	}
	d := 0
	for len(seg) > 0 {
		k := copy(in[:], seg)
		seg = seg[k:]
		m, err := base64.RawURLEncoding.Decode(out[d:], in[:k])
		if err != nil {
			return 0, false
		}
		d += m
	}
	return colons(out[:d]), true
}

// colons counts the colons outside strings in valid JSON. A string is
// skipped to its closing quote with IndexByte: a quote ends the string
// unless an odd run of backslashes precedes it.
func colons(b []byte) (n int) {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case ':':
			n++
		case '"':
			start := i + 1
			for {
				q := bytes.IndexByte(b[i+1:], '"')
				if q < 0 {
					return n // not valid JSON: the decoder refused it already
				}
				i += 1 + q
				j := i
				for j > start && b[j-1] == '\\' {
					j--
				}
				if (i-j)%2 == 0 {
					break
				}
			}
		}
	}
	return n
}
