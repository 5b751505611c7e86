// Package hexdigit owns the hexadecimal digits the gateway's parsers read:
// percent-encoding (RFC 3986 2.1) in paths, query names and CEL's URL
// functions, and JSON's \u escapes. One copy, so that every parser agrees
// on what a hex digit is.
package hexdigit

// Is reports whether c is a hexadecimal digit, in either case.
func Is(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Value is the value of the hexadecimal digit c (Is(c) must hold).
func Value(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
