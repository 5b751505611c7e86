package policy

import (
	"bytes"
	"errors"
	"strings"

	"github.com/relaygate/gateway/codec/hexdigit"
)

// Request path normalization (frontendPolicies.http.pathNormalization,
// default normalize), as Envoy's normalize_path with merge_slashes and
// path_with_escaped_slashes_action REJECT_REQUEST does it: a path is
// matched, rewritten and forwarded in one canonical form, so that an
// upstream resolving "/raw/../admin" itself cannot be handed, through a
// route for /raw, a request for /admin that the /admin route's rules never
// saw. RFC 3986 6.2.2 order: each segment's escapes are normalized first
// (unreserved characters decoded, hex digits upper-cased), then repeated
// slashes merged and dot segments removed (5.2.4), a "." or ".." that was
// encoded included. Refused, as an upstream could read them as a separator
// the gateway did not see: an encoded "/" or "\", a literal "\" (which
// browsers and some servers treat as "/"; no client of ours sends one, as
// RFC 3986 does not allow it in a path), and a "%" that does not start a
// two-hex-digit escape (one could build an escape out of decoded bytes:
// "%%32%65" would become "%2e"). The query is not touched.
//
// The server normalizes each request's path before routing (begin); a
// path a policy computes from the request (a transformation's :path)
// is normalized the same way (NormalizeTarget).

var (
	errPathEncodedSlash = errors.New("invalid request path: encoded slash or backslash")
	errPathBackslash    = errors.New("invalid request path: backslash")
	errPathBadEscape    = errors.New("invalid request path: malformed percent-encoding")
)

// PathNeedsNormalizing reports whether AppendNormalizedPath would change or
// refuse p: a path holding no "\", no "//", no "." or ".." segment and only
// escapes already in normal form needs nothing. One pass, no allocation;
// ordinary paths end here.
func PathNeedsNormalizing(p []byte) bool {
	if len(p) == 0 || p[0] != '/' {
		return true
	}
	for i := 0; i < len(p); i++ {
		if !pathSpecial[p[i]] {
			continue
		}
		switch p[i] {
		case '\\':
			return true
		case '%':
			if i+2 >= len(p) || !hexUpper[p[i+1]] || !hexUpper[p[i+2]] {
				return true
			}
			if v := hexdigit.Value(p[i+1])<<4 | hexdigit.Value(p[i+2]); unreserved[v] || v == '/' || v == '\\' {
				return true
			}
			i += 2
		case '/':
			if i+1 == len(p) {
				break
			}
			switch p[i+1] {
			case '/':
				return true
			case '.':
				rest := p[i+2:]
				if len(rest) == 0 || rest[0] == '/' || rest[0] == '.' && (len(rest) == 1 || rest[1] == '/') {
					return true
				}
			}
		}
	}
	return false
}

// AppendNormalizedPath appends the normal form of the path p to dst: it
// starts with "/", holds no empty, "." or ".." segment but for a final
// empty one (a path ending in "/", "/." or "/.." ends in "/"), and its
// escapes are upper-case and encode no unreserved character. A path not
// starting with "/" is read as if it did. The error says why p is refused
// (dst is then returned as it came).
func AppendNormalizedPath(dst, p []byte) ([]byte, error) {
	base := len(dst)
	i := 0
	for i < len(p) || len(dst) == base {
		for i < len(p) && p[i] == '/' {
			i++
		}
		seg := len(dst) // where this segment's "/" goes
		dst = append(dst, '/')
		for i < len(p) && p[i] != '/' {
			c := p[i]
			switch c {
			case '\\':
				return dst[:base], errPathBackslash
			case '%':
				if i+2 >= len(p) || !hexdigit.Is(p[i+1]) || !hexdigit.Is(p[i+2]) {
					return dst[:base], errPathBadEscape
				}
				hi, lo := hexdigit.Value(p[i+1]), hexdigit.Value(p[i+2])
				switch v := hi<<4 | lo; {
				case v == '/' || v == '\\':
					return dst[:base], errPathEncodedSlash
				case unreserved[v]:
					dst = append(dst, v)
				default:
					dst = append(dst, '%', upperHex[hi], upperHex[lo])
				}
				i += 3
				continue
			}
			dst = append(dst, c)
			i++
		}
		switch s := dst[seg+1:]; {
		case len(s) == 1 && s[0] == '.':
			dst = dst[:seg]
		case len(s) == 2 && s[0] == '.' && s[1] == '.':
			dst = dst[:seg]
			if j := bytes.LastIndexByte(dst[base:], '/'); j >= 0 {
				dst = dst[:base+j]
			}
		default:
			continue
		}
		// A dot segment went; at the end of the path, the path ends in "/".
		if i == len(p) {
			dst = append(dst, '/')
		}
	}
	return dst, nil
}

// pathSpecial marks the bytes PathNeedsNormalizing looks at.
var pathSpecial = [256]bool{'/': true, '%': true, '\\': true}

// unreserved marks RFC 3986's unreserved characters: ALPHA DIGIT - . _ ~.
var unreserved = func() (t [256]bool) {
	for _, c := range []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~") {
		t[c] = true
	}
	return t
}()

// hexUpper marks the hex digits of an escape in normal form.
var hexUpper = func() (t [256]bool) {
	for _, c := range []byte("0123456789ABCDEF") {
		t[c] = true
	}
	return t
}()

const upperHex = "0123456789ABCDEF"

// NormalizeTarget returns the origin-form target ("/path?query") with its
// path in normal form (AppendNormalizedPath) and its query as it is, or
// false when normalizing refuses the path. A target already in normal form
// is returned as it is.
func NormalizeTarget(target string) (string, bool) {
	path, query := target, ""
	if i := strings.IndexByte(target, '?'); i >= 0 {
		path, query = target[:i], target[i:]
	}
	if !PathNeedsNormalizing([]byte(path)) {
		return target, true
	}
	b, err := AppendNormalizedPath(make([]byte, 0, len(target)), []byte(path))
	if err != nil {
		return "", false
	}
	return string(append(b, query...)), true
}
