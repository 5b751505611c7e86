package policy

import (
	"strconv"
	"strings"
)

// Authorities ("host[:port]", with IPv6 literals in brackets) as redirects and
// rewrites take them apart and put them back together.

// splitAuthority splits a into host and port. port is nil when a has none; ok
// is false when a bracketed host is not closed or is followed by anything but
// ":port".
func splitAuthority(a []byte) (host, port []byte, ok bool) {
	if len(a) > 0 && a[0] == '[' {
		end := -1
		for i, c := range a {
			if c == ']' {
				end = i
				break
			}
		}
		if end < 0 {
			return nil, nil, false
		}
		host, rest := a[:end+1], a[end+1:]
		switch {
		case len(rest) == 0:
			return host, nil, true
		case rest[0] == ':':
			return host, rest[1:], true
		}
		return nil, nil, false
	}
	for i := len(a) - 1; i >= 0; i-- {
		if a[i] == ':' {
			return a[:i], a[i+1:], true
		}
	}
	return a, nil, true
}

// parsePort parses a decimal port of 1..65535.
func parsePort[T string | []byte](b T) (int, bool) {
	if len(b) == 0 || len(b) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n >= 1 && n <= 65535
}

// defaultPort returns the well-known port of scheme (http 80, https 443), or 0.
func defaultPort(scheme []byte) int {
	switch {
	case equalFoldASCII(scheme, "http"):
		return 80
	case equalFoldASCII(scheme, "https"):
		return 443
	}
	return 0
}

// isDefaultPort reports whether port text names scheme's well-known port.
func isDefaultPort(port, scheme []byte) bool {
	p, ok := parsePort(port)
	return ok && p == defaultPort(scheme)
}

// appendAuthority appends host and, unless it is nil or scheme's default,
// ":port".
func appendAuthority(dst, host, port, scheme []byte) []byte {
	dst = append(dst, host...)
	if port != nil && !isDefaultPort(port, scheme) {
		dst = append(dst, ':')
		dst = append(dst, port...)
	}
	return dst
}

// checkHost validates a host name or bracketed IPv6 literal from the
// configuration: no port, no path, no spaces.
func checkHost(h string) string {
	if h == "" {
		return "must not be empty"
	}
	if h[0] == '[' {
		if h[len(h)-1] != ']' || len(h) < 3 {
			return "an IPv6 literal must be enclosed in brackets, for example [::1]"
		}
		for i := 1; i < len(h)-1; i++ {
			c := h[i]
			if !(c == ':' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return "invalid IPv6 literal " + strconv.Quote(h)
			}
		}
		return ""
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c == ':':
			return "must be a host name without a port (use port, or full for host:port)"
		case c == '/' || c == '?' || c == '#' || c == '@' || c == '\\' || c <= ' ' || c >= 0x7f:
			return "invalid host name " + strconv.Quote(h)
		}
	}
	return ""
}

// checkHostPort validates "host[:port]" from the configuration.
func checkHostPort(a string) string {
	const form = "must be host or host:port (an IPv6 literal in brackets, for example [::1]:8080)"
	if a != "" && a[0] != '[' && strings.Count(a, ":") > 1 {
		return form
	}
	host, port, ok := splitAuthority([]byte(a))
	if !ok {
		return form
	}
	if msg := checkHost(string(host)); msg != "" {
		return msg
	}
	if port != nil {
		if _, ok := parsePort(port); !ok {
			return "port must be a number between 1 and 65535"
		}
	}
	return ""
}
