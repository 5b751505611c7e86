package router

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// referenceMatch is the slow, obviously-correct matcher the Table must agree
// with: it lists every (hostname bucket, route, match) triple that applies
// to the host, sorts them by precedence and returns the first whose
// conditions hold. Request values are read with the same fasthttp accessors
// as the Table (Peek, QueryArgs): what is checked here is the algorithm.
func referenceMatch(routes []Route, req *fasthttp.Request, host, path []byte) (any, bool) {
	type candidate struct {
		hostClass int // 0 exact, 1 wildcard, 2 "*", 3 no hostnames
		suffix    int // wildcard suffix length
		m         Match
		route     int
		match     int
	}
	var cands []candidate
	for ri, rt := range routes {
		matches := rt.Matches
		if len(matches) == 0 {
			matches = []Match{{}}
		}
		var classes [][2]int
		if len(rt.Hostnames) == 0 {
			classes = append(classes, [2]int{3, 0})
		}
		for _, h := range rt.Hostnames {
			if !refHostMatches(h, string(host)) {
				continue
			}
			switch {
			case h == "*":
				classes = append(classes, [2]int{2, 0})
			case strings.HasPrefix(h, "*."):
				classes = append(classes, [2]int{1, len(h) - 2})
			default:
				classes = append(classes, [2]int{0, 0})
			}
		}
		for _, c := range classes {
			for mi, m := range matches {
				cands = append(cands, candidate{hostClass: c[0], suffix: c[1], m: m, route: ri, match: mi})
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		return cmp.Or(
			cmp.Compare(a.hostClass, b.hostClass),
			cmp.Compare(b.suffix, a.suffix),
			cmp.Compare(refRank(b.m), refRank(a.m)),
			cmp.Compare(refPathLen(b.m), refPathLen(a.m)),
			cmp.Compare(boolInt(b.m.Method != ""), boolInt(a.m.Method != "")),
			cmp.Compare(len(refHeaders(b.m)), len(refHeaders(a.m))),
			cmp.Compare(len(refQuery(b.m)), len(refQuery(a.m))),
			cmp.Compare(a.route, b.route),
			cmp.Compare(a.match, b.match),
		)
	})
	for _, c := range cands {
		if refMatches(c.m, req, path) {
			return routes[c.route].Value, true
		}
	}
	return nil, false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func refHostMatches(pattern, host string) bool {
	pattern, host = asciiLower(pattern), asciiLower(host)
	if pattern == "*" {
		return true
	}
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		label, ok := strings.CutSuffix(host, "."+suffix)
		return ok && label != ""
	}
	return pattern == host
}

// asciiLower lowers ASCII letters only, as hostnames are compared.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func refRank(m Match) int {
	return map[PathKind]int{PathExact: 3, PathPrefix: 2, PathRegex: 1}[m.PathKind]
}

func refPathLen(m Match) int {
	switch {
	case m.PathKind == PathRegex && m.PathRegex != nil:
		return len(m.PathRegex.String())
	case m.PathKind == PathPrefix && m.Path == "":
		return 1
	}
	return len(m.Path)
}

// refHeaders keeps the first condition of each header name (any case).
func refHeaders(m Match) []HeaderMatch {
	var out []HeaderMatch
	for _, h := range m.Headers {
		if !slices.ContainsFunc(out, func(o HeaderMatch) bool { return strings.EqualFold(o.Name, h.Name) }) {
			out = append(out, h)
		}
	}
	return out
}

// refQuery keeps the first condition of each query name.
func refQuery(m Match) []QueryMatch {
	var out []QueryMatch
	for _, q := range m.Query {
		if !slices.ContainsFunc(out, func(o QueryMatch) bool { return o.Name == q.Name }) {
			out = append(out, q)
		}
	}
	return out
}

func refMatches(m Match, req *fasthttp.Request, path []byte) bool {
	switch m.PathKind {
	case PathExact:
		if string(path) != m.Path {
			return false
		}
	case PathPrefix:
		p := m.Path
		if p == "" {
			p = "/"
		}
		// agentgateway's formulation: strip the trimmed prefix from the
		// trimmed path; what is left must be empty or start a segment.
		rest, ok := strings.CutPrefix(strings.TrimRight(string(path), "/"), strings.TrimRight(p, "/"))
		if !ok || rest != "" && rest[0] != '/' {
			return false
		}
	case PathRegex:
		re := m.PathRegex
		if re == nil {
			re = regexp.MustCompile(m.Path)
		}
		if !refFullMatch(re, path) {
			return false
		}
	}
	if m.Method == "" && len(m.Headers) == 0 && len(m.Query) == 0 {
		return true
	}
	if req == nil {
		return false
	}
	if m.Method != "" && string(req.Header.Method()) != m.Method {
		return false
	}
	for _, h := range refHeaders(m) {
		var v []byte
		switch strings.ToLower(h.Name) {
		case ":method":
			v = req.Header.Method()
		case ":scheme":
			v = []byte("http")
		case ":authority":
			v = req.Header.Host()
		case ":path":
			v = req.RequestURI()
		default:
			v = req.Header.Peek(h.Name)
		}
		if v == nil || !refValueMatches(h.Value, v) {
			return false
		}
	}
	args := req.URI().QueryArgs()
	for _, q := range refQuery(m) {
		if !args.Has(q.Name) || !refValueMatches(q.Value, args.Peek(q.Name)) {
			return false
		}
	}
	return true
}

func refValueMatches(vm ValueMatch, v []byte) bool {
	if vm.Regex != nil {
		return refFullMatch(vm.Regex, v)
	}
	return string(v) == vm.Exact
}

// refFullMatch: the leftmost-longest match of a pattern spans the whole
// input exactly when the input is in the pattern's language.
func refFullMatch(re *regexp.Regexp, b []byte) bool {
	longest := regexp.MustCompile(re.String())
	longest.Longest()
	loc := longest.FindIndex(b)
	return loc != nil && loc[0] == 0 && loc[1] == len(b)
}
