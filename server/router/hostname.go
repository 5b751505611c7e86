package router

import (
	"errors"
	"strings"
)

// MatchHostname reports whether host (without a port) is served by the
// route hostname pattern. "*" matches every host; "*.example.com" matches
// "a.example.com" and "a.b.example.com" but not "example.com"; anything
// else must equal host. Both sides compare case-insensitively.
func MatchHostname(pattern string, host []byte) bool {
	if pattern == "*" {
		return true
	}
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		// At least one byte, then ".", then the suffix.
		if len(host) < len(suffix)+2 {
			return false
		}
		at := len(host) - len(suffix)
		return host[at-1] == '.' && equalFoldASCII(host[at:], suffix)
	}
	return equalFoldASCII(host, pattern)
}

// equalFoldASCII compares b and s ignoring ASCII case, without allocating.
func equalFoldASCII(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if lowerASCII(b[i]) != lowerASCII(s[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// hostnameKind classifies a validated, lower-cased hostname pattern.
type hostnameKind uint8

const (
	hostExact hostnameKind = iota
	hostWildcard
	hostAny
)

// parseHostname validates pattern as a Gateway API hostname ("*", a DNS
// name, or "*." followed by a DNS name; upper case is accepted) and returns
// its kind and its lower-cased key: the name itself, or the suffix after
// "*." for wildcards.
func parseHostname(pattern string) (hostnameKind, string, error) {
	if pattern == "*" {
		return hostAny, "", nil
	}
	kind, name := hostExact, pattern
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		kind, name = hostWildcard, rest
	}
	if err := checkDNSName(name); err != nil {
		return 0, "", err
	}
	return kind, strings.ToLower(name), nil
}

// checkDNSName accepts dot-separated labels of letters, digits and inner
// hyphens, each at most 63 bytes, at most 253 bytes in all.
func checkDNSName(name string) error {
	switch {
	case name == "":
		return errors.New("empty hostname")
	case len(name) > 253:
		return errors.New("hostname longer than 253 bytes")
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return errors.New("empty label")
		}
		if len(label) > 63 {
			return errors.New("label longer than 63 bytes")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return errors.New("label starts or ends with '-'")
		}
		for i := range len(label) {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
				if c == '*' {
					return errors.New("'*' is only allowed as the whole first label")
				}
				return errors.New("invalid character in label")
			}
		}
	}
	return nil
}
