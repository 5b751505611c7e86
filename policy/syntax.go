package policy

// HTTP syntax checks (RFC 9110) used when compiling policies and, for values
// echoed back to clients, on the request path.

// validToken reports whether b is a token: a header name or a method.
func validToken(b string) bool {
	if b == "" {
		return false
	}
	for i := 0; i < len(b); i++ {
		if !tokenByte(b[i]) {
			return false
		}
	}
	return true
}

func tokenByte(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// validFieldValue reports whether b may be sent as a header value: visible
// ASCII, space and tab, and nothing that could end the header line.
func validFieldValue[T string | []byte](b T) bool {
	for i := 0; i < len(b); i++ {
		c := b[i]
		if (c < 0x20 && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// lowerASCII returns c lower-cased when it is an ASCII capital.
func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// equalFoldASCII compares a and b ignoring ASCII case, without allocating.
func equalFoldASCII[A, B string | []byte](a A, b B) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

// ValidHeaderName reports whether name can be a header field name (a
// token), for values computed per request.
func ValidHeaderName(name string) bool { return validToken(name) }

// ValidHeaderValue reports whether value can travel as a header field
// value: visible ASCII, spaces and tabs.
func ValidHeaderValue(value string) bool { return validFieldValue(value) }

// ValidHeader reports whether a header field (name and value) can travel
// as it is, for headers an external service or an expression supplies.
func ValidHeader(name, value string) bool { return validToken(name) && validFieldValue(value) }

// FramingHeader reports whether name is Content-Length or
// Transfer-Encoding, which the gateway writes from the body it sends. No
// external service may set or remove them: framing that disagreed with the
// body would make a message its peer reads wrong, or one the gateway cannot
// send.
func FramingHeader(name string) bool {
	return equalFoldASCII(name, "content-length") || equalFoldASCII(name, "transfer-encoding")
}

// HopHeader reports whether name is a hop-by-hop field (RFC 9110 7.6.1),
// whatever its case: Connection, and Proxy-Connection, Keep-Alive, TE,
// Upgrade, Proxy-Authenticate and Proxy-Authorization, which the gateway
// takes as this hop's alone.
func HopHeader(name string) bool {
	switch len(name) {
	case 2:
		return equalFoldASCII(name, "te")
	case 7:
		return equalFoldASCII(name, "upgrade")
	case 10:
		return equalFoldASCII(name, "connection") || equalFoldASCII(name, "keep-alive")
	case 16:
		return equalFoldASCII(name, "proxy-connection")
	case 18:
		return equalFoldASCII(name, "proxy-authenticate")
	case 19:
		return equalFoldASCII(name, "proxy-authorization")
	}
	return false
}

// ReservedHeader reports whether name is a field no external service
// (ext_authz, ext_proc, the rate limit service) may set or remove: the
// framing fields (FramingHeader) and the hop-by-hop ones (HopHeader), which
// belong to the gateway's connections, not to the message. A service's
// Connection: upgrade and Upgrade would otherwise ask the upstream to
// switch protocols on a request the client sent as a plain one.
func ReservedHeader(name string) bool { return FramingHeader(name) || HopHeader(name) }

// MaxServiceHeaderBytes bounds the header fields (names and values) one
// answer of an external service (ext_authz, ext_proc, the rate limit
// service) adds to a request or to a response: 32 KiB, the largest HTTP/1.1
// request head the gateway takes from a client (the server's h1HeadLimit),
// so that a request a service edited stays within the 64 KiB header list
// the gateway takes over HTTP/2. Unbounded, an outside probe's service
// sent a 3 MB header value upstream.
const MaxServiceHeaderBytes = 32 << 10

// HeaderBudget counts the header bytes one answer of an external service
// adds in one direction, against MaxServiceHeaderBytes. Its zero value is
// a whole budget.
type HeaderBudget struct{ used int }

// Take reports whether a field of name and value fits in what is left of
// the budget, and counts it when it does.
func (b *HeaderBudget) Take(name, value string) bool {
	n := len(name) + len(value)
	if n > MaxServiceHeaderBytes-b.used {
		return false
	}
	b.used += n
	return true
}

// ValidOriginForm reports whether target can be a request's target in
// origin form, as a policy or a service computes it: "/" then visible
// ASCII without space or "#" (a fragment is never sent), so that it cannot
// break the request line it is written into.
func ValidOriginForm(target string) bool {
	if target == "" || target[0] != '/' {
		return false
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// ValidAuthority reports whether a can be a request's Host: a host name,
// an IPv4 address or a bracketed IPv6 address, with an optional port; the
// characters of RFC 3986's authority without userinfo.
func ValidAuthority(a string) bool {
	if a == "" {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		default:
			switch c {
			case '-', '.', '_', '~', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '[', ']', '%':
			default:
				return false
			}
		}
	}
	return true
}
