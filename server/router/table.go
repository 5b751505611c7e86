package router

import (
	"fmt"
	"slices"

	"github.com/valyala/fasthttp"
)

// Table is the immutable route table of one listener. It is safe for
// concurrent use.
type Table struct {
	exactHosts map[string]*bucket // by lower-case hostname
	wildHosts  map[string]*bucket // by the suffix after "*."
	anyHost    *bucket            // hostname "*"
	noHost     *bucket            // routes without hostnames
	routes     int
}

// bucket holds the rules of the routes that share one hostname pattern.
type bucket struct {
	exact  map[string][]step // by exact path
	prefix *prefixNode       // nil when there are no prefix rules
	regex  []step

	rules []*rule // build only
}

// New compiles routes into a Table. It reports the first invalid hostname,
// path, method, header or query condition, naming the route and match.
func New(routes []Route) (*Table, error) {
	return build(routes, minDispatchRun)
}

// build is New with the shortest run folded into a dispatch as a
// parameter, so tests can exercise dispatches on small tables.
func build(routes []Route, minRun int) (*Table, error) {
	t := &Table{routes: len(routes)}
	res := anchoredCache{}
	for ri := range routes {
		rt := &routes[ri]
		matches := rt.Matches
		if len(matches) == 0 {
			matches = []Match{{PathKind: PathPrefix, Path: "/"}}
		}
		rules := make([]*rule, 0, len(matches))
		for mi := range matches {
			r, err := compileRule(&matches[mi], ri, mi, rt.Value, res)
			if err != nil {
				return nil, &RouteError{Route: ri, Field: "matches", Index: mi, Err: err}
			}
			rules = append(rules, r)
		}
		if len(rt.Hostnames) == 0 {
			t.noHost = addRules(t.noHost, rules)
			continue
		}
		seen := make(map[*bucket]bool, len(rt.Hostnames))
		for hi, h := range rt.Hostnames {
			kind, key, err := parseHostname(h)
			if err != nil {
				return nil, &RouteError{Route: ri, Field: "hostnames", Index: hi, Err: fmt.Errorf("hostname %q: %w", h, err)}
			}
			var b *bucket
			switch kind {
			case hostAny:
				t.anyHost = orNew(t.anyHost)
				b = t.anyHost
			case hostWildcard:
				b = lookupOrAdd(&t.wildHosts, key)
			default:
				b = lookupOrAdd(&t.exactHosts, key)
			}
			if !seen[b] { // "a.com" and "A.com" name one bucket
				seen[b] = true
				addRules(b, rules)
			}
		}
	}
	for _, b := range t.exactHosts {
		b.finish(minRun)
	}
	for _, b := range t.wildHosts {
		b.finish(minRun)
	}
	if t.anyHost != nil {
		t.anyHost.finish(minRun)
	}
	if t.noHost != nil {
		t.noHost.finish(minRun)
	}
	return t, nil
}

func orNew(b *bucket) *bucket {
	if b == nil {
		b = &bucket{}
	}
	return b
}

func lookupOrAdd(m *map[string]*bucket, key string) *bucket {
	if *m == nil {
		*m = make(map[string]*bucket)
	}
	b := (*m)[key]
	if b == nil {
		b = &bucket{}
		(*m)[key] = b
	}
	return b
}

func addRules(b *bucket, rules []*rule) *bucket {
	b = orNew(b)
	b.rules = append(b.rules, rules...)
	return b
}

// finish sorts the bucket's rules by precedence and builds its indexes.
func (b *bucket) finish(minRun int) {
	slices.SortFunc(b.rules, compareRules)
	exact := make(map[string][]*rule)
	pos := make(map[*rule]int)
	var regex []*rule
	for i, r := range b.rules {
		switch r.kind {
		case PathExact:
			exact[r.path] = append(exact[r.path], r)
		case PathPrefix:
			if b.prefix == nil {
				b.prefix = &prefixNode{}
			}
			b.prefix.insert(r)
			pos[r] = i
		default:
			regex = append(regex, r)
		}
	}
	if len(exact) > 0 {
		b.exact = make(map[string][]step, len(exact))
		for p, rs := range exact {
			b.exact[p] = buildSteps(rs, minRun)
		}
	}
	if b.prefix != nil {
		b.prefix.finish(nil, nil, pos, minRun)
	}
	b.regex = buildSteps(regex, minRun)
	b.rules = nil
}

// find returns the first rule of the bucket matching the request.
func (b *bucket) find(req *fasthttp.Request, path []byte) *rule {
	if b.exact != nil {
		if steps, ok := b.exact[string(path)]; ok {
			if r := firstMatch(steps, req, path); r != nil {
				return r
			}
		}
	}
	if b.prefix != nil {
		for n := b.prefix.deepest(path); n != nil; n = n.next {
			if r := firstMatch(n.steps, req, path); r != nil {
				return r
			}
		}
	}
	return firstMatch(b.regex, req, path)
}

// Match returns the Value of the route that serves the request, and false
// when no route does. host is the request host without its port, in lower
// case; path is the raw request path without the query. Method, headers and
// query parameters are read from req, which may be nil when no route has
// such conditions. Match does not allocate.
func (t *Table) Match(req *fasthttp.Request, host, path []byte) (value any, ok bool) {
	if t == nil {
		return nil, false
	}
	if t.exactHosts != nil {
		if b := t.exactHosts[string(host)]; b != nil {
			if r := b.find(req, path); r != nil {
				return r.value, true
			}
		}
	}
	if t.wildHosts != nil {
		// Suffixes after each dot, longest first; the dot must not be the
		// first byte, so that "*.example.com" needs a non-empty label.
		for i := 1; i < len(host); i++ {
			if host[i] != '.' {
				continue
			}
			if b := t.wildHosts[string(host[i+1:])]; b != nil {
				if r := b.find(req, path); r != nil {
					return r.value, true
				}
			}
		}
	}
	if t.anyHost != nil {
		if r := t.anyHost.find(req, path); r != nil {
			return r.value, true
		}
	}
	if t.noHost != nil {
		if r := t.noHost.find(req, path); r != nil {
			return r.value, true
		}
	}
	return nil, false
}

// Len returns the number of routes the table was built from.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return t.routes
}

// RouteError is a route New refused: the item Index of the route's Field
// ("matches" or "hostnames") of routes[Route].
type RouteError struct {
	Route int
	Field string
	Index int
	Err   error
}

func (e *RouteError) Error() string {
	return fmt.Sprintf("router: route %d %s[%d]: %v", e.Route, e.Field, e.Index, e.Err)
}

func (e *RouteError) Unwrap() error { return e.Err }
