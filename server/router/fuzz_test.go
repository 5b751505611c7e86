package router

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// fuzzInput turns fuzz bytes into choices; it yields zeros once exhausted.
type fuzzInput struct{ b []byte }

func (f *fuzzInput) next() int {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return int(c)
}

// raw returns up to 7 fuzz bytes as a string.
func (f *fuzzInput) raw() string {
	n := min(f.next()%8, len(f.b))
	s := string(f.b[:n])
	f.b = f.b[n:]
	return s
}

// pick returns one of options, or now and then raw bytes prefixed with
// rawPrefix (which often make New fail, so they are kept rare).
func (f *fuzzInput) pick(rawPrefix string, options ...string) string {
	i := f.next()
	if i >= 244 {
		return rawPrefix + f.raw()
	}
	return options[i%len(options)]
}

var (
	fuzzHostPatterns = []string{"a.example.com", "*.example.com", "*.a.example.com", "example.com", "*", "*.com", "A.Example.com", "other.org"}
	fuzzPrefixes     = []string{"", "/", "//", "/a", "/a/", "/a//", "/a///", "/a/b", "/a/b/", "/ab", "/a//b", "/%2F", "/a/b/c"}
	fuzzExacts       = []string{"/", "/a", "/a/", "/a/b", "/ab", "/a%2Fb", "/a//b"}
	fuzzRegexes      = []string{"/a.*", "/.*", "/[ab]+", "/a|/ab", ".*", "/a/b", "(/a)+", "(?i)/A.*"}
	fuzzMethods      = []string{"", "", "GET", "POST"}
	fuzzHeaderNames  = []string{"x-a", "X-A", "x-b", ":method", ":Path", ":authority", ":scheme"}
	fuzzQueryNames   = []string{"q", "Q", "r"}
	fuzzValues       = []string{"1", "2", "12", ""}
	fuzzValueRegexes = []string{"[12]", "1|12", ".*", "2?"}
	fuzzHosts        = []string{"a.example.com", "b.a.example.com", "example.com", "x.com", "other.org", ".example.com", "", "a..example.com"}
	fuzzPaths        = []string{"/", "/a", "/a/", "/a//", "/a/b", "/a/b/c", "/ab", "/a//b", "a", "", "/a%2Fb", "/%2F", "*", "//"}
)

func (f *fuzzInput) valueMatch() ValueMatch {
	if f.next()%2 == 0 {
		return ValueMatch{Exact: f.pick("", fuzzValues...)}
	}
	re, err := regexp.Compile(f.pick("", fuzzValueRegexes...))
	if err != nil {
		return ValueMatch{Exact: "1"}
	}
	return ValueMatch{Regex: re}
}

func (f *fuzzInput) match() Match {
	var m Match
	switch f.next() % 3 {
	case 0:
		m.PathKind, m.Path = PathPrefix, f.pick("/", fuzzPrefixes...)
	case 1:
		m.PathKind, m.Path = PathExact, f.pick("/", fuzzExacts...)
	default:
		m.PathKind = PathRegex
		src := f.pick("", fuzzRegexes...)
		if f.next()%2 == 0 {
			m.Path = src // compiled by New; may be invalid
		} else if re, err := regexp.Compile(src); err == nil {
			m.PathRegex = re
		} else {
			m.Path = "/"
		}
	}
	m.Method = f.pick("", fuzzMethods...)
	for range f.next() % 3 {
		m.Headers = append(m.Headers, HeaderMatch{Name: f.pick("x-", fuzzHeaderNames...), Value: f.valueMatch()})
	}
	for range f.next() % 3 {
		m.Query = append(m.Query, QueryMatch{Name: f.pick("", fuzzQueryNames...), Value: f.valueMatch()})
	}
	return m
}

func (f *fuzzInput) routes() []Route {
	routes := make([]Route, 1+f.next()%8)
	for i := range routes {
		r := &routes[i]
		r.Value = i
		for range f.next() % 3 {
			r.Hostnames = append(r.Hostnames, f.pick("", fuzzHostPatterns...))
		}
		for range f.next() % 4 {
			r.Matches = append(r.Matches, f.match())
		}
	}
	return routes
}

func (f *fuzzInput) request() request {
	r := request{
		method: []string{"GET", "POST", "get"}[f.next()%3],
		host:   asciiLower(f.pick("", fuzzHosts...)),
		path:   f.pick("/", fuzzPaths...),
	}
	for range f.next() % 4 {
		r.headers = append(r.headers, []string{"X-A", "x-a", "X-B"}[f.next()%3], fuzzValues[f.next()%len(fuzzValues)])
	}
	var q []string
	for range f.next() % 4 {
		p := fuzzQueryNames[f.next()%len(fuzzQueryNames)]
		if v := f.next() % (len(fuzzValues) + 1); v < len(fuzzValues) {
			p += "=" + fuzzValues[v]
		}
		q = append(q, p)
	}
	r.query = strings.Join(q, "&")
	return r
}

// checkAgainstReference builds routes and a request from data and fails
// when the Table and referenceMatch disagree.
func checkAgainstReference(t *testing.T, data []byte) {
	f := &fuzzInput{b: data}
	minRun := 1 + f.next()%minDispatchRun
	routes := f.routes()
	rq := f.request()
	tbl, err := New(routes)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "router: ") {
			t.Fatalf("error without package prefix: %v", err)
		}
		return
	}
	req := rq.build(t)
	// The same routes with dispatches on every short run must agree too.
	small, err := build(routes, minRun)
	if err != nil {
		t.Fatalf("build(minRun=%d) failed where New did not: %v", minRun, err)
	}
	host, path := []byte(rq.host), []byte(rq.path)
	wantV, wantOK := referenceMatch(routes, req, host, path)
	gotV, gotOK := tbl.Match(req, host, path)
	if gotV != wantV || gotOK != wantOK {
		t.Fatalf("Table.Match = %v, %v; reference = %v, %v\nrequest: %+v\nroutes:\n%s",
			gotV, gotOK, wantV, wantOK, rq, describeRoutes(routes))
	}
	gotV, gotOK = small.Match(req, host, path)
	if gotV != wantV || gotOK != wantOK {
		t.Fatalf("minRun=%d: Table.Match = %v, %v; reference = %v, %v\nrequest: %+v\nroutes:\n%s",
			minRun, gotV, gotOK, wantV, wantOK, rq, describeRoutes(routes))
	}
	gotV, gotOK = tbl.Match(nil, host, path)
	wantV, wantOK = referenceMatch(routes, nil, host, path)
	if gotV != wantV || gotOK != wantOK {
		t.Fatalf("nil request: Table.Match = %v, %v; reference = %v, %v\nrequest: %+v\nroutes:\n%s",
			gotV, gotOK, wantV, wantOK, rq, describeRoutes(routes))
	}
}

func describeRoutes(routes []Route) string {
	var sb strings.Builder
	for i, r := range routes {
		fmt.Fprintf(&sb, "  %d hosts=%q\n", i, r.Hostnames)
		for _, m := range r.Matches {
			re := ""
			if m.PathRegex != nil {
				re = m.PathRegex.String()
			}
			fmt.Fprintf(&sb, "    %s path=%q re=%q method=%q", m.PathKind, m.Path, re, m.Method)
			for _, h := range m.Headers {
				fmt.Fprintf(&sb, " h[%s]=%s", h.Name, describeValue(h.Value))
			}
			for _, q := range m.Query {
				fmt.Fprintf(&sb, " q[%s]=%s", q.Name, describeValue(q.Value))
			}
			sb.WriteString("\n")
		}
	}
	return sb.String()
}

func describeValue(v ValueMatch) string {
	if v.Regex != nil {
		return "~" + v.Regex.String()
	}
	return fmt.Sprintf("%q", v.Exact)
}

func FuzzMatch(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 0, 1, 0, 1, 3, 0, 0, 2, 1, 1, 1, 0, 0, 1, 2, 5, 3})
	f.Add([]byte("\x07\x02\x01\x01\x02\x04\x00\x05\x02\x00\x01\x02\x02\x01\x00\x03\x01"))
	f.Add([]byte("\x05\x01\xff\x06a.b.cd\x02\x00\x0d\x05/x/y/\x01\x02\x01\x01\x02"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstReference(t, data)
	})
}

// TestMatchAgreesWithReference runs the fuzz check on many seeded random
// inputs, so plain `go test` compares the Table with the reference broadly.
func TestMatchAgreesWithReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for i := range n {
		data := make([]byte, 16+rng.IntN(112))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkAgainstReference(t, data)
		})
		if t.Failed() {
			return
		}
	}
}
