package config

import (
	"encoding/json"
	"maps"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"cel.dev/cel-go/common"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/parser"
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
	"session": true, "jwt": true, "assertion": true,
}

// sensitiveParts are credential words that mark a word of a header name
// holding them anywhere (x-apitoken, x-upstream-authtoken, clientsecret,
// client_assertion's assertion), written without a separator. The shorter
// sensitiveWords (auth, key, sig, session) are whole words only: as parts
// they are in author, monkey, signal.
var sensitiveParts = []string{"token", "secret", "passw", "credential", "cookie", "apikey", "jwt", "assertion", "authorization"}

// SensitiveHeader reports whether a header's value is to be kept out of
// /config_dump: when a word of its name (any case) is one of
// authorization, auth, cookie(s), key(s), apikey, token(s), secret(s),
// password, passwd, credential(s), signature, sig, session, jwt or
// assertion, or holds one of token, secret, passw, credential, cookie,
// apikey, jwt, assertion or authorization (X-Apitoken, X-Upstream-Authtoken,
// X-Jwt-Assertion). Words are
// split at '-' and '_' and at camelCase: before an upper-case letter that
// follows a lower-case letter or a digit (accessToken, oauth2Token), and
// before the last letter of an upper-case run of two or more followed by a
// lower-case letter (APIKey; OAuth is one word). So Authorization,
// Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, Api-Key,
// X-Auth-Token, X-Amz-Security-Token, Ocp-Apim-Subscription-Key,
// Private-Token, X-Hub-Signature, an Azure SAS URL's sig and the query
// parameters accessToken, apiKey and AWSAccessKeyId are,
// X-Authenticated-User is not. Hiding a value that was no secret only
// makes the dump less telling. It is the one rule for every header value
// the config gives by name (redactHeaderMap, redactValueMatches) and for
// query parameters (redactURL). It does not allocate.
func SensitiveHeader(name string) bool {
	start := 0 // the current word's
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '-' || c == '_' {
			if sensitiveWord(name[start:i]) {
				return true
			}
			start = i + 1
			continue
		}
		if !isUpperASCII(c) || i == start {
			continue
		}
		prev := name[i-1]
		lowerBefore := isLowerASCII(prev) || '0' <= prev && prev <= '9'
		acronymEnd := isUpperASCII(prev) && i-start >= 2 && i+1 < len(name) && isLowerASCII(name[i+1])
		if lowerBefore || acronymEnd {
			if sensitiveWord(name[start:i]) {
				return true
			}
			start = i
		}
	}
	return sensitiveWord(name[start:])
}

// sensitiveWord reports whether w, in any case, is one of sensitiveWords
// or holds one of sensitiveParts.
func sensitiveWord(w string) bool {
	for _, part := range sensitiveParts {
		if containsFoldASCII(w, part) {
			return true
		}
	}
	var lower [16]byte // longer than every sensitive word
	if w == "" || len(w) > len(lower) {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if isUpperASCII(c) {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	return sensitiveWords[string(lower[:len(w)])] // no allocation: a map index
}

// containsFoldASCII reports whether s holds part (lower-case ASCII) in any
// case, without allocating.
func containsFoldASCII(s, part string) bool {
	for i := 0; i+len(part) <= len(s); i++ {
		j := 0
		for ; j < len(part); j++ {
			c := s[i+j]
			if isUpperASCII(c) {
				c += 'a' - 'A'
			}
			if c != part[j] {
				break
			}
		}
		if j == len(part) {
			return true
		}
	}
	return false
}

func isUpperASCII(c byte) bool { return 'A' <= c && c <= 'Z' }
func isLowerASCII(c byte) bool { return 'a' <= c && c <= 'z' }

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
// headers and query parameters (SensitiveHeader) redacted, for
// /config_dump: a route may be reserved to requests carrying a given key.
// A redacted match keeps its kind (exact or regex).
func (m RouteMatch) MarshalJSON() ([]byte, error) {
	type plain RouteMatch // without this method
	p := plain(m)
	p.Headers = redactValueMatches(m.Headers)
	p.Query = redactValueMatches(m.Query)
	return json.Marshal(p)
}

// redactValueMatches returns header (or query parameter) matches with the
// values matched against sensitive names (SensitiveHeader) redacted,
// keeping each match's kind, or matches itself when none is sensitive.
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

// redactArgs returns a command's arguments (a stdio MCP target's) with the
// value of each flag whose name is sensitive (SensitiveHeader: --api-key,
// --token, --client-secret) redacted, in both forms, "--flag value" and
// "--flag=value", or args itself when none is; other arguments stay, so
// the dump still tells what runs.
func redactArgs(args []string) []string {
	out, copied := args, false
	set := func(i int, v string) {
		if !copied {
			out, copied = append([]string(nil), args...), true
		}
		out[i] = v
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "--" {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !SensitiveHeader(name) {
			continue
		}
		switch {
		case hasValue:
			set(i, a[:strings.IndexByte(a, '=')+1]+Redacted)
		case i+1 < len(args) && !strings.HasPrefix(args[i+1], "-"):
			i++
			set(i, Redacted)
		}
	}
	return out
}

// MarshalJSON writes the endpoint with the password of its user info and
// credential query parameters redacted (redactURL), for /config_dump.
func (t Tracing) MarshalJSON() ([]byte, error) {
	type plain Tracing // without this method
	p := plain(t)
	p.OTLPEndpoint = redactURL(t.OTLPEndpoint)
	return json.Marshal(p)
}

// MarshalJSON writes the expression with its literals redacted (redactCEL).
func (e CELExpression) MarshalJSON() ([]byte, error) { return jsonString(redactCEL(string(e))), nil }

// MarshalJSON writes the condition with its literals redacted (redactCEL).
func (c CELCondition) MarshalJSON() ([]byte, error) { return jsonString(redactCEL(string(c))), nil }

// MarshalJSON writes the expression with its literals redacted (redactCEL).
func (e ValueExpression) MarshalJSON() ([]byte, error) { return jsonString(redactCEL(string(e))), nil }

// MarshalJSON writes the condition with its literals redacted (redactCEL).
func (e ValueCondition) MarshalJSON() ([]byte, error) { return jsonString(redactCEL(string(e))), nil }

// MarshalJSON writes the expression with its literals redacted (redactCEL).
func (e TelemetryExpression) MarshalJSON() ([]byte, error) {
	return jsonString(redactCEL(string(e))), nil
}

// MarshalJSON writes the condition with its literals redacted (redactCEL).
func (e TelemetryCondition) MarshalJSON() ([]byte, error) {
	return jsonString(redactCEL(string(e))), nil
}

// MarshalJSON writes the expression with its literals redacted (redactCEL).
func (e RateLimitCost) MarshalJSON() ([]byte, error) { return jsonString(redactCEL(string(e))), nil }

// redactCELLiterals turns redactCEL off, for the tests that hold the dump's
// marshalling to the file form value for value (roundTrip).
var redactCELLiterals = true

// celRedactParser parses expressions for redactCEL: without macros, so
// that the tree holds the calls and literals as written.
var celRedactParser = sync.OnceValues(func() (*parser.Parser, error) {
	return parser.NewParser(parser.EnableOptionalSyntax(true))
})

// redactCEL returns a CEL expression as /config_dump shows it: every
// string and bytes literal written "<redacted>" (b"<redacted>"), and the
// comments left out. A literal is where an expression holds a secret (a
// token compared with a header, set in a header or a body, replaced in a
// value), and which literal is one cannot be told, so none is shown, but
// for those that cannot hold one or must stay for the expression to
// compile:
//   - empty literals;
//   - the keys that name what it reads: an index (request.headers["x-a"],
//     jwt[?"sub"]) and a map literal's keys;
//   - the numbers, times and addresses a literal converts to (int("5"),
//     duration("5s"), timestamp(...), ip(...), cidr(...)), parsed when
//     the program is built;
//   - a string.format format's verbs ("<redacted>%s"), which its
//     arguments are checked against.
//
// The dump keeps each expression's shape (what it reads, calls and
// compares), parses back and compiles to the same types; the values are in
// the file. Every CEL expression of the config marshals through it (the
// expression types' MarshalJSON, CELRule, FaultDuration, Sampling;
// TestCELTypesRedact). A header expression of a sensitive header
// (HeaderExpressions) is redacted whole besides.
func redactCEL(expr string) string {
	if !redactCELLiterals {
		return expr
	}
	// The literals written otherwise than redactedExpression, by rune
	// offset: "" keeps one.
	written := map[int32]string{}
	if p, err := celRedactParser(); err == nil {
		if a, iss := p.Parse(common.NewTextSource(expr)); iss == nil || len(iss.GetErrors()) == 0 {
			info := a.SourceInfo()
			literal := func(e ast.Expr, as string) {
				if e.Kind() == ast.LiteralKind {
					if r, ok := info.GetOffsetRange(e.ID()); ok {
						written[r.Start] = as
					}
				}
			}
			nodes := ast.MatchDescendants(ast.NavigateAST(a), func(e ast.NavigableExpr) bool {
				return e.Kind() == ast.CallKind || e.Kind() == ast.MapKind
			})
			for _, e := range nodes {
				if e.Kind() == ast.MapKind {
					for _, entry := range e.AsMap().Entries() {
						literal(entry.AsMapEntry().Key(), "")
					}
					continue
				}
				call := e.AsCall()
				switch args, name := call.Args(), call.FunctionName(); {
				case name == operators.Index || name == operators.OptIndex:
					if len(args) == 2 {
						literal(args[1], "")
					}
				case parsedLiteral[name]:
					if !call.IsMemberFunction() && len(args) == 1 {
						literal(args[0], "")
					}
				case name == "format":
					// The format's verbs stay, for its arguments to check.
					if t := call.Target(); call.IsMemberFunction() && t.Kind() == ast.LiteralKind {
						if f, ok := t.AsLiteral().Value().(string); ok {
							literal(t, strconv.Quote(Redacted+formatVerbs(f)))
						}
					}
				}
			}
		}
	}
	// A literal not found in the tree (none is, when the text does not
	// parse) is redacted.
	var b strings.Builder
	runes := int32(0) // the rune offset of expr[i], as the tree counts
	for i := 0; i < len(expr); {
		if strings.HasPrefix(expr[i:], "//") {
			// A comment, to the end of its line: left out.
			n := strings.IndexByte(expr[i:], '\n')
			if n < 0 {
				n = len(expr) - i
			}
			runes += int32(utf8.RuneCountInString(expr[i : i+n]))
			i += n
			continue
		}
		if n, isBytes, empty := celLiteralLen(expr, i); n > 0 {
			as, ok := written[runes]
			switch {
			case ok && as == "" || empty:
				b.WriteString(expr[i : i+n])
			case ok:
				b.WriteString(as)
			case isBytes:
				b.WriteString("b" + redactedExpression)
			default:
				b.WriteString(redactedExpression)
			}
			runes += int32(utf8.RuneCountInString(expr[i : i+n]))
			i += n
			continue
		}
		_, size := utf8.DecodeRuneInString(expr[i:])
		b.WriteString(expr[i : i+size])
		runes++
		i += size
	}
	return b.String()
}

// parsedLiteral are the functions that parse a literal argument when the
// program is built (cel-go's conversions, the network library's ip and
// cidr), so that one that does not parse is an error: the numbers, times
// and addresses redactCEL keeps.
var parsedLiteral = map[string]bool{
	overloads.TypeConvertInt: true, overloads.TypeConvertUint: true, overloads.TypeConvertDouble: true,
	overloads.TypeConvertBool: true, overloads.TypeConvertDuration: true, overloads.TypeConvertTimestamp: true,
	"ip": true, "cidr": true,
}

// formatVerbs returns the verbs of a string.format format ("%s", "%.2f"),
// without the text around them.
func formatVerbs(f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		if i+1 < len(f) && f[i+1] == '%' {
			i++
			continue
		}
		j := i + 1
		if j < len(f) && f[j] == '.' {
			for j++; j < len(f) && '0' <= f[j] && f[j] <= '9'; j++ {
			}
		}
		if j < len(f) {
			j++ // the verb
		}
		b.WriteString(f[i:j])
		i = j - 1
	}
	return b.String()
}

// celLiteralLen returns the length of the string or bytes literal starting
// at expr[i] ("a", 'a', """a""", r"a", b"a", br'a', any case of the
// prefixes), 0 when none does, whether it is a bytes literal and whether
// it is empty.
func celLiteralLen(expr string, i int) (n int, isBytes, empty bool) {
	if i > 0 && celIdentByte(expr[i-1]) {
		return 0, false, false // r or b ending an identifier, not a prefix
	}
	j, raw := i, false
	for ; j < len(expr) && j-i < 2; j++ {
		if c := expr[j] | 0x20; c == 'b' && !isBytes && !raw {
			isBytes = true // b, or br: a bytes prefix comes first
		} else if c == 'r' && !raw {
			raw = true
		} else {
			break
		}
	}
	if j == len(expr) || expr[j] != '"' && expr[j] != '\'' {
		return 0, false, false
	}
	quote := expr[j : j+1]
	if strings.HasPrefix(expr[j:], quote+quote+quote) {
		quote += quote + quote
	}
	start := j + len(quote)
	for k := start; k < len(expr); k++ {
		switch {
		case expr[k] == '\\' && !raw:
			k++ // the escaped character
		case strings.HasPrefix(expr[k:], quote):
			return k + len(quote) - i, isBytes, k == start
		}
	}
	return len(expr) - i, isBytes, false // unterminated: the rest
}

// celIdentByte reports whether c may be part of a CEL identifier.
func celIdentByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
