package config

import (
	"encoding/json"
	"maps"
	"net/url"
	"regexp"
	"strings"
)

// Redacted stands for a secret in /config_dump.
const Redacted = "<redacted>"

// sensitiveWords are the words of a header name that mark its value as a
// credential (SensitiveHeader).
var sensitiveWords = map[string]bool{
	"authorization": true, "auth": true, "cookie": true, "cookies": true,
	"key": true, "keys": true, "apikey": true, "token": true, "tokens": true,
	"secret": true, "secrets": true, "password": true, "passwd": true,
	"credential": true, "credentials": true, "signature": true, "sig": true,
	"session": true,
}

// SensitiveHeader reports whether a header's value is to be kept out of
// /config_dump: when a word of its name (split at '-' and '_', any case) is
// one of authorization, auth, cookie(s), key(s), apikey, token(s),
// secret(s), password, passwd, credential(s), signature, sig or session.
// So Authorization, Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key,
// Api-Key, X-Auth-Token, X-Amz-Security-Token, Ocp-Apim-Subscription-Key,
// Private-Token, X-Hub-Signature and an Azure SAS URL's sig are,
// X-Authenticated-User is not. Hiding a value that was no secret only makes
// the dump less telling. It is the one rule for every header value the
// config gives by name (redactHeaderMap, redactValueMatches) and for query
// parameters (redactURL).
func SensitiveHeader(name string) bool {
	for w := range strings.FieldsFuncSeq(name, func(r rune) bool { return r == '-' || r == '_' }) {
		if sensitiveWords[strings.ToLower(w)] {
			return true
		}
	}
	return false
}

// HeaderValues are header values by name, as the config gives them (a
// header modifier's set and add). /config_dump shows those of sensitive
// headers (SensitiveHeader) as Redacted: a route may set a backend's API
// key or a session cookie.
type HeaderValues map[string]string

// MarshalJSON writes the values with those of sensitive headers redacted.
func (h HeaderValues) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]string(redactHeaderMap(h, Redacted)))
}

// HeaderExpressions are header values by name, each computed by a CEL
// expression (transformations' set and add, a webhook guard's headers).
// /config_dump shows the expressions of sensitive headers (SensitiveHeader)
// as redactedExpression: an expression may hold a literal token.
type HeaderExpressions map[string]CELExpression

// MarshalJSON writes the expressions with those of sensitive headers
// redacted.
func (h HeaderExpressions) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]CELExpression(redactHeaderMap(h, redactedExpression)))
}

// HeaderValueExpressions are HeaderExpressions of ValueCELEnv (extAuthz's
// addRequestHeaders), redacted in /config_dump the same way.
type HeaderValueExpressions map[string]ValueExpression

// MarshalJSON writes the expressions with those of sensitive headers
// redacted.
func (h HeaderValueExpressions) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]ValueExpression(redactHeaderMap(h, redactedExpression)))
}

// redactHeaderMap returns values with those of sensitive headers
// (SensitiveHeader) replaced by redacted, or values itself when none is.
// Every map of header values by name in the config goes through it
// (HeaderValues, HeaderExpressions, HeaderValueExpressions, the gRPC
// metadata of ExtProcMetadataContext), so one rule decides what the dump
// hides.
func redactHeaderMap[M ~map[string]V, V ~string](values M, redacted V) M {
	var out M
	for name := range values {
		if !SensitiveHeader(name) {
			continue
		}
		if out == nil {
			out = maps.Clone(values)
		}
		out[name] = redacted
	}
	if out == nil {
		return values
	}
	return out
}

// MarshalJSON writes the match with the values matched against sensitive
// headers (SensitiveHeader) redacted, for /config_dump: a route may be
// reserved to requests carrying a given key. A redacted match keeps its kind
// (exact or regex).
func (m RouteMatch) MarshalJSON() ([]byte, error) {
	type plain RouteMatch // without this method
	p := plain(m)
	p.Headers = redactValueMatches(m.Headers)
	return json.Marshal(p)
}

// redactValueMatches returns header matches with the values matched
// against sensitive headers (SensitiveHeader) redacted, keeping each
// match's kind, or matches itself when none is sensitive.
func redactValueMatches(matches []ValueMatch) []ValueMatch {
	out := matches
	copied := false
	for i, h := range matches {
		if !SensitiveHeader(h.Name) {
			continue
		}
		if !copied {
			out, copied = append([]ValueMatch(nil), matches...), true
		}
		v := &out[i].Value
		switch {
		case v.Regex != nil:
			v.Regex = redactedRegex
		case v.Exact != nil:
			redacted := Redacted
			v.Exact = &redacted
		}
	}
	return out
}

// redactedExpression is a CEL expression redacted: the string literal
// "<redacted>", so that the dump still compiles.
const redactedExpression = `"` + Redacted + `"`

// redactedRegex is a regex match's pattern redacted.
var redactedRegex = regexp.MustCompile(regexp.QuoteMeta(Redacted))

// redactURL hides the password of a URL's userinfo (as "xxxxx", as
// url.URL.Redacted writes it) and the values of query parameters with a
// credential word in their name (SensitiveHeader: ?api_key=, ?token=), for
// /config_dump.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			changed = true
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for name := range q {
			if SensitiveHeader(name) {
				q[name] = []string{Redacted}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	if !changed {
		return raw
	}
	return u.String()
}
