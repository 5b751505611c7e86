package policy

import (
	"bytes"

	"github.com/relaygate/gateway/config"
)

// pathRewrite is the compiled `path` of a redirect or URL rewrite: keep the
// path, replace it (`full`), or replace the matched prefix (`prefix`).
type pathRewrite struct {
	kind  uint8
	value []byte
}

const (
	pathKeep uint8 = iota
	pathFull
	pathPrefix
)

func compilePathRewrite(field string, cfg *config.PathRewrite) (pathRewrite, error) {
	switch {
	case cfg == nil:
		return pathRewrite{}, nil
	case cfg.Full != nil:
		if err := checkRewritePath(field+".full", *cfg.Full); err != nil {
			return pathRewrite{}, err
		}
		return pathRewrite{kind: pathFull, value: []byte(*cfg.Full)}, nil
	case cfg.Prefix != nil:
		if err := checkRewritePath(field+".prefix", *cfg.Prefix); err != nil {
			return pathRewrite{}, err
		}
		return pathRewrite{kind: pathPrefix, value: []byte(*cfg.Prefix)}, nil
	}
	return pathRewrite{}, fieldErrorf(field, "exactly one of full, prefix is required")
}

func checkRewritePath(field, p string) error {
	if p == "" || p[0] != '/' {
		return fieldErrorf(field, "must start with \"/\"")
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c <= ' ' || c >= 0x7f || c == '?' || c == '#' {
			return fieldErrorf(field, "invalid path %q: no spaces, control bytes, non-ASCII bytes (percent-encode them), \"?\" or \"#\"", p)
		}
	}
	return nil
}

// appendPath appends the rewritten path. path is the request path as
// received; matched is the route's matched path prefix (nil when the route
// did not match by prefix). It fails, as agentgateway does, when a prefix
// rewrite meets a request that did not match by prefix or whose path does not
// continue the prefix on a segment boundary.
//
// Prefix replacement follows the Gateway API: the matched prefix is compared
// without its trailing "/", and exactly one "/" separates the replacement from
// the rest, so replacing "/foo" with "/" turns "/foo/bar" into "/bar" and
// "/foo" into "/", and replacing "/foo" with "/v1" turns "/foo/bar" into
// "/v1/bar".
func (r *pathRewrite) appendPath(dst, path, matched []byte) ([]byte, bool) {
	switch r.kind {
	case pathFull:
		return append(dst, r.value...), true
	case pathPrefix:
		if matched == nil {
			return dst, false
		}
		for len(matched) > 0 && matched[len(matched)-1] == '/' {
			matched = matched[:len(matched)-1]
		}
		if !bytes.HasPrefix(path, matched) {
			return dst, false
		}
		rest := path[len(matched):]
		if len(matched) > 0 && len(rest) > 0 && rest[0] != '/' {
			return dst, false
		}
		start := len(dst)
		dst = append(dst, r.value...)
		endsSlash := len(dst) > start && dst[len(dst)-1] == '/'
		switch {
		case !endsSlash && len(rest) > 0 && rest[0] != '/':
			dst = append(dst, '/')
		case endsSlash && len(rest) > 0 && rest[0] == '/':
			dst = dst[:len(dst)-1]
		}
		dst = append(dst, rest...)
		if len(dst) == start {
			dst = append(dst, '/')
		}
		return dst, true
	}
	if len(path) == 0 {
		return append(dst, '/'), true
	}
	return append(dst, path...), true
}

// appendQuery appends "?query" from a request target, when it has one.
func appendQuery(dst, requestURI []byte) []byte {
	i := bytes.IndexByte(requestURI, '?')
	if i < 0 {
		return dst
	}
	q := requestURI[i:]
	if j := bytes.IndexByte(q, '#'); j >= 0 {
		q = q[:j]
	}
	return append(dst, q...)
}
