package guardrail

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// validFieldValue reports a header value that can be sent: no control
// bytes but tab (a line break would end the header).
func validFieldValue(v []byte) bool {
	for _, c := range v {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// validToken reports an HTTP token (RFC 9110 5.6.2), as a method is.
func validToken(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if !isTokenChar(c) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}

// validPath reports an origin-form request target: a path from "/" with
// an optional query, without spaces or control bytes.
func validPath(v []byte) bool {
	if len(v) == 0 || v[0] != '/' {
		return false
	}
	for _, c := range v {
		if c <= ' ' || c == 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// validAuthority reports a host with an optional port, as a Host header
// carries it: no path, query, fragment, user info, spaces or control
// bytes.
func validAuthority(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c <= ' ' || c == 0x7f || bytes.IndexByte([]byte("/?#@\\"), c) >= 0 {
			return false
		}
	}
	return true
}

// equalFold reports a == b with ASCII case ignored (b is lower-case).
func equalFold(a, lower []byte) bool {
	if len(a) != len(lower) {
		return false
	}
	for i, c := range a {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// truncate cuts s to at most n bytes at a rune boundary, replacing
// control characters, so that it stays one log line.
func truncate(s string, n int) string {
	out := make([]byte, 0, min(len(s), n))
	for _, r := range s {
		size := utf8.RuneLen(r)
		if size < 0 {
			size = 3 // utf8.RuneError
		}
		if len(out)+size > n {
			break
		}
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		out = utf8.AppendRune(out, r)
	}
	return string(out)
}

// reason is a verdict's reason: what and the items (categories, filters,
// policy types), one log line of at most maxReason bytes.
func reason(what string, items []string) string {
	if len(items) == 0 {
		return what
	}
	return truncate(what+": "+strings.Join(items, ", "), maxReason)
}
