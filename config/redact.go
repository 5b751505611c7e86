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
	"credential": true, "credentials": true, "signature": true, "session": true,
}

// SensitiveHeader reports whether a header's value is to be kept out of
// /config_dump: when a word of its name (split at '-' and '_', any case) is
// one of authorization, auth, cookie(s), key(s), apikey, token(s),
// secret(s), password, passwd, credential(s), signature or session. So
// Authorization, Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key,
// Api-Key, X-Auth-Token, X-Amz-Security-Token, Ocp-Apim-Subscription-Key,
// Private-Token and X-Hub-Signature are, X-Authenticated-User is not. Hiding
// a value that was no secret only makes the dump less telling.
func SensitiveHeader(name string) bool {
	for w := range strings.FieldsFuncSeq(name, func(r rune) bool { return r == '-' || r == '_' }) {
		if sensitiveWords[strings.ToLower(w)] {
			return true
		}
	}
	return false
}

// redactHeaders returns values with those of sensitive headers replaced by
// Redacted, or values itself when it has none.
func redactHeaders(values map[string]string) map[string]string {
	var out map[string]string
	for name := range values {
		if !SensitiveHeader(name) {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(values))
			for k, v := range values {
				out[k] = v
			}
		}
		out[name] = Redacted
	}
	if out == nil {
		return values
	}
	return out
}

// MarshalJSON writes the modifier with the values of sensitive headers
// (SensitiveHeader) redacted, for /config_dump: a route may set a backend's
// API key or a session cookie.
func (h HeaderModifier) MarshalJSON() ([]byte, error) {
	type plain HeaderModifier // without this method
	p := plain(h)
	p.Add, p.Set = redactHeaders(h.Add), redactHeaders(h.Set)
	return json.Marshal(p)
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
const redactedExpression = CELExpression(`"` + Redacted + `"`)

// redactExpressions returns header expressions with those of sensitive
// headers (SensitiveHeader) replaced by redactedExpression, or exprs itself
// when none is: an expression may hold a literal token.
func redactExpressions(exprs map[string]CELExpression) map[string]CELExpression {
	var out map[string]CELExpression
	for name := range exprs {
		if !SensitiveHeader(name) {
			continue
		}
		if out == nil {
			out = maps.Clone(exprs)
		}
		out[name] = redactedExpression
	}
	if out == nil {
		return exprs
	}
	return out
}

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
