package policy

import "bytes"

// Origins as CORS compares them: "<scheme>://<host>[:<port>]" with scheme http
// or https, the scheme's port filled in when absent, the host compared without
// regard to ASCII case. Allowed-origin patterns may use '*' in the host, which
// matches any run of characters ("https://*.example.com").

// Origin schemes.
const (
	schemeHTTP uint8 = iota + 1
	schemeHTTPS
)

// origin is a parsed origin or origin pattern. host aliases the parsed text.
type origin struct {
	scheme uint8
	host   []byte
	port   int
}

var schemeSep = []byte("://")

// parseOrigin parses an origin; wildcard permits '*' in the host (patterns).
// It accepts only what a browser can send: no path, query, fragment or
// userinfo, no spaces or control bytes.
func parseOrigin(b []byte, wildcard bool) (origin, bool) {
	var o origin
	i := bytes.Index(b, schemeSep)
	if i < 0 {
		return o, false
	}
	switch {
	case equalFoldASCII(b[:i], "http"):
		o.scheme = schemeHTTP
		o.port = 80
	case equalFoldASCII(b[:i], "https"):
		o.scheme = schemeHTTPS
		o.port = 443
	default:
		return o, false
	}
	hp := b[i+len(schemeSep):]
	if len(hp) == 0 {
		return o, false
	}
	for _, c := range hp {
		if c <= ' ' || c >= 0x7f || c == '/' || c == '?' || c == '#' || c == '@' || c == '\\' {
			return o, false
		}
	}
	host, port, ok := splitAuthority(hp)
	if !ok || len(host) == 0 {
		return o, false
	}
	if port != nil {
		p, ok := parsePort(port)
		if !ok {
			return o, false
		}
		o.port = p
	}
	if host[0] == '[' {
		if bytes.IndexByte(host, '*') >= 0 {
			return o, false
		}
	} else if bytes.IndexByte(host, ':') >= 0 || (!wildcard && bytes.IndexByte(host, '*') >= 0) {
		return o, false
	}
	o.host = host
	return o, true
}

// matches reports whether the request origin r matches the pattern o, whose
// host is lower-case.
func (o *origin) matches(r *origin) bool {
	return o.scheme == r.scheme && o.port == r.port && globFold(o.host, r.host)
}

// globFold matches s against pattern, where '*' matches any run of bytes
// (possibly empty) and other bytes compare ignoring ASCII case; pattern is
// lower-case. It runs in O(len(pattern)*len(s)) at worst and never recurses.
func globFold(pattern, s []byte) bool {
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case p < len(pattern) && pattern[p] == lowerASCII(s[i]):
			p++
			i++
		case star >= 0:
			mark++
			p, i = star+1, mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
