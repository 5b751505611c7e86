package router

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/valyala/fasthttp"
)

// rule is one compiled (route, match) pair: what Table.Match tests.
type rule struct {
	value any

	// Precedence keys, see compareRules.
	kind    PathKind
	pathLen int // raw prefix or exact path length, or regex source length
	route   int
	match   int

	path    string         // exact path, or the raw prefix
	pathRe  *regexp.Regexp // anchored; PathRegex only
	method  string         // "" for any
	headers []valueCond
	query   []valueCond
	plain   bool // no method, header or query condition
}

// valueCond is a compiled header or query condition.
type valueCond struct {
	name  string         // canonical header name, or the query name
	key   []byte         // name as bytes, for fasthttp's PeekCanonical
	exact string         // when re is nil
	re    *regexp.Regexp // anchored
	// pseudo names the request pseudo-header a header condition is on, or
	// is notPseudo.
	pseudo pseudoHeader
}

// pseudoHeader is a request pseudo-header a header match may name.
type pseudoHeader uint8

const (
	notPseudo pseudoHeader = iota
	pseudoMethod
	pseudoScheme
	pseudoAuthority
	pseudoPath
)

// pseudoHeaders maps the names, lower case, to their pseudo-headers.
var pseudoHeaders = map[string]pseudoHeader{
	":method": pseudoMethod, ":scheme": pseudoScheme, ":authority": pseudoAuthority, ":path": pseudoPath,
}

// pseudoValue is the value of a request pseudo-header in an HTTP/1.1
// request.
func pseudoValue(req *fasthttp.Request, p pseudoHeader) []byte {
	switch p {
	case pseudoMethod:
		return req.Header.Method()
	case pseudoScheme:
		return req.URI().Scheme()
	case pseudoAuthority:
		return req.Header.Host()
	default:
		return req.Header.RequestURI()
	}
}

func (c *valueCond) matches(v []byte) bool {
	if c.re != nil {
		return c.re.Match(v)
	}
	return string(v) == c.exact
}

// matches tests everything but the path prefix / exact path, which the
// table's index already established. Regex paths are tested here.
func (r *rule) matches(req *fasthttp.Request, path []byte) bool {
	if r.pathRe != nil && !r.pathRe.Match(path) {
		return false
	}
	if r.plain {
		return true
	}
	if req == nil {
		return false
	}
	if r.method != "" && string(req.Header.Method()) != r.method {
		return false
	}
	for i := range r.headers {
		c := &r.headers[i]
		// For a canonical name PeekCanonical finds what Peek would (Peek
		// normalizes the name to itself) without copying it first. The
		// first value of a repeated header is returned.
		var v []byte
		if c.pseudo != notPseudo {
			v = pseudoValue(req, c.pseudo)
		} else {
			v = req.Header.PeekCanonical(c.key)
		}
		if v == nil || !c.matches(v) {
			return false
		}
	}
	if len(r.query) > 0 {
		args := req.URI().QueryArgs()
		for i := range r.query {
			c := &r.query[i]
			v := args.Peek(c.name)
			if v == nil && !args.Has(c.name) {
				return false
			}
			if !c.matches(v) {
				return false
			}
		}
	}
	return true
}

// compileRule validates m and builds its rule. re caches anchored regexes by
// source so a pattern shared by many matches is compiled once.
func compileRule(m *Match, route, index int, value any, re anchoredCache) (*rule, error) {
	r := &rule{value: value, kind: m.PathKind, route: route, match: index, method: m.Method}
	switch m.PathKind {
	case PathPrefix, PathExact:
		if m.PathRegex != nil {
			return nil, fmt.Errorf("%s path with a PathRegex set", m.PathKind)
		}
		r.path = m.Path
		if r.path == "" && m.PathKind == PathPrefix {
			r.path = "/"
		}
		if !strings.HasPrefix(r.path, "/") {
			return nil, fmt.Errorf("%s path %q does not start with '/'", m.PathKind, m.Path)
		}
		r.pathLen = len(r.path)
	case PathRegex:
		src := m.Path
		if m.PathRegex != nil {
			src = m.PathRegex.String()
		} else if src == "" {
			return nil, errors.New("RegularExpression path without a pattern")
		}
		var err error
		if r.pathRe, err = re.get(src); err != nil {
			return nil, fmt.Errorf("path regex: %w", err)
		}
		r.pathLen = len(src)
	default:
		return nil, fmt.Errorf("unknown path kind %d", m.PathKind)
	}
	if m.Method != "" && !isToken(m.Method) {
		return nil, fmt.Errorf("method %q is not an HTTP token", m.Method)
	}
	for i := range m.Headers {
		h := &m.Headers[i]
		name := strings.ToLower(h.Name)
		pseudo := pseudoHeaders[name]
		switch {
		case pseudo != notPseudo:
		case isToken(h.Name):
			name = canonicalHeader(h.Name)
		default:
			return nil, fmt.Errorf("header name %q is not an HTTP token or a request pseudo-header (:method, :scheme, :authority, :path)", h.Name)
		}
		if hasCond(r.headers, name) {
			continue // Gateway API: only the first entry for a name counts.
		}
		c, err := compileCond(name, h.Value, re)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", h.Name, err)
		}
		c.pseudo = pseudo
		r.headers = append(r.headers, c)
	}
	for i := range m.Query {
		q := &m.Query[i]
		if q.Name == "" {
			return nil, errors.New("empty query parameter name")
		}
		if hasCond(r.query, q.Name) {
			continue
		}
		c, err := compileCond(q.Name, q.Value, re)
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", q.Name, err)
		}
		r.query = append(r.query, c)
	}
	r.plain = r.method == "" && len(r.headers) == 0 && len(r.query) == 0
	return r, nil
}

func compileCond(name string, v ValueMatch, re anchoredCache) (valueCond, error) {
	c := valueCond{name: name, key: []byte(name), exact: v.Exact}
	if v.Regex == nil {
		return c, nil
	}
	if v.Exact != "" {
		return c, errors.New("both Exact and Regex are set")
	}
	var err error
	c.re, err = re.get(v.Regex.String())
	return c, err
}

func hasCond(cs []valueCond, name string) bool {
	for i := range cs {
		if cs[i].name == name {
			return true
		}
	}
	return false
}

// anchoredCache compiles regexes so they must match the whole input.
type anchoredCache map[string]*regexp.Regexp

func (c anchoredCache) get(src string) (*regexp.Regexp, error) {
	if re, ok := c[src]; ok {
		return re, nil
	}
	// Compile the pattern alone first: only a valid pattern can be wrapped
	// without changing its meaning.
	if _, err := regexp.Compile(src); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(`\A(?:` + src + `)\z`)
	if err != nil {
		return nil, err
	}
	c[src] = re
	return re, nil
}

// canonicalHeader puts a header name (a valid token) in the form fasthttp
// stores parsed names in: upper case at the start and after each '-', lower
// case elsewhere, as fasthttp's normalizeHeaderKey does.
func canonicalHeader(name string) string {
	b := []byte(name)
	upper := true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
		upper = c == '-'
	}
	return string(b)
}

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
