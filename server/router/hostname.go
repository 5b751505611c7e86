package router

import (
	"strings"

	"github.com/relaygate/gateway/config"
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
	if err := config.CheckHostname(pattern); err != nil {
		return 0, "", err
	}
	kind, name := hostExact, strings.TrimSuffix(pattern, ".")
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		kind, name = hostWildcard, rest
	}
	return kind, strings.ToLower(name), nil
}
