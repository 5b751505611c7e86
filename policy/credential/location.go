// Package credential owns where a credential travels in a request (a
// header with an optional prefix, a query parameter, a cookie): reading a
// client's, removing it before the request is forwarded, putting it back
// for backendAuth passthrough, and the gateway's own secrets for backends
// (Secret: inline or a file read again when it changes). Every
// authentication kind reads through it.
package credential

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/relaygate/gateway/codec/hexdigit"
	"github.com/relaygate/gateway/config"
	"github.com/relaygate/gateway/policy"
)

type locKind uint8

const (
	locHeader locKind = iota
	locQuery
	locCookie
)

// Location is where a credential travels in a request: a header (with an
// optional prefix such as "Bearer ", compared without regard to ASCII
// case), a query parameter or a cookie. The zero value is not usable; see
// DefaultLocation and NewLocation.
type Location struct {
	kind    locKind
	name    []byte
	nameStr string // name, for fasthttp's string-keyed lookups
	prefix  []byte
}

var (
	headerAuthorization      = []byte("Authorization")
	headerProxyAuthorization = []byte("Proxy-Authorization")
	bearerPrefix             = []byte("Bearer ")
)

// DefaultLocation is `Authorization: Bearer <token>`.
func DefaultLocation() Location {
	return Location{kind: locHeader, name: headerAuthorization, nameStr: string(headerAuthorization), prefix: bearerPrefix}
}

// NewLocation compiles a location; nil means DefaultLocation.
func NewLocation(cfg *config.AuthLocation) (Location, error) {
	switch {
	case cfg == nil:
		return DefaultLocation(), nil
	case cfg.Header != nil:
		l, err := namedLocation(locHeader, "header", cfg.Header.Name)
		if err == nil && cfg.Header.Prefix != nil {
			l.prefix = []byte(*cfg.Header.Prefix)
		}
		return l, err
	case cfg.QueryParameter != nil:
		return namedLocation(locQuery, "queryParameter", cfg.QueryParameter.Name)
	case cfg.Cookie != nil:
		return namedLocation(locCookie, "cookie", cfg.Cookie.Name)
	}
	return Location{}, fieldErrorf("", "exactly one of header, queryParameter, cookie is required")
}

// namedLocation compiles a location of the given kind; all three kinds are
// addressed by a name, which is required. field is the kind's
// configuration key, so that the error names "<field>.name".
func namedLocation(kind locKind, field, name string) (Location, error) {
	if name == "" {
		return Location{}, fieldErrorf(field+".name", "required")
	}
	return Location{kind: kind, name: []byte(name), nameStr: name}, nil
}

// String describes the location, for messages.
func (l *Location) String() string {
	switch l.kind {
	case locQuery:
		return "query parameter " + string(l.name)
	case locCookie:
		return "cookie " + string(l.name)
	}
	if len(l.prefix) > 0 {
		return "header " + string(l.name) + " (prefix " + strings.TrimSpace(string(l.prefix)) + ")"
	}
	return "header " + string(l.name)
}

// Header returns the header name and prefix of a header location; ok is
// false for a query parameter or a cookie.
func (l *Location) Header() (name, prefix string, ok bool) {
	return l.nameStr, string(l.prefix), l.kind == locHeader
}

// IsProxyHeader reports whether the credential is in Proxy-Authorization,
// which is addressed to the proxy: failures answer 407 (RFC 9110 11.7.1).
func (l *Location) IsProxyHeader() bool {
	return l.kind == locHeader && bytes.EqualFold(l.name, headerProxyAuthorization)
}

// Extract returns the credential, or nil when the request carries none (a
// header without the prefix carries none). The result aliases the request
// or the context's scratch buffer: copy it before changing either.
func (l *Location) Extract(c *policy.Ctx) []byte {
	req := &c.Fast.Request
	switch l.kind {
	case locHeader:
		v := req.Header.PeekBytes(l.name)
		if len(l.prefix) == 0 {
			return v
		}
		if len(v) < len(l.prefix) || !bytes.EqualFold(v[:len(l.prefix)], l.prefix) {
			return nil
		}
		return v[len(l.prefix):]
	case locQuery:
		_, query, _ := splitTarget(req.Header.RequestURI())
		v, ok := QueryValue(c.Scratch(), query, l.name)
		if !ok {
			return nil
		}
		c.KeepScratch(v)
		return v
	case locCookie:
		return req.Header.CookieBytes(l.name)
	}
	return nil
}

// Repeated reports whether the request carries more than one value at the
// location (two Authorization headers, a query parameter or cookie given
// twice). Authentication refuses such a request: which value a backend
// would read is anybody's guess, so the one checked might not be the one
// that counts.
func (l *Location) Repeated(c *policy.Ctx) bool {
	req := &c.Fast.Request
	switch l.kind {
	case locHeader:
		return len(req.Header.PeekAll(l.nameStr)) > 1
	case locQuery:
		_, query, _ := splitTarget(req.Header.RequestURI())
		n := 0
		for len(query) > 0 {
			var pair []byte
			pair, query, _ = bytes.Cut(query, ampersand)
			key, _, _ := bytes.Cut(pair, equals)
			if len(pair) > 0 && decodedEqual(key, l.name) {
				if n++; n > 1 {
					return true
				}
			}
		}
	case locCookie:
		n := 0
		for k := range req.Header.Cookies() {
			if bytes.Equal(k, l.name) {
				if n++; n > 1 {
					return true
				}
			}
		}
	}
	return false
}

// Remove deletes the credential from the request that will be forwarded.
func (l *Location) Remove(c *policy.Ctx) {
	req := &c.Fast.Request
	switch l.kind {
	case locHeader:
		policy.DelRequestHeader(&req.Header, l.name)
	case locQuery:
		head, query, tail := splitTarget(req.Header.RequestURI())
		if query == nil {
			return
		}
		b := append(c.Scratch(), head...)
		mark := len(b)
		b = append(b, '?')
		b = RemoveQueryParam(b, query, l.name)
		if len(b) == mark+1 {
			b = b[:mark] // no parameter left: no "?"
		}
		b = append(b, tail...)
		// The target only shrinks and keeps its path: fasthttp copies it into
		// the same buffer, so c.Path and c.MatchedPrefix stay valid.
		req.SetRequestURIBytes(b)
		c.KeepScratch(b)
	case locCookie:
		req.Header.DelCookieBytes(l.name)
	}
}

// Insert puts token into req at the location (for backendAuth), replacing
// every value there: a client that sent its own, twice, must not have one
// reach the backend beside the gateway's. scratch is a reusable buffer;
// the grown buffer is returned for reuse.
func (l *Location) Insert(req *fasthttp.Request, token, scratch []byte) []byte {
	b := scratch[:0]
	switch l.kind {
	case locHeader:
		b = append(b, l.prefix...)
		b = append(b, token...)
		policy.DelRequestHeader(&req.Header, l.name)
		req.Header.SetBytesKV(l.name, b)
	case locQuery:
		head, query, tail := splitTarget(req.Header.RequestURI())
		b = append(b, head...)
		b = append(b, '?')
		mark := len(b)
		if query != nil {
			b = RemoveQueryParam(b, query, l.name)
		}
		if len(b) > mark {
			b = append(b, '&')
		}
		b = appendQueryEscaped(b, l.name)
		b = append(b, '=')
		b = appendQueryEscaped(b, token)
		b = append(b, tail...)
		req.SetRequestURIBytes(b)
	case locCookie:
		req.Header.DelCookieBytes(l.name)
		req.Header.SetCookieBytesKV(l.name, token)
	}
	return b
}

// splitTarget splits a request target into what precedes the query
// (including the '?', absent when there is no query), the query (nil when
// there is none) and a fragment (with its '#', normally absent).
func splitTarget(uri []byte) (head, query, tail []byte) {
	end := len(uri)
	if i := bytes.IndexByte(uri, '#'); i >= 0 {
		end = i
	}
	q := bytes.IndexByte(uri[:end], '?')
	if q < 0 {
		return uri[:end], nil, uri[end:]
	}
	return uri[:q], uri[q+1 : end], uri[end:]
}

var ampersand, equals = []byte("&"), []byte("=")

// QueryValue appends to dst the decoded value of the first parameter of the
// raw query whose decoded name is name ('+' is a space, %XX a byte; a
// malformed escape is kept as written). ok is false when there is none.
func QueryValue(dst, query, name []byte) (value []byte, ok bool) {
	for len(query) > 0 {
		var pair []byte
		pair, query, _ = bytes.Cut(query, ampersand)
		if len(pair) == 0 {
			continue
		}
		key, val, _ := bytes.Cut(pair, equals)
		if decodedEqual(key, name) {
			return QueryUnescape(dst[:0], val), true
		}
	}
	return dst[:0], false
}

// RemoveQueryParam appends to dst the raw query without the parameters
// whose decoded name is name; other parameters keep their exact spelling
// and order.
func RemoveQueryParam(dst, query, name []byte) []byte {
	start := len(dst)
	for len(query) > 0 {
		var pair []byte
		pair, query, _ = bytes.Cut(query, ampersand)
		key, _, _ := bytes.Cut(pair, equals)
		if len(pair) == 0 || decodedEqual(key, name) {
			continue
		}
		if len(dst) > start {
			dst = append(dst, '&')
		}
		dst = append(dst, pair...)
	}
	return dst
}

// decodedEqual reports whether raw, query-decoded, equals name.
func decodedEqual(raw, name []byte) bool {
	j := 0
	for i := 0; i < len(raw); {
		var c byte
		c, i = decodedAt(raw, i)
		if j >= len(name) || name[j] != c {
			return false
		}
		j++
	}
	return j == len(name)
}

// QueryUnescape appends the query-decoded form of raw (a parameter's name
// or value) to dst, as QueryValue decodes them.
func QueryUnescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		var c byte
		c, i = decodedAt(raw, i)
		dst = append(dst, c)
	}
	return dst
}

// decodedAt returns the query-decoded byte that starts at raw[i] ('+' is a
// space, a valid %XX escape its byte, anything else itself) and the index
// after it.
func decodedAt(raw []byte, i int) (byte, int) {
	switch c := raw[i]; {
	case c == '+':
		return ' ', i + 1
	case c == '%' && i+2 < len(raw) && hexdigit.Is(raw[i+1]) && hexdigit.Is(raw[i+2]):
		return hexdigit.Value(raw[i+1])<<4 | hexdigit.Value(raw[i+2]), i + 3
	default:
		return c, i + 1
	}
}

// appendQueryEscaped appends s escaped for a query component: unreserved
// characters (RFC 3986) stay, everything else becomes %XX.
func appendQueryEscaped(dst, s []byte) []byte {
	const hex = "0123456789ABCDEF"
	for _, c := range s {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, '%', hex[c>>4], hex[c&15])
	}
	return dst
}

// fieldErrorf builds a *policy.FieldError.
func fieldErrorf(field, format string, args ...any) error {
	return &policy.FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
