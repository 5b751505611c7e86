package config

import (
	"errors"
	"strings"
)

// CheckHostname accepts a hostname pattern: "*", a DNS name, or "*."
// followed by a DNS name (upper case is accepted, and a final dot, which
// names the same host). The router compiles hostnames with the same check,
// so a file that validates always loads.
func CheckHostname(pattern string) error {
	if pattern == "*" {
		return nil
	}
	return checkDNSName(strings.TrimSuffix(strings.TrimPrefix(pattern, "*."), "."))
}

// checkDNSName accepts dot-separated labels of letters, digits, inner
// hyphens and underscores (internal names such as my_host.local use them),
// each at most 63 bytes, at most 253 bytes in all.
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
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return errors.New("'*' is only allowed as the whole first label (\"*.example.com\")")
				}
				return errors.New("invalid character in label")
			}
		}
	}
	return nil
}
